"""Resizes after the conversion to float (ToTensor, ToDtype, Normalize), as torchvision runs
them: torch's antialiased kernel on the float tensor, unrounded and unclamped (our resize
operator's FLOAT mode on CPU graphs), and padding fills given in the float image's units.
Each batch against DataLoader's over the same dataset object."""
import os

import pytest
import torch
from image_data import photo
from torchvision import transforms as v1
from torchvision.transforms import v2

from dali_loaders import DaliLoader, transforms
from dali_loaders.ops import plugin

pytest.importorskip("nvidia.dali")

FLOAT = [v2.ToImage(), v2.ToDtype(torch.float32, scale=True)]
NORM = v2.Normalize([0.5, 0.4, 0.3], [0.2, 0.25, 0.3])
IM = v2.InterpolationMode
RESIZES = {
    "v1 ToTensor, Resize (h, w), Normalize": v1.Compose([v1.ToTensor(), v1.Resize((20, 30)), NORM]),
    "v1 ToTensor, Resize short side": v1.Compose([v1.ToTensor(), v1.Resize(24)]),
    "bicubic, CenterCrop": v2.Compose([*FLOAT, v2.Resize(33, interpolation=IM.BICUBIC), v2.CenterCrop(30)]),
    "upscale": v2.Compose([*FLOAT, v2.Resize((130, 90)), NORM]),
    "antialias=False": v2.Compose([*FLOAT, v2.Resize((25, 31), antialias=False)]),
    "nearest": v2.Compose([*FLOAT, v2.Resize((25, 31), interpolation=IM.NEAREST)]),
    "max_size": v2.Compose([*FLOAT, v2.Resize(40, max_size=50), v2.CenterCrop(36)]),
    "after Normalize": v2.Compose([*FLOAT, NORM, v2.Resize((20, 26))]),
    "twice (float input)": v2.Compose([*FLOAT, v2.Resize((40, 44)), v2.Resize((21, 23))]),
    "after RandomErasing p=0 (the converted CHW image)": v2.Compose([*FLOAT, NORM, v2.RandomErasing(p=0.0),
                                                                     v2.Resize((21, 23))]),
    "then Pad 0.5": v2.Compose([*FLOAT, v2.Resize((40, 44)), v2.Pad(3, fill=0.5)]),
    "RandomResizedCrop of the whole image": v2.Compose([*FLOAT, v2.RandomResizedCrop((24, 32), scale=(1, 1),
                                                                                     ratio=(4 / 3, 4 / 3)), NORM]),
}
FILLS = {   # torchvision fills in the float image's units: 0 after Normalize is the mean colour
    "Normalize, Pad": v2.Compose([*FLOAT, NORM, v2.Pad(3)]),
    "Normalize, CenterCrop larger than the image": v2.Compose([*FLOAT, NORM, v2.CenterCrop(70)]),
    "v1 Normalize, RandomCrop padded": v1.Compose([v1.ToTensor(), NORM, v1.RandomCrop((38, 48), padding=4)]),
    "v1 RandomCrop padded with 0.5": v1.Compose([v1.ToTensor(), v1.RandomCrop((38, 48), padding=4, fill=0.5)]),
    "Pad with 1.0": v2.Compose([*FLOAT, v2.Pad(2, fill=1.0)]),
}


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    root = tmp_path_factory.mktemp("photos")
    for k in range(6):
        os.makedirs(root / f"c{k % 2}", exist_ok=True)
        photo(40, 30, k).save(root / f"c{k % 2}" / f"{k}.png")   # one size: padded crops have one window
    return str(root)


def batches_apart(root, transform, **loader_args):
    from torchvision.datasets import ImageFolder

    dataset = ImageFolder(root, transform=transform)
    assert transforms.untranslatable_reason(transform) is None
    ours = list(DaliLoader(dataset, batch_size=3, **loader_args))
    theirs = list(torch.utils.data.DataLoader(dataset, batch_size=3))
    assert len(ours) == len(theirs) == 2
    for (a, la), (b, lb) in zip(ours, theirs):
        assert torch.equal(la, lb) and a.shape == b.shape and a.dtype == b.dtype == torch.float32
    return max((a - b).abs().max().item() for (a, _), (b, _) in zip(ours, theirs))


@pytest.mark.parametrize("name", list(RESIZES))
def test_a_resize_after_the_float_conversion_is_torchs_float_resize(photos, name):
    if not plugin.available():
        pytest.skip("the resize operator is not built here")
    assert batches_apart(photos, RESIZES[name]) <= 1e-5   # float32 rounding: torch's sums vectorized


@pytest.mark.parametrize("name", list(FILLS))
def test_padding_after_the_float_conversion_fills_in_the_float_images_units(photos, name):
    assert batches_apart(photos, FILLS[name]) <= 1e-5


def test_channels_last_batches_resize_the_same(photos):
    transform = v2.Compose([*FLOAT, NORM, v2.RandomErasing(p=0.0), v2.Resize((21, 23)), v2.Pad(1)])
    assert batches_apart(photos, transform, memory_format=torch.channels_last) <= 1e-5


def test_without_the_operator_dalis_float_resize_comes_close(photos, monkeypatch):
    """DALI's fn.resize (GPU graphs, or the operators off): torch's taps but its own border
    handling: up to ~10 levels at the borders of a downscale, well under one inside."""
    monkeypatch.setenv(plugin.DISABLE_ENV, "1")
    worst = batches_apart(photos, v1.Compose([v1.ToTensor(), v1.Resize((20, 30))]))
    assert 0 < worst <= 12 / 255


def test_cifar_arrays_pad_at_the_source_only_in_whole_levels(tmp_path, monkeypatch):
    """The array source pads uint8 batches itself: 0 after Normalize is no whole level, so the
    graph pads the float image instead; a whole window of RandomResizedCrop is resampled in float."""
    import torchvision.datasets as tvd

    from dali_loaders.testing.synthetic import write_cifar

    monkeypatch.setattr(tvd.CIFAR10, "_check_integrity", lambda self: True)
    monkeypatch.setattr(tvd.cifar, "check_integrity", lambda *args, **kwargs: True)
    root = write_cifar(str(tmp_path), n_train=12, n_test=4)
    recipes = [v1.Compose([v1.ToTensor(), NORM, v1.RandomCrop(40, padding=4)]),
               v1.Compose([v1.ToTensor(), v1.RandomCrop(40, padding=4, fill=0.5)]),
               v1.Compose([v1.ToTensor(), v1.RandomCrop(40, padding=4)])]
    if plugin.available():
        recipes.append(v1.Compose([v1.ToTensor(), v1.RandomResizedCrop(24, scale=(1, 1), ratio=(1, 1)), NORM]))
    for transform in recipes:
        dataset = tvd.CIFAR10(root, train=True, transform=transform)
        ours = [x for x, _ in DaliLoader(dataset, batch_size=4)]
        theirs = [x for x, _ in torch.utils.data.DataLoader(dataset, batch_size=4)]
        assert max((a - b).abs().max().item() for a, b in zip(ours, theirs)) <= 1e-5, transform
