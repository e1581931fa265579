"""ImageNet and any class-per-folder dataset: the file index, the DALI pipeline and its
torchvision twin.

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
from torch.utils.data import Dataset

from .distributed import epoch_sampler
from .iterator import (DaliLoader, TorchLoader, build_dali_pipeline, check_count, dali_available, fall_back,
                       pick_device_id)
from .recipes import IMAGENET, IMG_EXTENSIONS, ImageNetRecipe, on_255_scale

# RandomResizedCrop.get_params draws this many windows before falling back to a centre crop.
CROP_ATTEMPTS = 10
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


class ImageFiles:
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
        self.labels = np.asarray(labels, dtype=np.int64)

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

    def __len__(self) -> int:
        return len(self.files)

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


# -- the DALI pipeline -------------------------------------------------------------------


def _torchvision_resize_shape(shape, size: int):
    """Resize(size)'s output (height, width) from an image's (height, width, ...): the short
    side becomes `size` and the long side int(size * long / short), truncated (DALI rounds)."""
    height, width = shape[0], shape[1]
    width_is_short = height >= width   # ImageFolder ties: the width is the short side
    height_is_short = 1 - width_is_short
    new_height = height_is_short * size + width_is_short * (size * height // width)
    new_width = width_is_short * size + height_is_short * (size * width // height)
    return new_height, new_width


def _centre_offset(extra):
    """CenterCrop's offset int(round(extra / 2)), rounding half to even (DALI rounds half up)."""
    half = extra // 2
    is_odd = extra - 2 * half
    half_is_odd = half - 2 * (half // 2)
    return half + is_odd * half_is_odd


def _centre_crop_window(shape, val_size: int, crop: int):
    """Resize(val_size) + CenterCrop(crop) as a window of the original image: (top, left)
    and (bottom, right), floats, in input pixels."""
    from nvidia.dali import fn, types

    height, width = _torchvision_resize_shape(shape, val_size)
    scale_y = fn.cast(shape[0], dtype=types.FLOAT) / fn.cast(height, dtype=types.FLOAT)
    scale_x = fn.cast(shape[1], dtype=types.FLOAT) / fn.cast(width, dtype=types.FLOAT)
    top = fn.cast(_centre_offset(height - crop), dtype=types.FLOAT)
    left = fn.cast(_centre_offset(width - crop), dtype=types.FLOAT)
    return fn.stack(top * scale_y, left * scale_x), fn.stack((top + crop) * scale_y, (left + crop) * scale_x)


def decode_args(device: str) -> dict:
    """The decoder's settings: torchvision (PIL) ignores EXIF orientation and upsamples
    chroma smoothly, so the decoder does too."""
    from nvidia.dali import types

    return dict(device="mixed" if device == "gpu" else "cpu", output_type=types.RGB,
                jpeg_fancy_upsampling=True, adjust_orientation=False)


def random_crop_decode(encoded, recipe: ImageNetRecipe, device: str):
    """RandomResizedCrop's window, drawn by DALI and decoded alone (ROI decode)."""
    from nvidia.dali import fn

    return fn.decoders.image_random_crop(encoded, random_area=list(recipe.scale),
                                         random_aspect_ratio=list(recipe.ratio),
                                         num_attempts=CROP_ATTEMPTS, **decode_args(device))


def resize_train(images, crop: int):
    from nvidia.dali import fn

    return fn.resize(images, resize_x=float(crop), resize_y=float(crop), antialias=True)


def normalize(images, mirror, recipe: ImageNetRecipe):
    """Flip where `mirror`, normalize, float32 CHW: one pass."""
    from nvidia.dali import fn, types

    return fn.crop_mirror_normalize(images, mirror=mirror, dtype=types.FLOAT, output_layout="CHW",
                                    mean=on_255_scale(recipe.mean), std=on_255_scale(recipe.std))


def _val_decode_resize(encoded, crop: int, val_size: int, device: str):
    from nvidia.dali import fn, types

    images = fn.decoders.image(encoded, **decode_args(device))
    shape = fn.peek_image_shape(encoded, dtype=types.INT32, adjust_orientation=False)
    roi_start, roi_end = _centre_crop_window(shape, val_size, crop)
    # Resample only the window CenterCrop keeps: the same grid and filter as resizing
    # the whole image, at crop^2 output pixels instead of ~val_size^2 * aspect ratio
    # (the CPU cost of fn.resize follows its output size).
    return fn.resize(images, size=[float(crop), float(crop)], roi_start=roi_start, roi_end=roi_end,
                     antialias=True)


def _image_graph(files: List[str], labels: List[int], recipe: ImageNetRecipe, train: bool,
                 crop: int, val_size: int, device: str):
    from nvidia.dali import fn

    encoded, labels = fn.readers.file(files=files, labels=labels, random_shuffle=False, name="Reader")
    if train:
        images = resize_train(random_crop_decode(encoded, recipe, device), crop)
        mirror = fn.random.coin_flip(probability=recipe.flip_p)
    else:
        images, mirror = _val_decode_resize(encoded, crop, val_size, device), 0
    if device == "gpu":
        labels = labels.gpu()
    return normalize(images, mirror, recipe), labels


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
                              crop=IMAGENET.crop, val_size=IMAGENET.val_size, world_size=None,
                              local_rank=None, *, label_file=None, seed=None, drop_last=False, rank=None,
                              fallback=True, recipe=IMAGENET, classes=None):
    """A DataLoader-like iterator over a class-per-folder dataset on DALI.

    `root/<class>/<image>` as torchvision's ImageFolder reads it (same classes, same labels),
    or a flat `root` with `label_file` (`relative/path label` lines). train=True: random-resized
    crop and flip; False: resize the short side to val_size, centre-crop crop x crop.
    images: float32 (B, 3, crop, crop), normalized; labels: int64 (B,); on the GPU if CUDA is
    available, else on the CPU. `rank`/`world_size` default to torch.distributed's or torchrun's.
    `classes` names a label file's labels (default "0", "1", ...); `recipe` holds the numbers.
    A file that cannot be decoded stops the epoch with an ImageDecodeError naming it.
    """
    if not dali_available():
        return fall_back(fallback, get_imagefolder_iter_torch, locals())
    _check_args(batch_size, num_threads, crop, val_size)
    check_count("num_threads", num_threads, 1, " (DALI worker threads)")
    train = _check_train(train)
    index = ImageFiles(root, label_file, classes)
    sampler = epoch_sampler(len(index), shuffle=train, seed=seed, rank=rank, world_size=world_size,
                            local_rank=local_rank)
    gpu = pick_device_id(device_id, sampler.local_rank)

    def build_pipeline(order, pipeline_seed, checkpoint):
        return build_dali_pipeline(_image_graph, [index.files[i] for i in order], index.labels[order].tolist(),
                                   recipe, train, crop, val_size, "cpu" if gpu is None else "gpu",
                                   batch_size=batch_size, num_threads=num_threads, device_id=gpu,
                                   seed=pipeline_seed, checkpoint=checkpoint)

    return DaliLoader(index, build_pipeline, batch_size=batch_size, sampler=sampler, drop_last=drop_last,
                      explain_failure=_name_the_file(index, batch_size))


