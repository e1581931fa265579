"""RandomRotation (no expand, no center) both ways a CPU graph turns the image: in the
augmentation operator, in each twin's own warp (PIL's nearest in 16.16 fixed point, its
bilinear clamped and truncated; torch's grid and mask in float32), which makes it pixel for
pixel; and, without the operator, through DALI's warp, within the documented levels (nearest
ties fall either way there). The drawn angle against torchvision's on both."""
import numpy as np
import pytest
import torch
from test_transforms import C, both, close, coordinate_image, differences, pil_then, rotation_of, tensor_then
from torchvision import transforms as v1
from torchvision.transforms import v2

from dali_loaders import transforms

pytest.importorskip("nvidia.dali")

IM = v2.InterpolationMode
FIXED = {
    "PIL nearest": pil_then(v2.RandomRotation((33, 33))),
    "PIL nearest, fill": pil_then(v2.RandomRotation((-71, -71), fill=90)),
    "PIL bilinear, fill": pil_then(v2.RandomRotation((-17, -17), interpolation=IM.BILINEAR, fill=100)),
    "v1 PIL nearest": v1.Compose([v1.RandomRotation((45, 45)), v1.PILToTensor()]),
    "tensor nearest": tensor_then(v2.RandomRotation((33, 33))),
    "tensor bilinear, fill": tensor_then(v2.RandomRotation((21, 21), interpolation=IM.BILINEAR, fill=7)),
    "v1 tensor bilinear": v1.Compose([v1.PILToTensor(), v1.RandomRotation((21, 21), interpolation=IM.BILINEAR)]),
    # a fill per channel (DALI's warps fill with one value: the image's pixels kept by a mask)
    "PIL nearest, fill per channel": pil_then(v2.RandomRotation((-71, -71), fill=(90, 20, 200))),
    "PIL bilinear, fill per channel": pil_then(v2.RandomRotation((-17, -17), interpolation=IM.BILINEAR,
                                                                 fill=(100, 0, 255))),
    "tensor nearest, fill per channel": tensor_then(v2.RandomRotation((33, 33), fill=[5, 250, 60])),
    "tensor bilinear, fill per channel": tensor_then(v2.RandomRotation((21, 21), interpolation=IM.BILINEAR,
                                                                       fill=[7, 130, 255])),
    "v1 tensor bilinear, fill per channel": v1.Compose([v1.PILToTensor(), v1.RandomRotation(
        (21, 21), interpolation=IM.BILINEAR, fill=[7, 130, 255])]),
}
# worst |ours - torchvision's| in levels, mean over the photographs' pixels, each way
BOUNDS = {"operator": {"v1 tensor bilinear": (0.001, 1.0),   # v1's blend: a level at a pixel or two
                       "v1 tensor bilinear, fill per channel": (0.001, 1.0)},
          "without": {"PIL nearest": (0.01, 160.0), "PIL nearest, fill": (0.01, 160.0), "tensor nearest": (0.01, 160.0),
                      # a tie falls to the fill or to the pixel: up to a whole fill's worth
                      "PIL nearest, fill per channel": (0.01, 255.0), "tensor nearest, fill per channel": (0.01, 255.0)}}


@pytest.mark.parametrize("name", list(FIXED))
def test_a_fixed_angle_against_torchvisions(photo_files, augment_path, name):
    scale = 1.0 if transforms.plan(FIXED[name], False).output_dtype != torch.uint8 else 255.0
    mean, worst = differences(photo_files, FIXED[name], scale)
    bound = BOUNDS[augment_path].get(name, (0.0, 0.0) if augment_path == "operator" else (0.01, 1.0))
    assert mean <= bound[0] and worst <= bound[1], f"{augment_path}, {name}: mean {mean:.4f}, worst {worst:.1f}"


@pytest.mark.parametrize("interpolation", [IM.NEAREST, IM.BILINEAR])
def test_the_drawn_angle_against_torchvisions(augment_path, interpolation):
    image = coordinate_image(64, 64)
    transform = C(v2.RandomRotation((10, 40), interpolation=interpolation), v2.PILToTensor())
    ours, theirs = [[rotation_of(o, (32, 27)) for o in outputs] for outputs in both(image, transform)]
    close(ours, theirs, 1.5, "rotation angle")    # the sign too: -25 if turned the other way
    assert 5 <= min(ours) and max(ours) <= 45 and np.std(ours) > 6   # read to a pixel; a fixed angle has no spread


def test_the_tensor_warps_round_their_blend_as_torch_round():
    """fill_blended's rounding (DALI's warps with a mask, torchvision's tensor kernels): halves
    to even, as torch.round, on random values, every half and its float32 neighbours."""
    from nvidia.dali import fn, pipeline_def

    from dali_loaders.transforms.affine import _uint8_half_even

    halves = np.arange(255) + 0.5
    x = np.concatenate([np.random.default_rng(0).uniform(0, 255, 20000), halves, np.arange(256.0),
                        np.nextafter(halves, 0), np.nextafter(halves, 300)]).astype(np.float32)

    @pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def graph():
        return _uint8_half_even(fn.external_source(source=lambda: [x], batch=True))
    pipe = graph()
    pipe.build()
    ours = np.array(pipe.run()[0][0])
    assert ours.dtype == np.uint8
    assert np.array_equal(ours.astype(int), torch.round(torch.from_numpy(x)).numpy().astype(int))
