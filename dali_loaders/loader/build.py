"""What a DaliLoader is made of (`assemble`): the path its dataset takes, its order, and on
the DALI path the graph, the pipeline and the steps around it; the output layout and dtype.
"""
import numbers
from dataclasses import dataclass
from typing import Any, Callable, List, Optional

import numpy as np
import torch

from .. import switches, transforms
from ..dali_compat import autograph_files_removed
from ..transforms.mixing import batch_mixer
from ._dali import build_dali_pipeline, pick_device_id
from .collate import DaliCollate, SampleLabels, user_collate
from .dataloader_args import check_dataloader_args, check_dali_path_args, order_of
from .explain import failure_explainer
from .options import check_options, resolve_device, torch_device
from .outputs import BatchShape
from .pipeline import EpochOrder, LivePipeline
from .python_path import PythonBatches, placed
from .resolve import note, route
from .watch import DatasetWatch

# -- the DALI loader ---------------------------------------------------------------------


def graph(source, feed, per_batch: int, recipe: transforms.Plan, layout: str, variant: str,
          host_labels: bool = False):
    """The whole pipeline: read, the translated steps, the Python steps if any; (images, labels),
    or the images alone with `host_labels` (the loader reads the labels itself: see
    dali_loader; the source must have host_labels).
    (`per_batch`, not batch_size: pipeline_def takes that name for itself.) `variant`: one
    graph for all (options.DEVICES, "cpu-steps" and "gpu-decode": see graph_variant); they differ
    only in the devices named and, for "gpu-decode", where the pixels cross to the CPU.

    The source interface: `source.read(feed, batch_size, device)` returns (Images, labels) of
    batch after batch of `feed`'s samples, each run's batch `feed.batch(info.iteration,
    batch_size)`, through external_source: the loader sets `feed.indices` each epoch, and a
    restored checkpoint sets the iteration, so the graph is defined once (pipeline.py). A plain
    array of indices is a fixed order."""
    feed = EpochOrder.of(feed)
    views = transforms.plans_of(recipe)
    device = "cpu" if variant in transforms.CPU_STEPS else "gpu"   # where the steps run ("gpu-decode": start)
    read_on = "cpu" if any(view.python for view in views) else device   # Python steps need the pixels on the CPU
    images, labels = source.read(feed, per_batch, read_on, labels=False) if host_labels else \
        source.read(feed, per_batch, read_on)
    if variant == "cpu-decode" and images.encoded:
        images.decode_args = dict(images.decode_args, device="cpu")   # Images.decode moves them to the GPU
    images.layout = layout
    to_host = variant == transforms.GPU_DECODE
    shared = recipe.shared if isinstance(recipe, transforms.Views) else None
    if shared is not None:   # SplitViews: every view starts from these steps' output
        images = steps_applied(shared, images, to_host)
        images.decode()
    if len(views) > 1 and images.encoded and (images.decodes_whole or len(views) >= DECODE_ONCE_VIEWS):
        images.decode()   # see DECODE_ONCE_VIEWS
    outputs = [view_graph(view, images if len(views) == 1 else images.branch(), to_host) for view in views]
    if variant != "cpu":   # the batch is handed over on the GPU
        outputs = [data.gpu() for data in outputs]
        labels = None if labels is None else labels.gpu()
    if isinstance(recipe, transforms.Views) and recipe.stacked:
        outputs = [stacked_views(outputs)]
    if labels is None:
        return outputs[0] if len(outputs) == 1 else tuple(outputs)
    return (*outputs, labels)


def stacked_views(outputs: list):
    """Each sample's views as one tensor (views, H, W, C) or (views, C, H, W), as the recipe's
    torch.stack makes it: stacked on DALI's threads (on the GPU where the batch is handed over
    there), so the loader's thread copies nothing (a TenCrop batch of 64 at 224 is 385 MB)."""
    from nvidia.dali import fn

    return fn.stack(*outputs, axis=0, axis_name="N")


# From how many views a CPU decode decodes each image once, every view cutting its window from
# it, where fewer views each decode only their own window (a GPU decode is of whole images, so
# it decodes once for any number). Measured on a 2-core machine, samples/s, each view decoding
# its window / decoding once: MoCo v2's two crops 908-918 / 628; DINO's two global crops (224,
# scale 0.4-1) and two local ones (96, 0.05-0.4) 554-561 / 504-509, four local 414-422 / 411-415,
# eight local (DINO's default) 279-285 / 337-345.
DECODE_ONCE_VIEWS = 7


def view_graph(recipe: transforms.Plan, images: transforms.Images, to_host: bool = False):
    """One view's steps on `images`: its output DataNode, in the loader's layout and dtype."""
    images = steps_applied(recipe, images, to_host)
    images.decode()
    if recipe.python:
        transforms.run_in_python(recipe.python, images)
    else:
        images.materialize()
    return images.data


