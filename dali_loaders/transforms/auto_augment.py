"""AutoAugment, RandAugment, TrivialAugmentWide and RandomErasing, run as DALI operators.

On CPU graphs the fused operator runs them (fused.py); on GPU graphs every image goes through
one chain of operators, each with the image's own parameters (augment_chain.py). Where
neither can (a CPU graph without the plugin), the op choice (which operation, which
magnitude bin, which sign) is DALI's own `nvidia.dali.auto_aug`: apply_trivial_augment, apply_rand_augment and apply_auto_augment
with a `Policy`. The operations are built with its `augmentation` decorator, their
magnitudes read from the torchvision object itself (its augmentation space), so the bins,
ranges and signs are torchvision's by construction. DALI's stock suite differs from
torchvision's (fill 128, bilinear warps, posterize and solarize ranges, colour
operators, sharpness border), so only `invert`, `equalize` and `identity` are taken from
it; docs/augmentations.md lists each difference left and measures it.
"""
import math
import numbers
from typing import Dict, List, Optional

import numpy as np

from ..dali_compat import unconverted_augmentation
from ..ops import augment as augment_op
from . import augment_chain, fused
from ._args import random_offset
from .augment_ops import WARPS, operations, quiet_dali
from .augment_space import AUTOAUGMENT_BINS, depends_on_size, policies, space
from ._core import Images, describe, refuses, translates, uint8_only, unconverted_function
from ._placement import augments, branches, chains
from .affine import warp_refusal


@unconverted_function
def suite(step, images: Images, num_bins: int) -> Dict:
    """The step's operations as DALI auto_aug augmentations, with torchvision's magnitudes.
    Translations are in pixels of this image size when it is known when the graph is built,
    else relative to a size of 1 and scaled per sample."""
    from nvidia.dali.auto_aug.core import augmentation

    sized = isinstance(images.width, numbers.Number) and isinstance(images.height, numbers.Number)
    magnitudes = space(step, num_bins, images.height if sized else 1.0, images.width if sized else 1.0)
    relative = not sized and depends_on_size(step, num_bins)
    ops = operations(step, images, relative)
    unknown = sorted(set(magnitudes) - set(ops))
    if unknown:
        raise ValueError(f"{describe(step)}: operations {unknown} have no DALI translation")
    made = {}
    for name, (mags, signed) in magnitudes.items():
        function, to_param = ops[name]
        made[name] = augmentation(function, name=name, augmentation_cls=unconverted_augmentation(), mag_range=mags, randomly_negate=signed and mags is not None,
                                  mag_to_param=to_param if mags is not None else None,
                                  param_device="cpu" if name in WARPS else "auto")
    return made


@unconverted_function
def prepare(step, images: Images) -> None:
    images.decode()
    images.flush_mirror()


@unconverted_function
def fused_on_cpu(step, images: Images, make_slots) -> bool:
    """On a CPU graph with the plugin: the draws, queued for one DaliLoadersAugment call
    (fused.py), and True; else False, for DALI's auto_aug and its conditionals."""
    if not fused.usable(images):
        return False
    images.decode()
    fused.automatic(step, images, make_slots)
    return True


@unconverted_function
def chained_on_gpu(step, images: Images, make_slots) -> bool:
    """On a GPU graph: the draws and every image through one chain of operators
    (augment_chain.py), and True; else False."""
    if not augment_chain.usable(images):
        return False
    augment_chain.automatic(step, images, make_slots)
    return True


def automatic_refusal(step) -> str:
    reason = warp_refusal(step)
    magnitude, bins = getattr(step, "magnitude", 0), getattr(step, "num_magnitude_bins", AUTOAUGMENT_BINS)
    if not reason and not 0 <= magnitude < bins:
        reason = f"magnitude={magnitude} is outside the {bins} magnitude bins (0 .. {bins - 1})"
    return reason


