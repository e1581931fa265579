"""WebDataset tar shards: the index files, a source over them, and the factories of both backends.

The format, once: each shard is a plain tar; a sample is the run of consecutive members
sharing a name up to the first dot of the file name (`abc/0001.jpg`, `abc/0001.cls`), the
rest of the name its key. The image is under one of `image_keys` (jpg, jpeg, png), the
class under `label_key` (cls: the label as ASCII digits); a sample without one is
unlabeled (-1).

The library finds the samples of a shard through an index file (DALI's "v1.2" text
format, the one its wds2idx tool writes: a header `v1.2 <samples>`, then a line per sample
of `key offset size name` per member). The library writes these itself, with tarfile,
next to each shard (`shard-000.tar` -> `shard-000.idx`) or, where that folder is
read-only or `cache_dir` is given, in a cache folder; `python -m dali_loaders index SHARDS`
writes them ahead of time.

The sample order. Each batch's image members are read from the tars in Python (a seek and
a read of the size the index gives, so a shard cannot make it read more) and fed to DALI by
external_source, which decodes them; the order follows the library's rules
(distributed.shard_indices): validation reads every sample once, rank r the r-th
contiguous part; training takes the same samples a seeded global permutation gives each
rank (equal steps per rank), then, so that a rank reads each shard once per epoch in one
sweep, groups them shard by shard, the shards in an order drawn from (seed, epoch), the
samples within a shard in the permutation's order. A batch therefore draws from one or two
shards: write shards with their samples shuffled, as WebDataset recommends. The twin uses
the same sampler, so it serves the same order.
"""
import contextlib
import copy
import glob
import hashlib
import io
import os
import posixpath
import re
import tarfile
import tempfile
import zlib
from typing import List, Optional, Sequence

import numpy as np

from ..distributed import EpochSampler, resolve_shard
from . import storage
from .files import encoded_images, require_file
from .image_files import SUSPECT_BATCHES, ImageDecodeError, dali_reason
from .protocol import ReadInBatches
from .screening import PIL_RULE

IMAGE_KEYS = ("jpg", "jpeg", "png")
LABEL_KEY = "cls"
INDEX_VERSION = "v1.2"
MAX_LABEL_BYTES = 64    # a class number in ASCII digits, with room for whitespace
SHARD_ORDER_STREAM = 1   # a third seed word: the shard order's random stream is not the permutation's


# -- shard names ----------------------------------------------------------------------------


def expand_shards(shards) -> List[str]:
    """A list of shard paths from a path, a list, a folder (its *.tar), a glob pattern or
    WebDataset's brace notation (`data/shard-{000..009}.tar`)."""
    if isinstance(shards, (str, os.PathLike)):
        shards = [os.fspath(shards)]
    found = []
    for pattern in shards:
        if storage.is_url(pattern):
            found += storage.expand_pattern(pattern, _expand_braces)
        elif os.path.isdir(pattern):
            found += sorted(glob.glob(os.path.join(pattern, "*.tar")))
        elif any(c in pattern for c in "*?[") and not os.path.exists(pattern):
            found += sorted(glob.glob(pattern))
        else:
            found += _expand_braces(pattern)
    if not found:
        raise FileNotFoundError(f"no tar shards in {shards!r}: pass shard paths, a folder of *.tar, a glob or "
                                f"`name-{{000..009}}.tar`")
    for path in found:
        require_file(path, "shard", "check the shard list (paths, folder, glob or {a..b} range)")
    return found


def _expand_braces(pattern: str) -> List[str]:
    match = re.search(r"\{(\d+)\.\.(\d+)\}", pattern)
    if not match:
        return [pattern]
    first, last = match.group(1), match.group(2)
    width = len(first)
    head, tail = pattern[:match.start()], pattern[match.end():]
    return [p for i in range(int(first), int(last) + 1) for p in _expand_braces(f"{head}{i:0{width}d}{tail}")]


