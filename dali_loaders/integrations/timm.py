"""timm's `create_loader`, on DALI: timm's train.py swaps one import.

    from dali_loaders.timm import create_loader   # instead of: from timm.data import create_loader

The signature is timm 1.0's, parameter for parameter. The transform is timm's own
(`timm.data.create_transform` with the same arguments), set on the dataset as timm sets it,
and translated into the DALI graph. timm's ImageDataset over a folder and torchvision's
ImageFolder are read by DALI; other datasets, and recipes with a step DALI cannot run, take
DaliLoader's Python path (the dataset's own __getitem__ in worker processes; a note says why). With
`use_prefetcher=True` (timm's default) each batch is what timm's PrefetchLoader hands out:
FastCollateMixup mixes the uint8 batch (as its collate does), then the batch is converted to
`img_dtype` and normalized on `device` with timm's arithmetic, then timm's RandomErasing runs on
it with the prefetcher's settings; a `Mixup` given as collate_fn mixes the finished batch (as
train.py's mixup_fn does). Random draws are the loader's own, from (seed, epoch, rank, batch),
the seed the DALI loader's default: drawn from torch's generator at the first pass (as the
RandomSampler of timm's loader draws), so `torch.manual_seed` before create_loader reproduces a
run; 0 on every rank of several processes, as the DistributedSampler of timm's loader orders
with (train.py seeds each rank's generator apart).

What has no meaning for DALI is accepted and does nothing (pin_memory, persistent_workers,
use_multi_epochs_loader, worker_seeding: DALI's threads draw from the loader's seeds); what
cannot be honoured is refused by name (scheduled input sizes, a collate_fn other than timm's).
Repeated augmentation (num_aug_repeats with distributed) samples through timm's own
RepeatAugSampler. Split augmentation (train.py's --aug-splits: timm's AugMixDataset and
num_aug_splits) is read by DALI too: the crop and flips once, then the clean split and the
augmented ones, each batch the splits one after the other as fast_collate lays them out.
"""
from typing import Callable, Optional, Sequence, Tuple, Union

import torch

try:
    from timm.data import AugMixDataset, create_transform
    from timm.data.constants import IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD
    from timm.data.random_erasing import RandomErasing
except ImportError:
    raise ImportError('dali_loaders.timm needs timm: pip install "dali_loaders[timm]"') from None

from ..loader import DaliLoader
from ..seeds import derived_seed
from ..sources.files import FileSource
from ..transforms.mixing import batch_mixer, is_timm_mixup
from ..transforms.python_fallback import seeded_globals

ERASING_STREAM = 0x657261   # keeps the erasing draws apart from the mixing draws of the same batch

__all__ = ["create_loader", "TimmLoader"]


