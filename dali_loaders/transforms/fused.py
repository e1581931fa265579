"""The AutoAugment family, ColorJitter and RandomGrayscale on CPU graphs: the random choices
drawn in the graph (fn.random, so checkpoints resume them), the operations run by one
DaliLoadersAugment call (ops/augment.py) in the twin's own arithmetic; no conditionals.

Each translator builds, in numpy when the graph is built, a table of every operation it can
apply: one row per (operation, magnitude bin, sign) with the op code and its parameters,
computed from the torchvision object's augmentation space in Python's double arithmetic,
as torchvision computes them. The table goes to the operator as a constant, with how each
slot picks its row (a _draws.Lookup: a key's choice, mapped); per sample the graph draws one
vector of uniforms for all the slots of a call (_draws.PendingAugment), from which the
operator picks the rows and whether each applies: one random operator a call, where looking
the rows up in DALI arithmetic took a dozen a slot, each costing ~0.1 ms a batch. GPU graphs
take the same choices as DALI operators (row_node, gated_rows). Translations whose magnitudes scale with an image size
not known at build time keep the fraction in the table; the operator scales and truncates it.
"""
import math
import numbers
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from ..ops import augment as op
from . import augment_space
from ._args import fill_values, interp_type
from ._core import Images, is_v1, unconverted_function
from ._draws import Key, Lookup, Uniform


@dataclass
class Table:
    """The operator's table rows (ops/augment.table_row: code, p0 .. p3, relative x and y,
    span 0, probability 1); labels[i] = (operation name, signed magnitude) of row i, for the
    tests."""
    rows: np.ndarray
    labels: List[Tuple[str, float]]


def usable(images: Images) -> bool:
    return op.usable(images.device)


def kernels(step, images: Images) -> str:
    if images.kind == "pil":
        return "pil"
    return "tensor_v1" if is_v1(step) else "tensor"


def warp_fill(step, images: Images) -> Optional[List[float]]:
    """torchvision's fill, or None (the tensor kernels then blend with zeros, unmasked)."""
    return None if getattr(step, "fill", None) is None else fill_values(step, images.channels)


# -- a row: the op code and parameters of one operation at one signed magnitude ---------------


def solarize_threshold(step, magnitude: float, kind: str) -> float:
    """The integer the threshold acts as: v2 scales the magnitude by 255 (v1's is in levels);
    PIL keeps x < t in double, the tensors x >= t in float32."""
    t = magnitude if is_v1(step) else 255.0 * magnitude
    return float(math.ceil(t if kind == "pil" else np.float32(t)))


def parameters(step, name: str, magnitude: float, resample: int, kind: str, relative: bool) -> Tuple[float, ...]:
    """The operator's p0 .. for torchvision's `name` at `magnitude` (ops/csrc/augment_kernels.h)."""
    if name in ("ShearX", "ShearY"):
        return magnitude, resample, 2 if is_v1(step) else 1   # the matrix form of v1 or v2
    if name in ("TranslateX", "TranslateY"):
        return (magnitude if relative else int(magnitude)), resample
    if name == "Rotate":
        return magnitude, resample
    if name in ("Brightness", "Color", "Contrast", "Sharpness"):
        return magnitude, 1.0   # the factor 1.0 + magnitude, in double as torchvision adds it
    if name == "Posterize":
        return (int(magnitude),)
    if name == "Solarize":
        return (solarize_threshold(step, magnitude, kind),)
    return ()


def row(step, name: str, magnitude: float, resample: int, kind: str, relative: bool,
        probability: float = 1.0) -> List[float]:
    """The table row of torchvision's `name` at `magnitude`, applied with `probability`."""
    return op.table_row(name, parameters(step, name, magnitude, resample, kind, relative),
                        relative_x=float(relative and name == "TranslateX"),
                        relative_y=float(relative and name == "TranslateY"), probability=probability)


def operation_rows(step, images: Images, names, magnitudes_of, signed_of, relative: bool) -> Table:
    """Rows for (name, magnitude-or-None, signed) entries, each twice: sign +, then -."""
    resample = op.RESAMPLE[interp_type(step).name]
    rows, labels = [], []
    for name in names:
        for magnitude in magnitudes_of(name):
            for sign in (1.0, -1.0):
                m = magnitude * (sign if signed_of(name) else 1.0)
                rows.append(row(step, name, m, resample, images.kind, relative))
                labels.append((name, m))
    return Table(np.array(rows, np.float64), labels)


# -- the graph: draw a row per slot, queue the slots, the operator looks the rows up -----------


