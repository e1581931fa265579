"""One DALI pipeline for a loader's whole life, and what keeps it safe across fork().

The route. A loader defines its DALI graph once (tracing a graph with conditionals takes
seconds, building a GPU pipeline up to two) and feeds it each epoch's order through
external_source: the loader sets an `EpochOrder`, the sources' callbacks read batch
`info.iteration` of it. Randomness stays a pure function of (seed, epoch, rank): at the
start of each epoch the live pipeline is restored to its own state before its first run
(taken once, after the build), with every random operator's generator moved to a stream
keyed by derived_seed(seed, epoch, rank) and its place in the graph (dali_compat.reseeded:
the checkpoint's text, rewritten; no pipeline built). A loaded state_dict's DALI checkpoint
is restored the same way, so a resumed epoch is bit-identical to the uninterrupted one.
Where the state cannot be rewritten (an operator with a state of another kind, a DALI
release not checked) a fresh pipeline is built per epoch instead: the same batches, slower.

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

from ..dali_compat import (
    can_restore,
    checkpoint_operators,
    checkpoint_with,
    epoch_iterator,
    forget_inherited_pipelines,
    reseeded,
    restore,
    shutdown,
)
from ._dali import release_freed_memory

# build(seed, checkpoint) -> a built DALI pipeline over the loader's graph, at `checkpoint` if given.
Builder = Callable[[int, Optional[bytes]], object]

# Whether graphs without random state run ahead into the next epoch (the GPU probe turns it off
# to measure what it saves).
RUN_AHEAD = True


class EpochOrder:
    """The samples the pipeline reads this epoch, in order. The loader sets `indices` (and,
    for batches of several sizes, `bounds`: batch k is indices[bounds[k]:bounds[k + 1]])
    before each epoch; an external_source callback takes batch `info.iteration` of them.

    Runs carried on from an earlier epoch (LivePipeline: a graph without random state) keep
    counting the sources' iterations: this epoch's batch k is then read at `base` + k, and
    the runs past its end read the epoch that follows (`following`, an EpochOrder of its own).
    Otherwise the pipeline starts the next epoch afresh, and `upcoming()` (where the loader
    knows it) gives the order that epoch is expected to have, so that a source whose reads
    take long may start the first ones early (read_ahead)."""

    def __init__(self, indices=(), seed: Optional[int] = None, bounds=None):
        self.indices = np.asarray(indices, dtype=np.int64)
        self.seed = seed   # the epoch's derived seed, for draws a source makes itself (arrays' crops and flips)
        self.bounds = bounds
        self.base = 0
        self.following: Optional["EpochOrder"] = None
        self.upcoming: Optional[Callable[[], Optional["EpochOrder"]]] = None
        self._expected: Optional[tuple] = None   # (upcoming's answer,) once asked

    @classmethod
    def of(cls, order) -> "EpochOrder":
        """`order` itself if an EpochOrder, else a fixed one over those indices (a graph built
        for one pass, as the tests and bench.stages build them)."""
        return order if isinstance(order, cls) else cls(order)

    def set(self, epoch: "EpochOrder") -> None:
        """This epoch is `epoch`, its batch 0 read at the sources' iteration 0."""
        self.indices, self.seed, self.bounds = epoch.indices, epoch.seed, epoch.bounds
        self.base, self.following = 0, None
        self.upcoming, self._expected = None, None

    def carry_on(self) -> None:
        """The epoch that follows becomes this one, its batch 0 read at the iteration after
        this one's last."""
        following = self.following
        self.base += len(self.bounds) - 1
        self.indices, self.seed, self.bounds = following.indices, following.seed, following.bounds
        self.following = None
        self.upcoming, self._expected = None, None

    def holds(self, iteration: int, batch_size: int) -> bool:
        """Whether the run at the sources' `iteration` reads a batch of this epoch or of the one
        that follows (not a run past the end, whose batch is dropped unseen)."""
        iteration -= self.base
        if self.bounds is None:
            return 0 <= iteration and iteration * batch_size < len(self.indices)
        runs = len(self.bounds) - 1
        following = self.following
        return 0 <= iteration < runs or (following is not None and following.holds(iteration - runs, batch_size))

    def batch(self, iteration: int, batch_size: int) -> np.ndarray:
        iteration -= self.base
        if self.bounds is not None and iteration + 1 < len(self.bounds):
            return self.indices[self.bounds[iteration]:self.bounds[iteration + 1]]
        if self.following is not None and self.bounds is not None:
            return self.following.batch(iteration - (len(self.bounds) - 1), batch_size)
        start = iteration * batch_size
        if self.bounds is None and start < len(self.indices):
            return self.indices[start:start + batch_size]
        # A run past the end (DALI prefetches ahead of a short epoch): any full batch, dropped
        # unseen. Never StopIteration: that would end the pipeline's life, not the epoch.
        return self.indices[np.arange(batch_size) % max(len(self.indices), 1)]

    def read_ahead(self, iteration: int, batch_size: int) -> Optional[np.ndarray]:
        """The samples a read started now for the run at `iteration` should fetch: that run's
        batch if it is this epoch's (or the following's); past their end, the batch as many
        runs into the epoch expected next (`upcoming`), which starts afresh; None where
        neither is known. A guess about the next epoch: whoever reads ahead keys the reads by
        the samples, not by the iteration."""
        if self.holds(iteration, batch_size):
            return self.batch(iteration, batch_size)
        if self.upcoming is None or self.bounds is None or self.following is not None:
            return None
        if self._expected is None:
            self._expected = (self.upcoming(),)
        expected = self._expected[0]
        past = iteration - self.base - (len(self.bounds) - 1)
        if expected is None or expected.bounds is None or not 0 <= past < len(expected.bounds) - 1:
            return None
        return expected.batch(past, batch_size)


