"""Hugging Face `datasets.Dataset`s on the DALI path: the hub's layouts (CIFAR-10, ImageNet-1k, a PNG
set) from parquet and from `load_from_disk`, parity with DataLoader over the same dataset (val
pixel for pixel, train by distribution), exact-once epochs and ranks, sampler, resume, the twin,
rows that hold paths, the dataset's own transform (the Python path), bytes from strangers, and
what is refused."""
import os
import pickle
import warnings

import numpy as np
import pytest
import torch
from hf_data import (
    BEAN_NAMES,
    CIFAR10_NAMES,
    WNIDS,
    cifar10_parquet,
    coordinate_parquet,
    encoded,
    imagenet_parquet,
    png_parquet,
)
from image_data import image_id, solid_colour
from resume_check import assert_resume_gives_the_rest
from PIL import Image
from torchvision.transforms import v2

from dali_loaders import DaliLoader, ImageDecodeError, TorchLoader
from dali_loaders.loader.resolve import PythonPathNote
from dali_loaders.sources import hf

datasets = pytest.importorskip("datasets")
datasets.disable_progress_bars()
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

TO_FLOAT = [v2.ToImage(), v2.ToDtype(torch.float32, scale=True)]
VAL = v2.Compose([v2.Resize(48, antialias=True), v2.CenterCrop(40), *TO_FLOAT])
FLAT_TRAIN = v2.Compose([v2.RandomResizedCrop(16, antialias=True), v2.RandomHorizontalFlip(), *TO_FLOAT])
LAYOUTS = {"cifar10": (cifar10_parquet, "img", "label", CIFAR10_NAMES),
           "imagenet": (imagenet_parquet, "image", "label", WNIDS),
           "png": (png_parquet, "image", "labels", BEAN_NAMES)}


def load_parquet(path, cache):
    return datasets.load_dataset("parquet", data_files=path, split="train", cache_dir=str(cache))


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """layout -> (parquet file, its cache folder): each written once."""
    made = {}
    for name, (write, *_) in LAYOUTS.items():
        folder = tmp_path_factory.mktemp(name)
        made[name] = (write(str(folder)), folder / "hf-cache")
    return made


def loaded(hub, layout, how="parquet"):
    path, cache = hub[layout]
    ds = load_parquet(path, cache)
    if how == "disk":
        saved = str(cache.parent / "saved")
        if not os.path.isdir(saved):
            ds.save_to_disk(saved)
        ds = datasets.load_from_disk(saved)
    return ds


def with_recipe(ds, recipe, image="image", label="label"):
    """The user's DataLoader recipe: the dataset's own transform, applied to each batch of rows."""
    return ds.with_transform(lambda rows: {"x": [recipe(im.convert("RGB")) for im in rows[image]],
                                           "y": rows[label]})


def reference(ds, recipe, batch_size, image, label):
    """DataLoader's batches over the same dataset: [(images, labels)]."""
    loader = torch.utils.data.DataLoader(with_recipe(ds, recipe, image, label), batch_size=batch_size)
    return [(b["x"], b["y"]) for b in loader]


def ids_of(layout, images):
    """Which row each output image is (the writers make images that say so; float 0..1 NCHW)."""
    means = (images.mean(dim=(2, 3)) * 255).tolist()
    if layout == "cifar10":
        return [(round(r) << 16) + (round(g) << 8) + round(b) for r, g, b in means]
    return [image_id(rgb) for rgb in means]


def one_pass(layout, loader):
    ids, labels = [], []
    for x, y in loader:
        ids += ids_of(layout, x)
        labels += y.tolist()
    return np.array(ids), np.array(labels)


# -- 1. the hub's layouts, parity with DataLoader -----------------------------------------


