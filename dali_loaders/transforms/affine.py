"""Rotation and affine warps with each twin's border and rounding."""
import math
import numbers

import numpy as np

from . import fused
from ._args import fill_values, interp_type, pending_levels, stack, uniform
from ._core import Images, Untranslatable, dali_dtype, describe, is_v1, refuses, translates, uint8_or_float
from ._hsv import mask, where
from ._placement import augments_when

# -- rotation and affine warps ---------------------------------------------------------------


def inverse_affine(angle, translate, scale, shear, center, origin=None):
    """torchvision's _get_inverse_affine_matrix, per sample, as a 2x3 output->input matrix.
    `angle` (clockwise) and `shear` are in degrees; numbers or DataNodes. `origin`: the output
    point that maps to `center` (the centre of an expanded canvas), `center` by default."""
    from nvidia.dali import fn

    rot, shear_x, shear_y = angle * (math.pi / 180), shear[0] * (math.pi / 180), shear[1] * (math.pi / 180)
    cos, sin, tan = _trig("cos"), _trig("sin"), _trig("tan")
    a = cos(rot - shear_y) / cos(shear_y)
    b = -cos(rot - shear_y) * tan(shear_x) / cos(shear_y) - sin(rot)
    c = sin(rot - shear_y) / cos(shear_y)
    d = -sin(rot - shear_y) * tan(shear_x) / cos(shear_y) + cos(rot)
    m = [d / scale, -b / scale, -c / scale, a / scale]
    (cx, cy), (ox, oy), (tx, ty) = center, origin or center, translate
    shift_x = m[0] * (-ox - tx) + m[1] * (-oy - ty) + cx
    shift_y = m[2] * (-ox - tx) + m[3] * (-oy - ty) + cy
    return fn.reshape(stack(m[0], m[1], shift_x, m[2], m[3], shift_y), shape=[2, 3])


def _trig(name: str):
    """math.<name> for numbers (fixed parameters), DALI's for DataNodes (drawn per sample)."""
    from nvidia.dali import math as dmath

    def function(x):
        return getattr(math, name)(x) if isinstance(x, numbers.Number) else getattr(dmath, name)(x)
    return function


def warp_refusal(step, per_channel_fill: bool = False) -> str:
    """Why the warp's parameters are refused, or "". A fill per channel only where the
    translator takes one (`per_channel_fill`: the rotations, affines and perspectives)."""
    from torchvision.transforms import InterpolationMode

    mode = step.interpolation
    mode = InterpolationMode(mode) if isinstance(mode, str) else mode
    if mode not in (InterpolationMode.NEAREST, InterpolationMode.BILINEAR, 0, 2):
        return f"interpolation {mode} is not supported (NEAREST, BILINEAR)"
    if getattr(step, "expand", False):
        if step.center is not None:
            return "expand=True with a center is not supported"
        if step.degrees[0] == step.degrees[1] and step.degrees[0] % 90 == 0:
            return (f"expand=True at the fixed angle {step.degrees[0]} is not supported (torchvision turns the "
                    f"image by a transpose there); use RandomRotation's range or a flip")
    fill = fill_values(step, 3)
    if len(set(fill)) > 1 and not per_channel_fill:
        return f"fill={step.fill!r}: one value for every channel only"
    return ""


def turn_refusal(step) -> str:
    """warp_refusal of RandomRotation, RandomAffine and RandomPerspective: any fill."""
    return warp_refusal(step, per_channel_fill=True)


def checked_fill(step, images: Images):
    """The step's fill for each of the images' channels; a fill of another length is refused
    (torchvision refuses it too)."""
    fill = fill_values(step, images.channels)
    if len(fill) != images.channels:
        raise Untranslatable(f"{describe(step)}: fill={step.fill!r} has {len(fill)} values for images of "
                             f"{images.channels} channel(s); give one value, or one a channel")
    return fill


def warp(step, images: Images, angle, translate=(0, 0), scale=1.0, shear=(0.0, 0.0)) -> None:
    """The inverse of torchvision's affine matrix, per sample, through fn.warp_affine."""
    images.decode()
    images.flush_mirror()
    center = step.center if step.center is not None else (images.width * 0.5, images.height * 0.5)
    matrix = inverse_affine(angle, translate, scale, shear, center)
    warped(step, images, affine_warp(matrix))


