"""Our DALI loaders against torchvision's own dataset classes reading the same folders: the
val split, the default (non-augmenting) recipe on both sides, every image and label in
order. torchvision checks the published md5 of each file; the files here are written by
the test writers, so those checks are patched out, and nothing else of torchvision's."""
import numpy as np
import pytest
import torch
import torchvision.datasets as tvd
from cifar_data import write_cifar
from dataset_data import (
    write_flowers,
    write_food,
    write_mnist,
    write_pets,
    write_stl10,
    write_svhn,
)
from image_data import write_image_folder

import dali_loaders
from dali_loaders import recipes

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
BATCH = 4


@pytest.fixture(autouse=True)
def no_md5_checks(monkeypatch):
    """torchvision refuses files whose md5 is not the published one: ours are not."""
    for cls in (tvd.CIFAR10, tvd.SVHN, tvd.STL10, tvd.Flowers102):
        monkeypatch.setattr(cls, "_check_integrity", lambda self: True)
    monkeypatch.setattr(tvd.cifar, "check_integrity", lambda *args, **kwargs: True)   # its label-name file


def reference_batches(dataset):
    """torchvision's dataset read in index order, in batches: (images, labels)."""
    for start in range(0, len(dataset), BATCH):
        samples = [dataset[i] for i in range(start, min(start + BATCH, len(dataset)))]
        yield torch.stack([torch.as_tensor(image) for image, _ in samples]), torch.tensor([y for _, y in samples])


def assert_same_samples(loader, reference):
    assert len(loader.dataset) == len(reference) > BATCH
    batches = 0
    for (images, labels), (expected, expected_labels) in zip(loader, reference_batches(reference), strict=True):
        assert torch.equal(labels, expected_labels), f"batch {batches}: labels {labels} != {expected_labels}"
        assert images.shape == expected.shape
        assert (images - expected).abs().max().item() <= 1e-5, f"batch {batches}"
        batches += 1
    assert batches == -(-len(reference) // BATCH)


@pytest.mark.parametrize("dataset,cls", [("cifar10", tvd.CIFAR10), ("cifar100", tvd.CIFAR100)])
def test_cifar(tmp_path, dataset, cls):
    root = write_cifar(str(tmp_path), dataset, n_train=10, n_test=18)
    loader = dali_loaders.get_cifar_iter_dali("val", root, BATCH, 1, dataset=dataset)
    assert_same_samples(loader, cls(root, train=False, transform=recipes.cifar(False, dataset), download=False))


@pytest.mark.parametrize("name,cls,kwargs", [
    ("mnist", tvd.MNIST, {}), ("fashion_mnist", tvd.FashionMNIST, {}), ("kmnist", tvd.KMNIST, {}),
    ("emnist", tvd.EMNIST, {"split": "letters"})])
def test_mnist_family(tmp_path, name, cls, kwargs):
    root = write_mnist(str(tmp_path), cls.__name__, n_train=8, n_test=14, emnist_split=kwargs.get("split"))
    loader = getattr(dali_loaders, f"get_{name}_iter_dali")("test", root, BATCH, 1, **kwargs)
    assert_same_samples(loader, cls(root, train=False, transform=recipes.normalized(name), download=False,
                                    **kwargs))


def test_svhn(tmp_path):
    root = write_svhn(str(tmp_path), (("train", 5), ("test", 14)))
    loader = dali_loaders.get_svhn_iter_dali("test", root, BATCH, 1)
    assert_same_samples(loader, tvd.SVHN(root, "test", transform=recipes.normalized("svhn"), download=False))


def test_stl10(tmp_path):
    root = write_stl10(str(tmp_path), n_train=6, n_test=14, n_unlabeled=2)
    loader = dali_loaders.get_stl10_iter_dali("test", root, BATCH, 1)
    assert_same_samples(loader, tvd.STL10(root, "test", transform=recipes.normalized("stl10"), download=False))


@pytest.mark.parametrize("name,cls,write,split", [
    ("flowers102", tvd.Flowers102, write_flowers, "val"), ("food101", tvd.Food101, write_food, "test"),
    ("oxford_pet", tvd.OxfordIIITPet, write_pets, "test")])
def test_image_file_datasets(tmp_path, name, cls, write, split):
    """torchvision's class with its own image loader (PIL, convert("RGB"))."""
    root = write(str(tmp_path))
    loader = getattr(dali_loaders, f"get_{name}_iter_dali")(split, root, BATCH, 1)
    assert_same_samples(loader, cls(root, split, transform=recipes.imagenet(False), download=False))


def test_image_folder(tmp_path):
    write_image_folder(str(tmp_path), {"cat": 3, "dog": 4, "emu": 2})
    loader = dali_loaders.get_imagefolder_iter_dali(str(tmp_path), BATCH, False, 1)
    assert_same_samples(loader, tvd.ImageFolder(str(tmp_path), transform=recipes.imagenet(False)))


def test_a_sample_out_of_place_is_caught(tmp_path):
    """The comparison itself can fail: torchvision's dataset one sample shifted."""
    root = write_svhn(str(tmp_path), (("train", 5), ("test", 14)))
    reference = tvd.SVHN(root, "test", transform=recipes.normalized("svhn"), download=False)
    reference.data, reference.labels = np.roll(reference.data, 1, axis=0), np.roll(reference.labels, 1)
    with pytest.raises(AssertionError):
        assert_same_samples(dali_loaders.get_svhn_iter_dali("test", root, BATCH, 1), reference)
