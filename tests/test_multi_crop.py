"""FiveCrop and TenCrop read as views: the loader's list of batches, one per crop, against
DataLoader's over the same ImageFolder and transform (torchvision's tuple, collated); the
recipes that stay on the Python path (a random or v1 step, or a Lambda, after the crops)."""
import numpy as np
import pytest
import torch
from image_data import write_jpeg
from torchvision import datasets
from torchvision import transforms as v1
from torchvision.transforms import v2

from dali_loaders import DaliLoader, transforms
from dali_loaders.sources.arrays import ArraySource

pytest.importorskip("nvidia.dali")

FLOAT = [v2.ToImage(), v2.ToDtype(torch.float32, scale=True)]


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """JPEGs of several sizes (each side at least 70), two classes."""
    folder = tmp_path_factory.mktemp("crops")
    for k, (width, height) in enumerate([(90, 70), (71, 100), (120, 81), (77, 77), (100, 95)]):
        (folder / f"c{k % 2}").mkdir(exist_ok=True)
        write_jpeg(str(folder / f"c{k % 2}" / f"{k}.JPEG"), width, height, seed=k)
    return str(folder)


def batches(loader):
    return [(list(images), labels) for images, labels in loader]


CASES = [
    ("FiveCrop", v2.Compose([v2.FiveCrop(40), *FLOAT]), 5, 0.0),
    ("TenCrop after a shared CenterCrop", v2.Compose([v2.CenterCrop(64), v2.TenCrop((40, 30)), *FLOAT]), 10, 0.0),
    ("TenCrop vertical, odd margins, Normalize", v2.Compose([v2.ToImage(), v2.TenCrop(33, vertical_flip=True),
                                                            *FLOAT[1:], v2.Normalize([0.5] * 3, [0.2] * 3)]), 10,
     1e-6),
    ("v1 FiveCrop, then v2's steps", v2.Compose([v1.FiveCrop((31, 52)), *FLOAT]), 5, 0.0),
    # the crops resized: DALI's PIL-exact resize, a level at most
    ("Resize, TenCrop, Resize each", v2.Compose([v2.Resize(70), v2.TenCrop(56), v2.Resize(40), *FLOAT]), 10, 1.01 / 255),
]


@pytest.mark.parametrize("name,transform,count,tolerance", CASES, ids=[case[0] for case in CASES])
def test_the_crops_are_torchvisions(root, name, transform, count, tolerance):
    recipe = transforms.plan(transform, python_fallback=False)
    assert isinstance(recipe, transforms.Views) and len(recipe.plans) == count
    ours = batches(DaliLoader(datasets.ImageFolder(root, transform=transform), batch_size=2, num_workers=2))
    theirs = batches(torch.utils.data.DataLoader(datasets.ImageFolder(root, transform=transform), batch_size=2))
    assert len(ours) == len(theirs) == 3
    for (mine, my_labels), (their, their_labels) in zip(ours, theirs):
        assert len(mine) == len(their) == count
        assert torch.equal(my_labels, their_labels)
        for crop, their_crop in zip(mine, their):
            assert crop.shape == their_crop.shape and crop.dtype == their_crop.dtype
            assert float((crop - their_crop).abs().max()) <= tolerance, name


def test_every_crop_differs_where_the_image_does(tmp_path):
    """An image whose pixels encode their place: each of the ten crops shows its own window,
    the last five mirrored."""
    x, y = np.meshgrid(np.arange(64), np.arange(48))
    pixels = np.stack([x * 3, y * 5, np.full_like(x, 255)], axis=-1).astype(np.uint8)
    source = ArraySource(pixels[None], np.zeros(1, dtype=np.int64), "coordinates")
    transform = v2.Compose([v2.TenCrop((20, 30)), v2.ToImage()])
    crops, _ = next(iter(DaliLoader(source, batch_size=1, transform=transform)))
    corners = [(int(c[0, 1, 0, 0]) // 5, int(c[0, 0, 0, 0]) // 3) for c in crops]   # (row, column) at top left
    assert corners[:5] == [(0, 0), (0, 34), (28, 0), (28, 34), (14, 17)]
    assert corners[5:] == [(0, 63), (0, 29), (28, 63), (28, 29), (14, 46)]   # mirrored: the right edge first


@pytest.mark.parametrize("transform", [
    v2.Compose([v2.FiveCrop(40), v2.RandomHorizontalFlip(), *FLOAT]),   # one draw for the whole tuple
    v2.Compose([v2.FiveCrop(40), v2.Lambda(lambda crops: torch.stack([v2.PILToTensor()(c) for c in crops]))]),
    v1.Compose([v1.TenCrop(40), v1.Lambda(lambda crops: torch.stack([v1.PILToTensor()(c) for c in crops]))]),
    v2.Compose([v2.FiveCrop(20), v2.FiveCrop(10), *FLOAT]),
], ids=["random step after", "v2 Lambda after", "v1 Lambda after", "two makers"])
def test_other_steps_after_the_crops_take_the_python_path(transform):
    recipe = transforms.plan(transform, python_fallback=True)
    assert isinstance(recipe, transforms.Plan)
    assert type(recipe.python[0]).__name__ in ("FiveCrop", "TenCrop") and "read as views" in recipe.why


def test_the_python_path_gives_torchvisions_stacked_crops(root):
    transform = v1.Compose([v1.TenCrop(40), v1.Lambda(lambda crops: torch.stack([v1.PILToTensor()(c) for c in crops]))])
    ours = batches(DaliLoader(datasets.ImageFolder(root, transform=transform), batch_size=2, python_fallback=True))
    theirs = batches(torch.utils.data.DataLoader(datasets.ImageFolder(root, transform=transform), batch_size=2))
    assert len(ours) == len(theirs) == 3
    for (mine, _), (their, _) in zip(ours, theirs):
        assert all(a.shape == (10, 3, 40, 40) and torch.equal(a, b) for a, b in zip(mine, their))


def test_crops_left_as_a_tuple_in_python_are_refused_by_name(root):
    transform = v2.Compose([v2.FiveCrop(40), v2.RandomHorizontalFlip(), *FLOAT])
    with pytest.raises(Exception, match="FiveCrop.*5 images a sample"):
        batches(DaliLoader(datasets.ImageFolder(root, transform=transform), batch_size=2, python_fallback=True))


@pytest.mark.parametrize("variant", ["gpu", "cpu-decode"])
def test_the_gpu_graph_of_the_crops_has_no_gpu_to_cpu_edge(root, variant):
    from test_gpu_graphs import gpu_to_cpu_edges

    from dali_loaders.loader.build import serialized_gpu_graph
    from dali_loaders.sources.image_files import ImageFiles

    transform = v2.Compose([v2.Resize(70), v2.TenCrop(56), *FLOAT, v2.Normalize([0.5] * 3, [0.2] * 3)])
    graph = serialized_gpu_graph(ImageFiles(root), transform, variant=variant)
    assert gpu_to_cpu_edges(graph) == []