def affine_warp(matrix, size=None):
    """fn.warp_affine by `matrix` (output -> input) as warped() calls it: (data, interpolation,
    fill or None to clamp to the border) -> float32 for linear, else data's type. `size`: the
    output's (height, width), float32 per sample, where it is not the input's."""
    from nvidia.dali import fn, types

    def warp(data, interpolation, fill):
        border = {} if fill is None else {"fill_value": fill}
        dtype = {"dtype": types.FLOAT} if interpolation == types.INTERP_LINEAR else {}
        sized = {} if size is None else {"size": size}
        return fn.warp_affine(data, matrix=matrix, interp_type=interpolation, inverse_map=True, **border, **dtype,
                              **sized)
    return warp


def warped(step, images: Images, warp) -> None:
    """The images through `warp` (see affine_warp) with the step's interpolation and fill, in
    each twin's border and rounding: nearest is DALI's (pixel centres mapped back, the fill
    where the source pixel is outside); bilinear as below."""
    from nvidia.dali import fn, types

    if images.is_float:
        float_warped(step, images, warp)
        return
    fill = checked_fill(step, images)
    if len(set(fill)) == 1:
        fill = fill[0]
    else:   # one level a channel, broadcast over the pixels
        fill = types.Constant(np.array(fill, dtype=np.float32).reshape(1, 1, -1), device=images.data.device)
    if interp_type(step) == types.INTERP_NN and isinstance(fill, float):
        images.data = warp(images.data, types.INTERP_NN, fill)
    elif interp_type(step) == types.INTERP_NN:   # DALI's warps fill with one value: zeros, then the fill
        inside = warp(ones_like(images, images.data), types.INTERP_NN, 0)
        moved = warp(images.data, types.INTERP_NN, 0)
        images.data = fn.cast(moved + (1.0 - fn.cast(inside, dtype=types.FLOAT)) * fill, dtype=types.UINT8)
    elif images.kind == "pil":
        images.data = pil_bilinear_warp(images.data, warp, fill, ones_like(images, images.data))
    else:
        images.data = tensor_bilinear_warp(images.data, warp, fill, ones_like(images, images.data), v1=is_v1(step))


def float_warped(step, images: Images, warp) -> None:
    """After the conversion to float, as torchvision warps the float tensor: grid_sample with a
    channel of ones warped alongside as the mask, then the fill where it is 0 (nearest) or
    blended by it (bilinear), unrounded (fill_blended's formulas). The fill is in the float
    image's units: the data's (the conversion pending) hold it as (fill - offset) / scale."""
    from nvidia.dali import fn, types

    levels = _nearest_levels(step, images)
    if levels is not None and len(set(levels)) == 1:
        # picking pixels commutes with the pending conversion: the uint8 data warped, the fill
        # as the level it converts from (ToTensor's 0), exactly; no mask, a third of the bytes
        images.data = warp(images.data, types.INTERP_NN, levels[0])
        return
    fill = checked_fill(step, images)
    if interp_type(step) != types.INTERP_NN and any(images.offset):
        # grid_sample's zeros outside are the float image's: an offset (Normalize's) moves them
        # in the data's units, so a bilinear warp needs the float image made first
        images.materialize()
    if images.materialized:   # the float image itself, in the output layout: DALI warps HWC
        channels_first = images.layout.index("C") == 0
        data = fn.transpose(images.data, perm=[1, 2, 0]) if channels_first else images.data
        levels = fill
    else:
        channels_first, data = False, images.data
        scale, offset = images.scale or [1.0] * images.channels, images.offset or [0.0] * images.channels
        levels = [(f - o) / s for f, s, o in zip(fill, scale, offset)]
    data = fn.cast(data, dtype=types.FLOAT)
    ones = ones_like(images, data, types.FLOAT)
    image, weight = warp(data, interp_type(step), 0.0), warp(ones, interp_type(step), 0.0)
    level = types.Constant(np.array(levels, dtype=np.float32).reshape(1, 1, -1), device=data.device)
    # nearest: the pixel or the fill, exactly (torch.where); bilinear: each version's blend
    blends = is_v1(step) or interp_type(step) == types.INTERP_NN
    out = image * weight + (1.0 - weight) * level if blends else (image - level) * weight + level
    if images.materialized:
        out = fn.transpose(out, perm=[2, 0, 1]) if channels_first else out
        images.data = out if dali_dtype(images.dtype) == types.FLOAT else fn.cast(out, dtype=dali_dtype(images.dtype))
    else:
        images.data, images.float_pixels = out, True


