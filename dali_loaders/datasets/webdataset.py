"""WebDataset tar shards: the factories of both backends (sources/webdataset.py reads them)."""

from .. import recipes
from ..loader import DaliLoader, TorchLoader
from ..loader.checks import check_count
from ..loader.fallback import dali_available, warn_fallback
from ..sources.webdataset import IMAGE_KEYS, LABEL_KEY, WebDatasetSource
from ._common import loader_over


def _check_train(train) -> bool:
    if not isinstance(train, bool):
        raise ValueError(f"train must be True or False, got {train!r}")
    return train


def get_webdataset_iter_dali(shards, batch_size, num_threads=4, *, train, fallback=True, image_keys=IMAGE_KEYS,
                             label_key=LABEL_KEY, cache_dir=None, **options):
    """A DataLoader-like iterator over WebDataset tar shards on DALI.

    `shards`: paths, a folder of *.tar, a glob or `shard-{000..009}.tar`. Each sample's image
    is under one of `image_keys`, its class under `label_key` (ASCII digits; -1 where absent).
    Index files are made as needed (beside the shards, or in `cache_dir`). `train`: shuffle
    (by shard, see the module's doc) with equal steps per rank; else every sample once,
    in shard order. `transform` is handed each image decoded to RGB; default
    recipes.imagenet(train). A sample whose image cannot be decoded stops the epoch with
    an ImageDecodeError naming shard and member; `on_error="skip"` leaves such samples out
    (`loader.skipped` names them), `max_image_pixels` as get_imagefolder_iter_dali's.
    Every other keyword is DaliLoader's.
    """
    if not dali_available():
        warn_fallback(fallback)
        return get_webdataset_iter_torch(shards, batch_size, num_threads, train=train, image_keys=image_keys,
                                         label_key=label_key, cache_dir=cache_dir, **options)
    train = _check_train(train)
    check_count("batch_size", batch_size, 1)
    return loader_over(DaliLoader, WebDatasetSource(shards, image_keys, label_key, cache_dir), batch_size,
                       num_threads, train, lambda: recipes.imagenet(train), options)


def get_webdataset_iter_torch(shards, batch_size, num_threads=4, *, train, image_keys=IMAGE_KEYS,
                              label_key=LABEL_KEY, cache_dir=None, **options):
    """The twin of get_webdataset_iter_dali: the same samples, read from the same tars at the
    offsets tarfile found, decoded by PIL, in the same order; `num_threads` DataLoader workers."""
    train = _check_train(train)
    return loader_over(TorchLoader, WebDatasetSource(shards, image_keys, label_key, cache_dir), batch_size,
                       num_threads, train, lambda: recipes.imagenet(train), options)
