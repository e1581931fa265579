"""Subclasses of torchvision's datasets whose __getitem__ adds the sample's index (memory banks,
noisy labels, per-sample losses), read as their base class is: each batch is (images, labels,
indices), the indices the dataset's own, as DataLoader gives them."""
import os

import numpy as np
import pytest
import torch
from image_data import image_id, write_garbage, write_solid_folder
from torch.utils.data import Subset, default_collate
from torchvision import datasets
from torchvision.transforms import v2

from dali_loaders import DaliLoader, TorchLoader
from dali_loaders.sources.torchvision import adapt


class IndexedImageFolder(datasets.ImageFolder):
    def __getitem__(self, index):
        """The sample and its index (for the memory bank)."""
        img, target = super().__getitem__(index)
        return img, target, index


class IndexedOldStyle(datasets.ImageFolder):
    def __init__(self, root, transform=None):
        super(IndexedOldStyle, self).__init__(root, transform=transform)
        self.count = len(self.samples)

    def __getitem__(self, i):
        sample, label = super(IndexedOldStyle, self).__getitem__(i)
        return sample, label, i


class OnlyBuilt(datasets.ImageFolder):
    def __init__(self, root, transform=None):
        super().__init__(root, transform=transform)
        self.note = "nothing read differently"


class IndexFirst(datasets.ImageFolder):
    def __getitem__(self, index):
        img, target = super().__getitem__(index)
        return index, img, target


class IndexPlusOne(datasets.ImageFolder):
    def __getitem__(self, index):
        img, target = super().__getitem__(index)
        return img, target, index + 1


class DoesMore(datasets.ImageFolder):
    def __getitem__(self, index):
        img, target = super().__getitem__(index)
        target = target % 2
        return img, target, index


class OwnLength(datasets.ImageFolder):
    def __len__(self):
        return 3


COUNTS = {"a": 9, "b": 7, "c": 8}


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("indexed"))
    write_solid_folder(folder, COUNTS)
    return folder


SMALL = v2.Compose([v2.RandomResizedCrop(12, antialias=True), v2.RandomHorizontalFlip(), v2.PILToTensor()])


def shown_ids(images):
    return [image_id(image.float().mean((1, 2)).tolist()) for image in images]


@pytest.mark.parametrize("cls", [IndexedImageFolder, IndexedOldStyle])
def test_each_index_is_the_dataset_s_index_of_the_image_and_comes_once(root, cls):
    dataset = cls(root, transform=SMALL)
    loader = DaliLoader(dataset, batch_size=5, shuffle=True, num_workers=2, seed=2)
    assert loader.route == "dali"
    seen = []
    for images, labels, indices in loader:
        assert indices.dtype == torch.int64 and len(indices) == len(labels) == len(images)
        for shown, label, index in zip(shown_ids(images), labels.tolist(), indices.tolist()):
            assert shown == index   # write_solid_folder: image i of ImageFolder's order is colour i
            assert dataset.targets[index] == label
            seen.append(index)
    assert sorted(seen) == list(range(len(dataset))) and seen != sorted(seen)


def test_batches_equal_the_twin_s_and_dataloader_s(root):
    dataset = IndexedImageFolder(root, transform=v2.Compose([v2.Resize((8, 8)), v2.PILToTensor()]))
    ours, twin = DaliLoader(dataset, batch_size=6, shuffle=True, seed=4), TorchLoader(dataset, batch_size=6, shuffle=True,
                                                                                     seed=4)
    plain = torch.utils.data.DataLoader(dataset, batch_size=6)
    for (images, labels, indices), (t_images, t_labels, t_indices) in zip(ours, twin, strict=True):
        assert torch.equal(indices, t_indices) and torch.equal(labels, t_labels)
        assert int((images.int() - t_images.int()).abs().max()) <= 1
    unshuffled = DaliLoader(dataset, batch_size=6)
    for (_, labels, indices), (_, d_labels, d_indices) in zip(unshuffled, plain, strict=True):
        assert torch.equal(indices, d_indices) and torch.equal(labels, d_labels)


def test_files_left_out_keep_the_others_dataset_indices(root, tmp_path):
    folder = str(tmp_path / "with_garbage")
    write_solid_folder(folder, COUNTS)
    broken = os.path.join(folder, "b", "003.jpg")
    write_garbage(broken)
    dataset = IndexedImageFolder(folder, transform=SMALL)
    broken_index = [path for path, _ in dataset.samples].index(broken)
    with pytest.warns(UserWarning):
        batches = list(DaliLoader(dataset, batch_size=4, on_error="skip"))
        twin = list(TorchLoader(dataset, batch_size=4, on_error="skip"))
    indices = torch.cat([b[2] for b in batches])
    assert broken_index not in indices.tolist() and len(indices) == len(dataset) - 1
    assert torch.equal(indices, torch.cat([b[2] for b in twin]))
    for images, _, batch_indices in batches:   # past the left-out file, each image still its index's
        assert shown_ids(images) == batch_indices.tolist()


def test_a_subclass_that_only_builds_differently_is_read_as_its_base(root):
    loader = DaliLoader(OnlyBuilt(root, transform=SMALL), batch_size=8)
    assert loader.route == "dali"
    assert all(len(batch) == 2 for batch in loader)


@pytest.mark.parametrize("cls,why", [(IndexFirst, "is not `image, target = super"),
                                     (IndexPlusOne, "is not `image, target = super"),
                                     (DoesMore, "is not `image, target = super"),
                                     (OwnLength, "defines __len__")])
