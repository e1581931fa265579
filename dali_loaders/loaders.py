"""The two kinds of data a dataset module hands over, and the one factory per backend.

A dataset module reads its format into a source: `ArraySource` (images in memory, fed to
DALI by external_source) or `FileSource` (encoded files, read by fn.readers.file and
decoded by DALI). `dali_loader` runs a torchvision transform on it inside DALI;
`torch_loader` runs the same transform with torchvision, as its twin.
"""
import zlib
from typing import Callable, List, Optional, Sequence

import numpy as np
import torch
from torch.utils.data import Dataset

from . import autoaugment  # noqa: F401  registers its translators into transforms.TRANSLATORS
from . import transforms
from .mixing import batch_mixer
from .distributed import epoch_sampler
from .iterator import DaliLoader, TorchLoader, build_dali_pipeline, check_count, pick_device_id


class ArraySource:
    """Images in memory, (N, H, W, C) uint8 (C is 1 or 3), and labels (N,) int64."""

    def __init__(self, images: np.ndarray, labels: np.ndarray, name: str):
        if images.ndim == 3:
            images = images[..., None]
        self.images, self.labels, self.name = images, np.asarray(labels, dtype=np.int64), name

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def fingerprint(self) -> str:
        return f"{self.name}/{len(self)}/{zlib.crc32(self.labels.tobytes()):08x}"

    def pil_image(self, i: int):
        """Sample i as torchvision's dataset classes hand it to a transform: a PIL image."""
        from PIL import Image

        pixels = self.images[i]
        return Image.fromarray(pixels[..., 0], "L") if pixels.shape[-1] == 1 else Image.fromarray(pixels, "RGB")

    def read(self, order: np.ndarray, batch_size: int, device: str):
        """The graph's first step: batch after batch of `order`, as (Images, labels)."""
        from nvidia.dali import fn, types

        images, labels = fn.external_source(source=_ArrayFeeder(self, order, batch_size), num_outputs=2,
                                            batch=True, batch_info=True, layout=["HWC", ""],
                                            dtype=[types.UINT8, types.INT64])
        if device == "gpu":
            images = images.gpu()
        _, height, width, channels = self.images.shape
        return transforms.Images(images, height, width, channels, device), labels


class _ArrayFeeder:
    """external_source callback: batch `info.iteration` of `order`. A pure function of the
    iteration, so a pipeline restored from a DALI checkpoint resumes where it stopped."""

    def __init__(self, source: ArraySource, order: np.ndarray, batch_size: int):
        self.source, self.order, self.batch_size = source, order, batch_size

    def __call__(self, info):
        indices = self.order[info.iteration * self.batch_size:(info.iteration + 1) * self.batch_size]
        if len(indices) == 0:
            raise StopIteration
        return self.source.images[indices], self.source.labels[indices]


class FileSource:
    """Encoded image files and their labels; decoded to RGB as PIL's convert("RGB") does."""

    def __init__(self, files: List[str], labels: Sequence[int], name: str, classes: Optional[List[str]] = None):
        self.files, self.labels, self.name = list(files), np.asarray(labels, dtype=np.int64), name
        self.classes = classes

    def __len__(self) -> int:
        return len(self.files)

    @property
    def fingerprint(self) -> str:
        listing = "\n".join(self.files).encode() + self.labels.tobytes()
        return f"{self.name}/{len(self)}/{zlib.crc32(listing):08x}"

    def pil_image(self, i: int):
        from .imagenet import load_rgb

        return load_rgb(self.files[i])

    def read(self, order: np.ndarray, batch_size: int, device: str):
        from nvidia.dali import fn

        encoded, labels = fn.readers.file(files=[self.files[i] for i in order], labels=self.labels[order].tolist(),
                                          random_shuffle=False, name="Reader")
        return encoded_images(encoded, device), labels


def encoded_images(encoded, device: str) -> transforms.Images:
    """Encoded files as the graph's Images: decoded to RGB when a step first needs pixels."""
    from nvidia.dali import fn, types

    shape = fn.peek_image_shape(encoded, dtype=types.INT32, adjust_orientation=False)
    images = transforms.Images(encoded, shape[0], shape[1], 3, device)
    images.encoded, images.decode_args = True, decode_args(device)
    return images


def decode_args(device: str) -> dict:
    """The decoder's settings: torchvision (PIL) ignores EXIF orientation and upsamples
    chroma smoothly, so the decoder does too."""
    from nvidia.dali import types

    return dict(device="mixed" if device == "gpu" else "cpu", output_type=types.RGB,
                jpeg_fancy_upsampling=True, adjust_orientation=False)


# -- the DALI loader ---------------------------------------------------------------------


def graph(source, order: np.ndarray, per_batch: int, recipe: transforms.Plan, layout: str, device: str):
    """The whole pipeline: read, the translated steps, the Python steps if any; (images, labels).
    (`per_batch`, not batch_size: pipeline_def takes that name for itself.)"""
    read_on = "cpu" if recipe.python else device   # Python steps need the pixels on the CPU
    images, labels = source.read(order, per_batch, read_on)
    images.layout = layout
    images = transforms.apply(recipe.translated, images)
    images.decode()
    if recipe.python:
        transforms.run_in_python(recipe.python, images)
    else:
        images.materialize()
    if device == "gpu":
        images.data, labels = images.data.gpu(), labels.gpu()
    return images.data, labels


