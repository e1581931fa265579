"""One DALI pipeline for a loader's whole life, and what keeps it safe across fork().

The route. A loader defines its DALI graph once (tracing a graph with conditionals takes
seconds) and feeds it each epoch's order through external_source: the loader sets an
`EpochOrder`, the sources' callbacks read batch `info.iteration` of it. Randomness stays a
pure function of (seed, epoch, rank): at the start of each epoch the live pipeline's state
(every random operator's generators, the callbacks' iteration) is restored from the state a
pipeline freshly built with derived_seed(seed, epoch, rank) would have. That state comes
from a "seed donor": the graph serialized once, deserialized with the epoch's seed, built
(milliseconds: no Python tracing) and never run. A loaded state_dict's DALI checkpoint is
restored the same way, so a resumed epoch is bit-identical to the uninterrupted one.
A graph DALI cannot serialize (Python steps) falls back to a fresh pipeline per epoch.

Fork safety. A forked child inherits the parent's pipelines as memory, not their threads;
DALI's Pipeline.__del__ (run by the child's garbage collector on a pipeline left in a
reference cycle) or its atexit hook would then wait forever for those threads. The
after-fork hook below takes every inherited pipeline out of the garbage collector's and
atexit's reach in the child; a loader used in the child builds its own pipeline.
"""
import os
import threading
import weakref
from typing import Callable, List, Optional

import numpy as np

from ..dali_compat import can_restore, checkpoint_with, epoch_iterator, forget_inherited_pipelines, restore, shutdown
from ._dali import release_freed_memory

# build(seed, checkpoint) -> a built DALI pipeline over the loader's graph, at `checkpoint` if given.
Builder = Callable[[int, Optional[bytes]], object]


class EpochOrder:
    """The samples the pipeline reads this epoch, in order. The loader sets `indices` (and,
    for batches of several sizes, `bounds`: batch k is indices[bounds[k]:bounds[k + 1]])
    before each epoch; an external_source callback takes batch `info.iteration` of them."""

    def __init__(self, indices=(), seed: Optional[int] = None, bounds=None):
        self.indices = np.asarray(indices, dtype=np.int64)
        self.seed = seed   # the epoch's derived seed, for draws a source makes itself (arrays' crops and flips)
        self.bounds = bounds

    @classmethod
    def of(cls, order) -> "EpochOrder":
        """`order` itself if an EpochOrder, else a fixed one over those indices (a graph built
        for one pass, as the tests and bench.stages build them)."""
        return order if isinstance(order, cls) else cls(order)

    def batch(self, iteration: int, batch_size: int) -> np.ndarray:
        if self.bounds is not None and iteration + 1 < len(self.bounds):
            return self.indices[self.bounds[iteration]:self.bounds[iteration + 1]]
        start = iteration * batch_size
        if self.bounds is None and start < len(self.indices):
            return self.indices[start:start + batch_size]
        # A run past the end (DALI prefetches ahead of a short epoch): any full batch, dropped
        # unseen. Never StopIteration: that would end the pipeline's life, not the epoch.
        return self.indices[np.arange(batch_size) % max(len(self.indices), 1)]


