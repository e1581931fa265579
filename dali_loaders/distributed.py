"""Who this process is (rank, world size, GPU) and which samples it reads each epoch.

Rank and world size come from, in order: explicit arguments; an initialized
torch.distributed process group; torchrun's environment (RANK, WORLD_SIZE,
LOCAL_RANK); else a single process. The shard is the *global* rank; the GPU is
the *local* rank.
"""
import numbers
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


def _as_int(name: str, value) -> int:
    """`value` as an int; numpy integers pass, bools and floats do not."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    return int(value)


def _found_rank_and_world():
    """(rank, world size) of the initialized process group, else torchrun's, else (None, None)."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return _env_int("RANK"), _env_int("WORLD_SIZE")


def resolve_shard(rank: Optional[int] = None, world_size: Optional[int] = None,
                  local_rank: Optional[int] = None) -> Shard:
    """The Shard of this process; arguments win over the process group, which wins over the environment.

    `local_rank` picks the GPU. Only in the original API's call `local_rank=i,
    world_size=n` made outside torchrun and torch.distributed is it also the shard id,
    as it used to be (right on a single machine only; pass `rank=` on several).
    """
    if local_rank is not None:  # checked first: it may stand in for the rank below
        local_rank = _checked_local_rank(local_rank)
    found_rank, found_world = _found_rank_and_world()
    world_size = _as_int("world_size", world_size if world_size is not None else found_world or 1)
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1 (the number of processes reading the data), got {world_size}")
    if rank is None:
        rank = _default_rank(world_size, found_rank, found_world, local_rank)
    rank = _as_int("rank", rank)
    if not 0 <= rank < world_size:
        raise ValueError(f"rank must be in [0, world_size={world_size}), the global rank of this "
                         f"process; got {rank}")
    if local_rank is None:
        local_rank = _checked_local_rank(_env_int("LOCAL_RANK") or 0)
    return Shard(rank, world_size, local_rank)


def _checked_local_rank(local_rank) -> int:
    local_rank = _as_int("local_rank", local_rank)
    if local_rank < 0:
        raise ValueError(f"local_rank must be >= 0 (this process's GPU on its machine), got {local_rank}")
    return local_rank


def _default_rank(world_size: int, found_rank: Optional[int], found_world: Optional[int],
                  local_rank: Optional[int]) -> int:
    """The global rank when the caller gave none."""
    if found_rank is not None and found_world == world_size:
        return found_rank
    if world_size == 1:
        return 0
    if local_rank is not None and found_rank is None:
        return local_rank  # the original API: one machine, shard id passed as local_rank
    # Guessing 0 would make every process read the same shard: refuse instead.
    why = (f"it differs from the world size {found_world} of torch.distributed / torchrun, so their rank "
           f"does not apply" if found_rank is not None else
           "neither torch.distributed nor torchrun (RANK) gives this process's rank")
    raise ValueError(f"world_size={world_size} was given but {why}: pass rank= (the global rank, "
                     f"0..{world_size - 1}), or launch with torchrun, or call "
                     f"torch.distributed.init_process_group first")


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


def epoch_sampler(n: int, *, shuffle: bool, seed: Optional[int], rank: Optional[int],
                  world_size: Optional[int], local_rank: Optional[int]) -> "EpochSampler":
    """The EpochSampler of this process, from a loader's arguments (see resolve_shard)."""
    shard = resolve_shard(rank, world_size, local_rank)
    return EpochSampler(n, shuffle=shuffle, seed=default_seed(seed, shard), shard=shard)


class EpochSampler(Sampler):
    """This rank's samples for each epoch; the torch twins and the DALI loaders share it.

    Each pass starts the next epoch unless `set_epoch` chose one, so a plain loop gets a
    new order every time and a DistributedSampler-style loop gets the epoch it asked for.
    """

    def __init__(self, n: int, *, shuffle: bool, seed: int, shard: Shard):
        if shuffle and n < shard.world_size:
            raise ValueError(f"the training set has {n} samples, fewer than world_size="
                             f"{shard.world_size}: every rank needs at least one; use fewer processes")
        self.n, self.shuffle, self.seed, self.shard = n, shuffle, seed, shard
        self.epoch = 0          # the epoch of the pass in progress, or the next one
        self.next_epoch = 0     # the epoch the next pass starts

    def set_epoch(self, epoch: int) -> None:
        epoch = _as_int("epoch", epoch)
        if epoch < 0:
            raise ValueError(f"epoch must be >= 0, got {epoch}")
        self.next_epoch = epoch

    def start_epoch(self) -> int:
        self.epoch, self.next_epoch = self.next_epoch, self.next_epoch + 1
        return self.epoch

    def indices(self, epoch: int) -> np.ndarray:
        return shard_indices(self.n, shuffle=self.shuffle, seed=self.seed, epoch=epoch, shard=self.shard)

    def __len__(self) -> int:
        """Samples this rank reads per epoch, the same every epoch (see shard_indices)."""
        per_rank, extra = divmod(self.n, self.shard.world_size)
        return per_rank + (0 if self.shuffle else int(self.shard.rank < extra))

    def __iter__(self) -> Iterator[int]:
        return iter(self.indices(self.start_epoch()).tolist())
