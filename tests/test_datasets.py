"""The standard datasets (MNIST and kin, SVHN, STL-10, Flowers-102, Food-101, Oxford-IIIT Pet,
Tiny-ImageNet) in their real formats: parity with the twin, exact-once epochs with labels,
len(), and named errors for missing and damaged files."""
import os
import shutil

import numpy as np
import pytest
import torch
from dataset_data import (
    read_index,
    write_flowers,
    write_food,
    write_mnist,
    write_pets,
    write_stl10,
    write_svhn,
    write_tiny_imagenet,
)
from image_data import image_id, write_garbage

import dali_loaders
from dali_loaders import recipes
from dali_loaders.sources.image_files import ImageDecodeError

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

# name -> (writer, val split, train split, number of val samples, number of train samples, factory kwargs)
ARRAYS = {
    "mnist": (lambda root: write_mnist(root, "MNIST"), "test", "train", 30, 60, {}),
    "fashion_mnist": (lambda root: write_mnist(root, "FashionMNIST", gz=True), "test", "train", 30, 60, {}),
    "kmnist": (lambda root: write_mnist(root, "KMNIST"), "test", "train", 30, 60, {}),
    "emnist": (lambda root: write_mnist(root, "EMNIST", emnist_split="letters"), "test", "train", 30, 60,
               {"split": "letters"}),
    "svhn": (write_svhn, "test", "extra", 30, 20, {}),
    "stl10": (write_stl10, "test", "train", 20, 40, {}),
}
FILES = {
    "flowers102": (write_flowers, "val", "train", 10, 10, {}),
    "food101": (write_food, "test", "train", 6, 12, {}),
    "oxford_pet": (write_pets, "test", "trainval", 8, 12, {}),
    "tiny_imagenet": (write_tiny_imagenet, "val", "train", 7, 12, {}),
}
ALL = {**ARRAYS, **FILES}


def factories(name):
    return getattr(dali_loaders, f"get_{name}_iter_dali"), getattr(dali_loaders, f"get_{name}_iter_torch")


@pytest.fixture(scope="module")
def roots(tmp_path_factory):
    """Every dataset written once, each under its own root."""
    made = {}
    for name, (write, *_) in ALL.items():
        made[name] = write(str(tmp_path_factory.mktemp(name)))
    return made


def unnormalize(images, mean, std):
    """Normalized float NCHW back to uint8 NHWC."""
    channels = images.shape[1]
    mean = torch.tensor(mean).view(1, channels, 1, 1)
    std = torch.tensor(std).view(1, channels, 1, 1)
    return ((images * std + mean) * 255).round().clamp(0, 255).to(torch.uint8).permute(0, 2, 3, 1).numpy()


def sample_ids(name, images):
    """Which sample each image is, from its pixels (the writers make images that say so)."""
    if name in ARRAYS:
        return read_index(unnormalize(images, recipes.DATASET_MEAN[name], recipes.DATASET_STD[name]))
    mean, std = ((recipes.DATASET_MEAN[name], recipes.DATASET_STD[name]) if name == "tiny_imagenet"
                 else (recipes.IMAGENET_MEAN, recipes.IMAGENET_STD))
    pixels = unnormalize(images, mean, std).astype(np.float64)
    return np.array([image_id(p.reshape(-1, 3).mean(axis=0)) for p in pixels])


def one_pass(name, loader):
    ids, labels = [], []
    for images, y in loader:
        ids.append(sample_ids(name, images))
        labels.append(y.numpy())
    return np.concatenate(ids), np.concatenate(labels)


# 1. val parity with the twin ---------------------------------------------------------------