def create_loader(
        dataset,
        input_size: Union[int, Tuple[int, int], Tuple[int, int, int]],
        batch_size: int,
        is_training: bool = False,
        no_aug: bool = False,
        re_prob: float = 0.,
        re_mode: str = 'const',
        re_count: int = 1,
        re_split: bool = False,
        train_crop_mode: Optional[str] = None,
        scale: Optional[Tuple[float, float]] = None,
        ratio: Optional[Tuple[float, float]] = None,
        hflip: float = 0.5,
        vflip: float = 0.,
        color_jitter: float = 0.4,
        color_jitter_prob: Optional[float] = None,
        grayscale_prob: float = 0.,
        gaussian_blur_prob: float = 0.,
        auto_augment: Optional[str] = None,
        num_aug_repeats: int = 0,
        num_aug_splits: int = 0,
        interpolation: str = 'bilinear',
        mean: Tuple[float, ...] = IMAGENET_DEFAULT_MEAN,
        std: Tuple[float, ...] = IMAGENET_DEFAULT_STD,
        num_workers: int = 1,
        distributed: bool = False,
        crop_pct: Optional[float] = None,
        crop_mode: Optional[str] = None,
        crop_border_pixels: Optional[int] = None,
        collate_fn: Optional[Callable] = None,
        pin_memory: bool = False,
        fp16: bool = False,
        img_dtype: torch.dtype = torch.float32,
        device: torch.device = torch.device('cuda'),
        use_prefetcher: bool = True,
        use_multi_epochs_loader: bool = False,
        persistent_workers: bool = True,
        worker_seeding: str = 'all',
        tf_preprocessing: bool = False,
        input_size_choices: Optional[Sequence[Union[int, Tuple[int, int], Tuple[int, int, int]]]] = None,
        batch_size_choices: Optional[Sequence[int]] = None,
        batch_choice_weights: Optional[Sequence[float]] = None,
        batch_choice_seed: int = 0,
        batch_choice_schedule: str = 'constant',
        batch_schedule_epochs: Optional[int] = None,
        batch_schedule_spread: float = 0.65,
        batch_schedule_random_mix: float = 0.1,
        num_batches: Optional[int] = None,
):
    """timm.data.create_loader's arguments and batches, read by DALI (see the module's doc)."""
    refuse_unsupported(input_size_choices=input_size_choices, collate_fn=collate_fn, worker_seeding=worker_seeding)
    check_splits(dataset, num_aug_splits, collate_fn)
    re_num_splits = 0
    if re_split:   # timm: the erasing's split follows the augmentation splits, else halves
        re_num_splits = num_aug_splits or 2
    transform = create_transform(
        input_size, is_training=is_training, no_aug=no_aug, train_crop_mode=train_crop_mode, scale=scale,
        ratio=ratio, hflip=hflip, vflip=vflip, color_jitter=color_jitter, color_jitter_prob=color_jitter_prob,
        grayscale_prob=grayscale_prob, gaussian_blur_prob=gaussian_blur_prob, auto_augment=auto_augment,
        interpolation=interpolation, mean=mean, std=std, crop_pct=crop_pct, crop_mode=crop_mode,
        crop_border_pixels=crop_border_pixels, re_prob=re_prob, re_mode=re_mode, re_count=re_count,
        re_num_splits=re_num_splits, tf_preprocessing=tf_preprocessing, use_prefetcher=use_prefetcher,
        separate=num_aug_splits > 0)
    dataset.transform = transform
    device = torch.device(device)
    if fp16:   # timm: the deprecated fp16 overrides img_dtype
        img_dtype = torch.float16
    mixup = collate_fn if is_timm_mixup(collate_fn) else None
    if mixup is not None and batch_size % 2:
        raise ValueError(f"collate_fn timm.{type(mixup).__name__} needs an even batch_size (it mixes each image "
                         f"with its mirror in the batch, as timm asserts), got {batch_size}")
    source = folder_source(dataset)   # a plain folder: DALI reads its files
    sampler = repeating_sampler(dataset, num_aug_repeats, distributed, is_training)
    inner = DaliLoader(
        source if source is not None else dataset, batch_size=batch_size,
        shuffle=is_training if sampler is None else None, sampler=sampler,
        num_workers=num_workers, drop_last=is_training,
        transform=transform if source is not None else None,   # else the dataset's own, set above
        rank=None if distributed else 0, world_size=None if distributed else 1,
        even_batches=distributed and not is_training,   # timm's OrderedDistributedSampler pads
        device=dali_device(device), device_id=device.index if device.type == "cuda" else None)
    channels = input_size[0] if isinstance(input_size, (tuple, list)) and len(input_size) == 3 else len(mean)
    prefetch = Prefetching(mean, std, channels, img_dtype, re_prob if is_training and not no_aug else 0.,
                           re_mode, re_count, re_num_splits) if use_prefetcher else None
    return TimmLoader(inner, dataset, mixup, prefetch)


def refuse_unsupported(**arguments) -> None:
    if arguments["input_size_choices"] is not None:
        raise ValueError("create_loader: input_size_choices (scheduled input sizes) is not supported by the DALI "
                         "loader; use timm.data.create_loader for scheduled batching")
    collate_fn = arguments["collate_fn"]
    if collate_fn is not None and not is_timm_mixup(collate_fn) and not is_fast_collate(collate_fn):
        raise ValueError(f"create_loader: collate_fn {getattr(collate_fn, '__qualname__', type(collate_fn).__name__)} "
                         f"is not supported: DALI hands out whole batches; timm's fast_collate, FastCollateMixup "
                         f"and Mixup are")
    seeding = arguments["worker_seeding"]
    if not callable(seeding) and seeding not in ("all", "part"):
        raise ValueError(f"create_loader: worker_seeding must be 'all', 'part' or a callable (as timm's), got "
                         f"{seeding!r}")


