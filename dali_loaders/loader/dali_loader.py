"""DaliLoader: torch's DataLoader, with DALI making the batches.

`DaliLoader(dataset, batch_size, shuffle, sampler, ...)` takes DataLoader's arguments in
DataLoader's order, then this library's own. What it does with `dataset` (see resolve.py):
- one of this library's sources, or a torchvision dataset object it can read as one: the
  dataset's own transform is translated into one DALI graph (the DALI path); a transform
  that makes several views of each image (MoCo's TwoCropsTransform and kin) gives batches
  `([view_0, view_1, ...], labels)`, as DataLoader does;
- any other map-style Dataset, or a transform that cannot be translated: the dataset's own
  `__getitem__` runs in `num_workers` worker processes, batches collated by `collate_fn`
  (the Python path); a one-line note says why.

One DALI pipeline serves every epoch (see pipeline.py): each loop hands it the epoch's order
and puts its random generators at streams keyed by (seed, epoch, rank), so an epoch is
a pure function of (seed, epoch, rank): set_epoch and a restored state_dict reproduce it
exactly. A `break` leaves runs in flight; the next loop drains them first. `close()` shuts
the pipeline down now; a forked child never touches it.
"""
from typing import Optional

import numpy as np
import torch

from ..seeds import derived_seed
from ..sources.storage import BatchTimeout
from .build import assemble
from .deadline import batch_deadline, next_batch
from .orders import EpochPlan, OrderView
from .outputs import mixed
from .pipeline import EpochOrder
from .skips import skipped_files, warn_skipped
from .state import check_state, dataset_fingerprint, library_versions

STATE_VERSION = 3  # 3: the DALI and library versions, and a user's sampler's plan, are in the state


