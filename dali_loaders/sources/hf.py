"""Hugging Face `datasets.Dataset`s as sources: an `Image()` column's encoded bytes, fed from the
Arrow buffers to DALI's decoder.

An `Image()` column is stored as a struct {bytes: binary, path: string}. Its bytes stay where
Arrow holds them (memory-mapped from the cache files, or in memory): each chunk's offsets and
data buffer are read once as numpy arrays, so a row is a (chunk, start, end) triple and a batch
is a list of numpy views, the one list DALI's external_source needs. Nothing is decoded in
Python. A row holding a path instead of bytes is read as a file (all rows: by DALI's file
reader). The label is a `ClassLabel` column (its names are `classes`) or an integer one.

The rows are the dataset's as `ds[i]` indexes them: a `select`, `shuffle` or `train_test_split`
(an indices mapping over the table) is followed. A dataset whose own transform (`set_transform`,
`with_transform`) makes its items is not read here: that transform runs in Python, so the loader
takes the Python path and says so.
"""
import copy
import hashlib
import io
import os
import zlib
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

from .files import encoded_images, read_files
from .pil_images import PIL_RULE, ImageDecodeError, open_unchecked
from .protocol import ReadInBatches
from .screen_cache import STAMP_WIDTH, cache_dir
from .screening import HEADER_BYTES, screen_items
from .webdataset import name_the_sample

LABEL_NAMES = ("label", "labels")   # an integer column taken as the label when no ClassLabel is
STAMP_BYTES = 8                      # bytes of a row's head, middle and tail in its screening stamp


class NotReadable(ValueError):
    """Why a datasets.Dataset cannot be read as a source (a short reason naming the column)."""


def reading(dataset) -> Optional[Tuple[Optional["HuggingFaceSource"], Optional[Callable], str]]:
    """For sources/torchvision.adapt: None if `dataset` is not one of the `datasets` package's;
    else (source, None, "") where DALI reads it, or (None, its own transform, why) where the
    Python path does. A streaming IterableDataset or a DatasetDict is refused (TypeError)."""
    if type(dataset).__module__.split(".")[0] != "datasets":
        return None
    import datasets

    refuse_unreadable(dataset)
    if type(dataset) is not datasets.Dataset:   # a subclass may change __getitem__: not ours to read
        return None
    own = own_transform(dataset)
    if own is not None:
        return None, own, OWN_TRANSFORM
    try:
        return HuggingFaceSource(dataset), None, ""
    except NotReadable as why:
        return None, None, f"datasets.Dataset: {why}"


OWN_TRANSFORM = ("the Dataset's own transform (set_transform / with_transform) runs in Python on each batch of "
                 "rows; for DALI to read its images, pass ds.with_format(None) and the recipe as transform=")


def refuse_unreadable(dataset) -> None:
    """A TypeError saying why, for the `datasets` objects no loader reads by index."""
    import datasets

    if isinstance(dataset, (datasets.IterableDataset, datasets.IterableDatasetDict)):
        raise TypeError("a streaming datasets.IterableDataset has no length and no random access, which "
                        "shuffling, sharding across ranks and resuming need: load it without streaming=True "
                        "(its files are memory-mapped, not read into memory)")
    if isinstance(dataset, datasets.DatasetDict):
        raise TypeError(f"a DatasetDict holds splits ({', '.join(dataset)}): pass one, "
                        f"e.g. ds[{next(iter(dataset))!r}]")
    if not isinstance(dataset, datasets.Dataset):
        raise TypeError(f"HuggingFaceSource reads a datasets.Dataset, not a {type(dataset).__name__}")


def own_transform(dataset) -> Optional[Callable]:
    """The transform a Dataset's set_transform / with_transform gave it, or None."""
    formatting = dataset.format
    return formatting.get("format_kwargs", {}).get("transform") if formatting.get("type") == "custom" else None


# -- the columns ------------------------------------------------------------------------


