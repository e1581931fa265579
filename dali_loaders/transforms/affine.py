"""Rotation and affine warps with each twin's border and rounding."""
import math
import numbers

from ._args import fill_values, interp_type, stack, uniform
from ._core import Images, is_v1, refuses, translates, uint8_only
from ._hsv import mask, where

# -- rotation and affine warps ---------------------------------------------------------------


def inverse_affine(angle, translate, scale, shear, center):
    """torchvision's _get_inverse_affine_matrix, per sample, as a 2x3 output->input matrix.
    `angle` (clockwise) and `shear` are in degrees; numbers or DataNodes."""
    from nvidia.dali import fn

    rot, shear_x, shear_y = angle * (math.pi / 180), shear[0] * (math.pi / 180), shear[1] * (math.pi / 180)
    cos, sin, tan = _trig("cos"), _trig("sin"), _trig("tan")
    a = cos(rot - shear_y) / cos(shear_y)
    b = -cos(rot - shear_y) * tan(shear_x) / cos(shear_y) - sin(rot)
    c = sin(rot - shear_y) / cos(shear_y)
    d = -sin(rot - shear_y) * tan(shear_x) / cos(shear_y) + cos(rot)
    m = [d / scale, -b / scale, -c / scale, a / scale]
    (cx, cy), (tx, ty) = center, translate
    shift_x = m[0] * (-cx - tx) + m[1] * (-cy - ty) + cx
    shift_y = m[2] * (-cx - tx) + m[3] * (-cy - ty) + cy
    return fn.reshape(stack(m[0], m[1], shift_x, m[2], m[3], shift_y), shape=[2, 3])


def _trig(name: str):
    """math.<name> for numbers (fixed parameters), DALI's for DataNodes (drawn per sample)."""
    from nvidia.dali import math as dmath

    def function(x):
        return getattr(math, name)(x) if isinstance(x, numbers.Number) else getattr(dmath, name)(x)
    return function


def warp_refusal(step) -> str:
    from torchvision.transforms import InterpolationMode

    mode = step.interpolation
    mode = InterpolationMode(mode) if isinstance(mode, str) else mode
    if mode not in (InterpolationMode.NEAREST, InterpolationMode.BILINEAR, 0, 2):
        return f"interpolation {mode} is not supported (NEAREST, BILINEAR)"
    if getattr(step, "expand", False):
        return "expand=True is not supported"
    fill = fill_values(step, 3)
    if len(set(fill)) > 1:
        return f"fill={step.fill!r}: one value for every channel only"
    return ""


def warp(step, images: Images, angle, translate=(0, 0), scale=1.0, shear=(0.0, 0.0)) -> None:
    """The inverse of torchvision's affine matrix, per sample, through fn.warp_affine."""
    images.decode()
    images.flush_mirror()
    center = step.center if step.center is not None else (images.width * 0.5, images.height * 0.5)
    matrix = inverse_affine(angle, translate, scale, shear, center)
    warped(step, images, affine_warp(matrix))


def affine_warp(matrix):
    """fn.warp_affine by `matrix` (output -> input) as warped() calls it: (data, interpolation,
    fill or None to clamp to the border) -> float32 for linear, else data's type."""
    from nvidia.dali import fn, types

    def warp(data, interpolation, fill):
        border = {} if fill is None else {"fill_value": fill}
        dtype = {"dtype": types.FLOAT} if interpolation == types.INTERP_LINEAR else {}
        return fn.warp_affine(data, matrix=matrix, interp_type=interpolation, inverse_map=True, **border, **dtype)
    return warp


def warped(step, images: Images, warp) -> None:
    """The images through `warp` (see affine_warp) with the step's interpolation and fill, in
    each twin's border and rounding: nearest is DALI's (pixel centres mapped back, the fill
    where the source pixel is outside); bilinear as below."""
    from nvidia.dali import types

    fill = fill_values(step, 1)[0]
    if interp_type(step) == types.INTERP_NN:
        images.data = warp(images.data, types.INTERP_NN, fill)
    elif images.kind == "pil":
        images.data = pil_bilinear_warp(images.data, warp, fill)
    else:
        images.data = tensor_bilinear_warp(images.data, warp, fill, v1=is_v1(step))


def ones_channel(data):
    """An HW1 uint8 image of ones, the size of `data`."""
    from nvidia.dali import fn, types

    return fn.cast(data[:, :, 0:1] >= 0, dtype=types.UINT8)


def pil_bilinear_warp(data, warp, fill: float):
    """PIL's bilinear transform: where the mapped pixel centre falls inside the image, the
    neighbours clamped to the border (never blended with the fill) and the result truncated;
    elsewhere the fill. The inside test is the nearest warp's, which is PIL's."""
    from nvidia.dali import fn, types
    from nvidia.dali import math as dmath

    inside = warp(ones_channel(data), types.INTERP_NN, 0)
    clamped = warp(data, types.INTERP_LINEAR, None)   # no fill: clamped to the border
    return fn.cast(where(mask(inside > 0), dmath.floor(clamped), fill), dtype=types.UINT8)


def tensor_bilinear_warp(data, warp, fill: float, v1: bool):
    """torchvision's grid_sample with zeros outside, and a channel of ones warped alongside
    as the mask: out = mask * warped + (1 - mask) * fill (v2 groups it as
    (warped - fill) * mask + fill), rounded half to even. A pixel partly outside is thus
    blended twice: its outside neighbours count as 0, then the mask weighs it again."""
    from nvidia.dali import fn, types

    channels = fn.cat(data, ones_channel(data), axis=2)
    moved = warp(channels, types.INTERP_LINEAR, 0)
    return fill_blended(moved[:, :, 0:-1], moved[:, :, -1:], fill, v1)


def fill_blended(image, weight, fill, v1: bool):
    """torchvision's fill after grid_sample with a mask channel (`weight`), as uint8: v1's
    image * weight + (1 - weight) * fill, v2's (image - fill) * weight + fill, rounded half to
    even. With weights of 0 and 1 (nearest) it is the image where 1, else the fill."""
    from nvidia.dali import fn, types

    out = image * weight + (1.0 - weight) * fill if v1 else (image - fill) * weight + fill
    return fn.cast(_round_half_even(out), dtype=types.UINT8)


def _round_half_even(x):
    """torch.round of x >= 0."""
    from nvidia.dali import math as dmath

    nearest = dmath.floor(x + 0.5)
    nearest = nearest - mask(nearest - x > 0.5)   # x + 0.5 rounded up to an integer (x just below 0.5)
    tie_to_odd = mask(nearest - x == 0.5) * (nearest - 2.0 * dmath.floor(nearest * 0.5))
    return nearest - tie_to_odd


@translates("RandomRotation")
@refuses(warp_refusal)
@uint8_only
def random_rotation(step, images: Images) -> None:
    """Counter-clockwise by an angle uniform in `degrees` (torchvision's affine turns clockwise)."""
    warp(step, images, -uniform(*step.degrees))


@translates("RandomAffine")
@refuses(warp_refusal)
@uint8_only
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
