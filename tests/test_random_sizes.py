"""v2's RandomResize, RandomShortestSize, ScaleJitter and RandomZoomOut translated into DALI,
against torchvision applying the same objects: for a fixed draw, the pixels of photographs
(decoded files, whose sizes DALI reads per sample) within Resize's bounds; for random draws,
the sizes and offsets over many samples of a coordinate image (arrays of one size), each
test failing if the parameter it covers is ignored."""
import numpy as np
import pytest
import torch
from test_transforms import C, both, close, coordinate_image, differences, pil_then, tensor_then
from torchvision.transforms import InterpolationMode as IM
from torchvision.transforms import v2

from dali_loaders import transforms

pytest.importorskip("nvidia.dali")

RESIZED = (0.3, 5.0)   # Resize's bounds on photographs (tests/test_transforms.py), in 1/255


@pytest.mark.parametrize("name,transform,bounds", [
    ("RandomResize one size", pil_then(v2.RandomResize(100, 101)), RESIZED),
    ("RandomShortestSize", pil_then(v2.RandomShortestSize([90])), RESIZED),
    ("RandomShortestSize max_size", pil_then(v2.RandomShortestSize(90, max_size=110)), RESIZED),
    ("RandomShortestSize tensor", tensor_then(v2.RandomShortestSize([80], antialias=True)), RESIZED),
    ("RandomShortestSize nearest tensor",
     tensor_then(v2.RandomShortestSize([80], interpolation=IM.NEAREST)), (0.1, 100.0)),   # Resize's bounds
    ("ScaleJitter one scale", pil_then(v2.ScaleJitter((130, 110), scale_range=(0.8, 0.8))), RESIZED),
    ("ScaleJitter bicubic", pil_then(v2.ScaleJitter((150, 90), scale_range=(0.6, 0.6), interpolation=IM.BICUBIC)),
     (0.2, 6.0)),
    ("RandomZoomOut never", pil_then(v2.RandomZoomOut(p=0.0)), (0.0, 0.0)),
])
def test_a_fixed_draw_gives_the_twins_pixels_on_photographs(photo_files, name, transform, bounds):
    mean, worst = differences(photo_files, transform)
    assert mean <= bounds[0] and worst <= bounds[1], f"{name}: mean {mean:.3f}, worst {worst:.1f} (1/255)"


def shapes(outputs):
    return np.array([o.shape[:2] for o in outputs])


