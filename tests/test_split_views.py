"""SplitViews: views that share their start (timm's AugMixDataset's splits). The shared steps
run once in the DALI graph and every view branches from their output, so each view shows the
same window of its image; the Python call is the meaning DALI's batches are checked against."""
import pytest
import torch
from image_data import image_id, write_coordinate_folder, write_solid_folder
from torchvision import datasets
from torchvision import transforms as v1
from torchvision.transforms import v2
from views_check import assert_resumes_bit_for_bit, assert_views_near

from dali_loaders import DaliLoader, dali_compat
from dali_loaders.loader.build import serialized_gpu_graph
from dali_loaders.loader.resolve import PythonPathNote
from dali_loaders.transforms import SplitViews

COUNT = 24
COORDINATE_IMAGES = 40   # 200 x 160 each


@pytest.fixture(scope="module")
def coordinate_root(written_once):
    return written_once(write_coordinate_folder, COORDINATE_IMAGES, 200, 160)


PER_CLASS = COUNT // 3


@pytest.fixture(scope="module")
def solid_root(tmp_path_factory):
    """Image i is one flat colour that says i (image_data.solid_colour), of class i // PER_CLASS."""
    root = tmp_path_factory.mktemp("split_solid")
    write_solid_folder(str(root), {f"class_{c}": PER_CLASS for c in range(3)})
    return str(root)


def window_then(*views):
    """A random window and flip, shared; then each view's steps, each ending as a uint8 tensor."""
    first = v2.Compose([v2.RandomResizedCrop(24, scale=(0.05, 0.6), antialias=True), v2.RandomHorizontalFlip()])
    return SplitViews(first, [list(view) + [v2.PILToTensor()] for view in views])


def test_every_view_shows_the_window_drawn_once(coordinate_root):
    """The second view flips the first: pixel for pixel its mirror, so both were cut from one
    window (windows drawn per view, as a view maker's, would differ)."""
    loader = DaliLoader(datasets.ImageFolder(coordinate_root, transform=window_then([], [v2.RandomHorizontalFlip(1.0)])),
                        batch_size=8, shuffle=True, num_workers=2, seed=5)
    assert loader.route == "dali"
    xs = []
    for views, _ in loader:
        assert isinstance(views, list) and len(views) == 2
        assert all(view.shape == (len(view), 3, 24, 24) and view.dtype == torch.uint8 for view in views)
        assert torch.equal(views[1], views[0].flip(-1))
        xs.append(views[0][:, 0].float().mean((1, 2)))   # the window's mean x (red = x)
    xs = torch.cat(xs)
    assert len(xs) == COORDINATE_IMAGES and float(xs.std()) > 5   # and the windows are drawn apart, image by image


def test_each_sample_s_views_show_its_image_once_per_epoch(solid_root):
    loader = DaliLoader(datasets.ImageFolder(solid_root, transform=window_then([], [], [])), batch_size=8,
                        shuffle=True, num_workers=2, seed=3)
    ids = []
    for views, labels in loader:
        assert len(views) == 3
        for k, label in enumerate(labels.tolist()):
            shown = {image_id(view[k].float().mean((1, 2)).tolist()) for view in views}
            assert len(shown) == 1 and next(iter(shown)) // PER_CLASS == label
            ids += shown
    assert sorted(ids) == list(range(COUNT)) and ids != list(range(COUNT))


def test_deterministic_split_views_are_their_python_calls_pixels(coordinate_root):
    transform = SplitViews(v1.Resize(40), [[v1.CenterCrop(30), v1.PILToTensor()],
                                           [v1.CenterCrop(16), v1.Resize((12, 20)), v1.PILToTensor()]])
    dataset = datasets.ImageFolder(coordinate_root, transform=transform)
    ours = DaliLoader(dataset, batch_size=8, num_workers=2)
    assert assert_views_near(ours, torch.utils.data.DataLoader(dataset, batch_size=8)) == len(ours)


def test_split_views_resume_mid_epoch_bit_for_bit(coordinate_root):
    def make():
        transform = window_then([v2.ColorJitter(0.4, 0.4, 0.4)], [v2.RandomHorizontalFlip()])
        return DaliLoader(datasets.ImageFolder(coordinate_root, transform=transform), batch_size=8, shuffle=True,
                          num_workers=2, seed=11)

    assert_resumes_bit_for_bit(make)


class Untranslated:
    def __call__(self, image):
        return image


def test_shared_steps_without_translation_take_the_python_path_or_are_refused(solid_root):
    transform = SplitViews([Untranslated(), v2.Resize((16, 16))], [v2.PILToTensor(), v2.PILToTensor()])
    with pytest.warns(PythonPathNote, match="the views of SplitViews share: .*Untranslated"):
        loader = DaliLoader(datasets.ImageFolder(solid_root, transform=transform), batch_size=8)
    assert loader.route.startswith("python")
    views, _ = next(iter(loader))
    assert [view.shape for view in views] == [(8, 3, 16, 16)] * 2
    with pytest.raises(ValueError, match="SplitViews: .*Untranslated.* must all run in DALI"):
        DaliLoader(datasets.ImageFolder(solid_root, transform=transform), batch_size=8, python_fallback=True)


def test_a_view_s_own_untranslated_step_runs_in_python_after_the_shared_window(solid_root):
    transform = SplitViews(v2.Resize((16, 16)), [v2.PILToTensor(), [Untranslated(), v2.PILToTensor()]])
    with pytest.warns(RuntimeWarning, match="Untranslated"):
        loader = DaliLoader(datasets.ImageFolder(solid_root, transform=transform), batch_size=8,
                            python_fallback=True)
    assert loader.route == "dali"
    assert assert_views_near(loader, torch.utils.data.DataLoader(loader.dataset, 8)) == len(loader)


@pytest.mark.parametrize("variant", ["gpu", "cpu-decode"])
def test_a_gpu_graph_of_split_views_decodes_once_with_no_gpu_to_cpu_edge(solid_root, variant):
    from dali_loaders.sources.image_files import ImageFiles

    transform = window_then([], [v2.RandAugment()], [v2.ColorJitter(0.4, 0.4)])
    graph = serialized_gpu_graph(ImageFiles(solid_root), transform, variant=variant)
    operators = dali_compat.graph_operators(graph)
    assert [(kind, name) for kind, _, device, inputs in operators if device == "cpu"
            for name, input_device in inputs if input_device == "gpu"] == []
    assert [device for _, device in dali_compat.graph_outputs(graph)] == ["gpu"] * 4
    assert len([kind for kind, *_ in operators if kind.startswith("decoders__")]) == 1
