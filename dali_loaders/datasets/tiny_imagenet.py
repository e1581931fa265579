"""Tiny-ImageNet (200 classes, 64x64): the folder index, and the factories of both backends.

The layout, once: `<root>/tiny-imagenet-200/` holds train/<wnid>/images/<wnid>_<i>.JPEG
and a flat val/images/val_<i>.JPEG with val/val_annotations.txt, one tab-separated
`file wnid x0 y0 x1 y1` line per image. Labels index the sorted train wnids (as an
ImageFolder over train/ numbers them); train images come class by class in sorted file
order, val images in the annotation file's order. torchvision has no class for it: the
twin reads the same index through SourceDataset.
"""
import os

import torch

from .. import recipes
from ..sources.files import FileSource
from ..sources.image_files import is_image
from . import _common

FOLDER = "tiny-imagenet-200"
SPLITS = ("train", "val")
ALIASES = {"test": "val"}   # Tiny-ImageNet's own test/ has no labels


def _folder(root: str) -> str:
    return _common.find_folder(root, FOLDER, "train", "Tiny-ImageNet",
                                "train/<wnid>/images/ and val/images/ + val/val_annotations.txt")


def train_wnids(folder: str):
    train = os.path.join(folder, "train")
    wnids = sorted(entry.name for entry in os.scandir(train) if entry.is_dir())
    if not wnids:
        raise FileNotFoundError(f"no class folders in {train!r}: expected train/<wnid>/images/")
    return wnids


def _train_files(folder: str, wnids):
    files, labels = [], []
    for label, wnid in enumerate(wnids):
        images = os.path.join(folder, "train", wnid, "images")
        found = sorted(n for n in os.listdir(images) if is_image(n)) if os.path.isdir(images) else []
        if not found:
            raise FileNotFoundError(f"no images in {images!r}; every train/<wnid>/ holds images/ with its "
                                    f"pictures: re-extract the archive")
        files += [os.path.join(images, name) for name in found]
        labels += [label] * len(found)
    return files, labels


def _val_files(folder: str, wnids):
    path = _common.require_file(os.path.join(folder, "val", "val_annotations.txt"),
                                 "Tiny-ImageNet val annotation file", "re-extract tiny-imagenet-200.zip")
    label_of = {wnid: i for i, wnid in enumerate(wnids)}
    files, labels = [], []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            parts = line.split("\t")
            if len(parts) < 2 or parts[1].strip() not in label_of:
                raise ValueError(f"{path}:{number}: expected `file<TAB>wnid<TAB>...` with a wnid of train/, got "
                                 f"{line.strip()!r}; re-extract tiny-imagenet-200.zip")
            files.append(os.path.join(folder, "val", "images", parts[0].strip()))
            labels.append(label_of[parts[1].strip()])
    if not files:
        raise ValueError(f"{path!r} lists no images")
    _common.check_files_exist(files, path)
    return files, labels


def tiny_imagenet_source(root: str, split: str) -> FileSource:
    folder = _folder(root)
    wnids = train_wnids(folder)
    files, labels = (_train_files if split == "train" else _val_files)(folder, wnids)
    return FileSource(files, labels, f"tiny-imagenet/{split}", wnids)


TINY_IMAGENET = _common.DatasetSpec(
    name="tiny_imagenet", splits=SPLITS, aliases=ALIASES, train_splits=("train",), source=tiny_imagenet_source,
    recipe=lambda train: recipes.normalized("tiny_imagenet"))


# -- the factories: the library's positional arguments, the dataset's own keywords, then DaliLoader's


def get_tiny_imagenet_iter_dali(type, root, batch_size, num_threads=4, *, fallback=True, **options):
    """A DataLoader-like Tiny-ImageNet iterator on DALI: `for images, labels in loader`.

    `root` holds tiny-imagenet-200/; type is 'train' or 'val' ('test' is accepted for
    'val': the archive's test/ has no labels). `transform` is handed each image decoded to
    RGB; default recipes.normalized: float32 (B, 3, 64, 64). An image that cannot be decoded
    stops the epoch with an ImageDecodeError naming it. The other arguments as
    get_cifar_iter_dali's."""
    return _common.open_dali(TINY_IMAGENET, type, root, batch_size, num_threads, fallback, options)


def get_tiny_imagenet_iter_torch(type, root, batch_size, num_threads=4, **options):
    """The twin of get_tiny_imagenet_iter_dali (no torchvision class exists: SourceDataset
    over the same index, images loaded as ImageFolder loads them)."""
    return _common.open_torch(TINY_IMAGENET, type, root, batch_size, num_threads, options)
