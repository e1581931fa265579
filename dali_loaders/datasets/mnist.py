"""MNIST, Fashion-MNIST, KMNIST and EMNIST: the idx reader, and the factories of both backends.

The file format, once (LeCun's idx): two zero bytes, a type byte (0x08: uint8), the number
of dimensions, then each dimension as a big-endian uint32, then the data, row-major. Images
are idx3 (N, 28, 28), labels idx1 (N,). The files sit in torchvision's layout,
`<root>/<Name>/raw/` (Name: MNIST, FashionMNIST, KMNIST, EMNIST), plain or gzipped
(`.gz`, as downloaded). EMNIST's are named `emnist-<split>-<train|test>-images-idx3-ubyte`;
its images are stored transposed (the writing lies on its side) and torchvision hands them
over as stored, so these loaders do too: parity with torchvision, not a rotated copy.
The images are grey: (B, 1, 28, 28) unless the transform converts them.
"""
import gzip
import os

import numpy as np
import torch

from .. import recipes
from ..sources.torch_dataset import SourceDataset
from ..sources.arrays import ArraySource
from . import _common

FOLDERS = {"mnist": "MNIST", "fashion_mnist": "FashionMNIST", "kmnist": "KMNIST", "emnist": "EMNIST"}
EMNIST_SPLITS = ("byclass", "bymerge", "balanced", "letters", "digits", "mnist")
SPLITS = ("train", "test")
ALIASES = {"val": "test"}
UINT8 = 0x08


def _file_stem(dataset: str, split: str, kind: str, emnist_split: str) -> str:
    """The file name without .gz; kind is 'images' or 'labels'."""
    dims = "idx3" if kind == "images" else "idx1"
    if dataset == "emnist":
        return f"emnist-{emnist_split}-{split}-{kind}-{dims}-ubyte"
    return f"{'train' if split == 'train' else 't10k'}-{kind}-{dims}-ubyte"


def raw_folder(root: str, dataset: str) -> str:
    """torchvision's <root>/<Name>/raw, or root itself if it holds the files."""
    name = FOLDERS[dataset]
    for candidate in (os.path.join(root, name, "raw"), os.path.join(root, "raw"), root):
        if os.path.isdir(candidate) and any(n.endswith(("-ubyte", "-ubyte.gz")) for n in os.listdir(candidate)):
            return candidate
    raise FileNotFoundError(f"no {name} idx files under {root!r}: expected {os.path.join(root, name, 'raw')}/ "
                            f"holding the *-idx3-ubyte and *-idx1-ubyte files (gzipped or not), as "
                            f"torchvision's {name}(root, download=True) leaves them")


def idx_path(folder: str, stem: str) -> str:
    """The plain file if there, else the gzipped one; FileNotFoundError naming both."""
    for path in (os.path.join(folder, stem), os.path.join(folder, stem + ".gz")):
        if os.path.isfile(path):
            return path
    raise FileNotFoundError(f"idx file {os.path.join(folder, stem)!r} (or its .gz) is missing; download "
                            f"and extract the dataset into {folder!r}")


def read_idx(path: str, dims: int) -> np.ndarray:
    """An idx file of uint8 data with `dims` dimensions, as an array; ValueError naming the
    file if it is not one, or is cut short. Nothing past what the header promises is read,
    and the promise is checked against the file's size first (a gzip file's: its trailer),
    so a file cannot make the reader take more memory than the data it holds."""
    gzipped, header = path.endswith(".gz"), 4 + 4 * dims
    try:
        with (gzip.open if gzipped else open)(path, "rb") as f:
            head = f.read(header)
            expected = _idx_size(path, head, dims)
            stored = _gzip_size(path) if gzipped else os.path.getsize(path)
            if stored != (header + expected) % (1 << 32 if gzipped else 1 << 64):
                raise ValueError(f"{path!r} holds {stored - header} bytes of data but its header promises "
                                 f"{expected}: the file is truncated or damaged; re-download it")
            data = f.read(expected + 1)
    except (OSError, EOFError) as e:
        raise ValueError(f"{path!r} cannot be read as {'gzip' if gzipped else 'a file'} "
                         f"({type(e).__name__}: {e}); re-download it") from None
    if len(data) != expected:
        raise ValueError(f"{path!r} holds {'more' if len(data) > expected else len(data)} bytes of data but its "
                         f"header promises {expected}: the file is truncated or damaged; re-download it")
    return np.frombuffer(data, dtype=np.uint8).reshape(_idx_shape(head, dims))


def _idx_shape(head: bytes, dims: int) -> tuple:
    return tuple(int(s) for s in np.frombuffer(head[4:4 + 4 * dims], dtype=">u4"))


def _idx_size(path: str, head: bytes, dims: int) -> int:
    """The data bytes an idx header promises; ValueError if it is not an idx header."""
    if len(head) < 4 + 4 * dims or head[:2] != b"\0\0" or head[2] != UINT8 or head[3] != dims:
        raise ValueError(f"{path!r} is not an idx file of uint8 with {dims} dimension(s) (its header is "
                         f"{head[:4].hex() or 'empty'}, expected 0000{UINT8:02x}{dims:02x}); re-download it")
    size = 1
    for side in _idx_shape(head, dims):
        size *= side   # Python ints: a crafted header cannot overflow this
    return size


def _gzip_size(path: str) -> int:
    """The uncompressed size a gzip file's trailer states (modulo 2**32)."""
    with open(path, "rb") as f:
        f.seek(-4, os.SEEK_END)
        return int.from_bytes(f.read(4), "little")


