"""Padding in the reflect, edge and symmetric modes (Pad, RandomCrop's padding, timm's crops
that pad). DALI's pad and slice fill only with constants. On the CPU (DALI >= 2.4) one
nearest-neighbour warp by whole pixels pads, its border mode numpy's; elsewhere (GPU graphs,
older DALI) the borders are cut, flipped and joined.

A padding wider than the image: on a PIL image torchvision pads with numpy, which reflects
again, periodically (so does the warp's border); on a tensor torch refuses it, and so do we
where the size is known when the graph is built. The cut-and-joined borders repeat the
reflection for a PIL twin only, from the image's periodic extension."""
import numbers
from typing import Optional

from .. import dali_compat
from ._args import as_int, is_number, stack
from ._core import Images, Untranslatable, describe

PADDING_MODES = ("constant", "reflect", "edge", "symmetric")


def padding_mode_refusal(step) -> str:
    mode = getattr(step, "padding_mode", "constant")
    return "" if mode in PADDING_MODES else f"padding_mode={mode!r} is not supported ({', '.join(PADDING_MODES)})"


def check_mode_padding(step, images: Images, ltrb) -> None:
    """torch refuses a reflect padding as wide as a tensor image (symmetric: wider); so do we,
    by name, where the size is known when the graph is built. numpy pads a PIL image, and
    reflects again: no refusal there."""
    mode = step.padding_mode
    if mode not in ("reflect", "symmetric") or images.kind == "pil":
        return
    for side, pads in ((images.width, ltrb[0::2]), (images.height, ltrb[1::2])):
        if isinstance(side, numbers.Number) and max(pads) >= side + (mode == "symmetric"):
            raise Untranslatable(f"{describe(step)}: padding {max(pads)} with padding_mode={mode!r} on tensor images "
                                 f"{images.width} x {images.height}: the padding must be smaller than the image")


def mode_pad(images: Images, ltrb, mode: str, most=(None, None)) -> None:
    """reflect, edge or symmetric padding (numpy's and torchvision's): the warp, or the width
    then the height (the modes are separable, so the corners come out as torchvision's).
    `most`: the bound of amounts that are DataNodes, per axis (width, height)."""
    left, top, right, bottom = ltrb
    periodic = images.kind == "pil"
    if mode in WARP_BORDERS and images.data.device == "cpu" and dali_compat.warp_perspective_on_cpu():
        images.data = _warp_padded(images.data, images.height + top + bottom, images.width + left + right, left, top,
                                   mode)
        images.width, images.height = images.width + left + right, images.height + top + bottom
        return
    images.data = _pad_axis(images.data, images.width, left, right, mode, "W", most[0], periodic)
    images.width = images.width + left + right
    images.data = _pad_axis(images.data, images.height, top, bottom, mode, "H", most[1], periodic)
    images.height = images.height + top + bottom


# numpy's modes as OpenCV names its borders, which repeat the reflection as numpy does
WARP_BORDERS = {"reflect": "reflect_101", "symmetric": "reflect", "edge": "replicate"}


def _warp_padded(data, height, width, left, top, mode: str):
    """The whole padding in one operator: a nearest-neighbour warp by whole pixels (exact) onto
    the padded canvas, its border mode numpy's; the slices below take a dozen operators an axis
    for the same, each a pass over the batch."""
    import numpy as np
    from nvidia.dali import fn, types

    if is_number(left) and is_number(top):
        matrix = types.Constant(np.array([[1, 0, -left], [0, 1, -top], [0, 0, 1]], dtype=np.float32))
    else:
        shift = [fn.cast(0 - v, dtype=types.FLOAT) if not is_number(v) else float(-v) for v in (left, top)]
        matrix = fn.reshape(fn.stack(1.0, 0.0, shift[0], 0.0, 1.0, shift[1], 0.0, 0.0, 1.0), shape=[3, 3])
    return fn.experimental.warp_perspective(data, matrix=matrix, size=stack(height, width), inverse_map=True,
                                            interp_type=types.INTERP_NN, border_mode=WARP_BORDERS[mode])


def _strip(data, start, length, axis: str):
    from nvidia.dali import fn

    return fn.slice(data, start=stack(start, integer=True), shape=stack(length, integer=True), axis_names=axis)


def _flipped(part, axis: str):
    from nvidia.dali import fn

    return fn.flip(part, horizontal=int(axis == "W"), vertical=int(axis == "H"))


def _joined(parts, axis: str):
    from nvidia.dali import fn

    return fn.cat(*parts, axis_name=axis) if len(parts) > 1 else parts[0]


