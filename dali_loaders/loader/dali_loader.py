"""The DataLoader look-alike every DALI loader returns.

One DALI pipeline serves every epoch of a loader (see pipeline.py): each loop hands it the
epoch's order and puts it in the state a pipeline seeded with (seed, epoch, rank) starts
in, so an epoch is a pure function of (seed, epoch, rank): set_epoch and a restored
state_dict reproduce it exactly. A `break` leaves runs in flight; the next loop drains
them first. `close()` shuts the pipeline down now; a forked child never touches it.
"""
import math
from typing import Callable, Optional, Tuple

import numpy as np
import torch
from torch.utils.data import BatchSampler

from ..seeds import derived_seed
from ..distributed import EpochSampler
from .pipeline import EpochOrder, LivePipeline
from .skips import skipped_files, warn_skipped

STATE_VERSION = 2  # 2: the DALI checkpoint is of the one long-lived graph (external_source fed)
STATE_KEYS = ("version", "dataset", "batch_size", "drop_last", "rank", "world_size", "seed",
              "epoch", "batches_done", "dali")

# build_pipeline(seed, checkpoint) -> a built DALI pipeline whose outputs are (images, labels)
# for the samples of `feed` (the EpochOrder handed to DaliLoader too), batch after batch.
PipelineBuilder = Callable[[int, Optional[bytes]], object]
# batch_transform(images, labels, epoch, batch_index) -> (images, labels), on each whole batch.
BatchHook = Callable[[torch.Tensor, torch.Tensor, int, int], Tuple[torch.Tensor, torch.Tensor]]


