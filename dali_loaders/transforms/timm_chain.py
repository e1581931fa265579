"""timm's RandAugment and AutoAugment on GPU graphs, without branches. Per slot the graph draws
a row (timm_fused.slot_indices: uniform among RandAugment's ops, timm's weighted choice, or a
sub-policy's step), whether it applies (the op's probability), the magnitude (timm's noise:
Gaussian `mstd`, or uniform in 0 .. m for mstd=inf, clipped to 0 .. the upper bound) and a
sign; the row's LEVEL_TO_ARG constants (timm_fused.Level) turn the magnitude into timm's
argument in a few vector operators; every image then goes through augment_chain's stages
with the argument put in its row's column: the row's constants plus the argument times a
one-hot row, both gathered from constant tables. The operations are timm.py's (PIL's
arithmetic, bilinear warps filled with timm's fill), so the pixels are the conditional
graphs'.
"""
from typing import List, Optional, Tuple

import numpy as np

from ..ops import augment as op
from . import augment_chain, timm_fused
from ._core import Images, unconverted_function

ENHANCE = ("Color", "Contrast", "Brightness", "Sharpness")
# timm's op -> (the chain's stages it takes, the column its argument goes to; None: none)
STAGES = {
    "Rotate": ({"Rotate"}, "angle"), "ShearX": ({"ShearX"}, "m1"), "ShearY": ({"ShearY"}, "m3"),
    "TranslateX": ({"TranslateX"}, "m2"), "TranslateY": ({"TranslateY"}, "m5"),
    "TranslateXRel": ({"TranslateX", "fraction_x"}, "fraction_x"),
    "TranslateYRel": ({"TranslateY", "fraction_y"}, "fraction_y"),
    "Posterize": ({"posterize_bits"}, "posterize_bits"), "PosterizeIncreasing": ({"posterize_bits"}, "posterize_bits"),
    "PosterizeOriginal": ({"posterize_bits"}, "posterize_bits"),
    "Solarize": ({"Solarize"}, "Solarize"), "SolarizeIncreasing": ({"Solarize"}, "Solarize"),
    "SolarizeAdd": ({"SolarizeAdd"}, "SolarizeAdd"),
    "AutoContrast": ({"AutoContrast"}, None), "Equalize": ({"Equalize"}, None), "Invert": ({"Invert"}, None),
    **{name: ({name}, "factor") for name in ENHANCE}, **{name + "Increasing": ({name}, "factor") for name in ENHANCE},
    "Desaturate": ({"Color"}, "factor"),
}   # timm's blurs have no stage: their steps run on the CPU (timm.blurs_in)
ENHANCED = {"Desaturate": "Color"}   # timm's op -> the enhance op whose degenerate image it blends with
LEVEL = tuple(sorted(op.CHAIN_LEVEL, key=op.CHAIN_LEVEL.get))   # csrc/augment_codes.h's ChainLevel
L = op.CHAIN_LEVEL


def rows(ops: List, images: Optional[Images]) -> Tuple[np.ndarray, np.ndarray, np.ndarray, set]:
    """(base, one-hot, levels, stages), each table with a first row for a skipped slot: a row
    of the chain's columns is base + argument * one-hot."""
    width = len(augment_chain.NO_OP)
    base = np.tile(np.array(list(augment_chain.NO_OP.values()), np.float32), (len(ops) + 1, 1))
    hot = np.zeros((len(ops) + 1, width), np.float32)
    levels = np.zeros((len(ops) + 1, len(LEVEL)), np.float32)
    levels[:, L["flip"]], levels[:, L["probability"]], levels[:, L["hi"]] = 1.0, 1.0, timm_fused.NO_BOUND
    levels[:, L["lo"]] = -timm_fused.NO_BOUND
    stages = set()
    for k, o in enumerate(ops, start=1):
        if o is None:
            continue
        level = timm_fused.level_of(o.name, o.hparams) or timm_fused.Level()
        std = float(o.magnitude_std)
        levels[k] = [float(o.magnitude), std if 0 < std < float("inf") else 0.0, float(std == float("inf")),
                     float(o.magnitude_max or timm_fused.LEVEL_DENOM), level.scale, level.offset, level.flip,
                     float(level.floor), level.hi, level.lo, float(level.signed), float(o.prob)]
        if o.name not in STAGES and images is None:   # op_level's row of a blur: its levels alone
            continue
        if o.name not in STAGES:   # graph_variant runs such steps on the CPU (timm.blurs_in)
            raise ValueError(f"timm's {o.name} has no stage in the GPU chain: the steps holding it run on the CPU")
        taken, column = STAGES[o.name]
        stages |= taken
        if column is not None:
            base[k, augment_chain.COLUMN[column]] = 0.0
            hot[k, augment_chain.COLUMN[column]] = 1.0
        degenerate = augment_chain.DEGENERATE.get(ENHANCED.get(o.name, o.name).replace("Increasing", ""))
        if degenerate is not None:   # the enhance ops' blend: its degenerate image
            base[k, augment_chain.COLUMN[degenerate]] = 1.0
        for flag in ("AutoContrast", "Equalize"):
            base[k, augment_chain.COLUMN[flag]] = augment_chain.SELECTED if o.name == flag else 0.0
        if o.name == "Invert":   # 255 - x: solarize at 0
            base[k, augment_chain.COLUMN["Solarize"]] = 0.0
    return base, hot, levels, stages


