"""`python -m benchmarks.stages`: where the DALI image loader's time goes, stage by stage.

It builds the loader's train graph one stage at a time (read; decode; the random-crop
decode; + resize; + crop_mirror_normalize, which is the whole graph), plus the val graph
(which decodes only the region of each image its resize reads) and the same graph decoding
whole images, and times every pipeline in the same process, in turns (A, B, C, A, B, C, ...), with the
same threads and batch; the rows ending in ", fn.resize" resize with DALI's own operator
(as with DALI_LOADERS_NO_PLUGIN=1), the others with the dali_loaders plugin where it
applies. Then it times one resize, 330x330 to 224x224 antialiased, four ways on one
thread: DALI's fn.resize, PIL (what torchvision runs), torch's uint8 kernel and the plugin.
Last, the per-image cost of crop_mirror_normalize on 256 zero-padded 40x40 CIFAR images:
without arguments, and with per-image crop and flip arguments as the baseline DALI loader
(CIFAR, original) gave it (the loader's own CIFAR stages: benchmarks/cifar_stages.py). The difference between
consecutive rows is the cost of what was added.
"""
import argparse
import os
import statistics
import time

import numpy as np

from dali_loaders import recipes
from dali_loaders.bench import data
from dali_loaders.bench.contenders import decode_only
from dali_loaders.bench.runs import exact_runs
from dali_loaders.bench.run import cores

CROP = recipes.IMAGENET_CROP
BATCH = 64
RESIZE_SIDE = 330  # a typical random crop of a 300-500 px image


STAGES = ("read the files", "decode (the bench's limit)", "decode, PIL's chroma upsampling",
          "random-crop decode (ROI)", "  + resize to 224, antialiased", "  + crop_mirror_normalize (= train)")


def every_sample(source):
    """The order a graph reads: every sample once, in order (what a loader sets per epoch)."""
    from dali_loaders.loader.pipeline import EpochOrder

    return EpochOrder(np.arange(len(source)))


def _train_stage(source, stage: int):
    """The loader's train graph (the default recipe, translated) up to stage `stage`."""
    from dali_loaders import transforms
    from dali_loaders.loader import build as loaders

    order = every_sample(source)
    if stage == len(STAGES) - 1:
        return loaders.graph(source, order, BATCH, transforms.plan(recipes.imagenet(True), False), "CHW", "cpu")
    images, labels = source.read(order, BATCH, "cpu")
    if stage == 1:
        images.data = decode_only(images.data)
    elif stage == 2:
        images.decode()
    elif stage == 3:
        images.decode_random_crop([0.08, 1.0], [3 / 4, 4 / 3])
    elif stage == 4:   # the recipe's first step: RandomResizedCrop, as ROI decode + resize
        transforms.apply(transforms.flatten(recipes.imagenet(True))[:1], images)
    return images.data, labels


def _pipelines(root: str, threads: int) -> dict:
    from nvidia.dali import pipeline_def

    from dali_loaders import transforms
    from dali_loaders.loader import build as loaders
    from dali_loaders.sources.image_files import ImageFiles

    train, val = ImageFiles(os.path.join(root, "train")), ImageFiles(os.path.join(root, "val"))

    def built(graph):  # a factory: each turn times a fresh pipeline
        return pipeline_def(graph, batch_size=BATCH, num_threads=threads, device_id=None, seed=0)

    pipes = {"train: " + name: built(lambda stage=stage: _train_stage(train, stage)) for stage, name in enumerate(STAGES)}
    for stage in (4, 5):   # the resize by DALI's own operator, as without the plugin
        pipes["train: " + STAGES[stage] + STOCK] = built(_stock(lambda stage=stage: _train_stage(train, stage)))
    val_recipe = transforms.plan(recipes.imagenet(False), False)
    val_graph = lambda: loaders.graph(val, every_sample(val), BATCH, val_recipe, "CHW", "cpu")  # noqa: E731
    pipes[VAL] = built(val_graph)
    pipes[VAL_WHOLE] = built(lambda: loaders.graph(DecodedWhole(val), every_sample(val), BATCH, val_recipe, "CHW",
                                                   "cpu"))
    pipes[VAL_WHOLE + STOCK] = built(_stock(val_graph))   # fn.resize needs the whole image
    return pipes


