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
from ..loader.fallback import dali_available, fall_back
from ..loader.torch_loader import SourceDataset
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
    file if it is not one, or is cut short."""
    try:
        with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
            data = f.read()
    except (OSError, EOFError) as e:
        raise ValueError(f"{path!r} cannot be read as {'gzip' if path.endswith('.gz') else 'a file'} "
                         f"({type(e).__name__}: {e}); re-download it") from None
    header = 4 + 4 * dims
    if len(data) < header or data[:2] != b"\0\0" or data[2] != UINT8 or data[3] != dims:
        raise ValueError(f"{path!r} is not an idx file of uint8 with {dims} dimension(s) (its header is "
                         f"{data[:4].hex() or 'empty'}, expected 0000{UINT8:02x}{dims:02x}); re-download it")
    shape = tuple(int(s) for s in np.frombuffer(data[4:header], dtype=">u4"))
    expected = int(np.prod(shape))
    if len(data) - header != expected:
        raise ValueError(f"{path!r} holds {len(data) - header} bytes of data but its header promises "
                         f"{expected} for shape {shape}: the file is truncated or damaged; re-download it")
    return np.frombuffer(data, dtype=np.uint8, offset=header).reshape(shape)


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


def _check_emnist_split(split: str) -> str:
    if split not in EMNIST_SPLITS:
        raise ValueError(f"split must be one of {list(EMNIST_SPLITS)} (EMNIST's splits), got {split!r}")
    return split


def _dali(dataset: str, args: dict, emnist_split: str = "balanced"):
    split = _common.pick_split(args["type"], SPLITS, ALIASES)
    source = idx_source(args["root"], dataset, split, emnist_split)
    transform = args["transform"] or recipes.normalized(dataset)
    return _common.build_dali(source, transform, _common.is_train(split), args)


def _torch(dataset: str, args: dict, emnist_split: str = "balanced"):
    split = _common.pick_split(args["type"], SPLITS, ALIASES)
    transform = args["transform"] or recipes.normalized(dataset)
    return _common.build_torch(twin_dataset(args["root"], dataset, split, transform, emnist_split),
                          _common.is_train(split), args)


def get_mnist_iter_dali(type, root, batch_size, num_threads=4, *, seed=None, drop_last=False, rank=None,
                        world_size=None, local_rank=None, device_id=None, transform=None,
                        python_fallback=False, batch_transform=None, even_batches=False, memory_format=torch.contiguous_format, fallback=True):
    """A DataLoader-like MNIST iterator on DALI: `for images, labels in loader`.

    `root` holds MNIST/raw/ as torchvision leaves it; type is 'train' or 'test' ('val' is
    accepted for 'test'). `transform`: a torchvision transform, handed each image as a PIL
    "L" image as torchvision's MNIST hands it, run inside DALI; default recipes.normalized
    (ToImage, ToDtype, Normalize with MNIST's mean and std): float32 (B, 1, 28, 28).
    The other arguments as get_cifar_iter_dali's.
    """
    if not dali_available():
        return fall_back(fallback, get_mnist_iter_torch, locals())
    return _dali("mnist", locals())


def get_mnist_iter_torch(type, root, batch_size, num_threads=4, *, seed=None, drop_last=False, rank=None,
                         world_size=None, local_rank=None, device_id=None, transform=None,
                         python_fallback=False, batch_transform=None, even_batches=False, memory_format=torch.contiguous_format):
    """The twin of get_mnist_iter_dali: torchvision's MNIST class (download=False) in the same
    order; `num_threads` DataLoader workers."""
    return _torch("mnist", locals())


def get_fashion_mnist_iter_dali(type, root, batch_size, num_threads=4, *, seed=None, drop_last=False,
                                rank=None, world_size=None, local_rank=None, device_id=None, transform=None,
                                python_fallback=False, batch_transform=None, even_batches=False, memory_format=torch.contiguous_format, fallback=True):
    """Fashion-MNIST (root/FashionMNIST/raw/) on DALI; as get_mnist_iter_dali."""
    if not dali_available():
        return fall_back(fallback, get_fashion_mnist_iter_torch, locals())
    return _dali("fashion_mnist", locals())


def get_fashion_mnist_iter_torch(type, root, batch_size, num_threads=4, *, seed=None, drop_last=False,
                                 rank=None, world_size=None, local_rank=None, device_id=None, transform=None,
                                 python_fallback=False, batch_transform=None, even_batches=False, memory_format=torch.contiguous_format):
    """The twin of get_fashion_mnist_iter_dali (torchvision's FashionMNIST)."""
    return _torch("fashion_mnist", locals())


def get_kmnist_iter_dali(type, root, batch_size, num_threads=4, *, seed=None, drop_last=False, rank=None,
                         world_size=None, local_rank=None, device_id=None, transform=None,
                         python_fallback=False, batch_transform=None, even_batches=False, memory_format=torch.contiguous_format, fallback=True):
    """KMNIST (root/KMNIST/raw/) on DALI; as get_mnist_iter_dali."""
    if not dali_available():
        return fall_back(fallback, get_kmnist_iter_torch, locals())
    return _dali("kmnist", locals())


def get_kmnist_iter_torch(type, root, batch_size, num_threads=4, *, seed=None, drop_last=False, rank=None,
                          world_size=None, local_rank=None, device_id=None, transform=None,
                          python_fallback=False, batch_transform=None, even_batches=False, memory_format=torch.contiguous_format):
    """The twin of get_kmnist_iter_dali (torchvision's KMNIST)."""
    return _torch("kmnist", locals())


def get_emnist_iter_dali(type, root, batch_size, num_threads=4, *, split="balanced", seed=None,
                         drop_last=False, rank=None, world_size=None, local_rank=None, device_id=None,
                         transform=None, python_fallback=False, batch_transform=None, even_batches=False, memory_format=torch.contiguous_format,
                         fallback=True):
    """EMNIST (root/EMNIST/raw/emnist-<split>-...) on DALI; `split` is EMNIST's: byclass,
    bymerge, balanced, letters, digits or mnist. Images as stored (transposed), as
    torchvision's EMNIST hands them. Otherwise as get_mnist_iter_dali."""
    if not dali_available():
        return fall_back(fallback, get_emnist_iter_torch, locals())
    return _dali("emnist", locals(), _check_emnist_split(split))


def get_emnist_iter_torch(type, root, batch_size, num_threads=4, *, split="balanced", seed=None,
                          drop_last=False, rank=None, world_size=None, local_rank=None, device_id=None,
                          transform=None, python_fallback=False, batch_transform=None, even_batches=False, memory_format=torch.contiguous_format):
    """The twin of get_emnist_iter_dali (torchvision's EMNIST)."""
    return _torch("emnist", locals(), _check_emnist_split(split))