def argument(level, noise, fraction, sign):
    """timm's argument, per sample: the magnitude with its noise (`noise` a N(0, 1) draw,
    `fraction` a uniform one; None where no row needs it), clipped, then LEVEL_TO_ARG:
    (m / 10) * scale, floored, at most hi, signed, offset + flip * v, at least lo. `level` is
    a gathered row of `rows`' levels (the chain: each op's constants per sample), or one op's
    row of numbers (the conditional graphs: the terms that do nothing are left out)."""
    from nvidia.dali import fn
    from nvidia.dali import math as dmath

    taken = {}

    def at(name):   # each column read once: every subscript is an operator of the graph
        if name not in taken:
            value = level[L[name]]
            taken[name] = float(value) if isinstance(level, np.ndarray) else value
        return taken[name]

    def pick(flag, when_set, otherwise):   # flag 1 or 0
        if isinstance(flag, float):
            return when_set() if flag else otherwise
        return flag * when_set() + (1.0 - flag) * otherwise

    m = at("magnitude")
    if fraction is not None:   # mstd=inf: uniform in 0 .. m
        m = pick(at("uniform"), lambda: m * fraction, m)
    if noise is not None:
        m = m + at("std") * noise
    if isinstance(m, float):   # a per-sample scalar all the same: the arithmetic stays on DataNodes
        m = fn.constant(fdata=min(max(m, 0.0), at("upper")), shape=[])
    else:
        m = dmath.clamp(m, 0.0, at("upper"))
    v = m * (1.0 / timm_fused.LEVEL_DENOM) * at("scale")
    v = pick(at("floor"), lambda: dmath.floor(v), v)
    v = v if is_number(at("hi"), timm_fused.NO_BOUND) else dmath.min(v, at("hi"))
    v = pick(at("signed"), lambda: v * sign, v)
    v = v if is_number(at("offset"), 0.0) and is_number(at("flip"), 1.0) else at("offset") + at("flip") * v
    return v if is_number(at("lo"), -timm_fused.NO_BOUND) else dmath.max(v, at("lo"))


def is_number(value, number: float) -> bool:
    """Whether `value` is that number (not a per-sample DataNode)."""
    return isinstance(value, float) and value == number


def op_level(o) -> np.ndarray:
    """One op's row of levels (numbers), for argument()."""
    return rows([o], None)[2][1]


def sign_draw():
    """timm's _randomly_negate: -1 or +1, each with probability 1/2 (the conditional graphs)."""
    from nvidia.dali import fn, types

    return fn.cast(fn.random.coin_flip(probability=0.5), dtype=types.FLOAT) * 2.0 - 1.0


def magnitude_draws(ops):
    """(noise, fraction) for the conditional graphs: a N(0, 1) draw where an op has Gaussian
    noise, a uniform one where one has mstd=inf; None where none does."""
    from nvidia.dali import fn

    noisy, uniform = kinds_of_noise(ops)
    return (fn.random.normal() if noisy else None), (fn.random.uniform(range=[0.0, 1.0]) if uniform else None)


def kinds_of_noise(ops) -> Tuple[bool, bool]:
    """(whether an op has Gaussian noise, whether one has mstd=inf: uniform in 0 .. m)."""
    present = [o for o in ops if o is not None]
    return (any(0 < float(o.magnitude_std) < float("inf") for o in present),
            any(float(o.magnitude_std) == float("inf") for o in present))


class FoldedRow:
    """A gathered row of levels whose columns that every op shares are numbers (timm's
    recipes give all their ops one magnitude, noise and probability): each such column is a
    constant of the graph instead of a per-sample subscript and the arithmetic on it."""

    def __init__(self, gathered, levels: np.ndarray):
        self.gathered = gathered
        ops = levels[1:]   # row 0, the skipped slot, is multiplied by a one-hot of zeros
        self.numbers = {k: float(ops[0, k]) for k in range(ops.shape[1]) if len(ops) and np.all(ops[:, k] == ops[0, k])}

    def __getitem__(self, k: int):
        return self.numbers[k] if k in self.numbers else self.gathered[k]


