"""Roots in object storage: `s3://bucket/prefix` wherever a local path is taken.

The image objects of a URL root are read by one signed GET each in a thread pool ahead
of the pipeline (url_reads.py), or by DALI's own S3 reader (fn.io.file.read takes `s3://`
names) with DALI_LOADERS_URL_READER=dali. The headers screening needs are read the same way
(ranged GETs of the first bytes). Python also lists (one request per 1000 objects), reads
label files, tar members and, for the torchvision twin, whole images; it does so through
boto3 (the `[s3]` extra), which also finds the credentials.

Endpoint and credentials come from where the AWS tools look for them (the environment:
AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, ..., AWS_PROFILE; ~/.aws/config and credentials), for
boto3 and DALI alike; nothing here prints or keeps them. Every failure is a StorageError
naming the URL; a missing object is also a FileNotFoundError.

Retries and time limits. boto3: `standard` retries, 3 attempts, 5 s to connect and 20 s per
read, unless AWS_MAX_ATTEMPTS / AWS_RETRY_MODE (or the config file) say otherwise. DALI's
SDK (its own defaults, measured with DALI 2.4): 3 s per request, 3 attempts, AWS_MAX_ATTEMPTS
honoured; it reads the endpoint once per process.
"""
import bisect
import functools
import io
import os
import posixpath
import re
import threading
import zlib
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, List, Optional, Sequence, Tuple

SCHEME = "s3://"
LIST_PAGE = 1000             # keys per listing request (S3's largest page)
MAX_PAGES = 10_000_000       # a listing ends after this many pages, whatever the server says
CONNECT_TIMEOUT_S, READ_TIMEOUT_S, ATTEMPTS = 5, 20, 3
PROBE_TIMEOUT_S = 5          # the one request that asks why DALI's read failed
COALESCE_GAP = 256 << 10     # tar members closer than this are fetched by one ranged GET
MAX_SPAN = 64 << 20          # ...up to this many bytes per GET
TEXT_LIMIT = 256 << 20       # a label file read from a URL
READ_THREADS = 8
MAX_OBJECT_BYTES = 1 << 30   # an object read whole into memory (an image, for PIL)
BATCH_DEADLINE_S = 60        # the longest wait for a batch DALI reads from URLs (loader/deadline.py)

_memo_lock = threading.Lock()
# the last tree listed: (prefix URL, {URL: (size, etag)}, the URLs sorted)
_memo: Tuple[str, Dict[str, Tuple[int, str]], List[str]] = ("", {}, [])


class StorageError(OSError):
    """Object storage failed for `url`: the message says what and what to do."""

    def __init__(self, message: str, url: str):
        super().__init__(redact(message))
        self.url = url


class ObjectNotFound(StorageError, FileNotFoundError):
    """The object (or bucket) a URL names does not exist."""


class BatchTimeout(StorageError, TimeoutError):
    """A batch read from the store did not arrive within the bound (loader/deadline.py);
    `waiter`: the thread still waiting on the pipeline."""

    waiter = None


def is_url(path) -> bool:
    return isinstance(path, str) and path[:5].lower() in (SCHEME, "gs://")


def split_url(url: str) -> Tuple[str, str]:
    """(bucket, key) of `s3://bucket/key`."""
    if url[:5].lower() == "gs://":
        raise StorageError(f"{url}: gs:// roots are not listed by this library; use GCS's S3-compatible endpoint "
                           f"(AWS_ENDPOINT_URL=https://storage.googleapis.com, HMAC keys) with s3:// URLs", url)
    bucket, _, key = url[len(SCHEME):].partition("/")
    if not bucket:
        raise StorageError(f"{url!r} names no bucket: expected s3://bucket/prefix", url)
    return bucket, key


