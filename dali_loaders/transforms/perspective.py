"""RandomPerspective (v1 and v2): torchvision's four corners drawn per sample, the homography
that maps the output onto the input computed from them in DALI's float64 arithmetic, and the
image moved by DALI's perspective warp in each twin's border and rounding (affine.warped); after
the conversion to float as torchvision warps the float tensor (affine.float_warped)."""
import numpy as np

from .. import dali_compat
from ._args import as_float64, coin, is_number
from ._core import Images, refuses, translates, uint8_or_float
from ._hsv import mask, where
from .affine import float_warp_refusal, turn_refusal, warped


def perspective_refusal(step) -> str:
    if not dali_compat.warp_perspective_on_cpu():
        return "needs DALI >= 2.4 (its perspective warp on the CPU)"
    return turn_refusal(step)


# Which coordinates of the output's corners (top left, top right, bottom right, bottom left;
# x, y) lie at the far side: there torchvision draws randint(size - bound, size), else randint(0, bound)
FAR = np.array([[0, 0], [1, 0], [1, 1], [0, 1]], dtype=np.float64)


def corners(step, height, width):
    """torchvision's get_params: the output's corners as a float64 (4, 2) DataNode of (x, y)
    per sample, each uniform within `distortion_scale` of half the side from its own corner,
    whole pixels. Drawn as one (4, 2) tensor: each DALI operator costs the executor a
    scheduling round a batch, and eight corners drawn one number at a time took ninety."""
    from nvidia.dali import fn, types
    from nvidia.dali import math as dmath

    if is_number(height) and is_number(width):
        sides = types.Constant(np.array([width, height], dtype=np.float64))
    else:
        sides = fn.cast(fn.stack(*(fn.cast(side, dtype=types.INT32) if not is_number(side) else int(side)
                                   for side in (width, height))), dtype=types.FLOAT64)
    # int(distortion_scale * (side // 2)) + 1, in double: (bound_x, bound_y)
    bound = dmath.floor(dmath.floor(sides * 0.5) * float(step.distortion_scale)) + 1.0
    drawn = fn.cast(fn.random.uniform(range=[0.0, 1.0], shape=[4, 2]), dtype=types.FLOAT64)
    # randint(0, bound): u * bound can round up to bound in float: clamped
    offsets = dmath.min(dmath.floor(drawn * bound), bound - 1.0)
    return offsets + types.Constant(FAR) * (sides - bound)


def output_to_input(points, height, width):
    """The 3 x 3 homography (float32, last entry 1) that maps the quadrilateral `points` (a
    float64 (4, 2) DataNode of (x, y)) onto the image's corners (0, 0), (w - 1, 0),
    (w - 1, h - 1), (0, h - 1), as torchvision's perspective coefficients do: the unit
    square's map onto the quadrilateral (Heckbert's closed form), inverted by its adjugate, then
    scaled onto the image, in float64 (inverted in float32 by DALI instead, nearest picks
    another pixel at ties)."""
    from nvidia.dali import fn, types

    (x0, y0), (x1, y1), (x2, y2), (x3, y3) = [(points[k, 0], points[k, 1]) for k in range(4)]
    dx1, dx2, dx3 = x1 - x2, x3 - x2, x0 - x1 + x2 - x3
    dy1, dy2, dy3 = y1 - y2, y3 - y2, y0 - y1 + y2 - y3
    determinant = dx1 * dy2 - dx2 * dy1
    g, h = (dx3 * dy2 - dx2 * dy3) / determinant, (dx1 * dy3 - dx3 * dy1) / determinant
    a, b, c = x1 - x0 + g * x1, x3 - x0 + h * x3, x0
    d, e, f = y1 - y0 + g * y1, y3 - y0 + h * y3, y0
    adjugate = [e - f * h, c * h - b, b * f - c * e,
                f * g - d, a - c * g, c * d - a * f,
                d * h - e * g, b * g - a * h, a * e - b * d]
    scale = [as_float64(width - 1)] * 3 + [as_float64(height - 1)] * 3
    rows = [value * s for value, s in zip(adjugate[:6], scale)] + adjugate[6:]
    rows = [value / adjugate[8] for value in rows]
    return fn.reshape(fn.cast(fn.stack(*rows), dtype=types.FLOAT), shape=[3, 3])


def perspective_warp(matrix):
    """fn.experimental.warp_perspective by `matrix` (output -> input, pixel centres at +0.5 as
    torchvision's coefficients take them) as affine.warped calls it; linear in float32."""
    from nvidia.dali import fn, types

    def warp(data, interpolation, fill):
        if interpolation == types.INTERP_LINEAR:
            data = fn.cast(data, dtype=types.FLOAT)
        border = dict(border_mode="replicate") if fill is None else dict(border_mode="constant", fill_value=fill)
        return fn.experimental.warp_perspective(data, matrix=matrix, interp_type=interpolation, inverse_map=True,
                                                pixel_origin="corner", **border)
    return warp


@translates("RandomPerspective")
@refuses(perspective_refusal)
@uint8_or_float(float_refusal=float_warp_refusal)
def random_perspective(step, images: Images) -> None:
    """With probability p; where not applied the identity matrix, which gives the pixels back."""
    from nvidia.dali import types

    images.decode()
    images.flush_mirror()
    p = float(step.p)
    if p <= 0.0:
        return
    height, width = images.height, images.width
    matrix = output_to_input(corners(step, height, width), height, width)
    if p < 1.0:
        matrix = where(mask(coin(p)), matrix, types.Constant(np.eye(3, dtype=np.float32)))
    warped(step, images, perspective_warp(matrix))