@unconverted_function
def row_node(index, offset: int = 0):
    """A slot's table row (an int, an int32 DataNode or a Lookup), `offset` added: an int or
    an int32 DataNode."""
    from nvidia.dali import fn, types

    if isinstance(index, Lookup):
        values = np.asarray(index.mapping, np.int64) + offset
        if index.key.weights is None and np.array_equal(values - values[0], np.arange(len(values))):
            # consecutive rows: the draw plus the first
            return index.key.node() + int(values[0]) if values[0] else index.key.node()
        return fn.lookup_table(index.key.node(), keys=list(range(len(values))), values=[float(v) for v in values],
                               dtype=types.INT32)
    return index + offset if offset else index


@unconverted_function
def slot_probability(table: Table, index):
    """The probability column of the slot's row, per sample (a number where it is constant);
    `index` an int, a Lookup or an int32 DataNode."""
    from nvidia.dali import fn, types

    column = table.rows[:, op.ROW["Probability"]]
    if isinstance(index, Lookup):
        column, index = column[np.asarray(index.mapping, np.int64)], index.key.node()
    if isinstance(index, int) or np.all(column == column[0]):
        return float(column[index if isinstance(index, int) else 0])
    return fn.lookup_table(index, keys=list(range(len(column))), values=[float(v) for v in column], dtype=types.FLOAT)


@unconverted_function
def gated_rows(table: Table, slots: Sequence[Tuple[Any, Any]]) -> list:
    """Per slot, its row, or -1 where its draw leaves it out (draw > its row's probability,
    as DaliLoadersAugment decides): for the graphs that take rows alone (the GPU chain)."""
    from nvidia.dali import fn, types

    rows = []
    for index, draw in slots:
        row = row_node(index)
        if draw is not None:
            drawn = draw.node() if isinstance(draw, Uniform) else draw
            applied = fn.cast(drawn <= slot_probability(table, index), dtype=types.INT32)
            row = (row + 1) * applied - 1
        rows.append(row)
    return rows


def queue(images: Images, step, table: Table, slots: Sequence[Tuple[Any, Any]], warps: bool) -> None:
    """Each slot's drawn row of `table`, with its uniform draw (None: the row applies); the
    operator applies a row where the draw is at most the row's probability."""
    pending = images.pending_augment(kernels(step, images), warp_fill(step, images) if warps else None, warps)
    first = pending.add_table(table.rows)
    for index, draw in slots:
        pending.add_slot(shifted(index, first), 0.0 if draw is None else draw)


def shifted(index, offset: int):
    """A slot's row (an int or a Lookup) `offset` rows further."""
    return index.shifted(offset) if isinstance(index, Lookup) else index + offset


@unconverted_function
def draw_index(count: int):
    """A uniform row among `count` (a Lookup), or 0 where there is one."""
    return Lookup(Key(count), np.arange(count)) if count > 1 else 0


# -- the translators' fused forms ----------------------------------------------------------


def space_of(step, images: Images, num_bins: int):
    """torchvision's augmentation space at this image size (when known at build time, else a
    size of 1), and whether the translations are then fractions of the size."""
    sized = isinstance(images.width, numbers.Number) and isinstance(images.height, numbers.Number)
    magnitudes = augment_space.space(step, num_bins, images.height if sized else 1.0, images.width if sized else 1.0)
    return magnitudes, not sized and augment_space.depends_on_size(step, num_bins)


def automatic_table(step, images: Images, num_bins: int, magnitudes_of) -> Tuple[Table, List[str]]:
    """The table of every operation of the step's augmentation space, in torchvision's order."""
    space, relative = space_of(step, images, num_bins)
    names = list(space)
    table = operation_rows(step, images, names, lambda name: magnitudes_of(space[name][0]),
                           lambda name: space[name][1], relative)
    return table, names


@unconverted_function
def trivial_augment_slots(step, images: Images):
    """One operation, uniform; a magnitude bin, uniform; a sign, fair: one row of the table
    (operation x bin x sign, each operation with as many rows), uniform."""
    bins = step.num_magnitude_bins
    table, _ = automatic_table(step, images, bins, lambda mags: list(mags) if mags is not None else [0.0] * bins)
    return table, [(draw_index(len(table.rows)), None)]


@unconverted_function
def rand_augment_slots(step, images: Images):
    """num_ops operations, each uniform (repeats allowed), at the one magnitude, signs fair:
    a row of the table (operation x sign), uniform, per slot."""
    table, _ = automatic_table(step, images, step.num_magnitude_bins,
                               lambda mags: [mags[step.magnitude]] if mags is not None else [0.0])
    return table, [(draw_index(len(table.rows)), None) for _ in range(step.num_ops)]