def join(root: str, *parts: str) -> str:
    """os.path.join; for a URL, '/'-joined and normalized within the bucket."""
    if not is_url(root):
        return os.path.join(root, *parts)
    bucket, key = split_url(root)
    key = posixpath.normpath(posixpath.join(key or "/", *parts)).lstrip("/")
    return f"{SCHEME}{bucket}/{key}" if key not in ("", ".") else f"{SCHEME}{bucket}"


def normpath(path: str) -> str:
    return join(path) if is_url(path) else os.path.normpath(path)


def commonpath(paths: Sequence[str]) -> str:
    """os.path.commonpath; of URLs, the longest common folder URL."""
    if not paths or not is_url(paths[0]):
        return os.path.commonpath(paths)
    common = []
    for parts in zip(*(p.split("/") for p in paths)):
        if any(part != parts[0] for part in parts):
            break
        common.append(parts[0])
    if len(common) < 3:
        raise ValueError(f"{paths[0]!r} and the others are in different buckets")
    return "/".join(common)


def redact(text: str) -> str:
    """`text` with any secret the environment holds replaced (a message from elsewhere may quote one)."""
    for name in ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        secret = os.environ.get(name)
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    return text


# -- the client ---------------------------------------------------------------------------


def client():
    """A boto3 S3 client of this process (DataLoader workers fork: each makes its own)."""
    return _client_of(os.getpid())


def probe_client():
    """One attempt, short time limits: for asking why a read already failed."""
    return _client_of(os.getpid(), probe=True)


@functools.lru_cache(maxsize=8)
def _client_of(pid: int, probe: bool = False):
    try:
        import boto3
        from botocore.config import Config
    except ImportError:
        raise ImportError("reading s3:// URLs in Python needs boto3: pip install 'dali_loaders[s3]'") from None
    chosen = any(os.environ.get(v) for v in ("AWS_MAX_ATTEMPTS", "AWS_RETRY_MODE"))
    retries = None if chosen else {"mode": "standard", "total_max_attempts": ATTEMPTS}
    config = Config(connect_timeout=CONNECT_TIMEOUT_S, read_timeout=READ_TIMEOUT_S, retries=retries,
                    max_pool_connections=2 * READ_THREADS)
    if probe:
        config = Config(connect_timeout=PROBE_TIMEOUT_S, read_timeout=PROBE_TIMEOUT_S,
                        retries={"mode": "standard", "total_max_attempts": 1})
    return _session_of(pid).client("s3", config=config)


@functools.lru_cache(maxsize=8)
def _session_of(pid: int):
    import boto3

    return boto3.session.Session()


def credentials():
    """botocore's credentials for this process's requests (None where the chain finds none)."""
    return _session_of(os.getpid()).get_credentials()


def forget_clients() -> None:
    """Clients and the last listing dropped: the next request reads the environment afresh."""
    global _memo
    _client_of.cache_clear()
    _session_of.cache_clear()
    with _memo_lock:
        _memo = ("", {}, [])



def endpoint() -> str:
    """Where requests go, without any user:password part."""
    return _plain(client().meta.endpoint_url or "AWS")


def _plain(url: str) -> str:
    return re.sub(r"//[^/@]*@", "//", url)


def failure(e: Exception, url: str) -> StorageError:
    """A short StorageError naming `url` for anything boto3 raised."""
    from botocore import exceptions as bx

    if isinstance(e, StorageError):
        return e
    if isinstance(e, bx.NoCredentialsError):
        return StorageError(f"no credentials for {url}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or "
                            f"AWS_PROFILE with ~/.aws/credentials", url)
    if isinstance(e, (bx.EndpointConnectionError, bx.ConnectTimeoutError, bx.ReadTimeoutError,
                      bx.ConnectionClosedError)):
        return StorageError(f"cannot reach the object store at {endpoint()} for {url} ({type(e).__name__}); "
                            f"check AWS_ENDPOINT_URL and that the server is up", url)
    if isinstance(e, bx.ClientError):
        error = e.response.get("Error", {})
        code = str(error.get("Code", ""))
        status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if code == "NoSuchBucket":
            return ObjectNotFound(f"bucket {split_url(url)[0]!r} of {url} does not exist", url)
        if code in ("NoSuchKey", "404", "NotFound") or status == 404:
            return ObjectNotFound(f"{url} does not exist", url)
        if code in ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "403") or status == 403:
            return StorageError(f"access to {url} was denied ({code}); check the credentials (AWS_ACCESS_KEY_ID, "
                                f"AWS_PROFILE) and the bucket's policy", url)
        return StorageError(f"{url}: the object store answered {code or status}", url)
    return StorageError(f"{url}: {type(e).__name__}: {e}", url)


