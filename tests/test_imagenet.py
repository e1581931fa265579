"""ImageNet / ImageFolder on DALI: parity with torchvision, labels, odd files, exact-once
epochs, the train crop's distribution, bad files and bad input."""
import os
import shutil
import warnings

import numpy as np
import pytest
import torch
from image_data import (
    image_id,
    write_coordinate_png,
    write_garbage,
    write_image_folder,
    write_odd_formats,
    write_solid_folder,
    write_truncated,
)
from PIL import Image
from scipy import stats

import dali_loaders
from dali_loaders.datasets import imagenet
from dali_loaders.datasets.imagenet import (
    get_imagefolder_iter_dali,
    get_imagefolder_iter_torch,
    get_imagenet_iter_dali,
    get_imagenet_iter_torch,
)
from dali_loaders.recipes import IMAGENET_MEAN, IMAGENET_STD
from dali_loaders.sources import image_files
from dali_loaders.sources.image_files import ImageDecodeError, verify_images

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
needs_gpu = pytest.mark.gpu   # skipped without CUDA (conftest.py)

MEAN = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1)
STD = torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)


def pixels(images: torch.Tensor) -> torch.Tensor:
    """Normalized (B, 3, H, W) back on the 0..255 scale."""
    return (images.cpu() * STD + MEAN) * 255


def collect(loader):
    """All (images on the 0..255 scale, labels) of one pass."""
    images, labels = [], []
    for x, y in loader:
        images.append(pixels(x))
        labels.append(y.cpu())
    return torch.cat(images), torch.cat(labels)


def per_image_difference(loader_a, loader_b):
    """Mean absolute difference of each image, grey levels of 255; asserts equal labels."""
    (a, labels_a), (b, labels_b) = collect(loader_a), collect(loader_b)
    assert labels_a.tolist() == labels_b.tolist()
    assert a.shape == b.shape
    return (a - b).abs().mean(dim=(1, 2, 3))


@pytest.fixture(scope="module")
def imagenet_dir(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("imagenet"))
    write_image_folder(os.path.join(root, "train"), {"n01440764": 4, "n01443537": 3, "n02102040": 3})
    write_image_folder(os.path.join(root, "val"), {"n01440764": 9, "n01443537": 8, "n02102040": 7}, seed=1)
    return root


@pytest.fixture(scope="module")
def solid_dir(tmp_path_factory):
    """23 flat-colour images in 3 classes: every output says which image it came from."""
    root = str(tmp_path_factory.mktemp("solid"))
    write_solid_folder(root, {"cat": 9, "dog": 8, "eel": 6})
    return root


def ids_of(images: torch.Tensor):
    return [image_id(image.mean(dim=(1, 2)).tolist()) for image in images]


def true_label(root):
    from torchvision.datasets import ImageFolder
    return ImageFolder(root).targets


# -- 1. val parity ---------------------------------------------------------------------


def test_val_parity_with_torchvision(imagenet_dir):
    dali = get_imagenet_iter_dali("val", imagenet_dir, 5, 2)
    twin = get_imagenet_iter_torch("val", imagenet_dir, 5, 0)
    difference = per_image_difference(dali, twin)
    print(f"\nval parity over {len(difference)} images: mean {difference.mean():.3f}, "
          f"worst {difference.max():.3f} grey levels")
    assert difference.mean() <= 0.3
    assert difference.max() <= 1.0


def test_val_resize_and_crop_follow_torchvision_geometry(tmp_path):
    """Sizes where DALI's own rounding would differ from torchvision's: the long side
    256 * 263 / 181 = 371.97 is truncated to 371, and 229x230 -> 256x257 and 204x200 ->
    261x256 leave odd margins 33 and 37, whose halves 16.5 and 18.5 round to even."""
    sizes = [(181, 263), (263, 181), (193, 257), (229, 230), (204, 200), (200, 204)]
    for i, (width, height) in enumerate(sizes):
        write_coordinate_png(str(tmp_path / "c" / f"{i}.png"), width, height)
    (dali, _), (twin, _) = [collect(get_imagefolder_iter_dali(str(tmp_path), 6, False, 1)),
                                 collect(get_imagefolder_iter_torch(str(tmp_path), 6, False, 0))]
    # A window one pixel off shifts a coordinate ramp by 0.35 grey levels or more.
    assert (dali - twin).abs().mean(dim=(2, 3)).max() < 0.1


