"""WebDataset tar shards: the factories of both backends (sources/webdataset.py reads them)."""

import torch

from .. import recipes
from ..loader.checks import check_count
from ..loader.fallback import dali_available, fall_back
from ..sources.screening import screen_webdataset
from ..sources.webdataset import (
    IMAGE_KEYS,
    LABEL_KEY,
    WebDatasetSource,
    WebDatasetTwin,
    name_the_sample,
)
from . import _common


def _check_train(train) -> bool:
    if not isinstance(train, bool):
        raise ValueError(f"train must be True or False, got {train!r}")
    return train


def get_webdataset_iter_dali(shards, batch_size, num_threads=4, *, train, seed=None, drop_last=False, rank=None,
                             world_size=None, local_rank=None, device_id=None, transform=None,
                             python_fallback=False, batch_transform=None,
                             memory_format=torch.contiguous_format, fallback=True, image_keys=IMAGE_KEYS,
                             label_key=LABEL_KEY, cache_dir=None, device=None, dali_cpu=None, output="tuple",
                             target_transform=None, max_image_pixels=_common.PIL_RULE, on_error="raise",
                             even_batches=False):
    """A DataLoader-like iterator over WebDataset tar shards on DALI (fn.readers.webdataset).

    `shards`: paths, a folder of *.tar, a glob or `shard-{000..009}.tar`. Each sample's image
    is under one of `image_keys`, its class under `label_key` (ASCII digits; -1 where absent).
    Index files are made as needed (beside the shards, or in `cache_dir`). `train`: shuffle
    (by shard, see the module's doc) with equal steps per rank; else every sample once,
    in shard order. `transform` is handed each image decoded to RGB; default
    recipes.imagenet(train). A sample whose image cannot be decoded stops the epoch with
    an ImageDecodeError naming shard and member; `on_error="skip"` leaves such samples out
    (`loader.skipped` names them), `max_image_pixels` as get_imagefolder_iter_dali's.
    The rest as get_cifar_iter_dali's.
    """
    if not dali_available():
        return fall_back(fallback, get_webdataset_iter_torch, locals())
    train = _check_train(train)
    check_count("batch_size", batch_size, 1)
    source = screen_webdataset(WebDatasetSource(shards, image_keys, label_key, cache_dir), max_image_pixels, on_error)
    return _common.build_dali(source, transform or recipes.imagenet(train), train, locals(),
                         explain=name_the_sample(source, batch_size))


def get_webdataset_iter_torch(shards, batch_size, num_threads=4, *, train, seed=None, drop_last=False, rank=None,
                              world_size=None, local_rank=None, device_id=None, transform=None,
                              python_fallback=False, batch_transform=None,
                              memory_format=torch.contiguous_format, image_keys=IMAGE_KEYS,
                              label_key=LABEL_KEY, cache_dir=None, device=None, dali_cpu=None, output="tuple",
                              target_transform=None, max_image_pixels=_common.PIL_RULE, on_error="raise",
                              even_batches=False):
    """The twin of get_webdataset_iter_dali: the same samples, read from the same tars at the
    offsets tarfile found, decoded by PIL, in the same order; `num_threads` DataLoader workers."""
    train = _check_train(train)
    source = screen_webdataset(WebDatasetSource(shards, image_keys, label_key, cache_dir), max_image_pixels, on_error)
    return _common.build_torch(WebDatasetTwin(source, transform or recipes.imagenet(train)), train, locals())
