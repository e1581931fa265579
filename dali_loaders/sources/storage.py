"""Roots in object storage: `s3://bucket/prefix` wherever a local path is taken.

The image objects of a URL root are read by one GET each ahead of the pipeline
(url_reads.py), or by DALI's own S3 reader (fn.io.file.read takes `s3://` names)
with DALI_LOADERS_URL_READER=dali. The headers screening needs are read the same way (ranged
GETs of the first bytes). Python also lists (one request per 1000 objects), reads label
files, tar members and, for the torchvision twin, whole images. Every request goes through
obstore (the `[s3]` extra), set up with the AWS tools' settings, the library's time limits
and retries (s3_client.py).

Every failure is a StorageError naming the URL; a missing object is also a FileNotFoundError.
DALI's SDK (its own defaults, measured with DALI 2.4): 3 s per request, 3 attempts,
AWS_MAX_ATTEMPTS honoured; it reads the endpoint once per process.
"""
import bisect
import io
import os
import posixpath
import re
import threading
import zlib
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, List, Optional, Sequence, Tuple

from . import s3_client
from .s3_client import SCHEME, BatchTimeout, ObjectNotFound, StorageError, endpoint, redact, split_url

__all__ = ["SCHEME", "BatchTimeout", "ObjectNotFound", "StorageError", "endpoint", "redact", "split_url"]

LIST_PAGE = 1000             # keys per listing request (S3's largest page)
MAX_PAGES = 10_000_000       # a listing ends after this many pages, whatever the server says
COALESCE_GAP = 256 << 10     # tar members closer than this are fetched by one ranged GET
MAX_SPAN = 64 << 20          # ...up to this many bytes per GET
TEXT_LIMIT = 256 << 20       # a label file read from a URL
READ_THREADS = 8
MAX_OBJECT_BYTES = 1 << 30   # an object read whole into memory (an image, for PIL)
BATCH_DEADLINE_S = 60        # the longest wait for a batch DALI reads from URLs (loader/deadline.py)

KEPT_TREES = 4               # listings kept, newest first: a train and a val root and a few more
_memo_lock = threading.Lock()
# the trees listed last, newest first: (prefix URL, {URL: (size, etag)}, the URLs sorted)
_memo: List[Tuple[str, Dict[str, Tuple[int, str]], List[str]]] = []


def is_url(path) -> bool:
    return isinstance(path, str) and path[:5].lower() in (SCHEME, "gs://")


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


def forget_clients() -> None:
    """Clients and the last listing dropped: the next request reads the environment afresh."""
    global _memo
    s3_client.forget()
    with _memo_lock:
        _memo = []


def worker_context(chosen, num_workers: int):
    """DataLoader's multiprocessing_context: `chosen`; or, where this process has read object
    storage (whose client's threads do not survive fork()), 'forkserver' for its workers."""
    if chosen is None and num_workers > 0 and s3_client.started_here():
        return "forkserver"
    return chosen


def failure(e: Exception, url: str) -> StorageError:
    return s3_client.failure(e, url)


def _folder_key(key: str) -> str:
    return key.rstrip("/") + "/" if key.strip("/") else ""


# -- listing ------------------------------------------------------------------------------


def list_tree(url: str, page_size: int = LIST_PAGE) -> Dict[str, Tuple[int, str]]:
    """{URL: (size, ETag)} of every object under `url`/ (folder markers left out), listed
    now (the store pages by 1000 keys; `page_size` keys reach Python at a time); kept as a
    tree the path helpers below answer from (the newest KEPT_TREES)."""
    global _memo
    bucket, key = split_url(url)
    prefix = _folder_key(key)

    def listing() -> Dict[str, Tuple[int, str]]:
        found = {}
        pages = s3_client.module(url).list(s3_client.store(url), prefix or None, chunk_size=page_size)
        for _, page in zip(range(MAX_PAGES), pages):
            for item in page:
                name = item["path"]
                if not name.endswith("/"):
                    found[f"{SCHEME}{bucket}/{name}"] = (int(item["size"]), (item.get("e_tag") or "").strip('"'))
        return found

    found = s3_client.request(url, listing)
    listed = f"{SCHEME}{bucket}/{prefix}"
    with _memo_lock:
        _memo = [(listed, found, sorted(found))] + [kept for kept in _memo if kept[0] != listed][:KEPT_TREES - 1]
    return found


