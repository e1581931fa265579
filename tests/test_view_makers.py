"""View makers as self-supervised repos write them (MoCo's TwoCropsTransform, SimCLR's view
generator, DINO's crops): read from their source, each view one branch of the DALI graph, the
batch a list of view batches as DataLoader's default_collate makes it."""
import os
import warnings

import pytest
import torch
from image_data import image_id, solid_colour, write_coordinate_folder
from PIL import Image
from torch.utils.data import default_collate
from torchvision import datasets
from torchvision import transforms as v1
from torchvision.transforms import v2
from views_check import assert_resumes_bit_for_bit, assert_views_near

from dali_loaders import DaliLoader, TorchLoader, dali_compat, transforms
from dali_loaders.bench.catalog import TwoCropsTransform   # MoCo v2's, as its repository writes it
from dali_loaders.loader import build
from dali_loaders.loader.build import serialized_gpu_graph
from dali_loaders.loader.resolve import PythonPathNote

# -- view makers as the repos write them -------------------------------------------------------


class TwoTransforms:
    """MoCo v3's and BYOL's: each view its own transform."""

    def __init__(self, base_transform1, base_transform2):
        self.base_transform1 = base_transform1
        self.base_transform2 = base_transform2

    def __call__(self, x):
        im1 = self.base_transform1(x)
        im2 = self.base_transform2(x)
        return [im1, im2]


class ViewGenerator:
    """SimCLR's: n views by one transform."""

    def __init__(self, base_transform, n_views=2):
        self.base_transform = base_transform
        self.n_views = n_views

    def __call__(self, x):
        return [self.base_transform(x) for i in range(self.n_views)]


class GlobalAndLocal:
    """DINO's: global crops, then local crops."""

    def __init__(self, global1, global2, local, local_crops_number):
        self.global1, self.global2, self.local = global1, global2, local
        self.local_crops_number = local_crops_number

    def __call__(self, image):
        crops = []
        crops.append(self.global1(image))
        crops.append(self.global2(image))
        for _ in range(self.local_crops_number):
            crops.append(self.local(image))
        return crops


class PairOfTuple:
    def __init__(self, a, b):
        self.a, self.b = a, b

    def __call__(self, x):
        return self.a(x), self.b(x)


class MultiViewTransform:
    """lightly's: a view by each transform of a list."""

    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, image):
        return [transform(image) for transform in self.transforms]


class Preset:
    """A wrapper, as torchvision's reference presets: it only hands the image on."""

    def __init__(self, transform):
        self.transform = transform

    def __call__(self, image):
        return self.transform(image)


A, B, C = v2.RandomHorizontalFlip(), v2.RandomVerticalFlip(), v2.RandomGrayscale()


@pytest.mark.parametrize("maker,expected", [
    (TwoCropsTransform(A), [A, A]),
    (TwoTransforms(A, B), [A, B]),
    (ViewGenerator(A, 3), [A, A, A]),
    (GlobalAndLocal(A, B, C, 4), [A, B, C, C, C, C]),
    (PairOfTuple(B, A), [B, A]),
    (MultiViewTransform([C, A, B]), [C, A, B]),
    (MultiViewTransform((A,)), [A]),
    (Preset(Preset(TwoTransforms(B, C))), [B, C]),
])
def test_view_makers_are_read_from_their_source(maker, expected):
    views = transforms.made_views(maker)
    assert views is not None and len(views) == len(expected)
    assert all(view is want for view, want in zip(views, expected))
    recipe = transforms.plan(maker, python_fallback=False)
    assert isinstance(recipe, transforms.Views) and [plan.translated for plan in recipe.plans] == [[v] for v in expected]
    assert transforms.untranslatable_reason(maker) is None


class SameDrawTwice:
    def __init__(self, t):
        self.t = t

    def __call__(self, x):
        q = self.t(x)
        return [q, q]   # one draw, shown twice: not two views


class LoopVariableRead:
    def __init__(self, t):
        self.t = t

    def __call__(self, x):
        return [self.t(x) for x in range(2)]


class DoesMore:
    def __init__(self, t):
        self.t = t

    def __call__(self, x):
        x = x.convert("RGB")
        return [self.t(x), self.t(x)]


