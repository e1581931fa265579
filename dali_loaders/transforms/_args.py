"""Arguments several translators share: interpolation, fill, padding, random draws, windows."""
import numbers
from typing import List, Tuple

import numpy as np

from ._core import Images, Untranslatable, describe

# -- arguments shared by several transforms -------------------------------------------------


def interp_type(step, interpolation=None):
    """torchvision's interpolation as DALI's; the others are refused by name."""
    from nvidia.dali import types
    from torchvision.transforms import InterpolationMode

    mode = step.interpolation if interpolation is None else interpolation
    if isinstance(mode, int):   # PIL's constants are accepted by torchvision too
        mode = {0: InterpolationMode.NEAREST, 2: InterpolationMode.BILINEAR, 3: InterpolationMode.BICUBIC}.get(mode, mode)
    elif isinstance(mode, str) and mode in InterpolationMode._value2member_map_:   # v2 may keep the string
        mode = InterpolationMode(mode)
    table = {InterpolationMode.NEAREST: types.INTERP_NN, InterpolationMode.BILINEAR: types.INTERP_LINEAR,
             InterpolationMode.BICUBIC: types.INTERP_CUBIC}
    if mode not in table:
        raise Untranslatable(f"{describe(step)}: interpolation {mode} is not supported (NEAREST, BILINEAR, BICUBIC)")
    return table[mode]


def interpolation_refusal(step) -> str:
    try:
        interp_type(step)
    except Untranslatable as e:
        return str(e).split(": ", 1)[1]
    return ""


def antialias(step, images: Images) -> bool:
    """torchvision resizes a PIL image with antialiasing always; a tensor as `antialias` says."""
    return True if images.kind == "pil" else bool(getattr(step, "antialias", True))


def pair(size) -> Tuple[int, int]:
    """torchvision's (height, width) from an int or a 1- or 2-sequence."""
    if isinstance(size, numbers.Number):
        return int(size), int(size)
    size = list(size)
    return (int(size[0]), int(size[0])) if len(size) == 1 else (int(size[0]), int(size[1]))


def fill_values(step, channels: int) -> List[float]:
    """torchvision's `fill` (a number, a sequence, or v2's {type: fill}) for each channel."""
    fill = step.fill
    if isinstance(fill, dict):   # v2 stores fill per input type
        from torchvision import tv_tensors

        fill = fill.get(tv_tensors.Image, fill.get(next(iter(fill)), 0)) if fill else 0
    if fill is None:
        fill = 0
    if isinstance(fill, numbers.Number):
        return [float(fill)] * channels
    fill = [float(f) for f in fill]
    return fill * channels if len(fill) == 1 else fill


def fill_levels(images: Images, fill: List[float]) -> List[float]:
    """`fill` as the data holds it. The twin fills in its own units at this step: the float
    image's after the conversion to float, which stays pending (float = data * scale + offset,
    per channel), the data still in uint8 levels. A fill that is no whole level (0 after
    Normalize, 0.5 after ToTensor) makes the data float first (Images.float_pixels), so that the
    pending conversion turns it back into the fill."""
    from nvidia.dali import fn, types

    levels = pending_levels(images, fill)
    if levels is None:
        images.data, images.float_pixels = fn.cast(images.data, dtype=types.FLOAT), True
        levels = [(f - o) / s for f, s, o in zip(fill, *_pending(images, len(fill)))]
    return levels


def pending_levels(images: Images, fill: List[float]):
    """fill_levels without changing the data: the levels, or None where the uint8 data cannot
    hold them."""
    if not images.is_float or images.materialized:
        return fill
    levels = [(f - o) / s for f, s, o in zip(fill, *_pending(images, len(fill)))]
    if images.float_pixels:
        return levels
    whole = [round(v) for v in levels]
    if all(abs(v - w) < 1e-6 and 0 <= w <= 255 for v, w in zip(levels, whole)):
        return [float(w) for w in whole]
    return None


def _pending(images: Images, channels: int):
    """(scale, offset) per channel of the pending conversion."""
    return images.scale or [1.0] * channels, images.offset or [0.0] * channels


def padding_ltrb(padding) -> Tuple[int, int, int, int]:
    """torchvision's padding: an int, (left/right, top/bottom) or (left, top, right, bottom)."""
    if isinstance(padding, numbers.Number):
        return (int(padding),) * 4
    padding = [int(p) for p in padding]
    if len(padding) == 1:
        return (padding[0],) * 4
    if len(padding) == 2:
        return padding[0], padding[1], padding[0], padding[1]
    return tuple(padding)


def coin(p: float):
    """Per sample: 1 with probability p, else 0 (a DALI random operator, so it is checkpointed)."""
    from nvidia.dali import fn

    return fn.random.coin_flip(probability=float(p))