# -- listing ------------------------------------------------------------------------------


def list_tree(url: str, page_size: int = LIST_PAGE) -> Dict[str, Tuple[int, str]]:
    """{URL: (size, ETag)} of every object under `url`/ (folder markers left out), listed
    now, page by page; kept as the tree the path helpers below answer from."""
    global _memo
    bucket, key = split_url(url)
    prefix = key.rstrip("/") + "/" if key.strip("/") else ""
    found, token = {}, None
    try:
        for _ in range(MAX_PAGES):
            page = client().list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=page_size,
                                            **({"ContinuationToken": token} if token else {}))
            for item in page.get("Contents", []):
                if not item["Key"].endswith("/"):
                    found[f"{SCHEME}{bucket}/{item['Key']}"] = (int(item["Size"]), item.get("ETag", "").strip('"'))
            next_token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not next_token or next_token == token:
                break
            token = next_token
    except Exception as e:  # botocore's many exceptions, each said as what it means for `url`
        raise failure(e, url) from None
    with _memo_lock:
        _memo = (f"{SCHEME}{bucket}/{prefix}", found, sorted(found))
    return found


def tree(url: str) -> Dict[str, Tuple[int, str]]:
    """The objects under `url`: from the last listing if it covers `url`, else listed now."""
    prefix, found, ordered = _memo
    below = url.rstrip("/") + "/"
    if prefix and below.startswith(prefix):
        if below == prefix:
            return found
        # the URLs under `below` are one run of the sorted list: a class folder costs its own size
        run = ordered[bisect.bisect_left(ordered, below):bisect.bisect_left(ordered, below[:-1] + "0")]
        return {k: found[k] for k in run}
    list_tree(url)
    return tree(url)


def expand_pattern(pattern: str, expand_braces) -> List[str]:
    """Shard URLs from a URL: a folder (its *.tar), a glob (matched against a listing) or a
    `{000..009}` range (expanded by `expand_braces`)."""
    import fnmatch

    if pattern.endswith("/"):
        return sorted(u for u in list_tree(pattern) if u.endswith(".tar") and "/" not in u[len(pattern):])
    if any(c in pattern for c in "*?["):
        folder = pattern[:max(pattern.rfind("/", 0, min(pattern.find(c) for c in "*?[" if c in pattern)), 0)]
        return sorted(u for u in tree(folder) if fnmatch.fnmatchcase(u, pattern))
    return expand_braces(pattern)


def isdir(path: str) -> bool:
    """os.path.isdir; a URL is a folder when some object lies under it (one request)."""
    if not is_url(path):
        return os.path.isdir(path)
    bucket, key = split_url(path)
    prefix = key.rstrip("/") + "/" if key.strip("/") else ""
    try:
        return bool(client().list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=1).get("KeyCount"))
    except Exception as e:  # as list_tree
        raise failure(e, path) from None


def stat(url: str) -> Tuple[int, str]:
    """(size, ETag): from the last listing if it holds `url`, else a HEAD request."""
    known = _memo[1].get(url)
    if known is not None:
        return known
    bucket, key = split_url(url)
    try:
        head = client().head_object(Bucket=bucket, Key=key)
    except Exception as e:  # as list_tree
        raise failure(e, url) from None
    return int(head["ContentLength"]), head.get("ETag", "").strip('"')


