"""Colour: ColorJitter, Grayscale, GaussianBlur, PIL's blur, and the blends they are made of, in each twin's
rounding."""
import numpy as np

from . import color_float, fused
from ._args import coin, one_of, uniform
from ._core import Images, Untranslatable, describe, is_v1, refuses, register, translates, uint8_only, uint8_or_float
from ._placement import augments, branches
from ._hsv import (
    mask,
    pil_hsv_to_rgb,
    pil_hue_levels,
    pil_rgb_to_hsv,
    tensor_grey,
    tensor_hue_shifted,
)
from .pil_blur import ONE, PASSES, PILGaussianBlur, fixed_point, kernel_width

# -- colour ---------------------------------------------------------------------------------


def to_uint8(values):
    """Float pixels back to uint8 as the twin stores them: PIL's blend and torchvision's
    tensor kernels both truncate (a clamp, then a cast that drops the fraction). DALI's cast
    saturates, so after the floor it is the clamp (on a GPU graph an operator fewer is time
    saved, see docs/gpu.md)."""
    from nvidia.dali import fn, types
    from nvidia.dali import math as dmath

    return fn.cast(dmath.floor(values), dtype=types.UINT8)


def as_float(data):
    from nvidia.dali import fn, types

    return fn.cast(data, dtype=types.FLOAT)


PIL_LUMA_WEIGHTS = (19595, 38470, 7471)   # convert("L"): R, G, B in 16-bit fixed point


def luma(data, images: Images):
    """The grey image (float, HW1) each twin computes from uint8 pixels:
    PIL's convert("L") in 16-bit fixed point, rounded; torchvision's tensors 0.2989 R +
    0.587 G + 0.114 B in float32, truncated. A 1-channel image is its own grey."""
    from nvidia.dali import fn, types
    from nvidia.dali import math as dmath

    if images.channels == 1:
        return as_float(data)
    rgb = data if images.channels == 3 else data[:, :, 0:3]
    if images.kind == "pil":
        # (R w0 + G w1 + B w2 + 2^15) / 2^16, floored: each product and partial sum is a whole
        # multiple of 2^-16 below 2^8, exact in float32 in any order (or fused): two operators
        # where twelve did it in int32
        weights = [w / 65536.0 for w in PIL_LUMA_WEIGHTS]
        return dmath.floor(fn.coord_transform(rgb, M=weights, T=[0.5], dtype=types.FLOAT))
    pixels = as_float(rgb)   # floats: torch's order of additions, one channel at a time
    r, g, b = (pixels[:, :, k:k + 1] for k in range(3))
    return dmath.floor(tensor_grey(r, g, b))


def blend(data, other, factor, images: Images):
    """torchvision's blend of the image with `other` (0 for brightness, the grey mean for
    contrast, the grey image for saturation), in each twin's order of float operations."""
    pixels = as_float(data)
    if images.kind == "pil":   # Image.blend(degenerate, image, factor)
        return to_uint8(other + factor * (pixels - other))
    return to_uint8(pixels * factor + other * (1.0 - factor))


def adjust_brightness(data, factor, images: Images):
    return blend(data, 0.0, factor, images)


def adjust_contrast(data, factor, images: Images):
    """A blend with the mean grey: PIL rounds the mean to an integer, tensors keep it float."""
    from nvidia.dali import fn
    from nvidia.dali import math as dmath

    mean = fn.reductions.mean(luma(data, images), axis_names="HWC")
    if images.kind == "pil":
        mean = dmath.floor(mean + 0.5)
    return blend(data, mean, factor, images)


def adjust_saturation(data, factor, images: Images):
    """A blend with the grey image; a grey image has no saturation to change."""
    if images.channels == 1:
        return data
    return blend(data, luma(data, images), factor, images)


def adjust_hue(data, factor, images: Images, v1: bool = False):
    """torchvision's hue shift in HSV, in each twin's arithmetic: PIL's 8-bit HSV shifted by
    int(factor * 255) levels (wrapping), or the tensor kernels' float HSV (v1's and v2's
    differ in a few roundings). A grey image has no hue."""
    from nvidia.dali import fn, types

    if images.channels == 1:
        return data
    r, g, b = (fn.cast(data[:, :, k:k + 1], dtype=types.FLOAT) for k in range(3))
    if images.kind == "pil":
        h, s, v = pil_rgb_to_hsv(r, g, b)
        h = h + pil_hue_levels(factor)
        rgb = pil_hsv_to_rgb(h - 256.0 * mask(h >= 256.0), s, v)
        return fn.cat(*(fn.cast(c, dtype=types.UINT8) for c in rgb), axis=2)
    shifted = tensor_hue_shifted(*(c / 255.0 if v1 else c * (1.0 / 255.0) for c in (r, g, b)), factor, v1)
    return fn.cat(*(to_uint8(c * 255.999) for c in shifted), axis=2)


