"""ImageNet and any class-per-folder dataset: the file index, and the factories of both backends.

The layout, once: `root/<class>/**/<image>`, classes numbered in sorted folder-name order,
images found recursively, in sorted order, by their extension (case-insensitive), exactly as
torchvision.datasets.ImageFolder does. ImageNet's `image_dir` holds `train/` and `val/` in that
layout. A flat folder is accepted too, with a label file of `relative/path label` lines.
"""
import functools
import os
import zlib
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, List, Optional, Sequence

import numpy as np
import torch

from . import recipes
from .iterator import check_count, dali_available, fall_back
from .loaders import FileSource, SourceDataset, dali_loader, torch_loader
from .recipes import IMG_EXTENSIONS

# A decode error surfaces while DALI may already be working on the next batches (prefetch).
SUSPECT_BATCHES = 4


class ImageDecodeError(RuntimeError):
    """An image file that cannot be decoded; `path` names it."""

    def __init__(self, message: str, path: Optional[str] = None):
        super().__init__(message)
        self.path = path


def _is_image(name: str) -> bool:
    return name.lower().endswith(IMG_EXTENSIONS)


def find_classes(root: str):
    """ImageFolder's classes: the sorted names of root's sub-folders, and their indices."""
    classes = sorted(entry.name for entry in os.scandir(root) if entry.is_dir())
    if not classes:
        raise FileNotFoundError(f"no class folders in {root!r}: expected {root}/<class>/<image> "
                                f"(or pass label_file= for a flat folder of images)")
    return classes, {name: i for i, name in enumerate(classes)}


def _class_images(folder: str) -> List[str]:
    """The images under `folder`, recursively, in ImageFolder's order."""
    found = []
    for here, _, names in sorted(os.walk(folder, followlinks=True)):
        found += [os.path.join(here, name) for name in sorted(names) if _is_image(name)]
    return found


def _read_label_file(root: str, label_file: str):
    if not os.path.isfile(label_file):
        raise FileNotFoundError(f"label file {label_file!r} does not exist; expected lines of "
                                f"`relative/path label` for the images in {root!r}")
    files, labels, line_of = [], [], {}
    with open(label_file) as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            parts = line.strip().rsplit(maxsplit=1)
            if len(parts) != 2 or not parts[1].isdigit():
                raise ValueError(f"{label_file}:{number}: expected `relative/path label` with an "
                                 f"integer label >= 0, got {line.strip()!r}")
            path = os.path.normpath(os.path.join(root, parts[0]))
            if not os.path.isfile(path):
                raise FileNotFoundError(f"{label_file}:{number}: image {path!r} does not exist")
            if path in line_of:   # it would be read twice per epoch
                raise ValueError(f"{label_file}:{number}: {parts[0]!r} is listed again (first on line "
                                 f"{line_of[path]}); list each image once")
            line_of[path] = number
            files.append(path)
            labels.append(int(parts[1]))
    if not files:
        raise ValueError(f"label file {label_file!r} lists no images")
    return files, labels