# -- index files ----------------------------------------------------------------------------


def index_path(shard: str, cache_dir: Optional[str] = None) -> str:
    """Where a shard's index lives: beside it (`x.tar` -> `x.idx`), or in `cache_dir`
    under a name made from the shard's absolute path."""
    if storage.is_url(shard):   # in the cache, named by URL and ETag: a changed object gets a new index
        cache_dir = cache_dir or default_cache_dir()
        digest = hashlib.sha1(f"{shard}\0{storage.etag(shard)}".encode()).hexdigest()[:16]
        return os.path.join(cache_dir, f"{posixpath.basename(os.path.splitext(shard)[0])}-{digest}.idx")
    if cache_dir is None:
        return os.path.splitext(shard)[0] + ".idx"
    digest = hashlib.sha1(os.path.abspath(shard).encode()).hexdigest()[:16]
    return os.path.join(cache_dir, f"{os.path.basename(os.path.splitext(shard)[0])}-{digest}.idx")


def default_cache_dir() -> str:
    return os.path.join(os.path.expanduser("~"), ".cache", "dali_loaders", "webdataset")


def split_name(name: str):
    """(sample name, key): the key is everything after the first dot of the file name."""
    folder, _, file = name.rpartition("/")
    stem, _, key = file.partition(".")
    return (f"{folder}/{stem}" if folder else stem), key


def scan_shard(shard: str) -> List[List[tuple]]:
    """The samples of a tar, each a list of (key, data offset, size, member name), with tarfile;
    ValueError naming the shard if it is not a tar or is cut short."""
    size = storage.getsize(shard)
    samples, last = [], None
    try:   # an object is read front to back once, by one GET
        with tarfile.open(fileobj=storage.Stream(shard), mode="r|") if storage.is_url(shard) else \
                tarfile.open(shard, "r:") as tar:
            for member in tar:
                if not member.isfile():
                    continue
                sample, key = split_name(member.name)
                if not key or not os.path.basename(sample) or os.path.basename(sample).startswith("."):
                    continue   # hidden files and files without a key belong to no sample
                if member.offset_data + member.size > size:
                    raise tarfile.ReadError(f"member {member.name!r} runs past the end of the file")
                if sample != last:
                    samples.append([])
                    last = sample
                samples[-1].append((key, member.offset_data, member.size, member.name))
    except (tarfile.TarError, EOFError, OSError) as e:
        raise ValueError(f"shard {shard!r} is not a readable tar ({type(e).__name__}: {e}): it is truncated "
                         f"or damaged; write it again") from None
    if not samples:
        raise ValueError(f"shard {shard!r} holds no samples (no files named <sample>.<key>)")
    return samples


def format_index(samples: Sequence[Sequence[tuple]]) -> str:
    lines = [" ".join(f"{key} {offset} {size} {name}" for key, offset, size, name in sample)
             for sample in samples]
    return f"{INDEX_VERSION} {len(samples)}\n" + "\n".join(lines) + "\n"


def write_index(shard: str, path: str) -> int:
    """Writes the shard's index to `path` (atomically: concurrent ranks may write it too);
    returns the number of samples."""
    samples = scan_shard(shard)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fd, partial = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), suffix=".partial")
    with os.fdopen(fd, "w") as f:
        f.write(format_index(samples))
    os.replace(partial, path)
    return len(samples)


def parse_index(path: str, shard: str) -> List[List[tuple]]:
    """The samples an index file lists; ValueError if it is not one, or does not fit the shard."""
    with open(path) as f:
        header, *lines = f.read().splitlines()
    parts = header.split()
    if len(parts) != 2 or parts[0] != INDEX_VERSION or not parts[1].isdigit() or int(parts[1]) != len(lines):
        raise ValueError(f"{path!r} is not a {INDEX_VERSION} index")
    size, samples = storage.getsize(shard), []
    for line in lines:
        fields = line.split(" ")
        if len(fields) % 4:
            raise ValueError(f"{path!r}: a line is not `key offset size name` groups")
        sample = [(fields[k], int(fields[k + 1]), int(fields[k + 2]), fields[k + 3]) for k in range(0, len(fields), 4)]
        if any(offset + length > size for _, offset, length, _ in sample):
            raise ValueError(f"{path!r} points past the end of {shard!r}")
        samples.append(sample)
    return samples