JITTERS = {"brightness": adjust_brightness, "contrast": adjust_contrast, "saturation": adjust_saturation,
           "hue": adjust_hue}


@translates("ColorJitter")
@branches
@augments
@uint8_or_float(color_float.color_jitter)
def color_jitter(step, images: Images) -> None:
    """Each factor uniform in its range, the adjustments in a random order, as torchvision does
    (after the conversion to float: color_float.py)."""
    from functools import partial
    from itertools import permutations

    from nvidia.dali import fn, types

    images.decode()
    jitters = dict(JITTERS, hue=partial(adjust_hue, v1=is_v1(step)))
    active = [name for name in jitters if getattr(step, name) is not None]
    if not active:   # ColorJitter() changes nothing
        return
    if fused.usable(images):   # one DaliLoadersAugment call, no conditionals
        fused.color_jitter(step, images, active)
        return
    images.flush_augment()
    factors = {name: uniform(*getattr(step, name)) for name in active}
    orders = list(permutations(range(len(active))))
    order = fn.random.uniform(values=list(range(len(orders))), dtype=types.INT32) if len(orders) > 1 else None
    data = images.data
    for position in range(len(active)):
        if order is None:
            data = jitters[active[0]](data, factors[active[0]], images)
            continue
        chosen = fn.lookup_table(order, keys=list(range(len(orders))), dtype=types.INT32,
                                 values=[o[position] for o in orders])
        data = one_of(chosen, [partial(jitters[name], factor=factors[name], images=images) for name in active], data)
    images.data = data


def grayscale_refusal(step) -> str:
    channels = getattr(step, "num_output_channels", 3)
    return "" if channels in (1, 3) else f"num_output_channels={channels} (1 or 3)"


def _grey_channels(data, channels: int, images: Images):
    """The twin's grey image as uint8, 1 or 3 channels."""
    from nvidia.dali import fn, types

    grey = fn.cast(luma(data, images), dtype=types.UINT8)
    return grey if channels == 1 else fn.cat(grey, grey, grey, axis=2)


@translates("Grayscale")
@refuses(grayscale_refusal)
@uint8_or_float(color_float.grayscale)
def grayscale(step, images: Images) -> None:
    images.decode()
    if images.channels == 3:
        images.data = _grey_channels(images.data, step.num_output_channels, images)
    elif step.num_output_channels == 3:
        from nvidia.dali import fn

        images.data = fn.cat(images.data, images.data, images.data, axis=2)
    images.channels = step.num_output_channels


@translates("RGB")
def rgb(step, images: Images) -> None:
    """v2's RGB: a grey image's one channel three times, as PIL's convert("RGB") and
    torchvision's grayscale_to_rgb make it (uint8 or float); an RGB image as it is."""
    if images.channels != 3:
        repeat_channel(images)


def repeat_channel(images: Images) -> None:
    """A 1-channel image's channel three times, uint8 or float (its pending scale and offset
    with it), along the channel axis of the layout it is in."""
    from nvidia.dali import fn

    images.decode()
    axis = images.layout.index("C") if images.materialized else 2
    images.data = fn.cat(images.data, images.data, images.data, axis=axis)
    images.scale, images.offset = images.scale * 3, images.offset * 3
    images.channels = 3


@translates("RandomGrayscale")
@branches
@augments
@uint8_or_float(color_float.random_grayscale)
def random_grayscale(step, images: Images) -> None:
    """Keeps the number of channels, as torchvision does."""
    images.decode()
    if images.channels == 1:
        return
    if fused.usable(images):
        fused.random_grayscale(step, images)
        return
    images.flush_augment()
    data = images.data
    if coin(step.p):
        data = _grey_channels(data, 3, images)
    images.data = data


@translates("GaussianBlur")
@augments
@uint8_or_float(color_float.gaussian_blur)
def gaussian_blur(step, images: Images) -> None:
    """In the augmentation operator on CPU graphs (a separable pass, several times DALI's
    speed), else DALI's blur."""
    images.decode()
    if fused.usable(images):
        fused.gaussian_blur(step, images)
        return
    images.flush_augment()
    blur(step, images)


def blur(step, images: Images, applied=None) -> None:
    """One sigma per image for both axes, uniform in the range, as torchvision draws it; the
    kernel (width, height) and the border (reflect-101) are torchvision's. `applied`, an int32
    0/1 per sample (RandomApply's coin): where 0, a window of 1 x 1, which gives the image back
    exactly at the cost of a copy, so no conditional is needed."""
    from nvidia.dali import fn

    kernel_x, kernel_y = step.kernel_size if not isinstance(step.kernel_size, int) else (step.kernel_size,) * 2
    sigma = uniform(*step.sigma) if step.sigma[0] != step.sigma[1] else float(step.sigma[0])
    window = [int(kernel_y), int(kernel_x)]
    if applied is not None:
        window = fn.stack(*(applied * (k - 1) + 1 for k in window))
    images.data = fn.gaussian_blur(images.data, window_size=window, sigma=sigma)


