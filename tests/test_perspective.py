"""RandomPerspective (v1 and v2) translated into DALI: the warp of fixed corners against
torchvision's own F.perspective on photographs (PIL and tensor, nearest and bilinear, with a
fill); the drawn corners by the distortion they make over many samples against the twin's."""
import numpy as np
import pytest
import torch
from photos import photo_paths
from PIL import Image
from test_transforms import C, both, close, coordinate_image, differences, pil_then
from torchvision.transforms import InterpolationMode as IM
from torchvision import transforms as v1
from torchvision.transforms import v2
from torchvision.transforms.v2 import functional as F

from dali_loaders import dali_compat, transforms

pytest.importorskip("nvidia.dali")
if not dali_compat.warp_perspective_on_cpu():
    pytest.skip("RandomPerspective is translated on DALI >= 2.4", allow_module_level=True)


def corners(width, height):
    return [[7, 3], [width - 12, 5], [width - 3, height - 10], [4, height - 7]]


def warped_by_dali(images, kind, step, **floats):
    """The translator's warp of each image to the fixed corners, on a CPU graph. `floats`:
    Images' fields for images after the conversion to float (dtype, scale, offset pending;
    or the float image itself, materialized, HWC)."""
    from nvidia.dali import fn, pipeline_def, types

    from dali_loaders.transforms import Images, perspective
    from dali_loaders.transforms.affine import warped

    @pipeline_def(batch_size=len(images), num_threads=1, device_id=None)
    def graph():
        data = fn.external_source(source=lambda: images, batch=True, layout="HWC")
        height, width = data.shape()[0], data.shape()[1]
        points = [(7, 3), (width - 12, 5), (width - 3, height - 10), (4, height - 7)]
        points = fn.reshape(fn.cast(fn.stack(*(fn.cast(v, dtype=types.INT32) if not isinstance(v, int) else v
                                               for point in points for v in point)), dtype=types.FLOAT64), shape=[4, 2])
        moved = Images(data, height, width, 3, "cpu", kind=kind, **floats)
        warped(step, moved, perspective.perspective_warp(perspective.output_to_input(points, height, width)))
        if floats:
            moved.materialize()   # a conversion still pending, as the loader ends the graph
        return moved.data
    pipe = graph()
    pipe.build()
    out, = pipe.run()
    return [np.array(out.at(i)) for i in range(len(images))]


@pytest.mark.parametrize("kind", ["pil", "tensor"])
@pytest.mark.parametrize("interpolation", [IM.NEAREST, IM.BILINEAR], ids=["nearest", "bilinear"])
@pytest.mark.parametrize("fill", [0, 77, [77, 0, 200]], ids=["0", "77", "per channel"])
def test_the_warp_of_fixed_corners_is_torchvisions(kind, interpolation, fill):
    images = [np.asarray(Image.open(path).convert("RGB").resize((150, 110))) for path in photo_paths()[:5]]
    step = v2.RandomPerspective(interpolation=interpolation, fill=fill)
    ours = warped_by_dali(images, kind, step)
    for image, mine in zip(images, ours):
        height, width = image.shape[:2]
        start = [[0, 0], [width - 1, 0], [width - 1, height - 1], [0, height - 1]]
        source = Image.fromarray(image) if kind == "pil" else torch.from_numpy(image.copy()).permute(2, 0, 1)
        theirs = F.perspective(source, start, corners(width, height), interpolation=interpolation, fill=fill)
        theirs = np.asarray(theirs) if kind == "pil" else theirs.permute(1, 2, 0).numpy()
        gap = np.abs(mine.astype(int) - theirs.astype(int))
        # nearest: float coordinates a hair either side of a pixel's edge pick its neighbour
        # (as RandomAffine's); bilinear: within a level but at the border's inside test
        assert gap.mean() <= 0.03 and (gap > 1).mean() <= 0.003, (kind, interpolation, fill, gap.mean())


MEAN, STD = np.array([0.5, 0.4, 0.3]), np.array([0.2, 0.25, 0.3])


@pytest.mark.parametrize("interpolation", [IM.NEAREST, IM.BILINEAR], ids=["nearest", "bilinear"])
@pytest.mark.parametrize("made,fill", [("pending", 0.3), ("pending", 0.0), ("pending, normalized", 0.3),
                                       ("made, normalized", 0.3), ("pending", [0.3, 0.0, 1.0]),
                                       ("made, normalized", [0.3, -1.0, 2.0])])