def test_random_resize_draws_the_short_side_from_its_range():
    """[min_size, max_size): 30 .. 45 as torch.randint draws it, the long side scaled as Resize's."""
    image = coordinate_image(64, 48)
    transform = C(v2.RandomResize(30, 46), v2.PILToTensor())
    ours, theirs = (shapes(outputs) for outputs in both(image, transform))
    for sizes in (ours, theirs):
        assert sizes[:, 0].min() == 30 and sizes[:, 0].max() == 45
        assert (sizes[:, 1] == sizes[:, 0] * 64 // 48).all()
    close(ours[:, 0], theirs[:, 0], 1.2, "short side")   # sd ~4.6, 400 samples each


def test_random_shortest_size_picks_each_size_and_caps_the_long_side():
    image = coordinate_image(64, 32)
    transform = C(v2.RandomShortestSize([16, 24, 40], max_size=60), v2.PILToTensor())
    ours, theirs = (shapes(outputs) for outputs in both(image, transform))
    # 40 would make the long side 80 > 60: capped to (30, 60)
    expected = {(16, 32), (24, 48), (30, 60)}
    for sizes in (ours, theirs):
        assert {tuple(s) for s in sizes} == expected
    for short in (16, 24, 30):
        close(ours[:, 0] == short, theirs[:, 0] == short, 0.1, f"rate of short side {short}")


def test_scale_jitter_draws_the_scale_from_its_range():
    """The width over the target fit: uniform in scale_range, as torchvision draws it."""
    image = coordinate_image(64, 48)
    transform = C(v2.ScaleJitter((80, 60), scale_range=(0.3, 0.7)), v2.PILToTensor())
    fit = min(60 / 48, 80 / 64)
    ours, theirs = (shapes(outputs)[:, 1] / (64 * fit) for outputs in both(image, transform))
    close(ours, theirs, 0.025, "scale")   # the default range (0.1, 2.0) has mean 1.05
    for scale in (ours, theirs):
        assert scale.min() >= 0.28 and scale.max() <= 0.71 and scale.max() - scale.min() > 0.3


def zoom_out(output):
    """(canvas height, canvas width, top, left) of a zoomed-out coordinate image: the image is
    where B == 255, the fill elsewhere."""
    rows, cols = np.nonzero(output[..., 2] == 255)
    return output.shape[0], output.shape[1], rows.min(), cols.min()


def test_random_zoom_out_rate_canvas_offsets_and_fill():
    image = coordinate_image(40, 30)
    transform = C(v2.RandomZoomOut(fill=(5, 6, 7), side_range=(1.5, 3.0), p=0.7), v2.PILToTensor())
    ours, theirs = both(image, transform)
    stats = []
    for outputs in (ours, theirs):
        boxes = np.array([zoom_out(o) for o in outputs])
        zoomed = boxes[:, 1] > 40
        ratio = boxes[zoomed, 1] / 40.0
        left = boxes[zoomed, 3] / (boxes[zoomed, 1] - 40)
        stats.append((zoomed, ratio, left))
        assert ratio.min() >= 1.5 and ratio.max() <= 3.0
        assert all(np.array_equal(o[t:t + 30, s:s + 40], image) for o, (_, _, t, s) in zip(outputs, boxes))
        assert all((o[..., 2] == 255).sum() == 30 * 40 for o in outputs)
        fill = [o[(o[..., 2] != 255)] for o in outputs]
        assert all((f == (5, 6, 7)).all() for f in fill)
    (zoomed, ratio, left), (zoomed_tv, ratio_tv, left_tv) = stats
    close(zoomed, zoomed_tv, 0.1, "zoom-out rate")   # p=0.5 (the default) is ~4.4 standard errors away
    close(ratio, ratio_tv, 0.12, "canvas ratio")     # the default range (1, 4) has mean 2.5
    close(left, left_tv, 0.09, "left offset")


def test_random_zoom_out_of_one_ratio_always_applied_draws_only_the_offsets():
    image = coordinate_image(20, 10)
    ours, theirs = both(image, C(v2.RandomZoomOut(side_range=(2.0, 2.0), p=1.0), v2.PILToTensor()), n=200)
    tops = []
    for outputs in (ours, theirs):
        boxes = np.array([zoom_out(o) for o in outputs])
        assert (boxes[:, 0] == 20).all() and (boxes[:, 1] == 40).all()
        assert boxes[:, 2].min() == 0 and boxes[:, 2].max() == 9 and boxes[:, 3].max() == 19
        tops.append(boxes[:, 2])
    close(*tops, 1.3, "top offset")   # sd ~2.9, 200 samples each


def test_random_zoom_out_on_decoded_files_keeps_the_image_whole(photo_files):
    """Sizes read per sample: every photograph inside its canvas, unchanged."""
    transform = C(v2.RandomZoomOut(fill=0, side_range=(1.2, 1.6), p=1.0), v2.PILToTensor())
    from test_transforms import dali_outputs, twin_outputs

    plain = [o.transpose(1, 2, 0) for o in dali_outputs(photo_files, v2.PILToTensor())]
    for original, output in zip(plain, (o.transpose(1, 2, 0) for o in dali_outputs(photo_files, transform))):
        h, w = original.shape[:2]
        assert int(h * 1.2) <= output.shape[0] <= int(h * 1.6) + 1 and int(w * 1.2) <= output.shape[1]
        found = [(t, s) for t in range(output.shape[0] - h + 1) for s in range(output.shape[1] - w + 1)
                 if np.array_equal(output[t:t + 8, s:s + 8], original[:8, :8])
                 and np.array_equal(output[t:t + h, s:s + w], original)]
        assert found, "the photograph is not inside its canvas"
    assert len(twin_outputs(photo_files, transform)) == len(plain)


@pytest.mark.parametrize("step,argument", [
    (v2.RandomResize(10, 10), "min_size=10, max_size=10"),
    (v2.RandomShortestSize(10, interpolation=IM.LANCZOS), "interpolation"),
    (v2.ScaleJitter((10, 10), interpolation=IM.BOX), "interpolation"),
])
def test_unsupported_parameters_are_refused_by_name(step, argument):
    with pytest.raises(ValueError) as error:
        transforms.plan(step, python_fallback=False)
    assert type(step).__name__ in str(error.value) and argument in str(error.value)


FLOAT = (v2.ToImage(), v2.ToDtype(torch.float32, scale=True))
MEAN, STD = np.array([0.5, 0.4, 0.3]), np.array([0.2, 0.25, 0.3])


@pytest.mark.parametrize("name,steps,fill", [
    ("Normalize, fill 0 (the mean colour)", (*FLOAT, v2.Normalize(MEAN, STD)), 0.0),
    ("Normalize, a fill per channel", (*FLOAT, v2.Normalize(MEAN, STD)), (0.1, -0.2, 0.3)),
    ("ToDtype, fill 1.0 (a whole level)", FLOAT, 1.0),
    ("ToDtype, fill 0.5", FLOAT, 0.5),
])
def test_after_the_conversion_to_float_the_canvas_is_filled_in_the_float_images_units(name, steps, fill):
    """As torchvision pads the float tensor: the image unchanged inside its canvas, the fill
    exact around it (the Python path took it before; 0 after Normalize would be -mean/std
    if filled in uint8 levels)."""
    image = coordinate_image(20, 10)
    transform = C(*steps, v2.RandomZoomOut(fill=fill, side_range=(2.0, 2.0), p=1.0))
    assert transforms.untranslatable_reason(transform) is None
    converted = image / np.float32(255.0)
    if len(steps) > 2:
        converted = (converted - MEAN) / STD
    fills = np.broadcast_to(np.asarray(fill, dtype=np.float64), (3,))
    tops = []
    for outputs in both(image, transform, n=120):
        offsets = []
        for output in outputs:
            assert output.shape == (20, 40, 3) and output.dtype == np.float32
            found = [(t, s) for t in range(11) for s in range(21)
                     if np.allclose(output[t:t + 10, s:s + 20], converted, atol=1e-5)]
            assert len(found) == 1, f"{name}: the image is not inside its canvas"
            top, left = found[0]
            around = np.ones((20, 40), dtype=bool)
            around[top:top + 10, left:left + 20] = False
            assert np.allclose(output[around], fills, atol=1e-6), f"{name}: fill {output[around][0]}, not {fills}"
            offsets.append(top)
        assert min(offsets) == 0 and max(offsets) == 9   # int(10 * u), u < 1
        tops.append(offsets)
    close(*tops, 1.0, "top offset")   # sd ~3.2, 120 samples each