def steps_applied(recipe: transforms.Plan, images: transforms.Images, to_host: bool) -> transforms.Images:
    """The recipe's translated steps on `images`. `to_host` ("gpu-decode"): where the pixels
    are on the GPU and a step the CPU runs comes, the steps before it on the GPU, then the
    pixels copied to the CPU for the rest (transforms.host_steps_from)."""
    steps = recipe.translated
    cut = transforms.host_steps_from(recipe) if to_host and images.device == "gpu" else len(steps)
    if cut < len(steps):
        images = transforms.apply(steps[:cut], images)
        images.to_host()
        steps = steps[cut:]
    return transforms.apply(steps, images)


def output_names(recipe, host_labels: bool) -> List[str]:
    """The names of the graph's outputs, as the loader reads them: "images" (or "view0",
    "view1", ... for a view maker), then "labels" unless the loader reads them itself."""
    views = transforms.plans_of(recipe)
    one = not isinstance(recipe, transforms.Views) or recipe.stacked   # stacked views: one tensor (graph)
    names = ["images"] if one else [f"view{k}" for k in range(len(views))]
    return names if host_labels else names + ["labels"]


class BatchImages:
    """(DALI's outputs, sample count) -> the batch's images: one tensor, or a list of one per
    view for a view maker, each a view as NCHW (stacked views: (B, views, C, H, W)), cast and
    pinned as the loader hands them out."""

    def __init__(self, recipe, names: List[str], layout: str, pin: bool):
        plans = transforms.plans_of(recipe)
        self.listed = isinstance(recipe, transforms.Views) and not recipe.stacked
        self.names = names[:len(plans) if self.listed else 1]
        self.finishers = [batch_finisher(layout, plan.output_dtype) for plan in plans[:len(self.names)]]
        self.pin = pin

    def __call__(self, out: dict, count: int):
        images = [finish(out[name][:count]) for name, finish in zip(self.names, self.finishers)]
        if self.pin:
            images = [view.pin_memory() for view in images]
        return images if self.listed else images[0]


@dataclass
class Parts:
    """What assemble() made for a DaliLoader: on the DALI path `pipeline` (LivePipeline) and the
    steps around it, on the Python path `python` (PythonBatches); `shape` reshapes each batch."""
    dataset: Any
    route: str
    source: Any
    order: Any
    sampler: Any
    batch_sampler: Any
    shape: Optional[Callable] = None
    batch_transform: Optional[Callable] = None
    collate: Optional[DaliCollate] = None   # a user's collate_fn on the DALI path
    pipeline: Optional[LivePipeline] = None
    feed: Optional[EpochOrder] = None
    finish: Optional["BatchImages"] = None
    host_labels: Optional[Callable] = None
    dataset_index: Optional[Callable] = None   # positions in the source -> the dataset's indices, where items carry them
    explain: Callable = None
    python: Optional[PythonBatches] = None
    place: Callable = None
    watch: Optional[DatasetWatch] = None   # on the DALI path: what was read from the dataset once