def test_flat_val_folder_with_label_file(imagenet_dir, tmp_path):
    """val/ flat with `relative/path label` lines: same images, same labels, same outputs."""
    flat = tmp_path / "imagenet"
    shutil.copytree(os.path.join(imagenet_dir, "train"), flat / "train")
    (flat / "val").mkdir()
    lines = []
    samples = get_imagenet_iter_torch("val", imagenet_dir, 4, 0).dataset.source.samples
    for i, (path, label) in enumerate(samples):
        shutil.copy(path, flat / "val" / f"ILSVRC2012_val_{i:08d}.JPEG")
        lines.append(f"ILSVRC2012_val_{i:08d}.JPEG {label}")
    (tmp_path / "val.txt").write_text("\n".join(lines) + "\n")
    dali = get_imagenet_iter_dali("val", str(flat), 6, 2, label_file=str(tmp_path / "val.txt"))
    assert dali.dataset.classes == sorted(os.listdir(flat / "train"))
    by_folder = get_imagenet_iter_dali("val", imagenet_dir, 6, 2)
    assert per_image_difference(dali, by_folder).max() == 0
    twin = get_imagenet_iter_torch("val", str(flat), 6, 0, label_file=str(tmp_path / "val.txt"))
    assert per_image_difference(dali, twin).max() <= 1.0


# -- 2. labels and classes as ImageFolder -------------------------------------------------


def test_labels_and_classes_match_imagefolder(tmp_path):
    from torchvision.datasets import ImageFolder

    root = tmp_path / "set"
    for cls, extension in [("b", ".JPEG"), ("A", ".jpg"), ("c10", ".Png"), ("c2", ".JpEg"), ("a", ".jpeg")]:
        write_image_folder(str(root), {cls: 2}, extension=extension)
    write_image_folder(str(root / "a" / "nested"), {"deeper": 2})   # found recursively
    (root / "a" / "notes.txt").write_text("not an image")
    (root / "b" / "labels.csv").write_text("x,y")
    (root / "b" / "image.jpg.bak").write_bytes(b"\xff\xd8")
    (root / "README").write_text("not a class")
    reference = ImageFolder(str(root))
    dali = get_imagefolder_iter_dali(str(root), 3, False, 1)
    assert dali.dataset.classes == reference.classes
    assert dali.dataset.class_to_idx == reference.class_to_idx
    assert dali.dataset.samples == reference.samples
    assert collect(dali)[1].tolist() == reference.targets
    assert get_imagefolder_iter_torch(str(root), 3, False, 0).dataset.classes == reference.classes


# -- 3. odd files -----------------------------------------------------------------------


def test_cmyk_gray_progressive_png_and_exif_load_as_torchvision_does(tmp_path):
    """Also BMP, WebP, TIFF, palette and RGBA PNG, PGM. (Not 16-bit PNGs: PIL's convert("RGB")
    clips them at 255 where DALI scales them, so the two disagree there.)"""
    paths = write_odd_formats(str(tmp_path / "odd"))
    assert Image.open(paths["cmyk"]).mode == "CMYK" and Image.open(paths["gray"]).mode == "L"
    assert Image.open(paths["png_named_jpeg"]).format == "PNG"
    dali = get_imagefolder_iter_dali(str(tmp_path), 6, False, 1)
    twin = get_imagefolder_iter_torch(str(tmp_path), 6, False, 0)
    difference = per_image_difference(dali, twin)
    assert len(difference) == len(paths)
    assert difference.max() <= 1.0, dict(zip(dali.dataset.files, difference.tolist()))
    train = collect(get_imagefolder_iter_dali(str(tmp_path), 6, True, 1, crop=96))[0]
    assert train.shape == (len(paths), 3, 96, 96) and torch.isfinite(train).all()