def repeating_sampler(dataset, num_aug_repeats: int, distributed: bool, is_training: bool):
    """timm's RepeatAugSampler where timm's create_loader makes one (distributed training with
    num_aug_repeats > 0: each sample num_aug_repeats times an epoch, the copies on different
    ranks, each augmented apart), else None."""
    if not num_aug_repeats:
        return None
    if not distributed:
        raise ValueError("create_loader: num_aug_repeats > 0 needs distributed=True (timm's RepeatAugSampler "
                         "spreads each sample's copies over the processes), as timm asserts")
    if not is_training:   # timm's evaluation loader: OrderedDistributedSampler, no repeats
        return None
    from timm.data.distributed_sampler import RepeatAugSampler

    return RepeatAugSampler(dataset, num_repeats=num_aug_repeats)


def check_splits(dataset, num_aug_splits: int, collate_fn) -> None:
    """Split augmentation (train.py's --aug-splits) is timm's AugMixDataset with
    num_aug_splits > 0, without a mixing collate_fn (train.py asserts as much)."""
    wrapped = isinstance(dataset, AugMixDataset)
    if num_aug_splits > 0 and not wrapped:
        raise ValueError(f"create_loader: num_aug_splits={num_aug_splits} needs the dataset wrapped in "
                         f"timm.data.AugMixDataset(dataset, num_splits={num_aug_splits}), as timm's train.py wraps it")
    if wrapped and num_aug_splits <= 0:
        raise ValueError(f"create_loader: an AugMixDataset needs num_aug_splits > 0 (its num_splits, "
                         f"{dataset.num_splits}), which makes its three transforms")
    if wrapped and is_timm_mixup(collate_fn):
        raise ValueError(f"create_loader: collate_fn timm.{type(collate_fn).__name__} does not mix split batches "
                         f"(num_aug_splits={num_aug_splits}); timm's train.py refuses the pair too")


def is_fast_collate(collate_fn) -> bool:
    from timm.data.loader import fast_collate

    return collate_fn is fast_collate or collate_fn is torch.utils.data.default_collate


def folder_source(dataset) -> Optional[FileSource]:
    """The image files and labels of timm's ImageDataset over a folder reader, or torchvision's
    ImageFolder, as a source DALI reads; None for other datasets (DaliLoader reads them as it
    can: its adapters, or the dataset's own __getitem__ on the Python path)."""
    from timm.data import IterableImageDataset
    from torchvision.datasets import ImageFolder

    if isinstance(dataset, IterableImageDataset):
        raise TypeError("create_loader: timm's IterableImageDataset (streamed readers: tfds, wds, hfids) is not "
                        "supported by the DALI loader; give an ImageDataset (a folder, or hfds/ for a Hugging Face "
                        "dataset), or an ImageFolder")
    samples = folder_samples(dataset)
    if not samples:
        return None
    classes = getattr(dataset, "classes", None) if isinstance(dataset, ImageFolder) else None
    return FileSource([path for path, _ in samples], [int(target) for _, target in samples],
                      f"timm:{type(dataset).__name__}", classes=classes)


def folder_samples(dataset):
    """[(path, class index)] where the dataset reads plain files as RGB with nothing more
    (no target_transform, no extra features, no bytes); None otherwise."""
    from timm.data import ImageDataset
    from timm.data.readers.reader_image_folder import ReaderImageFolder
    from torchvision.datasets import ImageFolder
    from torchvision.datasets.folder import default_loader

    if type(dataset) is ImageDataset:
        plain = (type(dataset.reader) is ReaderImageFolder and not dataset.load_bytes
                 and dataset.input_img_mode == "RGB" and dataset.target_transform is None
                 and dataset.additional_features is None)
        return list(dataset.reader.samples) if plain else None
    if type(dataset) is ImageFolder:
        plain = dataset.loader is default_loader and dataset.target_transform is None
        return list(dataset.samples) if plain else None
    return None


def dali_device(device: torch.device) -> str:
    if device.type not in ("cuda", "cpu"):
        raise ValueError(f"create_loader: device {device} is not supported by the DALI loader (cuda or cpu)")
    return "gpu" if device.type == "cuda" else "cpu"