def idx_source(root: str, dataset: str, split: str, emnist_split: str = "balanced") -> ArraySource:
    """One split in memory: images (N, 28, 28, 1) uint8, labels (N,) int64."""
    folder = raw_folder(root, dataset)
    images_file = idx_path(folder, _file_stem(dataset, split, "images", emnist_split))
    labels_file = idx_path(folder, _file_stem(dataset, split, "labels", emnist_split))
    images, labels = read_idx(images_file, 3), read_idx(labels_file, 1)
    if len(images) != len(labels):
        raise ValueError(f"{images_file!r} holds {len(images)} images but {labels_file!r} {len(labels)} "
                         f"labels; the two files must be from the same download")
    name = FOLDERS[dataset] + (f"-{emnist_split}" if dataset == "emnist" else "")
    return ArraySource(images, labels, f"{name}/{split}")


def twin_dataset(root: str, dataset: str, split: str, transform, emnist_split: str):
    """torchvision's own class where it can read the files (it reads only the plain, not
    the gzipped, ones), else the same images through SourceDataset."""
    from torchvision import datasets

    folder = raw_folder(root, dataset)
    stems = [_file_stem(dataset, split, kind, emnist_split) for kind in ("images", "labels")]
    tv_root = os.path.dirname(os.path.dirname(folder))
    if folder.endswith(os.path.join(FOLDERS[dataset], "raw")) and all(
            os.path.isfile(os.path.join(folder, s)) for s in stems):
        cls = getattr(datasets, FOLDERS[dataset])
        extra = {"split": emnist_split} if dataset == "emnist" else {}
        return cls(tv_root, train=split == "train", transform=_common.TwinTransform(transform),
                   download=False, **extra)
    return SourceDataset(idx_source(root, dataset, split, emnist_split), transform)


def check_emnist_split(split: str) -> str:
    if split not in EMNIST_SPLITS:
        raise ValueError(f"split must be one of {list(EMNIST_SPLITS)} (EMNIST's splits), got {split!r}")
    return split


def _spec(dataset: str) -> _common.DatasetSpec:
    """MNIST and kin differ only in their folder, EMNIST in its own `split` too."""
    def source(root, which, split="balanced"):
        return idx_source(root, dataset, which, check_emnist_split(split))

    def twin(root, which, transform, split="balanced"):
        return twin_dataset(root, dataset, which, transform, check_emnist_split(split))

    return _common.DatasetSpec(name=dataset, splits=SPLITS, aliases=ALIASES, train_splits=("train",),
                               source=source, recipe=lambda train: recipes.normalized(dataset), twin=twin)


MNIST, FASHION_MNIST, KMNIST, EMNIST = (_spec(name) for name in ("mnist", "fashion_mnist", "kmnist", "emnist"))


# -- the factories: the library's positional arguments, the dataset's own keywords, then DaliLoader's


def get_mnist_iter_dali(type, root, batch_size, num_threads=4, *, fallback=True, **options):
    """A DataLoader-like MNIST iterator on DALI: `for images, labels in loader`.

    `root` holds MNIST/raw/ as torchvision leaves it; type is 'train' or 'test' ('val' is
    accepted for 'test'). `transform`: a torchvision transform, handed each image as a PIL
    "L" image as torchvision's MNIST hands it, run inside DALI; default recipes.normalized
    (ToImage, ToDtype, Normalize with MNIST's mean and std): float32 (B, 1, 28, 28).
    The other arguments as get_cifar_iter_dali's."""
    return _common.open_dali(MNIST, type, root, batch_size, num_threads, fallback, options)


def get_mnist_iter_torch(type, root, batch_size, num_threads=4, **options):
    """The twin of get_mnist_iter_dali: torchvision's MNIST class (download=False) in the same
    order; `num_threads` DataLoader workers."""
    return _common.open_torch(MNIST, type, root, batch_size, num_threads, options)


def get_fashion_mnist_iter_dali(type, root, batch_size, num_threads=4, *, fallback=True, **options):
    """Fashion-MNIST (root/FashionMNIST/raw/) on DALI; as get_mnist_iter_dali."""
    return _common.open_dali(FASHION_MNIST, type, root, batch_size, num_threads, fallback, options)


def get_fashion_mnist_iter_torch(type, root, batch_size, num_threads=4, **options):
    """The twin of get_fashion_mnist_iter_dali (torchvision's FashionMNIST)."""
    return _common.open_torch(FASHION_MNIST, type, root, batch_size, num_threads, options)


def get_kmnist_iter_dali(type, root, batch_size, num_threads=4, *, fallback=True, **options):
    """KMNIST (root/KMNIST/raw/) on DALI; as get_mnist_iter_dali."""
    return _common.open_dali(KMNIST, type, root, batch_size, num_threads, fallback, options)


def get_kmnist_iter_torch(type, root, batch_size, num_threads=4, **options):
    """The twin of get_kmnist_iter_dali (torchvision's KMNIST)."""
    return _common.open_torch(KMNIST, type, root, batch_size, num_threads, options)


def get_emnist_iter_dali(type, root, batch_size, num_threads=4, *, split="balanced", fallback=True, **options):
    """EMNIST (root/EMNIST/raw/emnist-<split>-...) on DALI; `split` is EMNIST's: byclass,
    bymerge, balanced, letters, digits or mnist. Images as stored (transposed), as
    torchvision's EMNIST hands them. Otherwise as get_mnist_iter_dali."""
    return _common.open_dali(EMNIST, type, root, batch_size, num_threads, fallback, options, split=split)


def get_emnist_iter_torch(type, root, batch_size, num_threads=4, *, split="balanced", **options):
    """The twin of get_emnist_iter_dali (torchvision's EMNIST)."""
    return _common.open_torch(EMNIST, type, root, batch_size, num_threads, options, split=split)