# -- 4. exact-once epochs -----------------------------------------------------------------


def check_epoch(images, labels, root, expected_ids):
    """Each image of `expected_ids` exactly once, with its own label; returns the id order."""
    ids = ids_of(images)
    assert sorted(ids) == sorted(expected_ids)
    targets = true_label(root)
    assert labels.tolist() == [targets[i] for i in ids]
    return ids


def test_every_image_once_per_epoch_with_its_label(solid_dir):
    loader = get_imagefolder_iter_dali(solid_dir, 5, True, 2, seed=3)
    assert len(loader) == 5 and len(loader.dataset) == 23
    orders = [check_epoch(*collect(loader), solid_dir, range(23)) for _ in range(2)]
    assert orders[0] != orders[1]
    val = get_imagefolder_iter_dali(solid_dir, 5, False, 2)
    assert check_epoch(*collect(val), solid_dir, range(23)) == list(range(23))


def test_break_then_a_full_new_epoch(solid_dir):
    loader = get_imagefolder_iter_dali(solid_dir, 4, True, 2, seed=5)
    for _ in loader:
        break
    check_epoch(*collect(loader), solid_dir, range(23))


def test_drop_last(solid_dir):
    kept = get_imagefolder_iter_dali(solid_dir, 5, True, 2, seed=1, drop_last=False)
    dropped = get_imagefolder_iter_dali(solid_dir, 5, True, 2, seed=1, drop_last=True)
    assert (len(kept), len(dropped)) == (5, 4)
    images, labels = collect(dropped)
    assert len(labels) == 20 and len(set(ids_of(images))) == 20
    assert [len(y) for _, y in kept] == [5, 5, 5, 5, 3]


def test_same_order_as_the_torchvision_twin(solid_dir):
    dali = get_imagefolder_iter_dali(solid_dir, 6, True, 2, seed=11)
    twin = get_imagefolder_iter_torch(solid_dir, 6, True, 0, seed=11, crop=32)
    for _ in range(2):
        assert ids_of(collect(dali)[0]) == ids_of(collect(twin)[0])


def test_two_ranks_split_the_data(solid_dir):
    def ids(train, rank):
        loader = get_imagefolder_iter_dali(solid_dir, 4, train, 1, world_size=2, rank=rank, seed=2)
        return ids_of(collect(loader)[0])

    val = [ids(False, rank) for rank in (0, 1)]
    assert sorted(val[0] + val[1]) == list(range(23))
    train = [ids(True, rank) for rank in (0, 1)]
    assert len(train[0]) == len(train[1]) == 11 and not set(train[0]) & set(train[1])


def test_resume_mid_epoch_from_state_dict(solid_dir):
    loader = get_imagefolder_iter_dali(solid_dir, 4, True, 2, seed=8)
    epoch = iter(loader)
    seen = [ids_of(pixels(next(epoch)[0])) for _ in range(2)]
    state = loader.state_dict()
    rest = [ids_of(pixels(x)) for x, _ in epoch]
    restored = get_imagefolder_iter_dali(solid_dir, 4, True, 2, seed=99)
    restored.load_state_dict(state)
    assert [ids_of(pixels(x)) for x, _ in restored] == rest
    assert sorted(sum(seen + rest, [])) == list(range(23))


# -- 5. the train crop's distribution -----------------------------------------------------

CROP_SIZES = [(250, 180), (160, 240), (200, 200), (256, 100)]