class LivePipeline:
    """A loader's pipeline: built on first use, positioned at each epoch's start state, its
    runs still in flight from a loop left early drained before the next, closed by `close()`."""

    def __init__(self, build: Builder):
        self._build = build
        self.pipeline = None
        self._graph: Optional[bytes] = None   # the serialized graph, for seed donors
        self._reusable = True
        self._iterator = None                  # the epoch iterator last handed out
        self._fresh_iterator_state = ""        # what a new iterator saves in a checkpoint
        self._prepared: dict = {}              # seed -> (thread, result) of a donor made ahead
        _LIVE.add(self)

    def start_epoch(self, seed: int, checkpoint: Optional[bytes], runs: int):
        """An iterator that runs the pipeline `runs` times from `checkpoint`, or from the
        start state of a pipeline seeded with `seed`."""
        self._drain()
        if self.pipeline is not None and not self._reusable:
            self.close()
        if self.pipeline is None:
            self.pipeline = self._build(seed, checkpoint)
            self._learn_graph()
        else:
            restore(self.pipeline, checkpoint if checkpoint is not None else self._start_state(seed))
        self._iterator = epoch_iterator(self.pipeline, runs)
        if not self._fresh_iterator_state:
            self._fresh_iterator_state = self._iterator.fresh_state()
        return self._iterator

    def prepare(self, seed: int) -> None:
        """Makes the start state for `seed` in the background (the next epoch's, ahead)."""
        if not self._reusable or seed in self._prepared:
            return
        result: dict = {}
        thread = threading.Thread(target=self._donate, args=(seed, result), daemon=True,
                                  name="dali_loaders-seed-donor")
        thread.start()
        self._prepared = {seed: (thread, result)}   # one ahead at most

    def _donate(self, seed: int, result: dict) -> None:
        try:
            result["state"] = self._donor_state(seed)
        except Exception as failure:  # reported where the state is used
            result["failure"] = failure

    def _start_state(self, seed: int) -> bytes:
        thread, result = self._prepared.pop(seed, (None, None))
        if thread is None:
            return self._donor_state(seed)
        thread.join()
        if "failure" in result:
            raise result["failure"]
        return result["state"]

    def _donor_state(self, seed: int) -> bytes:
        from nvidia.dali import Pipeline

        donor = Pipeline.deserialize(serialized_pipeline=self._graph, batch_size=self._batch_size,
                                     num_threads=1, device_id=self._device_id, seed=seed,
                                     enable_checkpointing=True)
        try:
            return checkpoint_with(donor, self._fresh_iterator_state)
        finally:
            shutdown(donor)

    def _learn_graph(self) -> None:
        """Once, after the first build: the serialized graph for seed donors, or not reusable."""
        if self._graph is not None or not self._reusable:
            return
        self._batch_size, self._device_id = self.pipeline.max_batch_size, self.pipeline.device_id
        self._reusable = can_restore(self.pipeline)
        if self._reusable:
            try:
                self._graph = self.pipeline.serialize()
            except Exception:  # DALI serializes no Python operator: a pipeline per epoch then
                self._reusable = False

    def ended_epoch(self) -> None:
        """Called when an epoch's last batch has been served: its runs in flight go now."""
        self._drain()

    def _drain(self) -> None:
        iterator, self._iterator = self._iterator, None
        if iterator is not None and self.pipeline is not None:
            iterator.drain()

    def failed(self) -> None:
        """A run raised: the pipeline's state is unknown, so the next epoch builds a new one."""
        self._iterator = None
        self.close()

    def abandon(self, waiter: threading.Thread) -> None:
        """A run that does not return (its reads wait on a store that never answers): the
        pipeline is detached now and shut down on a thread of its own once `waiter`, the
        thread waiting on that run, has its answer or error; the next epoch builds a new one."""
        self._iterator, self._prepared = None, {}
        pipeline, self.pipeline = self.pipeline, None
        if pipeline is not None:
            threading.Thread(target=_shut_down_after, args=(pipeline, waiter), daemon=True,
                             name="dali_loaders-abandoned-pipeline").start()

    def close(self) -> None:
        """Shuts the pipeline and its threads down now (a later epoch builds a new one)."""
        self._iterator = None
        for thread, _ in self._prepared.values():
            thread.join()
        self._prepared = {}
        pipeline, self.pipeline = self.pipeline, None
        if pipeline is not None:
            shutdown(pipeline)
            del pipeline
            release_freed_memory()

    def disarm(self) -> None:
        """In a forked child: forget the inherited pipeline without shutting it down."""
        self._iterator, self._prepared = None, {}
        if self.pipeline is not None:
            _INHERITED.append(self.pipeline)
            self.pipeline = None


def _shut_down_after(pipeline, waiter: threading.Thread) -> None:
    waiter.join()
    shutdown(pipeline)


# -- fork safety ----------------------------------------------------------------------------

_LIVE: "weakref.WeakSet[LivePipeline]" = weakref.WeakSet()
_INHERITED: List[object] = []   # in a forked child: pipelines that must never be finalized


def _disarm_inherited_pipelines() -> None:
    """after_in_child: every DALI pipeline of the parent (ours and any other) is kept alive
    forever and unknown to DALI's atexit shutdown, so nothing in the child waits on the
    parent's threads."""
    for live in list(_LIVE):
        live.disarm()
    forget_inherited_pipelines(_INHERITED)


os.register_at_fork(after_in_child=_disarm_inherited_pipelines)
