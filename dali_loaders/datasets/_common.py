"""What every standard dataset's pair of factories does, written once.

Each dataset module (mnist.py, svhn.py, ...) reads its format into a source and describes
itself in a `DatasetSpec`: its splits and their aliases, which splits train (shuffle, and get
the augmenting default recipe), its source reader, its default recipe and its twin's dataset.
Its `get_<name>_iter_dali` / `_iter_torch` are a few lines each: the positional arguments of
the library's first loaders, the dataset's own keywords, and DaliLoader's (or TorchLoader's)
keywords passed on as they are, so every DataLoader keyword (shuffle, sampler, collate_fn, ...)
means what it means there.
"""
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

from .. import transforms
from ..loader import DaliLoader, TorchLoader
from ..loader.fallback import dali_available, warn_fallback
from ..sources.files import require_file, require_folder  # noqa: F401  the datasets' checks
from ..sources.screening import PIL_RULE  # noqa: F401  the image-file datasets' default


@dataclass(frozen=True)
class DatasetSpec:
    """A standard dataset, described once. `source(root, split, **own)` reads one split into an
    ArraySource or FileSource; `recipe(train)` is the default transform; `twin(root, split,
    transform, **own)` the twin's dataset (torchvision's own class where it can read the files;
    default: the source itself). `splits` are the dataset's own names, `aliases` map other
    accepted names onto them ('val' -> 'test'), and `train_splits` are the splits that shuffle
    and get the augmenting recipe: the only place that is decided."""
    name: str
    splits: Tuple[str, ...]
    train_splits: Tuple[str, ...]
    source: Callable[..., Any]
    recipe: Callable[[bool], Any]
    aliases: Dict[str, str] = field(default_factory=dict)
    twin: Optional[Callable[..., Any]] = None

    def split(self, type) -> str:
        """`type` as the dataset's own split name, or a ValueError listing the accepted ones."""
        return pick_split(type, self.splits, self.aliases)


def open_dali(spec: DatasetSpec, type, root, batch_size, num_threads, fallback: bool, options: dict, **own):
    """What get_<name>_iter_dali returns: a DaliLoader over the split's source, shuffled (and the
    augmenting recipe by default) for the training splits; `options` are DaliLoader's keywords.
    The twin, through fall_back, where DALI is not installed."""
    if not dali_available():
        warn_fallback(fallback)
        return open_torch(spec, type, root, batch_size, num_threads, options, **own)
    split = spec.split(type)
    train = split in spec.train_splits
    return loader_over(DaliLoader, spec.source(root, split, **own), batch_size, num_threads, train,
                       lambda: spec.recipe(train), options)


def open_torch(spec: DatasetSpec, type, root, batch_size, num_threads, options: dict, **own):
    """What get_<name>_iter_torch returns: a TorchLoader over torchvision's own class where it
    reads the files (else the source), in the DALI loader's order."""
    split = spec.split(type)
    train = split in spec.train_splits
    if spec.twin is None:
        return loader_over(TorchLoader, spec.source(root, split, **own), batch_size, num_threads, train,
                           lambda: spec.recipe(train), options)
    transform = options.pop("transform", None) or spec.recipe(train)   # torchvision's class applies it
    return loader_over(TorchLoader, spec.twin(root, split, transform, **own), batch_size, num_threads, train,
                       None, options)


def loader_over(loader_class, dataset, batch_size, num_threads, train: bool, recipe: Optional[Callable[[], Any]],
                options: dict, **fixed):
    """What every factory returns: `loader_class` (DaliLoader or TorchLoader) over `dataset`,
    shuffled for a training split unless shuffle= says otherwise or sampler= / batch_sampler=
    choose the order (a batch_sampler's batches then the batches), with `recipe()` unless
    transform= was given (None: the dataset applies its own), and `num_threads` workers unless
    num_workers= was given; the twin's workers persist, as they always have. `options` are the
    factory's **options, handed on; `fixed` the factory's own positional loader arguments."""
    workers = options.pop("num_workers", num_threads)
    chooses = options.get("sampler") is not None or options.get("batch_sampler") is not None
    defaults = {} if chooses else {"shuffle": train}   # a sampler chooses the order (DataLoader's rule)
    if options.get("batch_sampler") is not None:
        batch_size = 1   # DataLoader's default, as its rule asks: the batch sampler's batches are the batches
    if loader_class is TorchLoader:
        defaults["persistent_workers"] = workers > 0
    if recipe is not None:
        defaults["transform"] = options.pop("transform", None) or recipe()
    return loader_class(dataset, batch_size=batch_size, num_workers=workers, **fixed, **{**defaults, **options})


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


class TwinTransform:
    """A transform handed to torchvision's own dataset classes: the steps applied as the
    library's twins apply them (each in turn), the result a plain CHW tensor. A class, not
    a closure, so DataLoader workers can pickle it."""

    def __init__(self, transform: Callable):
        self.transform = transform

    def __call__(self, image):
        return transforms.as_tensor(transforms.call_steps(self.transform, image))