def isfile(path: str) -> bool:
    if not is_url(path):
        return os.path.isfile(path)
    prefix, found, _ = _memo
    if prefix and path.startswith(prefix):
        return path in found
    try:
        stat(path)
    except ObjectNotFound:
        return False
    return True


def getsize(path: str) -> int:
    return stat(path)[0] if is_url(path) else os.path.getsize(path)


def subfolders(url: str) -> List[str]:
    """The sorted names of the folders directly under `url` (os.scandir's is_dir())."""
    if not is_url(url):
        return sorted(entry.name for entry in os.scandir(url) if entry.is_dir())
    below = url.rstrip("/") + "/"
    prefix = _memo[0]
    if prefix and below.startswith(prefix):   # listed: ImageFiles lists its root first
        return sorted({k[len(below):].split("/", 1)[0] for k in tree(url) if "/" in k[len(below):]})
    return _folders(url)


def _folders(url: str) -> List[str]:
    """The folder names directly under `url` by a delimited listing (one request per 1000 folders)."""
    bucket, key = split_url(url)
    prefix = key.rstrip("/") + "/" if key.strip("/") else ""
    names, token = set(), None
    try:
        for _ in range(MAX_PAGES):
            page = client().list_objects_v2(Bucket=bucket, Prefix=prefix, Delimiter="/", MaxKeys=LIST_PAGE,
                                            **({"ContinuationToken": token} if token else {}))
            names |= {p["Prefix"][len(prefix):].rstrip("/") for p in page.get("CommonPrefixes", [])}
            next_token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not next_token or next_token == token:
                break
            token = next_token
    except Exception as e:  # as list_tree
        raise failure(e, url) from None
    return sorted(n for n in names if n)


def walk_files(url: str) -> List[Tuple[str, List[str]]]:
    """os.walk's (folder, sorted file names) of the objects under `url`, the folders sorted by
    name as sorted(os.walk(...)) orders them."""
    folders: Dict[str, List[str]] = {}
    for key in tree(url):
        folder, _, name = key.rpartition("/")
        folders.setdefault(folder, []).append(name)
    return [(folder, sorted(folders[folder])) for folder in sorted(folders)]


def stamps(urls: Sequence[str]):
    """(size, a number of the ETag, 0, 0) per URL: what changes when an object does."""
    import numpy as np

    out = np.zeros((len(urls), 4), dtype=np.int64)
    for i, url in enumerate(urls):
        size, etag = stat(url)
        out[i, :2] = size, (zlib.crc32(etag.encode()) << 31) | (zlib.adler32(etag.encode()) >> 1)
    return out


def etag(url: str) -> str:
    return stat(url)[1]


# -- reading ------------------------------------------------------------------------------


def read_bytes(url: str, start: int = 0, length: Optional[int] = None) -> bytes:
    """`length` bytes of the object from `start` (all of it if None) by one (ranged) GET."""
    bucket, key = split_url(url)
    ranged = {"Range": f"bytes={start}-{start + length - 1}"} if length is not None or start else {}
    if length is None and start:
        ranged = {"Range": f"bytes={start}-"}
    if length == 0:
        return b""
    try:
        answer = client().get_object(Bucket=bucket, Key=key, **ranged)
        body = answer["Body"]
        if length is None and int(answer.get("ContentLength", 0)) > MAX_OBJECT_BYTES:
            body.close()
            raise StorageError(f"{url} is {int(answer['ContentLength']) >> 20} MiB: over the "
                               f"{MAX_OBJECT_BYTES >> 20} MiB read into memory at once", url)
        data = body.read() if length is None else body.read(length)
        body.close()
        return data
    except Exception as e:  # as list_tree
        raise failure(e, url) from None


def read_text(path: str) -> str:
    """A small text file, local or a URL."""
    if not is_url(path):
        with open(path) as f:
            return f.read()
    if getsize(path) > TEXT_LIMIT:
        raise StorageError(f"{path} is over {TEXT_LIMIT >> 20} MiB: not a label file", path)
    return read_bytes(path).decode()


