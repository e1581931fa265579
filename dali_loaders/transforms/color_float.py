"""Colour steps after the conversion to float (ToTensor, ToDtype, Normalize): ColorJitter,
Grayscale, RandomGrayscale, GaussianBlur and RandomApply of them (and of the warps, affine.py's
float_warped), on the float image the twin
holds there (Images.materialize: converted and normalized as far as the recipe has gone), in
torchvision's float32 tensor arithmetic: no rounding to levels, blends clamped to 0 .. 1.

Where each runs: ColorJitter and the grey image of three channels in our operator on CPU graphs
(ops/float_color.py), else in DALI's arithmetic, ColorJitter with every adjustment at every
position of the drawn order and the image's own kept (no conditionals: a GPU operator costs a
batch about the same whatever its work); the blur in DALI's everywhere."""
from itertools import permutations

import numpy as np

from ._args import coin, uniform
from ._core import Images, Untranslatable, apply, dali_dtype, describe, flatten, is_v1
from ._hsv import mask, tensor_grey, tensor_hue_shifted, where

JITTER_ORDER = ("brightness", "contrast", "saturation", "hue")   # ColorJitter's fn_idx numbers them so


def float_pixels(images: Images):
    """The twin's float image as float32 DataNodes in the output layout (made now, if not yet,
    a pending flip with it in the same pass)."""
    from nvidia.dali import fn, types

    images.decode()
    images.materialize()
    if dali_dtype(images.dtype) != types.FLOAT:   # float16: torch's arithmetic here in float32, then back
        return fn.cast(images.data, dtype=types.FLOAT)
    return images.data


def store(images: Images, data) -> None:
    from nvidia.dali import fn, types

    dtype = dali_dtype(images.dtype)
    images.data = data if dtype == types.FLOAT else fn.cast(data, dtype=dtype)


def channel_of(data, k: int, images: Images):
    """Channel k of materialized data, keeping the channel axis."""
    return data[k:k + 1, :, :] if images.layout.index("C") == 0 else data[:, :, k:k + 1]


def channels_cat(images: Images, *planes):
    from nvidia.dali import fn

    return fn.cat(*planes, axis=images.layout.index("C"))


def grey(data, images: Images):
    """rgb_to_grayscale of float pixels, one channel: 0.2989 R + 0.587 G + 0.114 B unrounded (v1
    and v2 alike here; v2's fused multiply-adds differ by a float32 step)."""
    return tensor_grey(*(channel_of(data, k, images) for k in range(3)))


def check_channels(step, images: Images) -> None:
    if images.channels not in (1, 3):
        raise Untranslatable(f"{describe(step)} on a {images.channels}-channel image: torchvision's takes 1 or 3")


# -- ColorJitter ------------------------------------------------------------------------------


def color_jitter(step, images: Images) -> None:
    """Each factor uniform in its range, the adjustments in an order drawn uniformly among the
    active ones' (torchvision's randperm(4), the inactive left out), on the float image."""
    from nvidia.dali import fn, types

    from ..ops import float_color as op

    active = [name for name in JITTER_ORDER if getattr(step, name) is not None]
    if not active:   # ColorJitter() changes nothing
        return
    check_channels(step, images)
    data = float_pixels(images)
    factors = {name: uniform(*getattr(step, name)) if name in active else (1.0 if name != "hue" else 0.0)
               for name in JITTER_ORDER}
    orders = [[op.ADJUSTMENTS[active[k]] for k in order] for order in permutations(range(len(active)))]
    pick = fn.random.uniform(values=list(range(len(orders))), dtype=types.INT32) if len(orders) > 1 else \
        types.Constant(0, dtype=types.INT32)
    if _by_operator(data):
        drawn = fn.stack(*(fn.cast(factors[name], dtype=types.FLOAT) if not isinstance(factors[name], float)
                           else types.Constant(factors[name], dtype=types.FLOAT) for name in JITTER_ORDER))
        store(images, op.float_jitter(data, drawn, pick, orders, is_v1(step)))
        return
    store(images, masked_jitter(data, images, factors, orders, pick, is_v1(step)))


