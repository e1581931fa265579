"""Who this process is (rank, world size, GPU) and which samples it reads each epoch.

Rank and world size come from, in order: explicit arguments; an initialized
torch.distributed process group; torchrun's environment (RANK, WORLD_SIZE,
LOCAL_RANK); else a single process. The shard is the *global* rank; the GPU is
the *local* rank.
"""
import os
from dataclasses import dataclass
from typing import Iterator, Optional

import numpy as np
import torch
from torch.utils.data import Sampler


@dataclass(frozen=True)
class Shard:
    rank: int          # global rank: which part of the data this process reads
    world_size: int
    local_rank: int    # rank on this machine: which GPU it uses


def _env_int(name: str) -> Optional[int]:
    value = os.environ.get(name)
    return int(value) if value not in (None, "") else None


def resolve_shard(rank: Optional[int] = None, world_size: Optional[int] = None,
                  local_rank: Optional[int] = None) -> Shard:
    """The Shard of this process; arguments win over the process group, which wins over the environment."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        found_rank, found_world = torch.distributed.get_rank(), torch.distributed.get_world_size()
    else:
        found_rank, found_world = _env_int("RANK"), _env_int("WORLD_SIZE")
    if world_size is None:
        world_size = found_world or 1
    if rank is None:
        if found_rank is not None and found_world == world_size:
            rank = found_rank
        else:  # the original API passed the shard id as local_rank
            rank = local_rank if local_rank is not None else 0
    if local_rank is None:
        local_rank = _env_int("LOCAL_RANK") or 0
    if not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size must be an integer >= 1, got {world_size!r}")
    if not isinstance(rank, int) or not 0 <= rank < world_size:
        raise ValueError(f"rank must be in [0, world_size={world_size}), got {rank!r}")
    if not isinstance(local_rank, int) or local_rank < 0:
        raise ValueError(f"local_rank must be an integer >= 0, got {local_rank!r}")
    return Shard(rank, world_size, local_rank)


def default_seed(seed: Optional[int], shard: Shard) -> int:
    """None means a fresh random seed, except across processes, which must agree: there 0,
    as DistributedSampler does."""
    if seed is not None:
        return int(seed)
    return 0 if shard.world_size > 1 else int(np.random.SeedSequence().generate_state(1)[0] >> 1)


def derived_seed(*parts: int) -> int:
    """A 31-bit seed mixed from several integers (DALI takes a non-negative int)."""
    return int(np.random.SeedSequence([int(p) for p in parts]).generate_state(1)[0] >> 1)


def shard_indices(n: int, *, shuffle: bool, seed: int, epoch: int, shard: Shard) -> np.ndarray:
    """The sample indices this rank reads in `epoch`, in order.

    Shuffled (train): one global permutation from (seed, epoch), cut into world_size
    equal parts, so every rank runs the same number of batches; the n % world_size
    samples left over change with the epoch. Not shuffled (val): contiguous parts that
    cover every sample exactly once, with no padding duplicates.
    """
    if not shuffle:
        return np.array_split(np.arange(n, dtype=np.int64), shard.world_size)[shard.rank]
    per_rank = n // shard.world_size
    permutation = np.random.default_rng([seed, epoch]).permutation(n)
    return permutation[shard.rank * per_rank:(shard.rank + 1) * per_rank]


class EpochSampler(Sampler):
    """This rank's samples for each epoch; the torch twins and the DALI loaders share it.

    Each pass starts the next epoch unless `set_epoch` chose one, so a plain loop gets a
    new order every time and a DistributedSampler-style loop gets the epoch it asked for.
    """

    def __init__(self, n: int, *, shuffle: bool, seed: int, shard: Shard):
        self.n, self.shuffle, self.seed, self.shard = n, shuffle, seed, shard
        self.epoch = 0          # the epoch of the pass in progress, or the next one
        self._next_epoch = 0

    def set_epoch(self, epoch: int) -> None:
        if not isinstance(epoch, int) or epoch < 0:
            raise ValueError(f"epoch must be an integer >= 0, got {epoch!r}")
        self._next_epoch = epoch

    def start_epoch(self) -> int:
        self.epoch, self._next_epoch = self._next_epoch, self._next_epoch + 1
        return self.epoch

    def indices(self, epoch: int) -> np.ndarray:
        return shard_indices(self.n, shuffle=self.shuffle, seed=self.seed, epoch=epoch, shard=self.shard)

    def __len__(self) -> int:
        return len(self.indices(0)) if not self.shuffle else self.n // self.shard.world_size

    def __iter__(self) -> Iterator[int]:
        return iter(self.indices(self.start_epoch()).tolist())