def float_warp_refusal(step) -> str:
    """Where the plan sees it: torchvision's fill=None leaves the mask out (zeros blended in), which
    the float warps do not translate."""
    if getattr(step, "fill", 0) is None:
        return f"{describe(step)} with fill=None after the conversion to float is not supported; give a fill (0)"
    return ""


def ones_channel(data, dtype=None):
    """An HW1 image of ones the size of `data` (uint8 unless `dtype`), from the data: 1 for any
    number, negative ones after Normalize too."""
    from nvidia.dali import fn, types

    first = data[:, :, 0:1]
    return fn.cast(first == first, dtype=dtype or types.UINT8)


def ones_like(images: Images, data, dtype=None):
    """ones_channel of `data`, the images' size: on the CPU made by fn.ones, with no pass over
    the data (fn.ones does not run on the GPU)."""
    from nvidia.dali import fn, types

    if data.device == "gpu":
        return ones_channel(data, dtype)
    return fn.ones(shape=stack(images.height, images.width, 1, integer=True), dtype=dtype or types.UINT8)


def pil_bilinear_warp(data, warp, fill: float, ones):
    """PIL's bilinear transform: where the mapped pixel centre falls inside the image, the
    neighbours clamped to the border (never blended with the fill) and the result truncated;
    elsewhere the fill. The inside test is the nearest warp's, which is PIL's."""
    from nvidia.dali import fn, types
    from nvidia.dali import math as dmath

    inside = warp(ones, types.INTERP_NN, 0)
    clamped = warp(data, types.INTERP_LINEAR, None)   # no fill: clamped to the border
    return fn.cast(where(mask(inside > 0), dmath.floor(clamped), fill), dtype=types.UINT8)


def tensor_bilinear_warp(data, warp, fill: float, ones, v1: bool):
    """torchvision's grid_sample with zeros outside, and `ones` (ones_like) warped as the mask:
    out = mask * warped + (1 - mask) * fill (v2 groups it as (warped - fill) * mask + fill),
    rounded half to even. A pixel partly outside is thus blended twice: its outside neighbours
    count as 0, then the mask weighs it again. The mask is warped apart: a channel cut back out
    of one warp costs more."""
    from nvidia.dali import types

    return fill_blended(warp(data, types.INTERP_LINEAR, 0), warp(ones, types.INTERP_LINEAR, 0), fill, v1)


def fill_blended(image, weight, fill, v1: bool):
    """torchvision's fill after grid_sample with a mask channel (`weight`), as uint8: v1's
    image * weight + (1 - weight) * fill, v2's (image - fill) * weight + fill, rounded half to
    even. With weights of 0 and 1 (nearest) it is the image where 1, else the fill."""
    from nvidia.dali import fn, types

    if isinstance(fill, float) and fill == 0.0:   # the default fill: both blends are the product, exactly
        out = image * weight
    else:
        out = image * weight + (1.0 - weight) * fill if v1 else (image - fill) * weight + fill
    return _uint8_half_even(out)


def _uint8_half_even(x):
    """torch.round of x in 0 .. 255, as uint8: DALI's cast rounds a half up (away from zero),
    so an exact half that came out odd steps back down. Seven operators over the image, where
    rounding in float arithmetic took sixteen."""
    from nvidia.dali import fn, types
    from nvidia.dali import math as dmath

    rounded = fn.cast(x, dtype=types.UINT8)
    half = fn.cast(x - dmath.floor(x) == 0.5, dtype=types.UINT8)
    return rounded - (half & rounded)   # 1 where a half rounded up to an odd number


def fused_rotation(step) -> bool:
    """Whether the augmentation operator turns the image (on CPU graphs): F.rotate's own case,
    the image's centre, its own canvas."""
    return not step.expand and step.center is None