def ensure_index(shard: str, cache_dir: Optional[str] = None) -> str:
    """The path of an up-to-date index of `shard`, written if missing or older than the shard.
    Beside the shard unless that folder is read-only (then the default cache) or cache_dir is given."""
    path = index_path(shard, cache_dir)
    if _fresh(path, shard):
        return path
    try:
        write_index(shard, path)
    except PermissionError:
        if cache_dir is not None:
            raise
        path = index_path(shard, default_cache_dir())
        if not _fresh(path, shard):
            write_index(shard, path)
    return path


def _fresh(path: str, shard: str) -> bool:
    if storage.is_url(shard):   # the name holds the ETag
        return os.path.isfile(path)
    return os.path.isfile(path) and os.path.getmtime(path) >= os.path.getmtime(shard)


# -- the source -----------------------------------------------------------------------------


class WebDatasetSource(ReadInBatches):
    """The samples of tar shards: where each image is (shard, offset, size, member name), and
    the labels. Each batch's images are read from the tars and fed to DALI (see above)."""

    def __init__(self, shards, image_keys: Sequence[str] = IMAGE_KEYS, label_key: Optional[str] = LABEL_KEY,
                 cache_dir: Optional[str] = None):
        self.shards = expand_shards(shards)
        self.image_keys = tuple(k.lower() for k in image_keys)
        self.index_paths = [ensure_index(s, cache_dir) for s in self.shards]
        rows, labels = [], []
        for number, (shard, path) in enumerate(zip(self.shards, self.index_paths)):
            try:
                samples = parse_index(path, shard)
            except (ValueError, UnicodeDecodeError):   # stale or damaged: made again, once
                write_index(shard, path)
                samples = parse_index(path, shard)
            shard_rows, shard_labels = self._shard_samples(number, samples, label_key)
            rows += shard_rows
            labels += shard_labels
        self.shard_of = np.array([r[0] for r in rows], dtype=np.int64)
        self.members = [r[1] for r in rows]   # (key, offset, size, name) of each sample's image
        self.labels = np.asarray(labels, dtype=np.int64)
        self.name = "webdataset"
        self.skipped: dict = {}                   # {shard:member: why} left out by screening
        self.max_image_pixels = PIL_RULE         # the limit its PIL decoding honours
        self.screened_with: Optional[tuple] = None

    def screened(self, max_image_pixels=PIL_RULE, on_error: str = "raise") -> "WebDatasetSource":
        """A copy holding only the samples screening keeps (sources/screening.py); itself if
        it was screened under these settings already."""
        if self.screened_with == (max_image_pixels, on_error):
            return self
        from .screening import screen_webdataset

        kept = screen_webdataset(copy.copy(self), max_image_pixels, on_error)
        kept.screened_with = (max_image_pixels, on_error)
        return kept

    def _shard_samples(self, number: int, samples, label_key):
        shard, rows, labels = self.shards[number], [], []
        cache = f"{self.index_paths[number]}.{label_key}.labels.npy" if storage.is_url(shard) and label_key else None
        known = _cached_labels(cache, len(samples))
        with _label_reader(shard, samples, label_key) if known is None else contextlib.nullcontext() as f:
            for k, sample in enumerate(samples):
                image = [m for m in sample if m[0].lower() in self.image_keys]
                if not image:
                    raise ValueError(f"sample {split_name(sample[0][3])[0]!r} of shard {shard!r} has no image "
                                     f"(keys {[m[0] for m in sample]}, expected one of {list(self.image_keys)}); "
                                     f"pass image_keys= or fix the shard")
                rows.append((number, image[0]))
                labels.append(int(known[k]) if known is not None else
                              _read_label(f, shard, [m for m in sample if m[0] == label_key]))
        if cache and known is None:   # beside the index (named by URL and ETag): read once per object
            np.save(cache, np.asarray(labels, dtype=np.int64))
        return rows, labels

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def fingerprint(self) -> str:
        names = "\n".join(os.path.basename(s) for s in self.shards).encode()
        return f"webdataset/{len(self)}/{zlib.crc32(names):08x}/{zlib.crc32(self.labels.tobytes()):08x}"

    def describe(self, i: int) -> str:
        return f"{self.shards[self.shard_of[i]]}:{self.members[i][3]}"

    def image_bytes(self, i: int, limit: Optional[int] = None) -> bytes:
        """Sample i's encoded image (its first `limit` bytes, if given)."""
        _, offset, size, _ = self.members[i]
        if storage.is_url(self.shards[self.shard_of[i]]):   # one ranged GET
            return storage.read_bytes(self.shards[self.shard_of[i]], offset, size if limit is None else
                                      min(size, limit))
        with open(self.shards[self.shard_of[i]], "rb") as f:
            f.seek(offset)
            return f.read(size if limit is None else min(size, limit))

    def pil_image(self, i: int):
        """Sample i decoded to RGB by PIL, as ImageFolder's loader decodes a file."""
        from PIL import Image

        from .screening import open_unchecked

        try:
            if self.max_image_pixels != PIL_RULE:   # a limit the user chose, applied
                return open_unchecked(self.image_bytes(i)).convert("RGB")
            return Image.open(io.BytesIO(self.image_bytes(i))).convert("RGB")
        except storage.StorageError:   # the store failed, not the image
            raise
        except Exception as e:  # PIL raises OSError, SyntaxError, ValueError, ... for bad data
            raise ImageDecodeError(f"cannot decode image {self.describe(i)!r} ({type(e).__name__}: {e}); "
                                   f"remove or replace the sample", path=self.describe(i)) from e

    def epoch_sampler(self, n: int, *, shuffle: bool, seed, rank, world_size, local_rank,
                      generator=None) -> "ShardOrderSampler":
        """loaders.sampler_for's hook: the order a webdataset reader can read (see above)."""
        # settled now only when given, as distributed.epoch_sampler does (launchers build loaders early)
        shard = None if rank is None and world_size is None else resolve_shard(rank, world_size, local_rank)
        return ShardOrderSampler(n, shuffle=shuffle, seed=seed, shard=shard, local_rank=local_rank,
                                 shard_of=self.shard_of, generator=generator)

    def read(self, order, batch_size: int, device: str):
        """Batch after batch of `order` (an EpochOrder the loader sets each epoch): the image
        members' bytes and the labels, fed by external_source."""
        from nvidia.dali import fn, types

        encoded, labels = fn.external_source(source=_MemberFeeder(self, order, batch_size), num_outputs=2,
                                             batch=True, batch_info=True, dtype=[types.UINT8, types.INT64])
        return encoded_images(encoded, device), labels

    def batch_bytes(self, indices: np.ndarray) -> List[np.ndarray]:
        """The encoded images of samples `indices`, each shard opened once per batch."""
        out: List[Optional[np.ndarray]] = [None] * len(indices)
        for number in np.unique(self.shard_of[indices]):
            if storage.is_url(self.shards[number]):   # ranged GETs, neighbours coalesced, in parallel
                ks = np.flatnonzero(self.shard_of[indices] == number)
                parts = storage.read_ranges(self.shards[number], [self.members[indices[k]][1:3] for k in ks])
                for k, data in zip(ks, parts):
                    out[k] = np.frombuffer(data, dtype=np.uint8)
                continue
            with open(self.shards[number], "rb") as f:
                for k in np.flatnonzero(self.shard_of[indices] == number):
                    _, offset, size, _ = self.members[indices[k]]
                    f.seek(offset)
                    out[k] = np.frombuffer(f.read(size), dtype=np.uint8)
        return out