class ImageFiles(FileSource):
    """One split as a list of files: `files` (paths), `labels` (int64), `classes`,
    `class_to_idx`, `samples` ((path, label) pairs), as ImageFolder names them."""

    def __init__(self, root: str, label_file: Optional[str] = None,
                 classes: Optional[Sequence[str]] = None):
        if not os.path.isdir(root):
            raise FileNotFoundError(f"image folder {root!r} does not exist")
        self.root = root
        if label_file is None:
            self.classes, self.class_to_idx = find_classes(root)
            self.files, labels = self._scan_class_folders()
        else:
            self.files, labels = _read_label_file(root, label_file)
            self.classes = list(classes) if classes else [str(c) for c in range(max(labels) + 1)]
            self.class_to_idx = {name: i for i, name in enumerate(self.classes)}
            if max(labels) >= len(self.classes):
                raise ValueError(f"label file {label_file!r} has label {max(labels)} but there are "
                                 f"only {len(self.classes)} classes")
        super().__init__(self.files, labels, os.path.basename(os.path.normpath(root)), self.classes)

    def _scan_class_folders(self):
        files, labels, empty = [], [], []
        for name in self.classes:
            found = _class_images(os.path.join(self.root, name))
            if not found:
                empty.append(name)
            files += found
            labels += [self.class_to_idx[name]] * len(found)
        if empty:
            raise FileNotFoundError(f"no images in class folder(s) {', '.join(empty)} of {self.root!r} "
                                    f"(images end with one of {', '.join(IMG_EXTENSIONS)}, any case); "
                                    f"add images or remove the folder(s)")
        return files, labels

    @property
    def samples(self):
        return list(zip(self.files, self.labels.tolist()))

    @functools.cached_property
    def fingerprint(self) -> str:
        names = "\n".join(os.path.relpath(f, self.root) for f in self.files).encode()
        return f"{os.path.basename(os.path.normpath(self.root))}/{len(self)}/" \
               f"{zlib.crc32(names):08x}/{zlib.crc32(self.labels.tobytes()):08x}"


# -- decode checks ----------------------------------------------------------------------


def undecodable_reason(path: str) -> Optional[str]:
    """Why PIL cannot decode the image at `path`, or None if it can."""
    from PIL import Image

    try:
        with Image.open(path) as image:
            image.convert("RGB")
    except Exception as e:  # PIL raises OSError, SyntaxError, ValueError, ... for bad files
        return f"{type(e).__name__}: {e}"
    return None


def verify_images(root: str, num_threads: int = 4, progress: bool = True) -> Dict[str, str]:
    """Decodes every image file under `root` (recursively, ImageFolder's extensions) and
    returns {path: reason} for the files that cannot be decoded."""
    from tqdm import tqdm

    if not os.path.isdir(root):
        raise FileNotFoundError(f"image folder {root!r} does not exist")
    paths = _class_images(root)
    bad = {}
    with ThreadPoolExecutor(max(1, num_threads)) as pool:
        reasons = pool.map(undecodable_reason, paths)
        for path, reason in tqdm(zip(paths, reasons), total=len(paths), desc="verify_images",
                                 unit="img", disable=not progress):
            if reason:
                bad[path] = reason
    return bad


def _dali_undecodable(paths: Sequence[str]) -> Optional[str]:
    """The first of `paths` DALI's decoder rejects, one image per synchronous run."""
    from nvidia.dali import fn, pipeline_def, types

    @pipeline_def(batch_size=1, num_threads=1, device_id=None, prefetch_queue_depth=1,
                  exec_async=False, exec_pipelined=False)
    def decode_one():
        encoded, _ = fn.readers.file(files=list(paths), random_shuffle=False)
        return fn.decoders.image(encoded, device="cpu", output_type=types.RGB)

    pipe = decode_one()
    pipe.build()
    for path in paths:
        try:
            pipe.run()
        except RuntimeError:
            return path
    return None


def _dali_reason(message: str) -> str:
    """The line of a DALI error that says what went wrong (it follows "encountered:")."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if "encountered:" in lines[:-1]:
        return lines[lines.index("encountered:") + 1]
    return lines[0] if lines else "no message"


def _first_undecodable(paths: Sequence[str]) -> Optional[str]:
    """PIL first (fast, and it says why), then DALI's own decoder, one file at a time."""
    culprit = next((p for p in paths if undecodable_reason(p)), None)
    if culprit is None and paths:
        try:
            culprit = _dali_undecodable(paths)
        except Exception:  # the check itself failed: keep DALI's original error
            culprit = None
    return culprit


