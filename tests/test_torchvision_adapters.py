"""torchvision's (and timm's) own dataset objects read as sources (sources/torchvision.py):
every sample's image and label as the object's own __getitem__ hands them over, for each
class, on files in the real formats; and None or a reason for what cannot be read so.
torchvision checks the published md5 of each file; the files here are written by the test
writers, so those checks are patched out, and nothing else of torchvision's."""
import os

import numpy as np
import pytest
import torch
import torchvision
import torchvision.datasets as tvd
from cifar_data import index_images, write_cifar
from dataset_data import (
    write_caltech101,
    write_caltech256,
    write_flowers,
    write_food,
    write_mnist,
    write_pets,
    write_stl10,
    write_svhn,
)
from image_data import write_image_folder, write_odd_formats
from PIL import Image
from torchvision import transforms as T

from dali_loaders.sources import ArraySource, FileSource
from dali_loaders.sources.torchvision import Adapted, adapt

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(autouse=True)
def no_md5_checks(monkeypatch):
    """torchvision refuses files whose md5 is not the published one: ours are not."""
    for cls in (tvd.CIFAR10, tvd.SVHN, tvd.STL10, tvd.Flowers102):
        monkeypatch.setattr(cls, "_check_integrity", lambda self: True)
    monkeypatch.setattr(tvd.cifar, "check_integrity", lambda *args, **kwargs: True)   # its label-name file


@pytest.fixture(scope="module")
def roots(tmp_path_factory):
    """Every dataset written once, each under its own root."""
    def made(name, write):
        return write(str(tmp_path_factory.mktemp(name)))

    def image_folder(root):
        write_image_folder(root, {"cat": 3, "dog": 4, "ant": 2})
        write_odd_formats(os.path.join(root, "odd"))   # grey, CMYK, palette, RGBA, BMP, WebP, TIFF, ...
        return root

    def imagenet(root):
        wnids = ("n01440764", "n01443537", "n01484850")
        write_image_folder(os.path.join(root, "val"), {wnid: 2 + i for i, wnid in enumerate(wnids)}, seed=5)
        torch.save(({wnid: (f"name {i}", f"other name {i}") for i, wnid in enumerate(wnids)}, []),
                   os.path.join(root, "meta.bin"))
        return root

    return {
        "folder": made("folder", image_folder),
        "imagenet": made("imagenet", imagenet),
        "cifar10": made("cifar10", lambda r: write_cifar(r, "cifar10", n_train=12, n_test=9, images=index_images)),
        "cifar100": made("cifar100", lambda r: write_cifar(r, "cifar100", n_train=12, n_test=9,
                                                          images=index_images)),
        **{cls: made(cls, lambda r, cls=cls: write_mnist(r, cls, n_train=12, n_test=9))
           for cls in ("MNIST", "FashionMNIST", "KMNIST")},
        "EMNIST": made("emnist", lambda r: write_mnist(r, "EMNIST", n_train=12, n_test=9, emnist_split="letters")),
        "svhn": made("svhn", lambda r: write_svhn(r, (("train", 12), ("test", 9), ("extra", 5)))),
        "stl10": made("stl10", lambda r: write_stl10(r, n_train=10, n_test=6, n_unlabeled=3)),
        "flowers": made("flowers", lambda r: write_flowers(r, n=15)),
        "food": made("food", write_food),
        "pets": made("pets", write_pets),
        "caltech101": made("caltech101", write_caltech101),
        "caltech256": made("caltech256", write_caltech256),
    }


