"""timm's RandAugment and AutoAugment on CPU graphs: the draws made in the graph (fn.random),
the operations run by one DaliLoadersAugment call in PIL's arithmetic (ops/augment.py), with
timm's fill and interpolation (bicubic warps included); no conditionals.

Each of the step's AugmentOps is a row of a table built when the graph is and handed to the
operator as a constant: its op code, probability, how timm's LEVEL_TO_ARG turns a magnitude
into the argument (scale, floor, clip, sign, offset), its magnitude, noise and upper bound.
Each slot picks a row (slot_choices: uniform among RandAugment's ops, by timm's weights, or a
sub-policy's step) from the uniforms the graph draws per sample, one random operator for the
call; the operator decides whether the row applies, draws the magnitude and the sign from
them and computes the argument as timm does (csrc/augment_op.cc). With no magnitude
noise the arguments are computed here in Python's double arithmetic, as timm computes them.
Computed in the graph, the same took ~60 small DALI operators a slot.
"""
import math
from dataclasses import dataclass
from typing import Callable, List, Optional, Tuple

import numpy as np

from ..ops import augment as op
from ._core import Images, unconverted_function
from ._draws import Key, Lookup, Uniform
from .fused import draw_index, row_node, shifted

LEVEL_DENOM = 10.0
FIXED_SIGN: Optional[float] = None   # tests: +1 or -1 for every signed argument; None: drawn
NO_BOUND = 1e9
RESAMPLES = (0, 2, 3)   # PIL's nearest, bilinear, bicubic: what the operator's PIL warps do
CODE_OF = {"TranslateXRel": "TranslateX", "TranslateYRel": "TranslateY", "PosterizeIncreasing": "Posterize",
           "PosterizeOriginal": "Posterize", "SolarizeIncreasing": "Solarize", "ColorIncreasing": "Color",
           "ContrastIncreasing": "Contrast", "BrightnessIncreasing": "Brightness",
           "SharpnessIncreasing": "Sharpness", "Desaturate": "Color", "GaussianBlur": "PilBlur",
           "GaussianBlurRand": "PilBlur"}
# timm's blurs (DeiT III's three-augment): PIL's GaussianBlur at radius 0.1 + 1.9 m / 10, or uniform
# in 0.1 .. 2 (m / 10) (its magnitude fixed: a table row's p0 and span, the slot's draw the radius's)
BLUR_LOW, BLUR_HIGH = 0.1, 2.0


@dataclass
class Chain:
    """Slots that each draw among a block of ops of their own, as an AugMix chain applies them:
    slot j uniform among ops[j * block:(j + 1) * block]. With `gated`, every slot after the
    first applies on one draw they share, against its block's probability (AugMix's random
    depth: the probabilities 2/3 and 1/3 of the second and third slots nest). Read as a
    RandAugment is (`ops`, `num_layers`, no weighted choice)."""
    ops: list
    num_layers: int
    block: int
    gated: bool
    choice_weights = None


@dataclass
class Level:
    """timm's level -> argument: v = (m / 10) * scale, floored if `floor`, min(v, hi), negated
    at random if `signed`, then offset + flip * v, then max(v, lo)."""
    scale: float = 0.0
    offset: float = 0.0
    flip: float = 1.0
    floor: bool = False
    hi: float = NO_BOUND
    lo: float = -NO_BOUND
    signed: bool = False