@unconverted_function
def auto_augment_slots(step, images: Images):
    """A sub-policy, uniform; each of its steps with its probability, at its bin, signs fair.
    The sub-policy and every step's sign are one uniform draw k (the sub-policy k >> length,
    step j's sign bit j of k), each step's row looked up from k, and its probability in its
    rows, against a uniform of its own."""
    chosen = augment_space.policies(step)
    length = max(len(sub) for sub in chosen)
    entries = [sub[j] if j < len(sub) else ("Identity", 0.0, None) for sub in chosen for j in range(length)]
    space, relative = space_of(step, images, augment_space.AUTOAUGMENT_BINS)
    resample = op.RESAMPLE[interp_type(step).name]
    rows, labels = [], []
    for name, p, level in entries:   # each entry's two rows: sign +, then -
        mags, signed = space.get(name, (None, False))
        magnitude = float(mags[level]) if mags is not None and level is not None else 0.0
        for sign in (1.0, -1.0):
            m = magnitude * (sign if signed else 1.0)
            rows.append(row(step, name, m, resample, images.kind, relative, float(p)))
            labels.append((name, m))
    draws = np.arange(len(chosen) << length)
    joint = Key(len(draws))
    slots = [(Lookup(joint, 2 * ((draws >> length) * length + j) + ((draws >> j) & 1)), Uniform())
             for j in range(length)]
    return Table(np.array(rows, np.float64), labels), slots


def automatic(step, images: Images, make_slots) -> None:
    """Queues the step's drawn operations; a pending flip goes first."""
    table, drawn = make_slots(step, images)
    queue(images, step, table, drawn, warps=any(name in op.WARPS for name, _ in table.labels))


def color_jitter(step, images: Images, active: Sequence[str]) -> None:
    """The active adjustments in a random order (a permutation, uniform), each factor uniform
    in its range: n rows per permutation (its adjustments in order, each row's factor its
    range's low end plus the slot's uniform draw times its span), one permutation drawn."""
    from itertools import permutations

    codes = {"brightness": "Brightness", "contrast": "Contrast", "saturation": "Color", "hue": "Hue"}
    orders = list(permutations(range(len(active))))
    rows = []
    for order in orders:
        for k in order:
            low, high = (float(v) for v in getattr(step, active[k]))
            rows.append(op.table_row(codes[active[k]], [low], span=high - low))
    pending = images.pending_augment(kernels(step, images), None, warps=False)
    first = pending.add_table(np.array(rows, np.float64))
    order = Key(len(orders))
    ranged = any(row[op.ROW["Span"]] != 0.0 for row in rows)   # fixed factors need no draw
    for position in range(len(active)):
        row = Lookup(order, np.arange(len(orders)) * len(active) + first + position) if len(orders) > 1 \
            else first + position
        pending.add_slot(row, Uniform() if ranged else 0.0)


def rotation(step, images: Images, fill: Optional[List[float]] = None) -> None:
    """RandomRotation without expand or center: F.rotate about the centre by an angle uniform
    in `degrees` (the row's low end plus the slot's draw times the span), counter-clockwise,
    in the twin's own warp (PIL's nearest in 16.16 fixed point, torch's grid in float32).
    `fill`: per channel in the data's levels, where not the step's own (a float image's)."""
    low, high = (float(d) for d in step.degrees)
    rotate = parameters(step, "Rotate", low, op.RESAMPLE[interp_type(step).name], images.kind, relative=False)
    pending = images.pending_augment(kernels(step, images), fill if fill is not None else warp_fill(step, images),
                                     warps=True)
    first = pending.add_table(np.array([op.table_row("Rotate", rotate, span=high - low)], np.float64))
    pending.add_slot(first, Uniform() if high != low else 0.0)


def random_grayscale(step, images: Images) -> None:
    """The Grayscale row, applied when the slot's draw is below p."""
    pending = images.pending_augment(kernels(step, images), None, warps=False)
    first = pending.add_table(np.array([op.table_row("Grayscale", probability=float(step.p))], np.float64))
    pending.add_slot(first, Uniform())


def gated(images: Images, p: float, queue_steps) -> None:
    """Steps that apply together with probability p or not at all, as RandomApply decides:
    `queue_steps()` queues their slots (steps that fuse without warping, in one arithmetic:
    one call); see joined."""
    if p >= 1.0:
        queue_steps()
        return
    pending, slots = queued(images, [queue_steps])
    if pending is not None:
        joined(pending, [slots[0], range(0)], [max(p, 0.0), 1.0 - max(p, 0.0)])


def chosen(images: Images, weights: Sequence[float], queues: Sequence[Any]) -> None:
    """One group of steps per image, group k with weights[k], as RandomChoice picks: each of
    `queues` queues a group's slots (as gated's); see joined."""
    pending, slots = queued(images, queues)
    if pending is not None:
        joined(pending, slots, weights)


