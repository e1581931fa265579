"""The rows a DaliLoadersAugment call draws, seen from a graph: while `rows_recorded()` is
open, every call the graph makes runs twice on the same arguments (the same uniforms), once
as asked and once in the operator's test-only `_record_rows` mode; the second calls'
DataNodes are listed, and `rows_of` reads a sample of them back."""
import contextlib

import numpy as np


@contextlib.contextmanager
def rows_recorded():
    from nvidia.dali import fn

    from dali_loaders.ops import plugin

    if not plugin.augment_available():   # it loads the operator into fn
        raise RuntimeError("the augmentation plugin is not built here")
    original, recorded = fn.dali_loaders_augment, []

    def both(data, **arguments):
        recorded.append(original(data, _record_rows=True, **arguments))
        return original(data, **arguments)

    fn.dali_loaders_augment = both
    try:
        yield recorded
    finally:
        fn.dali_loaders_augment = original


def rows_of(sample, slots: int) -> list:
    """The slots' rows (-1: left out by its draw) a recorded sample holds."""
    return np.ascontiguousarray(np.array(sample)).reshape(-1)[:4 * slots].view(np.int32).tolist()