@translates("TrivialAugmentWide")
@refuses(automatic_refusal)
@branches
@chains(slots=lambda step: 1)
@augments
@uint8_only
def trivial_augment_wide(step, images: Images) -> None:
    """One operation per image, uniform, at a uniform magnitude bin with a random sign."""
    from nvidia.dali.auto_aug.trivial_augment import apply_trivial_augment

    if fused_on_cpu(step, images, fused.trivial_augment_slots):
        return
    if chained_on_gpu(step, images, fused.trivial_augment_slots):
        return
    prepare(step, images)
    with quiet_dali():
        ops = list(suite(step, images, step.num_magnitude_bins).values())
        images.data = apply_trivial_augment(ops, images.data, num_magnitude_bins=step.num_magnitude_bins)


@translates("RandAugment")
@refuses(automatic_refusal)
@branches
@chains(slots=lambda step: step.num_ops)
@augments
@uint8_only
def rand_augment(step, images: Images) -> None:
    """num_ops operations per image, each uniform (with repeats), at the one magnitude bin."""
    from nvidia.dali.auto_aug.rand_augment import apply_rand_augment

    if fused_on_cpu(step, images, fused.rand_augment_slots):
        return
    if chained_on_gpu(step, images, fused.rand_augment_slots):
        return
    prepare(step, images)
    if step.num_ops == 0:
        return
    with quiet_dali():
        ops = list(suite(step, images, step.num_magnitude_bins).values())
        images.data = apply_rand_augment(ops, images.data, n=step.num_ops, m=step.magnitude,
                                         num_magnitude_bins=step.num_magnitude_bins)


@translates("AutoAugment")
@refuses(automatic_refusal)
@branches
@chains
@augments
@uint8_only
def auto_augment(step, images: Images) -> None:
    """One sub-policy per image, uniform; each of its steps with its probability, at its bin."""
    from nvidia.dali.auto_aug.auto_augment import apply_auto_augment
    from nvidia.dali.auto_aug.core import Policy

    if fused_on_cpu(step, images, fused.auto_augment_slots):
        return
    if chained_on_gpu(step, images, fused.auto_augment_slots):
        return
    prepare(step, images)
    with quiet_dali():
        ops = suite(step, images, AUTOAUGMENT_BINS)
        sub_policies = [[(ops[name], float(p), None if ops[name].mag_range is None else int(level))
                         for name, p, level in sub_policy] for sub_policy in policies(step)]
        policy = Policy(f"torchvision {step.policy}", num_magnitude_bins=AUTOAUGMENT_BINS,
                        sub_policies=sub_policies)
        images.data = apply_auto_augment(policy, images.data)


# -- RandomErasing, on the normalized float tensor ------------------------------------------------

ERASE_ATTEMPTS = 10   # torchvision's tries before it leaves the image as it is


def erase_value(step) -> Optional[List[float]]:
    """The fill per channel (v1 or v2), or None for per-pixel normal noise ("random")."""
    value = step.value
    if value is None or isinstance(value, str):
        return None
    return [float(value)] if isinstance(value, numbers.Number) else [float(v) for v in value]


def erasing_refusal(step) -> str:
    value = erase_value(step)
    if value is not None and len(value) not in (1, 3):
        return f"value={step.value!r}: one value, or one per channel"
    return ""


def first_fitting(h, w, img_h, img_w):
    """(height, width) of the first try (vectors h, w) that fits inside the image, (0, 0) if
    none does. In a few whole-vector operators (a loop over the tries took 11 one-number
    operators a try, each a scheduling round a batch): the first fitting try's rank, k, or
    k + tries where try k does not fit, is the smallest; its sides picked out by a one-hot
    sum, exact."""
    from nvidia.dali import fn, types

    fits = fn.cast((h < img_h) & (w < img_w), dtype=types.FLOAT)
    rank = types.Constant(np.arange(ERASE_ATTEMPTS, dtype=np.float32)) + (1.0 - fits) * float(ERASE_ATTEMPTS)
    first = fn.reductions.min(rank)
    chosen = fn.cast(rank == first, dtype=types.FLOAT) * fn.cast(first < float(ERASE_ATTEMPTS), dtype=types.FLOAT)
    return fn.reductions.sum(chosen * h), fn.reductions.sum(chosen * w)


