"""The DataLoader look-alike every DALI loader returns.

Each loop builds a fresh DALI pipeline for one epoch (a build takes milliseconds). A
`break` therefore leaves nothing behind for the next loop (DALI ignores reset() in
mid-epoch), and an epoch is a pure function of (seed, epoch, rank): set_epoch and a
restored state_dict reproduce it exactly.
"""
import math
from typing import Callable, Optional

import numpy as np
import torch

from .distributed import EpochSampler, derived_seed

STATE_VERSION = 1

# build_pipeline(order, seed, checkpoint) -> a DALI pipeline whose outputs are
# (images, labels) for the samples `order`, in that order, batch after batch.
PipelineBuilder = Callable[[np.ndarray, int, Optional[bytes]], object]


def dali_available() -> bool:
    try:
        import nvidia.dali  # noqa: F401
        from nvidia.dali.plugin import pytorch  # noqa: F401
    except ImportError:
        return False
    return True


def pick_device_id(device_id: Optional[int], local_rank: int) -> Optional[int]:
    """The GPU for DALI's outputs, or None for a CPU-only pipeline."""
    if not torch.cuda.is_available():
        return None
    if device_id is not None:
        return device_id
    return local_rank if local_rank < torch.cuda.device_count() else torch.cuda.current_device()


class DaliLoader:
    """`for images, labels in loader`, `len(loader)`, `set_epoch`, `state_dict` over DALI.

    `loader.dataset` is the dataset (its len is the sample count over all ranks);
    `loader.sampler` says which samples this rank reads in each epoch.
    """

    def __init__(self, dataset, build_pipeline: PipelineBuilder, *, batch_size: int,
                 sampler: EpochSampler, drop_last: bool,
                 explain_failure: Optional[Callable[[Exception, np.ndarray], Exception]] = None):
        self.dataset = dataset
        self.batch_size = batch_size
        self.sampler = sampler
        self.drop_last = drop_last
        self._build_pipeline = build_pipeline
        self._explain_failure = explain_failure
        self._live = None      # (epoch, DALI iterator, batches served) while an epoch runs
        self._resume = None    # a loaded state, used by the next loop

    def __len__(self) -> int:
        return self._num_batches(len(self.sampler))

    def _num_batches(self, samples: int) -> int:
        rounding = math.floor if self.drop_last else math.ceil
        return rounding(samples / self.batch_size)

    def set_epoch(self, epoch: int) -> None:
        self.sampler.set_epoch(epoch)

    def _epoch_order(self, epoch: int) -> np.ndarray:
        order = self.sampler.indices(epoch)
        return order[:self._num_batches(len(order)) * self.batch_size]

    def __iter__(self):
        self._live = None  # drops the pipeline a `break` left behind
        resume, self._resume = self._resume, None
        if resume:
            epoch, done, checkpoint = resume["epoch"], resume["batches_done"], resume["dali"]
            self.sampler.set_epoch(epoch)
        else:
            done, checkpoint = 0, None
        epoch = self.sampler.start_epoch()
        return self._epoch(epoch, done, checkpoint)

    def _epoch(self, epoch: int, done: int, checkpoint: Optional[bytes]):
        from nvidia.dali.plugin.pytorch import DALIGenericIterator

        order = self._epoch_order(epoch)
        batches = self._num_batches(len(order))
        if done >= batches:
            return
        seed = derived_seed(self.sampler.seed, epoch, self.sampler.shard.rank)
        pipeline = self._build_pipeline(order, seed, checkpoint)
        dali_iter = DALIGenericIterator([pipeline], ["images", "labels"], auto_reset=False,
                                        prepare_first_batch=False)
        self._live = [epoch, dali_iter, done]
        for k in range(done, batches):
            try:
                out = next(dali_iter)[0]
            except (RuntimeError, StopIteration) as failure:
                self._live = None
                raise self._explain(failure, order[k * self.batch_size:]) from failure
            # The last batch of a reader may be padded with the next epoch's samples: trim.
            n = min(self.batch_size, len(order) - k * self.batch_size)
            self._live[2] = k + 1
            yield out["images"][:n], out["labels"][:n].view(-1).long()
        self._live = None

    def _explain(self, failure: Exception, remaining: np.ndarray) -> Exception:
        explained = self._explain_failure(failure, remaining) if self._explain_failure else None
        return explained or RuntimeError(f"DALI pipeline failed: {failure}")

    # -- mid-epoch resume, with torchdata's StatefulDataLoader convention ------------------

    def state_dict(self) -> dict:
        """A small picklable state; `load_state_dict` then the next loop continues from here."""
        if self._live is not None:
            epoch, dali_iter, done = self._live
            checkpoint = dali_iter.checkpoints()[0]
        else:
            epoch, done, checkpoint = self.sampler._next_epoch, 0, None
        return {"version": STATE_VERSION, "dataset": self.dataset.fingerprint,
                "batch_size": self.batch_size, "drop_last": self.drop_last,
                "rank": self.sampler.shard.rank, "world_size": self.sampler.shard.world_size,
                "seed": self.sampler.seed, "epoch": epoch, "batches_done": done, "dali": checkpoint}

    def load_state_dict(self, state: dict) -> None:
        mine = self.state_dict()
        for key in ("version", "dataset", "batch_size", "drop_last", "rank", "world_size"):
            if state.get(key) != mine[key]:
                raise ValueError(f"cannot load this state: its {key} is {state.get(key)!r} but this "
                                 f"loader's is {mine[key]!r}; build the loader as the saved one was built")
        self.sampler.seed = state["seed"]
        self._resume = state