class DaliLoader:
    """`for images, labels in loader`, `len(loader)`, `set_epoch`, `state_dict`, as DataLoader.

    DataLoader's arguments keep their meaning: `num_workers` is the number of DALI threads
    (0 runs one, as DataLoader runs in the main process), or of worker processes on the
    Python path; `sampler` / `batch_sampler` / `shuffle` / `drop_last` choose the samples;
    `collate_fn` makes each batch from its samples (on the DALI path, from views of the batch
    DALI made: see collate.py); `pin_memory` pins CPU batches; `generator` seeds the loader when
    `seed` is not given (a seed drawn from it at the first pass, as RandomSampler draws; across
    processes the order's seed stays 0, as DistributedSampler's, which no generator changes);
    `prefetch_factor` is how many batches DALI prepares ahead.
    `worker_init_fn`, `timeout` and `multiprocessing_context` apply to worker processes: the
    Python path's. This library's own, after them:
      seed: the seed of the order and every augmentation (default: random; 0 across processes).
      transform / target_transform: the recipe, when the dataset has none of its own.
      batch_transform: MixUp, CutMix (torchvision's or timm's), or any callable
          (images, labels) -> (images, labels) on each whole batch.
      device: "gpu" (mixed decode), "cpu-decode" or "cpu"; default "gpu" where CUDA is.
      output: "tuple" or "dict" ([{"data", "label"}], as DALI's iterators).
      memory_format, even_batches, on_error, max_image_pixels, python_fallback,
      rank, world_size, local_rank, device_id, dali_cpu: see docs/usage.md.
    With even_batches=True every rank steps as many times; `loader.padded` then says which
    samples of the batch just yielded are padding (drop them from metrics).
    """

    def __init__(self, dataset, batch_size: Optional[int] = 1, shuffle: Optional[bool] = None, sampler=None,
                 batch_sampler=None, num_workers: int = 0, collate_fn=None, pin_memory: bool = False,
                 drop_last: bool = False, timeout: float = 0, worker_init_fn=None, multiprocessing_context=None,
                 generator=None, *, prefetch_factor: Optional[int] = None, persistent_workers: bool = False,
                 pin_memory_device: str = "", in_order: bool = True, seed: Optional[int] = None, transform=None,
                 target_transform=None, batch_transform=None, device: Optional[str] = None, device_id=None,
                 output: str = "tuple", memory_format=torch.contiguous_format, even_batches: bool = False,
                 on_error: str = "raise", max_image_pixels="pil", python_fallback: bool = False, rank=None,
                 world_size=None, local_rank=None, dali_cpu: Optional[bool] = None):
        parts = assemble(dataset, batch_size=batch_size, shuffle=shuffle, sampler=sampler,
                         batch_sampler=batch_sampler, num_workers=num_workers, collate_fn=collate_fn,
                         pin_memory=pin_memory, drop_last=drop_last, timeout=timeout,
                         worker_init_fn=worker_init_fn, multiprocessing_context=multiprocessing_context,
                         generator=generator, prefetch_factor=prefetch_factor,
                         persistent_workers=persistent_workers, seed=seed, transform=transform,
                         target_transform=target_transform, batch_transform=batch_transform, device=device,
                         device_id=device_id, output=output, memory_format=memory_format,
                         even_batches=even_batches, on_error=on_error, max_image_pixels=max_image_pixels,
                         python_fallback=python_fallback, rank=rank, world_size=world_size,
                         local_rank=local_rank, dali_cpu=dali_cpu)
        self._parts = parts
        self.dataset = parts.dataset
        self.route = parts.route               # "dali", or "python: <why>"
        self.batch_size = None if batch_sampler is not None else batch_size
        self.drop_last = drop_last
        self.sampler, self.batch_sampler = parts.sampler, parts.batch_sampler
        self._order = parts.order
        self.num_workers, self.collate_fn, self.pin_memory = num_workers, collate_fn, pin_memory
        self.pin_memory_device, self.timeout, self.worker_init_fn = pin_memory_device, timeout, worker_init_fn
        self.multiprocessing_context, self.generator = multiprocessing_context, generator
        self.prefetch_factor, self.persistent_workers, self.in_order = prefetch_factor, persistent_workers, in_order
        self.padded = torch.zeros(0, dtype=torch.bool)  # which samples of the last batch are even_batches' padding
        self._live: Optional[_LiveEpoch] = None  # the epoch in progress, if any
        self._resume: Optional[dict] = None      # a loaded state, used by the next loop
        self._plans: dict = {}                   # epoch -> EpochPlan of a user's sampler, made once
        self._library_plan: tuple = (None, None)  # (epoch key, EpochPlan) of the library's order, last made

    def __len__(self) -> int:
        return self._order.batches()

    def set_epoch(self, epoch: int) -> None:
        self._order.set_epoch(epoch)

    @property
    def order(self):
        """What the loader's random draws derive from, read-only: `seed`, `shard` (its `rank`
        and `world_size`) and `epoch` (the one in progress), whether the samples come from the
        library's own order or from `sampler=` / `batch_sampler=` (which then choose the samples
        alone). For steps added around the loader that draw as its own do."""
        return OrderView(self._order)

    @property
    def skipped(self):
        """{path: why} of the files left out with on_error="skip" (iterating it gives the paths)."""
        return skipped_files(self._parts.source if self._parts.source is not None else self.dataset)

    @property
    def classes(self):
        """The class names (a ClassLabel's, a torchvision dataset's `classes`), or None."""
        return getattr(self._parts.source if self._parts.source is not None else self.dataset, "classes", None)

    def _plan(self, epoch: int) -> EpochPlan:
        if not self._order.saves_plan:   # a pure function of (seed, epoch): the last one kept, as
            key = self._epoch_key(epoch)  # the next epoch's is made ahead for the pipeline (_following)
            if self._library_plan[0] != key:
                self._library_plan = (key, self._order.plan(epoch))
            return self._library_plan[1]
        if epoch not in self._plans:
            self._plans = {epoch: self._order.plan(epoch)}
        return self._plans[epoch]

    def __iter__(self):
        # A generator: the epoch starts at the first next(), not here. Frameworks call iter()
        # to check that a loader is iterable (Lightning) and set the epoch after iter() but
        # before the first batch; until then a state_dict() still names the epoch to come.
        epochs = self._dali_epoch() if self._parts.pipeline is not None else self._python_epoch()
        shape = self._parts.shape
        return epochs if shape is None else (shape(*batch) for batch in epochs)

    def _start_epoch(self) -> "_LiveEpoch":
        if self._parts.watch is not None:
            self._parts.watch.check()
        resume, self._resume = self._resume, None
        if resume:
            self._order.set_epoch(resume["epoch"])
            if resume.get("plan") is not None:
                self._plans = {resume["epoch"]: EpochPlan.from_state(resume["plan"])}
            done, checkpoint = resume["batches_done"], resume["dali"]
        else:
            done, checkpoint = 0, None
        self._live = _LiveEpoch(self._order.start_epoch(), done, checkpoint)
        warn_skipped(self._parts.source if self._parts.source is not None else self.dataset, self._live.epoch)
        return self._live

    def _check_current(self, live: "_LiveEpoch") -> None:
        if self._live is not live:
            raise RuntimeError("this loop over the DaliLoader was overtaken by a newer loop over it: one loader "
                               "serves one loop at a time (its one pipeline is where the loop stands; DataLoader with "
                               "persistent workers restarts its one iterator, without saying so); finish or "
                               "break the first loop before starting another, or build a second loader")

    def _dali_epoch(self):
        live = self._start_epoch()
        plan = self._plan(live.epoch)
        unpadded = self._order.unpadded_len()   # as the order was made: once an epoch
        pipeline, seed_of = self._parts.pipeline, self._epoch_seed
        deadline = batch_deadline(self._parts.source)   # None for local files: no waiting thread
        if live.done < plan.batches:
            # A checkpoint restores the pipeline's position; without one (a state taken on
            # another rank) the pipeline starts at the first batch still to come.
            fed = plan if live.checkpoint is not None or live.done == 0 else plan.after(live.done)
            first = live.checkpoint is None and live.done == 0
            live.dali_iter = pipeline.start_epoch(EpochOrder(fed.indices, seed_of(live.epoch), fed.bounds),
                                                  live.checkpoint, self._epoch_key(live.epoch) if first else None,
                                                  self._following)
        for k in range(live.done, plan.batches):
            self._check_current(live)
            indices = plan.batch(k)
            try:
                out = next_batch(live.dali_iter, deadline, self._parts.source, indices)[0]
            except BatchTimeout as stalled:   # a store that never answers: named, not waited on
                self._end(live)
                pipeline.abandon(stalled.waiter)
                raise
            except (RuntimeError, StopIteration) as failure:
                self._end(live)
                pipeline.failed()
                raise self._parts.explain(failure, plan.indices[plan.bounds[k]:]) from None
            live.done = k + 1
            images = self._parts.finish(out, len(indices))
            labels = self._labels(out, indices)
            self.padded = self._order.padding_mask(int(plan.bounds[k]), len(indices), unpadded)
            extra = self._extra_items(indices, labels)
            batch = (images, labels, *extra) if self._parts.collate is None else \
                self._parts.collate(images, labels, live.epoch, k, extra)
            if self._parts.batch_transform is not None:
                batch = mixed(self._parts.batch_transform, batch, live.epoch, k)
            yield batch
        self._end(live)
        live.dali_iter = None
        pipeline.ended_epoch()

    def _python_epoch(self):
        live = self._start_epoch()
        plan = self._plan(live.epoch)
        unpadded = self._order.unpadded_len()
        batches = [plan.batch(k) for k in range(live.done, plan.batches)]
        produced = self._parts.python.epoch(batches, self._epoch_seed(live.epoch))
        for k, batch in zip(range(live.done, plan.batches), produced):
            self._check_current(live)
            live.done = k + 1
            self.padded = self._order.padding_mask(int(plan.bounds[k]), len(batches[k - live.start]), unpadded)
            batch = self._parts.place(batch)
            if self._parts.batch_transform is not None:
                batch = mixed(self._parts.batch_transform, batch, live.epoch, k)
            yield batch
        self._end(live)

    def _epoch_key(self, epoch: int) -> tuple:
        return epoch, self._order.seed

    def _following(self):
        """(key, EpochOrder) of the epoch the next loop starts unless told otherwise (set_epoch,
        a loaded state), for the pipeline to run ahead into; None where its order is not known
        before it starts (a user's sampler draws it then) or a source draws from the epoch's
        seed itself."""
        if self._order.saves_plan or getattr(self._parts.source, "decoded", False):
            return None
        epoch = self._order.next_epoch
        plan = self._plan(epoch)
        return self._epoch_key(epoch), EpochOrder(plan.indices, self._epoch_seed(epoch), plan.bounds)

    def _epoch_seed(self, epoch: int) -> int:
        return derived_seed(self._order.seed, epoch, self._order.rank)

    def _labels(self, out: dict, indices: np.ndarray) -> torch.Tensor:
        """The batch's labels: the graph's, or the source's for the samples the plan put there
        (the same samples the graph read, resumed or not), where the images are."""
        if "labels" in out:
            return out["labels"][:len(indices)].view(-1).long()
        labels = torch.from_numpy(self._parts.host_labels(indices)).long()
        device = out[self._parts.finish.names[0]].device
        return labels if device.type == "cpu" else labels.to(device)

    def _extra_items(self, indices: np.ndarray, labels: torch.Tensor) -> tuple:
        """What the dataset's items hold after the label: the samples' indices in the dataset,
        where its __getitem__ adds them (sources/indexed.py), as default_collate stacks them."""
        if self._parts.dataset_index is None:
            return ()
        return (torch.from_numpy(self._parts.dataset_index(indices)).to(labels.device),)

    @property
    def pipeline(self):
        """The DALI pipeline every epoch runs (None on the Python path, before the first loop
        and after close())."""
        return None if self._parts.pipeline is None else self._parts.pipeline.pipeline

    def close(self) -> None:
        """Shuts the DALI pipeline (or the worker processes) down now; a later loop starts anew."""
        if self._live is not None:
            self._live.dali_iter = None
        if self._parts.pipeline is not None:
            self._parts.pipeline.close()
        if self._parts.python is not None:
            self._parts.python.close()

    def _end(self, live: "_LiveEpoch") -> None:
        if self._live is live:  # a loop abandoned earlier must not end the current one
            self._live = None

    # -- DALIGenericIterator's manners (output="dict" code written for DALI's iterators) ----

    def reset(self) -> None:
        """A no-op: each loop over the loader is a fresh epoch already (DALI's iterators need
        reset() between epochs; code that calls it keeps working)."""

    @property
    def size(self) -> int:
        """The samples this process reads per epoch, as DALIGenericIterator's `size`."""
        return len(self._plan(self._order.next_epoch).indices) if self._order.saves_plan else len(self.sampler)

    @property
    def _size(self) -> int:   # the original DataLoaders_DALI read this private name
        return self.size

    # -- mid-epoch resume, with torchdata's StatefulDataLoader convention ------------------

    def state_dict(self) -> dict:
        """A small picklable state; `load_state_dict` then the next loop continues from here."""
        if self._resume is not None:  # loaded and not yet used: still the position to go on from
            return dict(self._resume)
        if self._live is not None and self._live.done < len(self):
            epoch, done, checkpoint = self._live.epoch, self._live.done, self._live.current_checkpoint()
        else:  # between epochs, or every batch served (Lightning stops there, not at StopIteration)
            epoch, done, checkpoint = self._order.next_epoch, 0, None
        plan = self._plans.get(epoch) if self._order.saves_plan and done else None
        return {"version": STATE_VERSION, "versions": library_versions(self._parts.pipeline is not None),
                "dataset": dataset_fingerprint(self.dataset if self._parts.source is None else self._parts.source),
                "batch_size": self.batch_size, "drop_last": self.drop_last, "rank": self._order.rank,
                "world_size": self._order.world_size, "seed": self._order.seed, "epoch": epoch,
                "batches_done": done, "dali": checkpoint, "plan": None if plan is None else plan.state()}

    def load_state_dict(self, state: dict) -> None:
        """Makes the next loop yield the batches that were still to come when `state` was taken.

        A state taken on another rank of the same world size loads too: frameworks save rank
        0's state only (Lightning, Accelerate), and all ranks are at the same batch. That
        rank's DALI checkpoint does not apply here, so the rest of the epoch reads exactly the
        samples still to come, with fresh random augmentations.
        """
        self._resume = None
        mine = self.state_dict()
        check_state(state, mine)
        self._order.seed = state["seed"]
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
        if (self.checkpoint is None and self.start > 0) or self.dali_iter.carried:
            # that pipeline began mid-epoch, or carried on from the last epoch: its positions do
            # not count from the epoch's start (a graph that carries on has no random state, so
            # the rest of the epoch is the same read afresh)
            return None
        return self.dali_iter.checkpoints()[0]