def image_column_of(features, image_column: Optional[str]) -> str:
    """The Image() column: `image_column`, or the only one."""
    from datasets import Image

    images = [name for name, feature in features.items() if isinstance(feature, Image)]
    if image_column is not None:
        if image_column not in images:
            raise NotReadable(f"image_column={image_column!r} is not an Image() column (those are {images})")
        chosen = image_column
    elif len(images) != 1:
        raise NotReadable("it has no Image() column" if not images else
                          f"it has several Image() columns {images}: choose one with "
                          f"HuggingFaceSource(ds, image_column=...)")
    else:
        chosen = images[0]
    mode = getattr(features[chosen], "mode", None)
    if mode not in (None, "RGB"):
        raise NotReadable(f"its Image() column {chosen!r} converts images to mode {mode!r}; DALI decodes to RGB")
    return chosen


def label_column_of(features, label_column: Optional[str]) -> Optional[str]:
    """The label column: `label_column`, the only ClassLabel, or an integer `label`/`labels`;
    None if there is none (the samples are unlabelled: -1)."""
    from datasets import ClassLabel, Value

    def integer(feature) -> bool:
        return isinstance(feature, ClassLabel) or (isinstance(feature, Value) and feature.dtype.startswith(("int", "uint")))

    if label_column is not None:
        if label_column not in features or not integer(features[label_column]):
            raise NotReadable(f"label_column={label_column!r} is not a ClassLabel or integer column (the columns: "
                              f"{list(features)})")
        return label_column
    named = [name for name, feature in features.items() if isinstance(feature, ClassLabel)]
    if len(named) > 1:
        raise NotReadable(f"it has several ClassLabel columns {named}: choose one with "
                          f"HuggingFaceSource(ds, label_column=...)")
    named = named or [name for name in LABEL_NAMES if name in features and integer(features[name])][:1]
    return named[0] if named else None


# -- the bytes where Arrow holds them ----------------------------------------------------