def test_the_warp_of_fixed_corners_after_the_float_conversion_is_torchvisions(interpolation, made, fill):
    """As torchvision warps the float tensor (grid_sample, a mask channel, the fill in the float
    image's units): the conversion still pending (the data in levels, the fill carried into
    them; a nearest warp with a fill of a whole level picks the uint8 pixels), or the float
    image made first."""
    images = [np.asarray(Image.open(path).convert("RGB").resize((150, 110))) for path in photo_paths()[:5]]
    mean, std = (MEAN, STD) if "normalized" in made else (np.zeros(3), np.ones(3))
    floats = [((image / 255.0 - mean) / std).astype(np.float32) for image in images]
    step = v2.RandomPerspective(interpolation=interpolation, fill=fill)
    if made.startswith("pending"):
        ours = warped_by_dali(images, "tensor", step, dtype=torch.float32, layout="HWC",
                              scale=list(1.0 / (255.0 * std)), offset=list(-mean / std))
    else:
        ours = warped_by_dali(floats, "tensor", step, dtype=torch.float32, layout="HWC", materialized=True)
    for image, mine in zip(floats, ours):
        height, width = image.shape[:2]
        start = [[0, 0], [width - 1, 0], [width - 1, height - 1], [0, height - 1]]
        theirs = F.perspective(torch.from_numpy(image).permute(2, 0, 1), start, corners(width, height),
                               interpolation=interpolation, fill=fill).permute(1, 2, 0).numpy()
        assert mine.dtype == np.float32 and mine.shape == theirs.shape
        gap = np.abs(mine - theirs) * std * 255.0   # in levels
        # nearest picks pixels (up to 2e-5 of a level measured, the fill's float32 steps);
        # bilinear weighs the neighbours in other float32 steps: up to 0.01 of a level measured
        assert gap.max() <= (1e-3 if interpolation == IM.NEAREST else 0.05), (made, interpolation, gap.max())


def test_the_rate_and_the_distortion_after_the_float_conversion_are_torchvisions():
    transform = C(v2.ToImage(), v2.ToDtype(torch.float32, scale=True),
                  v2.RandomPerspective(distortion_scale=0.7, p=0.6))
    ours, theirs = (fill_fraction(outputs) for outputs in both(coordinate_image(48, 40), transform))
    close(ours > 0, theirs > 0, 0.1, "rate")
    close(ours[ours > 0], theirs[theirs > 0], 0.02, "fill fraction")


def test_random_apply_of_it_after_the_float_conversion_lands_at_torchvisions_rate():
    transform = C(v2.ToImage(), v2.ToDtype(torch.float32, scale=True),
                  v2.RandomApply([v2.RandomPerspective(distortion_scale=0.7, p=1.0)], p=0.3))
    ours, theirs = (fill_fraction(outputs) > 0 for outputs in both(coordinate_image(48, 40), transform))
    close(ours, theirs, 0.1, "rate warped")
    assert abs(ours.mean() - 0.3) <= 0.1, ours.mean()


def test_fill_none_after_the_float_conversion_is_refused_by_name():
    why = transforms.untranslatable_reason(C(v2.ToImage(), v2.ToDtype(torch.float32, scale=True),
                                             v2.RandomPerspective(fill=None)))
    assert why and "RandomPerspective with fill=None after the conversion to float" in why, why


@pytest.mark.parametrize("transform", [pil_then(v2.RandomPerspective(0.0, p=1.0)),
                                       v1.Compose([v1.RandomPerspective(0.0, p=1.0), v1.PILToTensor()])],
                         ids=["v2", "v1"])
def test_no_distortion_keeps_the_photographs_within_a_level(photo_files, transform):
    """torchvision solves for the identity in float64 and PIL truncates: a hair below a whole
    level reads a level down, in torchvision's output or ours."""
    mean, worst = differences(photo_files, transform)
    assert mean <= 0.6 and worst <= 1.0


def fill_fraction(outputs):
    """The share of each output's pixels that show the fill (B == 0 on a coordinate image)."""
    return np.array([(o[..., 2] == 0).mean() for o in outputs])


@pytest.mark.parametrize("make", [v2.RandomPerspective, v1.RandomPerspective], ids=["v2", "v1"])
def test_the_rate_and_the_distortion_are_torchvisions(make):
    transform = C(make(distortion_scale=0.7, p=0.6, interpolation=IM.NEAREST), v2.PILToTensor())
    ours, theirs = (fill_fraction(outputs) for outputs in both(coordinate_image(48, 40), transform))
    close(ours > 0, theirs > 0, 0.1, "rate")   # p = 0.5 (the default) is ~4 standard errors away
    close(ours[ours > 0], theirs[theirs > 0], 0.02, "fill fraction")   # distortion 0.5: ~0.1 less
    assert abs((ours > 0).mean() - 0.6) < 0.08


@pytest.mark.parametrize("step,argument", [
    (v2.RandomPerspective(interpolation=IM.BICUBIC), "interpolation"),
])
def test_unsupported_parameters_are_refused_by_name(step, argument):
    with pytest.raises(ValueError) as error:
        transforms.plan(step, python_fallback=False)
    assert "RandomPerspective" in str(error.value) and argument in str(error.value)
