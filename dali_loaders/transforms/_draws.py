"""The random choices of the augmentations' slots, symbolic until a graph needs them: a
DaliLoadersAugment call draws all its slots from one random operator (PendingAugment in
_core.py), where a random operator, a lookup and a stack per slot each cost a scheduling
round over the batch; the GPU chain and DALI's conditionals take them as DataNodes (node())."""
from dataclasses import dataclass
from typing import Any, Optional

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
