"""CIFAR-10 and CIFAR-100: the pickle reader, and the factories of both backends.

The file format, once: each batch file is a Python-2 pickle (load with
encoding="latin1") of a dict whose "data" is an N x 3072 uint8 array, every row one
32x32 image as its R, then G, then B plane, row-major; the labels are a list of N ints
under "labels" (CIFAR-10) or "fine_labels" and "coarse_labels" (CIFAR-100).
"""
import os

import numpy as np

from .. import recipes
from ..loader import DaliLoader, TorchLoader
from ..loader.checks import check_count
from ..loader.fallback import dali_available, warn_fallback
from ..sources.arrays import ArraySource
from ..sources.formats import load_array_pickle
from ._common import loader_over

# dataset -> (folder, train files, test files)
LAYOUT = {
    "cifar10": ("cifar-10-batches-py", [f"data_batch_{i}" for i in range(1, 6)], ["test_batch"]),
    "cifar100": ("cifar-100-python", ["train"], ["test"]),
}
LABEL_KEY = {("cifar10", "fine"): "labels", ("cifar100", "fine"): "fine_labels",
             ("cifar100", "coarse"): "coarse_labels"}


def _find_folder(image_dir: str, dataset: str) -> str:
    folder = LAYOUT[dataset][0]
    for candidate in (os.path.join(image_dir, folder), image_dir):
        if os.path.isfile(os.path.join(candidate, LAYOUT[dataset][2][0])):
            return candidate
    if not os.path.isdir(image_dir):
        raise FileNotFoundError(f"CIFAR folder {image_dir!r} does not exist; expected a folder holding "
                                f"{folder}/ (torchvision's layout) or that folder itself")
    raise FileNotFoundError(f"no {dataset} data under {image_dir!r}: expected {folder}/ with the python "
                            f"pickles ({', '.join(LAYOUT[dataset][1] + LAYOUT[dataset][2])}) inside")


def _read_batch(path: str, label_key: str):
    if not os.path.isfile(path):
        raise FileNotFoundError(f"CIFAR batch file {path!r} is missing; download and extract the "
                                f"python version of the dataset")
    entry = load_array_pickle(path, "a CIFAR python pickle")   # builds data and arrays, runs nothing
    if not isinstance(entry, dict) or "data" not in entry:
        keys = sorted(repr(key) for key in entry)[:8] if isinstance(entry, dict) else None
        raise ValueError(f"{path!r}: expected a dict with a 'data' entry (the python version of CIFAR, as "
                         f"torchvision reads it), found " + (f"the keys {', '.join(keys)}" if keys is not None
                                                              else type(entry).__name__))
    data, labels = entry["data"], entry.get(label_key)
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3072:
        found = getattr(data, "shape", type(data).__name__)
        raise ValueError(f"{path!r}: expected 'data' of shape (N, 3072) uint8, found {found}")
    if labels is None or len(labels) != len(data):
        raise ValueError(f"{path!r}: expected {len(data)} labels under {label_key!r}, found "
                         f"{'none' if labels is None else len(labels)}")
    return data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1), np.asarray(labels, dtype=np.int64)