def level_of(name: str, hparams: dict) -> Optional[Level]:
    """timm's LEVEL_TO_ARG[name] as a Level (None: the op takes no argument)."""
    shifts = {"TranslateX": float(hparams.get("translate_const", 250)),
              "TranslateXRel": hparams.get("translate_pct", 0.45)}
    shifts["TranslateY"], shifts["TranslateYRel"] = shifts["TranslateX"], shifts["TranslateXRel"]
    levels = {"Rotate": Level(30.0, signed=True), "ShearX": Level(0.3, signed=True), "ShearY": Level(0.3, signed=True),
              "Posterize": Level(4.0, floor=True), "PosterizeIncreasing": Level(4.0, 4.0, -1.0, floor=True),
              "PosterizeOriginal": Level(4.0, 4.0, floor=True), "Solarize": Level(256.0, floor=True, hi=256.0),
              "SolarizeIncreasing": Level(256.0, 256.0, -1.0, floor=True, hi=256.0),
              "SolarizeAdd": Level(110.0, floor=True, hi=128.0)}
    levels.update({name: Level(scale, signed=True) for name, scale in shifts.items()})
    for enhance in ("Color", "Contrast", "Brightness", "Sharpness"):
        levels[enhance] = Level(1.8, 0.1)
        levels[enhance + "Increasing"] = Level(0.9, 1.0, signed=True, lo=0.1)
    # timm's _minmax_level_to_arg: Desaturate's colour factor 1 - (0.5 + m / 20) clipped to 0 .. 0.5;
    # GaussianBlur's radius 0.1 + 1.9 m / 10 in 0.1 .. 2; GaussianBlurRand's factor m / 10 in 0 .. 1
    levels["Desaturate"] = Level(0.5, 0.5, -1.0, hi=0.5)
    levels["GaussianBlur"] = Level(BLUR_HIGH - BLUR_LOW, BLUR_LOW, hi=BLUR_HIGH - BLUR_LOW, lo=BLUR_LOW)
    levels["GaussianBlurRand"] = Level(1.0, hi=1.0, lo=0.0)
    return levels.get(name)


def random_radius(o) -> Tuple[float, float]:
    """GaussianBlurRand's radius range at its fixed magnitude: (0.1, 2 * factor), as timm's
    random.uniform draws it (the range may run downward below magnitude 0.5)."""
    return BLUR_LOW, BLUR_HIGH * fixed_value(o, 1.0)


def argument(level: Level, magnitude: float, sign: float) -> float:
    """timm's argument at `magnitude` (already clipped) and `sign`, in double as timm."""
    v = (magnitude / LEVEL_DENOM) * level.scale
    v = min(float(math.floor(v)) if level.floor else v, level.hi)
    v = v * sign if level.signed else v
    return max(level.offset + level.flip * v, level.lo)


# -- which steps the operator takes -------------------------------------------------------------


def flat_ops(step) -> List:
    """RandAugment's ops, or AutoAugment's sub-policies padded with None to one length."""
    if hasattr(step, "ops"):
        return list(step.ops)
    length = max(len(sub) for sub in step.policy)
    return [sub[j] if j < len(sub) else None for sub in step.policy for j in range(length)]


def resamples(augment_op) -> Tuple[int, ...]:
    chosen = augment_op.kwargs.get("resample", 3)
    return tuple(int(r) for r in chosen) if isinstance(chosen, (list, tuple)) else (int(chosen),)


def fusable(step) -> bool:
    """Whether the operator runs the step: its interpolations are PIL's nearest, bilinear or
    bicubic, one fill and one interpolation set for all its ops."""
    ops = [o for o in flat_ops(step) if o is not None]
    return (len({resamples(o) for o in ops}) <= 1
            and all(set(resamples(o)) <= set(RESAMPLES) for o in ops)
            and len({tuple(o.kwargs.get("fillcolor", (128, 128, 128))) for o in ops}) <= 1)


# -- the draws: per slot the row, whether it applies, the argument ----------------------------------


def column(ops, value: Callable, default: float = 0.0) -> np.ndarray:
    return np.array([value(o) if o is not None else default for o in ops], np.float64)


def noise_of(o) -> float:
    std = float(o.magnitude_std)
    return std if std > 0 else 0.0


def fixed_value(o, s: float) -> float:
    level = level_of(o.name, o.hparams) if o is not None else None
    clipped = max(0.0, min(float(o.magnitude), float(o.magnitude_max or LEVEL_DENOM))) if o is not None else 0.0
    return argument(level, clipped, s) if level is not None else 0.0


MAX_SEQUENCES = 5000   # weighted choice: the ordered op sequences a graph draws among


def weighted_sequences(step) -> Tuple[List[Tuple[int, ...]], np.ndarray]:
    """numpy's choice(ops, num_layers, replace=False, p=choice_weights): each ordered sequence
    of distinct ops, with the product of its ops' weights renormalized over those left."""
    from itertools import permutations

    weights = np.asarray(step.choice_weights, np.float64)
    weights = weights / weights.sum()
    sequences, probabilities = [], []
    for sequence in permutations(np.flatnonzero(weights), step.num_layers):
        p, left = 1.0, 1.0
        for k in sequence:
            p, left = p * weights[k] / left, left - weights[k]
        sequences.append(tuple(int(k) for k in sequence))
        probabilities.append(p)
    return sequences, np.array(probabilities) / np.sum(probabilities)