def get_imagenet_iter_dali(type, image_dir, batch_size, num_threads=4, device_id=None, num_gpus=1,
                           crop=IMAGENET.crop, val_size=IMAGENET.val_size, world_size=None,
                           local_rank=None, *, label_file=None, seed=None, drop_last=False, rank=None,
                           fallback=True):
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
                                     classes=_train_classes(split, label_file))


# -- the torchvision twin ----------------------------------------------------------------


def torch_transform(recipe: ImageNetRecipe, train: bool, crop: int, val_size: int):
    from torchvision import transforms as T

    if train:
        steps = [T.RandomResizedCrop(crop, scale=recipe.scale, ratio=recipe.ratio),
                 T.RandomHorizontalFlip(recipe.flip_p)]
    else:
        steps = [T.Resize(val_size), T.CenterCrop(crop)]
    return T.Compose(steps + [T.PILToTensor(), T.ConvertImageDtype(torch.float32),
                              T.Normalize(recipe.mean, recipe.std)])


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


class ImageFileDataset(Dataset):
    """ImageFiles as a torch Dataset: (transformed image, label), like ImageFolder."""

    def __init__(self, index: ImageFiles, transform):
        self.index, self.transform = index, transform

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, i):
        return self.transform(load_rgb(self.index.files[i])), int(self.index.labels[i])

    @property
    def classes(self):
        return self.index.classes

    @property
    def fingerprint(self) -> str:
        return self.index.fingerprint


def get_imagefolder_iter_torch(root, batch_size, train, num_threads=4, device_id=None,
                               crop=IMAGENET.crop, val_size=IMAGENET.val_size, world_size=None,
                               local_rank=None, *, label_file=None, seed=None, drop_last=False, rank=None,
                               recipe=IMAGENET, classes=None):
    """The torchvision twin of get_imagefolder_iter_dali: same arguments, same recipe, same
    sample order; `num_threads` is the number of DataLoader workers. Outputs stay on the CPU."""
    _check_args(batch_size, num_threads, crop, val_size)
    train = _check_train(train)
    index = ImageFiles(root, label_file, classes)
    sampler = epoch_sampler(len(index), shuffle=train, seed=seed, rank=rank, world_size=world_size,
                            local_rank=local_rank)
    dataset = ImageFileDataset(index, torch_transform(recipe, train, crop, val_size))
    return TorchLoader(dataset, batch_size=batch_size, sampler=sampler, num_workers=num_threads,
                       drop_last=drop_last, persistent_workers=num_threads > 0)


def get_imagenet_iter_torch(type, image_dir, batch_size, num_threads=4, device_id=None, num_gpus=1,
                            crop=IMAGENET.crop, val_size=IMAGENET.val_size, world_size=None,
                            local_rank=None, *, label_file=None, seed=None, drop_last=False, rank=None):
    """The torchvision twin of get_imagenet_iter_dali (same arguments, same order)."""
    _check_args(batch_size, num_threads, crop, val_size)
    split = _imagenet_split(type, image_dir)
    return get_imagefolder_iter_torch(split, batch_size, type == "train", num_threads, device_id, crop,
                                      val_size, world_size, local_rank, label_file=label_file, seed=seed,
                                      drop_last=drop_last, rank=rank,
                                      classes=_train_classes(split, label_file))
