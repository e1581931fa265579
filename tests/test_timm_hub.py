"""timm's datasets over its Hugging Face reader (`create_dataset("hfds/...")`, as timm's train.py
makes them for `--dataset hfds/<name>`) on the DALI path: the deterministic recipe gives timm's
own create_loader's batches, train epochs serve every row once with its label, and the reader's
options the DALI path cannot honour take the Python path, saying why."""
import warnings

import numpy as np
import pytest
import torch
from hf_data import BEAN_NAMES, WNIDS, imagenet_parquet, png_parquet
from image_data import image_id

pytest.importorskip("timm")
datasets = pytest.importorskip("datasets")
import timm.data  # noqa: E402

from dali_loaders import DaliLoader  # noqa: E402
from dali_loaders.loader.resolve import PythonPathNote  # noqa: E402
from dali_loaders.timm import create_loader  # noqa: E402

datasets.disable_progress_bars()
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
CPU = torch.device("cpu")
SIZE = (3, 40, 40)
MEAN, STD = np.array(timm.data.IMAGENET_DEFAULT_MEAN), np.array(timm.data.IMAGENET_DEFAULT_STD)


@pytest.fixture(scope="module")
def repos(tmp_path_factory):
    """{layout: (a local dataset repository in the hub's parquet layout, its split, its cache)}."""
    made = {}
    for name, write, split in (("beans", png_parquet, "train"), ("imagenet", imagenet_parquet, "validation")):
        folder = tmp_path_factory.mktemp(name)
        write(str(folder / "repo"))
        made[name] = (str(folder / "repo"), split, str(folder / "cache"))
    return made


def hub_dataset(repos, layout, **kwargs):
    """timm's dataset of the repository, as timm's train.py makes it for --dataset hfds/<repo>."""
    repo, split, cache = repos[layout]
    return timm.data.create_dataset(f"hfds/{repo}", root=cache, split=split, **kwargs)


def test_the_deterministic_recipe_gives_timms_batches(repos):
    """PNGs in modes RGB, RGBA, palette and grey, the label in a column named by target_key:
    ours and timm's create_loader over two such datasets, batch for batch, bit for bit."""
    ours_data, timm_data = (hub_dataset(repos, "beans", target_key="labels") for _ in range(2))
    with warnings.catch_warnings():
        warnings.simplefilter("error", PythonPathNote)
        ours = create_loader(ours_data, SIZE, 4, device=CPU)
    theirs = timm.data.create_loader(timm_data, SIZE, 4, device=CPU, num_workers=0)
    assert ours.route == "dali" and ours.classes == BEAN_NAMES
    batches = 0
    for (x, y), (u, v) in zip(ours, theirs, strict=True):
        assert torch.equal(y, v) and x.shape == u.shape == (len(v), *SIZE)
        assert torch.equal(x, u), f"batch {batches}: worst {float((x - u).abs().max())}"
        batches += 1
    assert batches == len(theirs) == 6


def ids_of(images: torch.Tensor) -> list:
    """Which row each normalized image is (image_data.solid_colour: a flat colour names it)."""
    means = images.mean(dim=(2, 3)).numpy() * STD + MEAN
    return [image_id(rgb * 255) for rgb in means]


def test_train_epochs_serve_every_row_once_with_its_label(repos):
    """timm's training recipe (random crops, flips, colour jitter kept weak so the flat colours
    still name their rows): each row once an epoch, with its own label, in a new order."""
    data = hub_dataset(repos, "imagenet")
    loader = DaliLoader(data, batch_size=6, shuffle=True, num_workers=2, seed=5,
                        transform=timm.data.create_transform(40, is_training=True, color_jitter=None))
    assert loader.route == "dali" and loader.classes == WNIDS
    orders = []
    for epoch in range(2):
        loader.set_epoch(epoch)
        ids, labels = [], []
        for x, y in loader:
            ids += ids_of(x)
            labels += y.tolist()
        assert sorted(ids) == list(range(len(data)))
        assert labels == [i % 3 for i in ids]   # imagenet_parquet's labels
        orders.append(ids)
    assert orders[0] != orders[1]


@pytest.mark.parametrize("options, why", [
    (dict(class_map={"n01484850": 0, "n01443537": 1, "n01440764": 2}), "remapped"),
    (dict(target_key="image"), "not a ClassLabel or integer column"),
], ids=["class_map", "target_key"])
def test_what_the_reader_does_per_item_takes_the_python_path_saying_why(repos, options, why):
    data = hub_dataset(repos, "imagenet", **options)
    data.transform = timm.data.create_transform(40)
    with pytest.warns(PythonPathNote, match=f"ReaderHfds|{why}") as notes:
        loader = DaliLoader(data, batch_size=5)
    assert loader.route.startswith("python") and any(why in str(note.message) for note in notes)
    if "class_map" in options:   # and the Python path is timm's dataset itself: its remapped labels
        labels = torch.cat([y for _, y in loader]).tolist()
        assert labels == [2 - i % 3 for i in range(len(data))]


def test_a_subset_of_the_dataset_is_read_at_its_indices(repos):
    """torch's Subset over timm's hub dataset (a validation split cut from train, say)."""
    data = hub_dataset(repos, "imagenet")
    data.transform = timm.data.create_transform(40)
    picked = [29, 3, 17, 8, 0]
    with warnings.catch_warnings():
        warnings.simplefilter("error", PythonPathNote)
        loader = DaliLoader(torch.utils.data.Subset(data, picked), batch_size=5)
    (x, y), = list(loader)
    assert ids_of(x) == picked and y.tolist() == [i % 3 for i in picked]


def test_timms_streamed_datasets_are_refused_by_name(repos):
    """hfids/ (and tfds/, wds/): timm's IterableImageDataset, read in its reader's own order."""
    repo, split, cache = repos["imagenet"]
    streamed = timm.data.create_dataset(f"hfids/{repo}", root=cache, split=split, is_training=True, batch_size=4,
                                        num_samples=30)
    streamed.transform = timm.data.create_transform(40)
    with pytest.raises(TypeError, match="IterableImageDataset.*hfds/"):
        create_loader(streamed, SIZE, 4, device=CPU)
    with pytest.raises(TypeError, match="IterableImageDataset is an IterableDataset.*map-style"):
        DaliLoader(streamed, 4)
