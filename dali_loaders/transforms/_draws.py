"""The random choices of the augmentations' slots, symbolic until a graph needs them, and the
DaliLoadersAugment call they are pending for: the call draws all its slots from one random
operator (PendingAugment), where a random operator, a lookup and a stack per slot each cost a
scheduling round over the batch; the GPU chain and DALI's conditionals take the choices as
DataNodes (node())."""
import numbers
from dataclasses import dataclass, field
from typing import Any, List, Optional

import numpy as np


@dataclass(eq=False)
class Key:
    """A per-sample draw among `count` choices, uniform or by `weights`, that any number of
    slots read (a sub-policy's steps read one); node(): one random operator, made once."""
    count: int
    weights: Optional[np.ndarray] = None
    _node: Any = None

    def node(self):
        from nvidia.dali import fn, types

        if self._node is None:
            self._node = fn.random.uniform(values=list(range(self.count)), dtype=types.INT32) \
                if self.weights is None else fn.random.choice(self.count, p=[float(p) for p in self.weights])
        return self._node

    def cumulative(self) -> np.ndarray:
        """The weights' running sums, the last exactly 1 (a uniform below sum k picks k)."""
        sums = np.cumsum(np.asarray(self.weights, np.float64) / np.sum(self.weights))
        sums[-1] = 1.0
        return sums


@dataclass(eq=False)
class Uniform:
    """A per-sample uniform in [0, 1); node(): one random operator, made once."""
    _node: Any = None

    def node(self):
        from nvidia.dali import fn

        if self._node is None:
            self._node = fn.random.uniform(range=[0.0, 1.0])
        return self._node


@dataclass(frozen=True, eq=False)
class Lookup:
    """A slot's table row per sample: mapping[key's draw]. Several slots may read one key,
    each with its own mapping; the table's offset goes into the mapping, not an operator."""
    key: Key
    mapping: np.ndarray

    def shifted(self, offset: int) -> "Lookup":
        return Lookup(self.key, np.asarray(self.mapping, np.int64) + offset)


@dataclass
class PendingAugment:
    """Augmentation steps drawn in the graph and not run yet: consecutive translated steps
    share one DaliLoadersAugment call (ops/augment.py). Each slot is a row of the call's
    constant table, fixed (an int: -1 skips, -2 - k takes direct step k) or drawn (a
    Lookup), with a uniform draw (a Uniform) where the row has a probability
    or a span, and timm's five level uniforms where `levels`; or a direct op code (int32)
    and parameter row (float32 (4,)). The operator draws every slot from one uniform vector
    per sample: one random operator for the call."""
    kernels: str
    fill: Optional[List[float]]
    warps: bool = False
    erase_value: Optional[List[float]] = None
    ops: List[Any] = field(default_factory=list)      # the direct slots
    params: List[Any] = field(default_factory=list)
    table: List[np.ndarray] = field(default_factory=list)   # blocks of table rows
    rows: List[Any] = field(default_factory=list)     # per slot: an int or a Lookup
    draws: List[Any] = field(default_factory=list)    # per slot: a Uniform, or 0.0
    levels: List[Optional[np.ndarray]] = field(default_factory=list)   # per table block: timm's levels, or None
    leveled: List[bool] = field(default_factory=list)   # per slot: five level uniforms (timm's rows)
    resamples: Optional[List[float]] = None           # what timm's warps draw among
    mirror: Any = None                                # a flip's coins (int32 per sample), before slot mirror_slot
    mirror_slot: int = -1
    fixed_sign: Optional[float] = None                # tests: every signed timm argument's sign

    def add_table(self, rows: np.ndarray, levels: Optional[np.ndarray] = None) -> int:
        """Appends a block of table rows (and their timm levels); returns its first row's index."""
        first = sum(len(block) for block in self.table)
        self.table.append(np.asarray(rows, np.float64))
        self.levels.append(None if levels is None else np.asarray(levels, np.float64))
        return first

    def add_slot(self, row, draw=0.0, levels: bool = False) -> None:
        if not (isinstance(row, numbers.Integral) or isinstance(row, Lookup)):
            raise TypeError(f"a slot's row is an int or a Lookup, not {type(row).__name__}")
        if not (isinstance(draw, Uniform) or draw == 0.0):
            raise TypeError(f"a slot's draw is a Uniform or 0.0, not {draw!r}")
        self.rows.append(row)
        self.draws.append(draw)
        self.leveled.append(levels)

    def add_direct(self, code, params) -> None:
        self.ops.append(code)
        self.params.append(params)
        self.add_slot(-1 - len(self.ops))

    def plan(self) -> dict:
        """The operator's slot_plan, picks, keys and key_cdf, and the number of uniforms a
        sample: the keys' columns first, then the draws', then LEVEL_DRAWS a slot with levels."""
        from ..ops.augment import LEVEL_DRAWS

        keys, columns = {}, {}
        for row in self.rows:
            if isinstance(row, Lookup) and id(row.key) not in keys:
                keys[id(row.key)] = (len(keys), row.key)
        width = len(keys)
        for draw in self.draws:
            if isinstance(draw, Uniform) and id(draw) not in columns:
                columns[id(draw)], width = width, width + 1
        slot_plan, picks = [], []
        for row, draw, leveled in zip(self.rows, self.draws, self.leveled):
            key = keys[id(row.key)][0] if isinstance(row, Lookup) else -1
            slot_plan += [key, len(picks), columns.get(id(draw), -1), width if leveled else -1]
            picks += [int(v) for v in row.mapping] if isinstance(row, Lookup) else [int(row)]
            width += LEVEL_DRAWS if leveled else 0
        key_rows, key_cdf = [], []
        for _, key in keys.values():
            key_rows += [key.count, -1 if key.weights is None else len(key_cdf)]
            key_cdf += [] if key.weights is None else [float(v) for v in key.cumulative()]
        return dict(slot_plan=slot_plan, picks=picks, keys=key_rows, key_cdf=key_cdf, width=width)

    def call(self, data):
        """The one DaliLoadersAugment call for the slots, on `data`."""
        from nvidia.dali import fn

        from ..ops import augment as op

        plan = self.plan()
        width = plan.pop("width")
        levels = {}
        if any(block is not None for block in self.levels):
            levels = dict(levels=np.concatenate([np.zeros((len(rows), op.LEVEL_COLUMNS)) if block is None else block
                                                 for rows, block in zip(self.table, self.levels)]).ravel(),
                          resamples=self.resamples)
        return op.call(data, fn.stack(*self.ops) if self.ops else None, fn.stack(*self.params) if self.ops else None,
                       self.kernels, self.fill, self.erase_value,
                       table=np.concatenate(self.table).ravel() if self.table else None,
                       uniforms=fn.random.uniform(range=[0.0, 1.0], shape=[width]) if width else None,
                       mirror=self.mirror, mirror_slot=self.mirror_slot, fixed_sign=self.fixed_sign,
                       **plan, **levels)
