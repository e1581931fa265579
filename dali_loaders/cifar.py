"""CIFAR-10 and CIFAR-100: the pickle reader, the DALI pipeline and its torchvision twin.

The file format, once: each batch file is a Python-2 pickle (load with
encoding="latin1") of a dict whose "data" is an N x 3072 uint8 array, every row one
32x32 image as its R, then G, then B plane, row-major; the labels are a list of N ints
under "labels" (CIFAR-10) or "fine_labels" and "coarse_labels" (CIFAR-100).
"""
import os
import pickle
import zlib
from typing import Optional

import numpy as np
import torch
from torch.utils.data import Dataset

from .distributed import epoch_sampler
from .iterator import (DaliLoader, TorchLoader, build_dali_pipeline, check_count, dali_available, fall_back,
                       pick_device_id)
from .recipes import CIFAR, CifarRecipe, on_255_scale

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
    try:
        with open(path, "rb") as f:
            entry = pickle.load(f, encoding="latin1")
    except Exception as e:
        raise ValueError(f"{path!r} is not a CIFAR python pickle ({type(e).__name__}: {e})") from None
    data = entry.get("data") if isinstance(entry, dict) else None
    labels = entry.get(label_key) if isinstance(entry, dict) else None
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


class CifarArrays:
    """One split of CIFAR in memory: `images` (N, 32, 32, 3) uint8 HWC, `labels` (N,) int64."""

    def __init__(self, image_dir: str, train: bool, dataset: str = "cifar10", label_type: str = "fine"):
        if dataset not in LAYOUT:
            raise ValueError(f"dataset must be one of {sorted(LAYOUT)}, got {dataset!r}")
        if (dataset, label_type) not in LABEL_KEY:
            raise ValueError(f"label_type {label_type!r} is not available for {dataset}")
        folder = _find_folder(image_dir, dataset)
        files = LAYOUT[dataset][1] if train else LAYOUT[dataset][2]
        self.images, self.labels = _read_batches([os.path.join(folder, f) for f in files],
                                                 LABEL_KEY[dataset, label_type])
        self.name = f"{dataset}/{'train' if train else 'test'}/{label_type}"

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def fingerprint(self) -> str:
        return f"{self.name}/{len(self)}/{zlib.crc32(self.labels.tobytes()):08x}"


