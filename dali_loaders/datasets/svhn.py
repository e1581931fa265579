"""SVHN (the cropped-digits format): the .mat reader, and the factories of both backends.

The file format, once: `<root>/<split>_32x32.mat` (split: train, test, extra), a MATLAB
file with "X", the images as (32, 32, 3, N) uint8, and "y", the labels as (N, 1), where
the digit 0 has label 10. torchvision reads them with scipy.io.loadmat and maps 10 to 0;
so do these loaders.
"""
import os

import numpy as np
import torch

from .. import recipes
from ..sources.arrays import ArraySource
from ..sources.formats import read_mat
from . import _common

SPLITS = ("train", "test", "extra")
ALIASES = {"val": "test"}


def svhn_source(root: str, split: str) -> ArraySource:
    """One split in memory: images (N, 32, 32, 3) uint8, labels (N,) int64 in 0..9."""
    _common.require_folder(root, "SVHN folder", "it must hold train_32x32.mat, test_32x32.mat "
                            "(and extra_32x32.mat), as torchvision's SVHN(root, download=True) leaves them")
    path = _common.require_file(os.path.join(root, f"{split}_32x32.mat"), "SVHN file",
                                 "download it (the cropped-digits format) into the folder")
    content = read_mat(path, ("X", "y"))
    images, labels = content["X"], content["y"].astype(np.int64).reshape(-1)
    if images.dtype != np.uint8 or images.ndim != 4 or images.shape[:3] != (32, 32, 3):
        raise ValueError(f"{path!r}: expected 'X' of shape (32, 32, 3, N) uint8, found {images.shape} "
                         f"{images.dtype}; re-download it")
    if images.shape[3] != len(labels):
        raise ValueError(f"{path!r}: {images.shape[3]} images but {len(labels)} labels; re-download it")
    labels[labels == 10] = 0
    return ArraySource(np.ascontiguousarray(images.transpose(3, 0, 1, 2)), labels, f"svhn/{split}")


SVHN = _common.DatasetSpec(
    name="svhn", splits=SPLITS, aliases=ALIASES, train_splits=("train", "extra"), source=svhn_source,
    recipe=lambda train: recipes.normalized("svhn"))


# -- the factories: the library's positional arguments, the dataset's own keywords, then DaliLoader's


def get_svhn_iter_dali(type, root, batch_size, num_threads=4, *, fallback=True, **options):
    """A DataLoader-like SVHN iterator on DALI: `for images, labels in loader`.

    `root` holds <type>_32x32.mat; type is 'train', 'test' ('val' is accepted for it) or
    'extra' (shuffled, as train). `transform` is handed each 32x32 RGB PIL image, as
    torchvision's SVHN hands it, and runs inside DALI; default recipes.normalized:
    float32 (B, 3, 32, 32). The other arguments as get_cifar_iter_dali's."""
    return _common.open_dali(SVHN, type, root, batch_size, num_threads, fallback, options)


def get_svhn_iter_torch(type, root, batch_size, num_threads=4, **options):
    """The twin of get_svhn_iter_dali. torchvision's SVHN refuses any file whose md5 is not
    the published one, so the twin reads the same .mat the same way (loadmat, 10 -> 0)
    through SourceDataset, handing the transform the PIL image SVHN would."""
    return _common.open_torch(SVHN, type, root, batch_size, num_threads, options)
