"""Who this process is (rank, world size, GPU) and which samples it reads each epoch.

Rank and world size come from, in order: explicit arguments; an initialized
torch.distributed process group; torchrun's environment (RANK, WORLD_SIZE,
LOCAL_RANK); else a single process. The shard is the *global* rank; the GPU is
the *local* rank.
"""
import numbers
import os
from dataclasses import dataclass
from typing import Iterator, Optional, Tuple

import numpy as np
import torch
from torch.utils.data import DistributedSampler

from .seeds import random_seed


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
    world_given = world_size is not None
    world_size = _as_int("world_size", world_size if world_given else found_world or 1)
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1 (the number of processes reading the data), got {world_size}")
    if rank is None:
        rank = _default_rank(world_size, found_rank, found_world, local_rank, world_given)
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
                  local_rank: Optional[int], world_given: bool) -> int:
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
    if not world_given:  # WORLD_SIZE without RANK: a launcher (Lightning's ddp) before its process group
        raise ValueError(f"WORLD_SIZE={world_size} is set but {why}: use the loader (len, a loop, "
                         f"state_dict) once torch.distributed is initialized (in Lightning: from the "
                         f"trainer's hooks, not before fit()), or pass rank=")
    raise ValueError(f"world_size={world_size} was given but {why}: pass rank= (the global rank, "
                     f"0..{world_size - 1}), or launch with torchrun, or call "
                     f"torch.distributed.init_process_group first")


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
                  world_size: Optional[int], local_rank: Optional[int], generator=None) -> "EpochSampler":
    """The EpochSampler of this process, from a loader's arguments (see resolve_shard).

    With rank or world_size given, the shard is settled (and bad values refused) now.
    Without, it is found when first needed: a launcher such as Lightning's builds the
    loaders before it creates the process group, so at construction the rank may not be
    known yet, and a single process may turn out to be one of several.
    """
    shard = None if rank is None and world_size is None else resolve_shard(rank, world_size, local_rank)
    return EpochSampler(n, shuffle=shuffle, seed=seed, shard=shard, local_rank=local_rank, generator=generator)


def _known_shard(local_rank: Optional[int]) -> Tuple[Shard, bool]:
    """This process's shard from the process group or torchrun's environment, and whether
    that is final: "no group and no RANK" reads as one process, but may be one of several
    whose group does not exist yet."""
    known = (torch.distributed.is_available() and torch.distributed.is_initialized()) or \
        _env_int("RANK") is not None
    return resolve_shard(local_rank=local_rank), known


class EpochSampler(DistributedSampler):
    """This rank's samples for each epoch; the torch twins and the DALI loaders share it.

    Each pass starts the next epoch unless `set_epoch` chose one, so a plain loop gets a
    new order every time and a DistributedSampler-style loop gets the epoch it asked for.

    It is a DistributedSampler (same set_epoch, num_replicas, rank, num_samples), so that
    frameworks which shard any other sampler (Lightning's use_distributed_sampler) see
    that this one is sharded already. `shard=None` defers the shard until first needed
    (len, a pass, `.shard`). `seed=None` is a random seed in a single process, drawn from
    `generator` (torch's global one if None) when first needed, but 0 across processes, which
    must agree (as DistributedSampler's default, which no generator changes: ranks seeding
    their generators apart would otherwise shuffle apart, and lose and repeat samples).
    """

    def __init__(self, n: int, *, shuffle: bool, seed: Optional[int], shard: Optional[Shard],
                 local_rank: Optional[int] = None, generator=None):
        # DistributedSampler.__init__ is not called: it would need the process group now.
        self.n, self.shuffle = n, shuffle
        self._seed = int(seed) if seed is not None else None
        self._single_process_seed: Optional[int] = None   # drawn when first needed, from:
        self._generator = generator
        self.drop_last = False  # DistributedSampler's meaning: never pads nor drops to even out ranks
        self._shard: Optional[Shard] = None
        self._local_rank = _checked_local_rank(local_rank) if local_rank is not None else None
        if shard is not None:
            self._settle(shard)
        self.epoch = 0          # the epoch of the pass in progress, or the next one
        self.next_epoch = 0     # the epoch the next pass starts
        # even_batches: every rank reads as many samples as the largest part, the shorter
        # parts padded with their own first samples (see padding_mask)
        self.even_batches = False

    def _settle(self, shard: Shard) -> None:
        if self.shuffle and self.n < shard.world_size:
            raise ValueError(f"the training set has {self.n} samples, fewer than world_size="
                             f"{shard.world_size}: every rank needs at least one; use fewer processes")
        self._shard = shard

    @property
    def shard(self) -> Shard:
        if self._shard is not None:
            return self._shard
        shard, final = _known_shard(self._local_rank)
        if final:
            self._settle(shard)
        return shard

    @property
    def local_rank(self) -> int:
        """This process's GPU on its machine; known at construction, unlike the shard."""
        if self._shard is not None:
            return self._shard.local_rank
        return self._local_rank if self._local_rank is not None else _checked_local_rank(_env_int("LOCAL_RANK") or 0)

    @property
    def seed(self) -> int:
        if self._seed is not None:
            return self._seed
        if self.shard.world_size > 1:
            return 0
        if self._single_process_seed is None:
            self._single_process_seed = random_seed(self._generator)
        return self._single_process_seed

    @seed.setter
    def seed(self, seed: int) -> None:
        self._seed = seed

    @property
    def num_replicas(self) -> int:
        return self.shard.world_size

    @property
    def rank(self) -> int:
        return self.shard.rank

    @property
    def num_samples(self) -> int:
        return len(self)

    @property
    def total_size(self) -> int:
        return self.n

    def set_epoch(self, epoch: int) -> None:
        epoch = _as_int("epoch", epoch)
        if epoch < 0:
            raise ValueError(f"epoch must be >= 0, got {epoch}")
        self.next_epoch = epoch

    def start_epoch(self) -> int:
        self.epoch, self.next_epoch = self.next_epoch, self.next_epoch + 1
        return self.epoch

    def indices(self, epoch: int) -> np.ndarray:
        order = shard_indices(self.n, shuffle=self.shuffle, seed=self.seed, epoch=epoch, shard=self.shard)
        return np.resize(order, len(self)) if self.even_batches and len(order) else order

    def unpadded_len(self) -> int:
        """This rank's own samples per epoch; positions from here on are even_batches' padding."""
        shard = self.shard
        per_rank, extra = divmod(self.n, shard.world_size)
        return per_rank + (0 if self.shuffle else int(shard.rank < extra))

    def padding_mask(self, start: int, count: int, unpadded: Optional[int] = None) -> torch.Tensor:
        """Which of the epoch's samples start..start+count-1 are padding (True: drop them from
        metrics). `unpadded`: unpadded_len() if the caller has it (once an epoch: it asks the
        process group and the environment)."""
        return torch.arange(start, start + count) >= (self.unpadded_len() if unpadded is None else unpadded)

    def __len__(self) -> int:
        """Samples this rank reads per epoch, the same every epoch (see shard_indices); with
        even_batches, the same on every rank too."""
        if self.even_batches and not self.shuffle:
            return -(-self.n // self.shard.world_size)
        return self.unpadded_len()

    def __iter__(self) -> Iterator[int]:
        return iter(self.indices(self.start_epoch()).tolist())
