"""A pipeline of your own (DaliFunction): the user's DALI graph from decoded images, with the
library's epochs, sharding, resume and DataLoader manners kept."""
import os

import numpy as np
import pytest
import torch
from cifar_data import index_images, write_cifar
from image_data import image_id, write_solid_folder
from nvidia.dali import fn, types
from torchvision.datasets import ImageFolder
from torchvision.transforms import v2

from dali_loaders import (
    DaliFunction,
    get_cifar_iter_dali,
    get_cifar_iter_torch,
    get_imagefolder_iter_dali,
)
from dali_loaders.loader import serialized_gpu_graph
from dali_loaders.sources.image_files import ImageFiles


def small_flipped(images):
    """A user's graph: resize, a random flip and the conversion to float CHW on 0..1."""
    images = fn.resize(images, size=[12, 12])
    return fn.crop_mirror_normalize(images, mirror=fn.random.coin_flip(probability=0.5), dtype=types.FLOAT,
                                    output_layout="CHW", mean=[0.0] * 3, std=[255.0] * 3)


@pytest.fixture(scope="module")
def solid_dir(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("solid"))
    write_solid_folder(root, {"cat": 6, "dog": 5, "eel": 4})
    return root


def ids_of(images: torch.Tensor) -> list:
    return [image_id((image * 255).mean(dim=(1, 2)).tolist()) for image in images]


def epoch_of(loader):
    ids, labels = [], []
    for images, y in loader:
        assert images.shape[1:] == (3, 12, 12) and images.dtype == torch.float32
        ids += ids_of(images)
        labels += y.tolist()
    return ids, labels


def test_every_image_once_with_its_label_and_a_new_order_each_epoch(solid_dir):
    loader = get_imagefolder_iter_dali(solid_dir, 4, True, 1, seed=3, transform=DaliFunction(small_flipped))
    targets = ImageFolder(solid_dir).targets
    orders = []
    for _ in range(2):
        ids, labels = epoch_of(loader)
        assert sorted(ids) == list(range(15)) and labels == [targets[i] for i in ids]
        orders.append(ids)
    assert orders[0] != orders[1] and len(loader) == 4


def test_the_users_random_operators_run(tmp_path):
    """Coordinate-free check that the function's coin flip is applied: a left-dark,
    right-bright image comes out flipped in about half the samples."""
    root = write_cifar(str(tmp_path), n_train=200, n_test=10,
                       images=lambda n, offset: np.broadcast_to(
                           np.linspace(0, 255, 32).astype(np.uint8)[None, None, :, None], (n, 32, 32, 3)).copy())
    loader = get_cifar_iter_dali("train", root, 50, 1, seed=2, transform=DaliFunction(small_flipped))
    flipped = [bool(row[0] > row[-1]) for images, _ in loader for row in images[:, 0, 6, :]]
    assert len(flipped) == 200 and 70 <= sum(flipped) <= 130


def test_sharding_and_resume(solid_dir):
    def ids(rank):
        return epoch_of(get_imagefolder_iter_dali(solid_dir, 3, True, 1, seed=5, world_size=2, rank=rank,
                                                  transform=DaliFunction(small_flipped)))[0]

    shards = [ids(0), ids(1)]
    assert len(shards[0]) == len(shards[1]) == 7 and not set(shards[0]) & set(shards[1])
    loader = get_imagefolder_iter_dali(solid_dir, 4, True, 1, seed=8, transform=DaliFunction(small_flipped))
    epoch = iter(loader)
    next(epoch)
    state = loader.state_dict()
    rest = [images for images, _ in epoch]
    again = get_imagefolder_iter_dali(solid_dir, 4, True, 1, seed=1, transform=DaliFunction(small_flipped))
    again.load_state_dict(state)
    resumed = [images for images, _ in again]
    assert len(resumed) == len(rest) and all(torch.equal(a, b) for a, b in zip(rest, resumed))  # flips too


def test_translated_steps_may_come_first(tmp_path):
    root = write_cifar(str(tmp_path), n_train=10, n_test=10, images=index_images)
    loader = get_cifar_iter_dali("val", root, 5, 1, transform=v2.Compose([v2.Pad(2), DaliFunction(small_flipped)]))
    images, _ = next(iter(loader))
    assert images.shape == (5, 3, 12, 12)


def test_misuse_is_named(tmp_path, solid_dir):
    with pytest.raises(ValueError, match="must be the recipe's last step"):
        get_imagefolder_iter_dali(solid_dir, 4, True, 1, transform=v2.Compose([DaliFunction(small_flipped),
                                                                              v2.RandomHorizontalFlip()]))
    with pytest.raises(TypeError, match="needs a function"):
        DaliFunction(3)
    root = write_cifar(str(tmp_path), n_train=10, n_test=10)
    with pytest.raises(TypeError, match="runs only inside a DALI pipeline"):
        next(iter(get_cifar_iter_torch("val", root, 5, 0, transform=DaliFunction(small_flipped))))


def test_own_graph_passes_the_gpu_schemas(solid_dir):
    assert serialized_gpu_graph(ImageFiles(solid_dir), DaliFunction(small_flipped))


def test_the_readme_example_runs(solid_dir):
    """docs/usage.md's DaliFunction example, run as written (its folder and batch size swapped for the test's)."""
    readme = open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "usage.md")).read()
    block = next(b for b in readme.split("```python")[1:] if "DaliFunction(my_graph)" in b).split("```")[0]
    code = block.replace('"/data/train", 256', f"{solid_dir!r}, 4")
    scope = {}
    exec(code, scope)
    ids, labels = [], []
    for images, y in scope["loader"]:
        assert images.shape[1:] == (3, 144, 144)
        pixels = images * torch.tensor([58, 57, 57]).view(1, 3, 1, 1) + torch.tensor([124, 116, 104]).view(1, 3, 1, 1)
        ids += [image_id(p.mean(dim=(1, 2)).tolist()) for p in pixels]
        labels += y.tolist()
    targets = ImageFolder(solid_dir).targets
    assert sorted(ids) == list(range(15)) and labels == [targets[i] for i in ids]