def _label_reader(shard: str, samples, label_key):
    """The shard opened for its label members: a file, or an object's label members fetched
    together (ranged GETs in parallel)."""
    if not storage.is_url(shard):
        return open(shard, "rb")
    wanted = [m[1:3] for sample in samples for m in sample if m[0] == label_key and m[2] <= MAX_LABEL_BYTES]
    return storage.PrefetchedFile(shard, wanted)


def _cached_labels(path: Optional[str], n: int) -> Optional[np.ndarray]:
    if path is None or not os.path.isfile(path):
        return None
    try:
        labels = np.load(path, allow_pickle=False)
    except (OSError, ValueError):   # damaged: read again
        return None
    return labels if labels.shape == (n,) and labels.dtype == np.int64 else None


def _read_label(f, shard: str, members) -> int:
    if not members:
        return -1
    _, offset, size, name = members[0]
    if size > MAX_LABEL_BYTES:   # read whole, a crafted member could take any amount of memory
        raise ValueError(f"label {name!r} of shard {shard!r} is {size} bytes, not a class number (ASCII digits); "
                         f"fix the shard or pass label_key=None")
    f.seek(offset)
    text = f.read(size).strip()
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"label {name!r} of shard {shard!r} is {text[:20]!r}, not an integer; fix the "
                         f"shard or pass label_key=None") from None


