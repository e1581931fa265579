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
    v1.Compose([v1.TenCrop(40), v1.Lambda(lambda crops: torch.stack([v1.CenterCrop(20)(c) for c in crops]))]),
    v1.Compose([v1.TenCrop(40), v1.Lambda(lambda crops: torch.stack([v1.Resize(SIZE)(c) for c in crops]))]),
    v1.Compose([v1.TenCrop(40), v1.Lambda(lambda crops: torch.cat([v1.PILToTensor()(c) for c in crops]))]),
    v1.Compose([v1.TenCrop(40), v1.Lambda(lambda crops: torch.stack([v1.PILToTensor()(c) for c in crops])),
                v1.Resize(20)]),
    v2.Compose([v2.FiveCrop(20), v2.FiveCrop(10), *FLOAT]),
], ids=["random step after", "v2 Lambda after (called on each crop)", "v1 Lambda stacking PIL crops",
        "v1 Lambda with a variable's argument", "v1 Lambda not stacking", "a v1 step after the stack", "two makers"])
def test_other_steps_after_the_crops_take_the_python_path(transform):
    recipe = transforms.plan(transform, python_fallback=True)
    assert isinstance(recipe, transforms.Plan)
    assert type(recipe.python[0]).__name__ in ("FiveCrop", "TenCrop") and "read as views" in recipe.why


def ten_crop_eval():
    """The ten-crop evaluation of older ImageNet scripts: normalize, a variable of the function
    that builds the recipe, applied in the Lambda."""
    normalize = v1.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
    return v1.Compose([v1.Resize(72), v1.TenCrop(56),
                       v1.Lambda(lambda crops: torch.stack([normalize(v1.ToTensor()(crop))
                                                            for crop in crops]))])


NORMALIZE = v1.Normalize([0.5, 0.4, 0.3], [0.2, 0.25, 0.3])
SIZE = 20

STACKED = [
    ("torchvision's docs", v1.Compose([v1.TenCrop(40), v1.Lambda(lambda crops: torch.stack([v1.PILToTensor()(crop)
                                                                                           for crop in crops]))]),
     10, 0.0),
    ("ten-crop evaluation", ten_crop_eval(), 10, 1e-5),
    ("two stacking Lambdas", v1.Compose([v1.FiveCrop(40), v1.Lambda(lambda crops: torch.stack([v1.ToTensor()(c) for c in crops])),
                                         v1.Lambda(lambda crops: torch.stack([NORMALIZE(c) for c in crops]))]), 5, 1e-5),
    ("Normalize on the stack, v2 steps before", v2.Compose([
        v2.Resize(60), v2.FiveCrop(44), v2.ToImage(), v2.CenterCrop(40),
        v1.Lambda(lambda crops: torch.stack([v2.ToDtype(torch.float32, scale=True)(c) for c in crops], dim=0)),
        v1.Normalize([0.5, 0.4, 0.3], [0.2, 0.25, 0.3])]), 5, 1.01 / 255 / 0.2),
]


@pytest.mark.parametrize("memory_format", [torch.contiguous_format, torch.channels_last], ids=["NCHW", "NHWC"])
@pytest.mark.parametrize("name,transform,count,tolerance", STACKED, ids=[case[0] for case in STACKED])
def test_stacked_crops_are_torchvisions(root, name, transform, count, tolerance, memory_format):
    """v1's Lambda(lambda crops: torch.stack([... for crop in crops])), as torchvision's docs
    batch the crops: read as views, each sample's stacked, (B, crops, C, H, W), equal to
    DataLoader's batches, in either layout the graph makes them."""
    recipe = transforms.plan(transform, python_fallback=False)
    assert isinstance(recipe, transforms.Views) and recipe.stacked and len(recipe.plans) == count
    loader = DaliLoader(datasets.ImageFolder(root, transform=transform), batch_size=2, num_workers=2,
                        memory_format=memory_format)
    assert loader.route == "dali"
    theirs = list(torch.utils.data.DataLoader(datasets.ImageFolder(root, transform=transform), batch_size=2))
    ours = list(loader)
    assert len(ours) == len(theirs) == 3
    for (images, labels), (their_images, their_labels) in zip(ours, theirs):
        assert torch.equal(labels, their_labels)
        assert images.shape == their_images.shape and images.shape[1] == count and images.dtype == their_images.dtype
        assert float((images.float() - their_images.float()).abs().max()) <= tolerance, name


@pytest.mark.parametrize("variant", ["cpu", "gpu"])
def test_the_crops_are_stacked_in_the_graph(root, variant):
    """The pipeline hands over one tensor of stacked views, not a tensor per crop for the loader's
    thread to copy together."""
    from dali_loaders import dali_compat
    from dali_loaders.loader.build import output_names, serialized_gpu_graph
    from dali_loaders.sources.image_files import ImageFiles

    assert output_names(transforms.plan(ten_crop_eval(), python_fallback=False), host_labels=False) == \
        ["images", "labels"]
    graph = serialized_gpu_graph(ImageFiles(root), ten_crop_eval(), variant=variant)
    (images, device), _ = dali_compat.graph_outputs(graph)
    made_by = {name: (kind, len(inputs)) for kind, name, _, inputs in dali_compat.graph_operators(graph)}
    assert made_by[images] == ("Stack", 10) and device == ("cpu" if variant == "cpu" else "gpu")


def test_stacked_crops_reach_a_collate_fn_as_each_samples_stack(root):
    """collate_fn on the DALI path gets the items the dataset returns: each image (crops, C, H, W)."""
    transform = ten_crop_eval()
    seen = []

    def collate(items):
        seen.append([tuple(image.shape) for image, _ in items])
        return torch.utils.data.default_collate(items)

    loader = DaliLoader(datasets.ImageFolder(root, transform=transform), batch_size=2, collate_fn=collate)
    assert loader.route == "dali"
    ours = list(loader)
    theirs = list(torch.utils.data.DataLoader(datasets.ImageFolder(root, transform=transform), batch_size=2))
    assert seen[0] == [(10, 3, 56, 56)] * 2
    for (images, labels), (their_images, their_labels) in zip(ours, theirs, strict=True):
        assert torch.equal(labels, their_labels) and float((images - their_images).abs().max()) <= 1e-5


def test_the_python_path_gives_torchvisions_stacked_crops(root):
    transform = v1.Compose([v1.TenCrop(40), v1.Lambda(lambda crops: torch.stack([v1.PILToTensor()(c) for c in crops])),
                            v1.Resize(40)])
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

    for transform in (v2.Compose([v2.Resize(70), v2.TenCrop(56), *FLOAT, v2.Normalize([0.5] * 3, [0.2] * 3)]),
                      ten_crop_eval()):
        graph = serialized_gpu_graph(ImageFiles(root), transform, variant=variant)
        assert gpu_to_cpu_edges(graph) == []


class Recording:
    """A user's class: reading a lambda must neither build nor call it."""
    built = 0

    def __init__(self):
        Recording.built += 1

    def __call__(self, crop):
        return crop


def test_reading_a_stacking_lambda_builds_only_torchvisions_classes():
    transform = v1.Compose([v1.TenCrop(40), v1.Lambda(lambda crops: torch.stack([Recording()(v1.PILToTensor()(c))
                                                                                for c in crops]))])
    recipe = transforms.plan(transform, python_fallback=True)
    assert isinstance(recipe, transforms.Plan) and "read as views" in recipe.why
    assert Recording.built == 0
