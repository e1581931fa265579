"""STL-10 (the binary format): the reader, and the factories of both backends.

The file format, once: `<root>/stl10_binary/` holds train_X.bin, train_y.bin, test_X.bin,
test_y.bin and unlabeled_X.bin. An X file is N images of 3 x 96 x 96 bytes, each colour
plane stored column-major; a y file is N bytes, the labels 1..10. fold_indices.txt has ten
lines of train indices (the predefined folds). As torchvision's STL10: labels become 0..9,
`unlabeled` images get label -1, `train+unlabeled` is train then unlabeled, and `folds=k`
keeps line k's train images, in that line's order.
"""
import os

import numpy as np
import torch

from .. import recipes
from ..sources.arrays import ArraySource
from . import _common

FOLDER = "stl10_binary"
SPLITS = ("train", "test", "unlabeled", "train+unlabeled")
ALIASES = {"val": "test"}
SIDE = 96
IMAGE_BYTES = 3 * SIDE * SIDE


def _folder(root: str) -> str:
    return _common.find_folder(root, FOLDER, "test_X.bin", "STL-10 binary",
                                "train_X.bin, train_y.bin, test_X.bin, test_y.bin (unlabeled_X.bin)")


def read_images(path: str) -> np.ndarray:
    """(N, 96, 96, 3) uint8 from an X file: planes column-major, so (N, 3, x, y) -> (N, y, x, 3)."""
    _common.require_file(path, "STL-10 image file", "extract stl10_binary.tar.gz again")
    size = os.path.getsize(path)
    if size == 0 or size % IMAGE_BYTES:
        raise ValueError(f"{path!r} holds {size} bytes, not a whole number of {IMAGE_BYTES}-byte 96x96 RGB "
                         f"images: the file is truncated or damaged; extract it again")
    raw = np.fromfile(path, dtype=np.uint8).reshape(-1, 3, SIDE, SIDE)
    return np.ascontiguousarray(raw.transpose(0, 3, 2, 1))


def read_labels(path: str, n: int) -> np.ndarray:
    _common.require_file(path, "STL-10 label file", "extract stl10_binary.tar.gz again")
    labels = np.fromfile(path, dtype=np.uint8).astype(np.int64) - 1
    if len(labels) != n or (n and not (0 <= labels.min() and labels.max() < 10)):
        raise ValueError(f"{path!r} holds {len(labels)} labels in {labels.min() + 1 if n else '-'}.."
                         f"{labels.max() + 1 if n else '-'}, expected {n} (one per image) in 1..10: the "
                         f"file is damaged or from another download; extract it again")
    return labels


def read_fold(folder: str, fold: int, n_train: int) -> np.ndarray:
    path = _common.require_file(os.path.join(folder, "fold_indices.txt"), "STL-10 fold file",
                                 "extract stl10_binary.tar.gz again, or pass folds=None")
    lines = open(path).read().splitlines()
    try:
        indices = np.array(lines[fold].split(), dtype=np.int64)
    except (IndexError, ValueError):
        raise ValueError(f"{path!r}: line {fold + 1} is not a list of train indices (the file has "
                         f"{len(lines)} lines); extract it again") from None
    if len(indices) and not (0 <= indices.min() and indices.max() < n_train):
        raise ValueError(f"{path!r}: fold {fold} names images outside the {n_train} train images")
    return indices


def check_folds(folds):
    if folds is not None and (isinstance(folds, bool) or not isinstance(folds, int) or not 0 <= folds < 10):
        raise ValueError(f"folds must be None or an integer in [0, 10) (STL-10's ten folds), got {folds!r}")
    return folds


def stl10_source(root: str, split: str, folds=None) -> ArraySource:
    """One split in memory: images (N, 96, 96, 3) uint8, labels (N,) int64 (-1: unlabeled)."""
    check_folds(folds)
    folder, parts = _folder(root), []
    if split in ("train", "train+unlabeled", "test"):
        prefix = "test" if split == "test" else "train"
        images = read_images(os.path.join(folder, f"{prefix}_X.bin"))
        labels = read_labels(os.path.join(folder, f"{prefix}_y.bin"), len(images))
        if folds is not None and prefix == "train":
            keep = read_fold(folder, folds, len(images))
            images, labels = images[keep], labels[keep]
        parts.append((images, labels))
    if split in ("unlabeled", "train+unlabeled"):
        images = read_images(os.path.join(folder, "unlabeled_X.bin"))
        parts.append((images, np.full(len(images), -1, dtype=np.int64)))
    images = parts[0][0] if len(parts) == 1 else np.concatenate([p[0] for p in parts])
    labels = np.concatenate([p[1] for p in parts])
    return ArraySource(images, labels, f"stl10/{split}/{folds}")


STL10 = _common.DatasetSpec(
    name="stl10", splits=SPLITS, aliases=ALIASES, train_splits=("train", "unlabeled", "train+unlabeled"),
    source=stl10_source, recipe=lambda train: recipes.normalized("stl10"))


# -- the factories: the library's positional arguments, the dataset's own keywords, then DaliLoader's


def get_stl10_iter_dali(type, root, batch_size, num_threads=4, *, folds=None, fallback=True, **options):
    """A DataLoader-like STL-10 iterator on DALI: `for images, labels in loader`.

    `root` holds stl10_binary/; type is 'train', 'test' ('val' is accepted for it),
    'unlabeled' or 'train+unlabeled' (labels -1 for unlabeled images); `folds` picks one of
    the ten predefined train folds. `transform` is handed each 96x96 RGB PIL image, as
    torchvision's STL10 hands it; default recipes.normalized: float32 (B, 3, 96, 96).
    The other arguments as get_cifar_iter_dali's."""
    return _common.open_dali(STL10, type, root, batch_size, num_threads, fallback, options, folds=folds)


def get_stl10_iter_torch(type, root, batch_size, num_threads=4, *, folds=None, **options):
    """The twin of get_stl10_iter_dali. torchvision's STL10 refuses files whose md5 is not
    the published one (every file, every split), so the twin reads the same files the same
    way through SourceDataset, handing the transform the PIL image STL10 would."""
    return _common.open_torch(STL10, type, root, batch_size, num_threads, options, folds=folds)