@pytest.mark.parametrize("name", list(ALL))
def test_val_matches_the_twin(roots, name):
    _, val, _, n_val, _, kwargs = ALL[name]
    dali, twin = factories(name)
    a = dali(val, roots[name], 4, 1, **kwargs)
    b = twin(val, roots[name], 4, 0, **kwargs)
    assert len(a) == len(b) == -(-n_val // 4)
    assert len(a.dataset) == len(b.dataset) == n_val
    batches = 0
    for (x, y), (u, v) in zip(a, b, strict=True):
        assert x.dtype == torch.float32 and x.shape == u.shape
        assert torch.equal(y, v)
        assert (x - u).abs().max().item() <= 1e-5
        batches += 1
    assert batches == len(a)


def test_twins_are_torchvision_classes_where_they_read_the_files(roots):
    from torchvision import datasets

    for name, cls in (("mnist", datasets.MNIST), ("kmnist", datasets.KMNIST), ("emnist", datasets.EMNIST),
                      ("food101", datasets.Food101), ("oxford_pet", datasets.OxfordIIITPet)):
        _, val, _, _, _, kwargs = ALL[name]
        assert isinstance(factories(name)[1](val, roots[name], 4, 0, **kwargs).dataset, cls), name


@pytest.mark.parametrize("name", ["mnist", "emnist"])
def test_grey_images_stay_one_channel(roots, name):
    _, val, _, _, _, kwargs = ALL[name]
    images, _ = next(iter(factories(name)[0](val, roots[name], 4, 1, **kwargs)))
    assert images.shape == (4, 1, 28, 28)


def test_grey_images_through_a_transform_that_makes_them_rgb(roots):
    from torchvision.transforms import v2

    recipe = v2.Compose([v2.Grayscale(3), v2.Resize(32), v2.ToImage(), v2.ToDtype(torch.float32, scale=True)])
    dali, twin = factories("mnist")
    (x, _), (u, _) = next(iter(dali("test", roots["mnist"], 4, 1, transform=recipe))), \
        next(iter(twin("test", roots["mnist"], 4, 0, transform=recipe)))
    assert x.shape == u.shape == (4, 3, 32, 32)
    assert (x - u).abs().max().item() <= 1 / 255 + 1e-6


# 2. every sample once per epoch, with its label ----------------------------------------------


def expected_label(name, ids):
    """The label the writer gave the train images `ids`."""
    if name in ARRAYS:
        return ids % 10
    if name == "flowers102":
        return (ids + 1) % 5    # image k (id k - 1) has class k % 5 + 1, label k % 5
    if name == "food101":
        return np.array([1, 0, 2])[ids // 4]   # JSON order ramen, apple_pie, sushi; sorted labels
    if name == "oxford_pet":
        return ids // 3         # three trainval images per breed
    return ids // 4             # tiny_imagenet: four per wnid, wnids sorted


@pytest.mark.parametrize("name", list(ALL))
def test_every_train_sample_once_per_epoch_with_its_label(roots, name):
    _, val, train, n_val, n_train, kwargs = ALL[name]
    transform = recipes.normalized("tiny_imagenet") if name in FILES else None   # flat colours, any size
    if name in FILES and name != "tiny_imagenet":
        from torchvision.transforms import v2
        transform = v2.Compose([v2.RandomResizedCrop(16, antialias=True), v2.RandomHorizontalFlip()]
                               + recipes.to_float(recipes.IMAGENET_MEAN, recipes.IMAGENET_STD))
    loader = factories(name)[0](train, roots[name], 5, 2, seed=3, transform=transform, **kwargs)
    assert len(loader) == -(-n_train // 5) and len(loader.dataset) == n_train
    orders = []
    for _ in range(2):
        ids, labels = one_pass(name, loader)
        assert len(ids) == n_train and len(np.unique(ids)) == n_train     # each sample once
        assert np.array_equal(labels, expected_label(name, ids))
        orders.append(ids)
    assert not np.array_equal(orders[0], orders[1])
    twin = factories(name)[1](train, roots[name], 5, 0, seed=3, transform=transform, **kwargs)
    assert np.array_equal(one_pass(name, twin)[0], orders[0])


def test_food_and_pet_labels_follow_their_metadata(roots):
    food = dali_loaders.get_food101_iter_dali("test", roots["food101"], 3, 1)
    assert food.dataset.classes == ["apple_pie", "ramen", "sushi"]
    assert torch.cat([y for _, y in food]).tolist() == [1, 1, 0, 0, 2, 2]   # JSON order: ramen, apple_pie, sushi
    pets = dali_loaders.get_oxford_pet_iter_dali("test", roots["oxford_pet"], 3, 1)
    assert torch.cat([y for _, y in pets]).tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    assert pets.dataset.classes == ["Abyssinian", "American Bulldog", "Bengal", "Yorkshire Terrier"]


def test_svhn_label_10_is_0(roots):
    labels = torch.cat([y for _, y in dali_loaders.get_svhn_iter_dali("test", roots["svhn"], 8, 1)])
    assert labels.tolist() == [i % 10 for i in range(50, 80)] and 10 not in labels.tolist()


def test_stl10_unlabeled_and_folds(roots):
    root = roots["stl10"]
    mixed = dali_loaders.get_stl10_iter_dali("train+unlabeled", root, 64, 1, seed=0)
    ids, labels = one_pass("stl10", mixed)
    assert sorted(ids) == list(range(40)) + list(range(60, 70))
    assert np.array_equal(labels, np.where(ids >= 60, -1, ids % 10))
    fold = [int(i) for i in open(os.path.join(root, "stl10_binary", "fold_indices.txt")).read().splitlines()[3].split()]
    loader = dali_loaders.get_stl10_iter_dali("test", root, 64, 1)
    assert len(loader.dataset) == 20
    folded = dali_loaders.get_stl10_iter_dali("train", root, 64, 1, folds=3, seed=1)
    assert sorted(one_pass("stl10", folded)[0]) == sorted(fold)
    with pytest.raises(ValueError, match="folds"):
        dali_loaders.get_stl10_iter_dali("train", root, 64, 1, folds=10)


def test_stl10_rows_and_columns_as_torchvision(roots):
    """The writer blacks out a 10-row x 5-column corner; torchvision's reading keeps it so."""
    images, _ = next(iter(dali_loaders.get_stl10_iter_dali("test", roots["stl10"], 2, 1)))
    pixels = unnormalize(images, recipes.DATASET_MEAN["stl10"], recipes.DATASET_STD["stl10"])
    dark = (pixels[0].max(axis=-1) == 0)
    assert dark[:10, :5].all() and not dark[:10, 5:].any() and not dark[10:, :5].any()


# 3. named errors -------------------------------------------------------------------------------

# name -> the file a split needs, relative to its root, and a way to damage it
NEEDED = {
    "mnist": "MNIST/raw/t10k-images-idx3-ubyte",
    "fashion_mnist": "FashionMNIST/raw/t10k-labels-idx1-ubyte.gz",
    "kmnist": "KMNIST/raw/t10k-labels-idx1-ubyte",
    "emnist": "EMNIST/raw/emnist-letters-test-images-idx3-ubyte",
    "svhn": "test_32x32.mat",
    "stl10": "stl10_binary/test_X.bin",
    "flowers102": "flowers-102/setid.mat",
    "food101": "food-101/meta/test.json",
    "oxford_pet": "oxford-iiit-pet/annotations/test.txt",
    "tiny_imagenet": "tiny-imagenet-200/val/val_annotations.txt",
}


def copy_of(roots, name, tmp_path):
    return shutil.copytree(roots[name], str(tmp_path / name))


@pytest.mark.parametrize("name", list(ALL))
def test_a_missing_file_is_named(roots, name, tmp_path):
    root = copy_of(roots, name, tmp_path)
    os.remove(os.path.join(root, NEEDED[name]))
    _, val, _, _, _, kwargs = ALL[name]
    for factory in factories(name):
        with pytest.raises(FileNotFoundError, match=os.path.basename(NEEDED[name]).replace(".gz", "")):
            factory(val, root, 4, 1, **kwargs)


@pytest.mark.parametrize("name", list(ALL))
def test_a_truncated_file_is_named(roots, name, tmp_path):
    root = copy_of(roots, name, tmp_path)
    path = os.path.join(root, NEEDED[name])
    data = open(path, "rb").read()
    with open(path, "wb") as f:
        f.write(data[:len(data) * 2 // 3 - 1])
    _, val, _, _, _, kwargs = ALL[name]
    with pytest.raises(ValueError, match=os.path.basename(path)):
        factories(name)[0](val, root, 4, 1, **kwargs)


def test_a_malformed_idx_header_is_named(roots, tmp_path):
    root = copy_of(roots, "mnist", tmp_path)
    path = os.path.join(root, "MNIST/raw/t10k-images-idx3-ubyte")
    data = bytearray(open(path, "rb").read())
    data[2] = 0x0D   # float32, not uint8
    open(path, "wb").write(bytes(data))
    with pytest.raises(ValueError, match="t10k-images-idx3-ubyte.*not an idx file"):
        dali_loaders.get_mnist_iter_dali("test", root, 4, 1)


def test_images_and_labels_of_different_downloads_are_refused(roots, tmp_path):
    root = copy_of(roots, "mnist", tmp_path)
    raw = os.path.join(root, "MNIST/raw")
    shutil.copy(os.path.join(raw, "train-labels-idx1-ubyte"), os.path.join(raw, "t10k-labels-idx1-ubyte"))
    with pytest.raises(ValueError, match="same download"):
        dali_loaders.get_mnist_iter_dali("test", root, 4, 1)


@pytest.mark.parametrize("name", list(FILES))
def test_an_undecodable_image_is_named(roots, name, tmp_path):
    root = copy_of(roots, name, tmp_path)
    _, val, _, _, _, kwargs = ALL[name]
    files = factories(name)[0](val, root, 4, 1, **kwargs).dataset.files
    write_garbage(files[5])
    with pytest.raises(ImageDecodeError, match=os.path.basename(files[5])) as failure:
        for _ in factories(name)[0](val, root, 4, 1, **kwargs):
            pass
    assert failure.value.path == files[5]
    # The twins raise ImageDecodeError too, but for OxfordIIITPet's, which is torchvision's own
    # class and opens images itself: PIL's error, which names the file as well.
    twin_error = Exception if name == "oxford_pet" else ImageDecodeError
    with pytest.raises(twin_error, match=os.path.basename(files[5])):
        for _ in factories(name)[1](val, root, 4, 0, **kwargs):
            pass


def test_a_listed_image_missing_from_disk_is_named(roots, tmp_path):
    root = copy_of(roots, "food101", tmp_path)
    os.remove(os.path.join(root, "food-101/images/sushi/1005.jpg"))
    with pytest.raises(FileNotFoundError, match="sushi/1005.jpg"):
        dali_loaders.get_food101_iter_dali("test", root, 4, 1)


def test_a_bad_split_name_is_refused(roots):
    with pytest.raises(ValueError, match="type must be one of"):
        dali_loaders.get_svhn_iter_dali("validation", roots["svhn"], 4, 1)
    with pytest.raises(ValueError, match="EMNIST's splits"):
        dali_loaders.get_emnist_iter_dali("test", roots["emnist"], 4, 1, split="letter")
