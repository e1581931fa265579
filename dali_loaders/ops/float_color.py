"""The Python face of DaliLoadersFloatJitter (csrc/float_color_op.cc, in the augmentation
library): torchvision's ColorJitter, and the grey image, on float32 images on the CPU, each
image's adjustments in the order drawn for it. The adjustments' numbers are csrc/float_color_kernels.h's."""
import os
from typing import Sequence

from .augment import read_enums
from .elastic import usable  # noqa: F401  (the operator is in the augmentation library, as elastic's)

_ENUM = read_enums(os.path.join(os.path.dirname(os.path.abspath(__file__)), "csrc", "float_color_kernels.h"))["Adjustment"]
ADJUSTMENTS = {name.lower(): code for name, code in _ENUM.items() if name != "NumAdjustments"}
WIDTH = _ENUM["NumAdjustments"]   # a row of orders; the factors, one per ColorJitter adjustment


def float_jitter(data, factors, pick, orders: Sequence[Sequence[int]], v1: bool):
    """fn.dali_loaders_float_jitter: `data` float32 CHW or HWC (CPU); `factors` float32 (WIDTH,)
    per sample (brightness, contrast, saturation, hue, as ADJUSTMENTS numbers them); `pick`
    int32 per sample, the row of `orders` (up to WIDTH adjustments each, ADJUSTMENTS' numbers) it
    runs."""
    from nvidia.dali import fn

    rows = [list(row) + [-1] * (WIDTH - len(row)) for row in orders]
    return fn.dali_loaders_float_jitter(data, factors=factors, pick=pick, orders=[int(v) for row in rows for v in row],
                                        v1=bool(v1))