def _covering(url: str) -> Tuple[str, Dict[str, Tuple[int, str]], List[str]]:
    """The newest kept listing whose prefix holds `url` (a folder's ends in '/'), or ("", {}, [])."""
    for kept in _memo:
        if url.startswith(kept[0]):
            return kept
    return "", {}, []


def listed_size(url: str) -> Optional[int]:
    """The object's size as the newest kept listing that covers it gave it, or None; no request."""
    known = _covering(url)[1].get(url)
    return None if known is None else known[0]


def tree(url: str) -> Dict[str, Tuple[int, str]]:
    """The objects under `url`: from a kept listing that covers `url`, else listed now."""
    below = url.rstrip("/") + "/"
    prefix, found, ordered = _covering(below)
    if prefix:
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
    prefix = _folder_key(split_url(path)[1])
    return bool(s3_client.request(path, lambda: next(iter(
        s3_client.module(path).list(s3_client.store(path), prefix or None, chunk_size=1)), [])))


def stat(url: str) -> Tuple[int, str]:
    """(size, ETag): from the newest kept listing that covers `url` if it holds it, else a HEAD request."""
    known = _covering(url)[1].get(url)
    if known is not None:
        return known
    head = s3_client.request(url, lambda: s3_client.module(url).head(s3_client.store(url), split_url(url)[1]))
    return int(head["size"]), (head.get("e_tag") or "").strip('"')


def isfile(path: str) -> bool:
    if not is_url(path):
        return os.path.isfile(path)
    prefix, found, _ = _covering(path)
    if prefix:
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
    if _covering(below)[0]:   # listed: ImageFiles lists its root first
        return sorted({k[len(below):].split("/", 1)[0] for k in tree(url) if "/" in k[len(below):]})
    return _folders(url)


def _folders(url: str) -> List[str]:
    """The folder names directly under `url` by a delimited listing (one request per 1000 folders)."""
    prefix = _folder_key(split_url(url)[1])
    listed = s3_client.request(url, lambda: s3_client.module(url).list_with_delimiter(s3_client.store(url),
                                                                                      prefix or None))
    return sorted({p[len(prefix):].strip("/") for p in listed["common_prefixes"]} - {""})


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


def fetch(url: str, start: int = 0, length: Optional[int] = None):
    """`length` bytes of the object from `start` (all of it if None; fewer where it ends
    sooner; none past its end) by one (ranged) GET, as obstore's Bytes (a buffer:
    np.frombuffer takes it as is)."""
    key = split_url(url)[1]
    if length == 0:
        return b""

    def send():
        client = s3_client.module(url)
        if length is not None:
            return client.get(s3_client.store(url), key, options={"range": (start, start + length)}).bytes()
        answer = client.get(s3_client.store(url), key, options={"range": {"offset": start}} if start else None)
        if answer.meta["size"] - start > MAX_OBJECT_BYTES:
            raise StorageError(f"{url} is {answer.meta['size'] >> 20} MiB: over the {MAX_OBJECT_BYTES >> 20} MiB "
                               f"read into memory at once", url)
        return answer.bytes()

    try:
        return s3_client.request(url, send)
    except StorageError as e:
        if start and "InvalidRange" in str(e):   # the range starts past the object's end
            return b""
        raise


def read_bytes(url: str, start: int = 0, length: Optional[int] = None) -> bytes:
    """fetch() as bytes."""
    return bytes(fetch(url, start, length))


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
        self.url, self.left = url, memoryview(b"")
        self.pieces = iter(s3_client.request(url, lambda: s3_client.module(url).get(
            s3_client.store(url), split_url(url)[1]).stream()))

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if not len(self.left):
            try:
                self.left = memoryview(next(self.pieces, b""))
            except Exception as e:  # obstore's, mid-answer
                raise failure(e, self.url) from None
        size = min(len(buffer), len(self.left))
        buffer[:size] = self.left[:size]
        self.left = self.left[size:]
        return size

    def close(self) -> None:
        self.pieces = iter(())
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
    missing object, so the object is asked for again (one HEAD, one attempt)."""
    match = re.search(r"S3 [^\n]*?bucket=(\S+) object=(\S+?):?\s*$", message, re.MULTILINE)
    if not match:
        return None
    url = f"{SCHEME}{match.group(1)}/{match.group(2)}"
    try:
        s3_client.module(url).head(s3_client.store(url, probe=True), split_url(url)[1])
    except Exception as e:  # what the store says now: down, missing, denied
        return failure(e, url)
    return StorageError(f"DALI could not read {url} (the object store failed a request; it answers now): "
                        f"load the loader's last state_dict() into a new loader to go on", url)
