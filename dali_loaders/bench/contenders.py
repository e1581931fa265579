"""What a benchmark worker can time: the DALI loader, its torchvision twin, and the limit.

Each maker returns an iterable of (images, labels) batches, one pass per `iter()`.
Imports stay inside the makers so that a worker loads only what its loader needs
(torchvision costs ~150 MB of RSS that the DALI loader never touches).
"""
import os

import numpy as np

KINDS = ("dali", "torchvision", "limit")


def preload(spec: dict) -> None:
    """Imports what the loader needs, so that its time to first batch leaves imports out."""
    import torch  # noqa: F401  every loader hands out torch tensors
    import dali_loaders  # noqa: F401

    if spec["kind"] == "torchvision":
        import torchvision.transforms  # noqa: F401
    elif spec["kind"] == "dali" or spec["dataset"] != "cifar10":
        import nvidia.dali.fn  # noqa: F401
        import nvidia.dali.plugin.pytorch  # noqa: F401


def make_loader(spec: dict, workers: int):
    """The loader `spec` names; `workers` is the torchvision twin's num_workers."""
    makers = {("cifar10", "dali"): _cifar_dali, ("cifar10", "torchvision"): _cifar_torch,
              ("cifar10", "limit"): _cifar_limit, ("imagenet", "dali"): _imagenet_dali,
              ("imagenet", "torchvision"): _imagenet_torch, ("imagenet", "limit"): _decode_only,
              ("resnet50", "dali"): _resnet50_dali, ("resnet50", "torchvision"): _resnet50_torch,
              ("resnet50", "limit"): _decode_only}
    return makers[spec["dataset"], spec["kind"]](spec, workers)


def _cifar_dali(spec, workers):
    from dali_loaders import get_cifar_iter_dali

    return get_cifar_iter_dali(spec["split"], spec["data"], spec["batch_size"], spec["threads"], seed=0)


def _cifar_torch(spec, workers):
    from dali_loaders import get_cifar_iter_torch

    return get_cifar_iter_torch(spec["split"], spec["data"], spec["batch_size"], workers, seed=0)


def _imagenet_dali(spec, workers):
    from dali_loaders import get_imagenet_iter_dali

    return get_imagenet_iter_dali(spec["split"], spec["data"], spec["batch_size"], spec["threads"], seed=0)


def _imagenet_torch(spec, workers):
    from dali_loaders import get_imagenet_iter_torch

    return get_imagenet_iter_torch(spec["split"], spec["data"], spec["batch_size"], workers, seed=0)


def _resnet50_recipe(spec) -> dict:
    """torchvision's ResNet-50 reference recipe on the image folder: transform, and MixUp/CutMix
    on train batches (one class per folder of train/)."""
    from dali_loaders import recipes

    train = spec["split"] == "train"
    classes = sum(entry.is_dir() for entry in os.scandir(os.path.join(spec["data"], "train")))
    return dict(transform=recipes.resnet50_reference(train),
                batch_transform=recipes.resnet50_mixing(classes) if train else None)


def _resnet50_dali(spec, workers):
    from dali_loaders import get_imagenet_iter_dali

    return get_imagenet_iter_dali(spec["split"], spec["data"], spec["batch_size"], spec["threads"], seed=0,
                                  **_resnet50_recipe(spec))


def _resnet50_torch(spec, workers):
    from dali_loaders import get_imagenet_iter_torch

    return get_imagenet_iter_torch(spec["split"], spec["data"], spec["batch_size"], workers, seed=0,
                                   **_resnet50_recipe(spec))


class CifarLimit:
    """The memory-bound floor of a CIFAR batch: gather the batch's images by index and
    convert them to float32 NCHW, vectorized over the whole batch, nothing else."""

    def __init__(self, spec):
        import torch
        from dali_loaders.cifar import cifar_source

        arrays = cifar_source(spec["data"], spec["split"] == "train")
        self.images, self.labels = torch.from_numpy(arrays.images), torch.from_numpy(arrays.labels)
        self.batch_size, self.shuffle, self.epoch = spec["batch_size"], spec["split"] == "train", 0

    def __iter__(self):
        import torch

        n = len(self.labels)
        order = np.random.default_rng(self.epoch).permutation(n) if self.shuffle else np.arange(n)
        self.epoch += 1
        for start in range(0, n, self.batch_size):
            index = torch.from_numpy(order[start:start + self.batch_size])
            images = torch.empty((len(index), 3, 32, 32), dtype=torch.float32)
            images.copy_(self.images[index].permute(0, 3, 1, 2))  # gather, transpose, convert: one pass
            yield images, self.labels[index]


def _cifar_limit(spec, workers):
    return CifarLimit(spec)


def exact_runs(pipeline, runs: int):
    """The outputs of `runs` runs of a built, unused DALI pipeline, and no more (but at
    least prefetch_queue_depth run): `run()` keeps that many runs in flight, which would
    go on decoding in the background into the next contender's timed pass (and start the
    next pass of this one with batches already made). Each output is valid until the
    next is asked for."""
    depth = pipeline.prefetch_queue_depth
    queued = max(depth.values()) if isinstance(depth, dict) else depth
    pipeline.schedule_run()  # the first call queues `depth` runs
    for _ in range(runs):
        yield pipeline.share_outputs()
        pipeline.release_outputs()
        if queued < runs:
            pipeline.schedule_run()
            queued += 1


def decode_only(encoded):
    """The limit's decode: DALI's CPU decoder with its own defaults, RGB out."""
    from nvidia.dali import fn, types

    return fn.decoders.image(encoded, device="cpu", output_type=types.RGB)


class DecodeOnly:
    """The decode floor of an image set: DALI reading and decoding the same files on the CPU
    (readers.file + decoders.image), with the loader's threads and batch, and nothing else.
    Like the loader, it builds a pipeline per pass and runs exactly the pass's batches."""

    def __init__(self, spec):
        from nvidia.dali import fn, pipeline_def

        root = os.path.join(spec["data"], spec["split"])
        self.batches = -(-sum(len(f) for _, _, f in os.walk(root)) // spec["batch_size"])

        @pipeline_def(batch_size=spec["batch_size"], num_threads=spec["threads"], device_id=None)
        def decode():
            encoded, labels = fn.readers.file(file_root=root, random_shuffle=False, name="Reader")
            return decode_only(encoded), labels

        self.make_pipeline = decode

    def __iter__(self):
        pipeline = self.make_pipeline()
        pipeline.build()
        for images, labels in exact_runs(pipeline, self.batches):
            yield images, labels.as_array()


def _decode_only(spec, workers):
    return DecodeOnly(spec)