class CountIsAProperty:
    def __init__(self, t):
        self.t = t

    @property
    def n(self):
        return 2

    def __call__(self, x):
        return [self.t(x) for _ in range(self.n)]


class UnusedView:
    def __init__(self, t):
        self.t = t

    def __call__(self, x):
        q = self.t(x)
        k = self.t(x)
        return [q]


class ConditionalAppend:
    def __init__(self, t):
        self.t, self.extra = t, True

    def __call__(self, x):
        crops = []
        crops.append(self.t(x))
        if self.extra:
            crops.append(self.t(x))
        return crops


class EachTransformOfItself:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, image):
        return [image(transform) for transform in self.transforms]


@pytest.mark.parametrize("maker", [SameDrawTwice(A), LoopVariableRead(A), DoesMore(A), CountIsAProperty(A),
                                   UnusedView(A), ConditionalAppend(A), ViewGenerator(A, 0), ViewGenerator(A, 2.0),
                                   MultiViewTransform([]), MultiViewTransform([A, len]), MultiViewTransform(A),
                                   EachTransformOfItself([A])])
def test_what_is_not_only_views_is_not_read_as_views(maker):
    assert transforms.made_views(maker) is None
    # the loader takes the Python path, as DataLoader, and says why
    assert "; nor a view maker: " in transforms.untranslatable_reason(maker)


def test_a_view_maker_inside_another_transform_is_named_so():
    reason = transforms.untranslatable_reason(v2.Compose([v2.RandomHorizontalFlip(), TwoCropsTransform(A)]))
    assert "TwoCropsTransform" in reason and "where it must be the whole transform" in reason


# -- the loader ----------------------------------------------------------------------------------

COUNT = 40
COORDINATE_IMAGES = 40   # 200 x 160 each


@pytest.fixture(scope="module")
def solid_root(tmp_path_factory):
    """Image i is one flat colour that says i (image_data.solid_colour), as a PNG; class i % 3."""
    root = tmp_path_factory.mktemp("views_solid")
    for i in range(COUNT):
        folder = os.path.join(root, f"class_{i % 3}")
        os.makedirs(folder, exist_ok=True)
        Image.new("RGB", (40 + i % 7, 36 + i % 5), solid_colour(i)).save(os.path.join(folder, f"{i:03d}.png"))
    return str(root)


@pytest.fixture(scope="module")
def coordinate_root(written_once):
    return written_once(write_coordinate_folder, COORDINATE_IMAGES, 200, 160)


def crops(size, scale=(0.2, 1.0)):
    return v2.Compose([v2.RandomResizedCrop(size, scale=scale, antialias=True), v2.RandomHorizontalFlip(),
                       v2.RandomApply([v2.ColorJitter(0.4, 0.4, 0.4, 0.1)], p=0.8), v2.ToImage(),
                       v2.ToDtype(torch.float32, scale=True)])


def epoch_of(loader):
    return [(list(views), labels) for views, labels in loader]


def test_each_sample_s_views_show_its_image_and_every_image_comes_once(solid_root):
    dataset = datasets.ImageFolder(solid_root, transform=TwoCropsTransform(
        v2.Compose([v2.RandomResizedCrop(16, antialias=True), v2.RandomHorizontalFlip(), v2.PILToTensor()])))
    with warnings.catch_warnings():
        warnings.simplefilter("error", PythonPathNote)
        loader = DaliLoader(dataset, batch_size=8, shuffle=True, num_workers=2, seed=3)
    assert loader.route == "dali"
    ids = []
    for views, labels in loader:
        assert isinstance(views, list) and len(views) == 2
        assert all(view.shape == (len(labels), 3, 16, 16) and view.dtype == torch.uint8 for view in views)
        shown = [[image_id(view[k].float().mean((1, 2)).tolist()) for view in views] for k in range(len(labels))]
        for (first, second), label in zip(shown, labels.tolist()):
            assert first == second and first % 3 == label   # image i is of class i % 3
            ids.append(first)
    assert sorted(ids) == list(range(COUNT)) and ids != list(range(COUNT))


def windows(view):
    """The crop window of each image of a batch of crops of coordinate PNGs (x = red, y =
    green), as the fraction of the 200 x 160 image's area it covers."""
    pixels = view.float() * 255
    width = pixels[:, 0].amax((1, 2)) - pixels[:, 0].amin((1, 2))
    height = pixels[:, 1].amax((1, 2)) - pixels[:, 1].amin((1, 2))
    return (width + 1) * (height + 1) / (200 * 160)


