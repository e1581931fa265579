"""The image objects of a URL root, read ahead of the pipeline by plain GETs in a thread pool.

DALI's own S3 reader (fn.io.file.read on s3:// names) asks for each object's size and then
for the object: two requests an image, each thread reading its share of a batch one image
after another, so a distant store costs 2 x round trip x images / threads per batch. Here
each image is one GET through obstore (s3_client.py: its signature, kept-alive connections,
the library's retries), sent by READ_THREADS threads, the next READ_AHEAD batches started
while the pipeline works on this one; the answer's buffer reaches DALI without a copy, by
external_source, as WebDataset members do, so decoding and the recipe are unchanged.

Set DALI_LOADERS_URL_READER=dali to have DALI's reader read the objects instead.
"""
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, List

import numpy as np

from . import storage

READ_THREADS = 16     # GETs in flight: round trips overlap, whatever the DALI threads
READ_AHEAD = 2        # batches whose GETs start before DALI asks for them
READER_ENV = "DALI_LOADERS_URL_READER"


def reads_ahead() -> bool:
    """Whether URL roots are read here (default) or by DALI's S3 reader (DALI_LOADERS_URL_READER=dali)."""
    chosen = os.environ.get(READER_ENV, "pool").strip().lower()
    if chosen not in ("pool", "dali"):
        raise ValueError(f"{READER_ENV}={chosen!r}: expected 'pool' (GETs ahead of the pipeline) or 'dali'")
    return chosen == "pool"


_pools: Dict[int, ThreadPoolExecutor] = {}   # per process: a forked child makes its own
_pools_lock = threading.Lock()


def pool() -> ThreadPoolExecutor:
    with _pools_lock:
        mine = _pools.get(os.getpid())
        if mine is None:
            mine = _pools[os.getpid()] = ThreadPoolExecutor(READ_THREADS, thread_name_prefix="dali_loaders-get")
        return mine


def get_object(url: str, start: int = 0, length: int = None) -> np.ndarray:
    """The object, or its `length` bytes from `start` (fewer where it ends sooner), by one GET
    (retried as s3_client.py says); failures as storage.failure says them."""
    return np.frombuffer(storage.fetch(url, start, length), dtype=np.uint8)


class UrlBytesFeeder:
    """external_source callback: the encoded bytes and labels of batch `info.iteration`,
    its GETs (and the next READ_AHEAD batches') in the pool. Reads ahead are keyed by the
    batch's samples as well, so a new epoch's order never gets another's bytes."""

    def __init__(self, files: List[str], labels: np.ndarray, order, batch_size: int):
        self.files, self.labels, self.order, self.batch_size = files, labels, order, batch_size
        self.ahead: Dict[tuple, list] = {}

    def _within(self, iteration: int) -> bool:
        """Whether batch `iteration` is one of the epoch's or the next's (DALI also runs past
        the end; a pipeline that carries on counts on from an earlier epoch's iterations)."""
        return self.order.holds(iteration, self.batch_size)

    def _start(self, indices: np.ndarray) -> list:
        return [pool().submit(get_object, self.files[i]) for i in indices]

    def __call__(self, info):
        iteration = info.iteration
        indices = self.order.batch(iteration, self.batch_size)
        key = (iteration, indices.tobytes())
        futures = self.ahead.pop(key, None)
        if futures is None:   # not read ahead (an epoch's first batch, a restored position): all stale
            for stale in self.ahead.values():
                for future in stale:
                    future.cancel()
            self.ahead = {}
            futures = self._start(indices)
        for step in range(1, READ_AHEAD + 1):
            if not self._within(iteration + step):
                break
            following = self.order.batch(iteration + step, self.batch_size)
            ahead_key = (iteration + step, following.tobytes())
            if ahead_key not in self.ahead:
                self.ahead[ahead_key] = self._start(following)
        images = [future.result() for future in futures]
        return images, self.labels[indices]