def _name_the_file(index: ImageFiles, batch_size: int):
    """DaliLoader's explain_failure hook: the image file behind a failed batch, by name."""

    def explain(failure: Exception, remaining: np.ndarray) -> Optional[Exception]:
        message = str(failure)
        suspects = [index.files[i] for i in remaining[:SUSPECT_BATCHES * batch_size]]
        named = [p for p in suspects if p in message]   # DALI names truncated files itself
        culprit = named[0] if named else _first_undecodable(suspects)
        if culprit is None:
            return None
        reason = undecodable_reason(culprit) or _dali_reason(message)
        return ImageDecodeError(f"cannot decode image file {culprit!r} ({reason}); remove or replace it "
                                f"(dali_loaders.verify_images(root) lists every such file). "
                                f"DALI said: {_dali_reason(message)}", path=culprit)

    return explain


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
    if not os.path.isdir(image_dir):
        raise FileNotFoundError(f"ImageNet folder {image_dir!r} does not exist; expected it to hold "
                                f"train/<class>/<image> and val/<class>/<image>")
    split = os.path.join(image_dir, type)
    if not os.path.isdir(split):
        raise FileNotFoundError(f"{split!r} does not exist; ImageNet's image_dir must hold train/ and val/, "
                                f"each with one folder per class (or val/ flat, with label_file=)")
    return split


def _train_classes(split: str, label_file: Optional[str]):
    """A flat ImageNet val/ with a label file takes its class names from train/, if there."""
    train = os.path.join(os.path.dirname(split), "train")
    if label_file is None or not os.path.isdir(train):
        return None
    return sorted(entry.name for entry in os.scandir(train) if entry.is_dir()) or None


def get_imagefolder_iter_dali(root, batch_size, train, num_threads=4, device_id=None,
                              crop=recipes.IMAGENET_CROP, val_size=recipes.IMAGENET_VAL_SIZE, world_size=None,
                              local_rank=None, *, label_file=None, seed=None, drop_last=False, rank=None,
                              fallback=True, classes=None, transform=None, python_fallback=False,
                              memory_format=torch.contiguous_format, batch_transform=None):
    """A DataLoader-like iterator over a class-per-folder dataset on DALI.

    `root/<class>/<image>` as torchvision's ImageFolder reads it (same classes, same labels),
    or a flat `root` with `label_file` (`relative/path label` lines). `transform`: a
    torchvision transform, handed each image decoded to RGB as ImageFolder hands it, and run
    inside DALI; default: recipes.imagenet (train: RandomResizedCrop(crop) and flip; val:
    Resize(val_size), CenterCrop(crop); normalized). images: what the transform makes,
    float32 (B, 3, crop, crop) by default; labels: int64 (B,); on the GPU if CUDA is
    available, else on the CPU. `rank`/`world_size` default to torch.distributed's or
    torchrun's. `classes` names a label file's labels (default "0", "1", ...). A file that
    cannot be decoded stops the epoch with an ImageDecodeError naming it. `batch_transform`: torchvision
    v2 MixUp(alpha, num_classes), CutMix(...) or RandomChoice([MixUp(...), CutMix(...)]) on each batch;
    labels then float (B, num_classes).
    """
    if not dali_available():
        return fall_back(fallback, get_imagefolder_iter_torch, locals())
    _check_args(batch_size, num_threads, crop, val_size)
    train = _check_train(train)
    index = ImageFiles(root, label_file, classes)
    return dali_loader(index, transform or recipes.imagenet(train, crop, val_size), train=train,
                       batch_size=batch_size, num_threads=num_threads, seed=seed, drop_last=drop_last,
                       rank=rank, world_size=world_size, local_rank=local_rank, device_id=device_id,
                       python_fallback=python_fallback, memory_format=memory_format,
                       batch_transform=batch_transform, explain_failure=_name_the_file(index, batch_size))