def crop_window(image: np.ndarray):
    """(width, height, flipped) of the window an output (H, W, RGB on 0..255) was cut from:
    a coordinate image stays linear under resize, so the slopes give the window's size."""
    crop = image.shape[0]
    inner = np.arange(4, crop - 4)   # the border pixels' filters are clamped at the window edge
    x_slope = np.polyfit(inner, image[:, inner, 0].mean(axis=0), 1)[0]
    y_slope = np.polyfit(inner, image[inner, :, 1].mean(axis=1), 1)[0]
    return abs(x_slope) * crop, y_slope * crop, x_slope < 0


def test_train_crop_follows_random_resized_crop(tmp_path):
    """Window scale and aspect ratio against torchvision's own draws on the same image
    sizes (two-sample KS), and the flip rate against p (binomial)."""
    from torchvision.transforms import RandomResizedCrop

    for k, (width, height) in enumerate(CROP_SIZES):   # class k holds images of size k
        for i in range(12):
            write_coordinate_png(str(tmp_path / f"size{k}" / f"{i:02d}.png"), width, height)
    loader = get_imagefolder_iter_dali(str(tmp_path), 16, True, 2, crop=64, seed=1)
    scale, log_ratio, flips = [], [], []
    for _ in range(8):
        for images, labels in loader:
            for image, label in zip(pixels(images).permute(0, 2, 3, 1).numpy(), labels.tolist()):
                width, height, flipped = crop_window(image)
                scale.append(width * height / np.prod(CROP_SIZES[label]))
                log_ratio.append(np.log(width / height))
                flips.append(flipped)
    reference_scale, reference_log_ratio = [], []
    for k in range(4000):
        width, height = CROP_SIZES[k % 4]
        _, _, h, w = RandomResizedCrop.get_params(torch.empty(3, height, width), [0.08, 1.0],
                                                  [3 / 4, 4 / 3])
        reference_scale.append(w * h / (width * height))
        reference_log_ratio.append(np.log(w / h))
    assert len(flips) == 8 * 48
    assert stats.ks_2samp(scale, reference_scale).pvalue > 1e-3
    assert stats.ks_2samp(log_ratio, reference_log_ratio).pvalue > 1e-3
    assert stats.binomtest(int(np.sum(flips)), len(flips), 0.5).pvalue > 1e-3


# -- 6. bad files -----------------------------------------------------------------------


@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize("write_bad", [write_truncated, write_garbage])
def test_bad_file_stops_the_epoch_naming_it(tmp_path, write_bad, train):
    write_solid_folder(str(tmp_path), {"cat": 10, "dog": 10})
    bad = write_bad(str(tmp_path / "dog" / "zz_bad.jpg"))
    def position(seed):   # of the bad file (index 20) in the first epoch
        sampler = get_imagefolder_iter_torch(str(tmp_path), 4, train, 0, seed=seed).sampler
        return sampler.indices(0).tolist().index(20)

    seed = next(s for s in range(100) if position(s) >= 8)   # not in the first batches
    loader = get_imagefolder_iter_dali(str(tmp_path), 4, train, 2, seed=seed)
    for _ in range(2):   # and again on the next loop: a fresh pipeline, the same answer
        with pytest.raises(ImageDecodeError, match="zz_bad.jpg") as failure:
            for _ in loader:
                pass
        assert failure.value.path == bad
        # short: what to do is in the message, DALI's chained traceback is not
        assert "on_error='skip'" in str(failure.value) and "verify_images" in str(failure.value)
        assert failure.value.__suppress_context__ and failure.value.__cause__ is None
        assert len(failure.traceback) <= 4, [str(entry) for entry in failure.traceback]
    with pytest.raises(ImageDecodeError, match="zz_bad.jpg"):
        for _ in get_imagefolder_iter_torch(str(tmp_path), 4, train, 0, seed=seed):
            pass


