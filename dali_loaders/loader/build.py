"""The one factory per backend: `dali_loader` runs a torchvision transform on a source inside
DALI; the graph it builds; the output layout and dtype.
"""
from typing import Callable, Optional

import numpy as np
import torch

from .. import transforms
from ..transforms.mixing import batch_mixer
from ._dali import build_dali_pipeline, pick_device_id
from .checks import check_count
from .dali_loader import DaliLoader
from ..distributed import epoch_sampler
from .options import LoaderOptions, check_options, resolve_device
from .outputs import LabelTable, ShapedLoader
from .pipeline import EpochOrder

# -- the DALI loader ---------------------------------------------------------------------


def graph(source, feed, per_batch: int, recipe: transforms.Plan, layout: str, variant: str,
          host_labels: bool = False):
    """The whole pipeline: read, the translated steps, the Python steps if any; (images, labels),
    or the images alone with `host_labels` (the loader reads the labels itself: see
    dali_loader; the source must have host_labels).
    (`per_batch`, not batch_size: pipeline_def takes that name for itself.) `variant`: one
    graph for all three (options.DEVICES); they differ only in the devices named.

    The source interface: `source.read(feed, batch_size, device)` returns (Images, labels) of
    batch after batch of `feed`'s samples, each run's batch `feed.batch(info.iteration,
    batch_size)`, through external_source: the loader sets `feed.indices` each epoch, and a
    restored checkpoint sets the iteration, so the graph is defined once (pipeline.py). A plain
    array of indices is a fixed order."""
    feed = EpochOrder.of(feed)
    device = "cpu" if variant == "cpu" else "gpu"
    read_on = "cpu" if recipe.python else device   # Python steps need the pixels on the CPU
    images, labels = source.read(feed, per_batch, read_on, labels=False) if host_labels else \
        source.read(feed, per_batch, read_on)
    if variant == "cpu-decode" and images.encoded:
        images.decode_args = dict(images.decode_args, device="cpu")   # Images.decode moves them to the GPU
    images.layout = layout
    images = transforms.apply(recipe.translated, images)
    images.decode()
    if recipe.python:
        transforms.run_in_python(recipe.python, images)
    else:
        images.materialize()
    if device == "gpu":
        images.data = images.data.gpu()
        labels = None if labels is None else labels.gpu()
    return images.data if labels is None else (images.data, labels)


def dali_loader(source, transform, *, train: bool, batch_size: int, num_threads: int, seed=None,
                drop_last: bool = False, rank=None, world_size=None, local_rank=None, device_id=None,
                python_fallback: bool = False, memory_format=torch.contiguous_format,
                explain_failure: Optional[Callable] = None, batch_transform=None,
                device: Optional[str] = None, dali_cpu: Optional[bool] = None, output: str = "tuple",
                target_transform: Optional[Callable] = None, label_table: Optional[LabelTable] = None,
                even_batches: bool = False):
    """A DaliLoader over `source`, with `transform` translated into its DALI graph, and
    `batch_transform` (MixUp, CutMix) applied to each batch (see mixing.py). `device`,
    `dali_cpu`, `output` and `target_transform` (see options.py) pick the device variant and
    shape the batches; `label_table` maps the source's labels (sample indices) onto the real ones.
    `even_batches`: every rank steps as many times, the shorter validation parts padded
    (loader.padded)."""
    options = check_options(device, dali_cpu, output, target_transform)
    check_labels(options, label_table, batch_transform)
    check_count("batch_size", batch_size, 1)
    check_count("num_threads", num_threads, 1, " (DALI worker threads)")
    layout = output_layout(memory_format)
    recipe = transforms.plan(transform, python_fallback)
    if recipe.python:
        transforms.warn_slow(recipe)
    sampler = sampler_for(source)(len(source), shuffle=train, seed=seed, rank=rank, world_size=world_size,
                                  local_rank=local_rank)
    sampler.even_batches = bool(even_batches)
    variant = resolve_device(options.device, device_id)
    gpu = None if variant == "cpu" else pick_device_id(device_id, sampler.local_rank)

    feed = EpochOrder()
    host_labels = getattr(source, "host_labels", None)

    def build_pipeline(pipeline_seed, checkpoint):
        return build_dali_pipeline(graph, source, feed, batch_size, recipe, layout, variant,
                                   host_labels is not None, batch_size=batch_size, num_threads=num_threads,
                                   device_id=gpu, seed=pipeline_seed, checkpoint=checkpoint,
                                   conditionals=transforms.needs_conditionals(recipe, variant))

    loader = DaliLoader(source, build_pipeline, feed, batch_size=batch_size, sampler=sampler, drop_last=drop_last,
                        explain_failure=explain_failure, finish=batch_finisher(layout, recipe.output_dtype),
                        batch_transform=batch_mixer(batch_transform, sampler), host_labels=host_labels)
    return shaped(loader, options, label_table)


def check_labels(options: LoaderOptions, label_table: Optional[LabelTable], batch_transform) -> None:
    if batch_transform is not None and (label_table is not None or options.target_transform is not None):
        raise ValueError("batch_transform (MixUp, CutMix) mixes one-integer labels; it cannot be combined with "
                         "target_transform= or sequence labels")


def shaped(loader, options: LoaderOptions, label_table: Optional[LabelTable] = None):
    """`loader` itself, or wrapped if its batches must look otherwise (outputs.ShapedLoader)."""
    if options.output == "tuple" and options.target_transform is None and label_table is None:
        return loader
    return ShapedLoader(loader, label_table=label_table, target_transform=options.target_transform,
                        as_dict=options.output == "dict")


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


def serialized_gpu_graph(source, transform, batch_size: int = 4, python_fallback: bool = False,
                         variant: str = "gpu") -> bytes:
    """A GPU variant ("gpu" or "cpu-decode") of a loader's graph, serialized without a GPU:
    DALI checks every operator and argument against its schemas for the GPU backend while
    doing so."""
    from nvidia.dali import pipeline_def

    recipe = transforms.plan(transform, python_fallback)
    feed = EpochOrder(np.arange(min(len(source), batch_size)))
    pipe = pipeline_def(graph, enable_conditionals=transforms.needs_conditionals(recipe, variant))(
        source, feed, batch_size, recipe, "CHW", variant,
        batch_size=batch_size, num_threads=1, device_id=None, seed=1)
    return pipe.serialize()
