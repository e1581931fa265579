"""ImageNet and any class-per-folder dataset: the factories of both backends."""
import os
from typing import Optional

from .. import recipes
from ..loader import DaliLoader, TorchLoader
from ..loader.checks import check_count
from ..loader.fallback import dali_available, warn_fallback
from ..sources.image_files import ImageFiles
from ..sources.screening import PIL_RULE
from ..sources.storage import isdir, join, subfolders
from ._common import loader_over

# -- the factories ------------------------------------------------------------------------


def _check_args(batch_size, num_threads, crop, val_size) -> None:
    check_count("batch_size", batch_size, 1)
    check_count("num_threads", num_threads, 0)
    check_count("crop", crop, 1, " (pixels)")
    if not isinstance(val_size, int) or val_size < crop:
        raise ValueError(f"val_size must be an integer >= crop={crop} (validation resizes the short side "
                         f"to val_size, then centre-crops crop x crop), got {val_size!r}")


def _check_train(train) -> bool:
    if not isinstance(train, bool):
        raise ValueError(f"train must be True or False, got {train!r}")
    return train


def _imagenet_split(type, image_dir: str) -> str:
    if type not in ("train", "val"):
        raise ValueError(f"type must be 'train' or 'val', got {type!r}")
    if not isdir(image_dir):
        raise FileNotFoundError(f"ImageNet folder {image_dir!r} does not exist; expected it to hold "
                                f"train/<class>/<image> and val/<class>/<image>")
    split = join(image_dir, type)
    if not isdir(split):
        raise FileNotFoundError(f"{split!r} does not exist; ImageNet's image_dir must hold train/ and val/, "
                                f"each with one folder per class (or val/ flat, with label_file=)")
    return split


def _train_classes(split: str, label_file: Optional[str]):
    """A flat ImageNet val/ with a label file takes its class names from train/, if there."""
    train = join(os.path.dirname(split), "train")
    if label_file is None or not isdir(train):
        return None
    return subfolders(train) or None


def _folder_loader(loader_class, root, batch_size, train, num_threads, crop, val_size, world_size, local_rank,
                   label_file, classes, options: dict, device_id=None):
    """A DaliLoader or TorchLoader over a class-per-folder index (screened as the options say)."""
    _check_args(batch_size, num_threads, crop, val_size)
    train = _check_train(train)
    index = ImageFiles(root, label_file, classes, options.get("max_image_pixels", PIL_RULE),
                       options.get("on_error", "raise"))
    fixed = dict(world_size=world_size, local_rank=local_rank)
    if loader_class is DaliLoader:
        fixed["device_id"] = device_id
    return loader_over(loader_class, index, batch_size, num_threads, train,
                       lambda: recipes.imagenet(train, crop, val_size), options, **fixed)


def get_imagefolder_iter_dali(root, batch_size, train, num_threads=4, device_id=None,
                              crop=recipes.IMAGENET_CROP, val_size=recipes.IMAGENET_VAL_SIZE, world_size=None,
                              local_rank=None, *, label_file=None, classes=None, fallback=True, **options):
    """A DataLoader-like iterator over a class-per-folder dataset on DALI.

    `root/<class>/<image>` as torchvision's ImageFolder reads it (same classes, same labels),
    or a flat `root` with `label_file` (`relative/path label` lines). `transform`: a
    torchvision transform, handed each image decoded to RGB as ImageFolder hands it, and run
    inside DALI; default: recipes.imagenet (train: RandomResizedCrop(crop) and flip; val:
    Resize(val_size), CenterCrop(crop); normalized). images: what the transform makes,
    float32 (B, 3, crop, crop) by default; labels: int64 (B,); on the GPU if CUDA is
    available, else on the CPU. `rank`/`world_size` default to torch.distributed's or
    torchrun's. `classes` names a label file's labels (default "0", "1", ...). A file that
    cannot be decoded stops the epoch with an ImageDecodeError naming it; with `on_error="skip"`
    broken files are left out instead, listed in `loader.skipped`. `max_image_pixels`: images
    whose header claims more pixels are refused (or skipped) undecoded; default PIL's rule
    (warn above PIL.Image.MAX_IMAGE_PIXELS, refuse above twice it), None: no limit. `batch_transform`: torchvision
    v2 MixUp(alpha, num_classes), CutMix(...) or RandomChoice([MixUp(...), CutMix(...)]) on each batch;
    labels then float (B, num_classes). Every other keyword is DaliLoader's.
    """
    if not dali_available():
        warn_fallback(fallback)
        return get_imagefolder_iter_torch(root, batch_size, train, num_threads, device_id, crop, val_size,
                                          world_size, local_rank, label_file=label_file, classes=classes, **options)
    return _folder_loader(DaliLoader, root, batch_size, train, num_threads, crop, val_size, world_size, local_rank,
                          label_file, classes, options, device_id)


def get_imagenet_iter_dali(type, image_dir, batch_size, num_threads=4, device_id=None, num_gpus=1,
                           crop=recipes.IMAGENET_CROP, val_size=recipes.IMAGENET_VAL_SIZE, world_size=None,
                           local_rank=None, *, label_file=None, fallback=True, **options):
    """A DataLoader-like ImageNet iterator on DALI: `for images, labels in loader`.

    `image_dir` holds train/<class>/... and val/<class>/... (or a flat val/ with
    `label_file`, labels indexing train/'s sorted classes); type is 'train' or 'val'.
    `num_gpus` is ignored: it is kept for the old positional signature; the number of
    processes is `world_size` (default: torch.distributed's or torchrun's). Otherwise as
    get_imagefolder_iter_dali.
    """
    _check_args(batch_size, num_threads, crop, val_size)
    split = _imagenet_split(type, image_dir)
    return get_imagefolder_iter_dali(split, batch_size, type == "train", num_threads, device_id, crop, val_size,
                                     world_size, local_rank, label_file=label_file,
                                     classes=_train_classes(split, label_file), fallback=fallback, **options)


def get_imagefolder_iter_torch(root, batch_size, train, num_threads=4, device_id=None,
                               crop=recipes.IMAGENET_CROP, val_size=recipes.IMAGENET_VAL_SIZE, world_size=None,
                               local_rank=None, *, label_file=None, classes=None, **options):
    """The torchvision twin of get_imagefolder_iter_dali: same arguments, same recipe, same
    sample order; `num_threads` is the number of DataLoader workers. Outputs stay on the CPU
    (where an Accelerator is made, on its device: see TorchLoader)."""
    return _folder_loader(TorchLoader, root, batch_size, train, num_threads, crop, val_size, world_size, local_rank,
                          label_file, classes, options)


def get_imagenet_iter_torch(type, image_dir, batch_size, num_threads=4, device_id=None, num_gpus=1,
                            crop=recipes.IMAGENET_CROP, val_size=recipes.IMAGENET_VAL_SIZE, world_size=None,
                            local_rank=None, *, label_file=None, **options):
    """The torchvision twin of get_imagenet_iter_dali (same arguments, same order)."""
    _check_args(batch_size, num_threads, crop, val_size)
    split = _imagenet_split(type, image_dir)
    return get_imagefolder_iter_torch(split, batch_size, type == "train", num_threads, device_id, crop, val_size,
                                      world_size, local_rank, label_file=label_file,
                                      classes=_train_classes(split, label_file), **options)
