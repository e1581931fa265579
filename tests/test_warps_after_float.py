"""RandomRotation and RandomAffine (RandomPerspective: tests/test_perspective.py) after the conversion to float (ToTensor, ToDtype, Normalize),
as torchvision warps the float tensor: grid_sample with a mask channel, the fill in the float
image's units, unrounded. Pinned parameters against DataLoader's batches, on both ways a CPU
graph turns the image (the augmentation operator, and DALI's warp); drawn angles and maps by
distribution."""
import numpy as np
import pytest
import torch
from test_transforms import affine_of, both, close, coordinate_image, rotation_of
from torchvision import transforms as v1
from torchvision.transforms import v2

from dali_loaders import DaliLoader, transforms

pytest.importorskip("nvidia.dali")

FLOAT = [v2.ToImage(), v2.ToDtype(torch.float32, scale=True)]
NORM = v2.Normalize([0.5, 0.4, 0.3], [0.2, 0.25, 0.3])
V1_NORM = v1.Normalize([0.5, 0.4, 0.3], [0.2, 0.25, 0.3])
BILINEAR = v2.InterpolationMode.BILINEAR
# nearest picks pixels: exact; bilinear: DALI's warp weighs the neighbours a little apart from
# grid_sample (its coordinates in other float32 steps): up to 2e-4 of the 0..1 range measured
NEAREST_BOUND, BILINEAR_BOUND = 1e-6, 5e-4
PINNED = {
    "v1 ToTensor, rotation, Normalize": (v1.Compose([v1.ToTensor(), v1.RandomRotation((10, 10)), V1_NORM]),
                                         NEAREST_BOUND),
    "v2 rotation, fill 0.5 (no whole level)": (v2.Compose([*FLOAT, v2.RandomRotation((10, 10), fill=0.5)]),
                                               NEAREST_BOUND),
    "v2 rotation after Normalize, fill 0": (v2.Compose([*FLOAT, NORM, v2.RandomRotation((-20, -20))]), NEAREST_BOUND),
    "v2 rotation, fill 1.0, then Normalize": (v2.Compose([*FLOAT, v2.RandomRotation((15, 15), fill=1.0), NORM]),
                                              NEAREST_BOUND),
    "v2 bilinear rotation": (v2.Compose([*FLOAT, v2.RandomRotation((10, 10), interpolation=BILINEAR, fill=0.2)]),
                             BILINEAR_BOUND),
    "v1 bilinear rotation after Normalize": (v1.Compose([v1.ToTensor(), V1_NORM, v1.RandomRotation(
        (10, 10), interpolation=BILINEAR)]), BILINEAR_BOUND),
    "v2 expanded rotation": (v2.Compose([*FLOAT, v2.RandomRotation((30, 30), expand=True, interpolation=BILINEAR)]),
                             BILINEAR_BOUND),
    "v2 affine, bilinear": (v2.Compose([*FLOAT, v2.RandomAffine((5, 5), scale=(1.1, 1.1), shear=(2, 2, 3, 3),
                                                                interpolation=BILINEAR, fill=0.3)]), BILINEAR_BOUND),
    "v2 affine after Normalize": (v2.Compose([*FLOAT, NORM, v2.RandomAffine((5, 5), scale=(1.1, 1.1),
                                                                            shear=(2, 2, 3, 3))]), NEAREST_BOUND),
    "after a float colour step (the float image made)": (v2.Compose([*FLOAT, v2.ColorJitter(brightness=(0.8, 0.8)),
                                                                     v2.RandomRotation((10, 10), interpolation=BILINEAR,
                                                                                       fill=0.1), NORM]),
                                                         BILINEAR_BOUND),
    "v1 RandomApply of a rotation, p=1": (v1.Compose([v1.ToTensor(), V1_NORM, v1.RandomApply(
        [v1.RandomRotation((10, 10), fill=0.5)], p=1.0)]), NEAREST_BOUND),
    "RandomApply of an affine and a jitter, p=0": (v2.Compose([*FLOAT, v2.RandomApply(
        [v2.RandomAffine((5, 5)), v2.ColorJitter(brightness=(0.5, 0.5))], p=0.0)]), NEAREST_BOUND),
}


