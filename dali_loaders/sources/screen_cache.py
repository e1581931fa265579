"""What screening knows of each image, as columns, and its cache on disk.

A dataset may hold a million files, so nothing here is a Python object per file but the
names and a few short strings PIL shares: the cache is one .npz of arrays (no pickle), the
names one NUL-separated string (a path cannot hold a NUL). Loading it when the listing is
unchanged is a string comparison and an array comparison of the stamps.
"""
import hashlib
import os
import tempfile
from typing import List, Sequence

import numpy as np

CACHE_VERSION = 2
UNCHECKED = "\x01"   # `decode` of an image not decoded yet ("" decodes; else why not)
STAMP_WIDTH = 4      # (size, mtime_ns) of a file; a tar member adds (offset, size)
TEXT_COLUMNS = ("format", "mode", "unreadable", "decode")


def cache_dir() -> str:
    return os.path.join(os.path.expanduser("~"), ".cache", "dali_loaders", "screening")


def cache_path(names: Sequence[str]) -> str:
    """One cache per list of images: named by the folder they share, its digest also over the
    first and last names, so two splits of one folder do not take turns overwriting one file."""
    local = not (names and names[0][:5].lower() == "s3://")   # a URL is absolute as it is
    common = os.path.commonpath([os.path.abspath(n) if local else n for n in names]) if names else ""
    digest = hashlib.sha1("\0".join([common, names[0], names[-1]] if names else [""]).encode()).hexdigest()[:16]
    return os.path.join(cache_dir(), f"{os.path.basename(common) or 'root'}-{digest}.npz")


def _joined(texts: Sequence[str]) -> np.ndarray:
    return np.frombuffer("\0".join(texts).encode("utf-8", "surrogateescape"), dtype=np.uint8)


def _split(column: np.ndarray, n: int) -> List[str]:
    texts = column.tobytes().decode("utf-8", "surrogateescape").split("\0")
    return texts if n else []


class Table:
    """Per image: `stamps` (n, 4) int64, `width`/`height` (-1: unknown), and the lists
    `format`, `mode`, `unreadable` ("" if PIL read the header, else why not) and `decode`
    (UNCHECKED, "" or why PIL cannot decode it). `known[i]`: row i is filled in."""

    def __init__(self, names: Sequence[str], stamps: np.ndarray):
        n = len(names)
        self.names, self.stamps = list(names), np.asarray(stamps, dtype=np.int64).reshape(n, STAMP_WIDTH)
        self.width, self.height = np.full(n, -1, np.int64), np.full(n, -1, np.int64)
        self.format, self.mode, self.unreadable, self.decode = [""] * n, [""] * n, [""] * n, [UNCHECKED] * n
        self.known = np.zeros(n, dtype=bool)

    def set_header(self, i: int, facts: dict) -> None:
        self.known[i] = True
        self.decode[i] = UNCHECKED
        if "unreadable" in facts:
            self.unreadable[i] = facts["unreadable"] or "unreadable"
            return
        self.width[i], self.height[i] = facts["width"], facts["height"]
        self.format[i], self.mode[i], self.unreadable[i] = facts["format"] or "", facts["mode"] or "", ""

    def adopt(self, path: str) -> None:
        """Fills in the rows the cache at `path` holds with the same stamps; a missing or
        damaged cache fills in nothing."""
        try:
            with np.load(path, allow_pickle=False) as cache:
                if int(cache["version"]) != CACHE_VERSION:
                    return
                n = len(cache["width"])
                rows = self._rows_of(cache["names"], n)
                same = (rows >= 0) & np.all(cache["stamps"][np.maximum(rows, 0)] == self.stamps, axis=1)
                mine, theirs = np.flatnonzero(same), rows[same]
                self.width[mine], self.height[mine] = cache["width"][theirs], cache["height"][theirs]
                whole = len(mine) == len(self.names) == n and np.array_equal(theirs, mine)
                for column in TEXT_COLUMNS:
                    cached, own = _split(cache[column], n), getattr(self, column)
                    if whole:   # the usual case: nothing changed, the lists are the cache's
                        setattr(self, column, cached)
                        continue
                    for i, j in zip(mine.tolist(), theirs.tolist()):
                        own[i] = cached[j]
                self.known[mine] = True
        except (OSError, ValueError, KeyError, IndexError, UnicodeDecodeError):   # start afresh
            return

    def _rows_of(self, cached_names: np.ndarray, n: int) -> np.ndarray:
        """For each of my names, its row in the cache, or -1."""
        if n == len(self.names) and np.array_equal(cached_names, _joined(self.names)):
            return np.arange(n)
        where = {name: j for j, name in enumerate(_split(cached_names, n))}
        return np.array([where.get(name, -1) for name in self.names], dtype=np.int64)

    def save(self, path: str) -> None:
        """Atomically (ranks may write it at once); a folder we cannot write only costs the cache."""
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd, partial = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".partial.npz")
            with os.fdopen(fd, "wb") as f:
                np.savez(f, version=np.int64(CACHE_VERSION), names=_joined(self.names), stamps=self.stamps,
                         width=self.width, height=self.height,
                         **{column: _joined(getattr(self, column)) for column in TEXT_COLUMNS})
            os.replace(partial, path)
        except OSError:
            pass