def test_each_view_follows_its_own_transform_and_draws_its_own_window(coordinate_root):
    big = v2.Compose([v2.RandomResizedCrop(24, scale=(0.8, 1.0), antialias=True), v2.ToImage(),
                      v2.ToDtype(torch.float32, scale=True)])
    small = v2.Compose([v2.RandomResizedCrop(24, scale=(0.05, 0.15), antialias=True), v2.ToImage(),
                        v2.ToDtype(torch.float32, scale=True)])
    dataset = datasets.ImageFolder(coordinate_root, transform=GlobalAndLocal(big, big, small, 2))
    loader = DaliLoader(dataset, batch_size=10, num_workers=2, seed=1)
    areas = [torch.cat(parts) for parts in zip(*[[windows(view) for view in views] for views, _ in loader])]
    assert len(areas) == 4
    assert all(0.6 < float(a.min()) for a in areas[:2]) and all(float(a.max()) < 0.25 for a in areas[2:])
    for first, second in ((0, 1), (2, 3)):   # the same transform, drawn apart
        assert float((areas[first] - areas[second]).abs().max()) > 0.01


def test_deterministic_views_are_torchvision_s_pixels(coordinate_root):
    first = v1.Compose([v1.Resize(20), v1.CenterCrop(18), v1.PILToTensor()])
    second = v1.Compose([v1.CenterCrop(100), v1.Resize((12, 30)), v1.PILToTensor()])
    dataset = datasets.ImageFolder(coordinate_root, transform=TwoTransforms(first, second))
    ours = DaliLoader(dataset, batch_size=16, num_workers=2)
    assert assert_views_near(ours, torch.utils.data.DataLoader(dataset, batch_size=16)) == len(ours)


def test_views_resume_mid_epoch_bit_for_bit(solid_root):
    def make():
        return DaliLoader(datasets.ImageFolder(solid_root, transform=ViewGenerator(crops(16), 3)), batch_size=8,
                          shuffle=True, num_workers=2, seed=11)

    again = assert_resumes_bit_for_bit(make)
    assert not torch.equal(again[0][0][0], again[0][0][1])   # three draws, not one


def test_collate_fn_gets_dataloader_s_items_with_their_views(solid_root):
    seen = []

    def collate(items):
        seen.append(items)
        return default_collate(items)

    transform = TwoCropsTransform(crops(16))
    plain = epoch_of(DaliLoader(datasets.ImageFolder(solid_root, transform=transform), batch_size=8, num_workers=2,
                                seed=4))
    collated = epoch_of(DaliLoader(datasets.ImageFolder(solid_root, transform=transform), batch_size=8,
                                   num_workers=2, seed=4, collate_fn=collate))
    item = seen[0][0]
    assert isinstance(item[0], list) and len(item[0]) == 2 and item[0][0].shape == (3, 16, 16)
    assert isinstance(item[1], int)
    for (views, labels), (want, want_labels) in zip(collated, plain, strict=True):
        assert torch.equal(labels, want_labels)
        assert all(torch.equal(view, other) for view, other in zip(views, want, strict=True))


def test_the_twin_and_channels_last_keep_the_list_of_views(solid_root):
    transform = ViewGenerator(v2.Compose([v2.Resize((12, 14)), v2.ToImage(), v2.ToDtype(torch.float32, scale=True)]))
    for loader_class in (DaliLoader, TorchLoader):
        loader = loader_class(datasets.ImageFolder(solid_root, transform=transform), batch_size=8,
                              memory_format=torch.channels_last)
        views, labels = next(iter(loader))
        assert isinstance(views, list) and len(views) == 2 and len(labels) == 8
        assert all(view.shape == (8, 3, 12, 14) and view.is_contiguous(memory_format=torch.channels_last)
                   for view in views)


def test_batch_transform_over_views_is_refused_by_both_loaders(solid_root):
    dataset = datasets.ImageFolder(solid_root, transform=TwoCropsTransform(crops(16)))
    for loader_class in (DaliLoader, TorchLoader):
        with pytest.raises(ValueError, match="several views"):
            loader_class(dataset, batch_size=8, batch_transform=v2.MixUp(num_classes=3))