class Prefetching:
    """What timm's PrefetchLoader does to each batch: to `img_dtype`, normalized with mean and
    std scaled to 0..255 (subtract, then divide, in img_dtype), then RandomErasing."""

    def __init__(self, mean, std, channels: int, img_dtype, re_prob, re_mode, re_count, re_num_splits):
        from timm.data.loader import adapt_to_chs

        self.mean = [x * 255 for x in adapt_to_chs(mean, channels)]
        self.std = [x * 255 for x in adapt_to_chs(std, channels)]
        self.img_dtype = img_dtype
        self.erasing = dict(probability=re_prob, mode=re_mode, max_count=re_count, num_splits=re_num_splits) \
            if re_prob > 0 else None
        self._erasers, self._stats = {}, {}

    def __call__(self, images: torch.Tensor, seed: int) -> torch.Tensor:
        device = images.device
        if device not in self._stats:   # made once per device, as the prefetcher's
            self._stats[device] = tuple(torch.tensor(values, device=device, dtype=self.img_dtype).view(1, -1, 1, 1)
                                        for values in (self.mean, self.std))
        mean, std = self._stats[device]
        images = images.to(self.img_dtype).sub_(mean).div_(std)
        if self.erasing is not None:
            eraser = self._erasers.get(device)
            if eraser is None:
                eraser = self._erasers[device] = RandomErasing(device=device, **self.erasing)
            with seeded_globals(seed, device):   # timm's eraser draws from Python's and torch's generators
                images = eraser(images)
        return images


def split_batch(splits, labels):
    """The splits of a batch of AugMixDataset's tuples, one after the other, each with the
    batch's labels: what timm's fast_collate makes (train.py's JSD loss cuts it in num_splits)."""
    return torch.cat(splits), labels.repeat(len(splits))


class TimmLoader:
    """The loader create_loader returns: timm's PrefetchLoader's face (len, sampler,
    batch_sampler, dataset, mixup_enabled) over a DALI loader. Everything else (set_epoch,
    state_dict, close, skipped, ...) is the DALI loader's."""

    def __init__(self, loader, dataset, mixup, prefetch: Optional[Prefetching]):
        self.loader, self._dataset, self.mixup, self.prefetch = loader, dataset, mixup, prefetch
        # the inner loader has no collate_fn: its batches are new and nobody else's, so CutMix pastes into them
        self._mixer = batch_mixer(mixup, loader.order, in_place=True) if mixup is not None else None
        self._first_batch = 0   # the index of the next loop's first batch: a resumed epoch starts later

    def load_state_dict(self, state: dict) -> None:
        """The DALI loader's resume; the batches still to come are mixed and erased as they would have been."""
        self.loader.load_state_dict(state)
        self._first_batch = int(state.get("batches_done", 0)) if isinstance(state, dict) else 0

    def __iter__(self):
        order = self.loader.order
        start, self._first_batch = self._first_batch, 0
        for k, (images, labels) in enumerate(self.loader, start):
            epoch = order.epoch   # the order starts its epoch when the first batch is drawn
            if isinstance(images, list) and self.prefetch is not None:   # split augmentation, as fast_collate
                images, labels = split_batch(images, labels)
            if self._mixer is not None and len(images) % 2:
                raise ValueError(f"collate_fn timm.{type(self.mixup).__name__} needs batches of an even size (as "
                                 f"timm asserts); batch {k} has {len(images)}: use drop_last or an even dataset")
            fast = type(self.mixup).__name__ == "FastCollateMixup"
            if fast:   # its collate mixes the uint8 batch, before the prefetcher converts it
                images, labels = self._mixer(images, labels, epoch, k)
            if self.prefetch is not None:
                images = self.prefetch(images, derived_seed(order.seed, epoch, order.shard.rank, k, ERASING_STREAM))
            if self._mixer is not None and not fast:   # train.py's mixup_fn, on the finished batch
                images, labels = self._mixer(images, labels, epoch, k)
            yield images, labels

    def __len__(self) -> int:
        return len(self.loader)

    @property
    def sampler(self):
        return self.loader.sampler

    @property
    def batch_sampler(self):
        return self.loader.batch_sampler

    @property
    def dataset(self):
        return self._dataset

    @property
    def mixup_enabled(self) -> bool:
        return bool(self.mixup.mixup_enabled) if self.mixup is not None else False

    @mixup_enabled.setter
    def mixup_enabled(self, enabled: bool) -> None:
        if self.mixup is not None:
            self.mixup.mixup_enabled = enabled

    def __getattr__(self, name):
        if name.startswith("__") or name == "loader":
            raise AttributeError(name)
        return getattr(self.loader, name)