def _read_batches(paths, label_key: str):
    """All the batch files' images, (N, 32, 32, 3), and labels, (N,), read one file at a time
    into one array: the peak memory is the dataset plus one file, not the dataset twice.
    Each file holds at most size / 3072 images, so that many rows are reserved; rows never
    written are never touched and take no memory."""
    images = np.empty((sum(os.path.getsize(p) for p in paths if os.path.isfile(p)) // 3072, 32, 32, 3),
                      dtype=np.uint8)
    labels, filled = [], 0
    for path in paths:
        batch, batch_labels = _read_batch(path, label_key)
        images[filled:filled + len(batch)] = batch
        labels.append(batch_labels)
        filled += len(batch)
        del batch
    return images[:filled], np.concatenate(labels)


def cifar_source(image_dir: str, train: bool, dataset: str = "cifar10", label_type: str = "fine") -> ArraySource:
    """One split of CIFAR in memory: images (N, 32, 32, 3) uint8 HWC, labels (N,) int64."""
    if dataset not in LAYOUT:
        raise ValueError(f"dataset must be one of {sorted(LAYOUT)}, got {dataset!r}")
    if (dataset, label_type) not in LABEL_KEY:
        raise ValueError(f"label_type {label_type!r} is not available for {dataset}")
    folder = _find_folder(image_dir, dataset)
    files = LAYOUT[dataset][1] if train else LAYOUT[dataset][2]
    images, labels = _read_batches([os.path.join(folder, f) for f in files], LABEL_KEY[dataset, label_type])
    return ArraySource(images, labels, f"{dataset}/{'train' if train else 'test'}/{label_type}")


def _check_args(type: str, batch_size, val_size: int, cutout: int) -> bool:
    if type not in ("train", "val", "test"):
        raise ValueError(f"type must be 'train' or 'val' ('test' is accepted for 'val'), got {type!r}")
    check_count("batch_size", batch_size, 1)
    if val_size != 32:
        raise ValueError(f"val_size must be 32 for CIFAR (its images are 32x32), got {val_size!r}")
    if not isinstance(cutout, int) or not 0 <= cutout <= 32:
        raise ValueError(f"cutout must be an integer in [0, 32] pixels, got {cutout!r}")
    return type == "train"


def get_cifar_iter_dali(type, image_dir, batch_size, num_threads=4, local_rank=None, world_size=None,
                        val_size=32, cutout=0, *, dataset="cifar10", label_type="fine", fallback=True, **options):
    """A DataLoader-like CIFAR-10/100 iterator on DALI: `for images, labels in loader`.

    `transform`: a torchvision transform, handed each 32x32 RGB image as torchvision's CIFAR10
    class hands it, and run inside DALI; default: recipes.cifar (pad-crop, flip, normalize,
    `cutout`). images: what the transform makes, float32 (B, 3, 32, 32) by default; labels:
    int64 (B,); on the GPU if CUDA is available, else on the CPU. `rank`/`world_size` default
    to torch.distributed's or torchrun's; `local_rank` picks the GPU (and, given alone, the
    shard, as it used to). `batch_transform`: torchvision v2 MixUp(alpha, num_classes), CutMix(...)
    or RandomChoice([MixUp(...), CutMix(...)]) on each batch; labels then float (B, num_classes).
    Every other keyword is DaliLoader's (shuffle, sampler, seed, device, ...).
    """
    if not dali_available():
        warn_fallback(fallback)
        return get_cifar_iter_torch(type, image_dir, batch_size, num_threads, local_rank, world_size, val_size,
                                    cutout, dataset=dataset, label_type=label_type, **options)
    train = _check_args(type, batch_size, val_size, cutout)
    source = cifar_source(image_dir, train, dataset, label_type)
    return loader_over(DaliLoader, source, batch_size, num_threads, train,
                       lambda: recipes.cifar(train, dataset, cutout), options, local_rank=local_rank,
                       world_size=world_size)


# -- the torchvision twin ----------------------------------------------------------------


def get_cifar_iter_torch(type, image_dir, batch_size, num_threads=4, local_rank=None, world_size=None,
                         val_size=32, cutout=0, *, dataset="cifar10", label_type="fine", **options):
    """The torchvision twin of get_cifar_iter_dali: same arguments, same recipe, same sample
    order; `num_threads` is the number of DataLoader workers. Outputs stay on the CPU (where an
    Accelerator is made, on its device: see TorchLoader).
    It reads the pickles itself (no md5 check) and hands the transform PIL images, as
    torchvision's CIFAR10 does."""
    train = _check_args(type, batch_size, val_size, cutout)
    source = cifar_source(image_dir, train, dataset, label_type)
    return loader_over(TorchLoader, source, batch_size, num_threads, train,
                       lambda: recipes.cifar(train, dataset, cutout), options, local_rank=local_rank,
                       world_size=world_size)