class Untranslated:
    def __call__(self, image):
        return image


def test_a_view_with_an_untranslated_step_names_it_or_runs_it_in_python(solid_root):
    transform = TwoTransforms(crops(16), v2.Compose([Untranslated(), v2.Resize((16, 16)), v2.PILToTensor()]))
    with pytest.warns(PythonPathNote, match="view 1 of .*Untranslated"):
        loader = DaliLoader(datasets.ImageFolder(solid_root, transform=transform), batch_size=8)
    assert loader.route.startswith("python")
    with pytest.warns(RuntimeWarning, match="Untranslated"):
        loader = DaliLoader(datasets.ImageFolder(solid_root, transform=transform), batch_size=8,
                            python_fallback=True)
    assert loader.route == "dali"
    for (views, labels), (want, want_labels) in zip(loader, torch.utils.data.DataLoader(loader.dataset, 8)):
        assert torch.equal(labels, want_labels) and views[0].dtype == torch.float32
        assert torch.equal(views[1], want[1])   # flat colours: resized alike


@pytest.mark.parametrize("variant", ["gpu", "cpu-decode", "cpu-steps"])
def test_a_gpu_graph_of_views_has_an_output_per_view_and_no_gpu_to_cpu_edge(solid_root, variant):
    from dali_loaders.sources.image_files import ImageFiles

    maker = GlobalAndLocal(crops(24), crops(24), crops(12), 2)
    graph = serialized_gpu_graph(ImageFiles(solid_root), maker, variant=variant)
    operators = dali_compat.graph_operators(graph)
    assert [(kind, name) for kind, _, device, inputs in operators if device == "cpu"
            for name, input_device in inputs if input_device == "gpu"] == []
    assert [device for _, device in dali_compat.graph_outputs(graph)] == ["gpu"] * 5
    decoders = [kind for kind, *_ in operators if kind.startswith("decoders__")]
    # a GPU decode is of whole images: once, each view cutting its window; on the CPU each of a
    # few views decodes only its window, and many views cut theirs from one decode
    assert len(decoders) == (1 if variant == "gpu" else 4), decoders
    many = GlobalAndLocal(crops(24), crops(24), crops(12), build.DECODE_ONCE_VIEWS - 2)
    operators = dali_compat.graph_operators(serialized_gpu_graph(ImageFiles(solid_root), many, variant=variant))
    assert len([kind for kind, *_ in operators if kind.startswith("decoders__")]) == 1


def test_dali_iterators_dict_holds_the_list_of_views(solid_root):
    loader = DaliLoader(datasets.ImageFolder(solid_root, transform=TwoCropsTransform(crops(16))), batch_size=8,
                        output="dict")
    batch = next(iter(loader))
    assert isinstance(batch, list) and set(batch[0]) == {"data", "label"}
    views = batch[0]["data"]
    assert isinstance(views, list) and [view.shape for view in views] == [(8, 3, 16, 16)] * 2
    assert batch[0]["label"].shape == (8, 1)


def test_a_source_s_twin_gives_each_view_as_the_dali_loader_does(solid_root):
    """Views that end as PIL images (no ToTensor) are uint8 tensors from both loaders."""
    from dali_loaders import get_imagefolder_iter_dali, get_imagefolder_iter_torch

    first, second = v2.Resize((10, 12)), v2.Compose([v2.Resize((10, 12)), v2.RandomHorizontalFlip(1.0)])
    for maker in (TwoTransforms(first, second), PairOfTuple(first, second)):   # a list, a tuple
        ours = get_imagefolder_iter_dali(solid_root, 8, False, 2, transform=maker)
        theirs = get_imagefolder_iter_torch(solid_root, 8, False, 0, transform=maker)
        check_same_views(ours, theirs)


def check_same_views(ours, theirs):
    for (views, labels), (expected, expected_labels) in zip(ours, theirs, strict=True):
        assert torch.equal(labels, expected_labels)
        for view, want in zip(views, expected, strict=True):
            assert view.dtype == want.dtype == torch.uint8 and view.shape == want.shape == (len(labels), 3, 10, 12)
            assert int((view.int() - want.int()).abs().max()) <= 1   # flat colours