def slot_draws(step):
    """The graph's draws for every slot: (the rows drawn, one a slot; uniforms (S, 3): whether
    the slot applies, its sign, the fraction of an mstd=inf magnitude; normals (S,): the
    magnitude's noise). Made in the graph, so checkpoints resume them."""
    from nvidia.dali import fn, types

    indices = timm_fused.slot_indices(step)
    uniforms = fn.random.uniform(range=[0.0, 1.0], shape=[len(indices), 3])
    if isinstance(step, timm_fused.Chain) and step.gated and len(indices) > 1:
        # the slots after the first apply on one shared draw (timm_fused.Chain): their column 0
        own = np.ones((len(indices), 3), np.float32)
        own[1:, 0] = 0.0
        uniforms = uniforms * types.Constant(own) + fn.random.uniform(range=[0.0, 1.0]) * types.Constant(1.0 - own)
    return indices, uniforms, fn.random.normal(shape=[len(indices)])


def graph_draws(step, images: Images, indices, uniforms, normals):
    """Per slot (the drawn row of flat_ops, -1 where it does not apply; the argument), in DALI
    arithmetic: where the plugin is not built, and the reference of operator_rows."""
    from nvidia.dali import fn, types

    ops = timm_fused.flat_ops(step)
    _, _, levels, _ = rows(ops, images)
    sometimes = any(float(o.prob) < 1.0 for o in ops if o is not None)
    noisy, uniform = kinds_of_noise(ops)
    drawn, table = [], augment_chain.constant_table(levels)
    for k, index in enumerate(indices):
        level = FoldedRow(augment_chain.gathered(table, index), levels)
        if sometimes:   # timm applies the op unless random() > prob
            applied = uniforms[k, 0] <= level[L["probability"]]
            index = (index + 1) * fn.cast(applied, dtype=types.INT32) - 1
        sign = fn.cast(uniforms[k, 1] >= 0.5, dtype=types.FLOAT) * 2.0 - 1.0
        drawn.append((index, argument(level, normals[k] if noisy else None, uniforms[k, 2] if uniform else None,
                                      sign)))
    return drawn


def draws(step, images: Images):
    """graph_draws of the graph's slot_draws."""
    return graph_draws(step, images, *slot_draws(step))


def graph_rows(step, images: Images, drawn) -> list:
    """Each slot's (row, argument) as its row of the chain's parameters: the row's constants
    plus the argument in its column."""
    ops = timm_fused.flat_ops(step)
    base, hot, _, _ = rows(ops, images)
    base, hot = augment_chain.constant_table(base), augment_chain.constant_table(hot)
    return [base[index + 1] + arg * hot[index + 1] for index, arg in drawn]   # row -1 (not applied): the first


def operator_rows(step, images: Images, indices, uniforms, normals) -> list:
    """Per slot (its row, its inverse warp map before the rotation): graph_rows(graph_draws(...))
    and the chain's translation of timm's fractions of the size, in one CPU operator of ours
    (DaliLoadersTimmRows), bit for bit, where they took some ninety one-number operators a
    slot; then two subscripts a slot."""
    from nvidia.dali import fn, types

    ops = timm_fused.flat_ops(step)
    base, hot, levels, _ = rows(ops, images)
    noisy, uniform = kinds_of_noise(ops)
    stacked = fn.stack(*[fn.constant(idata=index, shape=[], dtype=types.INT32) if isinstance(index, int) else index
                         for index in indices])
    column = augment_chain.COLUMN
    table, maps = op.timm_rows(stacked, uniforms, normals, levels, base, hot, 1.0 / timm_fused.LEVEL_DENOM, noisy,
                               uniform, column["m0"], (column["fraction_x"], column["fraction_y"]),
                               images.height, images.width)
    return [(table[k], maps[k]) for k in range(len(indices))]


def apply(step, images: Images, drawn, warp_with) -> None:
    """Each slot's (row, argument) through one chain."""
    chain_rows(step, images, [(row, None) for row in graph_rows(step, images, drawn)], warp_with)


def chain_rows(step, images: Images, slots: list, warp_with) -> None:
    """Each slot's (row of parameters, its warp map or None: the chain makes it) through one chain."""
    stages = rows(timm_fused.flat_ops(step), images)[3]
    for row, warp_map in slots:
        augment_chain.chain(images, row, stages, warp_with, warp_map)


@unconverted_function
def translate(step, images: Images, warp_with) -> bool:
    """On a GPU graph: the step's draws and chains, and True; else False."""
    if not augment_chain.usable(images):
        return False
    run(step, images, warp_with)
    return True


@unconverted_function
def run(step, images: Images, warp_with) -> None:
    """The step's draws and every image through one chain a slot (either device)."""
    images.decode()
    images.flush_mirror()
    ops = [o for o in timm_fused.flat_ops(step) if o is not None]
    if ops and not (hasattr(step, "ops") and step.num_layers == 0):
        if op.draws_usable():
            chain_rows(step, images, operator_rows(step, images, *slot_draws(step)), warp_with)
        else:
            apply(step, images, draws(step, images), warp_with)