class DaliLoader:
    """`for images, labels in loader`, `len(loader)`, `set_epoch`, `state_dict` over DALI.

    `loader.dataset` is the dataset (its len is the sample count over all ranks);
    `loader.sampler` says which samples this rank reads in each epoch, and
    `loader.batch_sampler` which samples each batch holds. With even_batches=True every rank
    steps as many times; `loader.padded` then says which samples of the batch just yielded
    are padding (repeats of this rank's first samples): drop them from metrics. The other DataLoader attributes
    that frameworks read (Lightning, Accelerate) say what is true of DALI: no worker
    processes, no collate step, nothing to pin.
    """

    # DataLoader's attributes, with the values of a loader whose batches come whole from DALI.
    num_workers = 0
    collate_fn = None
    pin_memory = False
    pin_memory_device = ""
    timeout = 0
    worker_init_fn = None
    multiprocessing_context = None
    generator = None
    prefetch_factor = None
    persistent_workers = False
    in_order = True

    def __init__(self, dataset, build_pipeline: PipelineBuilder, feed: EpochOrder, *, batch_size: int,
                 sampler: EpochSampler, drop_last: bool,
                 explain_failure: Optional[Callable[[Exception, np.ndarray], Exception]] = None,
                 finish: Callable[[torch.Tensor], torch.Tensor] = lambda images: images,
                 batch_transform: Optional[BatchHook] = None,
                 host_labels: Optional[Callable[[np.ndarray], np.ndarray]] = None):
        self.dataset = dataset
        self._finish = finish  # per batch: the view or cast DALI cannot give (see loaders.batch_finisher)
        self._batch_transform = batch_transform  # per batch, last: MixUp/CutMix (see mixing.BatchMixer)
        self._host_labels = host_labels  # the labels of sample indices, when the graph has none (build.graph)
        self.batch_size = batch_size
        self.sampler = sampler
        self.drop_last = drop_last
        self.batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self._feed = feed
        self._pipeline = LivePipeline(build_pipeline)
        self._explain_failure = explain_failure
        self.padded = torch.zeros(0, dtype=torch.bool)  # which samples of the last batch are even_batches' padding
        self._live: Optional[_LiveEpoch] = None  # the epoch in progress, if any
        self._resume: Optional[dict] = None      # a loaded state, used by the next loop

    def __len__(self) -> int:
        return self._num_batches(len(self.sampler))

    def _num_batches(self, samples: int) -> int:
        rounding = math.floor if self.drop_last else math.ceil
        return rounding(samples / self.batch_size)

    def set_epoch(self, epoch: int) -> None:
        self.sampler.set_epoch(epoch)

    @property
    def skipped(self):
        """{path: why} of the files left out with on_error="skip" (iterating it gives the paths)."""
        return skipped_files(self.dataset)

    def _epoch_order(self, epoch: int) -> np.ndarray:
        order = self.sampler.indices(epoch)
        return order[:self._num_batches(len(order)) * self.batch_size]

    def __iter__(self):
        # A generator: the epoch starts at the first next(), not here. Frameworks call iter()
        # to check that a loader is iterable (Lightning) and set the epoch after iter() but
        # before the first batch; until then a state_dict() still names the epoch to come.
        return self._epoch()

    def _start_epoch(self) -> "_LiveEpoch":
        resume, self._resume = self._resume, None
        if resume:
            self.sampler.set_epoch(resume["epoch"])
            done, checkpoint = resume["batches_done"], resume["dali"]
        else:
            done, checkpoint = 0, None
        self._live = _LiveEpoch(self.sampler.start_epoch(), done, checkpoint)
        return self._live

    def _epoch(self):
        live = self._start_epoch()
        warn_skipped(self.dataset, live.epoch)
        order = self._epoch_order(live.epoch)
        batches = self._num_batches(len(order))
        unpadded = self.sampler.unpadded_len()   # as the order was made: once an epoch
        if live.done < batches:
            seed = derived_seed(self.sampler.seed, live.epoch, self.sampler.shard.rank)
            # A checkpoint restores the pipeline's position; without one (a state taken on
            # another rank) the pipeline starts at the first batch still to come.
            skipped = 0 if live.checkpoint is not None else live.done * self.batch_size
            self._feed.indices, self._feed.seed = order[skipped:], seed
            live.dali_iter = self._pipeline.start_epoch(seed, live.checkpoint, runs=batches - live.done)
        for k in range(live.done, batches):
            if k == live.start + 1:  # the first batch is out: make the next epoch's start state now
                self._pipeline.prepare(derived_seed(self.sampler.seed, live.epoch + 1, self.sampler.shard.rank))
            try:
                out = next(live.dali_iter)[0]
            except (RuntimeError, StopIteration) as failure:
                self._end(live)
                self._pipeline.failed()
                raise self._explain(failure, order[k * self.batch_size:]) from failure
            n = min(self.batch_size, len(order) - k * self.batch_size)
            live.done = k + 1
            images, labels = self._finish(out["images"][:n]), self._labels(out, order, k, n)
            self.padded = self.sampler.padding_mask(k * self.batch_size, n, unpadded)
            if self._batch_transform is not None:
                images, labels = self._batch_transform(images, labels, live.epoch, k)
            yield images, labels
        self._end(live)
        live.dali_iter = None
        self._pipeline.ended_epoch()

    def _labels(self, out: dict, order: np.ndarray, k: int, n: int) -> torch.Tensor:
        """Batch k's labels: the graph's, or the source's for the samples the order put there
        (the same samples the graph read, resumed or not), where the images are."""
        if "labels" in out:
            return out["labels"][:n].view(-1).long()
        start = k * self.batch_size
        labels = torch.from_numpy(self._host_labels(order[start:start + n])).long()
        device = out["images"].device
        return labels if device.type == "cpu" else labels.to(device)

    @property
    def pipeline(self):
        """The DALI pipeline every epoch runs (None before the first loop and after close())."""
        return self._pipeline.pipeline

    def close(self) -> None:
        """Shuts the DALI pipeline and its threads down now; a later loop builds a new one."""
        if self._live is not None:
            self._live.dali_iter = None
        self._pipeline.close()

    def _end(self, live: "_LiveEpoch") -> None:
        if self._live is live:  # a loop abandoned earlier must not end the current one
            self._live = None

    def _explain(self, failure: Exception, remaining: np.ndarray) -> Exception:
        explained = self._explain_failure(failure, remaining) if self._explain_failure else None
        return explained or RuntimeError(f"DALI pipeline failed: {failure}")

    # -- mid-epoch resume, with torchdata's StatefulDataLoader convention ------------------

    def state_dict(self) -> dict:
        """A small picklable state; `load_state_dict` then the next loop continues from here."""
        if self._resume is not None:  # loaded and not yet used: still the position to go on from
            return dict(self._resume)
        if self._live is not None and self._live.done < len(self):
            epoch, done, checkpoint = self._live.epoch, self._live.done, self._live.current_checkpoint()
        else:  # between epochs, or every batch served (Lightning stops there, not at StopIteration)
            epoch, done, checkpoint = self.sampler.next_epoch, 0, None
        return {"version": STATE_VERSION, "dataset": dataset_fingerprint(self.dataset),
                "batch_size": self.batch_size, "drop_last": self.drop_last,
                "rank": self.sampler.shard.rank, "world_size": self.sampler.shard.world_size,
                "seed": self.sampler.seed, "epoch": epoch, "batches_done": done, "dali": checkpoint}

    def load_state_dict(self, state: dict) -> None:
        """Makes the next loop yield the batches that were still to come when `state` was taken.

        A state taken on another rank of the same world size loads too: frameworks save rank
        0's state only (Lightning, Accelerate), and all ranks are at the same batch. That
        rank's DALI checkpoint does not apply here, so the rest of the epoch reads exactly the
        samples still to come, with fresh random augmentations.
        """
        if not isinstance(state, dict):
            raise TypeError(f"state must be the dict that loader.state_dict() returned, got "
                            f"{type(state).__name__}")
        missing = sorted(set(STATE_KEYS) - set(state))
        if missing:
            raise ValueError(f"cannot load this state: it lacks {missing}; pass what loader.state_dict() "
                             f"returned")
        self._resume = None
        mine = self.state_dict()
        for key in ("version", "dataset", "batch_size", "drop_last", "rank", "world_size"):
            if state[key] != mine[key] and not (key == "rank" and state["world_size"] == mine["world_size"]):
                raise ValueError(f"cannot load this state: its {key} is {state[key]!r} but this "
                                 f"loader's is {mine[key]!r}; build the loader as the saved one was built")
        self.sampler.seed = state["seed"]
        self._resume = dict(state)
        if state["rank"] != mine["rank"]:
            self._resume.update(rank=mine["rank"], dali=None)


class _LiveEpoch:
    """Where the epoch in progress stands: `done` batches served, from a pipeline that
    started at `checkpoint` (None: at the epoch's start)."""

    def __init__(self, epoch: int, done: int, checkpoint: Optional[bytes]):
        self.epoch, self.done, self.checkpoint = epoch, done, checkpoint
        self.start = done
        self.dali_iter = None

    def current_checkpoint(self) -> Optional[bytes]:
        if self.dali_iter is None or self.done == self.start:
            return self.checkpoint
        if self.checkpoint is None and self.start > 0:
            return None  # that pipeline began mid-epoch: its positions do not count from the epoch's start
        return self.dali_iter.checkpoints()[0]


def dataset_fingerprint(dataset) -> str:
    """What a state must match to be loaded: the dataset's own fingerprint, else its kind and size."""
    fingerprint = getattr(dataset, "fingerprint", None)
    return fingerprint if fingerprint is not None else f"{type(dataset).__name__}/{len(dataset)}"