def assemble(dataset, *, batch_size, shuffle, sampler, batch_sampler, num_workers, collate_fn, pin_memory,
             drop_last, timeout, worker_init_fn, multiprocessing_context, generator, prefetch_factor,
             persistent_workers, seed, transform, target_transform, batch_transform, device, device_id, output,
             memory_format, even_batches, on_error, max_image_pixels, python_fallback, rank, world_size,
             local_rank, dali_cpu) -> Parts:
    """A DaliLoader's parts from its arguments (see DaliLoader), each checked, naming the wrong one."""
    if dataset is None:
        raise TypeError("dataset is None: pass the Dataset to load (a torchvision dataset, a map-style Dataset of "
                        "your own, or one of this library's sources)")
    shuffle = check_dataloader_args(batch_size, shuffle, sampler, batch_sampler, drop_last, num_workers, timeout,
                                    prefetch_factor)
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0):
        raise ValueError(f"seed must be a non-negative integer (or None: drawn from torch's generator), got {seed!r}")
    device, device_id = torch_device(device, device_id)
    options = check_options(device, dali_cpu, output, target_transform)
    collate = user_collate(collate_fn, options.output)
    layout = output_layout(memory_format)
    way = route(dataset, transform, options.target_transform, python_fallback)
    source = way.source
    if source is not None and hasattr(source, "screened"):
        source = source.screened(max_image_pixels, on_error)
    counted = source if source is not None else way.dataset
    order, public_sampler, public_batches = order_of(counted, batch_size, shuffle, sampler, batch_sampler, drop_last,
                                                     seed, rank, world_size, local_rank, even_batches, generator)
    label_table = getattr(source, "label_table", None)
    check_batch_transform(batch_transform, label_table is not None or way.target_transform is not None,
                          isinstance(way.recipe, transforms.Views))
    owned = source is not None and collate is None   # DALI's batch, seen by nobody before the mixing
    parts = Parts(dataset=dataset, route=way.name, source=source, order=order, sampler=public_sampler,
                  batch_sampler=public_batches, batch_transform=batch_mixer(batch_transform, order, in_place=owned),
                  shape=None if collate is not None else   # its items carry the labels as the shape would
                  BatchShape.needed(label_table, way.target_transform, options.output == "dict"))
    variant = resolve_device(options.device, device_id)
    gpu = None if variant == "cpu" else pick_device_id(device_id, order.local_rank)
    if source is None:
        note(way, num_workers)
        parts.python = PythonBatches(way.dataset, num_workers=num_workers, collate_fn=collate_fn,
                                     pin_memory=pin_memory, timeout=timeout, worker_init_fn=worker_init_fn,
                                     multiprocessing_context=multiprocessing_context,
                                     prefetch_factor=prefetch_factor, persistent_workers=persistent_workers)
        target = None if gpu is None else torch.device("cuda", gpu)
        parts.place = lambda batch: placed(batch, target, pin_memory and torch.cuda.is_available())
        return parts
    check_dali_path_args(worker_init_fn)
    parts.watch = DatasetWatch(dataset)
    parts.feed = feed = EpochOrder()
    recipe = way.recipe
    transforms.warn_slow(recipe)
    variant = graph_variant(variant, source, recipe)
    parts.host_labels = host_labels = getattr(source, "host_labels", None)
    # the pipeline's batch size: a batch_sampler's own, else its first epoch's largest batch
    limit = batch_size if batch_sampler is None else getattr(batch_sampler, "batch_size", None)

    def build_pipeline(pipeline_seed, checkpoint):
        per_batch = limit or int(np.diff(feed.bounds).max())
        return build_dali_pipeline(graph, source, feed, per_batch, recipe, layout, variant,
                                   host_labels is not None, batch_size=per_batch,
                                   num_threads=max(1, num_workers), device_id=gpu, seed=pipeline_seed,
                                   checkpoint=checkpoint, prefetch_queue_depth=prefetch_factor or 2,
                                   conditionals=transforms.needs_conditionals(recipe, variant))

    names = output_names(recipe, host_labels is not None)
    parts.pipeline = LivePipeline(build_pipeline, feed, names)
    pin = pin_memory and variant == "cpu" and torch.cuda.is_available()
    if collate is not None:   # collate_fn's batch is pinned, not the images it is made from
        parts.collate = DaliCollate(collate, order, SampleLabels(label_table, way.target_transform), pin)
    parts.finish = BatchImages(recipe, names, layout, pin and collate is None)
    parts.explain = failure_explainer(source, limit or 1)
    if way.adds_index:
        parts.dataset_index = dataset_indices(source)
    return parts


def dataset_indices(source) -> Callable[[np.ndarray], np.ndarray]:
    """The dataset's index of each of these positions in the source: the same, or, where
    screening left files out (on_error="skip"), their positions before it, as the twin's
    KeptSubset hands them to the dataset."""
    kept = getattr(source, "kept_positions", None)
    return (lambda positions: np.asarray(positions, dtype=np.int64)) if kept is None else (lambda positions: kept[positions])


# Pixels already decoded (CIFAR, MNIST, SVHN, STL-10: ArraySource) get their steps on the CPU
# under device="gpu" too (CIFAR-10 on an H200: 246k images/s so, 209k with GPU steps; its
# CPU path 249k): see graph_variant. DALI_LOADERS_DECODED_STEPS=gpu or cpu overrides it.
DECODED_STEPS = "cpu"
DECODED_STEPS_ENV = "DALI_LOADERS_DECODED_STEPS"


def decoded_steps() -> str:
    return switches.value(DECODED_STEPS_ENV, DECODED_STEPS, ("cpu", "gpu"))


# Where a recipe whose steps run on the CPU under device="gpu" (graph_variant) decodes its files:
# "cpu" (the "cpu-steps" graph, measured: the heavy recipes' rows in docs/gpu.md) or "gpu" (the
# "gpu-decode" graph: decoded and cropped on the GPU, copied to the CPU for the steps from
# transforms.host_steps_from on; not yet timed on a GPU: `python -m benchmarks.gpu_probe
# --decode` times both). DALI_LOADERS_STEPS_DECODE=gpu or cpu overrides it.
STEPS_DECODE = "cpu"
STEPS_DECODE_ENV = "DALI_LOADERS_STEPS_DECODE"


