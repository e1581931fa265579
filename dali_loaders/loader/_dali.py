"""What the loaders need of DALI itself: whether it is there, a built pipeline, the GPU to
use, and an epoch iterator that runs a pipeline exactly as many times as the epoch has batches."""
import ctypes
from typing import Callable, Optional

import torch


def release_freed_memory() -> None:
    """Hands the memory a finished pipeline freed back to the OS. Its threads allocate in
    their own glibc malloc arenas, which keep freed memory: without this, a pipeline per
    epoch grows the RSS by tens of MB every epoch. A no-op where there is no glibc."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


def build_dali_pipeline(graph: Callable, *graph_args, batch_size: int, num_threads: int,
                        device_id: Optional[int], seed: int, checkpoint: Optional[bytes],
                        conditionals: bool = False, prefetch_queue_depth: int = 2):
    """A built DALI pipeline from a graph function (CPU-only when device_id is None).
    `conditionals`: the graph uses `if` on DataNodes (RandomApply, ColorJitter's order, ...)."""
    from nvidia.dali import pipeline_def

    pipe = pipeline_def(graph, enable_checkpointing=True, enable_conditionals=conditionals)(
        *graph_args, batch_size=batch_size, num_threads=num_threads, device_id=device_id, seed=seed,
        checkpoint=checkpoint, prefetch_queue_depth=prefetch_queue_depth)
    lean_api_checks(pipe)
    pipe.build()
    return pipe


class _ApiScope:
    """What DALI's Pipeline._check_api_type_scope returns: no further API checks inside."""
    __slots__ = ("pipe", "before")

    def __init__(self, pipe):
        self.pipe = pipe

    def __enter__(self):
        self.before, self.pipe._skip_api_check = self.pipe._skip_api_check, True

    def __exit__(self, *failure):
        self.pipe._skip_api_check = self.before


def lean_api_checks(pipe) -> None:
    """Gives `pipe` DALI's own API-type check without the class DALI 2.4 defines anew in each
    call of _check_api_type_scope (about 9 us, five times a batch on the loader's thread: a
    tenth of a CIFAR batch). Same checks, same scope; left alone if DALI's internals differ."""
    import weakref

    if not (hasattr(pipe, "_check_api_type") and hasattr(pipe, "_skip_api_check")
            and hasattr(pipe, "_check_api_type_scope")):
        return
    owner = weakref.ref(pipe)   # the pipeline holds this function: no reference cycle

    def check_api_type_scope(api_type):
        pipeline = owner()
        if not pipeline._skip_api_check:
            pipeline._check_api_type(api_type)
        return _ApiScope(pipeline)

    pipe._check_api_type_scope = check_api_type_scope


def pick_device_id(device_id: Optional[int], local_rank: int) -> Optional[int]:
    """The GPU for DALI's outputs, or None for a CPU-only pipeline."""
    if not torch.cuda.is_available():
        return None
    if device_id is not None:
        return device_id
    return local_rank if local_rank < torch.cuda.device_count() else torch.cuda.current_device()


def epoch_iterator(pipeline, runs: int):
    """A DALIGenericIterator that runs `pipeline` `runs` times and no more.

    The stock iterator keeps prefetch_queue_depth runs in flight, past the end of the
    epoch too: those are whole batches decoded for nothing (2 of a 20-batch epoch), and
    the pipeline waits for them before it can be destroyed.
    """
    global _EpochIterator
    if _EpochIterator is None:
        _EpochIterator = _define_epoch_iterator()
    return _EpochIterator(pipeline, runs)


_EpochIterator = None  # defined on first use: DALI is imported only when a DALI loader runs


def _define_epoch_iterator():
    # One class for all epochs, holding no pipeline itself: a class made per epoch would
    # be a reference cycle keeping that epoch's pipeline, threads and buffers alive until
    # the garbage collector happens to run.
    from nvidia.dali import types
    from nvidia.dali.plugin.pytorch import DALIGenericIterator

    class EpochIterator(DALIGenericIterator):
        def __init__(self, pipeline, runs: int):
            self._runs_left = runs  # before the base __init__, which may schedule
            depth = pipeline.prefetch_queue_depth
            self._depth = max(depth.values()) if isinstance(depth, dict) else depth
            # A pipeline's first schedule_run puts `depth` runs in flight, later ones one.
            self._new_pipeline = getattr(pipeline, "_first_iter", True)
            self._in_flight = 0     # runs scheduled whose outputs nobody has taken yet
            # a graph whose loader reads the labels itself has the images alone (build.graph)
            outputs = ["images", "labels"][:pipeline.num_outputs]
            super().__init__([pipeline], outputs, auto_reset=False, prepare_first_batch=False)

        def _schedule_runs(self, release_outputs=True):
            # Overrides a private method of DALI's base iterator (the one place it schedules).
            if self._runs_left <= 0:
                self._ever_scheduled = True
                if release_outputs:
                    self._release()
                return
            first = not self._ever_scheduled
            super()._schedule_runs(release_outputs)
            scheduled = self._depth if first and self._new_pipeline else 1
            if first and not self._new_pipeline:  # a reused pipeline: fill its queue as a new one's
                for _ in range(min(self._depth, self._runs_left) - 1):
                    for pipeline in self._pipes:
                        with pipeline._check_api_type_scope(types.PipelineAPIType.ITERATOR):
                            pipeline.schedule_run()
                    scheduled += 1
            self._runs_left -= scheduled
            self._in_flight += scheduled

        def _get_outputs(self):
            outputs = super()._get_outputs()
            self._in_flight -= 1
            return outputs

        def _release(self):
            for pipeline in self._pipes:
                with pipeline._check_api_type_scope(types.PipelineAPIType.ITERATOR):
                    pipeline.release_outputs()

        def drain(self):
            """Takes and drops the outputs of the runs still in flight (a loop left early, or
            the prefetch past a short epoch), so the pipeline is idle for the next epoch."""
            while self._in_flight > 0:
                self._in_flight -= 1
                for pipeline in self._pipes:
                    with pipeline._check_api_type_scope(types.PipelineAPIType.ITERATOR):
                        pipeline.share_outputs()
                        pipeline.release_outputs()

        def fresh_state(self) -> str:
            """The iterator data a checkpoint taken before any batch holds."""
            return self._save_state()

    return EpochIterator