class _MemberFeeder:
    """external_source callback: the encoded images and labels of batch `info.iteration`."""

    def __init__(self, source: WebDatasetSource, order, batch_size: int):
        self.source, self.order, self.batch_size = source, order, batch_size

    def __call__(self, info):
        indices = self.order.batch(info.iteration, self.batch_size)
        return self.source.batch_bytes(indices), self.source.labels[indices]


class ShardOrderSampler(EpochSampler):
    """EpochSampler's samples per rank and epoch, in an order a shard reader can follow:
    training groups them by shard (shards in a seeded order per epoch); validation's
    contiguous parts are in shard order already."""

    def __init__(self, n: int, *, shuffle: bool, seed, shard, shard_of: np.ndarray, local_rank=None,
                 generator=None):
        super().__init__(n, shuffle=shuffle, seed=seed, shard=shard, local_rank=local_rank, generator=generator)
        self.shard_of = shard_of

    def indices(self, epoch: int) -> np.ndarray:
        order = super().indices(epoch)
        if not self.shuffle:
            return order
        shards = int(self.shard_of.max()) + 1
        visit = np.random.default_rng([self.seed, epoch, SHARD_ORDER_STREAM]).permutation(shards)
        position = np.empty(shards, dtype=np.int64)
        position[visit] = np.arange(shards)
        return order[np.argsort(position[self.shard_of[order]], kind="stable")]


def pil_failure(source, i: int) -> Optional[str]:
    """Why PIL cannot decode sample i of a source whose pil_image raises ImageDecodeError, or None."""
    try:
        source.pil_image(i)
    except ImageDecodeError as e:
        return str(e.__cause__)
    return None


def name_the_sample(source, batch_size: int):
    """DaliLoader's explain_failure hook for a source of encoded samples (`describe(i)` names
    one: a tar member, a dataset's row): the sample behind a failed batch, decoded by PIL."""

    def explain(failure: Exception, remaining: np.ndarray) -> Optional[Exception]:
        suspects = remaining[:SUSPECT_BATCHES * batch_size]
        culprit = next((int(i) for i in suspects if pil_failure(source, int(i))), None)
        if culprit is None:
            return None
        where = source.describe(culprit)
        return ImageDecodeError(f"cannot decode image {where!r} ({pil_failure(source, culprit)}); remove "
                                f"or replace the sample. DALI said: {dali_reason(str(failure))}", path=where)

    return explain