def steps_decode() -> str:
    return switches.value(STEPS_DECODE_ENV, STEPS_DECODE, ("cpu", "gpu"))


# Whether device="gpu" runs the steps the fused CPU operator runs on the CPU (then decoding on the
# CPU too), as measured on an H200 with 16 cores (docs/gpu.md): the GPU chain of operators
# (transforms/augment_chain.py) wins for one slot (TrivialAugmentWide), the CPU for more slots,
# timm's operations and ColorJitter (see transforms.fused_on_cpu). "cpu": every step the fused
# operator runs on the CPU; "gpu": every step on the GPU (benchmarks/gpu_probe.py times them).
# DALI_LOADERS_FUSED_STEPS overrides it.
FUSED_STEPS = "measured"
FUSED_STEPS_ENV = "DALI_LOADERS_FUSED_STEPS"


def fused_steps() -> str:
    return switches.value(FUSED_STEPS_ENV, FUSED_STEPS, ("measured", "cpu", "gpu"))


def graph_variant(variant: str, source, recipe: transforms.Plan) -> str:
    """The graph a loader builds for its device: device="gpu" decodes on the GPU and runs the
    steps there, except where the CPU was measured faster (an H200 with 16 cores; docs/gpu.md):
    - a recipe with steps the fused CPU operator runs, built here, and the GPU runs slower:
      RandAugment of two or more operations, AutoAugment, timm's, ColorJitter, RandomApply
      (timm's RandAugment recipe 1,766 images/s with its GPU chain, 3,120 with CPU steps); not
      TrivialAugmentWide, one operation an image (8,681 on the GPU, 6,025 with CPU steps);
    - a source of pixels (DECODED_STEPS): no decode to take over, and small images.
    Then "cpu-steps": decode and steps on the CPU, the batch handed over on the GPU; so too for
    a recipe with a step that runs on the CPU alone, under "gpu" or "cpu-decode". Under "gpu",
    files are decoded on the GPU instead ("gpu-decode") where STEPS_DECODE says so."""
    if variant not in ("gpu", "cpu-decode") or any(view.python for view in transforms.plans_of(recipe)):
        return variant
    decoded = getattr(source, "decoded", False)
    on_cpu = "cpu-steps" if variant != "gpu" or decoded or steps_decode() == "cpu" else transforms.GPU_DECODE
    if transforms.steps_on_cpu(recipe):   # a step with no GPU operator (LinearTransformation)
        return on_cpu
    if variant != "gpu":
        return variant
    if decoded and decoded_steps() == "cpu":
        return "cpu-steps"
    fused = fused_steps()
    if fused != "gpu" and transforms.fused_on_cpu(recipe, one_slot_on_gpu=fused == "measured"):
        return on_cpu
    return variant


def check_batch_transform(batch_transform, labels_changed: bool, views: bool) -> None:
    """batch_transform mixes one batch of images with one-integer labels: refused otherwise."""
    if batch_transform is None:
        return
    if labels_changed:
        raise ValueError("batch_transform (MixUp, CutMix) mixes one-integer labels; it cannot be combined with "
                         "target_transform or sequence labels")
    if views:
        raise ValueError("batch_transform (MixUp, CutMix) mixes one batch of images, and the transform makes "
                         "several views of each image (a list of batches); mix the views in the training step")


def output_layout(memory_format) -> str:
    if memory_format in (None, torch.contiguous_format):
        return "CHW"
    if memory_format == torch.channels_last:
        return "HWC"   # NHWC in memory is an NCHW tensor in channels_last
    raise ValueError(f"memory_format must be torch.contiguous_format or torch.channels_last, got {memory_format!r}")


def batch_finisher(layout: str, dtype: Optional[torch.dtype]) -> Callable[[torch.Tensor], torch.Tensor]:
    """What the loader does to each batch DALI hands over: a view as NCHW (no copy), and the
    cast to the recipe's dtype where the graph made float32 instead (bfloat16, which DALI
    lacks, and float64, which its operators compute in float32)."""
    def finish(images: torch.Tensor) -> torch.Tensor:
        if layout == "HWC" and images.dim() == 4:
            images = images.permute(0, 3, 1, 2)
        elif layout == "HWC" and images.dim() == 5:   # stacked views (graph)
            images = images.permute(0, 1, 4, 2, 3)
        if dtype in (torch.bfloat16, torch.float64) and images.dtype != dtype:
            images = images.to(dtype)
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
    with autograph_files_removed():   # tracing `if`s leaves AutoGraph's files in the temp folder
        pipe = pipeline_def(graph, enable_conditionals=transforms.needs_conditionals(recipe, variant))(
            source, feed, batch_size, recipe, "CHW", variant,
            batch_size=batch_size, num_threads=1, device_id=None, seed=1)
        return pipe.serialize()
