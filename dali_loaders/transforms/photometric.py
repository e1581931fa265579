"""torchvision's one-operation random steps: RandomSolarize, RandomPosterize,
RandomAdjustSharpness, RandomAutocontrast, RandomEqualize and RandomInvert, each its operation
with probability p (v1 and v2). They are operations of the AutoAugment family, so they take
its two paths, neither with a conditional: on CPU graphs one row of the fused operator's table,
applied where the slot's uniform is at most p (fused.py); elsewhere (GPU graphs, or no plugin)
a chain of one slot (augment_chain.py), whose row leaves the image as it is where the coin
says no."""
import math
from typing import Callable, Dict, Tuple

import numpy as np

from ..ops import augment as op
from . import augment_chain, fused
from ._core import Images, refuses, translates, uint8_only
from ._draws import Uniform
from ._placement import augments


def solarize_levels(step, images: Images) -> Tuple[float, ...]:
    """The threshold as the whole level it acts as on uint8 pixels: PIL keeps x < t (in
    double), the tensor kernels invert x >= t (t a float32 scalar): both invert x >= ceil(t)."""
    t = float(step.threshold)
    return (float(math.ceil(t if images.kind == "pil" else np.float32(t))),)


def sharpness_factor(step, images: Images) -> Tuple[float, ...]:
    """The factor as the operator's p1 + p0 in double: p1 its float32, p0 the rest (the
    factor is Python's double, as torchvision passes it on)."""
    f = float(step.sharpness_factor)
    high = float(np.float32(f))
    return f - high, high


def solarize_magnitude(step, images: Images) -> float:
    return solarize_levels(step, images)[0]


def posterize_bits(step, images: Images) -> Tuple[float, ...]:
    return (float(step.bits),)


def posterize_magnitude(step, images: Images) -> int:
    return int(step.bits)


def sharpness_magnitude(step, images: Images) -> float:
    return float(step.sharpness_factor) - 1.0


def no_parameters(step, images: Images) -> Tuple[float, ...]:
    return ()


def no_magnitude(step, images: Images) -> float:
    return 0.0


# name -> (the operation in the fused table and the chain, its parameters, its magnitude label
# for the chain: what the AutoAugment family's table would hold for it). Named functions, not
# lambdas: DALI's AutoGraph, converting them inside a conditional, warned that it could not
# tell two lambdas of one line apart.
OPERATIONS: Dict[str, Tuple[str, Callable, Callable]] = {
    "RandomSolarize": ("Solarize", solarize_levels, solarize_magnitude),
    "RandomPosterize": ("Posterize", posterize_bits, posterize_magnitude),
    "RandomAdjustSharpness": ("Sharpness", sharpness_factor, sharpness_magnitude),
    "RandomAutocontrast": ("AutoContrast", no_parameters, no_magnitude),
    "RandomEqualize": ("Equalize", no_parameters, no_magnitude),
    "RandomInvert": ("Invert", no_parameters, no_magnitude),
}


def refusal(step) -> str:
    name = type(step).__name__
    if name == "RandomPosterize" and not (isinstance(step.bits, int) and 0 <= step.bits <= 8):
        return f"bits={step.bits!r} (a whole number of bits to keep, 0 to 8)"
    if name == "RandomAdjustSharpness" and not step.sharpness_factor >= 0:
        return f"sharpness_factor={step.sharpness_factor!r} (a factor >= 0)"
    return ""


@translates(*OPERATIONS)
@refuses(refusal)
@augments
@uint8_only
def one_operation(step, images: Images) -> None:
    """The step's operation where a per-sample uniform is at most p (torchvision applies it
    where torch.rand(1) < p: the same rate)."""
    images.decode()
    name, parameters, magnitude = OPERATIONS[type(step).__name__]
    p = float(step.p)
    row = op.table_row(name, parameters(step, images), probability=p)
    table = fused.Table(np.array([row], np.float64), [(name, magnitude(step, images))])
    slots = [(0, Uniform() if p < 1.0 else None)]
    if fused.usable(images):
        fused.queue(images, step, table, slots, warps=False)
    else:
        augment_chain.automatic(step, images, lambda step, images: (table, slots))