def dali_loader(source, transform, *, train: bool, batch_size: int, num_threads: int, seed=None,
                drop_last: bool = False, rank=None, world_size=None, local_rank=None, device_id=None,
                python_fallback: bool = False, memory_format=torch.contiguous_format,
                explain_failure: Optional[Callable] = None, batch_transform=None) -> DaliLoader:
    """A DaliLoader over `source`, with `transform` translated into its DALI graph, and
    `batch_transform` (MixUp, CutMix) applied to each batch (see mixing.py)."""
    check_count("batch_size", batch_size, 1)
    check_count("num_threads", num_threads, 1, " (DALI worker threads)")
    layout = output_layout(memory_format)
    recipe = transforms.plan(transform, python_fallback)
    if recipe.python:
        transforms.warn_slow(recipe)
    sampler = sampler_for(source)(len(source), shuffle=train, seed=seed, rank=rank, world_size=world_size,
                                  local_rank=local_rank)
    gpu = pick_device_id(device_id, sampler.local_rank)
    device = "cpu" if gpu is None else "gpu"

    def build_pipeline(order, pipeline_seed, checkpoint):
        return build_dali_pipeline(graph, source, order, batch_size, recipe, layout, device,
                                   batch_size=batch_size, num_threads=num_threads, device_id=gpu,
                                   seed=pipeline_seed, checkpoint=checkpoint,
                                   conditionals=transforms.needs_conditionals(recipe))

    return DaliLoader(source, build_pipeline, batch_size=batch_size, sampler=sampler, drop_last=drop_last,
                      explain_failure=explain_failure, finish=batch_finisher(layout, recipe.output_dtype),
                      batch_transform=batch_mixer(batch_transform, sampler))


def sampler_for(source) -> Callable:
    """The source's own `epoch_sampler` if it has one (a source that can only read its samples
    in some orders, as WebDatasetSource its shards), else distributed.epoch_sampler."""
    return getattr(source, "epoch_sampler", epoch_sampler)


def output_layout(memory_format) -> str:
    if memory_format in (None, torch.contiguous_format):
        return "CHW"
    if memory_format == torch.channels_last:
        return "HWC"   # NHWC in memory is an NCHW tensor in channels_last
    raise ValueError(f"memory_format must be torch.contiguous_format or torch.channels_last, got {memory_format!r}")


def batch_finisher(layout: str, dtype: Optional[torch.dtype]) -> Callable[[torch.Tensor], torch.Tensor]:
    """What the loader does to each batch DALI hands over: a view as NCHW (no copy), and the
    cast to bfloat16, which DALI lacks."""
    def finish(images: torch.Tensor) -> torch.Tensor:
        if layout == "HWC" and images.dim() == 4:
            images = images.permute(0, 3, 1, 2)
        if dtype == torch.bfloat16:
            images = images.to(torch.bfloat16)
        return images
    return finish


# -- the torchvision twin ------------------------------------------------------------------


class SourceDataset(Dataset):
    """A source as a torch Dataset: the transform applied to the image torchvision would load."""

    def __init__(self, source, transform):
        self.source, self.transform = source, transform

    def __len__(self) -> int:
        return len(self.source)

    def __getitem__(self, i):
        image = self.source.pil_image(i)
        return transforms.as_tensor(transforms.call_steps(self.transform, image)), int(self.source.labels[i])

    @property
    def fingerprint(self) -> str:
        return self.source.fingerprint

    @property
    def classes(self):
        return getattr(self.source, "classes", None)


def torch_loader(dataset: Dataset, *, train: bool, batch_size: int, num_workers: int, seed=None,
                 drop_last: bool = False, rank=None, world_size=None, local_rank=None,
                 memory_format=torch.contiguous_format, batch_transform=None) -> TorchLoader:
    """A DataLoader over `dataset` (a SourceDataset, or torchvision's own dataset class) with
    the DALI loader's sample order, output layout and batch_transform."""
    check_count("batch_size", batch_size, 1)
    check_count("num_threads", num_workers, 0, " (DataLoader workers)")
    layout = output_layout(memory_format)
    sampler = sampler_for(dataset)(len(dataset), shuffle=train, seed=seed, rank=rank, world_size=world_size,
                                   local_rank=local_rank)
    collate = _collate_channels_last if layout == "HWC" else None
    mixer = batch_mixer(batch_transform, sampler)
    loader_class = TorchLoader if mixer is None else BatchTransformedTorchLoader
    loader = loader_class(dataset, batch_size=batch_size, sampler=sampler, num_workers=num_workers,
                          drop_last=drop_last, persistent_workers=num_workers > 0, collate_fn=collate)
    loader.batch_transform = mixer
    return loader


class BatchTransformedTorchLoader(TorchLoader):
    """The twin with a batch_transform: each batch, as it leaves the DataLoader, goes through
    the same BatchMixer as the DALI loader's, with the same (epoch, batch index)."""

    batch_transform = None

    def __iter__(self):
        for k, (images, labels) in enumerate(super().__iter__()):
            # the sampler starts its epoch when the first batch is drawn: read after it
            yield self.batch_transform(images, labels, self.sampler.epoch, k)


def _collate_channels_last(samples):
    images, labels = torch.utils.data.default_collate(samples)
    return images.contiguous(memory_format=torch.channels_last), labels


def serialized_gpu_graph(source, transform, batch_size: int = 4, python_fallback: bool = False) -> bytes:
    """The GPU variant of a loader's graph, serialized without a GPU: DALI checks every
    operator and argument against its schemas for the GPU backend while doing so."""
    from nvidia.dali import pipeline_def

    recipe = transforms.plan(transform, python_fallback)
    pipe = pipeline_def(graph, enable_conditionals=transforms.needs_conditionals(recipe))(
        source, np.arange(min(len(source), batch_size)), batch_size, recipe, "CHW", "gpu",
        batch_size=batch_size, num_threads=1, device_id=None, seed=1)
    return pipe.serialize()