@register(PILGaussianBlur)
@augments
@uint8_only
def pil_gaussian_blur(step, images: Images) -> None:
    """In the augmentation operator on CPU graphs (a running sum per line, in PIL's integers),
    else in DALI's filters and arithmetic (pil_blur)."""
    images.decode()
    if fused.usable(images) and images.kind == "pil":
        fused.pil_gaussian_blur(step, images)
        return
    images.flush_augment()   # a pending flip commutes with the symmetric blur
    pil_blur(step, images)


def pil_blur(step, images: Images, applied=None) -> None:
    """PIL's blur (see pil_blur.py): PASSES passes of the extended box along the width, then
    along the height, the border pixel repeated, each pass in PIL's 24-bit fixed point, so the
    pixels are PIL's, ties included. A pass is two of DALI's filters, exact integer sums (of
    the box's whole pixels and of its two fractional end pixels), then (sums * weights +
    2 ** 23) // 2 ** 24 in int64. The weights are computed per image from its radius in
    float32, as PIL does; `applied`, an int32 0/1 per sample (RandomApply's coin), and the
    step's own coin make them the identity where 0, so no conditional is needed."""
    if images.kind != "pil":
        raise Untranslatable(f"{describe(step)} filters PIL images, and here the image is a tensor; move it before "
                             f"the conversion to a tensor (ToImage, PILToTensor)")
    if step.p < 1.0:
        applied = coin(step.p) if applied is None else applied * coin(step.p)
    low, high = step.radius
    images.data = pil_blurred(images.data, uniform(low, high), high, images.device, applied)


def pil_blurred(data, radius, largest: float, device: str, applied=None):
    """`data` (HWC uint8) through PIL's blur at `radius` (a float, or a float32 DataNode of
    radii up to `largest`), as pil_blur describes; the identity where `applied` is 0."""
    from nvidia.dali import fn, types

    width = kernel_width(largest)
    distance = types.Constant(np.abs(np.arange(width) - width // 2).astype(np.float32))
    if isinstance(radius, float):
        whole, whole_weight, end_weight = fixed_point(radius)
        whole_weight, end_weight = (types.Constant(w, dtype=types.INT64) for w in (whole_weight, end_weight))
    else:
        whole, whole_weight, end_weight = pil_fixed_point(radius)
    if applied is not None:
        whole, end_weight = whole * applied, end_weight * applied
        whole_weight = whole_weight * applied + ONE * (1 - applied)
    if device == "gpu" and (applied is not None or not isinstance(radius, float)):   # DataNodes
        whole_weight, end_weight = whole_weight.gpu(), end_weight.gpu()
    inner = fn.cast(distance <= whole, dtype=types.FLOAT)
    ends = fn.cast(distance == whole + 1, dtype=types.FLOAT)
    kernels = {axis: [fn.reshape(k, shape=shape) for k in (inner, ends)]
               for axis, shape in (("width", [1, width]), ("height", [width, 1]))}
    if device == "gpu":
        kernels = {axis: [k.gpu() for k in pair] for axis, pair in kernels.items()}
    data = fn.cast(data, dtype=types.INT16)   # the filter's sums exact in its output type
    axes = ["width"] * PASSES + ["height"] * PASSES
    for k, axis in enumerate(axes):
        inside, at_ends = (fn.filter(data, kernel, border="clamp") for kernel in kernels[axis])
        data = fn.cast((inside * whole_weight + at_ends * end_weight + ONE // 2) // ONE,
                       dtype=types.UINT8 if k == len(axes) - 1 else types.INT16)
    return data


def pil_fixed_point(radius):
    """pil_blur.fixed_point of each image's radius (a float32 DataNode), in DALI's float32
    arithmetic as PIL's: int64 DataNodes."""
    from nvidia.dali import fn, types
    from nvidia.dali import math as dmath

    variance = radius * radius / float(PASSES)
    lower = dmath.floor((dmath.sqrt(12.0 * variance + 1.0) - 1.0) / 2.0)
    box = lower + (2.0 * lower + 1.0) * (lower * (lower + 1.0) - 3.0 * variance) / \
        (6.0 * (variance - (lower + 1.0) * (lower + 1.0)))
    whole = fn.cast(dmath.floor(box), dtype=types.INT64)
    whole_weight = fn.cast(dmath.floor(float(ONE) / (box * 2.0 + 1.0)), dtype=types.INT64)
    return whole, whole_weight, (ONE - (2 * whole + 1) * whole_weight) // 2
