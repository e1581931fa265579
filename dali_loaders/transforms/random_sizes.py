"""Sizes drawn per sample: v2's RandomResize, RandomShortestSize and ScaleJitter (a resize to
the drawn size) and RandomZoomOut (a canvas padded around the image). Each size is computed
in torchvision's arithmetic (the int() of a double, or of a float32 product where torchvision
multiplies by torch.rand's float32), so that for a given draw the pixels are those of a
Resize or Pad to that size."""
import numpy as np

from ._args import (
    as_float32,
    as_float64,
    coin,
    crop_window,
    fill_values,
    float32_product,
    interpolation_refusal,
    is_number,
    random_offset,
    stack,
    truncated,
    uniform,
)
from ._core import Images, refuses, translates
from ._hsv import mask, where
from .geometry import resize_to


def _extra(canvas, side):
    """canvas - side, exact in float32 (whole numbers): a number where both are."""
    return float(canvas - side) if is_number(canvas) and is_number(side) else as_float32(canvas) - as_float32(side)


def _sides(images: Images):
    """(short, long) side of each image, float64: numbers for arrays of one size."""
    from nvidia.dali import math as dmath

    if is_number(images.height) and is_number(images.width):
        return float(min(images.height, images.width)), float(max(images.height, images.width))
    height, width = as_float64(images.height), as_float64(images.width)
    return dmath.min(height, width), dmath.max(height, width)


def _start(step, images: Images) -> None:
    images.decode()
    images.flush_mirror()   # the size drawn does not depend on it, the pixels' place does


def random_resize_refusal(step) -> str:
    if not int(step.min_size) < int(step.max_size):
        return f"min_size={step.min_size!r}, max_size={step.max_size!r}: the size is drawn from [min_size, max_size)"
    return interpolation_refusal(step)


@translates("RandomResize")
@refuses(random_resize_refusal)
def random_resize(step, images: Images) -> None:
    """The short side uniform in [min_size, max_size) (torch.randint), the long one scaled and
    truncated, as Resize(size) makes it."""
    from nvidia.dali import fn

    _start(step, images)
    short = random_offset(int(step.max_size) - int(step.min_size) - 1) + int(step.min_size)
    sizes = images.size_vector()
    sizes = sizes if sizes is not None else stack(images.height, images.width, integer=True)
    resized = sizes * short // fn.reductions.min(sizes)   # integer arithmetic: Resize's truncation
    resize_to(step, images, resized[0], resized[1])


@translates("RandomShortestSize")
@refuses(interpolation_refusal)
def random_shortest_size(step, images: Images) -> None:
    """The short side one of min_size (uniform over the list), unless the long side would then
    pass max_size; both sides int(side * r), r in double."""
    from nvidia.dali import fn, types
    from nvidia.dali import math as dmath

    _start(step, images)
    short_side, long_side = _sides(images)
    drawn = as_float64(fn.random.uniform(values=[int(s) for s in step.min_size], dtype=types.INT32))
    ratio = drawn / as_float64(short_side)
    if step.max_size is not None:
        cap = float(step.max_size) / long_side if is_number(long_side) else as_float64(step.max_size) / long_side
        ratio = dmath.min(ratio, as_float64(cap))
    resize_to(step, images, truncated(as_float64(images.height) * ratio), truncated(as_float64(images.width) * ratio))


@translates("ScaleJitter")
@refuses(interpolation_refusal)
def scale_jitter(step, images: Images) -> None:
    """r = min(target_size[1] / height, target_size[0] / width) (torchvision's order) times a
    scale uniform in scale_range, in float32 as torchvision multiplies by torch.rand's draw."""
    from nvidia.dali import fn, types
    from nvidia.dali import math as dmath

    _start(step, images)
    (target_width, target_height), (height, width) = step.target_size, (images.height, images.width)
    if is_number(height) and is_number(width):
        fit = float(np.float32(min(target_height / height, target_width / width)))
    else:
        fit = fn.cast(dmath.min(as_float64(target_height) / as_float64(height), as_float64(target_width) / as_float64(width)),
                      dtype=types.FLOAT)
    ratio = float32_product(fit, uniform(*(float(s) for s in step.scale_range)))
    resize_to(step, images, truncated(float32_product(height, ratio)), truncated(float32_product(width, ratio)))


@translates("RandomZoomOut")
def random_zoom_out(step, images: Images) -> None:
    """With probability p, a canvas int(side * r) a side, r uniform in side_range, filled with
    `fill`, the image at a uniform offset inside it."""
    from nvidia.dali import fn

    _start(step, images)
    p = float(step.p)
    if p <= 0.0:
        return
    ratio = uniform(*(float(s) for s in step.side_range))
    if p < 1.0:
        ratio = where(mask(coin(p)), ratio, 1.0)   # not applied: the canvas is the image
    canvas_height = truncated(float32_product(images.height, ratio))
    canvas_width = truncated(float32_product(images.width, ratio))
    top, left = (truncated(float32_product(_extra(canvas, side), fn.random.uniform(range=[0.0, 1.0])))
                 for canvas, side in ((canvas_height, images.height), (canvas_width, images.width)))
    crop_window(images, 0 - top, 0 - left, canvas_height, canvas_width, fill_values(step, images.channels))
