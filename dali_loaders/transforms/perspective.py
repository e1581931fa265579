"""RandomPerspective (v1 and v2): torchvision's four corners drawn per sample, the homography
that maps the output onto the input computed from them in DALI's float64 arithmetic, and the
image moved by DALI's perspective warp in each twin's border and rounding (affine.warped); after
the conversion to float as torchvision warps the float tensor (affine.float_warped)."""
import numpy as np

from .. import dali_compat
from ._args import as_float64, coin, is_number, random_offset, truncated
from ._core import Images, refuses, translates, uint8_or_float
from ._hsv import mask, where
from .affine import float_warp_refusal, turn_refusal, warped


def perspective_refusal(step) -> str:
    if not dali_compat.warp_perspective_on_cpu():
        return "needs DALI >= 2.4 (its perspective warp on the CPU)"
    return turn_refusal(step)


def corners(step, height, width):
    """torchvision's get_params: the output's corners (top left, top right, bottom right,
    bottom left) as (x, y), each uniform within `distortion_scale` of half the side from its
    own corner; ints or int32 DataNodes."""
    def bound(side):   # int(distortion_scale * (side // 2)) + 1, in double
        if is_number(side):
            return int(float(step.distortion_scale) * (side // 2)) + 1
        return truncated(as_float64(side // 2) * as_float64(float(step.distortion_scale))) + 1
    bound_height, bound_width = bound(height), bound(width)

    def near(extent):   # randint(0, bound)
        return random_offset(extent - 1)

    def far(size, extent):   # randint(size - bound, size)
        return size - extent + random_offset(extent - 1)
    return [(near(bound_width), near(bound_height)), (far(width, bound_width), near(bound_height)),
            (far(width, bound_width), far(height, bound_height)), (near(bound_width), far(height, bound_height))]


def output_to_input(points, height, width):
    """The 3 x 3 homography (float32, last entry 1) that maps the quadrilateral `points` (ints or
    int DataNodes) onto
    the image's corners (0, 0), (w - 1, 0), (w - 1, h - 1), (0, h - 1), as torchvision's
    perspective coefficients do: the unit square's map onto the quadrilateral (Heckbert's
    closed form), inverted by its adjugate, then scaled onto the image, in float64."""
    from nvidia.dali import fn, types

    def node(value):   # float64 DataNodes: arithmetic between two constants has no DALI operator
        return fn.cast(types.Constant(int(value)) if is_number(value) else value, dtype=types.FLOAT64)

    (x0, y0), (x1, y1), (x2, y2), (x3, y3) = [(node(x), node(y)) for x, y in points]
    dx1, dx2, dx3 = x1 - x2, x3 - x2, x0 - x1 + x2 - x3
    dy1, dy2, dy3 = y1 - y2, y3 - y2, y0 - y1 + y2 - y3
    determinant = dx1 * dy2 - dx2 * dy1
    g, h = (dx3 * dy2 - dx2 * dy3) / determinant, (dx1 * dy3 - dx3 * dy1) / determinant
    a, b, c = x1 - x0 + g * x1, x3 - x0 + h * x3, x0
    d, e, f = y1 - y0 + g * y1, y3 - y0 + h * y3, y0
    adjugate = [e - f * h, c * h - b, b * f - c * e,
                f * g - d, a - c * g, c * d - a * f,
                d * h - e * g, b * g - a * h, a * e - b * d]
    scale = [node(width - 1)] * 3 + [node(height - 1)] * 3
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