def masked_jitter(data, images: Images, factors, orders, pick, v1: bool):
    """The drawn order without conditionals: at each position the blend with the adjustment
    there (brightness, contrast and saturation are each a blend with a degenerate image: black,
    the mean grey, the grey image), and where that is the hue, the hue shift instead."""
    from nvidia.dali import fn, types

    from ..ops import float_color as op

    codes = op.ADJUSTMENTS
    present = {name for row in orders for name, code in codes.items() if code in row}
    unchanged = {"hue"} if images.channels == 3 else {"hue", "saturation"}   # a grey image has neither
    for position in range(len(orders[0])):
        at = fn.lookup_table(pick, keys=list(range(len(orders))), values=[row[position] for row in orders],
                             dtype=types.INT32) if len(orders) > 1 else orders[0][position]
        chose = {name: mask(at == codes[name]) if len(orders) > 1 else float(at == codes[name]) for name in present}
        blended = data
        if present - unchanged:
            # the identity blend (factor 1) where the adjustment leaves the image as it is
            factor = sum(chose[name] * (1.0 if name in unchanged else factors[name]) for name in present)
            degenerate = 0.0
            level = grey(data, images) if images.channels == 3 else data
            if "saturation" in present - unchanged:
                degenerate = chose["saturation"] * level
            if "contrast" in present:
                degenerate = degenerate + chose["contrast"] * fn.reductions.mean(level, axis_names=images.layout)
            blended = _blend(data, degenerate, factor, v1)
        if "hue" in present and images.channels == 3:
            shifted = _hue_shift(data, images, factors["hue"], v1)
            blended = where(chose["hue"], shifted, blended) if len(orders) > 1 or present != {"hue"} else shifted
        data = blended
    return data


def _blend(data, degenerate, factor, v1: bool):
    from nvidia.dali import math as dmath

    rest = 1.0 - factor
    mixed = factor * data + rest * degenerate if v1 else data * factor + degenerate * rest
    return dmath.clamp(mixed, 0.0, 1.0)


def _hue_shift(data, images: Images, factor, v1: bool):
    return channels_cat(images, *tensor_hue_shifted(*(channel_of(data, k, images) for k in range(3)), factor, v1))


# -- Grayscale, RandomGrayscale, GaussianBlur -------------------------------------------------------------


def greyed(step, images: Images, data, channels: int):
    """rgb_to_grayscale(num_output_channels=channels) of float pixels; a grey image as it is."""
    if images.channels == 1:
        return data if channels == 1 else channels_cat(images, data, data, data)
    level = grey(data, images)
    return level if channels == 1 else channels_cat(images, level, level, level)


def grayscale(step, images: Images) -> None:
    check_channels(step, images)
    data = float_pixels(images)
    if step.num_output_channels == 3 and images.channels == 3 and _by_operator(data):
        from nvidia.dali import types

        store(images, _grey_by_operator(step, data, types.Constant(0, dtype=types.INT32), [["grey"]]))
        return
    store(images, greyed(step, images, data, step.num_output_channels))
    images.channels = step.num_output_channels


def random_grayscale(step, images: Images) -> None:
    """The grey image (as many channels as the image) with probability p."""
    from nvidia.dali import fn, types

    check_channels(step, images)
    data = float_pixels(images)
    if images.channels == 3 and _by_operator(data):   # the coin picks the row: none, or the grey image
        store(images, _grey_by_operator(step, data, fn.cast(coin(step.p), dtype=types.INT32), [[], ["grey"]]))
        return
    store(images, where(mask(coin(step.p) > 0), greyed(step, images, data, images.channels), data))


def _by_operator(data) -> bool:
    from ..ops import float_color as op

    return data.device == "cpu" and op.usable()


def _grey_by_operator(step, data, pick, orders):
    """The grey image of three channels by our operator: `orders` rows of adjustment names."""
    from nvidia.dali import types

    from ..ops import float_color as op

    factors = types.Constant(np.zeros(op.WIDTH, dtype=np.float32))
    return op.float_jitter(data, factors, pick, [[op.ADJUSTMENTS[name] for name in row] for row in orders],
                           is_v1(step))


def gaussian_blur(step, images: Images) -> None:
    """torchvision's kernel (one sigma for both axes) and reflect border, in float32."""
    from nvidia.dali import fn, types

    kernel_x, kernel_y = step.kernel_size if not isinstance(step.kernel_size, int) else (step.kernel_size,) * 2
    sigma = uniform(*step.sigma) if step.sigma[0] != step.sigma[1] else float(step.sigma[0])
    data = float_pixels(images)
    store(images, fn.gaussian_blur(data, window_size=[int(kernel_y), int(kernel_x)], sigma=sigma, dtype=types.FLOAT))


# -- RandomApply ------------------------------------------------------------------------------


def random_apply(step, images: Images) -> None:
    """The steps on every image, kept with probability p, else the image as it was (float
    pixels: a select by 0/1 is exact)."""
    before = float_pixels(images)
    applied = images.branch()
    apply(flatten(list(step.transforms)), applied)
    after = float_pixels(applied)
    if applied.channels != images.channels:
        raise Untranslatable(f"{describe(step)}: its steps change the number of channels, and the images it "
                             f"leaves alone keep theirs")
    store(images, where(mask(coin(step.p) > 0), after, before))
