"""Encoded image files and their labels, read by fn.io.file.read and decoded by DALI."""
import copy
import os
import zlib
from typing import List, Optional, Sequence

import numpy as np

from .. import transforms
from .pil_images import PIL_RULE, load_rgb
from .protocol import ReadInBatches
from .storage import BATCH_DEADLINE_S, is_url, isdir, isfile
from .url_reads import UrlBytesFeeder, reads_ahead


class FileSource(ReadInBatches):
    """Encoded image files and their labels; decoded to RGB as PIL's convert("RGB") does."""

    def __init__(self, files: List[str], labels: Sequence[int], name: str, classes: Optional[List[str]] = None,
                 kept_positions: Optional[np.ndarray] = None):
        self.files, self.labels, self.name = list(files), np.asarray(labels, dtype=np.int64), name
        self.classes = classes
        self.skipped: dict = {}              # {path: why} left out by screening
        self.max_image_pixels = PIL_RULE     # the limit its PIL loading honours
        self.screened_with: Optional[tuple] = None   # (max_image_pixels, on_error) of its screening
        # cut from a dataset (a Subset), or screened with files left out: each file's index before
        self.kept_positions: Optional[np.ndarray] = kept_positions

    def screened(self, max_image_pixels=PIL_RULE, on_error: str = "raise") -> "FileSource":
        """A copy holding only the files screening keeps (sources/screening.py), with `skipped`;
        itself if it was screened under these settings already."""
        if self.screened_with == (max_image_pixels, on_error):
            return self
        from .screening import screen

        found = screen(self.files, max_image_pixels, on_error)
        kept = self.cut(np.asarray(found.kept, dtype=np.int64))
        if found.skipped:
            before = self.kept_positions if self.kept_positions is not None else np.arange(len(self.files))
            kept.kept_positions = before[np.asarray(found.kept, dtype=np.int64)]
        kept.skipped = {**self.skipped, **found.skipped}
        kept.max_image_pixels, kept.screened_with = max_image_pixels, (max_image_pixels, on_error)
        return kept

    def cut(self, keep: np.ndarray) -> "FileSource":
        """A copy of this source (its class, table and settings) holding the files at positions
        `keep`, each with its label."""
        kept = copy.copy(self)
        kept.__dict__.pop("fingerprint", None)   # a cached fingerprint is of the files before
        kept.files, kept.labels = [self.files[i] for i in keep], self.labels[keep]
        return kept

    def __len__(self) -> int:
        return len(self.files)

    @property
    def fingerprint(self) -> str:
        listing = "\n".join(self.files).encode() + self.labels.tobytes()
        return f"{self.name}/{len(self)}/{zlib.crc32(listing):08x}"

    @property
    def read_timeout(self) -> Optional[float]:
        """Seconds a batch may take: bounded where the files are URLs (a store may stop answering)."""
        return BATCH_DEADLINE_S if self.files and is_url(self.files[0]) else None

    def url_of(self, i: int) -> str:
        return self.files[i]

    def pil_image(self, i: int):
        return load_rgb(self.files[i], pil_bomb_check=self.max_image_pixels == PIL_RULE)

    def read(self, order, batch_size: int, device: str):
        """Batch after batch of `order` (an EpochOrder the loader sets each epoch): the file
        names and labels fed by external_source, the files read by fn.io.file.read."""
        from nvidia.dali import fn, types

        if self.read_timeout is not None and reads_ahead():   # URLs: one GET each, ahead (url_reads.py)
            encoded, labels = fn.external_source(source=UrlBytesFeeder(self.files, self.labels, order, batch_size),
                                                 num_outputs=2, batch=True, batch_info=True,
                                                 dtype=[types.UINT8, types.INT64])
            return encoded_images(encoded, device), labels
        names, labels = fn.external_source(source=_NameFeeder(self, order, batch_size), num_outputs=2, batch=True,
                                           batch_info=True, dtype=[types.UINT8, types.INT64])
        return encoded_images(read_files(names), device), labels


# fn.io.file.read's settings: plain reads. DALI's default maps each file into memory and
# unmaps it, one mapping per image, which on an H200 machine (16 cores) held the default train
# recipe to 15,116 images/s against 23,100 with plain reads (benchmarks/gpu_probe.py).
FILE_READ: dict = {"dont_use_mmap": True}


def read_files(names):
    """The files named by `names` (a DataNode of encoded paths), read by DALI: every source that
    hands DALI file names reads them here."""
    from nvidia.dali import fn

    return fn.io.file.read(names, **FILE_READ)


class _NameFeeder:
    """external_source callback: the file names (as bytes) and labels of batch `info.iteration`."""

    def __init__(self, source: FileSource, order, batch_size: int):
        self.order, self.batch_size, self.labels = order, batch_size, source.labels
        self.names = [np.frombuffer(os.fsencode(f), dtype=np.uint8) for f in source.files]

    def __call__(self, info):
        indices = self.order.batch(info.iteration, self.batch_size)
        return [self.names[i] for i in indices], self.labels[indices]


def encoded_images(encoded, device: str) -> transforms.Images:
    """Encoded files as the graph's Images: decoded to RGB when a step first needs pixels."""
    from nvidia.dali import fn, types

    shape = fn.peek_image_shape(encoded, dtype=types.INT32, adjust_orientation=False)
    images = transforms.Images(encoded, None, None, 3, device)
    images.with_size_vector(shape[0:2])
    images.encoded, images.decode_args = True, decode_args(device)
    return images


def decode_args(device: str) -> dict:
    """The decoder's settings: torchvision (PIL) ignores EXIF orientation and upsamples
    chroma smoothly, so the decoder does too."""
    from nvidia.dali import types

    return dict(device="mixed" if device == "gpu" else "cpu", output_type=types.RGB,
                jpeg_fancy_upsampling=True, adjust_orientation=False)


def require_file(path: str, what: str, fix: str) -> str:
    """`path`, or a FileNotFoundError naming it, what it is, and what to do."""
    if not isfile(path):
        raise FileNotFoundError(f"{what} {path!r} is missing; {fix}")
    return path


def require_folder(path: str, what: str, fix: str) -> str:
    if not isdir(path):
        raise FileNotFoundError(f"{what} {path!r} does not exist; {fix}")
    return path


class TabledFiles(FileSource):
    """Files whose labels are rows of `label_table` (labels that are not one integer: CelebA's
    attributes); each file's label is its row number there."""

    def __init__(self, files: List[str], label_table, name: str, classes: Optional[List[str]] = None):
        super().__init__(files, np.arange(len(files)), name, classes)
        self.label_table = label_table

    @property
    def fingerprint(self) -> str:
        listing = "\n".join(self.files).encode() + self.labels.tobytes() + self.label_table.labels.numpy().tobytes()
        return f"{self.name}/{len(self)}/{zlib.crc32(listing):08x}"
