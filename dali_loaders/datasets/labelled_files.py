"""Image files whose labels are more than one integer from a folder name: labels from a
callable on the path, or from a label file of text or several integers per line; a label may
be a sequence (a captcha's characters), served as int64 (B, L) padded, with the lengths (B,).

    loader = get_files_iter_dali("captchas/", 64, True, label_fn=lambda p: Path(p).stem,
                                 alphabet="0123456789abcdefghijklmnopqrstuvwxyz", transform=...)
    for images, labels, lengths in loader:   # labels (B, L), lengths (B,): CTC's targets
        ...

DALI reads each sample's index as its label; the loader looks the real label up in a table
(sources/label_table.py), so order, sharding and resume are the image loaders' own.
"""
import io
import os
import zlib
from typing import Callable, List, Optional, Sequence, Union

import numpy as np

from .. import recipes
from ..loader import DaliLoader, TorchLoader
from ..loader.checks import check_count
from ..loader.fallback import dali_available, warn_fallback
from ..sources.label_table import LabelTable
from ..sources.files import FileSource
from ..sources.image_files import is_image
from ..sources.storage import commonpath, is_url, isdir, isfile, join, list_tree, normpath, read_text
from ._common import loader_over

Label = Union[int, str, Sequence[int]]


def list_images(files) -> List[str]:
    """A folder's images (recursively, sorted) or the given paths, each checked to exist."""
    if isinstance(files, (str, os.PathLike)):
        root = os.fspath(files)
        if not isdir(root):
            raise FileNotFoundError(f"image folder {root!r} does not exist")
        found = sorted(url for url in list_tree(root) if is_image(url)) if is_url(root) else \
            sorted(os.path.join(here, name) for here, _, names in os.walk(root) for name in names if is_image(name))
        if not found:
            raise FileNotFoundError(f"no images under {root!r}")
        return found
    paths = [os.fspath(p) for p in files]
    missing = [p for p in paths if not isfile(p)]
    if missing or not paths:
        raise FileNotFoundError(f"image file {missing[0]!r} does not exist" if missing else "files= lists no images")
    return paths


def read_label_file(root: str, label_file: str) -> Callable[[str], str]:
    """label_fn for a file of `relative/path label...` lines: the label is the rest of the
    line (text, or integers separated by spaces); paths hold no spaces."""
    labels = {}
    with io.StringIO(read_text(label_file)) as f:   # local or a URL
        for number, line in enumerate(f, 1):
            parts = line.split(maxsplit=1)
            if not parts:
                continue
            if len(parts) != 2:
                raise ValueError(f"{label_file}:{number}: expected `relative/path label`, got {line.strip()!r}")
            labels[normpath(join(root, parts[0]))] = parts[1].strip()

    def lookup(path: str) -> str:
        try:
            return labels[normpath(path)]
        except KeyError:
            raise ValueError(f"image {path!r} has no line in label file {label_file!r}") from None
    return lookup


def as_ints(label: Label, path: str, alphabet: Optional[str]) -> List[int]:
    """A label as its integers: text through `alphabet` (character k is k + 1; 0 stays CTC's
    blank and the padding), integers in a string split on spaces."""
    if isinstance(label, (int, np.integer)) and not isinstance(label, bool):
        values = [int(label)]
    elif isinstance(label, str) and label.replace(" ", "").lstrip("-").isdigit() and alphabet is None:
        values = [int(token) for token in label.split()]
    elif isinstance(label, str):
        if alphabet is None:
            raise ValueError(f"the label of {path!r} is text ({label!r}): pass alphabet= to number its characters")
        unknown = sorted(set(label) - set(alphabet))
        if unknown:
            raise ValueError(f"the label {label!r} of {path!r} has characters {unknown} that are not in alphabet=")
        values = [alphabet.index(c) + 1 for c in label]
    else:
        values = [int(v) for v in label]
    if any(v < 0 for v in values):
        raise ValueError(f"the label of {path!r} has a negative integer: {values}")
    return values


class LabelledFiles(FileSource):
    """Files whose DALI label is their index; `label_table` holds the real labels."""

    def __init__(self, paths: List[str], label_fn: Callable[[str], Label], label_length: Optional[int],
                 alphabet: Optional[str], pad_label: int):
        values = [as_ints(label_fn(p), p, alphabet) for p in paths]
        sequences = label_length is not None or alphabet is not None or any(len(v) != 1 for v in values)
        super().__init__(paths, np.arange(len(paths)), "files")
        if not sequences:
            self.label_table = LabelTable(np.array([v[0] for v in values]))
            return
        length = label_length or max(len(v) for v in values)
        check_count("label_length", length, 1, " (the longest label)")
        too_long = [p for p, v in zip(paths, values) if len(v) > length]
        if too_long:
            raise ValueError(f"the label of {too_long[0]!r} is longer than label_length={length}")
        padded = np.full((len(paths), length), pad_label, dtype=np.int64)
        for row, v in zip(padded, values):
            row[:len(v)] = v
        self.label_table = LabelTable(padded, np.array([len(v) for v in values]))

    @property
    def fingerprint(self) -> str:
        listing = "\n".join(self.files).encode() + self.label_table.labels.numpy().tobytes()
        return f"files/{len(self)}/{zlib.crc32(listing):08x}"


def _source(files, label_fn, label_file, label_length, alphabet, pad_label) -> LabelledFiles:
    paths = list_images(files)
    if (label_fn is None) == (label_file is None):
        raise ValueError("pass exactly one of label_fn= (a callable on each image's path) and label_file=")
    if label_file is not None:
        root = os.fspath(files) if isinstance(files, (str, os.PathLike)) else commonpath(paths)
        label_fn = read_label_file(root, label_file)
    return LabelledFiles(paths, label_fn, label_length, alphabet, pad_label)


def get_files_iter_dali(files, batch_size, train, num_threads=4, *, label_fn=None, label_file=None,
                        label_length=None, alphabet=None, pad_label=0, fallback=True, **options):
    """A DataLoader-like iterator on DALI over image `files` (a folder, read recursively, or a
    list of paths), each labelled by `label_fn(path)` or by `label_file` (lines of
    `relative/path label`, relative to the folder (a list: to its files' common folder), with
    no spaces in the path; the label text, or integers separated by spaces).

    A label is an int, a sequence of ints, or text numbered by `alphabet` (its k-th character
    is k + 1). One int per image: batches are (images, labels (B,)). Otherwise (or with
    `label_length` or `alphabet`): (images, labels, lengths), labels int64 (B, L) padded
    with `pad_label` to `label_length` (default: the longest label), lengths int64 (B,).
    `transform`: default recipes.imagenet(train). Every other keyword is DaliLoader's.
    """
    if not dali_available():
        warn_fallback(fallback)
        return get_files_iter_torch(files, batch_size, train, num_threads, label_fn=label_fn, label_file=label_file,
                                    label_length=label_length, alphabet=alphabet, pad_label=pad_label, **options)
    source = _source(files, label_fn, label_file, label_length, alphabet, pad_label)
    return loader_over(DaliLoader, source, batch_size, num_threads, train, lambda: recipes.imagenet(train), options)


def get_files_iter_torch(files, batch_size, train, num_threads=4, *, label_fn=None, label_file=None,
                         label_length=None, alphabet=None, pad_label=0, **options):
    """The torchvision twin of get_files_iter_dali (same arguments, order and labels)."""
    source = _source(files, label_fn, label_file, label_length, alphabet, pad_label)
    return loader_over(TorchLoader, source, batch_size, num_threads, train, lambda: recipes.imagenet(train), options)