@pytest.mark.parametrize("how", ["parquet", "disk"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_val_batches_equal_dataloaders_over_the_same_dataset(hub, layout, how):
    _, image, label, names = LAYOUTS[layout]
    ds = loaded(hub, layout, how)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PythonPathNote)
        loader = DaliLoader(ds, batch_size=8, transform=VAL)
    assert loader.route == "dali" and loader.classes == names and len(loader) == -(-len(ds) // 8)
    ours = list(loader)
    theirs = reference(ds, VAL, 8, image, label)
    assert len(ours) == len(theirs)
    for (x, y), (u, v) in zip(ours, theirs):
        assert torch.equal(y, v)
        assert x.shape == u.shape == (len(v), 3, 40, 40)
        assert (x - u).abs().max().item() <= 1 / 255 + 1e-6     # within one level


def test_the_bytes_are_read_from_the_arrow_buffers_without_a_copy(hub):
    ds = loaded(hub, "imagenet", "disk")
    source = hf.HuggingFaceSource(ds)
    images = source.batch_bytes(np.array([3, 0, 7]))
    assert not any(view.flags.owndata for view in images)     # views of the memory-mapped table
    assert [view.tobytes() for view in images] == [ds.data.column("image")[i]["bytes"].as_py() for i in (3, 0, 7)]
    assert len(pickle.dumps(source)) < 20_000                  # pickled by file name, not by bytes


@pytest.mark.parametrize("layout", ["cifar10", "imagenet"])
def test_train_epochs_serve_every_row_once_with_its_label(hub, layout):
    ds = loaded(hub, layout)
    loader = DaliLoader(ds, batch_size=6, shuffle=True, seed=3, num_workers=2, transform=FLAT_TRAIN)
    orders = []
    for epoch in range(2):
        loader.set_epoch(epoch)
        ids, labels = one_pass(layout, loader)
        assert sorted(ids) == list(range(len(ds)))
        assert np.array_equal(labels, [ds[int(i)][LAYOUTS[layout][2]] for i in ids])
        orders.append(ids)
    assert not np.array_equal(orders[0], orders[1])


CROP_SIZES = [(120, 90), (80, 120), (100, 100)]


def crop_window(image: np.ndarray):
    """(width, height, flipped) of the window an output (H, W, RGB 0..255) was cut from: the
    coordinate ramps stay linear under resize, so their slopes give the window's size."""
    crop = image.shape[0]
    inner = np.arange(3, crop - 3)
    x_slope = np.polyfit(inner, image[:, inner, 0].mean(axis=0), 1)[0]
    y_slope = np.polyfit(inner, image[inner, :, 1].mean(axis=1), 1)[0]
    return abs(x_slope) * crop, y_slope * crop, x_slope < 0


def crop_draws(batches):
    scales, flips = [], []
    for x, y in batches:
        for image, label in zip((x * 255).permute(0, 2, 3, 1).numpy(), y.tolist()):
            width, height, flipped = crop_window(image)
            scales.append(width * height / np.prod(CROP_SIZES[label]))
            flips.append(flipped)
    return np.array(scales), np.array(flips)


def test_train_crops_follow_dataloaders_distribution(tmp_path):
    """RandomResizedCrop(scale=(0.3, 1)) and a flip: the windows' areas against DataLoader's
    over the same dataset (two-sample KS), and the flip rate; scale= ignored would fail."""
    from scipy import stats

    ds = load_parquet(coordinate_parquet(str(tmp_path), CROP_SIZES, 10), tmp_path / "cache")
    recipe = v2.Compose([v2.RandomResizedCrop(32, scale=(0.3, 1.0), antialias=True), v2.RandomHorizontalFlip(),
                         *TO_FLOAT])
    loader = DaliLoader(ds, batch_size=10, shuffle=True, seed=1, num_workers=2, transform=recipe)
    ours = [batch for epoch in range(10) for batch in (loader.set_epoch(epoch), list(loader))[1]]
    scales, flips = crop_draws(ours)
    torch.manual_seed(0)
    their_scales, _ = crop_draws([batch for _ in range(10) for batch in reference(ds, recipe, 10, "image", "label")])
    assert len(scales) == 300 and scales.min() > 0.25
    assert stats.ks_2samp(scales, their_scales).pvalue > 1e-3
    assert stats.binomtest(int(flips.sum()), len(flips), 0.5).pvalue > 1e-3


# -- 2. the order: sampler, ranks, resume, the dataset's own row order ------------------


def test_a_users_sampler_chooses_the_rows(hub):
    ds = loaded(hub, "imagenet")
    chosen = [5, 3, 3, 28, 0, 17, 9]
    ids, labels = one_pass("imagenet", DaliLoader(ds, batch_size=3, sampler=chosen, transform=VAL))
    assert ids.tolist() == chosen and labels.tolist() == [i % 3 for i in chosen]


def test_ranks_share_train_equally_and_read_val_exactly_once(hub):
    ds = loaded(hub, "cifar10")
    trains, vals = [], []
    for rank in range(3):
        train = DaliLoader(ds, batch_size=4, shuffle=True, seed=8, rank=rank, world_size=3, transform=FLAT_TRAIN)
        val = DaliLoader(ds, batch_size=4, rank=rank, world_size=3, transform=VAL)
        trains.append(one_pass("cifar10", train)[0])
        vals.append(one_pass("cifar10", val)[0])
    assert [len(t) for t in trains] == [len(ds) // 3] * 3
    assert len(np.unique(np.concatenate(trains))) == len(ds) // 3 * 3
    assert np.concatenate(vals).tolist() == list(range(len(ds)))


@pytest.mark.parametrize("shuffle", [True, False])
def test_resume_mid_epoch_gives_the_rest_of_that_epoch(hub, shuffle):
    def make():   # each loader over the dataset loaded afresh, as a resumed run loads it
        return DaliLoader(loaded(hub, "imagenet", "disk"), batch_size=4, shuffle=shuffle, seed=11,
                          transform=FLAT_TRAIN if shuffle else VAL)

    assert_resume_gives_the_rest(make)


def test_select_shuffle_and_subsets_are_read_in_the_datasets_own_order(hub):
    ds = loaded(hub, "imagenet")
    picked = ds.shuffle(seed=4).select(range(0, 20, 2))   # an indices mapping over the table
    split = ds.train_test_split(test_size=7, seed=2)["test"]
    sliced = ds.select(range(5, 14))                        # a slice of the table
    for view in (picked, split, sliced):
        ids, labels = one_pass("imagenet", DaliLoader(view, batch_size=4, transform=VAL))
        expected = [image_id(solid_colour_of(view[i]["image"])) for i in range(len(view))]
        assert ids.tolist() == expected and labels.tolist() == view["label"]
    subset = torch.utils.data.Subset(ds, [4, 1, 22])
    loader = DaliLoader(subset, batch_size=2, transform=VAL)
    assert loader.route == "dali" and one_pass("imagenet", loader)[0].tolist() == [4, 1, 22]


def test_a_format_without_a_transform_changes_nothing_read(hub):
    """set_format("torch") / ("numpy") changes what ds[i] hands over, not the rows: the DALI path."""
    for kind in ("torch", "numpy"):
        loader = DaliLoader(loaded(hub, "imagenet").with_format(kind), batch_size=8, transform=VAL)
        ids, labels = one_pass("imagenet", loader)
        assert loader.route == "dali" and ids.tolist() == list(range(30)) and labels.tolist() == [i % 3 for i in ids]


def solid_colour_of(image):
    return np.asarray(image.convert("RGB"), dtype=np.float64).reshape(-1, 3).mean(axis=0)


# -- 3. the twin -------------------------------------------------------------------------


def test_the_twin_reads_the_same_dataset_batch_for_batch(hub):
    ds = loaded(hub, "png", "disk")
    for shuffle in (False, True):
        recipe = VAL if not shuffle else v2.Compose([v2.RandomHorizontalFlip(p=0.0), *VAL.transforms])
        dali = DaliLoader(ds, batch_size=5, shuffle=shuffle, seed=2, transform=recipe)
        twin = TorchLoader(ds, batch_size=5, shuffle=shuffle, seed=2, transform=recipe, num_workers=1)
        assert twin.classes == dali.classes == BEAN_NAMES and len(twin) == len(dali)
        for (x, y), (u, v) in zip(dali, twin, strict=True):
            assert torch.equal(y, v) and (x - u).abs().max().item() <= 1 / 255 + 1e-6


# -- 4. rows that hold paths ---------------------------------------------------------------


def test_rows_that_hold_paths_are_read_as_files(tmp_path):
    paths = []
    for i in range(9):
        paths.append(str(tmp_path / f"{i}.jpg"))
        Image.new("RGB", (60 + i, 50), solid_colour(i)).save(paths[-1], quality=90)
    features = datasets.Features({"image": datasets.Image(), "label": datasets.Value("int64")})
    only_paths = datasets.Dataset.from_dict({"image": paths, "label": list(range(9))}, features=features)
    assert only_paths.data.column("image")[0]["bytes"].as_py() is None   # the rows hold paths
    rows = [{"bytes": None, "path": p} if i % 2 else {"bytes": open(p, "rb").read(), "path": None}
            for i, p in enumerate(paths)]
    mixed = datasets.Dataset.from_dict({"image": rows, "label": list(range(9))}, features=features)
    for ds in (only_paths, mixed):
        loader = DaliLoader(ds, batch_size=4, transform=VAL)
        ids, labels = one_pass("imagenet", loader)
        assert loader.route == "dali" and ids.tolist() == labels.tolist() == list(range(9))
        assert loader.classes is None    # an integer label column has no names


# -- 5. the dataset's own transform: the Python path ---------------------------------------


def test_a_dataset_with_its_own_transform_takes_the_python_path_and_says_how_to_change_that(hub):
    ds = loaded(hub, "imagenet")
    own = with_recipe(ds, VAL)
    with pytest.warns(PythonPathNote, match=r"set_transform / with_transform.*transform="):
        loader = DaliLoader(own, batch_size=8)
    assert loader.route.startswith("python")
    for batch, (u, v) in zip(loader, reference(ds, VAL, 8, "image", "label"), strict=True):
        assert torch.equal(batch["x"], u) and torch.equal(batch["y"], v)   # the dataset's own items
    set_own = loaded(hub, "imagenet")
    set_own.set_transform(lambda rows: rows)
    for dataset in (own, set_own):
        for make in (DaliLoader, TorchLoader):
            with pytest.raises(ValueError, match="transform of its own and transform= was passed too"):
                make(dataset, batch_size=8, transform=VAL)
    assert DaliLoader(own.with_format(None), batch_size=8, transform=VAL).route == "dali"   # the note's advice
    with pytest.raises(ValueError, match="own transform.*ds.with_format\\(None\\)"):
        hf.HuggingFaceSource(own)   # wrapped by hand, its transform would be dropped unsaid


# -- 6. columns, and what is refused -------------------------------------------------------


def test_columns_are_found_from_the_features_or_chosen(tmp_path):
    image = {"bytes": encoded(Image.new("RGB", (20, 20), solid_colour(3)), "PNG"), "path": None}
    two = datasets.Dataset.from_dict(
        {"a": [image] * 4, "b": [image] * 4, "fine": [1, 2, 3, 4], "coarse": [0, 0, 1, 1]},
        features=datasets.Features({"a": datasets.Image(), "b": datasets.Image(),
                                    "fine": datasets.ClassLabel(names=list("vwxyz")),
                                    "coarse": datasets.ClassLabel(names=["p", "q"])}))
    with pytest.warns(PythonPathNote, match=r"several Image\(\) columns \['a', 'b'\].*image_column="):
        assert DaliLoader(two, batch_size=2).route.startswith("python")
    with pytest.raises(hf.NotReadable, match="several ClassLabel columns.*label_column="):
        hf.HuggingFaceSource(two, image_column="b")
    loader = DaliLoader(hf.HuggingFaceSource(two, image_column="b", label_column="coarse"), batch_size=2,
                        transform=VAL)
    assert loader.classes == ["p", "q"] and torch.cat([y for _, y in loader]).tolist() == [0, 0, 1, 1]
    assert DaliLoader(two.select_columns(["a", "fine"]), batch_size=2).classes == list("vwxyz")
    with pytest.raises(hf.NotReadable, match="image_column='fine' is not an Image"):
        hf.HuggingFaceSource(two, image_column="fine")
    unlabelled = two.select_columns(["a"])
    assert torch.cat([y for _, y in DaliLoader(unlabelled, batch_size=4, transform=VAL)]).tolist() == [-1] * 4
    grey = two.select_columns(["a", "fine"]).cast_column("a", datasets.Image(mode="L"))
    with pytest.warns(PythonPathNote, match="mode 'L'"):
        DaliLoader(grey, batch_size=2)


def test_streaming_datasets_and_dataset_dicts_are_refused_with_the_reason(hub):
    ds = loaded(hub, "cifar10")
    for make in (DaliLoader, TorchLoader):
        with pytest.raises(TypeError, match="streaming.*no length and no random access.*streaming=True"):
            make(ds.to_iterable_dataset(), batch_size=4, transform=VAL)
        with pytest.raises(TypeError, match=r"DatasetDict holds splits \(train\).*ds\['train'\]"):
            make(datasets.DatasetDict({"train": ds}), batch_size=4, transform=VAL)
    with pytest.raises(TypeError, match="streaming"):
        hf.HuggingFaceSource(ds.to_iterable_dataset())


# -- 7. bytes from strangers ---------------------------------------------------------------


POLICY_REFUSED = {"png16.png", "animated_gif_named.png"}   # PIL decodes them, DALI differently


@pytest.fixture(scope="module")
def strangers():
    """17 flat-colour PNG rows (ids 0..16, labels 0/1) interleaved with the untrusted corpus
    (label 2: broken, bombs, 16-bit, GIF, ...); {row: name} of the corpus rows, and the names
    of the rows no loader may serve (those PIL cannot decode, bombs, 16-bit and GIF)."""
    from dali_loaders.testing.untrusted import bomb_images, broken_images, unusual_images

    solid = [(encoded(Image.new("RGB", (40 + i, 30), solid_colour(i)), "PNG"), int(i >= 9)) for i in range(17)]
    broken, bombs = broken_images(0), bomb_images()
    odd = [(data, 2, name) for name, data in {**unusual_images(0), **broken, **bombs}.items()]
    rows, names = [], {}
    for k in range(max(len(solid), len(odd))):
        for item in solid[k:k + 1] + odd[k:k + 1]:
            if len(item) == 3:
                names[len(rows)] = item[2]
            rows.append(item[:2])
    features = datasets.Features({"image": datasets.Image(), "label": datasets.ClassLabel(names=["a", "b", "odd"])})
    ds = datasets.Dataset.from_dict({"image": [{"bytes": data, "path": None} for data, _ in rows],
                                     "label": [label for _, label in rows]}, features=features)
    refused = {f"image[{row}]" for row, name in names.items() if name in {*broken, *bombs, *POLICY_REFUSED}}
    return ds, names, refused


@pytest.mark.parametrize("make", [DaliLoader, TorchLoader])
def test_skip_serves_each_good_row_once_and_names_the_refused(strangers, make, own_home):
    ds, names, refused = strangers
    small = v2.Compose([v2.Resize((24, 24)), *TO_FLOAT])
    with pytest.warns(UserWarning, match="left out"):
        loader = make(ds, batch_size=5, shuffle=True, seed=5, transform=small, on_error="skip")
        assert set(loader.skipped) == refused
        ids, others = [], 0
        for x, y in loader:
            for image, label in zip(x, y.tolist()):
                if label == 2:
                    others += 1
                    continue
                ids.append(image_id((image.mean(dim=(1, 2)) * 255).tolist()))
                assert label == int(ids[-1] >= 9)
    assert sorted(ids) == list(range(17)) and others == len(names) - len(refused)


def test_raise_names_the_first_refused_row_and_max_image_pixels_applies(strangers, own_home):
    ds, names, refused = strangers
    first = min(row for row in names if f"image[{row}]" in refused)
    with pytest.raises(ImageDecodeError, match=rf"image\[{first}\]"):
        DaliLoader(ds, batch_size=5, transform=VAL)
    solid = ds.select([row for row in range(len(ds)) if row not in names])
    with pytest.raises(ImageDecodeError, match=r"image\[14\].*54 x 30 = 1620 pixels, above max_image_pixels=1600"):
        DaliLoader(solid, batch_size=5, transform=VAL, max_image_pixels=1600)   # rows named as the selection's
    loader = DaliLoader(solid, batch_size=5, transform=VAL, max_image_pixels=1600, on_error="skip")
    assert list(loader.skipped) == ["image[14]", "image[15]", "image[16]"] and len(loader.dataset) == 17


def test_screening_reads_headers_once_then_its_cache_and_nothing_per_epoch(hub, own_home, monkeypatch):
    from dali_loaders.sources import screening

    reads = []
    original = screening.read_header
    monkeypatch.setattr(screening, "read_header", lambda encoded: reads.append(1) or original(encoded))
    ds = loaded(hub, "imagenet", "disk")
    loader = DaliLoader(ds, batch_size=8, transform=VAL)
    assert len(reads) == len(ds)                      # one header read per row, at construction
    for _ in range(2):
        list(loader)
    again = DaliLoader(datasets.load_from_disk(str(hub["imagenet"][1].parent / "saved")), batch_size=8,
                       transform=VAL)
    assert len(reads) == len(ds) and len(again) == len(loader)   # the cache, and no reads per epoch
    shuffled = DaliLoader(ds.shuffle(seed=1), batch_size=8, transform=VAL)   # other names, same rows
    assert len(shuffled) == len(loader) and len(reads) <= 2 * len(ds)
    assert len(os.listdir(own_home / ".cache" / "dali_loaders" / "screening")) == 1


def test_a_row_broken_past_its_header_stops_the_epoch_naming_it(hub):
    ds = loaded(hub, "imagenet")
    rows = [{"bytes": ds.data.column("image")[i]["bytes"].as_py(), "path": None} for i in range(len(ds))]
    rows[13]["bytes"] = rows[13]["bytes"][:len(rows[13]["bytes"]) // 3]   # the header intact
    broken = datasets.Dataset.from_dict({"image": rows, "label": ds["label"]}, features=ds.features)
    for make, workers in ((DaliLoader, 1), (TorchLoader, 0)):
        with pytest.raises(ImageDecodeError, match=r"image\[13\]") as failure:
            for _ in make(broken, batch_size=4, num_workers=workers, transform=VAL):
                pass
        assert failure.value.path == "image[13]"


# -- 8. on the GPU -------------------------------------------------------------------------


@pytest.mark.gpu
def test_val_on_the_gpu_equals_dataloader(hub):
    ds = loaded(hub, "imagenet", "disk")
    loader = DaliLoader(ds, batch_size=8, transform=VAL, device="gpu")
    for (x, y), (u, v) in zip(loader, reference(ds, VAL, 8, "image", "label"), strict=True):
        assert x.is_cuda and torch.equal(y.cpu(), v)
        assert (x.cpu() - u).abs().max().item() <= 2 / 255 + 1e-6   # nvJPEG's IDCT, not libjpeg's
