"""Oxford Flowers-102: the split files, and the factories of both backends.

The layout, once: `<root>/flowers-102/` holds jpg/image_00001.jpg .. image_08189.jpg,
imagelabels.mat ("labels": the class 1..102 of each image, by image number) and setid.mat
("trnid", "valid", "tstid": the image numbers of train, val and test). As torchvision's
Flowers102: labels become 0..101, a split's images come in its setid order.
"""
import os

import numpy as np
import torch

from .. import recipes
from ..sources.files import FileSource
from ..sources.formats import read_mat
from . import _common

FOLDER = "flowers-102"
SPLITS = ("train", "val", "test")
SET_KEYS = {"train": "trnid", "val": "valid", "test": "tstid"}


def _folder(root: str) -> str:
    return _common.find_folder(root, FOLDER, "jpg", "Flowers-102",
                                "jpg/, imagelabels.mat and setid.mat")


def _numbers(content: dict, key: str, path: str) -> np.ndarray:
    values = np.asarray(content[key]).reshape(-1)
    if values.size == 0 or not np.issubdtype(values.dtype, np.number) or values.min() < 1:
        raise ValueError(f"{path!r}: {key!r} must hold image numbers (integers from 1), found "
                         f"{values.dtype} {values[:5].tolist()}; re-download it")
    return values.astype(np.int64)


def flowers_source(root: str, split: str) -> FileSource:
    folder = _folder(root)
    fix = "re-download it into the flowers-102 folder"
    labels_path = _common.require_file(os.path.join(folder, "imagelabels.mat"), "Flowers-102 label file", fix)
    sets_path = _common.require_file(os.path.join(folder, "setid.mat"), "Flowers-102 split file", fix)
    labels = _numbers(read_mat(labels_path, ["labels"]), "labels", labels_path) - 1
    ids = _numbers(read_mat(sets_path, [SET_KEYS[split]]), SET_KEYS[split], sets_path)
    if ids.max() > len(labels):
        raise ValueError(f"{sets_path!r} names image {ids.max()} but {labels_path!r} labels only "
                         f"{len(labels)} images; the two files must be from the same download")
    files = [os.path.join(folder, "jpg", f"image_{i:05d}.jpg") for i in ids]
    _common.check_files_exist(files, sets_path)
    return FileSource(files, labels[ids - 1], f"flowers102/{split}", [str(c) for c in range(labels.max() + 1)])


FLOWERS102 = _common.DatasetSpec(
    name="flowers102", splits=SPLITS, train_splits=("train",), source=flowers_source, recipe=recipes.imagenet)


# -- the factories: the library's positional arguments, the dataset's own keywords, then DaliLoader's


def get_flowers102_iter_dali(type, root, batch_size, num_threads=4, *, fallback=True, **options):
    """A DataLoader-like Flowers-102 iterator on DALI: `for images, labels in loader`.

    `root` holds flowers-102/; type is 'train', 'val' or 'test' (setid.mat's splits).
    `transform` is handed each image decoded to RGB, as torchvision's Flowers102 hands it,
    and runs inside DALI; default recipes.imagenet (train: RandomResizedCrop(224) and flip;
    val/test: Resize(256), CenterCrop(224); ImageNet's mean and std). An image that cannot
    be decoded stops the epoch with an ImageDecodeError naming it. The other arguments as
    get_cifar_iter_dali's."""
    return _common.open_dali(FLOWERS102, type, root, batch_size, num_threads, fallback, options)


def get_flowers102_iter_torch(type, root, batch_size, num_threads=4, **options):
    """The twin of get_flowers102_iter_dali. torchvision's Flowers102 refuses label and split
    files whose md5 is not the published one, so the twin reads the same files the same
    way (loadmat, labels - 1, setid order) through SourceDataset, loading each image as
    torchvision's default loader does (PIL, convert("RGB"))."""
    return _common.open_torch(FLOWERS102, type, root, batch_size, num_threads, options)