def test_verify_images_finds_the_undecodable_files(tmp_path):
    write_solid_folder(str(tmp_path / "train"), {"cat": 3, "dog": 3})
    write_odd_formats(str(tmp_path / "train" / "odd"))
    bad = {write_truncated(str(tmp_path / "train" / "cat" / "truncated.JPEG")),
           write_garbage(str(tmp_path / "val" / "x" / "garbage.png"))}
    (tmp_path / "train" / "notes.txt").write_text("not an image")
    found = verify_images(str(tmp_path), progress=False)
    assert set(found) == bad
    assert all(found.values())
    with pytest.raises(FileNotFoundError, match="nowhere"):
        verify_images(str(tmp_path / "nowhere"))


def test_dali_check_finds_a_file_by_decoding(tmp_path):
    good = write_solid_folder(str(tmp_path), {"a": 3})
    bad = write_garbage(str(tmp_path / "a" / "garbage.jpg"))
    assert image_files.dali_undecodable(good[:2] + [bad] + good[2:]) == bad
    assert image_files.dali_undecodable(good) is None


# -- 7. the GPU path ----------------------------------------------------------------------


@needs_gpu
def test_mixed_decode_val_parity_on_gpu(imagenet_dir):
    dali = get_imagenet_iter_dali("val", imagenet_dir, 5, 2, device_id=0)
    images, labels = next(iter(dali))
    assert images.is_cuda and labels.is_cuda
    difference = per_image_difference(dali, get_imagenet_iter_torch("val", imagenet_dir, 5, 0))
    assert difference.mean() <= 0.3 and difference.max() <= 1.0


@needs_gpu
def test_mixed_decode_train_every_image_once(solid_dir):
    loader = get_imagefolder_iter_dali(solid_dir, 5, True, 2, device_id=0, seed=4)
    images, labels = next(iter(loader))
    assert images.is_cuda and labels.is_cuda
    check_epoch(*collect(loader), solid_dir, range(23))


@pytest.mark.parametrize("train", [True, False])
def test_gpu_graph_is_well_formed_without_a_gpu(imagenet_dir, train):
    """Runs everywhere: the mixed-decoder graph serializes, which checks every argument
    name against DALI's schemas for the mixed/GPU backends."""
    from dali_loaders import recipes
    from dali_loaders.loader.build import serialized_gpu_graph

    index = get_imagenet_iter_torch("val", imagenet_dir, 4, 0).dataset.source
    serialized = serialized_gpu_graph(index, recipes.imagenet(train))
    assert b"mixed" in serialized and b"jpeg_fancy_upsampling" in serialized


# -- bad input ------------------------------------------------------------------------


BOTH = [get_imagenet_iter_dali, get_imagenet_iter_torch]


@pytest.mark.parametrize("make", BOTH)
@pytest.mark.parametrize("args, kwargs, error, match", [
    (("test", "{root}", 4), {}, ValueError, "type must be 'train' or 'val'"),
    (("val", "{root}/nowhere", 4), {}, FileNotFoundError, "nowhere"),
    (("val", "{root}", 0), {}, ValueError, "batch_size"),
    (("val", "{root}", 4.0), {}, ValueError, "batch_size"),
    (("val", "{root}", 4), {"crop": 300}, ValueError, "val_size"),
    (("val", "{root}", 4), {"crop": 0}, ValueError, "crop"),
    (("val", "{root}", 4, -1), {}, ValueError, "num_threads"),
    (("val", "{root}", 4, True), {}, ValueError, "num_threads"),
])
def test_bad_arguments(imagenet_dir, make, args, kwargs, error, match):
    args = tuple(a.format(root=imagenet_dir) if isinstance(a, str) else a for a in args)
    with pytest.raises(error, match=match):
        make(*args, **kwargs)


def make_layout(root, layout):
    for path, content in layout.items():
        os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
        if content == "image":
            Image.new("RGB", (40, 30)).save(os.path.join(root, path), "JPEG")
        elif content is not None:
            with open(os.path.join(root, path), "w") as f:
                f.write(content)