class ArrowImages:
    """An Image() column's rows (the table's, before any indices mapping): per row its chunk,
    start and end in that chunk's data buffer; a row without bytes holds a path (start -1)."""

    def __init__(self, table, column: str):
        import pyarrow as pa

        self.buffers: List[np.ndarray] = []
        chunks, starts, ends, paths = [], [], [], {}
        row = 0
        for number, chunk in enumerate(table.column(column).chunks):
            if not pa.types.is_struct(chunk.type) or chunk.type.get_field_index("bytes") < 0:
                raise NotReadable(f"its column {column!r} is stored as {chunk.type}, not Image()'s "
                                  f"struct<bytes, path>")
            fields = dict(zip([chunk.type.field(k).name for k in range(chunk.type.num_fields)], chunk.flatten()))
            encoded = fields["bytes"]
            if not (pa.types.is_binary(encoded.type) or pa.types.is_large_binary(encoded.type)):
                raise NotReadable(f"the bytes of its column {column!r} are {encoded.type}, not binary")
            offsets_buffer, data_buffer = encoded.buffers()[1:3]
            offset_type = np.int32 if pa.types.is_binary(encoded.type) else np.int64
            offsets = np.frombuffer(offsets_buffer, dtype=offset_type, count=encoded.offset + len(encoded) + 1)
            offsets = offsets[encoded.offset:].astype(np.int64)
            start, end = offsets[:-1].copy(), offsets[1:].copy()
            missing = np.flatnonzero(encoded.is_null().to_numpy(zero_copy_only=False))
            if len(missing):
                start[missing] = end[missing] = -1
                paths.update(self._paths(fields.get("path"), missing, row, column))
            self.buffers.append(np.empty(0, np.uint8) if data_buffer is None else
                                np.frombuffer(data_buffer, dtype=np.uint8))
            chunks.append(np.full(len(encoded), number, dtype=np.int32))
            starts.append(start)
            ends.append(end)
            row += len(encoded)
        self.chunk = np.concatenate(chunks) if chunks else np.zeros(0, np.int32)
        self.start = np.concatenate(starts) if starts else np.zeros(0, np.int64)
        self.end = np.concatenate(ends) if ends else np.zeros(0, np.int64)
        self.paths: Dict[int, str] = paths   # table row -> path, of the rows without bytes

    @staticmethod
    def _paths(column_paths, missing: np.ndarray, first_row: int, column: str) -> Dict[int, str]:
        found = column_paths.take(missing).to_pylist() if column_paths is not None else [None] * len(missing)
        paths = {}
        for k, path in zip(missing.tolist(), found):
            if path is None:
                raise NotReadable(f"row {first_row + k} of its column {column!r} holds neither bytes nor a path")
            if "://" in path:
                raise NotReadable(f"its column {column!r} holds paths that are not local files ({path!r})")
            paths[first_row + k] = path
        return paths

    def view(self, row: int) -> np.ndarray:
        """The encoded bytes of a row that holds them (a view, no copy)."""
        return self.buffers[self.chunk[row]][self.start[row]:self.end[row]]

    def stamps(self, rows: np.ndarray) -> np.ndarray:
        """(length, head, middle, tail) of each row's bytes, 8 bytes each as an int64, without
        a Python step per row; a path row's is its file's (size, mtime_ns, 0, 0)."""
        out = np.zeros((len(rows), STAMP_WIDTH), dtype=np.int64)
        start, end, chunk = self.start[rows], self.end[rows], self.chunk[rows]
        out[:, 0] = end - start
        by_chunk = np.argsort(chunk, kind="stable")   # one pass per chunk over its own rows only
        numbers, firsts = np.unique(chunk[by_chunk], return_index=True)
        for number, group in zip(numbers.tolist(), np.split(by_chunk, firsts[1:])):
            mine = group[start[group] >= 0]
            length = end[mine] - start[mine]
            for column, at in ((1, np.zeros_like(length)), (2, length // 2), (3, length - STAMP_BYTES)):
                out[mine, column] = _words(self.buffers[number], start[mine] + np.maximum(at, 0), end[mine])
        for k in np.flatnonzero(start < 0).tolist():
            path = self.paths[int(rows[k])]
            try:
                stat = os.stat(path)
            except OSError as e:
                raise FileNotFoundError(f"image file {path!r} (table row {int(rows[k])}) cannot be read: "
                                        f"{e.strerror}") from None
            out[k, :2] = stat.st_size, stat.st_mtime_ns
        return out


def _words(data: np.ndarray, at: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The STAMP_BYTES bytes of `data` from each of `at` (zeros past `end`), as int64s."""
    where = at[:, None] + np.arange(STAMP_BYTES)
    inside = where < end[:, None]
    picked = data[np.where(inside, where, 0)] if len(data) else np.zeros(where.shape, np.uint8)
    return np.ascontiguousarray(np.where(inside, picked, 0).astype(np.uint8)).view(np.int64)[:, 0]


# -- the source --------------------------------------------------------------------------


class HuggingFaceSource(ReadInBatches):
    """A datasets.Dataset's images (an Image() column) and labels (a ClassLabel or integer
    column; -1 where it has none), in its rows' order, read by DALI (see the module)."""

    def __init__(self, dataset, image_column: Optional[str] = None, label_column: Optional[str] = None):
        refuse_unreadable(dataset)
        if own_transform(dataset) is not None:   # it would be left out unsaid
            raise ValueError(f"HuggingFaceSource: {OWN_TRANSFORM}")
        features = dataset.features
        self.dataset = dataset
        self.image_column = image_column_of(features, image_column)
        self.label_column = label_column_of(features, label_column)
        label_feature = features[self.label_column] if self.label_column is not None else None
        self.classes = list(label_feature.names) if hasattr(label_feature, "names") else None
        mapping = getattr(dataset, "_indices", None)   # datasets' own: select/shuffle over the table
        self.table_rows = (np.arange(dataset.data.num_rows, dtype=np.int64) if mapping is None else
                           mapping.column(0).to_numpy().astype(np.int64))
        self.rows = np.arange(len(self.table_rows), dtype=np.int64)   # ds[i]'s i: named in messages
        self.labels = self._labels(dataset.data)
        self._images = ArrowImages(dataset.data, self.image_column)
        self.skipped: dict = {}                  # {name: why} left out by screening
        self.max_image_pixels = PIL_RULE         # the limit its PIL decoding honours
        self.screened_with: Optional[tuple] = None
        self._fingerprint: Optional[str] = None

    def _labels(self, table) -> np.ndarray:
        if self.label_column is None:
            return np.full(len(self.table_rows), -1, dtype=np.int64)
        column = table.column(self.label_column)
        if column.null_count:
            raise NotReadable(f"its label column {self.label_column!r} holds {column.null_count} empty value(s)")
        return column.to_numpy().astype(np.int64)[self.table_rows]

    # Pickled (DataLoader's spawned workers) as the dataset, which pickles its memory-mapped
    # files by path: the numpy views of its buffers are made again, never copied.
    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_images")
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._images = ArrowImages(self.dataset.data, self.image_column)

    def __len__(self) -> int:
        return len(self.table_rows)

    @property
    def fingerprint(self) -> str:
        """Changes when the rows, what they hold or their labels do (made once: a state_dict reads it)."""
        if self._fingerprint is None:
            stamps = self._images.stamps(self.table_rows)
            self._fingerprint = (f"hf/{self.image_column}/{len(self)}/{zlib.crc32(stamps.tobytes()):08x}/"
                                 f"{zlib.crc32(self.labels.tobytes()):08x}")
        return self._fingerprint

    def subset(self, picked: np.ndarray) -> "HuggingFaceSource":
        """The samples at `picked` (torch's Subset of the dataset), a source of their own."""
        return self._cut(np.asarray(picked, dtype=np.int64))

    def _cut(self, keep: np.ndarray) -> "HuggingFaceSource":
        cut = copy.copy(self)
        cut.table_rows, cut.rows, cut.labels = self.table_rows[keep], self.rows[keep], self.labels[keep]
        cut._fingerprint = None
        return cut

    def describe(self, i: int) -> str:
        """Sample i as the user finds it: `column[row]` (ds[row][column]), and its path if it has one."""
        path = self._images.paths.get(int(self.table_rows[i]))
        return f"{self.image_column}[{int(self.rows[i])}]" + (f" ({path})" if path is not None else "")

    def encoded(self, i: int, limit: Optional[int] = None):
        """Sample i's encoded image as PIL opens it: bytes (the first `limit`, if given), or its path."""
        row = int(self.table_rows[i])
        if row in self._images.paths:
            return self._images.paths[row]
        view = self._images.view(row)
        return (view if limit is None else view[:limit]).tobytes()

    def pil_image(self, i: int):
        """Sample i decoded to RGB by PIL, as Image() decodes it and a recipe's convert("RGB") makes it."""
        from PIL import Image

        encoded = self.encoded(i)
        if not isinstance(encoded, bytes):   # a path row's file
            with open(encoded, "rb") as f:
                encoded = f.read()
        try:
            if self.max_image_pixels != PIL_RULE:   # a limit the user chose, applied
                return open_unchecked(encoded).convert("RGB")
            return Image.open(io.BytesIO(encoded)).convert("RGB")
        except Exception as e:  # PIL raises OSError, SyntaxError, ValueError, ... for bad data
            raise ImageDecodeError(f"cannot decode image {self.describe(i)!r} ({type(e).__name__}: {e}); remove "
                                   f"or replace the row", path=self.describe(i)) from e

    def host_labels(self, indices: np.ndarray) -> np.ndarray:
        return self.labels[indices]

    def read(self, order, batch_size: int, device: str, labels: bool = True):
        """Batch after batch of `order` (an EpochOrder the loader sets each epoch): the rows'
        encoded bytes fed by external_source (labels=False: the labels left to host_labels)."""
        from nvidia.dali import fn, types

        names = len(self) > 0 and bool(np.all(self._images.start[self.table_rows] < 0))
        feeder = _RowFeeder(self.batch_names if names else self.batch_bytes, self.labels, order, batch_size, labels)
        # Views of the Arrow buffers (which this source keeps alive) are handed to DALI as they
        # are, not copied in this thread; fresh arrays (a path row's file, the labels) are copied.
        outputs = fn.external_source(source=feeder, num_outputs=1 + labels, batch=True, batch_info=True,
                                     dtype=[types.UINT8, types.INT64][:1 + labels],
                                     no_copy=not labels and not self._images.paths)
        encoded = read_files(outputs[0]) if names else outputs[0]   # only paths: DALI reads the files
        return encoded_images(encoded, device), outputs[1] if labels else None

    def batch_bytes(self, indices: np.ndarray) -> List[np.ndarray]:
        """The encoded images of samples `indices`: views of the Arrow buffers, path rows read."""
        rows = self.table_rows[indices]
        images = self._images
        buffers = images.buffers
        out = [buffers[c][s:e] for c, s, e in zip(images.chunk[rows].tolist(), images.start[rows].tolist(),
                                                   images.end[rows].tolist())]
        if images.paths:
            for k in np.flatnonzero(images.start[rows] < 0).tolist():
                out[k] = np.fromfile(images.paths[int(rows[k])], dtype=np.uint8)
        return out

    def batch_names(self, indices: np.ndarray) -> List[np.ndarray]:
        """The file names (as bytes) of samples `indices`, all of them rows that hold paths."""
        return [np.frombuffer(os.fsencode(self._images.paths[row]), dtype=np.uint8)
                for row in self.table_rows[indices].tolist()]

    def screened(self, max_image_pixels=PIL_RULE, on_error: str = "raise") -> "HuggingFaceSource":
        """A copy holding only the rows screening keeps (sources/screening.py: header reads,
        cached by the rows' stamps), with `skipped`; itself if screened under these settings."""
        if self.screened_with == (max_image_pixels, on_error):
            return self
        names = [self.describe(i) for i in range(len(self))]
        number = {name: i for i, name in enumerate(names)}
        stamps = self._images.stamps(self.table_rows)

        def read(name: str, whole: bool):
            return self.encoded(number[name], None if whole else HEADER_BYTES)

        found = screen_items(names, stamps, read, self._cache_file(stamps), max_image_pixels, on_error)
        kept = self._cut(np.asarray(found.kept, dtype=np.int64)) if found.skipped else copy.copy(self)
        kept.skipped = {**self.skipped, **found.skipped}
        kept.max_image_pixels, kept.screened_with = max_image_pixels, (max_image_pixels, on_error)
        return kept

    def _cache_file(self, stamps: np.ndarray) -> str:
        """Screening's cache: named by the column and what its rows hold, in table order (a
        dataset shuffled again shares it)."""
        ordered = np.argsort(self.table_rows, kind="stable")
        digest = hashlib.sha1(self.table_rows[ordered].tobytes() + stamps[ordered].tobytes()).hexdigest()[:16]
        return os.path.join(cache_dir(), f"hf-{self.image_column}-{digest}.npz")

    def name_failure(self, batch_size: int):
        """The loader's hook naming the row behind a failed batch (PIL decodes the suspects)."""
        return name_the_sample(self, batch_size)


class _RowFeeder:
    """external_source callback: the images (`batch(indices)`: bytes or file names) and the
    labels (unless the loader reads them itself) of batch `info.iteration`."""

    def __init__(self, batch: Callable, labels: np.ndarray, order, batch_size: int, with_labels: bool):
        self.batch, self.labels, self.order, self.batch_size = batch, labels, order, batch_size
        self.with_labels = with_labels

    def __call__(self, info):
        indices = self.order.batch(info.iteration, self.batch_size)
        images = self.batch(indices)
        return (images, self.labels[indices]) if self.with_labels else (images,)
