"""What every standard dataset's pair of factories does, written once.

Each dataset module (mnist.py, svhn.py, ...) reads its format into a source and names its
default recipe; the functions here check the common arguments, pick the split, build the
DALI loader or its twin, and say clearly what is wrong with a file that is missing or bad.
Every factory has the same signature:

    get_<name>_iter_dali(type, root, batch_size, num_threads=4, *, seed=None, drop_last=False,
                         rank=None, world_size=None, local_rank=None, device_id=None,
                         transform=None, python_fallback=False, batch_transform=None,
                         memory_format=torch.contiguous_format, fallback=True,
                         even_batches=False, ...)

(the twin takes the same, less `fallback`), plus a dataset's own keywords (EMNIST's
`split`, STL-10's `folds`). `even_batches=True`: every rank steps as many times (the shorter
validation parts padded with repeats; `loader.padded` flags them per batch), for evaluation
loops that all-reduce every batch. Off by default: validation then reads each sample exactly once.
"""
import os
from typing import Callable, Dict, Optional, Sequence

from .. import transforms
from ..loader.build import dali_loader
from ..loader.checks import check_count
from ..loader.torch_loader import torch_loader
from ..sources.files import FileSource, require_file, require_folder  # noqa: F401  the datasets' checks

# The names every factory shares with dali_loader / torch_loader.
LOADER_ARGS = ("batch_size", "seed", "drop_last", "rank", "world_size", "local_rank", "memory_format",
               "batch_transform", "even_batches")


def pick_split(type, splits: Sequence[str], aliases: Optional[Dict[str, str]] = None) -> str:
    """`type` as the dataset's own split name; `aliases` map the library's 'train'/'val' onto
    a dataset that names its splits otherwise (Oxford-IIIT Pet's 'trainval' and 'test')."""
    aliases = aliases or {}
    if type in aliases:
        return aliases[type]
    if type not in splits:
        accepted = list(splits) + [a for a in aliases if a not in splits]
        raise ValueError(f"type must be one of {accepted}, got {type!r}")
    return type


def is_train(split: str) -> bool:
    """Training splits are shuffled (and augmented by the default recipe); val and test are not."""
    return split not in ("val", "test", "valid")


def find_folder(root: str, folder: str, marker: str, what: str, holds: str) -> str:
    """torchvision's <root>/<folder>, or root itself if it is that folder: whichever holds
    `marker`; else a FileNotFoundError saying what the dataset's folder should hold."""
    for candidate in (os.path.join(root, folder), root):
        if os.path.exists(os.path.join(candidate, marker)):
            return candidate
    raise FileNotFoundError(f"no {what} data under {root!r}: expected {os.path.join(root, folder)}/ with "
                            f"{holds}, as torchvision's class (download=True) or the archive leaves it")


def check_files_exist(files: Sequence[str], listed_in: str) -> None:
    """A FileNotFoundError naming the first image a split's list names but the disk lacks."""
    missing = [f for f in files if not os.path.isfile(f)]
    if missing:
        raise FileNotFoundError(f"{len(missing)} image(s) listed in {listed_in!r} are missing, the first "
                                f"{missing[0]!r}; restore them or re-extract the dataset's archive")


def build_dali(source, transform, train: bool, args: dict, explain: Optional[Callable] = None):
    """The DALI loader over `source` with a factory's arguments (`args`: its locals()).
    `explain`: DaliLoader's explain_failure hook; for files, one that names a bad image."""
    check_count("num_threads", args["num_threads"], 1, " (DALI worker threads)")
    if explain is None and isinstance(source, FileSource):
        from ..sources.image_files import name_the_file  # a bad image file is named, as in image folders

        explain = name_the_file(source, args["batch_size"])
    return dali_loader(source, transform, train=train, num_threads=args["num_threads"],
                       device_id=args["device_id"], python_fallback=args["python_fallback"],
                       explain_failure=explain, **{k: args[k] for k in LOADER_ARGS})


def build_torch(dataset, train: bool, args: dict):
    """The twin: a DataLoader over `dataset` with the DALI loader's order and layout."""
    return torch_loader(dataset, train=train, num_workers=args["num_threads"],
                        **{k: args[k] for k in LOADER_ARGS})


class TwinTransform:
    """A transform handed to torchvision's own dataset classes: the steps applied as the
    library's twins apply them (each in turn), the result a plain CHW tensor. A class, not
    a closure, so DataLoader workers can pickle it."""

    def __init__(self, transform: Callable):
        self.transform = transform

    def __call__(self, image):
        return transforms.as_tensor(transforms.call_steps(self.transform, image))
