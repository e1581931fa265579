"""The image objects of a URL root, read ahead of the pipeline by plain GETs in a thread pool.

DALI's own S3 reader (fn.io.file.read on s3:// names) asks for each object's size and then
for the object: two requests an image, each thread reading its share of a batch one image
after another, so a distant store costs 2 x round trip x images / threads per batch. Here
each image is one GET, signed here (signing.py: the signature, never the secret, travels)
and sent over keep-alive connections (http_get.py) by READ_THREADS threads, the next
READ_AHEAD batches started while the pipeline works on this one. The bytes go to DALI by
external_source, as WebDataset members do, so decoding and the recipe are unchanged.

Set DALI_LOADERS_URL_READER=dali to have DALI's reader read the objects instead.
"""
import functools
import os
import ssl
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, List

import numpy as np

from . import storage
from .http_get import Connection
from .signing import GetSigner

READ_THREADS = 16     # GETs in flight: round trips overlap, whatever the DALI threads
READ_AHEAD = 2        # batches whose GETs start before DALI asks for them
RETRY_PAUSE_S = 0.5   # before a GET the store failed (HTTP 5xx) is tried again
READER_ENV = "DALI_LOADERS_URL_READER"


def reads_ahead() -> bool:
    """Whether URL roots are read here (default) or by DALI's S3 reader (DALI_LOADERS_URL_READER=dali)."""
    chosen = os.environ.get(READER_ENV, "pool").strip().lower()
    if chosen not in ("pool", "dali"):
        raise ValueError(f"{READER_ENV}={chosen!r}: expected 'pool' (GETs ahead of the pipeline) or 'dali'")
    return chosen == "pool"


class _Connections(threading.local):
    """One keep-alive connection per thread and host (and process: a forked child's thread
    must not write into its parent's socket)."""

    def __init__(self):
        self.open: Dict[tuple, Connection] = {}


_connections = _Connections()
_pools: Dict[int, ThreadPoolExecutor] = {}   # per process: a forked child makes its own
_pools_lock = threading.Lock()


def pool() -> ThreadPoolExecutor:
    with _pools_lock:
        mine = _pools.get(os.getpid())
        if mine is None:
            mine = _pools[os.getpid()] = ThreadPoolExecutor(READ_THREADS, thread_name_prefix="dali_loaders-get")
        return mine


_regions: Dict[tuple, str] = {}   # (client, bucket): the region AWS said the bucket is in


@functools.lru_cache(maxsize=64)
def _signer_of(client, bucket: str, region: str) -> GetSigner:
    shown = urllib.parse.urlsplit(client.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "k"},
                                                                ExpiresIn=60))
    base = f"{shown.scheme}://{shown.netloc}{shown.path[:-1]}"   # the URL without its key, "k"
    return GetSigner(base, region, storage.credentials())


def _signer(client, bucket: str) -> GetSigner:
    """The signer of `bucket`'s GETs for `client` (a new client, after the environment
    changed, gets a new one): its base URL from a URL boto3 presigns and nobody sends, its
    region the client's, or the one the store named when it refused that."""
    region = _regions.get((client, bucket)) or client.meta.region_name or "us-east-1"
    return _signer_of(client, bucket, region)


def _connection(signer: GetSigner) -> Connection:
    key = (os.getpid(), signer.scheme, signer.hostname, signer.port)
    found = _connections.open.get(key)
    if found is None:
        tls = ssl.create_default_context(cafile=os.environ.get("AWS_CA_BUNDLE") or None) \
            if signer.scheme == "https" else None
        found = Connection(signer.scheme, signer.hostname, signer.port, storage.CONNECT_TIMEOUT_S,
                           storage.READ_TIMEOUT_S, tls)
        _connections.open[key] = found
    return found


def get_object(url: str, start: int = 0, length: int = None) -> np.ndarray:
    """The object, or its `length` bytes from `start` (fewer where it ends sooner), by one
    signed GET (storage.ATTEMPTS tries on a broken connection or a failing store); failures
    as storage.failure says them."""
    bucket, key = storage.split_url(url)
    if length == 0:
        return np.empty(0, dtype=np.uint8)
    wanted = f"bytes={start}-{'' if length is None else start + length - 1}" if start or length else None
    try:
        client = storage.client()
        signer = _signer(client, bucket)
        path, headers = _signed(signer, key, wanted)
    except Exception as e:  # no credentials, bad configuration: botocore's exceptions
        raise storage.failure(e, url) from None
    last = None
    for _ in range(storage.ATTEMPTS):
        connection = _connection(signer)
        try:
            answer = connection.get(path, headers, storage.MAX_OBJECT_BYTES)
        except OSError as e:   # refused, reset, timed out, not HTTP (ProtocolError): a new connection
            connection.close()
            last = e
            continue
        if answer.body is not None:
            if answer.status == 200 and wanted:   # a server that ignores Range sends it all
                return answer.body[start:None if length is None else start + length]
            return answer.body
        if answer.status == 416:   # the range starts past the object's end
            return np.empty(0, dtype=np.uint8)
        region = answer.headers.get("x-amz-bucket-region")
        if answer.status in (301, 400) and region and region != signer.region:   # signed for the wrong region
            _regions[(client, bucket)] = region
            signer = _signer(client, bucket)
            path, headers = _signed(signer, key, wanted)
            continue
        if answer.status >= 500:   # the store itself failed (a gateway whose back end is gone): again
            last = f"HTTP {answer.status}"
            time.sleep(RETRY_PAUSE_S)
            continue
        _refused(url, answer.status, answer.size or 0)
    why = last if isinstance(last, str) else type(last).__name__
    raise storage.StorageError(f"cannot reach the object store at {storage.endpoint()} for {url} "
                               f"({why}); check AWS_ENDPOINT_URL and that the server is up", url)


def _signed(signer: GetSigner, key: str, wanted) -> tuple:
    path, headers = signer.sign(key)
    if wanted:
        headers["range"] = wanted   # unsigned: SigV4 needs only host and the x-amz- headers signed
    return path, headers


def _refused(url: str, status: int, size: int) -> None:
    if status == 200:
        raise storage.StorageError(f"{url} is {size >> 20} MiB: over the {storage.MAX_OBJECT_BYTES >> 20} MiB "
                                   f"read into memory at once", url)
    if status == 404:
        raise storage.ObjectNotFound(f"{url} does not exist (or its bucket does not)", url)
    if status == 403:
        raise storage.StorageError(f"access to {url} was denied; check the credentials (AWS_ACCESS_KEY_ID, "
                                   f"AWS_PROFILE) and the bucket's policy", url)
    raise storage.StorageError(f"{url}: the object store answered HTTP {status}", url)


class UrlBytesFeeder:
    """external_source callback: the encoded bytes and labels of batch `info.iteration`,
    its GETs (and the next READ_AHEAD batches') in the pool. Reads ahead are keyed by the
    batch's samples as well, so a new epoch's order never gets another's bytes."""

    def __init__(self, files: List[str], labels: np.ndarray, order, batch_size: int):
        self.files, self.labels, self.order, self.batch_size = files, labels, order, batch_size
        self.ahead: Dict[tuple, list] = {}

    def _within(self, iteration: int) -> bool:
        """Whether batch `iteration` is one of the epoch's (DALI also runs past the end)."""
        bounds = self.order.bounds
        if bounds is not None:
            return iteration + 1 < len(bounds)
        return iteration * self.batch_size < len(self.order.indices)

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