def queued(images: Images, queues: Sequence[Any]):
    """(the pending call, each queue's slots in it as a range), the queues called in order;
    (None, []) where they queued nothing. Their steps share one arithmetic and none warps, so
    only the first step that queues a slot can begin a new call, and every slot from then on is
    theirs."""
    before = images.augment
    start = len(before.rows) if before is not None else 0
    ends = []
    for queue_steps in queues:
        queue_steps()
        if images.augment is not before:
            if before is not None and ends and ends[-1] > start:
                raise RuntimeError("steps of one RandomApply or RandomChoice went to two operator calls")
            before, start, ends = images.augment, 0, [0] * len(ends)   # the groups before queued nothing
        ends.append(len(before.rows) if before is not None else 0)
    if before is None:
        return None, []
    return before, [range(a, b) for a, b in zip([start] + ends[:-1], ends)]


def joined(pending, slots_by_outcome: Sequence[range], weights: Sequence[float]) -> None:
    """Each slot of slots_by_outcome[k] applies only where the image's outcome is k, drawn with
    `weights`: every such slot then reads one key that draws the outcome together with the keys
    the slots read (a product of choices, weighted), its own row where the outcome is its
    group's, the skip row (-1) elsewhere. One column of the call's uniforms, no conditional."""
    slots = [j for group in slots_by_outcome for j in group]
    if any(not isinstance(pending.rows[j], (int, Lookup)) for j in slots):
        raise TypeError("a joined slot's row is an int or a Lookup")
    keys = list({id(pending.rows[j].key): pending.rows[j].key for j in slots
                 if isinstance(pending.rows[j], Lookup)}.values())
    joint_weights = np.array([1.0])
    for key in keys:
        own = np.full(key.count, 1.0 / key.count) if key.weights is None else np.asarray(key.weights, np.float64)
        joint_weights = np.multiply.outer(joint_weights, own / own.sum()).ravel()
    outcome = np.asarray(weights, np.float64)
    joint_weights = np.multiply.outer(joint_weights, outcome / outcome.sum()).ravel()
    # choice c of the joint key: c % len(weights) the outcome, the keys' choices before it, the last fastest
    grid = np.indices([key.count for key in keys] + [len(outcome)]).reshape(len(keys) + 1, -1)
    joint = Key(len(joint_weights), joint_weights)
    position = {id(key): k for k, key in enumerate(keys)}
    for k, group in enumerate(slots_by_outcome):
        for j in group:
            row = pending.rows[j]
            rows = np.asarray(row.mapping, np.int64)[grid[position[id(row.key)]]] if isinstance(row, Lookup) \
                else np.full(grid.shape[1], int(row), np.int64)
            pending.rows[j] = Lookup(joint, np.where(grid[-1] == k, rows, -1))


def gaussian_blur(step, images: Images) -> None:
    """torchvision's blur: sigma uniform in its range (the slot's draw), one for both axes,
    the kernel (width, height) its own."""
    kernel_x, kernel_y = (step.kernel_size,) * 2 if isinstance(step.kernel_size, int) else step.kernel_size
    low, high = (float(s) for s in step.sigma)
    pending = images.pending_augment(kernels(step, images), None, warps=False)
    first = pending.add_table(np.array([op.table_row("GaussianBlur", [low, float(kernel_x), float(kernel_y)],
                                                     span=high - low)], np.float64))
    pending.add_slot(first, Uniform() if high != low else 0.0)


def pil_gaussian_blur(step, images: Images) -> None:
    """PIL's blur (the project's PILGaussianBlur): the radius low + the slot's draw * span,
    applied with probability p as RandomApply decides (a draw of its own, not the radius's)."""
    low, high = step.radius

    def queue():
        pending = images.pending_augment(kernels(step, images), None, warps=False)
        first = pending.add_table(np.array([op.table_row("PilBlur", [low], span=high - low)], np.float64))
        pending.add_slot(first, Uniform() if high != low else 0.0)
    gated(images, step.p, queue)


def erase(step, images: Images, box, value: List[float]) -> None:
    """RandomErasing on uint8 pixels (the twin erases its uint8 tensor): the drawn box, float32
    (top, left, height, width) per sample, set to the value, which torchvision's copy into uint8
    truncates."""
    from nvidia.dali import types

    value = value * images.channels if len(value) == 1 else value
    pending = images.pending_augment(kernels(step, images), None, warps=False, erase_value=value)
    pending.add_direct(types.Constant(np.int32(op.CODES["Erase"])), box)


def erase_float(images: Images, probability: float, scale, ratio, value: Optional[List[float]], noise: str) -> bool:
    """RandomErasing on the normalized float32 output, the box drawn from the graph's uniforms
    by our operators when the graph can run them (False: not done): by the normalize operator
    as it makes the float image (no copy of the image), else, the image made already, by a
    DaliLoadersErase call."""
    from nvidia.dali import types

    from ._core import dali_dtype

    if not (usable(images) and dali_dtype(images.dtype) == types.FLOAT):
        return False
    arguments = op.erase_arguments(probability, scale, ratio, value, noise)
    if not images.materialize(erase=arguments):
        images.data = op.erase(images.data, arguments)
    return True