def get_imagenet_iter_dali(type, image_dir, batch_size, num_threads=4, device_id=None, num_gpus=1,
                           crop=recipes.IMAGENET_CROP, val_size=recipes.IMAGENET_VAL_SIZE, world_size=None,
                           local_rank=None, *, label_file=None, seed=None, drop_last=False, rank=None,
                           fallback=True, transform=None, python_fallback=False,
                           memory_format=torch.contiguous_format, batch_transform=None):
    """A DataLoader-like ImageNet iterator on DALI: `for images, labels in loader`.

    `image_dir` holds train/<class>/... and val/<class>/... (or a flat val/ with
    `label_file`, labels indexing train/'s sorted classes); type is 'train' or 'val'.
    `num_gpus` is ignored: it is kept for the old positional signature; the number of
    processes is `world_size` (default: torch.distributed's or torchrun's). Otherwise as
    get_imagefolder_iter_dali.
    """
    if not dali_available():
        return fall_back(fallback, get_imagenet_iter_torch, locals())
    _check_args(batch_size, num_threads, crop, val_size)
    split = _imagenet_split(type, image_dir)
    return get_imagefolder_iter_dali(split, batch_size, type == "train", num_threads, device_id, crop,
                                     val_size, world_size, local_rank, label_file=label_file, seed=seed,
                                     drop_last=drop_last, rank=rank, fallback=fallback,
                                     classes=_train_classes(split, label_file), transform=transform,
                                     python_fallback=python_fallback, memory_format=memory_format,
                                     batch_transform=batch_transform)


# -- the torchvision twin ----------------------------------------------------------------


def load_rgb(path: str):
    """The image at `path` as a PIL RGB image, as ImageFolder's loader reads it."""
    from PIL import Image

    try:
        with open(path, "rb") as f:
            return Image.open(f).convert("RGB")
    except Exception as e:  # PIL raises OSError, SyntaxError, ValueError, ... for bad files
        raise ImageDecodeError(f"cannot decode image file {path!r} ({type(e).__name__}: {e}); remove or "
                               f"replace it (dali_loaders.verify_images(root) lists every such file)",
                               path=path) from e


def get_imagefolder_iter_torch(root, batch_size, train, num_threads=4, device_id=None,
                               crop=recipes.IMAGENET_CROP, val_size=recipes.IMAGENET_VAL_SIZE, world_size=None,
                               local_rank=None, *, label_file=None, seed=None, drop_last=False, rank=None,
                               classes=None, transform=None, python_fallback=False,
                               memory_format=torch.contiguous_format, batch_transform=None):
    """The torchvision twin of get_imagefolder_iter_dali: same arguments, same recipe, same
    sample order; `num_threads` is the number of DataLoader workers. Outputs stay on the CPU."""
    _check_args(batch_size, num_threads, crop, val_size)
    train = _check_train(train)
    index = ImageFiles(root, label_file, classes)
    dataset = SourceDataset(index, transform or recipes.imagenet(train, crop, val_size))
    return torch_loader(dataset, train=train, batch_size=batch_size, num_workers=num_threads, seed=seed,
                        drop_last=drop_last, rank=rank, world_size=world_size, local_rank=local_rank,
                        memory_format=memory_format, batch_transform=batch_transform)


def get_imagenet_iter_torch(type, image_dir, batch_size, num_threads=4, device_id=None, num_gpus=1,
                            crop=recipes.IMAGENET_CROP, val_size=recipes.IMAGENET_VAL_SIZE, world_size=None,
                            local_rank=None, *, label_file=None, seed=None, drop_last=False, rank=None,
                            transform=None, python_fallback=False, memory_format=torch.contiguous_format,
                            batch_transform=None):
    """The torchvision twin of get_imagenet_iter_dali (same arguments, same order)."""
    _check_args(batch_size, num_threads, crop, val_size)
    split = _imagenet_split(type, image_dir)
    return get_imagefolder_iter_torch(split, batch_size, type == "train", num_threads, device_id, crop,
                                      val_size, world_size, local_rank, label_file=label_file, seed=seed,
                                      drop_last=drop_last, rank=rank,
                                      classes=_train_classes(split, label_file), transform=transform,
                                      python_fallback=python_fallback, memory_format=memory_format,
                                      batch_transform=batch_transform)