class LivePipeline:
    """A loader's pipeline: built on first use, put in each epoch's start state, its runs
    still in flight from a loop left early drained before the next, closed by `close()`.

    A graph without random state runs ahead into the epoch the loader says follows: its runs
    past the end of an epoch read that epoch's first batches, and when it does start (the
    same epoch, from its first batch) they are its first batches, the pipeline never idle in
    between. Any other start drops them, as a loop left early does."""

    def __init__(self, build: Builder, feed: EpochOrder, outputs: Optional[List[str]] = None):
        self._build = build
        self._outputs = outputs                # the names of the graph's outputs (build.output_names)
        self._feed = feed                      # the order the graph's sources read
        self.pipeline = None
        self._start: Optional[bytes] = None   # its checkpoint before any run (None: a pipeline per epoch)
        self.stateless = False                 # no random state: every epoch starts in the same state
        self._iterator = None                  # the epoch iterator last handed out
        self._ahead_key = None                 # the epoch its runs past the end read, if any

    def start_epoch(self, epoch: EpochOrder, checkpoint: Optional[bytes], key=None,
                    following: Optional[Callable[[], Optional[tuple]]] = None):
        """An iterator over `epoch`'s batches (all of epoch.bounds') from `checkpoint`, or from
        the epoch's start state: its random generators at the streams `epoch.seed` keys.
        `key` names the epoch when it starts at its first batch; `following()` gives the key
        and EpochOrder of the epoch expected next, which a graph without random state runs
        ahead into."""
        carried = self._carried(key, epoch) if checkpoint is None else 0
        if carried:
            self._feed.carry_on()
        else:
            self._drain()
            self._feed.set(epoch)
            if self.pipeline is not None and self._start is None:
                self.close()   # no state to go back to: a pipeline per epoch
            if self.pipeline is None:
                self._first_build(epoch.seed, checkpoint)
            elif checkpoint is not None:
                check_same_graph(checkpoint, self._start)
                restore(self.pipeline, checkpoint)
            else:
                restore(self.pipeline, reseeded(self._start, epoch.seed))
        ahead, self._ahead_key = 0, None
        expected = following() if following is not None and self.stateless and RUN_AHEAD else None
        if expected is not None:
            self._ahead_key, self._feed.following = expected
            ahead = len(self._feed.following.bounds) - 1
        elif following is not None:   # asked only by a source that reads ahead, near the epoch's end
            self._feed.upcoming = lambda: (following() or (None, None))[1]
        self._iterator = epoch_iterator(self.pipeline, len(self._feed.bounds) - 1, ahead, carried, self._outputs)
        return self._iterator

    def _carried(self, key, epoch: EpochOrder) -> int:
        """The runs in flight that are `epoch`'s first batches (0: none): the epoch the pipeline
        ran ahead into, its order the very arrays it read (the loader keeps the plan it made)."""
        following = self._feed.following
        if key is None or key != self._ahead_key or self._iterator is None or self.pipeline is None \
                or following.indices is not epoch.indices or following.bounds is not epoch.bounds:
            return 0
        return self._iterator.handover()

    def _first_build(self, seed: int, checkpoint: Optional[bytes]) -> None:
        """Builds the pipeline and learns its start state; restores the epoch's, or `checkpoint`."""
        self.pipeline = self._build(seed, None)
        self._start, self.stateless = None, False
        if not can_restore(self.pipeline):
            if checkpoint is not None:   # DALI's public way: a pipeline built at the checkpoint
                self.close()
                self.pipeline = self._build(seed, checkpoint)
            return
        fresh = epoch_iterator(self.pipeline, 0, outputs=self._outputs).fresh_state()   # what an iterator before its first batch saves
        start = checkpoint_with(self.pipeline, fresh)
        if checkpoint is not None:
            check_same_graph(checkpoint, start)
        state = reseeded(start, seed)
        if state is None:   # an operator whose state cannot be rewritten: a pipeline per epoch
            if checkpoint is not None:
                restore(self.pipeline, checkpoint)
            return
        self._start = start
        self.stateless = state == reseeded(start, seed + 1)
        restore(self.pipeline, checkpoint if checkpoint is not None else state)

    def ended_epoch(self) -> None:
        """Called when an epoch's last batch has been served: its runs in flight go now,
        unless they are the next epoch's."""
        if self._ahead_key is None:
            self._drain()

    def _drain(self) -> None:
        iterator, self._iterator = self._iterator, None
        self._ahead_key = None
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
        self._iterator = None
        pipeline, self.pipeline = self.pipeline, None
        if pipeline is not None:
            threading.Thread(target=_shut_down_after, args=(pipeline, waiter), daemon=True,
                             name="dali_loaders-abandoned-pipeline").start()

    def close(self) -> None:
        """Shuts the pipeline and its threads down now (a later epoch builds a new one)."""
        self._iterator, self._ahead_key = None, None
        pipeline, self.pipeline = self.pipeline, None
        if pipeline is not None:
            shutdown(pipeline)
            del pipeline
            release_freed_memory()

    def disarm(self) -> None:
        """In a forked child: forget the inherited pipeline without shutting it down."""
        self._iterator = None
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


def check_same_graph(saved: bytes, own: bytes) -> None:
    """A ValueError, said plainly, where a state's DALI checkpoint is of another graph than this
    loader's (DALI's own error names an internal operator)."""
    theirs, mine = checkpoint_operators(saved), checkpoint_operators(own)
    if theirs is not None and mine is not None and sorted(theirs) != sorted(mine):   # DALI matches by name
        raise ValueError(f"cannot resume from this state: its DALI checkpoint is of another graph than this "
                         f"loader's ({len(theirs)} operators saved, {len(mine)} here, not the same ones): another "
                         f"transform or recipe, or another release of dali_loaders, built it; build the loader as "
                         f"the saved one was built, or drop the state to start the epoch again")
