"""A dataset changed after its DaliLoader was made (its transform replaced or edited in place,
its samples cut): DataLoader would serve the change at the next item, and the DALI path built
its graph from what it read once, so the next epoch's start names the change instead of
serving the old recipe and samples."""
import numpy as np
import pytest
import torch
from torchvision.datasets import ImageFolder
from torchvision.transforms import v2

from dali_loaders import DaliLoader

pytest.importorskip("nvidia.dali")


@pytest.fixture
def folder(tmp_path):
    from PIL import Image

    for k in range(8):
        (tmp_path / f"c{k % 2}").mkdir(exist_ok=True)
        Image.fromarray(np.full((30 + k, 40, 3), 20 * k, np.uint8)).save(tmp_path / f"c{k % 2}" / f"{k}.png")
    return str(tmp_path)


def recipe(size=24):
    return v2.Compose([v2.Resize((size, size)), v2.PILToTensor()])


def epoch(loader):
    return [images.shape for images, _ in loader]


def test_an_unchanged_dataset_runs_epoch_after_epoch(folder):
    dataset = ImageFolder(folder, transform=recipe())
    loader = DaliLoader(dataset, batch_size=4, shuffle=True, seed=0)
    assert [epoch(loader) for _ in range(3)] == [[torch.Size([4, 3, 24, 24])] * 2] * 3
    dataset.transform = recipe()   # another object, the same recipe: nothing to serve differently
    assert epoch(loader) == [torch.Size([4, 3, 24, 24])] * 2


@pytest.mark.parametrize("change,named", [
    (lambda d: setattr(d, "transform", recipe(40)), "the dataset's transform"),
    (lambda d: setattr(d.transform.transforms[0], "size", [40, 40]), "the dataset's transform"),   # in place
    (lambda d: setattr(d, "samples", d.samples[:5]), "the dataset's number of samples"),
], ids=["replaced", "edited in place", "samples cut"])
def test_a_change_is_named_at_the_next_epoch(folder, change, named):
    dataset = ImageFolder(folder, transform=recipe())
    loader = DaliLoader(dataset, batch_size=4, seed=0)
    assert epoch(loader) == [torch.Size([4, 3, 24, 24])] * 2
    change(dataset)
    with pytest.raises(RuntimeError, match=f"^{named} changed after the DaliLoader was made.*make a new DaliLoader"):
        epoch(loader)


def test_the_wrapped_dataset_of_a_subset_is_watched(folder):
    dataset = ImageFolder(folder, transform=recipe())
    loader = DaliLoader(torch.utils.data.Subset(dataset, [0, 2, 4, 6]), batch_size=2, seed=0)
    assert len(epoch(loader)) == 2
    dataset.transform = recipe(16)
    with pytest.raises(RuntimeError, match="^the wrapped dataset's transform changed"):
        epoch(loader)