def weighted_refusal(step) -> str:
    """Why timm's weighted choice (no repeats) cannot be drawn here, or ""."""
    count, nonzero = 1, int(np.count_nonzero(step.choice_weights))
    for k in range(step.num_layers):
        count *= max(nonzero - k, 0)
    if step.num_layers > nonzero:
        return f"num_layers={step.num_layers} exceeds the {nonzero} ops with a weight (timm's choice would fail)"
    return "" if count <= MAX_SEQUENCES else f"{count} op sequences to draw among (at most {MAX_SEQUENCES})"


@unconverted_function
def slot_choices(step) -> list:
    """Per slot, its row of flat_ops(step) (an int or a Lookup): uniform with repeats,
    or a sequence of distinct ops drawn by timm's choice_weights, or a sub-policy's steps."""
    if isinstance(step, Chain):
        return [shifted(draw_index(step.block), j * step.block) for j in range(step.num_layers)]
    if hasattr(step, "ops") and getattr(step, "choice_weights", None) is not None:
        sequences, probabilities = weighted_sequences(step)
        if len(sequences) == 1:
            return list(sequences[0])
        drawn = Key(len(sequences), weights=probabilities)
        return [Lookup(drawn, np.array([s[j] for s in sequences], np.int64)) for j in range(step.num_layers)]
    if hasattr(step, "ops"):
        return [draw_index(len(step.ops)) for _ in range(step.num_layers)]
    length = max(len(sub) for sub in step.policy)
    if len(step.policy) == 1:
        return list(range(length))
    policy = Key(len(step.policy))
    return [Lookup(policy, np.arange(len(step.policy)) * length + j) for j in range(length)]


@unconverted_function
def slot_indices(step) -> list:
    """slot_choices as ints and int32 DataNodes, for the graphs that compute with them."""
    return [row_node(choice) for choice in slot_choices(step)]


# -- the operator's rows ------------------------------------------------------------------------


def parameter_columns(ops):
    """Per row: op code, and how the argument becomes p0 and p1 (augment_kernels.h)."""
    names = [o.name if o is not None else "Identity" for o in ops]
    code = np.array([op.CODES[CODE_OF.get(n, n)] for n in names], np.float64)
    warp = np.array([CODE_OF.get(n, n) in op.WARPS for n in names], np.float64)
    # timm's translation matrix (1, 0, pixels, ...) moves the content left: the operator's p0 is -pixels
    direction = np.array([-1.0 if CODE_OF.get(n, n).startswith("Translate") else 1.0 for n in names])
    rel_x = np.array([n == "TranslateXRel" for n in names], np.float64)
    rel_y = np.array([n == "TranslateYRel" for n in names], np.float64)
    p1 = np.array([128.0 if n == "SolarizeAdd" else 0.0 for n in names])   # SolarizeAdd's threshold
    return code, warp, direction, rel_x, rel_y, p1


def sized(images: Images) -> bool:
    return isinstance(images.width, (int, float)) and isinstance(images.height, (int, float))