@translates("RandomRotation")
@refuses(turn_refusal)
@augments_when(fused_rotation)
@uint8_or_float(float_refusal=float_warp_refusal)
def random_rotation(step, images: Images) -> None:
    """Counter-clockwise by an angle uniform in `degrees` (torchvision's affine turns clockwise);
    with expand=True onto the canvas that holds the whole turned image, about its centre. On
    CPU graphs the augmentation operator turns it about its centre, in each twin's warp (after
    the conversion to float too, where a nearest turn of the uint8 data fills whole levels:
    picking pixels commutes with the pending conversion)."""
    checked_fill(step, images)   # the fill's length checked before any path uses it
    if fused.usable(images) and fused_rotation(step):
        if not images.is_float:
            images.decode()
            fused.rotation(step, images)
            return
        levels = _nearest_levels(step, images)
        if levels is not None:
            images.decode()
            fused.rotation(step, images, fill=levels)
            return
    angle = -uniform(*step.degrees)
    if not step.expand:
        warp(step, images, angle)
        return
    images.decode()
    images.flush_mirror()
    height, width = rotated_canvas(images.height, images.width, angle, pil=images.kind == "pil")
    matrix = inverse_affine(angle, (0, 0), 1.0, (0.0, 0.0), (images.width * 0.5, images.height * 0.5),
                            origin=(width * 0.5, height * 0.5))
    warped(step, images, affine_warp(matrix, size=stack(height, width)))
    images.height, images.width = height, width


def _nearest_levels(step, images: Images):
    """The fill as whole levels of uint8 data the conversion to float still waits for, where
    the step picks pixels (NEAREST); else None."""
    from nvidia.dali import types

    if interp_type(step) != types.INTERP_NN or images.materialized or images.float_pixels:
        return None
    return pending_levels(images, checked_fill(step, images))


def rotated_canvas(height, width, angle, pil: bool):
    """(height, width), ints or int32 DataNodes, of RandomRotation(expand=True)'s canvas: the
    box of the image turned by `angle` degrees about its centre, each side ceil(centre + reach)
    - floor(centre - reach), as PIL's rotate computes it (double); torchvision's tensor kernel
    (_compute_affine_output_size, float32) truncates both ends to 1e-4 first, so that float
    noise above a whole number does not add a pixel."""
    from nvidia.dali import fn, types
    from nvidia.dali import math as dmath

    numbers_only = all(isinstance(v, numbers.Number) for v in (height, width, angle))
    real = np.float64 if pil else np.float32   # the twin's precision, for what is fixed
    if numbers_only:   # a fixed size and angle
        height, width = real(height), real(width)
        floor, ceil, trunc = np.floor, np.ceil, np.trunc
    else:
        floor, ceil = dmath.floor, dmath.ceil
        height, width = (fn.cast(v, dtype=types.FLOAT64 if pil else types.FLOAT)
                         if not isinstance(v, numbers.Number) else float(v) for v in (height, width))

        def trunc(x):
            positive = mask(x >= 0)
            return positive * floor(x) + (1.0 - positive) * ceil(x)
    if isinstance(angle, numbers.Number):
        radians = real(angle) * real(math.pi / 180)
        along, across = abs(np.cos(radians)), abs(np.sin(radians))
        if not numbers_only:   # DALI's arithmetic takes Python numbers
            along, across = float(along), float(across)
    else:
        radians = (fn.cast(angle, dtype=types.FLOAT64) if pil else angle) * (math.pi / 180)
        along, across = dmath.abs(dmath.cos(radians)), dmath.abs(dmath.sin(radians))
    sides = []
    for side, other, own, cross in ((height, width, along, across), (width, height, along, across)):
        reach = (side * own + other * cross) * 0.5
        high, low = side * 0.5 + reach, side * 0.5 - reach
        if not pil:
            high, low = trunc(high * 1e4) * 1e-4, trunc(low * 1e4) * 1e-4
        sides.append(ceil(high) - floor(low))
    if numbers_only:
        return int(sides[0]), int(sides[1])
    return tuple(fn.cast(side, dtype=types.INT32) for side in sides)


@translates("RandomAffine")
@refuses(turn_refusal)
@uint8_or_float(float_refusal=float_warp_refusal)
def random_affine(step, images: Images) -> None:
    """torchvision's get_params, drawn per sample: the translation in whole pixels."""
    from nvidia.dali import math as dmath

    translate = (0, 0)
    if step.translate is not None:
        translate = tuple(dmath.floor(uniform(-t * side, t * side) + 0.5)
                          for t, side in zip(step.translate, (images.width, images.height)))
    scale = uniform(*step.scale) if step.scale is not None else 1.0
    shear = (0.0, 0.0)
    if step.shear is not None:
        shear = (uniform(step.shear[0], step.shear[1]),
                 uniform(step.shear[2], step.shear[3]) if len(step.shear) == 4 else 0.0)
    warp(step, images, uniform(*step.degrees), translate, scale, shear)
