"""The factories over DaliLoader: every standard dataset described once (datasets/_common.DatasetSpec),
every documented positional signature still taking its arguments in its order, every factory taking
DaliLoader's keywords (DataLoader's among them) with their meaning, and a spec's train splits, and
only those, shuffled on both backends."""
import dataclasses
import importlib
import inspect

import numpy as np
import pytest
import torch
from torch.utils.data import SequentialSampler

import dali_loaders
from dali_loaders.datasets import _common
from dali_loaders.loader import DaliLoader, TorchLoader
from dali_loaders.sources.arrays import ArraySource

MODULES = ("mnist", "svhn", "stl10", "flowers102", "food101", "oxford_pet", "tiny_imagenet")
SPECS = [value for name in MODULES for value in vars(importlib.import_module(f"dali_loaders.datasets.{name}")).values()
         if isinstance(value, _common.DatasetSpec)]
# The positional parameters each factory documents (the library's first loaders' orders).
POSITIONAL = {
    "cifar": ["type", "image_dir", "batch_size", "num_threads", "local_rank", "world_size", "val_size", "cutout"],
    "imagenet": ["type", "image_dir", "batch_size", "num_threads", "device_id", "num_gpus", "crop", "val_size",
                 "world_size", "local_rank"],
    "imagefolder": ["root", "batch_size", "train", "num_threads", "device_id", "crop", "val_size", "world_size",
                    "local_rank"],
    "webdataset": ["shards", "batch_size", "num_threads"],
    "files": ["files", "batch_size", "train", "num_threads"],
    **{name: ["type", "root", "batch_size", "num_threads"] for name in dali_loaders.STANDARD_DATASETS},
}
FACTORIES = [f"get_{name}_iter_{backend}" for name in POSITIONAL for backend in ("dali", "torch")]


def test_every_standard_dataset_is_described_once():
    names = [spec.name for spec in SPECS]
    assert len(names) == len(set(names))
    assert sorted(names) == sorted(dali_loaders.STANDARD_DATASETS)


@pytest.mark.parametrize("name", FACTORIES)
def test_the_documented_positional_order_holds(name):
    parameters = inspect.signature(getattr(dali_loaders, name)).parameters.values()
    positional = [p.name for p in parameters if p.kind == inspect.Parameter.POSITIONAL_OR_KEYWORD]
    assert positional == POSITIONAL[name[4:].rsplit("_iter_", 1)[0]]
    assert any(p.kind == inspect.Parameter.VAR_KEYWORD for p in parameters), f"{name} does not pass DaliLoader's keywords on"


def test_no_module_generates_code():
    import dali_loaders.datasets as datasets
    import pkgutil

    assert "generate" not in [m.name for m in pkgutil.iter_modules(datasets.__path__)]


# What each dataset's docstring promises: the splits that shuffle (and get the augmenting recipe).
TRAIN_SPLITS = {"mnist": {"train"}, "fashion_mnist": {"train"}, "kmnist": {"train"}, "emnist": {"train"},
                "svhn": {"train", "extra"}, "stl10": {"train", "unlabeled", "train+unlabeled"},
                "flowers102": {"train"}, "food101": {"train"}, "oxford_pet": {"trainval"},
                "tiny_imagenet": {"train"}}


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_the_splits_are_consistent(spec):
    assert set(spec.train_splits) == TRAIN_SPLITS[spec.name]
    assert set(spec.train_splits) <= set(spec.splits)
    assert set(spec.aliases.values()) <= set(spec.splits)
    for name in list(spec.splits) + list(spec.aliases):
        assert spec.split(name) in spec.splits
    with pytest.raises(ValueError, match="type must be one of"):
        spec.split("no-such-split")


def labelled_source(n):
    """n grey 8x8 images whose label is their index: the order a loader serves."""
    images = np.zeros((n, 8, 8, 1), dtype=np.uint8)
    return ArraySource(images, np.arange(n), "order")


def fake_spec(spec, n=24):
    return dataclasses.replace(spec, source=lambda root, which, **own: labelled_source(n), twin=None)


def served(loader):
    return np.concatenate([labels.numpy() for _, labels in loader])


def open_fake(spec, backend, split, **options):
    from torchvision.transforms import v2

    options.setdefault("transform", v2.Compose([v2.ToImage(), v2.ToDtype(torch.float32, scale=True)]))
    if backend == "dali":
        return _common.open_dali(fake_spec(spec), split, "unused", 5, 1, True, dict(seed=3, device="cpu", **options))
    return _common.open_torch(fake_spec(spec), split, "unused", 5, 1, dict(seed=3, **options))


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_train_splits_and_only_they_are_shuffled_on_both_backends(spec):
    for split in list(spec.splits) + list(spec.aliases):
        dali, twin = served(open_fake(spec, "dali", split)), served(open_fake(spec, "torch", split))
        assert sorted(dali) == list(range(24)) and np.array_equal(dali, twin), (spec.name, split)
        shuffled = not np.array_equal(dali, np.arange(24))
        assert shuffled == (spec.split(split) in spec.train_splits), (spec.name, split)


def test_dataloader_keywords_keep_their_meaning_in_the_factories():
    spec = next(s for s in SPECS if s.name == "svhn")
    # shuffle= overrides the split's default; sampler= chooses the order; num_workers= the threads
    assert not np.array_equal(served(open_fake(spec, "dali", "test", shuffle=True)), np.arange(24))
    backwards = list(range(23, -1, -1))
    for backend in ("dali", "torch"):
        loader = open_fake(spec, backend, "test", sampler=backwards, num_workers=0, pin_memory=False,
                           persistent_workers=False)
        assert isinstance(loader, DaliLoader if backend == "dali" else TorchLoader)
        assert served(loader).tolist() == backwards
    for backend in ("dali", "torch"):   # collate_fn gets the samples of each batch, as DataLoader gives them
        items = [item for batch in open_fake(spec, backend, "test", collate_fn=list) for item in batch]
        assert [label for _, label in items] == served(open_fake(spec, backend, "test")).tolist() == list(range(24))
    with pytest.raises(TypeError, match="no_such_keyword"):
        open_fake(spec, "dali", "train", no_such_keyword=1)
    with pytest.raises(ValueError, match="mutually exclusive with shuffle"):
        open_fake(spec, "torch", "train", sampler=SequentialSampler(range(24)), shuffle=True)
