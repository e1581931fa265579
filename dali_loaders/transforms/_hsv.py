"""RGB <-> HSV in each twin's arithmetic: PIL's 8-bit HSV and torchvision's float32 kernels (v1 and v2),
as DALI arithmetic on DataNodes, so the hue adjustment equals the twin's on every colour."""
import numbers

import numpy as np


def mask(condition):
    """A comparison as 0.0 / 1.0, to select by arithmetic (exact for finite values)."""
    from nvidia.dali import fn, types

    return fn.cast(condition, dtype=types.FLOAT)


def select(*pairs):
    """sum(mask * value) over (mask, value) pairs of which exactly one mask is 1: that value."""
    out = None
    for mask, value in pairs:
        out = mask * value if out is None else out + mask * value
    return out


def where(mask, yes, no):
    return mask * yes + (1.0 - mask) * no


def double(x):
    from nvidia.dali import fn, types

    return fn.cast(x, dtype=types.FLOAT64)


def single(x):
    from nvidia.dali import fn, types

    return fn.cast(x, dtype=types.FLOAT)


def _hue_case_masks(top, r, g):
    """Which channel holds the maximum, as torchvision's and PIL's HSV pick it: r, else g, else b."""
    is_r = mask(top == r)
    is_g = mask(top == g) * (1.0 - is_r)
    return is_r, is_g, 1.0 - is_r - is_g


def _sector_masks(i):
    """sector = i mod 6 (i in 0..6) as six masks."""
    masks = [mask(i == float(k)) for k in range(6)]
    masks[0] = masks[0] + mask(i == 6.0)
    return masks


def _sector_rgb(sector, v, p, q, t):
    """(r, g, b) of the HSV sector: (v,t,p) (q,v,p) (p,v,t) (p,q,v) (t,p,v) (v,p,q)."""
    m0, m1, m2, m3, m4, m5 = sector
    return (select((m0 + m5, v), (m1, q), (m2 + m3, p), (m4, t)),
            select((m0, t), (m1 + m2, v), (m3, q), (m4 + m5, p)),
            select((m0 + m1, p), (m2, t), (m3 + m4, v), (m5, q)))


def pil_rgb_to_hsv(r, g, b):
    """PIL's convert("HSV") of integer r, g, b (float32): the ratios in float, the hue's
    scaling in double, H and S truncated to integers (returned as float64)."""
    from nvidia.dali import math as dmath

    top, bottom = dmath.max(dmath.max(r, g), b), dmath.min(dmath.min(r, g), b)
    spread = top - bottom
    s = spread / (top + mask(top == 0.0))
    rc, gc, bc = ((top - c) / (spread + mask(spread == 0.0)) for c in (r, g, b))
    is_r, is_g, is_b = _hue_case_masks(top, r, g)
    h = select((is_r, bc - gc), (is_g, single(double(rc) + 2.0 - bc)), (is_b, single(double(gc) + 4.0 - rc)))
    h = double(h) / 6.0 + 1.0
    h = double(single(h - mask(h >= 1.0)))
    return dmath.floor(h * 255.0), dmath.floor(double(s) * 255.0), double(top)


def pil_hsv_to_rgb(h, s, v):
    """PIL's convert("RGB") of integer h, s, v (float64): the sector's fraction in float,
    p, q, t in double, rounded to integers."""
    from nvidia.dali import math as dmath

    x = h * 6.0 / 255.0
    i = dmath.floor(x)
    f = single(x - i)
    fs = f * single(s)
    p = dmath.floor(v * (1.0 - s / 255.0) + 0.5)
    q = dmath.floor(v * (1.0 - double(fs) / 255.0) + 0.5)
    t = dmath.floor(v * (1.0 - double(single(s) - fs) / 255.0) + 0.5)
    return _sector_rgb(_sector_masks(i), v, p, q, t)


def pil_hue_levels(factor):
    """torchvision's shift of PIL's 8-bit hue: int(factor * 255) in double (towards zero), mod 256."""
    from nvidia.dali import math as dmath

    if isinstance(factor, numbers.Number):
        return float(int(float(np.float32(factor)) * 255) % 256)
    x = double(factor) * 255.0
    negative = mask(x < 0.0)
    return where(negative, dmath.ceil(x) + 256.0, dmath.floor(x))


def tensor_rgb_to_hsv(r, g, b, v1: bool):
    """torchvision's float32 rgb -> hsv of a tensor (hue in [0, 1)); v1 divides by 6, v2
    multiplies by 1/6."""
    from nvidia.dali import math as dmath

    top, bottom = dmath.max(dmath.max(r, g), b), dmath.min(dmath.min(r, g), b)
    same = mask(top == bottom)
    spread = top - bottom
    s = spread / where(same, 1.0, top)
    rc, gc, bc = ((top - c) / where(same, 1.0, spread) for c in (r, g, b))
    is_r, is_g, is_b = _hue_case_masks(top, r, g)
    h = select((is_r, bc - gc), (is_g, rc + 2.0 - bc), (is_b, gc + 4.0 - rc))
    h = (h / 6.0 if v1 else h * (1.0 / 6.0)) + 1.0
    return h - mask(h >= 1.0), s, top


def tensor_hsv_to_rgb(h, s, v, v1: bool):
    """torchvision's float32 hsv -> rgb of a tensor, p, q, t clamped to [0, 1] (v1 and v2
    group the products differently)."""
    from nvidia.dali import math as dmath

    h6 = h * 6.0
    i = dmath.floor(h6)
    f = h6 - i
    if v1:
        p, q, t = v * (1.0 - s), v * (1.0 - s * f), v * (1.0 - s * (1.0 - f))
    else:
        p, q, t = (1.0 - s) * v, (1.0 - s * f) * v, (s * f + (1.0 - s)) * v
    p, q, t = (dmath.clamp(c, 0.0, 1.0) for c in (p, q, t))
    return _sector_rgb(_sector_masks(i), v, p, q, t)


def tensor_hue_shifted(r, g, b, factor, v1: bool):
    """torchvision's tensor adjust_hue of float channels in 0 .. 1: to HSV, h + factor wrapped
    as torch's remainder(h, 1.0) (h in [-0.5, 1.5) here), back to RGB."""
    h, s, v = tensor_rgb_to_hsv(r, g, b, v1=v1)
    h = h + factor
    h = h - mask(h >= 1.0) + mask(h < 0.0)
    return tensor_hsv_to_rgb(h, s, v, v1)


def tensor_grey(r, g, b):
    """rgb_to_grayscale's weighted sum of float channels, in torch's order, unrounded."""
    return r * 0.2989 + g * 0.587 + b * 0.114
