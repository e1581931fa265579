"""The image objects of a URL root, read ahead of the pipeline by one GET each.

DALI's own S3 reader (fn.io.file.read on s3:// names) asks for each object's size and then
for the object: two requests an image, each thread reading its share of a batch one image
after another, so a distant store costs 2 x round trip x images / threads per batch. Here
each image is one GET through obstore (s3_client.py: its signature, kept-alive connections,
the library's retries), the next READ_AHEAD batches started while the pipeline works on this
one, and near an epoch's end the next epoch's first ones; the answer's buffer reaches
external_source without a copy in Python, as WebDataset members do, so decoding and the recipe
are unchanged.

How the GETs are sent (BatchReads). An object whose size the listing gave is asked for by
obstore's async ranged GET, one byte longer than that size: the whole object in one call, on
obstore's own threads, its future on an event loop the feeder owns and runs only to start a
batch's GETs and to collect them, so no Python thread wakes per image, and every GET of the
batches read ahead is in flight at once without a thread each. obstore's synchronous ranged GET
in a pool of threads costs as much CPU a GET, with twice the thread switches
(benchmarks/s3_client_cost.py); its get() then bytes() costs more. A GET that
failed, and an object longer than listed (it changed since), are read again by get_object:
its retries and its errors are s3_client's. An object the listing did not size is read by
get_object in READ_THREADS threads.

Set DALI_LOADERS_URL_READER=dali to have DALI's reader read the objects instead.
"""
import asyncio
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Dict, List

import numpy as np

from . import s3_client, storage

READ_THREADS = 16     # GETs in flight for objects the listing did not size
READ_AHEAD = 2        # batches whose GETs start before DALI asks for them...
AHEAD_GETS = 512      # ...past the first, while no more GETs than this are started ahead
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


class BatchReads:
    """The GETs of batches of objects, started together and collected together (see the
    module's text). One per feeder: its event loop runs in whichever thread DALI calls the
    feeder from, one call at a time."""

    def __init__(self):
        self._loop = None

    def _run(self, coroutine):
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        try:
            asyncio.get_running_loop()
        except RuntimeError:   # the usual case: no loop runs in this thread
            return self._loop.run_until_complete(coroutine)
        # a thread running a loop of its own (a notebook's): ours runs on another
        return pool().submit(self._loop.run_until_complete, coroutine).result()

    def start(self, urls: List[str]) -> list:
        """A read per URL: (obstore's future, the size asked for), or the pool's Future."""

        async def started():
            reads, stores = [], {}
            for url in urls:
                size = storage.listed_size(url)
                if size is None or not 0 < size <= storage.MAX_OBJECT_BYTES:
                    reads.append(pool().submit(get_object, url))
                    continue
                bucket, key = s3_client.split_url(url)
                try:
                    if bucket not in stores:
                        stores[bucket] = (s3_client.module(url), s3_client.store(url))
                    client, store = stores[bucket]
                    reads.append((client.get_range_async(store, key, start=0, end=size + 1), size))
                except Exception as e:  # said by get_object when collected, in this batch's turn
                    reads.append((e, size))
            return reads

        return self._run(started())

    def collect(self, urls: List[str], reads: list) -> List[np.ndarray]:
        """The objects `reads` (start(urls)) fetched, in order."""
        pending = [read[0] for read in reads if isinstance(read, tuple) and isinstance(read[0], asyncio.Future)]

        async def gathered():
            await asyncio.gather(*pending, return_exceptions=True)

        if pending:
            self._run(gathered())
        return [self._answer(url, read) for url, read in zip(urls, reads)]

    @staticmethod
    def _answer(url: str, read) -> np.ndarray:
        if isinstance(read, Future):
            return read.result()
        future, size = read
        if isinstance(future, asyncio.Future) and not future.cancelled() and future.exception() is None:
            body = future.result()
            if len(body) <= size:
                return np.frombuffer(body, dtype=np.uint8)
        return get_object(url)   # failed (sent again, or said), or longer than listed: read whole

    @staticmethod
    def drop(reads: list) -> None:
        """Reads no batch will collect: cancelled where they still run."""
        for read in reads:
            future = read if isinstance(read, Future) else read[0]
            if isinstance(future, Future):
                future.cancel()
            elif isinstance(future, asyncio.Future) and not future.cancel() and not future.cancelled():
                future.exception()   # done: its error (if any) taken, so asyncio reports nothing


class UrlBytesFeeder:
    """external_source callback: the encoded bytes and labels of batch `info.iteration`,
    its GETs (and the next READ_AHEAD batches', AHEAD_GETS at most past the first) started
    together; near an epoch's end, the
    next epoch's first batches where the loader knows its order (EpochOrder.read_ahead).
    Reads ahead are keyed by the batch's samples, so a batch never gets another's bytes,
    whatever epoch or iteration reads them."""

    def __init__(self, files: List[str], labels: np.ndarray, order, batch_size: int):
        self.files, self.labels, self.order, self.batch_size = files, labels, order, batch_size
        self.ahead: Dict[bytes, list] = {}
        self.reads = BatchReads()

    def _urls(self, indices: np.ndarray) -> List[str]:
        return [self.files[i] for i in indices]

    def __call__(self, info):
        iteration = info.iteration
        indices = self.order.batch(iteration, self.batch_size)
        urls = self._urls(indices)
        reads = self.ahead.pop(indices.tobytes(), None)
        if reads is None:   # not read ahead (an epoch's first batch, a restored position): all stale
            for stale in self.ahead.values():
                self.reads.drop(stale)
            self.ahead = {}
            reads = self.reads.start(urls)
        for step in range(1, READ_AHEAD + 1):
            following = self.order.read_ahead(iteration + step, self.batch_size)
            if following is None or following.tobytes() in self.ahead:
                continue
            started = sum(len(queued) for queued in self.ahead.values())
            if step > 1 and started + len(following) > AHEAD_GETS:
                break
            self.ahead[following.tobytes()] = self.reads.start(self._urls(following))
        return self.reads.collect(urls, reads), self.labels[indices]