@pytest.mark.parametrize("name", list(PINNED))
def test_pinned_warps_after_the_float_conversion_are_torchvisions(photo_classes, name, augment_path):
    from torchvision.datasets import ImageFolder

    transform, bound = PINNED[name]
    assert transforms.untranslatable_reason(transform) is None
    dataset = ImageFolder(photo_classes, transform=transform)
    ours = list(DaliLoader(dataset, batch_size=1))
    theirs = list(torch.utils.data.DataLoader(dataset, batch_size=1))
    assert len(ours) == len(theirs) == 6
    for (a, la), (b, lb) in zip(ours, theirs):
        assert torch.equal(la, lb) and a.shape == b.shape and a.dtype == b.dtype == torch.float32
        assert (a - b).abs().max().item() <= bound, name


def levels(outputs):
    """Float outputs back in levels (the coordinate image's)."""
    return [np.round(o * 255.0) for o in outputs]


def test_the_angle_drawn_after_the_float_conversion(augment_path):
    image = coordinate_image(64, 64)
    transform = v2.Compose([*FLOAT, v2.RandomRotation((10, 40))])
    ours, theirs = [[rotation_of(o, (32, 27)) for o in levels(out)] for out in both(image, transform)]
    close(ours, theirs, 1.5, "rotation angle")   # ignored: 0
    assert 5 <= min(ours) and max(ours) <= 45


@pytest.mark.parametrize("name,step", [("scale", v2.RandomAffine(0, scale=(0.6, 0.8))),
                                       ("shear", v2.RandomAffine(0, shear=(-5, 5, 15, 25))),
                                       ("translate", v2.RandomAffine(0, translate=(0.2, 0.1)))])
def test_the_affine_drawn_after_the_float_conversion(name, step):
    image = coordinate_image(64, 64)
    maps = [np.array([affine_of(o) for o in levels(out)]) for out in both(image, v2.Compose([*FLOAT, step]))]
    for k, what in enumerate(["x0", "y0", "dx/dX", "dy/dX", "dx/dY", "dy/dY"]):
        tolerance = 0.8 if k < 2 else 0.03
        close(maps[0][:, k], maps[1][:, k], tolerance, f"{name}: {what}")
        assert abs(maps[0][:, k].std() - maps[1][:, k].std()) <= tolerance, (name, what)


@pytest.mark.parametrize("step", [v2.RandomRotation(10, fill=None), v2.RandomApply([v2.RandomAffine(5, fill=None)])],
                         ids=["alone", "in RandomApply"])
def test_fill_none_after_the_float_conversion_is_refused_by_name(step):
    why = transforms.untranslatable_reason(v2.Compose([*FLOAT, step]))
    assert why and "fill=None after the conversion to float" in why, why


def test_an_expanded_rotation_in_random_apply_after_the_float_conversion_is_refused_by_name():
    why = transforms.untranslatable_reason(v2.Compose([*FLOAT, v2.RandomApply([v2.RandomRotation(10, expand=True)])]))
    assert why and "RandomRotation inside it expands the canvas" in why, why


def test_a_rotation_in_random_apply_after_the_float_conversion_lands_at_torchvisions_rate(augment_path):
    image = coordinate_image(32, 32)
    transform = v2.Compose([*FLOAT, v2.RandomApply([v2.RandomRotation((30, 30))], p=0.3)])
    rates = [np.mean([o[0, 0, 2] == 0 for o in levels(out)]) for out in both(image, transform)]   # a corner filled
    close(*rates, 0.1, "rate turned")
    assert abs(rates[0] - 0.3) <= 0.1, rates


def test_the_warps_gpu_graph_has_no_gpu_to_cpu_edge(photo_classes):
    from test_gpu_graphs import gpu_to_cpu_edges

    from dali_loaders.loader.build import serialized_gpu_graph
    from dali_loaders.sources.image_files import ImageFiles

    transform = v2.Compose([*FLOAT, NORM, v2.RandomRotation(10, fill=0.7),
                            v2.RandomAffine(5, interpolation=BILINEAR), v2.RandomPerspective(0.3, fill=0.2)])
    for variant in ("gpu", "cpu-decode"):
        assert gpu_to_cpu_edges(serialized_gpu_graph(ImageFiles(photo_classes), transform, variant=variant)) == []