# name -> (dataset from the roots, transform=None, the source's class)
DATASETS = {
    "ImageFolder": (lambda r: tvd.ImageFolder(r["folder"]), FileSource),
    "DatasetFolder": (lambda r: tvd.DatasetFolder(r["folder"], tvd.folder.pil_loader, extensions=(".jpeg", ".png")),
                      FileSource),
    "ImageNet": (lambda r: tvd.ImageNet(r["imagenet"], "val"), FileSource),
    "CIFAR10-train": (lambda r: tvd.CIFAR10(r["cifar10"], train=True), ArraySource),
    "CIFAR10-test": (lambda r: tvd.CIFAR10(r["cifar10"], train=False), ArraySource),
    "CIFAR100-test": (lambda r: tvd.CIFAR100(r["cifar100"], train=False), ArraySource),
    "MNIST": (lambda r: tvd.MNIST(r["MNIST"], train=True), ArraySource),
    "FashionMNIST": (lambda r: tvd.FashionMNIST(r["FashionMNIST"], train=False), ArraySource),
    "KMNIST": (lambda r: tvd.KMNIST(r["KMNIST"], train=True), ArraySource),
    "EMNIST": (lambda r: tvd.EMNIST(r["EMNIST"], "letters", train=False), ArraySource),
    "SVHN-train": (lambda r: tvd.SVHN(r["svhn"], "train"), ArraySource),
    "SVHN-extra": (lambda r: tvd.SVHN(r["svhn"], "extra"), ArraySource),
    "STL10-train": (lambda r: tvd.STL10(r["stl10"], "train"), ArraySource),
    "STL10-test": (lambda r: tvd.STL10(r["stl10"], "test"), ArraySource),
    "STL10-fold": (lambda r: tvd.STL10(r["stl10"], "train", folds=3), ArraySource),
    "Flowers102-train": (lambda r: tvd.Flowers102(r["flowers"], "train"), FileSource),
    "Flowers102-test": (lambda r: tvd.Flowers102(r["flowers"], "test"), FileSource),
    "Food101": (lambda r: tvd.Food101(r["food"], "train"), FileSource),
    "OxfordIIITPet": (lambda r: tvd.OxfordIIITPet(r["pets"], "test"), FileSource),
    "Caltech101": (lambda r: tvd.Caltech101(r["caltech101"]), FileSource),
    "Caltech256": (lambda r: tvd.Caltech256(r["caltech256"]), FileSource),
}


def assert_same_samples(dataset, source_type=None):
    """adapt(dataset) reads every sample as dataset[i] hands it over (transform=None)."""
    adapted = adapt(dataset)
    assert isinstance(adapted, Adapted) and adapted.why == "", adapted
    source = adapted.source
    if source_type is not None:
        assert isinstance(source, source_type)
    assert len(source) == len(dataset) > 0
    for i in range(len(dataset)):
        image, label = dataset[i]
        mine = source.pil_image(i)
        assert (mine.mode, mine.size) == (image.mode, image.size), i
        assert np.array_equal(np.asarray(mine), np.asarray(image)), i
        assert source.labels[i] == label, i
    return source


@pytest.mark.parametrize("name", list(DATASETS))
def test_every_sample_as_its_getitem_hands_it_over(roots, name):
    make, source_type = DATASETS[name]
    assert_same_samples(make(roots), source_type)


def test_images_that_say_their_index_stay_in_order(roots):
    """CIFAR's images carry their index (train first, then test): the source's order is the
    dataset's, whatever torchvision's batches are."""
    source = adapt(tvd.CIFAR10(roots["cifar10"], train=False)).source
    pixels = source.images.astype(np.int64)
    assert ((pixels[:, 0, 0, 0] << 16) | (pixels[:, 0, 0, 1] << 8) | pixels[:, 0, 0, 2]).tolist() == \
        list(range(12, 21))


def test_the_dataset_is_read_as_it_now_stands(roots):
    """Users cut and replace `samples`, `data` and `targets`: __getitem__ reads the
    attributes, so the source does too."""
    folder = tvd.ImageFolder(roots["folder"])
    folder.samples = folder.samples[::-2]
    assert len(assert_same_samples(folder)) == len(folder.samples)
    cifar = tvd.CIFAR10(roots["cifar10"])
    cifar.data, cifar.targets = cifar.data[3:8], [7, 1, 0, 0, 2]
    assert len(assert_same_samples(cifar)) == 5
    mnist = tvd.MNIST(roots["MNIST"])
    mnist.data, mnist.targets = mnist.data[::3], mnist.targets[::3]
    assert_same_samples(mnist)


def test_big_arrays_are_viewed_not_copied(roots):
    for dataset in (tvd.CIFAR10(roots["cifar10"]), tvd.MNIST(roots["MNIST"]), tvd.SVHN(roots["svhn"]),
                    tvd.STL10(roots["stl10"], "test")):
        data = dataset.data.numpy() if isinstance(dataset.data, torch.Tensor) else dataset.data
        assert np.shares_memory(adapt(dataset).source.images, data), type(dataset).__name__