def test_zero_threads_runs_one_and_negative_is_refused(imagenet_dir):
    assert get_imagenet_iter_dali("val", imagenet_dir, 4, 0, device="cpu").route == "dali"
    with pytest.raises(ValueError, match="num_threads"):
        get_imagenet_iter_dali("val", imagenet_dir, 4, -1)
    assert len(get_imagenet_iter_torch("val", imagenet_dir, 4, 0).dataset) > 0   # 0 workers is fine there


@pytest.mark.parametrize("make", [get_imagefolder_iter_dali, get_imagefolder_iter_torch])
@pytest.mark.parametrize("layout, kwargs, error, match", [
    ({}, {"root": "missing"}, FileNotFoundError, "missing"),
    ({"a.jpg": "image"}, {}, FileNotFoundError, "no class folders"),
    ({"cat/a.jpg": "image", "dog/notes.txt": "text"}, {}, FileNotFoundError, "dog"),
    ({"cat/a.jpg": "image", "empty/.keep": None}, {}, FileNotFoundError, "empty"),
    ({"cat/a.jpg": "image"}, {"train": "yes"}, ValueError, "train must be True or False"),
    ({"a.jpg": "image"}, {"label_file": "nolabels.txt"}, FileNotFoundError, "nolabels.txt"),
    ({"a.jpg": "image", "labels.txt": "a.jpg 1\nb.jpg\n"}, {"label_file": "labels.txt"}, ValueError,
     r"labels.txt:2"),
    ({"a.jpg": "image", "labels.txt": "a.jpg cat\n"}, {"label_file": "labels.txt"}, ValueError,
     r"labels.txt:1"),
    ({"a.jpg": "image", "labels.txt": "a.jpg 1\nb.jpg 0\n"}, {"label_file": "labels.txt"},
     FileNotFoundError, "b.jpg"),
    ({"a.jpg": "image", "labels.txt": "\n"}, {"label_file": "labels.txt"}, ValueError, "lists no images"),
    ({"a.jpg": "image", "labels.txt": "a.jpg 1\n./a.jpg 2\n"}, {"label_file": "labels.txt"}, ValueError,
     "labels.txt:2: './a.jpg' is listed again"),
])
def test_bad_folders(tmp_path, make, layout, kwargs, error, match):
    make_layout(str(tmp_path), layout)
    kwargs = dict(kwargs)
    root = str(tmp_path / kwargs.pop("root", ""))
    if "label_file" in kwargs:
        kwargs["label_file"] = str(tmp_path / kwargs["label_file"])
    with pytest.raises(error, match=match):
        make(root, 4, kwargs.pop("train", False), 1, **kwargs)


def test_imagenet_needs_train_and_val(tmp_path):
    make_layout(str(tmp_path), {"train/cat/a.jpg": "image"})
    for make in BOTH:
        with pytest.raises(FileNotFoundError, match="val"):
            make("val", str(tmp_path), 4)


def test_num_gpus_is_accepted_and_ignored(imagenet_dir):
    old = get_imagenet_iter_dali("val", imagenet_dir, 4, 2, None, 8, 224, 256)
    assert len(old) == len(get_imagenet_iter_dali("val", imagenet_dir, 4, 2)) == 6


def test_without_dali_falls_back_to_torchvision(imagenet_dir, monkeypatch):
    monkeypatch.setattr(imagenet, "dali_available", lambda: False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # cifar.py's tests check the warning
        loader = get_imagenet_iter_dali("val", imagenet_dir, 4, 0, crop=128, val_size=160)
    assert isinstance(loader.dataset.source, image_files.ImageFiles)
    assert next(iter(loader))[0].shape == (4, 3, 128, 128)
    with pytest.raises(ImportError, match="nvidia-dali"):
        get_imagefolder_iter_dali(os.path.join(imagenet_dir, "val"), 4, False, fallback=False)


def test_public_names():
    for name in ["get_imagenet_iter_dali", "get_imagenet_iter_torch", "get_imagefolder_iter_dali",
                 "get_imagefolder_iter_torch", "verify_images"]:
        assert name in dali_loaders.__all__ and callable(getattr(dali_loaders, name))