def one_of(index, functions, data, lo: int = 0, hi: int = -1):
    """functions[index](data) per sample (`index` an int DataNode, 0 .. len(functions) - 1), as a
    binary tree of DALI conditionals: a sample goes through log2(n) splits, not n."""
    hi = len(functions) - 1 if hi < 0 else hi
    if lo == hi:
        return functions[lo](data)
    mid = (lo + hi) // 2
    if index <= mid:
        out = one_of(index, functions, data, lo, mid)
    else:
        out = one_of(index, functions, data, mid + 1, hi)
    return out


def uniform(lo: float, hi: float):
    """Per sample, a float uniform in [lo, hi]; a fixed range (lo == hi) is that number
    (DALI's random.uniform refuses an empty range)."""
    from nvidia.dali import fn

    if not (isinstance(lo, numbers.Number) and isinstance(hi, numbers.Number)):   # e.g. from the image size
        return lo + fn.random.uniform(range=[0.0, 1.0]) * (hi - lo)
    if float(lo) == float(hi):
        return float(lo)
    return fn.random.uniform(range=[float(lo), float(hi)])


def stack(*values, integer: bool = False):
    """A per-sample 1-D tensor (float32, or int32) from numbers or DataNodes."""
    from nvidia.dali import fn, types

    dtype, np_dtype, py = (types.INT32, np.int32, int) if integer else (types.FLOAT, np.float32, float)
    if all(isinstance(v, numbers.Number) for v in values):
        return types.Constant(np.array(values, dtype=np_dtype))
    return fn.stack(*[fn.cast(v, dtype=dtype) if not isinstance(v, numbers.Number) else py(v) for v in values])


def crop_window(images: Images, top, left, height: int, width: int, fill: List[float]) -> None:
    """Cuts height x width from (top, left), which may lie outside the image: padded with `fill`
    (the twin's units: see fill_levels)."""
    from nvidia.dali import fn

    images.flush_mirror()
    fill = fill_levels(images, fill)
    images.data = fn.slice(images.data, start=stack(top, left, integer=True), shape=stack(height, width, integer=True),
                           axis_names="HW", out_of_bounds_policy="pad", fill_values=fill)
    images.height, images.width = height, width


def half_to_even(extra):
    """int(round(extra / 2)) for extra >= 0, rounding half to even as Python does."""
    half = extra // 2
    return half + (extra - 2 * half) * (half - 2 * (half // 2))


def centre_offset(extra):
    """CenterCrop's offset: round-half-even of extra/2 when the image is larger; when smaller,
    torchvision pads (crop - size) // 2 on the top/left and crops at 0."""
    if isinstance(extra, numbers.Number):
        return int(round(extra / 2)) if extra >= 0 else -((-extra) // 2)
    from nvidia.dali import fn, types

    positive = fn.cast(extra >= 0, dtype=types.INT32)
    return positive * half_to_even(extra) - (1 - positive) * ((0 - extra) // 2)


def random_offset(extent):
    """Per sample, an int uniform in [0, extent] (extent an int, or a DataNode >= 0)."""
    from nvidia.dali import fn, types
    from nvidia.dali import math as dmath

    if isinstance(extent, numbers.Number):
        return fn.random.uniform(values=list(range(max(int(extent), 0) + 1)), dtype=types.INT32)
    # u * (extent + 1) can round up to extent + 1 in float32: clamped
    drawn = dmath.floor(fn.random.uniform(range=[0.0, 1.0]) * fn.cast(extent + 1, dtype=types.FLOAT))
    return fn.cast(dmath.clamp(drawn, 0.0, fn.cast(extent, dtype=types.FLOAT)), dtype=types.INT32)


# -- numbers or per-sample DataNodes, in torchvision's float arithmetic ----------------------


def as_int(condition):
    """A comparison of ints or DataNodes as 1 or 0, usable in arithmetic."""
    from nvidia.dali import fn, types

    return int(condition) if isinstance(condition, (bool, np.bool_)) else fn.cast(condition, dtype=types.INT32)


def is_number(x) -> bool:
    return isinstance(x, numbers.Number)


def as_float64(x):
    """A number or an int DataNode as float64 (a Python float would enter DALI's arithmetic
    as float32)."""
    from nvidia.dali import fn, types

    return types.Constant(float(x), dtype=types.FLOAT64) if is_number(x) else fn.cast(x, dtype=types.FLOAT64)


def as_float32(x):
    from nvidia.dali import fn, types

    return types.Constant(float(x), dtype=types.FLOAT) if is_number(x) else fn.cast(x, dtype=types.FLOAT)


def float32_product(a, b):
    """a * b in float32, as torch multiplies by a float32 tensor: numbers in numpy (DALI has
    no operator for two constants), else in DALI."""
    if is_number(a) and is_number(b):
        return float(np.float32(a) * np.float32(b))
    return as_float32(a) * as_float32(b)


def truncated(x):
    """int() of a float >= 0: a number, or an int32 DataNode (DALI's cast rounds: floor first)."""
    from nvidia.dali import fn, types
    from nvidia.dali import math as dmath

    return int(x) if is_number(x) else fn.cast(dmath.floor(x), dtype=types.INT32)