def openable(path: str):
    """What PIL may open: the path, or a URL's bytes in memory."""
    return io.BytesIO(read_bytes(path)) if is_url(path) else path


def read_ranges(url: str, ranges: Sequence[Tuple[int, int]], gap: int = COALESCE_GAP) -> List[bytes]:
    """The bytes of each (offset, size) of one object; ranges less than `gap` apart share one
    GET, the GETs in parallel."""
    order = sorted(range(len(ranges)), key=lambda i: ranges[i][0])
    spans: List[List[int]] = []   # [start, end, member indices...]
    for i in order:
        offset, size = ranges[i]
        if spans and offset - spans[-1][1] <= gap and offset + size - spans[-1][0] <= MAX_SPAN:
            spans[-1][1] = max(spans[-1][1], offset + size)
            spans[-1].append(i)
        else:
            spans.append([offset, offset + size, i])
    out: List[bytes] = [b""] * len(ranges)

    def fetch(span):
        data = read_bytes(url, span[0], span[1] - span[0])
        for i in span[2:]:
            offset, size = ranges[i]
            out[i] = data[offset - span[0]:offset - span[0] + size]

    if len(spans) == 1:
        fetch(spans[0])
    else:
        with ThreadPoolExecutor(min(READ_THREADS, len(spans))) as pool:
            list(pool.map(fetch, spans))
    return out


class Stream(io.RawIOBase):
    """An object read front to back by one GET (tarfile's stream mode reads the index from it)."""

    def __init__(self, url: str):
        bucket, key = split_url(url)
        self.url = url
        try:
            self.body = client().get_object(Bucket=bucket, Key=key)["Body"]
        except Exception as e:  # as list_tree
            raise failure(e, url) from None

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        try:
            data = self.body.read(len(buffer))
        except Exception as e:  # as list_tree
            raise failure(e, self.url) from None
        buffer[:len(data)] = data
        return len(data)

    def close(self) -> None:
        self.body.close()
        super().close()


class RangedFile:
    """seek/read over an object by ranged GETs, each read one request (small reads only)."""

    def __init__(self, url: str):
        self.url, self.position = url, 0

    def seek(self, offset: int) -> None:
        self.position = offset

    def read(self, size: int) -> bytes:
        data = read_bytes(self.url, self.position, size)
        self.position += len(data)
        return data

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class PrefetchedFile(RangedFile):
    """RangedFile whose reads of the (offset, size) pieces given were fetched up front together."""

    def __init__(self, url: str, pieces: Sequence[Tuple[int, int]]):
        super().__init__(url)
        pieces = sorted(set(map(tuple, pieces)))
        self.pieces = dict(zip(pieces, read_ranges(url, pieces, gap=4096))) if pieces else {}

    def read(self, size: int) -> bytes:
        data = self.pieces.get((self.position, size))
        if data is None:
            return super().read(size)
        self.position += len(data)
        return data


# -- what DALI says ---------------------------------------------------------------------


def dali_failure(message: str) -> Optional[StorageError]:
    """The StorageError behind a DALI error that came from its S3 reader, or None for any other
    error. DALI names bucket and key, and says "not found" for a store that is down as for a
    missing object, so the object is asked for again (one HEAD, boto3's bounded retries)."""
    match = re.search(r"S3 [^\n]*?bucket=(\S+) object=(\S+?):?\s*$", message, re.MULTILINE)
    if not match:
        return None
    url = f"{SCHEME}{match.group(1)}/{match.group(2)}"
    bucket, key = split_url(url)
    try:
        probe_client().head_object(Bucket=bucket, Key=key)
    except Exception as e:  # what the store says now: down, missing, denied
        return failure(e, url)
    return StorageError(f"DALI could not read {url} (the object store failed a request; it answers now): "
                        f"load the loader's last state_dict() into a new loader to go on", url)
