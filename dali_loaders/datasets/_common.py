"""What every standard dataset's pair of factories does, written once.

Each dataset module (mnist.py, svhn.py, ...) reads its format into a source and describes
itself in a `DatasetSpec`: its splits and their aliases, which splits train (shuffle, and
get the augmenting default recipe), its source reader, its default recipe, its twin's
dataset and its own keywords (EMNIST's `split`, STL-10's `folds`). Its public
`get_<name>_iter_dali` / `_iter_torch` functions are generated from the spec by
`python -m dali_loaders.datasets.generate` into the end of the module: explicit signatures
that users and IDEs can read, each a one-line call of `open_dali` / `open_torch` below.
tests/test_dataset_specs.py regenerates them and fails if the committed code differs.

To add an argument to every standard factory:
  1. add one `Argument` row to ARGUMENTS (its default as source text; `to_loader=True` if
     dali_loader() and torch_loader() take it under the same name: it is then forwarded);
  2. run `python -m dali_loaders.datasets.generate` and commit the rewritten modules;
  3. add it by hand to the explicit factories too (cifar.py, imagenet.py, webdataset.py):
     the same test fails until each of them takes it, with the same default.
An argument only some datasets take is an `Argument` in their spec's `own`: checked by its
`check`, then handed to the loaders if `to_loader`, else to the spec's `source` and `twin` as a
keyword. The image-file datasets (Flowers-102, Food-101, Oxford-IIIT Pet, Tiny-ImageNet) share
IMAGE_FILE_ARGUMENTS: an argument for all of them is one row there.
`even_batches=True`: every rank steps as many times (the shorter validation parts padded
with repeats; `loader.padded` flags them per batch), for evaluation loops that all-reduce
every batch. Off by default: validation then reads each sample exactly once.
"""
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

from .. import transforms
from ..loader.build import dali_loader
from ..loader.checks import check_count
from ..loader.fallback import dali_available, fall_back
from ..loader.torch_loader import SourceDataset, torch_loader
from ..sources.files import FileSource, require_file, require_folder  # noqa: F401  the datasets' checks
from ..sources.screening import PIL_RULE, kept_subset, screen_source


@dataclass(frozen=True)
class Argument:
    """One factory argument. `default` is Python source (None: required); `positional`:
    before the `*`; `backends`: the factories that take it; `to_loader`: passed on, under
    its own name, to dali_loader() and torch_loader(); `check(value)` raises ValueError
    naming the argument if the value is wrong, and returns it."""
    name: str
    default: Optional[str] = None
    positional: bool = False
    backends: Tuple[str, ...] = ("dali", "torch")
    to_loader: bool = False
    check: Optional[Callable[[Any], Any]] = None
    to_source: bool = True   # False: consumed here (the screening of image files), not by source/twin


# Every standard factory's arguments, in signature order; a spec's `own` keywords come
# right after the `*`.
ARGUMENTS = (
    Argument("type", positional=True),
    Argument("root", positional=True),
    Argument("batch_size", positional=True, to_loader=True),
    Argument("num_threads", "4", positional=True),   # DALI threads; the twin's DataLoader workers
    Argument("seed", "None", to_loader=True),
    Argument("drop_last", "False", to_loader=True),
    Argument("rank", "None", to_loader=True),
    Argument("world_size", "None", to_loader=True),
    Argument("local_rank", "None", to_loader=True),
    Argument("device_id", "None"),
    Argument("transform", "None"),
    Argument("python_fallback", "False"),
    Argument("batch_transform", "None", to_loader=True),
    Argument("memory_format", "torch.contiguous_format", to_loader=True),
    Argument("device", "None", to_loader=True),            # "cpu" | "cpu-decode" | "gpu" (loader/options.py)
    Argument("dali_cpu", "None", to_loader=True),          # the original DataLoaders_DALI's switch
    Argument("output", '"tuple"', to_loader=True),         # "dict": [{"data", "label"}], as DALI's iterators
    Argument("target_transform", "None", to_loader=True),  # on each label, as torchvision's datasets
    Argument("even_batches", "False", to_loader=True),     # pad val parts so every rank steps alike
    Argument("fallback", "True", backends=("dali",)),
)
LOADER_ARGS = tuple(a.name for a in ARGUMENTS if a.to_loader)
# The own keywords of every dataset read from image files, after any of a dataset's own.
IMAGE_FILE_ARGUMENTS: Tuple[Argument, ...] = (
    Argument("max_image_pixels", '"pil"', to_source=False),   # sources/screening.py: PIL's rule by default
    Argument("on_error", '"raise"', to_source=False),          # "skip": broken files left out, loader.skipped
)