def _pad_axis(data, size, before, after, mode: str, axis: str, most: Optional[int], periodic: bool):
    """`before` and `after`: ints, or DataNodes of at most `most`."""
    if mode in ("reflect", "symmetric"):
        return _reflected(data, size, before, after, mode, axis, most, periodic)
    from nvidia.dali import fn

    def edge(start, amount):
        if isinstance(amount, numbers.Number):
            return fn.cat(*[_strip(data, start, 1, axis)] * amount, axis_name=axis)
        repeated, count = _strip(data, start, 1, axis), 1
        while count < most:   # the border line doubled up to the bound, then cut to the amount
            repeated, count = fn.cat(repeated, repeated, axis_name=axis), 2 * count
        return _strip(repeated, 0, amount, axis)

    parts = []   # amounts known only per sample (DataNodes) are cut every time: a slice may be empty
    if not is_number(before) or before:
        parts.append(edge(0, before))
    parts.append(data)
    if not is_number(after) or after:
        parts.append(edge(size - 1, after))
    return _joined(parts, axis)


def _reflected(data, size, before, after, mode: str, axis: str, most: Optional[int], periodic: bool):
    """numpy's (periodic: a PIL twin's) or torch's reflect or symmetric padding of one axis: a
    strip before and a strip after, each cut from the image's periodic extension, then joined
    to the image in one copy. The strips are built on their own rows only, so that an image
    wider than its padding pays for the padding, not for the repeats it does not need."""
    end = int(mode == "reflect")
    if is_number(size) and size == 1:
        end = 0   # numpy's reflect of a 1-pixel side repeats it
    elif not is_number(size) and end:
        end = as_int(size > 1)
    bound = None
    if periodic:
        bound = max(before, after) if is_number(before) and is_number(after) else most
    parts = []
    if not is_number(before) or before:
        parts.append(_flipped(_extension(data, size, end, before, axis, bound, reverse=False), axis))
    parts.append(data)
    if not is_number(after) or after:
        parts.append(_extension(data, size, end, after, axis, bound, reverse=True))
    return _joined(parts, axis)


def _extension(data, size, end, amount, axis: str, bound: Optional[int], reverse: bool):
    """Entries end .. end + amount of the image's extension beyond one border, read away from
    it: the periodic extension of the image (reverse: of the image flipped), whose period is
    size - end reflected, then size - end again. `bound`: at most this amount (None: at most
    size - end, one reflection, as torch pads; a wider padding fails in DALI's slice)."""
    from nvidia.dali import math as dmath

    def smaller(a, b):
        return min(a, b) if is_number(a) and is_number(b) else dmath.min(a, b)

    def bigger(a, b):
        return max(a, b) if is_number(a) and is_number(b) else dmath.max(a, b)

    wanted = end + amount
    if bound is None or (all(is_number(v) for v in (size, amount)) and wanted <= size):
        start = size - wanted if reverse else end   # within one reflection: a slice of the image
        return _flipped(_strip(data, start, amount, axis), axis) if reverse else _strip(data, start, amount, axis)
    period = 2 * (size - end)
    head, tail = smaller(size, wanted), bigger(smaller(period, wanted) - size, 0)
    if reverse:
        parts = [_flipped(_strip(data, size - head, head, axis), axis), _strip(data, end, tail, axis)]
    else:
        parts = [_strip(data, 0, head, axis), _flipped(_strip(data, size - end - tail, tail, axis), axis)]
    if is_number(tail) and not tail:
        parts = parts[:1]
    tiled, length = _joined(parts, axis), head + tail   # the extension's first period, or its first `wanted`
    if is_number(wanted) and is_number(period):
        cap = wanted if wanted <= period else period * -(-wanted // period)
    else:
        short = as_int(wanted <= period)
        cap = short * wanted + (1 - short) * (period * ((wanted + period - 1) // period))
    for _ in range(doublings_needed(1 + bound)):   # whole periods, doubled, cut at the cap
        if is_number(length) and is_number(cap) and length >= cap:
            break
        length = smaller(2 * length, cap)
        tiled = _strip(_joined([tiled, tiled], axis), 0, length, axis)
    return _strip(tiled, end, amount, axis)


def doublings_needed(wanted: int) -> int:
    """How many doublings of the first period reach `wanted` entries on the smallest image (a
    period of 2: two pixels reflected, or one pixel)."""
    doublings, length = 0, 2
    while length < wanted:
        doublings, length = doublings + 1, 2 * length
    return doublings