def operator_rows(ops, images: Images) -> Tuple[np.ndarray, np.ndarray]:
    """The operator's table rows (op code, probability) and timm levels (csrc/augment_op.cc)
    for flat_ops: the magnitude, its noise, LEVEL_TO_ARG's constants, and, without noise, the
    argument for each sign in double as timm computes it (with a known size, in pixels)."""
    code, warp, direction, rel_x, rel_y, p1 = parameter_columns(ops)
    noisy = any(noise_of(o) > 0 for o in ops if o is not None)
    rows = np.zeros((len(ops), op.TABLE_COLUMNS))
    rows[:, op.ROW["Code"]], rows[:, op.ROW["Probability"]] = code, column(ops, lambda o: float(o.prob), 1.0)
    levels = [level_of(o.name, o.hparams) if o is not None else None for o in ops]
    fields = {f: column(levels, lambda lv, f=f: float(getattr(lv, f)), float(getattr(Level(), f)))
              for f in ("scale", "offset", "flip", "floor", "hi", "lo", "signed")}
    stds = column(ops, noise_of)
    plus, minus = (column(ops, lambda o: fixed_value(o, s)) for s in (1.0, -1.0))
    if sized(images) and not noisy:   # pixels in double, as timm; the operator takes them as they are
        size = (1.0 - rel_x - rel_y) + rel_x * float(images.width) + rel_y * float(images.height)
        plus, minus = plus * direction * size, minus * direction * size
        direction, rel_x, rel_y = np.ones(len(ops)), np.zeros(len(ops)), np.zeros(len(ops))
    drawn_radius = column(ops, lambda o: float(o.name == "GaussianBlurRand"))
    for k in np.flatnonzero(drawn_radius):   # no level: the radius is p0 + the slot's draw * span
        low, high = random_radius(ops[k])
        prob = float(ops[k].prob)   # 0: never applied, no draw to spread
        rows[k, op.ROW["P0"]], rows[k, op.ROW["Span"]] = low, (high - low) / prob if prob > 0 else 0.0
    columns = {
        "Active": 1.0 - drawn_radius, "Magnitude": column(ops, lambda o: float(o.magnitude)),
        "Std": np.where(np.isinf(stds), 0.0, stds), "Uniform": np.isinf(stds), "Upper": column(ops, lambda o: float(o.magnitude_max or LEVEL_DENOM), LEVEL_DENOM),
        "Scale": fields["scale"], "Offset": fields["offset"], "Flip": fields["flip"], "Floor": fields["floor"],
        "Hi": fields["hi"], "Lo": fields["lo"], "Signed": fields["signed"], "Direction": direction,
        "RelativeX": rel_x, "RelativeY": rel_y, "Warp": warp, "P1": p1, "FixedPlus": plus, "FixedMinus": minus,
        "Noisy": float(noisy)}
    if set(columns) != set(op.LEVEL):   # the header and this function disagree: a broken install
        raise RuntimeError(f"timm level columns {sorted(columns)} are not {op.CODES_HEADER}'s {sorted(op.LEVEL)}")
    level_rows = np.zeros((len(ops), op.LEVEL_COLUMNS))
    for name, values in columns.items():
        level_rows[:, op.LEVEL[name]] = values
    return rows, level_rows


def translate(step, images: Images) -> bool:
    """On a CPU graph with the plugin, the step's slots queued for DaliLoadersAugment (kernels
    "pil", timm's fill) and True; else False, for the conditionals' path. Per slot the
    operator draws the row (slot_choices), whether it applies, and five uniforms for its
    magnitude noise, sign and resample."""
    if not (op.usable(images.device) and fusable(step)):
        return False
    images.decode()
    ops = flat_ops(step)
    present = [o for o in ops if o is not None]
    if not present or (hasattr(step, "ops") and step.num_layers == 0):
        return True
    fill = [float(v) for v in present[0].kwargs.get("fillcolor", (128, 128, 128))]
    fill = (fill * images.channels)[:images.channels] if len(fill) != images.channels else fill
    warps = any(CODE_OF.get(o.name, o.name) in op.WARPS for o in present)
    choices = [float(r) for r in resamples(present[0])]   # timm picks the interpolation per application
    pending = images.pending_augment("pil", fill if warps else None, warps)
    if pending.resamples not in (None, choices):
        images.flush_augment()
        pending = images.pending_augment("pil", fill if warps else None, warps)
    pending.resamples = choices
    rows, levels = operator_rows(ops, images)
    first = pending.add_table(rows, levels)
    pending.fixed_sign = FIXED_SIGN
    # the slot's draw decides whether the row applies (u <= p) and, given it does, where the
    # radius of a GaussianBlurRand lies (u / p uniform in 0 .. 1: its span is divided by p)
    sometimes = bool((rows[:, op.ROW["Probability"]] < 1.0).any() or (rows[:, op.ROW["Span"]] != 0.0).any())
    gate = Uniform() if isinstance(step, Chain) and step.gated else None
    for j, index in enumerate(slot_choices(step)):
        draw = (gate if gate is not None and j else Uniform()) if sometimes else 0.0
        pending.add_slot(shifted(index, first), draw, levels=True)
    return True
