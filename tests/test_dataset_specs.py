"""The standard datasets' descriptions (datasets/_common.DatasetSpec) and the factories made
from them: the committed factories are what the generator makes, every signature follows
the argument table, the explicit factories (CIFAR, ImageNet, WebDataset) take every common
argument too, and a spec's train splits, and only those, are shuffled."""
import dataclasses
import importlib
import inspect

import numpy as np
import pytest
import torch

import dali_loaders
from dali_loaders.datasets import _common, generate
from dali_loaders.sources.arrays import ArraySource

SPECS = [spec for name in generate.MODULES for spec in importlib.import_module(
    f"dali_loaders.datasets.{name}").SPECS]
EXPLICIT = ["get_cifar_iter_dali", "get_cifar_iter_torch", "get_imagenet_iter_dali", "get_imagenet_iter_torch",
            "get_imagefolder_iter_dali", "get_imagefolder_iter_torch", "get_webdataset_iter_dali",
            "get_webdataset_iter_torch"]


def default_value(argument):
    return inspect.Parameter.empty if argument.default is None else eval(argument.default, {"torch": torch})


@pytest.mark.parametrize("name", generate.MODULES)
def test_the_committed_factories_are_what_the_specs_make(name):
    module = importlib.import_module(f"dali_loaders.datasets.{name}")
    assert open(module.__file__).read() == generate.generated(module), (
        f"datasets/{name}.py differs from its specs: run `python -m dali_loaders.datasets.generate`")


def test_every_standard_dataset_is_described_once():
    names = [spec.name for spec in SPECS]
    assert len(names) == len(set(names))
    assert sorted(names) == sorted(dali_loaders.STANDARD_DATASETS)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
@pytest.mark.parametrize("backend", ["dali", "torch"])
def test_signatures_follow_the_spec(spec, backend):
    factory = getattr(dali_loaders, f"get_{spec.name}_iter_{backend}")
    parameters = list(inspect.signature(factory).parameters.values())
    expected = spec.arguments(backend)
    assert [p.name for p in parameters] == [a.name for a in expected]
    for parameter, argument in zip(parameters, expected):
        kind = inspect.Parameter.POSITIONAL_OR_KEYWORD if argument.positional else inspect.Parameter.KEYWORD_ONLY
        assert parameter.kind == kind, parameter.name
        assert parameter.default == default_value(argument), parameter.name
    assert factory.__doc__ and factory.__doc__.split()[:3] == inspect.cleandoc(
        spec.dali_doc if backend == "dali" else spec.torch_doc).split()[:3]


@pytest.mark.parametrize("name", EXPLICIT)
def test_the_explicit_factories_take_every_common_argument(name):
    parameters = inspect.signature(getattr(dali_loaders, name)).parameters
    backend = name.rsplit("_", 1)[1]
    missing = [a.name for a in _common.ARGUMENTS
               if backend in a.backends and a.name not in ("type", "root") and a.name not in parameters]
    assert not missing, f"{name} lacks {missing}: add them by hand (datasets/_common.py says how)"
    for argument in _common.ARGUMENTS:
        if argument.name in parameters and argument.default is not None:
            assert parameters[argument.name].default == default_value(argument), (name, argument.name)


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


def test_a_new_argument_is_one_row(monkeypatch):
    """Adding an Argument to the table puts it in every generated signature and call."""
    extra = _common.Argument("even_batches", "False", to_loader=True)
    monkeypatch.setattr(_common, "ARGUMENTS", _common.ARGUMENTS + (extra,))
    for spec in SPECS:
        for backend in ("dali", "torch"):
            source = generate.factory(spec, backend)
            head = source[:source.index('"""')]
            assert "even_batches=False" in head and "even_batches=even_batches" in source, (spec.name, backend)


def labelled_source(n):
    """n grey 8x8 images whose label is their index: the order a loader serves."""
    images = np.zeros((n, 8, 8, 1), dtype=np.uint8)
    return ArraySource(images, np.arange(n), "order")


def served_order(spec, backend, split, n=24):
    """The labels one epoch serves for `split`, through the spec's factory path, over a
    source whose labels are the sample indices (the spec's own reader replaced)."""
    fake = dataclasses.replace(spec, source=lambda root, which, **own: labelled_source(n), twin=None,
                               recipe=lambda train: lambda image: image, own=())
    args = {a.name: (None if a.default is None else default_value(a)) for a in fake.arguments(backend)}
    from torchvision.transforms import v2
    args.update(type=split, root="unused", batch_size=5, num_threads=1, seed=3,
                transform=v2.Compose([v2.ToImage(), v2.ToDtype(torch.float32, scale=True)]))
    loader = (_common.open_dali(fake, None, args) if backend == "dali" else _common.open_torch(fake, args))
    return np.concatenate([labels.numpy() for _, labels in loader])


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_train_splits_and_only_they_are_shuffled_on_both_backends(spec):
    for split in list(spec.splits) + list(spec.aliases):
        dali, twin = served_order(spec, "dali", split), served_order(spec, "torch", split)
        assert sorted(dali) == list(range(24)) and np.array_equal(dali, twin), (spec.name, split)
        shuffled = not np.array_equal(dali, np.arange(24))
        assert shuffled == (spec.split(split) in spec.train_splits), (spec.name, split)


def test_own_arguments_go_to_the_loader_or_to_the_reader(monkeypatch):
    """An own Argument with to_loader reaches dali_loader()/torch_loader(); one without it
    reaches the spec's source (and twin), checked by its check, and nothing else."""
    spec = next(s for s in SPECS if s.name == "svhn")
    calls = {}

    def source(root, which, **own):
        calls["source"] = own
        return labelled_source(8)

    def check(value):
        if value < 0:
            raise ValueError("limit must be >= 0")
        return value

    fake = dataclasses.replace(spec, source=source, own=(
        _common.Argument("on_bad", '"raise"', to_loader=True), _common.Argument("limit", "0", check=check)))
    monkeypatch.setattr(_common, "dali_loader", lambda *a, **kw: calls.setdefault("dali_loader", kw))
    monkeypatch.setattr(_common, "torch_loader", lambda *a, **kw: calls.setdefault("torch_loader", kw))
    for backend in ("dali", "torch"):
        args = {a.name: (None if a.default is None else default_value(a)) for a in fake.arguments(backend)}
        args.update(type="test", root="unused", batch_size=4, on_bad="skip", limit=3)
        (_common.open_dali(fake, None, args) if backend == "dali" else _common.open_torch(fake, args))
        assert calls["source"] == {"limit": 3}
        assert calls[f"{backend}_loader"]["on_bad"] == "skip" and "limit" not in calls[f"{backend}_loader"]
        with pytest.raises(ValueError, match="limit must be"):
            args["limit"] = -1
            (_common.open_dali(fake, None, args) if backend == "dali" else _common.open_torch(fake, args))