VAL = "val: decode the window's region, resize, normalize"   # the loader's val graph
VAL_WHOLE = "val: decode whole, resize the window, normalize"


class DecodedWhole:
    """A source whose images come decoded whole: the val graph without its region decode."""

    def __init__(self, source):
        self.source = source

    def read(self, feed, batch_size: int, device: str):
        images, labels = self.source.read(feed, batch_size, device)
        images.decode()
        return images, labels


STOCK = ", fn.resize"   # the row's resize is DALI's fn.resize, not the plugin


def _stock(graph):
    """`graph` defined as without the resize plugin (DALI_LOADERS_NO_PLUGIN=1)."""
    from dali_loaders.ops import plugin

    def defined():
        before = os.environ.get(plugin.DISABLE_ENV)
        os.environ[plugin.DISABLE_ENV] = "1"
        try:
            return graph()
        finally:
            if before is None:
                del os.environ[plugin.DISABLE_ENV]
            else:
                os.environ[plugin.DISABLE_ENV] = before
    return defined


def _rate(make_pipeline, batches: int, batch_size: int = BATCH) -> float:
    """Images/s of `batches` batches of a fresh pipeline, its build left out; none are
    left running in the background when it returns (see exact_runs)."""
    pipe = make_pipeline()
    pipe.build()
    start = time.perf_counter()
    for _ in exact_runs(pipe, batches):
        pass
    return batches * batch_size / (time.perf_counter() - start)


def time_stages(root: str, threads: int, rounds: int, batches: int) -> dict:
    """{stage: median images/s}, the pipelines taking turns round after round."""
    from tqdm import tqdm

    pipes = _pipelines(root, threads)
    for make_pipeline in pipes.values():  # warm-up: first allocations, file cache
        _rate(make_pipeline, 2)
    rates = {name: [] for name in pipes}
    for _ in tqdm(range(rounds), desc="stages", unit="round"):
        for name, make_pipeline in pipes.items():
            rates[name].append(_rate(make_pipeline, batches))
    return {name: statistics.median(r) for name, r in rates.items()}


def _micros_per_image(run, images: int) -> float:
    start = time.perf_counter()
    run()
    return (time.perf_counter() - start) / images * 1e6