@dataclass(frozen=True)
class DatasetSpec:
    """A standard dataset, described once; its factories are made from it (see above).

    `source(root, split, **own)` reads one split into an ArraySource or FileSource;
    `recipe(train)` is the default transform; `twin(root, split, transform, **own)` the
    torch twin's dataset (default: SourceDataset over `source`, which hands the transform
    the PIL image torchvision's class would). `splits` are the dataset's own names,
    `aliases` map other accepted names onto them ('val' -> 'test'), and `train_splits`
    are the splits that shuffle and get the augmenting recipe: the only place that is
    decided. `dali_doc` / `torch_doc` become the factories' docstrings."""
    name: str
    splits: Tuple[str, ...]
    train_splits: Tuple[str, ...]
    source: Callable[..., Any]
    recipe: Callable[[bool], Any]
    dali_doc: str
    torch_doc: str
    aliases: Dict[str, str] = field(default_factory=dict)
    twin: Optional[Callable[..., Any]] = None
    own: Tuple[Argument, ...] = ()

    def arguments(self, backend: str) -> Tuple[Argument, ...]:
        """The factory's arguments in signature order: the common ones with `own` after the `*`."""
        common = [a for a in ARGUMENTS if backend in a.backends]
        cut = next(i for i, a in enumerate(common) if not a.positional)
        return tuple(common[:cut]) + self.own + tuple(common[cut:])

    def split(self, type) -> str:
        """`type` as the dataset's own split name, or a ValueError listing the accepted ones."""
        return pick_split(type, self.splits, self.aliases)

    def own_values(self, args: dict, to_loader: bool = False) -> dict:
        """The spec's own arguments, checked: those for the loaders, or those for `source`/`twin`."""
        return {a.name: (a.check(args[a.name]) if a.check else args[a.name])
                for a in self.own if a.to_loader == to_loader and (to_loader or a.to_source)}


def open_dali(spec: DatasetSpec, torch_factory: Callable, args: dict):
    """The DALI loader a generated get_<name>_iter_dali returns (`args`: all its arguments);
    the twin, through fall_back, where DALI is not installed."""
    if not dali_available():
        return fall_back(args["fallback"], torch_factory, args)
    split = spec.split(args["type"])
    train = split in spec.train_splits
    source = spec.source(args["root"], split, **spec.own_values(args))
    return build_dali(source, args["transform"] or spec.recipe(train), train, args,
                      extra=spec.own_values(args, to_loader=True))


def open_torch(spec: DatasetSpec, args: dict):
    """The torch twin a generated get_<name>_iter_torch returns (`args`: all its arguments)."""
    split = spec.split(args["type"])
    train = split in spec.train_splits
    transform = args["transform"] or spec.recipe(train)
    own = spec.own_values(args)
    files = None
    if spec.twin is None:
        dataset = SourceDataset(spec.source(args["root"], split, **own), transform)
    else:   # torchvision's own class: screened through the files it reads, in its order
        dataset = spec.twin(args["root"], split, transform, **own)
        source = spec.source(args["root"], split, **own)
        files = source if isinstance(source, FileSource) else None
    return build_torch(dataset, train, args, extra=spec.own_values(args, to_loader=True), files=files)


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


def build_dali(source, transform, train: bool, args: dict, explain: Optional[Callable] = None,
               extra: Optional[dict] = None):
    """The DALI loader over `source` with a factory's arguments (`args`: all of them; `extra`:
    a spec's own ones for the loader). `explain`: DaliLoader's explain_failure hook; for
    files, one that names a bad image."""
    check_count("num_threads", args["num_threads"], 1, " (DALI worker threads)")
    if isinstance(source, FileSource):
        screen_source(source, *screening_args(args))
    if explain is None and isinstance(source, FileSource):
        from ..sources.image_files import (
            name_the_file,  # a bad image file is named, as in image folders
        )

        explain = name_the_file(source, args["batch_size"])
    return dali_loader(source, transform, train=train, num_threads=args["num_threads"],
                       device_id=args["device_id"], python_fallback=args["python_fallback"],
                       explain_failure=explain, **{k: args[k] for k in LOADER_ARGS}, **(extra or {}))


def screening_args(args: dict):
    """(max_image_pixels, on_error) of a factory's arguments (sources/screening.py)."""
    return args.get("max_image_pixels", PIL_RULE), args.get("on_error", "raise")


def build_torch(dataset, train: bool, args: dict, extra: Optional[dict] = None,
                files: Optional[FileSource] = None):
    """The twin: a DataLoader over `dataset` with the DALI loader's order and layout.
    `extra`: a spec's own arguments for the loader. `files`: the FileSource a torchvision
    dataset class reads, in its order, screened as the DALI loader's is (a SourceDataset over
    a FileSource is screened itself)."""
    if files is not None:
        dataset = kept_subset(dataset, files.files, *screening_args(args))
    elif isinstance(getattr(dataset, "source", None), FileSource):
        screen_source(dataset.source, *screening_args(args))
    return torch_loader(dataset, train=train, num_workers=args["num_threads"],
                        **{k: args[k] for k in LOADER_ARGS}, **(extra or {}))


class TwinTransform:
    """A transform handed to torchvision's own dataset classes: the steps applied as the
    library's twins apply them (each in turn), the result a plain CHW tensor. A class, not
    a closure, so DataLoader workers can pickle it."""

    def __init__(self, transform: Callable):
        self.transform = transform

    def __call__(self, image):
        return transforms.as_tensor(transforms.call_steps(self.transform, image))