def dali_read(source, order, batch_size=4):
    """The images DALI's graph starts from (source.read), batch after batch of `order`."""
    from nvidia.dali import pipeline_def

    from dali_loaders.loader.pipeline import EpochOrder

    @pipeline_def(batch_size=batch_size, num_threads=1, device_id=None, prefetch_queue_depth=1)
    def first_step():
        images, labels = source.read(EpochOrder(order), batch_size, "cpu")
        return images.data, labels

    pipe = first_step()
    pipe.build()
    batches = [pipe.run() for _ in range(len(order) // batch_size)]
    return (np.concatenate([np.stack([np.asarray(t) for t in images]) for images, _ in batches]),
            np.concatenate([np.asarray(labels.as_tensor()) for _, labels in batches]))


def test_dali_reads_the_views_as_the_dataset_holds_them(roots):
    """DALI takes dense batches only: the transposed views (CIFAR, SVHN, STL10) and a strided
    cut of MNIST's tensor reach the graph as the dataset's own pixels, in the order fed."""
    mnist = tvd.MNIST(roots["MNIST"])
    mnist.data, mnist.targets = mnist.data[::2], mnist.targets[::2]
    for dataset in (tvd.CIFAR10(roots["cifar10"]), tvd.SVHN(roots["svhn"]), tvd.STL10(roots["stl10"], "test"),
                    mnist):
        source = adapt(dataset).source
        order = np.random.default_rng(0).permutation(len(dataset))[:4 * (len(dataset) // 4)]
        images, labels = dali_read(source, order)
        expected = np.stack([np.asarray(dataset[i][0]) for i in order])
        assert np.array_equal(images.reshape(expected.shape), expected), type(dataset).__name__
        assert labels.ravel().tolist() == [dataset[i][1] for i in order]


def test_fingerprints_tell_datasets_apart(roots):
    def fingerprint(dataset):
        return adapt(dataset).source.fingerprint

    cifar = [fingerprint(tvd.CIFAR10(roots["cifar10"], train=train)) for train in (True, False)]
    assert cifar[0] != cifar[1]
    assert fingerprint(tvd.CIFAR10(roots["cifar10"], train=False)) == cifar[1]
    assert fingerprint(tvd.CIFAR100(roots["cifar100"], train=False)) != cifar[1]
    # the same labels in the same layout, another class
    assert fingerprint(tvd.KMNIST(roots["KMNIST"])) != fingerprint(tvd.MNIST(roots["MNIST"]))
    folder = tvd.ImageFolder(roots["folder"])
    assert fingerprint(folder) == fingerprint(tvd.ImageFolder(roots["folder"]))
    folder.samples = folder.samples[1:]
    assert fingerprint(folder) != fingerprint(tvd.ImageFolder(roots["folder"]))


def test_the_transforms_its_getitem_applies_come_along(roots):
    transform, target_transform = T.Compose([T.CenterCrop(20), T.ToTensor()]), (lambda y: y + 1)
    adapted = adapt(tvd.CIFAR10(roots["cifar10"], transform=transform, target_transform=target_transform))
    assert adapted.transform is transform and adapted.target_transform is target_transform
    folder = tvd.ImageFolder(roots["folder"])
    folder.transform = transform   # set after construction, as __getitem__ reads it
    assert adapt(folder).transform is transform
    # OxfordIIITPet calls its joint `transforms`: the pair it was built with
    pet = tvd.OxfordIIITPet(roots["pets"], transform=transform, target_transform=target_transform)
    adapted = adapt(pet)
    assert adapted.transform is transform and adapted.target_transform is target_transform
    pet.transform = T.ToTensor()   # its __getitem__ does not see this one
    assert adapt(pet).transform is transform
    assert adapt(tvd.OxfordIIITPet(roots["pets"])).transform is None
    # Flowers102 tests `if self.transform:`, so an empty nn.Sequential is not called
    flowers = tvd.Flowers102(roots["flowers"], transform=torch.nn.Sequential())
    assert isinstance(flowers[0][0], Image.Image) and adapt(flowers).transform is None


def test_unknown_objects_give_none_and_subclasses_are_read_only_where_they_read_as_their_base(roots):
    class MyCIFAR(tvd.CIFAR10):
        def __getitem__(self, i):
            return super().__getitem__(len(self) - 1 - i)

    class MyFolder(tvd.ImageFolder):
        pass

    for dataset in ([1, 2, 3], torch.utils.data.TensorDataset(torch.zeros(4, 3)), tvd.FakeData(size=4),
                    "a string", None):
        assert adapt(dataset) is None, type(dataset)
    reversed_reading = adapt(MyCIFAR(roots["cifar10"]))   # its own __getitem__: named, not read
    assert reversed_reading.source is None and "MyCIFAR.__getitem__ is not" in reversed_reading.why
    same = adapt(MyFolder(roots["folder"]))
    assert same.source is not None and not same.adds_index
    assert same.source.files == adapt(tvd.ImageFolder(roots["folder"])).source.files


def odd_label_cifar(root):
    dataset = tvd.CIFAR10(root)
    dataset.targets = [str(y) for y in dataset.targets]
    return dataset


def cifar_without_data(root):
    dataset = tvd.CIFAR10(root)
    del dataset.data   # a future torchvision that names it otherwise
    return dataset


def flowers_without_files(root):
    dataset = tvd.Flowers102(root)
    del dataset._image_files
    return dataset


def folder_of_triples(root):
    dataset = tvd.ImageFolder(root)
    dataset.samples = [(path, label, "extra") for path, label in dataset.samples]   # its __getitem__ fails too
    return dataset


def empty_folder(tmp_path):
    os.makedirs(tmp_path / "empty_class")
    return tvd.ImageFolder(str(tmp_path), allow_empty=True)


# (dataset from the roots, a word the reason holds)
UNREADABLE = {
    "custom loader": (lambda r, t: tvd.ImageFolder(r["folder"], loader=lambda p: Image.open(p).convert("L")),
                      "loader"),
    "DatasetFolder of npy": (lambda r, t: tvd.DatasetFolder(r["folder"], np.load, extensions=(".png",), allow_empty=True), "loader"),
    "Food101 loader": (lambda r, t: tvd.Food101(r["food"], loader=torchvision.io.decode_image), "loader"),
    "Pet segmentation": (lambda r, t: tvd.OxfordIIITPet(r["pets"], target_types="segmentation"), "target_types"),
    "Pet binary": (lambda r, t: tvd.OxfordIIITPet(r["pets"], target_types="binary-category"), "target_types"),
    "Pet two targets": (lambda r, t: tvd.OxfordIIITPet(r["pets"], target_types=["category", "binary-category"]),
                        "target_types"),
    "Pet no target": (lambda r, t: tvd.OxfordIIITPet(r["pets"], target_types=[]), "target_types"),
    "Pet joint transforms": (lambda r, t: tvd.OxfordIIITPet(r["pets"], transforms=lambda x, y: (x, y)), "joint"),
    "STL10 unlabeled": (lambda r, t: tvd.STL10(r["stl10"], "unlabeled"), "unlabeled"),
    "STL10 train+unlabeled": (lambda r, t: tvd.STL10(r["stl10"], "train+unlabeled"), "unlabeled"),
    "text labels": (lambda r, t: odd_label_cifar(r["cifar10"]), "labels"),
    "missing attribute": (lambda r, t: cifar_without_data(r["cifar10"]), "'data'"),
    "missing private attribute": (lambda r, t: flowers_without_files(r["flowers"]), "'_image_files'"),
    "empty folder": (lambda r, t: empty_folder(t), "no samples"),
    "samples not pairs": (lambda r, t: folder_of_triples(r["folder"]), "pairs"),
}


@pytest.mark.parametrize("name", list(UNREADABLE))
def test_known_classes_it_cannot_read_say_why(roots, tmp_path, name):
    make, word = UNREADABLE[name]
    dataset = make(roots, tmp_path)
    adapted = adapt(dataset)
    assert adapted.source is None
    assert adapted.why.startswith(type(dataset).__name__ + ": ") and word in adapted.why, adapted.why
    assert len(adapted.why) < 120


def test_the_default_loader_under_accimage_says_why(roots, monkeypatch):
    folder = tvd.ImageFolder(roots["folder"])
    assert adapt(folder).why == ""
    monkeypatch.setattr(torchvision, "_image_backend", "accimage")   # as set_image_backend("accimage") leaves it
    assert "accimage" in adapt(folder).why
    pil = tvd.ImageFolder(roots["folder"], loader=tvd.folder.pil_loader)   # PIL whatever the backend
    assert adapt(pil).why == ""


# -- timm ------------------------------------------------------------------------------------


def test_timm_image_dataset(roots):
    timm_data = pytest.importorskip("timm.data")
    dataset = timm_data.ImageDataset(roots["folder"])
    source = assert_same_samples(dataset, FileSource)
    assert source.classes == sorted(dataset.reader.class_to_idx, key=dataset.reader.class_to_idx.get)
    transform = T.ToTensor()
    assert adapt(timm_data.ImageDataset(roots["folder"], transform=transform)).transform is transform


def test_timm_image_dataset_it_cannot_read(roots):
    timm_data = pytest.importorskip("timm.data")
    for kwargs, word in (({"input_img_mode": "L"}, "input_img_mode"), ({"load_bytes": True}, "load_bytes")):
        adapted = adapt(timm_data.ImageDataset(roots["folder"], **kwargs))
        assert adapted.source is None and word in adapted.why

    class MyDataset(timm_data.ImageDataset):
        pass

    class OwnItems(timm_data.ImageDataset):
        def __getitem__(self, index):
            return super().__getitem__(0)

    assert adapt(MyDataset(roots["folder"])).source is not None   # it reads its samples as ImageDataset does
    assert adapt(OwnItems(roots["folder"])).source is None
