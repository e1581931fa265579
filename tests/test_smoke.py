"""The smoke set (`pytest -m smoke`), run by `make smoke-lowest` on the lowest DALI the extras
accept: CIFAR's exact-once epoch, an image folder under TrivialAugmentWide, and a resume
through state_dict / load_state_dict, bit for bit."""
import numpy as np
import pytest
import torch
from cifar_data import index_images, write_cifar
from image_data import write_solid_folder
from torchvision.transforms import v2

from dali_loaders import (
    get_cifar_iter_dali,
    get_cifar_iter_torch,
    get_imagefolder_iter_dali,
    get_imagefolder_iter_torch,
)
from dali_loaders.recipes import CIFAR_MEAN, CIFAR_STD

pytestmark = [pytest.mark.smoke, pytest.mark.filterwarnings("ignore::DeprecationWarning")]
pytest.importorskip("nvidia.dali")


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    return write_cifar(str(tmp_path_factory.mktemp("idx")), "cifar10", 203, 10, images=index_images)


def centre_indices(images):
    """The index each image encodes at its centre pixel, which every padded crop keeps."""
    mean, std = torch.tensor(CIFAR_MEAN["cifar10"]).view(1, 3, 1, 1), torch.tensor(CIFAR_STD["cifar10"]).view(1, 3, 1, 1)
    rgb = ((images * std + mean) * 255).round().to(torch.int64)[:, :, 16, 16]
    return ((rgb[:, 0] << 16) | (rgb[:, 1] << 8) | rgb[:, 2]).tolist()


def test_cifar_serves_every_sample_once_in_the_twins_order(indexed):
    dali = get_cifar_iter_dali("train", indexed, 16, 1, seed=4)
    twin = get_cifar_iter_torch("train", indexed, 16, 0, seed=4)
    for _ in range(2):
        seen, labels = [], []
        for images, y in dali:
            seen += centre_indices(images)
            labels += y.tolist()
        assert sorted(seen) == list(range(203)) and labels == [i % 10 for i in seen]
        assert seen == [i for images, _ in twin for i in centre_indices(images)]


def test_image_folder_with_trivial_augment_matches_the_twins_labels(tmp_path):
    root = str(tmp_path / "folder")
    write_solid_folder(root, {"cat": 5, "dog": 4, "eel": 3})
    recipe = v2.Compose([v2.RandomResizedCrop(32), v2.RandomHorizontalFlip(), v2.TrivialAugmentWide(),
                         v2.ToImage(), v2.ToDtype(torch.float32, scale=True), v2.Normalize([0.5] * 3, [0.25] * 3)])
    dali = get_imagefolder_iter_dali(root, 4, True, 1, seed=6, transform=recipe)
    twin = get_imagefolder_iter_torch(root, 4, True, 0, seed=6, transform=recipe)
    batches = list(dali)
    assert {tuple(x.shape[1:]) for x, _ in batches} == {(3, 32, 32)}
    assert all(torch.isfinite(x).all() for x, _ in batches)
    labels = [label for _, y in batches for label in y.tolist()]
    assert labels == [label for _, y in twin for label in y.tolist()]
    assert sorted(labels) == [0] * 5 + [1] * 4 + [2] * 3


def test_resume_mid_epoch_serves_the_same_batches(indexed):
    loader = get_cifar_iter_dali("train", indexed, 16, 1, seed=8)
    epoch = iter(loader)
    first = [next(epoch) for _ in range(3)]
    state = loader.state_dict()
    rest = list(epoch)
    resumed = get_cifar_iter_dali("train", indexed, 16, 1, seed=123)
    resumed.load_state_dict(state)
    again = list(resumed)
    assert len(again) == len(rest) > 0
    for (x, y), (x2, y2) in zip(rest, again):
        assert torch.equal(x, x2) and torch.equal(y, y2)   # the same augmentation draws, bit for bit
    seen = [i for x, _ in first + rest for i in centre_indices(x)]
    assert sorted(seen) == list(range(203))