def arithmetic_erase_box(step, images: Images):
    """(top, left, height, width) per image as torchvision draws them, in DALI arithmetic (where
    the plugin, and with it DaliLoadersEraseBox, is not built): up to 10 tries of an area and
    log-uniform aspect, the first that fits inside the image wins; none fitting, or the coin (p)
    saying no, gives an empty box."""
    from nvidia.dali import fn, types
    from nvidia.dali import math as dmath

    attempts = [ERASE_ATTEMPTS]
    area = fn.random.uniform(range=[float(s) for s in step.scale], shape=attempts)
    aspect = dmath.exp(fn.random.uniform(range=[math.log(r) for r in step.ratio], shape=attempts))
    img_h, img_w = (fn.cast(side, dtype=types.FLOAT) if not isinstance(side, numbers.Number) else float(side)
                    for side in (images.height, images.width))
    h = dmath.floor(dmath.sqrt(area * (img_h * img_w) * aspect) + 0.5)
    w = dmath.floor(dmath.sqrt(area * (img_h * img_w) / aspect) + 0.5)
    box_h, box_w = first_fitting(h, w, img_h, img_w)
    on = fn.cast(fn.random.coin_flip(probability=float(step.p)), dtype=types.FLOAT)
    box_h, box_w = on * box_h, on * box_w
    top = random_offset(fn.cast(img_h - box_h, dtype=types.INT32))
    left = random_offset(fn.cast(img_w - box_w, dtype=types.INT32))
    return top, left, box_h, box_w


def erase_window(step, images: Images) -> dict:
    """fn.erase's anchor and shape (HW) of the box torchvision would draw: one DaliLoadersEraseBox
    call where the plugin is built (the box in DALI arithmetic is some fifty one-number
    operators a batch, each a round over every sample), else arithmetic_erase_box."""
    from nvidia.dali import fn, types

    if augment_op.draws_usable():
        anchor, shape = augment_op.erase_box(images.height, images.width, step.p, step.scale, step.ratio)
        return dict(anchor=anchor, shape=shape, axis_names="HW")
    top, left, height, width = arithmetic_erase_box(step, images)
    return dict(anchor=fn.stack(fn.cast(top, dtype=types.FLOAT), fn.cast(left, dtype=types.FLOAT)),
                shape=fn.stack(height, width), axis_names="HW")


@uint8_only
def uint8_erasing(step, images: Images) -> None:
    """On uint8 pixels (a CPU graph, a constant value in 0 .. 255): the fused operator's Erase;
    otherwise refused by name."""
    value = erase_value(step)
    if not (fused.usable(images) and value is not None and all(0 <= v <= 255 for v in value)):
        raise ValueError(f"{describe(step)} on uint8 pixels is not translated (but for a value in 0 .. 255 on "
                         f"the CPU): put it after ToDtype(float32, scale=True) and Normalize, as torchvision's "
                         f"references do, or pass python_fallback=True")
    from nvidia.dali import fn

    images.decode()
    window = erase_window(step, images)   # the plugin is built: DaliLoadersEraseBox
    fused.erase(step, images, fn.cat(window["anchor"], window["shape"]), value)


@translates("RandomErasing")
@refuses(erasing_refusal)
@augments
def random_erasing(step, images: Images) -> None:
    """On the output tensor (normalized, in the output layout), as torchvision's references
    and timm do: on CPU graphs our operators draw and fill the box (fused.erase_float), else
    the box drawn (erase_window) and DALI's fn.erase; no branches. Only a twin that erases
    uint8 pixels gets the fused operator's Erase (uint8_erasing)."""
    from nvidia.dali import fn

    if not images.is_float:
        return uint8_erasing(step, images)
    value = erase_value(step)
    if value is not None:
        value = value * images.channels if len(value) == 1 else value
    if fused.erase_float(images, step.p, step.scale, step.ratio, value, "none" if value is not None else "pixel"):
        return
    images.materialize()
    window = erase_window(step, images)
    if value is not None:
        images.data = fn.erase(images.data, fill_value=value, **window)
        return
    kept = fn.erase(images.data * 0.0 + 1.0, fill_value=0.0, **window)
    images.data = images.data * kept + fn.random.normal(images.data) * (1.0 - kept)