class _BatchFeeder:
    """external_source callback: batch `info.iteration` of `order` and, when training, each
    image's random crop, flip and Cutout square. A pure function of (seed, iteration), so a
    pipeline restored from a DALI checkpoint resumes where it stopped.

    The random numbers are drawn here, for the whole batch at once, rather than by DALI's
    random operators: those work sample by sample, and on 32x32 images their per-sample
    cost is as large as the crop's. DALI applies them. Training images come zero-padded by
    `padding` px, so that crop_mirror_normalize can crop, flip, normalize and transpose in
    one pass.
    """

    def __init__(self, arrays: CifarArrays, order: np.ndarray, batch_size: int,
                 augment: Optional[CifarRecipe] = None, seed: int = 0, cutout: int = 0):
        self.arrays, self.order, self.batch_size = arrays, order, batch_size
        self.augment, self.seed, self.cutout = augment, seed, cutout

    def __call__(self, info):
        indices = self.order[info.iteration * self.batch_size:(info.iteration + 1) * self.batch_size]
        if len(indices) == 0:
            raise StopIteration
        images, labels = self.arrays.images[indices], self.arrays.labels[indices]
        if self.augment is None:
            return images, labels
        return (self._padded(images), labels) + self._augmentation(len(indices), info.iteration)

    def _padded(self, images: np.ndarray) -> np.ndarray:
        pad = self.augment.padding
        padded = np.zeros((len(images), images.shape[1] + 2 * pad, images.shape[2] + 2 * pad, 3), np.uint8)
        padded[:, pad:pad + images.shape[1], pad:pad + images.shape[2]] = images
        return padded

    def _augmentation(self, n: int, iteration: int) -> tuple:
        """Per image: the crop origin in the padded image, y and x, uniform in 0 .. 2 * padding,
        as crop_mirror_normalize's relative positions (origin / (2 * padding): exact in float32);
        the flip, 1 with probability flip_p; with Cutout, the erased square's top-left corner,
        its centre uniform over the image (DeVries & Taylor: clipped at the border)."""
        rng = np.random.default_rng([self.seed, iteration])
        span = 2 * self.augment.padding
        origins = rng.integers(0, span + 1, (2, n))
        positions = (origins / max(span, 1)).astype(np.float32)
        flips = (rng.random(n) < self.augment.flip_p).astype(np.int32)
        drawn = (positions[0], positions[1], flips)
        if self.cutout:
            centres = rng.integers(0, self.augment.size, (n, 2))
            drawn += ((centres - self.cutout // 2).astype(np.float32),)
        return drawn


def _cifar_graph(feeder: _BatchFeeder, recipe: CifarRecipe, train: bool, cutout: int, device: str):
    from nvidia.dali import fn, types

    if train:
        drawn = [types.FLOAT, types.FLOAT, types.INT32] + [types.FLOAT] * bool(cutout)
        images, labels, crop_y, crop_x, mirror, *cutout_corner = fn.external_source(
            source=feeder, num_outputs=2 + len(drawn), batch=True, batch_info=True,
            layout=["HWC"] + [""] * (1 + len(drawn)), dtype=[types.UINT8, types.INT64] + drawn)
        crop = dict(crop=(recipe.size, recipe.size), crop_pos_x=crop_x, crop_pos_y=crop_y)
    else:
        images, labels = fn.external_source(source=feeder, num_outputs=2, batch=True, batch_info=True,
                                            layout=["HWC", ""], dtype=[types.UINT8, types.INT64])
        crop, mirror, cutout_corner = {}, 0, []
    if device == "gpu":
        images, labels = images.gpu(), labels.gpu()
    images = fn.crop_mirror_normalize(images, mirror=mirror, dtype=types.FLOAT, output_layout="CHW",
                                      mean=on_255_scale(recipe.mean), std=on_255_scale(recipe.std), **crop)
    if cutout_corner:  # zeroed after normalization, as in the Cutout paper
        images = fn.erase(images, anchor=cutout_corner[0], shape=[float(cutout), float(cutout)],
                          axis_names="HW", fill_value=0.0)
    return images, labels


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
                        val_size=32, cutout=0, *, dataset="cifar10", label_type="fine", seed=None,
                        drop_last=False, device_id=None, rank=None, fallback=True):
    """A DataLoader-like CIFAR-10/100 iterator on DALI: `for images, labels in loader`.

    images: float32 (B, 3, 32, 32), normalized; labels: int64 (B,); on the GPU if CUDA is
    available, else on the CPU. `rank`/`world_size` default to torch.distributed's or
    torchrun's; `local_rank` picks the GPU (and, given alone, the shard, as it used to).
    """
    if not dali_available():
        return fall_back(fallback, get_cifar_iter_torch, locals())
    train = _check_args(type, batch_size, val_size, cutout)
    check_count("num_threads", num_threads, 1, " (DALI worker threads)")
    arrays = CifarArrays(image_dir, train, dataset, label_type)
    sampler = epoch_sampler(len(arrays), shuffle=train, seed=seed, rank=rank, world_size=world_size,
                            local_rank=local_rank)
    gpu = pick_device_id(device_id, sampler.local_rank)
    recipe = CIFAR[dataset]

    def build_pipeline(order, pipeline_seed, checkpoint):
        feeder = _BatchFeeder(arrays, order, batch_size, recipe if train else None, pipeline_seed, cutout)
        return build_dali_pipeline(_cifar_graph, feeder, recipe, train, cutout,
                                   "cpu" if gpu is None else "gpu", batch_size=batch_size,
                                   num_threads=num_threads, device_id=gpu, seed=pipeline_seed,
                                   checkpoint=checkpoint)

    return DaliLoader(arrays, build_pipeline, batch_size=batch_size, sampler=sampler, drop_last=drop_last)


# -- the torchvision twin ----------------------------------------------------------------


class Cutout(torch.nn.Module):
    """Zero a length x length square centred on a uniform pixel, clipped at the border."""

    def __init__(self, length: int):
        super().__init__()
        self.length = length

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        height, width = image.shape[-2:]
        y, x = int(torch.randint(height, ())), int(torch.randint(width, ()))
        top, left = max(y - self.length // 2, 0), max(x - self.length // 2, 0)
        bottom, right = y - self.length // 2 + self.length, x - self.length // 2 + self.length
        image = image.clone()
        image[..., top:max(bottom, 0), left:max(right, 0)] = 0
        return image


def torch_transform(recipe: CifarRecipe, train: bool, cutout: int):
    from torchvision import transforms as T

    steps = [T.RandomCrop(recipe.size, padding=recipe.padding), T.RandomHorizontalFlip(recipe.flip_p)] \
        if train else []
    steps += [T.ConvertImageDtype(torch.float32), T.Normalize(recipe.mean, recipe.std)]
    if train and cutout:
        steps.append(Cutout(cutout))
    return T.Compose(steps)


class CifarDataset(Dataset):
    """CifarArrays as a torch Dataset (uint8 HWC -> transformed CHW tensors); no md5 check."""

    def __init__(self, arrays: CifarArrays, transform):
        self.arrays, self.transform = arrays, transform

    def __len__(self) -> int:
        return len(self.arrays)

    def __getitem__(self, i):
        image = torch.from_numpy(self.arrays.images[i]).permute(2, 0, 1)
        return self.transform(image), int(self.arrays.labels[i])

    @property
    def fingerprint(self) -> str:
        return self.arrays.fingerprint


def get_cifar_iter_torch(type, image_dir, batch_size, num_threads=4, local_rank=None, world_size=None,
                         val_size=32, cutout=0, *, dataset="cifar10", label_type="fine", seed=None,
                         drop_last=False, device_id=None, rank=None):
    """The torchvision twin of get_cifar_iter_dali: same arguments, same recipe, same sample
    order; `num_threads` is the number of DataLoader workers. Outputs stay on the CPU."""
    train = _check_args(type, batch_size, val_size, cutout)
    arrays = CifarArrays(image_dir, train, dataset, label_type)
    sampler = epoch_sampler(len(arrays), shuffle=train, seed=seed, rank=rank, world_size=world_size,
                            local_rank=local_rank)
    dataset_ = CifarDataset(arrays, torch_transform(CIFAR[dataset], train, cutout))
    return TorchLoader(dataset_, batch_size=batch_size, sampler=sampler, num_workers=num_threads,
                       drop_last=drop_last, persistent_workers=num_threads > 0)
