"""What the loaders need of DALI itself: a built pipeline, the GPU to use, and (from
dali_compat, with every other use of DALI's internals) the epoch iterator that runs a
pipeline exactly as many times as the epoch has batches."""
import ctypes
from typing import Callable, Optional

import torch

from ..dali_compat import autograph_files_removed, lean_api_checks, require_dali


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
    require_dali()
    from nvidia.dali import pipeline_def

    with autograph_files_removed():   # tracing `if`s leaves AutoGraph's files in the temp folder
        pipe = pipeline_def(graph, enable_checkpointing=True, enable_conditionals=conditionals)(
            *graph_args, batch_size=batch_size, num_threads=num_threads, device_id=device_id, seed=seed,
            checkpoint=checkpoint, prefetch_queue_depth=prefetch_queue_depth)
        lean_api_checks(pipe)
        pipe.build()
    return pipe


def pick_device_id(device_id: Optional[int], local_rank: int) -> Optional[int]:
    """The GPU for DALI's outputs, or None for a CPU-only pipeline."""
    if not torch.cuda.is_available():
        return None
    if device_id is not None:
        return device_id
    return local_rank if local_rank < torch.cuda.device_count() else torch.cuda.current_device()