def time_resizes(repeats: int) -> dict:
    """Microseconds per RESIZE_SIDE^2 -> CROP^2 antialiased bilinear resize of one uint8 RGB
    image, one thread: DALI's CPU fn.resize (less the cost of feeding the image in), PIL's
    Image.resize (what torchvision runs), torch's uint8 kernel."""
    import torch
    from nvidia.dali import fn, pipeline_def
    from PIL import Image

    image = np.random.default_rng(0).integers(0, 256, (RESIZE_SIDE, RESIZE_SIDE, 3), dtype=np.uint8)

    from dali_loaders.ops import plugin

    def fed(resize: str):
        batch = fn.external_source(source=lambda: [image] * BATCH, batch=True, layout="HWC")
        if resize == "plugin":
            return fn.dali_loaders_resize(batch, size=[float(CROP), float(CROP)])
        return fn.resize(batch, resize_x=float(CROP), resize_y=float(CROP), antialias=True) if resize else batch

    def dali_micros(resize: str) -> float:
        make_pipeline = pipeline_def(fed, batch_size=BATCH, num_threads=1, device_id=None)
        return 1e6 / _rate(lambda: make_pipeline(resize), max(1, repeats // BATCH))

    pil = Image.fromarray(image)
    nchw = torch.from_numpy(image).permute(2, 0, 1)[None]  # channels-last memory, torch's fast path
    torch.set_num_threads(1)
    ways = {"DALI fn.resize (CPU)": lambda: dali_micros("stock") - dali_micros(""),
            "PIL Image.resize (torchvision)": lambda: _micros_per_image(
                lambda: [pil.resize((CROP, CROP), Image.BILINEAR) for _ in range(repeats)], repeats),
            "torch interpolate, uint8": lambda: _micros_per_image(
                lambda: [torch.nn.functional.interpolate(nchw, size=(CROP, CROP), mode="bilinear",
                                                         antialias=True) for _ in range(repeats)], repeats)}
    if plugin.available():
        ways["dali_loaders plugin (CPU, equals PIL)"] = lambda: dali_micros("plugin") - dali_micros("")
    for way in ways.values():
        way()  # warm-up
    times = {name: [] for name in ways}
    for _ in range(3):   # the ways take turns, so that load from elsewhere hits them alike
        for name, way in ways.items():
            times[name].append(way())
    return {name: statistics.median(t) for name, t in times.items()}


def time_cifar_operator(batches: int) -> dict:
    """Microseconds per image, one thread: feeding 256 padded CIFAR images to DALI, then
    crop_mirror_normalize on them with fixed arguments and with per-image ones."""
    from nvidia.dali import fn, pipeline_def, types

    rng = np.random.default_rng(0)
    n, span = 256, 2 * recipes.CIFAR_PADDING
    images = rng.integers(0, 256, (n, 32 + span, 32 + span, 3), dtype=np.uint8)
    origins = (rng.integers(0, span + 1, (2, n)) / span).astype(np.float32)  # relative positions
    flips = (rng.random(n) < 0.5).astype(np.int32)
    normalize = dict(crop=(32, 32), dtype=types.FLOAT, output_layout="CHW",
                     mean=[255 * m for m in recipes.CIFAR_MEAN["cifar10"]],
                     std=[255 * s for s in recipes.CIFAR_STD["cifar10"]])

    def graph(kind: str):
        batch, crop_y, crop_x, mirror = fn.external_source(
            source=lambda: (images, origins[0], origins[1], flips), num_outputs=4, batch=True,
            layout=["HWC", "", "", ""])
        if kind == "fixed":
            return fn.crop_mirror_normalize(batch, **normalize)
        if kind == "per-image":
            return fn.crop_mirror_normalize(batch, crop_pos_x=crop_x, crop_pos_y=crop_y, mirror=mirror, **normalize)
        return batch

    out = {}
    for kind, name in (("none", "external_source alone"), ("fixed", "  + crop_mirror_normalize, fixed arguments"),
                       ("per-image", "  + per-image crop and flip")):
        make_pipeline = pipeline_def(graph, batch_size=n, num_threads=1, device_id=None)
        _rate(lambda: make_pipeline(kind), 2)  # warm-up
        out[name] = 1e6 / _rate(lambda: make_pipeline(kind), batches, n)
    return out


def print_tables(rates: dict, resizes: dict, cifar: dict, threads: int) -> None:
    limit = rates["train: " + STAGES[1]]
    print(f"\nDALI CPU pipelines, batch {BATCH}, {threads} thread(s), median of the rounds:")
    print(f"{'pipeline':58s} {'img/s':>8s} {'of decode':>10s}")
    for name, rate in rates.items():
        print(f"{name:58s} {rate:8.0f} {rate / limit:10.0%}")
    print(f"\nOne {RESIZE_SIDE}x{RESIZE_SIDE} -> {CROP}x{CROP} antialiased resize, one thread:")
    for name, micros in resizes.items():
        print(f"{name:58s} {micros:8.0f} us")
    print("\nCIFAR: 256 padded 40x40 images a batch, one thread, per image:")
    for name, micros in cifar.items():
        print(f"{name:58s} {micros:8.1f} us")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.stages", description=__doc__.splitlines()[0])
    parser.add_argument("--imagenet-dir", metavar="DIR", help="an image folder with train/ and val/ "
                        "(default: the bench's made-up JPEGs, made if missing)")
    parser.add_argument("--threads", type=int, default=cores(), help="DALI threads (default: %(default)s, "
                        "the cores this process may use)")
    parser.add_argument("--rounds", type=int, default=5, help="turns per pipeline (default: %(default)s)")
    parser.add_argument("--batches", type=int, default=10, help="batches per turn (default: %(default)s)")
    parser.add_argument("--cache-dir", default=data.default_cache_dir(), metavar="DIR")
    args = parser.parse_args(argv)
    root = args.imagenet_dir or data.make_image_folder(args.cache_dir, 1280, 500)
    rates = time_stages(root, args.threads, args.rounds, args.batches)
    print_tables(rates, time_resizes(repeats=4 * BATCH), time_cifar_operator(10 * args.batches), args.threads)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
