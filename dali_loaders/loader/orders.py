"""Which samples each epoch reads, batch by batch: the library's own order, or a user's sampler.

An epoch's plan is its sample indices in order and the batch boundaries (`bounds`: batch k is
indices[bounds[k]:bounds[k + 1]]). The library's order (distributed.EpochSampler, or a
source's own, as WebDataset's shard order) is a pure function of (seed, epoch, rank), so a
state_dict needs only the epoch. A user's `sampler=` or `batch_sampler=` may draw from any
generator (WeightedRandomSampler draws from torch's global one), so its plan is made once an
epoch, kept, and saved in the state: a resumed epoch reads exactly the samples still to come.
"""
import math
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

from ..distributed import resolve_shard
from ..seeds import random_seed


@dataclass
class EpochPlan:
    indices: np.ndarray   # int64, the samples in the order they are read
    bounds: np.ndarray    # int64, len = batches + 1

    @property
    def batches(self) -> int:
        return len(self.bounds) - 1

    def batch(self, k: int) -> np.ndarray:
        return self.indices[self.bounds[k]:self.bounds[k + 1]]

    def after(self, done: int) -> "EpochPlan":
        """The rest of the epoch after `done` batches, its bounds counted from 0."""
        start = self.bounds[done]
        return EpochPlan(self.indices[start:], self.bounds[done:] - start)

    def state(self) -> dict:
        return {"indices": self.indices.astype(np.int64).tobytes(), "bounds": self.bounds.astype(np.int64).tobytes()}

    @classmethod
    def from_state(cls, state: dict) -> "EpochPlan":
        return cls(np.frombuffer(state["indices"], dtype=np.int64).copy(),
                   np.frombuffer(state["bounds"], dtype=np.int64).copy())


def batch_count(samples: int, batch_size: int, drop_last: bool) -> int:
    """DataLoader's len(): the last short batch counted, or dropped with drop_last."""
    return (math.floor if drop_last else math.ceil)(samples / batch_size)


def even_plan(indices: np.ndarray, batch_size: int, drop_last: bool) -> EpochPlan:
    """Batches of batch_size in order; the last one shorter, or dropped with drop_last."""
    indices = np.asarray(indices, dtype=np.int64)
    count = batch_count(len(indices), batch_size, drop_last)
    bounds = np.minimum(np.arange(count + 1, dtype=np.int64) * batch_size, len(indices))
    return EpochPlan(indices[:bounds[-1]], bounds)


class OrderView:
    """A loader's order as steps around the loader read it (`DaliLoader.order`): what its random
    draws derive from, read-only and current (a loaded state may change the seed)."""

    def __init__(self, order):
        self._order = order

    @property
    def seed(self) -> int:
        return self._order.seed

    @property
    def shard(self):
        """The loader's rank and world size (`rank`, `world_size`, `local_rank`)."""
        return self._order.shard

    @property
    def epoch(self) -> int:
        """The epoch in progress (the one started last)."""
        return self._order.epoch


class LibraryOrder:
    """The library's own order: an EpochSampler (or a source's subclass of it) cut into batches."""

    saves_plan = False   # the plan is a pure function of (seed, epoch, rank)

    def __init__(self, sampler, batch_size: int, drop_last: bool):
        self.sampler, self.batch_size, self.drop_last = sampler, batch_size, drop_last

    @property
    def seed(self) -> int:
        return self.sampler.seed

    @seed.setter
    def seed(self, seed: int) -> None:
        self.sampler.seed = seed

    @property
    def shard(self):
        return self.sampler.shard

    @property
    def rank(self) -> int:
        return self.sampler.shard.rank

    @property
    def world_size(self) -> int:
        return self.sampler.shard.world_size

    @property
    def local_rank(self) -> int:
        return self.sampler.local_rank

    @property
    def epoch(self) -> int:
        return self.sampler.epoch

    @property
    def next_epoch(self) -> int:
        return self.sampler.next_epoch

    def set_epoch(self, epoch: int) -> None:
        self.sampler.set_epoch(epoch)

    def start_epoch(self) -> int:
        return self.sampler.start_epoch()

    def plan(self, epoch: int) -> EpochPlan:
        return even_plan(self.sampler.indices(epoch), self.batch_size, self.drop_last)

    def batches(self) -> int:
        return batch_count(len(self.sampler), self.batch_size, self.drop_last)

    def unpadded_len(self) -> int:
        return self.sampler.unpadded_len()

    def padding_mask(self, start: int, count: int, unpadded: Optional[int]) -> torch.Tensor:
        return self.sampler.padding_mask(start, count, unpadded)


class SamplerOrder:
    """A user's `sampler=` (indices) or `batch_sampler=` (lists of indices), as DataLoader
    takes them. The sampler decides sharding (DistributedSampler, a user's own); the rank
    here only seeds the augmentations, so that ranks draw differently. `set_epoch` is passed
    on to the sampler; each pass over the loader starts the next epoch number, as with the
    library's order."""

    saves_plan = True

    def __init__(self, *, sampler=None, batch_sampler=None, batch_size: Optional[int], drop_last: bool,
                 seed: Optional[int], rank=None, world_size=None, local_rank=None, generator=None):
        self.sampler, self.batch_sampler = sampler, batch_sampler
        self.batch_size, self.drop_last = batch_size, drop_last
        self._seed = None if seed is None else int(seed)
        self._rank_args = (rank, world_size, local_rank)
        self._generator = generator
        self.epoch = 0
        self.next_epoch = 0

    @property
    def seed(self) -> int:
        if self._seed is None:   # as DistributedSampler's: agreed across processes, random alone
            self._seed = 0 if self.world_size > 1 else random_seed(self._generator)
        return self._seed

    @seed.setter
    def seed(self, seed: int) -> None:
        self._seed = int(seed)

    @property
    def shard(self):
        return resolve_shard(*self._rank_args)

    @property
    def rank(self) -> int:
        return self.shard.rank

    @property
    def world_size(self) -> int:
        return self.shard.world_size

    @property
    def local_rank(self) -> int:
        return self.shard.local_rank

    def set_epoch(self, epoch: int) -> None:
        self.next_epoch = int(epoch)
        for sampler in (self.sampler, self.batch_sampler, getattr(self.batch_sampler, "sampler", None)):
            if hasattr(sampler, "set_epoch"):
                sampler.set_epoch(epoch)
                break

    def start_epoch(self) -> int:
        self.epoch, self.next_epoch = self.next_epoch, self.next_epoch + 1
        return self.epoch

    def plan(self, epoch: int) -> EpochPlan:
        if self.batch_sampler is None:
            return even_plan(np.fromiter((int(i) for i in self.sampler), dtype=np.int64), self.batch_size,
                             self.drop_last)
        batches = [np.asarray(list(batch), dtype=np.int64) for batch in self.batch_sampler]
        sizes = np.array([len(b) for b in batches], dtype=np.int64)
        if len(sizes) and sizes.min() < 1:
            raise ValueError("batch_sampler yielded an empty batch; every batch needs at least one sample")
        indices = np.concatenate(batches) if batches else np.zeros(0, np.int64)
        return EpochPlan(indices, np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64))

    def batches(self) -> int:
        if self.batch_sampler is not None:
            return len(self.batch_sampler)
        return batch_count(len(self.sampler), self.batch_size, self.drop_last)

    def unpadded_len(self) -> int:
        return 1 << 62   # a user's sampler pads nothing the loader knows of

    def padding_mask(self, start: int, count: int, unpadded: Optional[int]) -> torch.Tensor:
        return torch.zeros(count, dtype=torch.bool)
