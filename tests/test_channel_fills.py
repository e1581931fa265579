"""A fill per channel (`fill=(124, 116, 104)`) for RandomRotation, RandomAffine and
RandomPerspective, on uint8 and after the conversion to float: against torchvision's own
outputs on photographs, within the bounds of a single fill (nearest ties may fall to the fill
or to the pixel). A fill of another length than the image's channels is refused by name."""
import numpy as np
import pytest
import torch
from test_transforms import differences, pil_then, tensor_then
from torchvision import transforms as v1
from torchvision.transforms import v2

from dali_loaders import dali_compat, transforms

pytest.importorskip("nvidia.dali")

IM = v2.InterpolationMode
FILL = (124, 16, 230)
FLOAT = [v2.ToImage(), v2.ToDtype(torch.float32, scale=True)]
NORM = v2.Normalize([0.5, 0.4, 0.3], [0.2, 0.25, 0.3])
# name: (transform, (mean, worst) |ours - torchvision's| in levels)
TIES = (0.02, 255.0)   # nearest: a pixel a hair either side of an edge, picked apart
FIXED = {
    "affine, PIL nearest": (pil_then(v2.RandomAffine((15, 15), fill=FILL)), TIES),
    "affine, PIL bilinear": (pil_then(v2.RandomAffine((0, 0), scale=(0.7, 0.7), interpolation=IM.BILINEAR,
                                                      fill=FILL)), (0.01, 1.0)),
    "affine, tensor bilinear": (tensor_then(v2.RandomAffine((10, 10), scale=(0.7, 0.7), shear=(5, 5, -3, -3),
                                                            interpolation=IM.BILINEAR, fill=list(FILL))), (0.01, 1.0)),
    "affine, v1 tensor nearest": (v1.Compose([v1.PILToTensor(), v1.RandomAffine((20, 20), scale=(0.8, 0.8),
                                                                                fill=list(FILL))]), TIES),
    "expanded rotation, PIL bilinear": (pil_then(v2.RandomRotation((-40, -40), interpolation=IM.BILINEAR, expand=True,
                                                                   fill=FILL)), (0.01, 1.0)),
    "expanded rotation, tensor nearest": (tensor_then(v2.RandomRotation((30, 30), expand=True, fill=list(FILL))), TIES),
    # after the conversion: the fill in the float image's units
    "rotation on floats, nearest": (v2.Compose([*FLOAT, v2.RandomRotation((25, 25), fill=[0.5, 0.1, 0.9])]), TIES),
    "affine on floats after Normalize, bilinear": (v2.Compose([*FLOAT, NORM, v2.RandomAffine(
        (10, 10), scale=(0.8, 0.8), interpolation=IM.BILINEAR, fill=[0.5, -1.0, 2.0])]),
        (0.01, 0.2)),   # DALI's warp weighs neighbours a little apart from grid_sample: 0.14 measured
}
if dali_compat.warp_perspective_on_cpu():
    FIXED.update({
        "perspective, PIL nearest, no distortion": (pil_then(v2.RandomPerspective(0.0, p=1.0, fill=FILL)),
                                                    (0.6, 1.0)),   # PIL's truncation (test_perspective.py)
    })


@pytest.mark.parametrize("name", list(FIXED))
def test_a_fill_per_channel_against_torchvisions(photo_files, augment_path, name):
    transform, (mean_bound, worst_bound) = FIXED[name]
    assert transforms.untranslatable_reason(transform) is None
    scale = 1.0 if transforms.plan(transform, False).output_dtype != torch.uint8 else 255.0
    std = 0.2 if "Normalize" in name else 1.0   # the largest level's share after Normalize's division
    mean, worst = differences(photo_files, transform, scale)
    mean, worst = mean * std, worst * std
    assert mean <= mean_bound and worst <= worst_bound, f"{augment_path}, {name}: mean {mean:.4f}, worst {worst:.1f}"


@pytest.mark.parametrize("step", [v2.RandomRotation(20, fill=FILL), v2.RandomAffine(10, fill=FILL),
                                  v2.RandomRotation(20, expand=True, fill=FILL)], ids=["rotation", "affine", "expanded"])
def test_the_fill_shows_per_channel_where_the_image_is_not(step):
    """A white image turned by 20 degrees or more: its corners show the fill, channel by channel."""
    from test_transforms import dali_outputs

    from dali_loaders.sources.arrays import ArraySource

    white = np.full((8, 40, 40, 3), 255, dtype=np.uint8)
    images = ArraySource(white, np.zeros(8, dtype=np.int64), "white")
    for out in dali_outputs(images, v2.Compose([v2.ToImage(), step]), batch=8):
        corner = out[:, 0, 0] if out.shape[0] == 3 else out[0, 0]
        assert tuple(int(v) for v in corner) in (FILL, (255, 255, 255)), corner
        assert any(tuple(int(v) for v in out[:, y, x]) == FILL for y, x in [(0, 0), (0, -1), (-1, 0), (-1, -1)])


def test_a_fill_of_three_values_on_grey_images_is_refused_by_name():
    from test_transforms import dali_outputs

    from dali_loaders.sources.arrays import ArraySource

    grey = np.random.default_rng(0).integers(0, 256, (4, 16, 16, 1), dtype=np.uint8)
    images = ArraySource(grey, np.zeros(4, dtype=np.int64), "grey")
    with pytest.raises(Exception, match=r"RandomRotation: fill=\(124, 16, 230\) has 3 values for images of 1 channel"):
        dali_outputs(images, v2.Compose([v2.ToImage(), v2.RandomRotation(10, fill=FILL)]), batch=4)


def test_the_autoaugment_family_still_takes_one_fill():
    why = transforms.untranslatable_reason(v2.AutoAugment(fill=list(FILL)))
    assert why and "one value for every channel only" in why, why
