"""Small datasets in their real on-disk formats (idx, .mat, STL binary, JPEG folders with
.mat / JSON / txt metadata), whose images say which sample they are."""
import gzip
import json
import os

import numpy as np
from image_data import SIZES, solid_colour
from PIL import Image
from scipy.io import savemat


def index_pixels(n, offset, height, width, channels):
    """(n, height, width, channels) uint8: image i is filled with i, spread over the bytes
    (grey: top half i // 256, bottom half i % 256; RGB: (i >> 16, i >> 8, i) & 255)."""
    index = np.arange(offset, offset + n)
    images = np.empty((n, height, width, channels), dtype=np.uint8)
    if channels == 1:
        images[:, :height // 2] = (index // 256)[:, None, None, None]
        images[:, height // 2:] = (index % 256)[:, None, None, None]
    else:
        rgb = np.stack([index >> 16, (index >> 8) & 255, index & 255], axis=1).astype(np.uint8)
        images[:] = rgb[:, None, None, :]
    return images


def read_index(pixels):
    """The index index_pixels wrote, from (B, H, W, C) uint8 pixels."""
    pixels = pixels.astype(np.int64)
    if pixels.shape[-1] == 1:
        return pixels[:, 0, 0, 0] * 256 + pixels[:, -1, 0, 0]
    centre = pixels[:, pixels.shape[1] // 2, pixels.shape[2] // 2]
    return (centre[:, 0] << 16) | (centre[:, 1] << 8) | centre[:, 2]


def write_idx(path, array, gz=False):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    header = bytes([0, 0, 0x08, array.ndim]) + np.array(array.shape, dtype=">u4").tobytes()
    with (gzip.open if gz else open)(path + (".gz" if gz else ""), "wb") as f:
        f.write(header + np.ascontiguousarray(array, dtype=np.uint8).tobytes())


def write_mnist(root, folder="MNIST", n_train=60, n_test=30, gz=False, emnist_split=None):
    """<root>/<folder>/raw/ with index-carrying 28x28 images; label = index % 10."""
    raw = os.path.join(root, folder, "raw")
    for split, n, offset in (("train", n_train, 0), ("test", n_test, n_train)):
        images = index_pixels(n, offset, 28, 28, 1)[..., 0]
        labels = np.arange(offset, offset + n) % 10
        if emnist_split:
            stem = f"emnist-{emnist_split}-{split}"
            names = (f"{stem}-images-idx3-ubyte", f"{stem}-labels-idx1-ubyte")
        else:
            prefix = "train" if split == "train" else "t10k"
            names = (f"{prefix}-images-idx3-ubyte", f"{prefix}-labels-idx1-ubyte")
        write_idx(os.path.join(raw, names[0]), images, gz)
        write_idx(os.path.join(raw, names[1]), labels.astype(np.uint8), gz)
    return root


def write_svhn(root, counts=(("train", 50), ("test", 30), ("extra", 20))):
    """<root>/<split>_32x32.mat; label = index % 10, stored with 0 as 10."""
    os.makedirs(root, exist_ok=True)
    offset = 0
    for split, n in counts:
        labels = np.arange(offset, offset + n) % 10
        images = index_pixels(n, offset, 32, 32, 3)
        images[:, :10, :5] = 0   # a mark in the top-left corner: rows and columns must not swap
        images = images.transpose(1, 2, 3, 0)
        savemat(os.path.join(root, f"{split}_32x32.mat"),
                {"X": images, "y": np.where(labels == 0, 10, labels).astype(np.uint8)[:, None]})
        offset += n
    return root


def write_stl10(root, n_train=40, n_test=20, n_unlabeled=10):
    """<root>/stl10_binary/ with column-major planes; label = index % 10 (stored + 1)."""
    folder = os.path.join(root, "stl10_binary")
    os.makedirs(folder, exist_ok=True)
    offset = 0
    for name, n in (("train", n_train), ("test", n_test), ("unlabeled", n_unlabeled)):
        images = index_pixels(n, offset, 96, 96, 3)
        images[:, :10, :5] = 0   # a mark in the top-left corner: rows and columns must not swap
        images.transpose(0, 3, 2, 1).tofile(os.path.join(folder, f"{name}_X.bin"))
        if name != "unlabeled":
            (np.arange(offset, offset + n) % 10 + 1).astype(np.uint8).tofile(os.path.join(folder, f"{name}_y.bin"))
        offset += n
    rng = np.random.default_rng(0)
    with open(os.path.join(folder, "fold_indices.txt"), "w") as f:
        for _ in range(10):
            f.write(" ".join(str(i) for i in rng.choice(n_train, n_train // 2, replace=False)) + "\n")
    return root


def write_solid_jpeg(path, image_id):
    """A flat-colour JPEG that says image_id (see image_data.solid_colour)."""
    return write_solid_files([path], image_id)[0]


def write_flowers(root, n=30, classes=5):
    """<root>/flowers-102/: jpg/image_%05d.jpg (image k is solid_colour(k - 1)),
    imagelabels.mat (label k % classes + 1), setid.mat (trnid, valid, tstid)."""
    base = os.path.join(root, "flowers-102")
    for k in range(1, n + 1):
        write_solid_jpeg(os.path.join(base, "jpg", f"image_{k:05d}.jpg"), k - 1)
    savemat(os.path.join(base, "imagelabels.mat"), {"labels": (np.arange(1, n + 1) % classes + 1)[None, :]})
    ids = np.random.default_rng(1).permutation(np.arange(1, n + 1))
    third = n // 3
    savemat(os.path.join(base, "setid.mat"), {"trnid": np.sort(ids[:third])[None, :],
                                              "valid": np.sort(ids[third:2 * third])[None, :],
                                              "tstid": np.sort(ids[2 * third:])[None, :]})
    return root


def write_food(root, per_class=6, classes=("ramen", "apple_pie", "sushi")):
    """<root>/food-101/: images/<class>/<id>.jpg, meta/train.json and meta/test.json
    (two thirds train); images numbered in the JSON files' order, train then test."""
    base = os.path.join(root, "food-101")
    meta = {"train": {}, "test": {}}
    for c, name in enumerate(classes):
        for i in range(per_class):
            split = "train" if i < per_class * 2 // 3 else "test"
            meta[split].setdefault(name, []).append(f"{name}/{1000 + i}")
    image = 0
    for split in ("train", "test"):
        for name, entries in meta[split].items():
            for entry in entries:
                write_solid_jpeg(os.path.join(base, "images", entry + ".jpg"), image)
                image += 1
    os.makedirs(os.path.join(base, "meta"), exist_ok=True)
    for split, content in meta.items():
        with open(os.path.join(base, "meta", f"{split}.json"), "w") as f:
            json.dump(content, f)
    return root


PET_BREEDS = ("Abyssinian", "american_bulldog", "Bengal", "yorkshire_terrier")


def write_pets(root, per_breed=5):
    """<root>/oxford-iiit-pet/: images/<Breed>_<n>.jpg and annotations/{trainval,test}.txt
    (`name class species breed` lines); images numbered in the files' order."""
    base = os.path.join(root, "oxford-iiit-pet")
    lines = {"trainval": [], "test": []}
    for b, breed in enumerate(PET_BREEDS):
        for i in range(per_breed):
            split = "trainval" if i < per_breed // 2 + 1 else "test"
            species = 1 if breed[0].isupper() else 2
            lines[split].append(f"{breed}_{i + 1} {b + 1} {species} {i + 1}")
    os.makedirs(os.path.join(base, "annotations"), exist_ok=True)
    image = 0
    for split in ("trainval", "test"):
        with open(os.path.join(base, "annotations", f"{split}.txt"), "w") as f:
            f.write("\n".join(lines[split]) + "\n")
        for line in lines[split]:
            write_solid_jpeg(os.path.join(base, "images", line.split()[0] + ".jpg"), image)
            image += 1
    return root


TINY_WNIDS = ("n01443537", "n01629819", "n01641577")


def write_tiny_imagenet(root, per_class=4, val=7):
    """<root>/tiny-imagenet-200/: train/<wnid>/images/<wnid>_<i>.JPEG, val/images/val_<i>.JPEG
    with val/val_annotations.txt, wnids.txt; 64x64 images, numbered train then val."""
    base = os.path.join(root, "tiny-imagenet-200")
    image = 0
    for wnid in TINY_WNIDS:
        for i in range(per_class):
            path = os.path.join(base, "train", wnid, "images", f"{wnid}_{i}.JPEG")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            Image.new("RGB", (64, 64), solid_colour(image)).save(path, "JPEG", quality=90)
            image += 1
    os.makedirs(os.path.join(base, "val", "images"), exist_ok=True)
    with open(os.path.join(base, "val", "val_annotations.txt"), "w") as f:
        for i in range(val):
            name = f"val_{i}.JPEG"
            Image.new("RGB", (64, 64), solid_colour(image)).save(os.path.join(base, "val", "images", name),
                                                                 "JPEG", quality=90)
            f.write(f"{name}\t{TINY_WNIDS[i % 3]}\t0\t0\t63\t63\n")
            image += 1
    with open(os.path.join(base, "wnids.txt"), "w") as f:
        f.write("\n".join(reversed(TINY_WNIDS)) + "\n")
    return root


def write_tar(path, members):
    """A tar file of (member name, bytes) in that order; returns its path as a string."""
    import io
    import tarfile

    with tarfile.open(path, "w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return str(path)


def write_shards(folder, sizes=(13, 11, 16), image_format="jpg", first=0, labels=True):
    """WebDataset shards folder/shard-000.tar, ...: sample i (counted over all shards) is a
    flat-colour image solid_colour(i) under `image_format` (a JPEG, PNG, ...), with
    `cls` = i % 7, and a `json` member the reader must skip. Returns the shard paths."""
    import io
    import tarfile

    os.makedirs(folder, exist_ok=True)
    paths, i = [], first
    for number, size in enumerate(sizes):
        path = os.path.join(folder, f"shard-{number:03d}.tar")
        with tarfile.open(path, "w") as tar:
            for _ in range(size):
                image = io.BytesIO()
                width, height = SIZES[i % len(SIZES)]
                Image.new("RGB", (width, height), solid_colour(i)).save(
                    image, "JPEG" if image_format in ("jpg", "jpeg") else image_format.upper(), quality=90)
                members = [(image_format, image.getvalue()), ("json", json.dumps({"i": i}).encode())]
                if labels:
                    members.append(("cls", str(i % 7).encode()))
                for key, data in members:
                    info = tarfile.TarInfo(f"sample{i:05d}.{key}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
                i += 1
        paths.append(path)
    return paths


def write_solid_files(paths, first=0):
    """Each path a solid-colour JPEG (or PPM / PNG, by its extension) saying first + its position."""
    for k, path in enumerate(paths):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        width, height = SIZES[(first + k) % len(SIZES)]
        image = Image.new("RGB", (width, height), solid_colour(first + k))
        extension = os.path.splitext(path)[1].lower()
        image.save(path, {".ppm": "PPM", ".png": "PNG"}.get(extension, "JPEG"), quality=90)
    return paths


def write_dtd(root, per_class=6, classes=("banded", "blotchy", "braided")):
    """<root>/dtd/dtd/: images/<class>/<class>_<n>.jpg, labels/{train,test}1.txt (half each)."""
    base = os.path.join(root, "dtd", "dtd")
    lines = {"train": [], "test": []}
    for name in classes:
        for i in range(per_class):
            lines["train" if i % 2 == 0 else "test"].append(f"{name}/{name}_{i + 1:04d}.jpg")
    os.makedirs(os.path.join(base, "labels"), exist_ok=True)
    for split, entries in lines.items():
        with open(os.path.join(base, "labels", f"{split}1.txt"), "w") as f:
            f.write("\n".join(entries) + "\n")
    write_solid_files([os.path.join(base, "images", entry) for entry in lines["train"] + lines["test"]])
    return root


AIRCRAFT_VARIANTS = ("707-320", "A300B4", "Cessna 172")


def write_aircraft(root, per_variant=5):
    """<root>/fgvc-aircraft-2013b/data/: images/<id>.jpg, variants.txt, images_variant_{train,test}.txt
    (`<id> <variant>` lines, a variant's name may hold a space)."""
    base = os.path.join(root, "fgvc-aircraft-2013b", "data")
    lines = {"train": [], "test": []}
    for v, variant in enumerate(AIRCRAFT_VARIANTS):
        for i in range(per_variant):
            lines["train" if i < 3 else "test"].append(f"{1000000 + 10 * v + i} {variant}")
    os.makedirs(base, exist_ok=True)
    with open(os.path.join(base, "variants.txt"), "w") as f:
        f.write("\n".join(AIRCRAFT_VARIANTS) + "\n")
    for split, entries in lines.items():
        with open(os.path.join(base, f"images_variant_{split}.txt"), "w") as f:
            f.write("\n".join(entries) + "\n")
    write_solid_files([os.path.join(base, "images", line.split()[0] + ".jpg") for line in lines["train"] + lines["test"]])
    return root


def write_sun397(root, per_class=4, classes=("/a/abbey", "/b/bus_interior", "/c/church/outdoor")):
    """<root>/SUN397/: ClassName.txt, <class path>/sun_<id>.jpg."""
    base = os.path.join(root, "SUN397")
    os.makedirs(base, exist_ok=True)
    with open(os.path.join(base, "ClassName.txt"), "w") as f:
        f.write("\n".join(classes) + "\n")
    write_solid_files([os.path.join(base, *name.strip("/").split("/"), f"sun_a{c}{i:05d}.jpg")
                  for c, name in enumerate(classes) for i in range(per_class)])
    return root


def write_stanford_cars(root, n=14, classes=("AM General Hummer SUV 2000", "Acura RL Sedan 2012", "Audi R8 2012")):
    """<root>/stanford_cars/: devkit/cars_meta.mat (class_names), devkit/cars_train_annos.mat
    (annotations: fname, class from 1), cars_train/<fname>."""
    base = os.path.join(root, "stanford_cars")
    os.makedirs(os.path.join(base, "devkit"), exist_ok=True)
    names = [f"{k + 1:05d}.jpg" for k in range(n)]
    annotations = np.array([(name, np.uint8(k % len(classes) + 1)) for k, name in enumerate(names)],
                           dtype=[("fname", object), ("class", object)])
    savemat(os.path.join(base, "devkit", "cars_train_annos.mat"), {"annotations": annotations[None, :]})
    savemat(os.path.join(base, "devkit", "cars_meta.mat"), {"class_names": np.array(classes, dtype=object)[None, :]})
    write_solid_files([os.path.join(base, "cars_train", name) for name in names])
    return root


IMAGENETTE_WNIDS = ("n01440764", "n02102040", "n02979186")


def write_imagenette(root, per_class=5):
    """<root>/imagenette2/{train,val}/<wnid>/<n>.JPEG (as the full-size archive unpacks)."""
    paths = [os.path.join(root, "imagenette2", split, wnid, f"{wnid}_{i}.JPEG")
             for split in ("train", "val") for wnid in IMAGENETTE_WNIDS for i in range(per_class)]
    write_solid_files(paths)
    return root


def write_rendered_sst2(root, per_class=6):
    """<root>/rendered-sst2/{train,valid,test}/{negative,positive}/<n>.png."""
    write_solid_files([os.path.join(root, "rendered-sst2", split, name, f"{i}.png")
                  for split in ("train", "valid", "test") for name in ("negative", "positive") for i in range(per_class)])
    return root


def write_gtsrb(root, per_class=6, classes=3):
    """<root>/gtsrb/GTSRB/Training/<class, 5 digits>/<n>.ppm."""
    write_solid_files([os.path.join(root, "gtsrb", "GTSRB", "Training", f"{c:05d}", f"00000_{i:05d}.ppm")
                  for c in range(classes) for i in range(per_class)])
    return root


def write_country211(root, per_country=4, countries=("AD", "AE", "AF")):
    """<root>/country211/{train,valid,test}/<country code>/<n>.jpg."""
    write_solid_files([os.path.join(root, "country211", split, code, f"{i}.jpg")
                  for split in ("train", "valid", "test") for code in countries for i in range(per_country)])
    return root


def write_eurosat(root, per_class=5, classes=("AnnualCrop", "Forest", "River")):
    """<root>/eurosat/2750/<class>/<class>_<n>.jpg."""
    write_solid_files([os.path.join(root, "eurosat", "2750", name, f"{name}_{i + 1}.jpg")
                  for name in classes for i in range(per_class)])
    return root


PLACES_CATEGORIES = ("/a/airfield", "/b/bakery/shop", "/c/canyon")


def write_places365(root, n=12):
    """<root>/: categories_places365.txt (`/a/airfield 0` lines), places365_val.txt (`<file>
    <class>` lines, class k % 3), val_256/<file> (the small images' folder)."""
    with open(os.path.join(root, "categories_places365.txt"), "w") as f:
        f.write("\n".join(f"{name} {k}" for k, name in enumerate(PLACES_CATEGORIES)) + "\n")
    names = [f"Places365_val_{k + 1:08d}.jpg" for k in range(n)]
    with open(os.path.join(root, "places365_val.txt"), "w") as f:
        f.write("\n".join(f"{name} {k % len(PLACES_CATEGORIES)}" for k, name in enumerate(names)) + "\n")
    write_solid_files([os.path.join(root, "val_256", name) for name in names])
    return root


CELEBA_ATTRIBUTES = ("Bald", "Eyeglasses", "Male", "Smiling", "Young")


def write_celeba(root, n=30):
    """<root>/celeba/: img_align_celeba/<%06d>.jpg (image k - 1 says k - 1), list_eval_partition.txt
    (image k in split k % 3), identity_CelebA.txt (1000 + 7k), list_bbox_celeba.txt,
    list_landmarks_align_celeba.txt and list_attr_celeba.txt (attribute j of image k - 1: bit j of
    k - 1, as -1 / 1), each as the dataset ships it: space-aligned, a count and a header line."""
    base = os.path.join(root, "celeba")
    names = [f"{k:06d}.jpg" for k in range(1, n + 1)]
    write_solid_files([os.path.join(base, "img_align_celeba", name) for name in names])

    def table(filename, rows, header=None):
        with open(os.path.join(base, filename), "w") as f:
            if header is not None:
                f.write(f"{n}\n" + " ".join(header) + "\n")
            f.write("".join(f"{name} " + "  ".join(str(v) for v in row) + "\n" for name, row in zip(names, rows)))

    table("list_eval_partition.txt", [[k % 3] for k in range(1, n + 1)])
    table("identity_CelebA.txt", [[1000 + 7 * k] for k in range(1, n + 1)])
    table("list_bbox_celeba.txt", [[k, 2 * k, 100 + k, 120 + k] for k in range(n)], ["image_id", "x_1", "y_1", "width", "height"])
    table("list_landmarks_align_celeba.txt", [[k + j for j in range(10)] for k in range(n)],
          [f"{part}_{axis}" for part in ("lefteye", "righteye", "nose", "leftmouth", "rightmouth") for axis in "xy"])
    table("list_attr_celeba.txt", [[1 if (k >> j) & 1 else -1 for j in range(len(CELEBA_ATTRIBUTES))] for k in range(n)],
          CELEBA_ATTRIBUTES)
    return root


INATURALIST_2021 = ("00000_Animalia_Chordata_Aves_Passeriformes_Corvidae_Corvus_corax",
                    "00001_Animalia_Chordata_Aves_Passeriformes_Corvidae_Pica_pica",
                    "00002_Plantae_Tracheophyta_Magnoliopsida_Rosales_Rosaceae_Rosa_canina")


def write_inaturalist(root, per_category=4):
    """<root>/2021_valid/<id_kingdom_..._species>/<n>.jpg (the 2021 layout) and
    <root>/2019/<super>/<category id>/<n>.jpg (the earlier one), images numbered across both."""
    paths = [os.path.join(root, "2021_valid", folder, f"{k:04x}.jpg")
             for folder in INATURALIST_2021 for k in range(per_category)]
    paths += [os.path.join(root, "2019", kind, str(number), f"{k}.jpg")
              for kind, number in (("Birds", 0), ("Plants", 2), ("Birds", 1)) for k in range(per_category)]
    write_solid_files(paths)
    return root


CALTECH101 = ("BACKGROUND_Google", "Faces", "airplanes", "ant")   # the first is no class of torchvision's
CALTECH256 = ("001.ak47", "002.american-flag", "003.backpack")


def write_caltech101(root, per_category=(2, 5, 3, 4), grey=None):
    """<root>/caltech101/101_ObjectCategories/<category>/image_<n>.jpg, images numbered in
    path order; `grey`, a (category, n) pair, is written as a grey ("L") JPEG, as a few of the
    download's are."""
    base = os.path.join(root, "caltech101", "101_ObjectCategories")
    paths = [os.path.join(base, name, f"image_{k + 1:04d}.jpg")
             for name, count in zip(CALTECH101, per_category) for k in range(count)]
    write_solid_files(paths)
    if grey is not None:
        path = os.path.join(base, grey[0], f"image_{grey[1]:04d}.jpg")
        Image.open(path).convert("L").save(path, "JPEG", quality=90)
    return root


def write_caltech256(root, per_category=(4, 3, 6)):
    """<root>/caltech256/256_ObjectCategories/<nnn.category>/<nnn>_<n>.jpg, and a file that is
    no JPEG, which torchvision does not count (the download has such strays)."""
    base = os.path.join(root, "caltech256", "256_ObjectCategories")
    write_solid_files([os.path.join(base, name, f"{name[:3]}_{k + 1:04d}.jpg")
                       for name, count in zip(CALTECH256, per_category) for k in range(count)])
    with open(os.path.join(base, CALTECH256[0], "RENAME"), "w") as f:
        f.write("a stray file\n")
    return root
