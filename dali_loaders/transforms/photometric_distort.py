"""v2's RandomChannelPermutation and RandomPhotometricDistort (SSD's colour distortion): each
adjustment is ColorJitter's, in each twin's arithmetic. Neither branches. On CPU graphs the
adjustments are slots of the augmentation operator (fused.py), each picking its row or the
skip row by a weighted draw; elsewhere DALI arithmetic (color.py), where an adjustment not
drawn runs with its neutral factor (1.0: blends of integers give the pixels back exactly) and
the hue shift is selected per sample. A channel permutation is one colour matrix per sample
(the identity where none is drawn)."""
from itertools import permutations

import numpy as np

from ..ops import augment as op
from . import fused
from ._args import coin, uniform
from ._core import Images, Untranslatable, describe, translates, uint8_only
from ._draws import Key, Lookup, Uniform
from ._hsv import mask, where
from .color import adjust_brightness, adjust_contrast, adjust_hue, adjust_saturation


def _permutation_matrices(channels: int) -> np.ndarray:
    """The identity, then every permutation of the channels in lexicographic order, as the
    matrices M with out = M @ in: torchvision's out[k] = in[permutation[k]]."""
    orders = [tuple(range(channels))] + list(permutations(range(channels)))
    return np.array([np.eye(channels, dtype=np.float32)[list(order)] for order in orders])


def permute_channels(images: Images, applied=None) -> None:
    """Each image's channels in an order uniform over the permutations (torch.randperm's);
    where `applied` (an int32 0/1 per sample) is 0, in their own order."""
    from nvidia.dali import fn, types

    if images.channels == 1:   # randperm(1): nothing to permute
        return
    images.flush_augment()   # a pending flip commutes with a permutation of channels
    if images.channels != 3:
        raise Untranslatable(f"{images.channels}-channel images: channel permutation is translated for 1 or 3 "
                             f"channels")
    matrices = _permutation_matrices(3)
    drawn = fn.random.uniform(values=list(range(1, len(matrices))), dtype=types.INT32)
    index = drawn if applied is None else drawn * applied
    table = fn.constant(fdata=matrices.ravel().tolist(), shape=list(matrices.shape))
    images.data = fn.coord_transform(images.data, M=table[index], dtype=types.UINT8)   # 0/1 weights: exact


@translates("RandomChannelPermutation")
def random_channel_permutation(step, images: Images) -> None:
    images.decode()
    if images.is_float or images.materialized:
        raise Untranslatable(f"{describe(step)} comes after the conversion to float; move it before the conversion, "
                             f"or pass python_fallback=True")
    permute_channels(images)


def _gated(factor, applied, neutral: float = 1.0):
    """`factor` where `applied` (float 0/1) is 1, else `neutral`: exact either way."""
    return where(applied, factor, neutral)


@translates("RandomPhotometricDistort")
@uint8_only
def random_photometric_distort(step, images: Images) -> None:
    """torchvision's order: brightness, contrast (if drawn before), saturation, hue, contrast
    (if drawn after), the channel permutation; each applied with probability p, its factor
    uniform in its range; contrast before or after with probability 1/2."""
    from nvidia.dali import fn, types

    images.decode()
    p = float(step.p)
    if p <= 0.0:
        return
    if fused.usable(images):
        _queue_adjustments(step, images, p)
    else:
        _adjust_in_arithmetic(step, images, p)
    permute_channels(images, fn.cast(coin(p), dtype=types.INT32))


ADJUSTMENTS = {"brightness": "Brightness", "contrast": "Contrast", "saturation": "Color", "hue": "Hue"}


def _queue_adjustments(step, images: Images, p: float) -> None:
    """Five slots of the pending augmentation call, in torchvision's order: brightness,
    contrast before, saturation, hue, contrast after. Each adjustment's slot takes its row
    (its factor the range's low end + the slot's uniform * span) or skips, by a key drawn
    with weights (p, 1 - p); contrast's two slots read one key of three outcomes (before,
    after, not applied) and one uniform."""
    ranges = {name: [float(v) for v in getattr(step, name)] for name in ADJUSTMENTS}
    pending = images.pending_augment(fused.kernels(step, images), None, warps=False)
    first = pending.add_table(np.array([op.table_row(code, [ranges[name][0]], span=ranges[name][1] - ranges[name][0])
                                        for name, code in ADJUSTMENTS.items()], np.float64))
    row = {name: first + k for k, name in enumerate(ADJUSTMENTS)}

    def draw(name):
        return Uniform() if ranges[name][1] != ranges[name][0] else 0.0

    def applied(name):
        return Lookup(Key(2, np.array([p, 1.0 - p])), np.array([row[name], -1])) if p < 1.0 else row[name]

    contrast = Key(3, np.array([p / 2, p / 2, 1.0 - p]))
    contrast_draw = draw("contrast")
    pending.add_slot(applied("brightness"), draw("brightness"))
    pending.add_slot(Lookup(contrast, np.array([row["contrast"], -1, -1])), contrast_draw)
    pending.add_slot(applied("saturation"), draw("saturation"))
    pending.add_slot(applied("hue"), draw("hue"))
    pending.add_slot(Lookup(contrast, np.array([-1, row["contrast"], -1])), contrast_draw)


def _adjust_in_arithmetic(step, images: Images, p: float) -> None:
    from nvidia.dali import fn, types

    images.flush_augment()
    applied = {name: mask(coin(p)) for name in ("brightness", "contrast", "saturation", "hue")}
    before = mask(coin(0.5))
    factor = {name: uniform(*(float(v) for v in getattr(step, name))) for name in applied}
    data = adjust_brightness(images.data, _gated(factor["brightness"], applied["brightness"]), images)
    data = adjust_contrast(data, _gated(factor["contrast"], applied["contrast"] * before), images)
    data = adjust_saturation(data, _gated(factor["saturation"], applied["saturation"]), images)
    if images.channels == 3:
        shifted = adjust_hue(data, factor["hue"], images)
        data = fn.cast(where(applied["hue"], shifted, data), dtype=types.UINT8)
    images.data = adjust_contrast(data, _gated(factor["contrast"], applied["contrast"] * (1.0 - before)), images)
