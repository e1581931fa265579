"""torch's ConcatDataset on the DALI path: image folders, and pixel arrays, joined in its order;
DataLoader's batches over the same object; every sample once a shuffled epoch, with its own
dataset's label; joined with random_split's Subsets either way round; and what takes the Python
path (different transforms, different kinds of data, a dataset of one's own), saying why."""
import os
import warnings

import pytest
import torch
import torchvision.datasets as tvd
from cifar_data import index_images, write_cifar
from dataset_data import write_solid_files
from image_data import image_id
from torch.utils.data import ConcatDataset, DataLoader, Dataset, Subset, random_split
from torchvision import transforms as T

from dali_loaders import DaliLoader
from dali_loaders.loader.resolve import PythonPathNote

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
RECIPE = T.Compose([T.Resize(40), T.CenterCrop(32), T.ToTensor()])
FOLDERS = {"a": {"cat": 5, "dog": 4}, "b": {"ant": 3, "bee": 4, "cow": 3}}   # 9 and 10 images


@pytest.fixture(autouse=True)
def no_md5_checks(monkeypatch):   # the CIFAR files are written here, not the published ones
    monkeypatch.setattr(tvd.CIFAR10, "_check_integrity", lambda self: True)
    monkeypatch.setattr(tvd.cifar, "check_integrity", lambda *args, **kwargs: True)


@pytest.fixture(scope="module")
def roots(tmp_path_factory):
    """Two image folders whose images say their place in the two joined (ids 0..8, then 9..18),
    and a CIFAR-10 of 12 train and 9 test images carrying their index."""
    base = tmp_path_factory.mktemp("concat")
    first = 0
    for name, counts in FOLDERS.items():
        paths = [os.path.join(base, name, cls, f"{i:03d}.jpg") for cls in sorted(counts) for i in range(counts[cls])]
        write_solid_files(paths, first)
        first += len(paths)
    write_cifar(str(base / "cifar"), "cifar10", n_train=12, n_test=9, images=index_images)
    return base


def folders(roots, transform=RECIPE, second_transform=None):
    return ConcatDataset([tvd.ImageFolder(roots / "a", transform=transform),
                          tvd.ImageFolder(roots / "b", transform=second_transform or transform)])


def cifar(roots, transform=T.PILToTensor()):
    return ConcatDataset([tvd.CIFAR10(roots / "cifar", train=True, transform=transform),
                          tvd.CIFAR10(roots / "cifar", train=False, transform=transform)])


def ids_of(images):
    """The solid colour's id of each float image (0..1)."""
    return [image_id(rgb) for rgb in (images.mean(dim=(2, 3)) * 255).tolist()]


def cifar_ids(images):
    pixels = images[:, :, 0, 0].long()
    return ((pixels[:, 0] << 16) | (pixels[:, 1] << 8) | pixels[:, 2]).tolist()


def on_the_dali_path(dataset, batch_size=4, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("error", PythonPathNote)
        loader = DaliLoader(dataset, batch_size=batch_size, **kwargs)
    assert loader.route == "dali"
    return loader


def assert_dataloaders_batches(loader, dataset, batch_size=4):
    theirs = DataLoader(dataset, batch_size=batch_size)
    batches = 0
    for (x, y), (u, v) in zip(loader, theirs, strict=True):
        assert torch.equal(y, v) and x.shape == u.shape
        assert (x.float() - u.float()).abs().max().item() <= 1e-5
        batches += 1
    return batches


def test_image_folders_joined_give_dataloaders_batches_in_its_order(roots):
    dataset = folders(roots)
    loader = on_the_dali_path(dataset)
    assert len(loader) == 5 and assert_dataloaders_batches(loader, dataset) == 5
    assert [i for x, _ in loader for i in ids_of(x)] == list(range(19))


def test_pixel_arrays_joined_give_dataloaders_batches_in_its_order(roots):
    dataset = cifar(roots)
    loader = on_the_dali_path(dataset)
    assert assert_dataloaders_batches(loader, dataset) == 6
    assert [i for x, _ in loader for i in cifar_ids(x)] == list(range(21))


@pytest.mark.parametrize("make, ids", [(folders, ids_of), (cifar, cifar_ids)], ids=["files", "arrays"])
def test_a_shuffled_epoch_serves_every_sample_once_with_its_own_datasets_label(roots, make, ids):
    dataset = make(roots)
    labels = [label for part in dataset.datasets for label in part.targets]
    loader = on_the_dali_path(dataset, shuffle=True, seed=4, num_workers=2)
    orders = []
    for epoch in range(2):
        loader.set_epoch(epoch)
        seen, given = [], []
        for x, y in loader:
            seen += ids(x)
            given += y.tolist()
        assert sorted(seen) == list(range(len(dataset)))
        assert given == [labels[i] for i in seen]
        orders.append(seen)
    assert orders[0] != orders[1]


def test_random_splits_joined_and_a_split_of_the_joined_are_read_at_their_indices(roots):
    generator = torch.Generator().manual_seed(0)
    first, second = random_split(tvd.ImageFolder(roots / "a", transform=RECIPE), [5, 4], generator=generator)
    joined = ConcatDataset([second, first])
    loader = on_the_dali_path(joined)
    assert [i for x, _ in loader for i in ids_of(x)] == list(second.indices) + list(first.indices)
    assert assert_dataloaders_batches(loader, joined) == 3
    picked = Subset(folders(roots), [18, 0, 9, 4, 13])
    (x, _), = list(on_the_dali_path(picked, batch_size=5))
    assert ids_of(x) == [18, 0, 9, 4, 13]


class Squares(Dataset):
    def __len__(self):
        return 3

    def __getitem__(self, i):
        return torch.full((3, 32, 32), i / 10), 0


@pytest.mark.parametrize("make, why", [
    (lambda roots: folders(roots, second_transform=T.Compose(RECIPE.transforms)), "different transforms"),
    (lambda roots: ConcatDataset([cifar(roots, RECIPE), folders(roots)]), "different kinds of source"),
    (lambda roots: ConcatDataset([folders(roots), Squares()]), "its dataset 1, a Squares, is not read"),
], ids=["transforms", "kinds", "own dataset"])
def test_what_cannot_be_joined_takes_the_python_path_saying_why(roots, make, why):
    dataset = make(roots)
    with pytest.warns(PythonPathNote, match=why):
        loader = DaliLoader(dataset, batch_size=4)
    assert loader.route.startswith("python")
    assert assert_dataloaders_batches(loader, dataset) == len(loader)