def test_subclasses_that_read_their_own_way_take_the_python_path_and_say_why(root, cls, why):
    assert adapt(cls(root)).source is None and why in adapt(cls(root)).why
    loader = DaliLoader(cls(root, transform=SMALL), batch_size=8)
    assert loader.route.startswith("python") and why in loader.route
    assert len(next(iter(loader))) == (2 if cls is OwnLength else 3)   # as DataLoader


def test_a_subset_of_one_gives_the_indices_the_dataset_is_handed(root, tmp_path):
    """Subset(dataset, indices)[j] is dataset[indices[j]]: that index, as given (-1 stays -1),
    through a Subset of a Subset and past a file left out."""
    dataset = IndexedImageFolder(root, transform=SMALL)
    for subset, expected in ((Subset(dataset, [5, 2, 17, -1]), [5, 2, 17, -1]),
                             (Subset(Subset(dataset, [3, 9, 11, 20, 4]), [4, 0, 2]), [4, 3, 11])):
        loader = DaliLoader(subset, batch_size=4)
        assert loader.route == "dali"
        images, labels, indices = next(iter(loader))
        assert indices.tolist() == expected == next(iter(TorchLoader(subset, batch_size=4)))[2].tolist()
        assert shown_ids(images) == [i % len(dataset) for i in expected]
    folder = str(tmp_path / "with_garbage")
    write_solid_folder(folder, COUNTS)
    write_garbage(os.path.join(folder, "a", "002.jpg"))   # index 2
    subset = Subset(IndexedImageFolder(folder, transform=SMALL), [7, 2, 0, 12])
    with pytest.warns(UserWarning):
        ours = next(iter(DaliLoader(subset, batch_size=4, on_error="skip")))
        twin = next(iter(TorchLoader(subset, batch_size=4, on_error="skip")))
    assert ours[2].tolist() == twin[2].tolist() == [7, 0, 12] and shown_ids(ours[0]) == [7, 0, 12]


def test_collate_fn_batch_transform_and_dict_keep_the_index(root):
    dataset = IndexedImageFolder(root, transform=v2.Compose([v2.Resize((8, 8)), v2.ToImage(),
                                                             v2.ToDtype(torch.float32, scale=True)]))
    items = []

    def collate(batch):
        items.extend(batch)
        return default_collate(batch)

    plain = [b[2] for b in DaliLoader(dataset, batch_size=6, shuffle=True, seed=1)]
    collated = [b[2] for b in DaliLoader(dataset, batch_size=6, shuffle=True, seed=1, collate_fn=collate)]
    assert [type(v) for v in items[0]][1:] == [int, int]
    assert all(torch.equal(a, b) for a, b in zip(plain, collated, strict=True))
    for loader_class in (DaliLoader, TorchLoader):
        mixed = list(loader_class(dataset, batch_size=6, shuffle=True, seed=1,
                                  batch_transform=v2.MixUp(num_classes=3)))
        assert all(len(batch) == 3 and batch[1].shape == (6, 3) for batch in mixed)
        assert all(torch.equal(batch[2], want) for batch, want in zip(mixed, plain, strict=True))
    batch = next(iter(DaliLoader(dataset, batch_size=6, output="dict")))[0]
    assert batch["index"].tolist() == list(range(6)) and batch["label"].shape == (6, 1)


def test_resume_mid_epoch_gives_the_same_indices_and_images(root):
    def make():
        return DaliLoader(IndexedImageFolder(root, transform=SMALL), batch_size=4, shuffle=True, num_workers=2,
                          seed=9)

    loader = make()
    loader.set_epoch(2)
    batches = iter(loader)
    next(batches)
    state = loader.state_dict()
    rest = list(batches)
    resumed = make()
    resumed.load_state_dict(state)
    for got, want in zip(resumed, rest, strict=True):
        assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))


def test_index_dataset_arrays_too(monkeypatch, tmp_path):
    """CIFAR10 read as arrays, subclassed the same way."""
    import torchvision.datasets as tvd
    from cifar_data import write_cifar

    for cls in (tvd.CIFAR10,):
        monkeypatch.setattr(cls, "_check_integrity", lambda self: True)
    monkeypatch.setattr(tvd.cifar, "check_integrity", lambda *args, **kwargs: True)

    class IndexedCIFAR10(tvd.CIFAR10):
        def __getitem__(self, index):
            img, target = super().__getitem__(index)
            return img, target, index

    cifar = IndexedCIFAR10(write_cifar(str(tmp_path), n_train=40, n_test=10), train=True, transform=v2.PILToTensor())
    loader = DaliLoader(cifar, batch_size=8, shuffle=True, seed=0)
    assert loader.route == "dali"
    for images, labels, indices in loader:
        expected = torch.from_numpy(np.ascontiguousarray(cifar.data[indices.numpy()])).permute(0, 3, 1, 2)
        assert torch.equal(images, expected)
        assert labels.tolist() == [cifar.targets[i] for i in indices.tolist()]


def test_target_transform_changes_the_labels_and_leaves_the_indices(root):
    def collate(items):
        assert all(len(item) == 3 and item[1] in (10, 11, 12) for item in items)
        return default_collate(items)

    dataset = IndexedImageFolder(root, transform=v2.Compose([v2.Resize((8, 8)), v2.PILToTensor()]),
                                 target_transform=lambda label: label + 10)
    for options in ({}, {"collate_fn": collate}):
        ours = list(DaliLoader(dataset, batch_size=5, shuffle=True, seed=3, **options))
        twin = list(TorchLoader(dataset, batch_size=5, shuffle=True, seed=3, **options))
        for (_, labels, indices), (_, t_labels, t_indices) in zip(ours, twin, strict=True):
            assert torch.equal(indices, t_indices) and torch.equal(labels, t_labels)
            assert labels.tolist() == [dataset.targets[i] + 10 for i in indices.tolist()]
