"""What a benchmark worker can time: the DALI loader (and where the recipe mixes batches, the
same loader mixing them in a collate_fn, as torchvision's reference writes it: "collate"), its
torchvision twin (PIL), the torchvision tensor backend (decode_image + transforms.v2 on uint8
tensors; for datasets in memory, v2 on whole uint8 batches), the baseline DALI loader of
CIFAR-10 (the original, bench/arrays.py), NVIDIA's example pipeline (bench/nvidia.py), the DALI
loader over ImageFolder of the same files (the hf workload: bench/hf.py), the limit and the GPU
bench's decode ceiling. Every loader runs the workload's recipe (bench/catalog.py).

Each maker returns an iterable of (images, labels) batches, one pass per `iter()`.
Imports stay inside the makers so that a worker loads only what its loader needs
(torchvision costs ~150 MB of RSS that the DALI loader never touches).
"""
import os

from .catalog import batch_options, options_for, tensor_transform_for, transform_for
from .runs import PipelineRuns

KINDS = ("dali", "collate", "torchvision", "tensor", "baseline", "nvidia", "folder", "limit", "ceiling")
# Swept over num_workers 0 .. threads; on datasets in memory the tensor contender has no
# workers, and the number swept is its torch threads instead (0 and 1: one thread).
WORKER_KINDS = ("torchvision", "tensor")
ARRAY_DATASETS = ("cifar10", "mnist")


OPTIONAL = ("collate", "tensor", "baseline", "nvidia", "folder", "ceiling")   # "ceiling": the GPU bench's only


def kinds(dataset: str):
    """The contenders of a dataset: the tensor backend on the image folder and the datasets
    in memory, NVIDIA's example pipeline on the image folder, the baseline DALI loader on
    CIFAR-10; on both, the DALI loader mixing batches in a collate_fn (recipes that mix); the DALI
    loader over ImageFolder of the same files on the Hugging Face dataset."""
    found = {"imagenet": ("collate", "tensor", "nvidia"), "cifar10": ("collate", "tensor", "baseline"),
             "mnist": ("tensor",), "hf": ("folder",)}.get(dataset, ())
    return tuple(k for k in KINDS if k not in OPTIONAL or k in found)


def preload(spec: dict) -> None:
    """Imports what the loader needs, so that its time to first batch leaves imports out."""
    import torch  # noqa: F401  every loader hands out torch tensors

    import dali_loaders  # noqa: F401

    if spec.get("recipe", "").startswith("timm"):
        import timm.data  # noqa: F401  timm's transforms, for every contender
    if spec["dataset"] == "hf" and spec["kind"] in ("dali", "torchvision"):
        import datasets  # noqa: F401
    if spec["kind"] in ("torchvision", "tensor"):
        import torchvision.transforms.v2  # noqa: F401
    elif spec["kind"] in ("dali", "collate", "nvidia", "folder") or spec["dataset"] in ("imagenet", "flowers102", "hf"):
        import nvidia.dali.fn  # noqa: F401
        import nvidia.dali.plugin.pytorch  # noqa: F401


def make_loader(spec: dict, workers: int):
    """The loader `spec` names; `workers`: the DataLoaders' num_workers (the torch threads of the
    tensor contender on datasets in memory)."""
    from . import hf

    makers = {("cifar10", "dali"): _cifar_dali, ("cifar10", "collate"): _cifar_dali,
              ("cifar10", "torchvision"): _cifar_torch,
              ("cifar10", "limit"): _array_limit, ("cifar10", "tensor"): _array_batched,
              ("cifar10", "baseline"): _cifar_baseline, ("mnist", "tensor"): _array_batched,
              ("imagenet", "dali"): _imagenet_dali, ("imagenet", "collate"): _imagenet_dali,
              ("imagenet", "nvidia"): _nvidia_example,
              ("imagenet", "torchvision"): _imagenet_torch, ("imagenet", "tensor"): _imagenet_tensor,
              ("imagenet", "limit"): _decode_only, ("imagenet", "ceiling"): _decode_ceiling,
              ("mnist", "dali"): _standard_dali, ("mnist", "torchvision"): _standard_torch,
              ("mnist", "limit"): _array_limit, ("flowers102", "dali"): _standard_dali,
              ("flowers102", "torchvision"): _standard_torch, ("flowers102", "limit"): _flowers_decode_only,
              ("hf", "dali"): hf.hf_dali, ("hf", "torchvision"): hf.HFDataLoader, ("hf", "folder"): hf.hf_folder,
              ("hf", "limit"): _hf_decode_only}
    return makers[spec["dataset"], spec["kind"]](spec, workers)


def _cifar_dali(spec, workers):
    from .. import get_cifar_iter_dali

    return get_cifar_iter_dali(spec["split"], spec["data"], spec["batch_size"], spec["threads"], seed=0,
                               transform=transform_for(spec), device=spec.get("device"), **options_for(spec),
                               **batch_options(spec))


def _cifar_torch(spec, workers):
    from .. import get_cifar_iter_torch

    return get_cifar_iter_torch(spec["split"], spec["data"], spec["batch_size"], workers, seed=0,
                                transform=transform_for(spec), **batch_options(spec))


def _imagenet_dali(spec, workers):
    from .. import get_imagenet_iter_dali

    return get_imagenet_iter_dali(spec["split"], spec["data"], spec["batch_size"], spec["threads"], seed=0,
                                  transform=transform_for(spec), device=spec.get("device"), **options_for(spec),
                                  **batch_options(spec))


def uses_gpu(device) -> bool:
    """Whether a DALI loader with this device= runs on the GPU (None: where CUDA is)."""
    import torch

    return device in ("gpu", "cpu-decode") or (device is None and torch.cuda.is_available())


def _nvidia_example(spec, workers):
    from .nvidia import NvidiaExample

    return NvidiaExample(spec["data"], spec["split"], spec["batch_size"], spec["threads"],
                         gpu=uses_gpu(spec.get("device")))


def _imagenet_torch(spec, workers):
    from .. import get_imagenet_iter_torch

    return get_imagenet_iter_torch(spec["split"], spec["data"], spec["batch_size"], workers, seed=0,
                                   transform=transform_for(spec), **batch_options(spec))


class TensorFiles:
    """torchvision's tensor backend: the file's bytes decoded by torchvision.io.decode_image
    to a uint8 CHW tensor, then the recipe on that tensor (v2 runs on tensors)."""

    def __init__(self, index, transform):
        self.index, self.transform = index, transform

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, i):
        from torchvision.io import ImageReadMode, decode_image, read_file

        image = decode_image(read_file(self.index.files[i]), mode=ImageReadMode.RGB)
        return self.transform(image), int(self.index.labels[i])


def _imagenet_tensor(spec, workers):
    from ..loader import torch_loader
    from ..sources.image_files import ImageFiles

    index = ImageFiles(os.path.join(spec["data"], spec["split"]))
    return torch_loader(TensorFiles(index, tensor_transform_for(spec)), train=spec["split"] == "train",
                        batch_size=spec["batch_size"], num_workers=workers, seed=0, **batch_options(spec))


def _standard_dali(spec, workers):
    """A standard dataset's factory (get_<dataset>_iter_dali), as a user calls it."""
    import dali_loaders

    factory = getattr(dali_loaders, f"get_{spec['dataset']}_iter_dali")
    return factory(spec["split"], spec["data"], spec["batch_size"], spec["threads"], seed=0, device=spec.get("device"))


def _standard_torch(spec, workers):
    import dali_loaders

    factory = getattr(dali_loaders, f"get_{spec['dataset']}_iter_torch")
    return factory(spec["split"], spec["data"], spec["batch_size"], workers, seed=0)


def _array_source(spec):
    if spec["dataset"] == "cifar10":
        from ..datasets.cifar import cifar_source

        return cifar_source(spec["data"], spec["split"] == "train")
    from ..datasets.mnist import idx_source

    return idx_source(spec["data"], "mnist", "train" if spec["split"] == "train" else "test")


def _array_batched(spec, workers):
    """`workers` is the torch threads (intra-op) here: no DataLoader, no workers."""
    import torch

    from .. import recipes
    from .arrays import TorchBatched

    torch.set_num_threads(max(workers, 1))
    transform = transform_for(spec) or recipes.normalized(spec["dataset"])   # None: the factory's default
    return TorchBatched(_array_source(spec), transform, spec["batch_size"], spec["split"] == "train",
                        **batch_options(spec))


def _cifar_baseline(spec, workers):
    from .. import recipes
    from .arrays import CifarBaseline

    return CifarBaseline(_array_source(spec), spec["batch_size"], spec["threads"], recipes.CIFAR_MEAN["cifar10"],
                          recipes.CIFAR_STD["cifar10"])


def _array_limit(spec, workers):
    from .arrays import Bandwidth

    return Bandwidth(_array_source(spec), spec["batch_size"])


def decode_only(encoded):
    """The limit's decode: DALI's CPU decoder with its own defaults, RGB out."""
    from nvidia.dali import fn, types

    return fn.decoders.image(encoded, device="cpu", output_type=types.RGB)


class DecodeOnly:
    """The decode floor of an image set: DALI reading and decoding the same files
    (readers.file + decoders.image), with the loader's threads and batch, and nothing else.
    The files: a class-per-folder split (spec's data/split), or the list `files`.
    Built once, at the first pass; each pass runs exactly a split's batches (PipelineRuns),
    the runs kept going from pass to pass, as a user's epochs run (the bench's untimed lead
    passes take what ran ahead while another contender was timed).
    `ceiling`: the GPU bench's decode ceiling instead, the least a loader of these files does:
    the train split read shuffled and decoded as its loaders decode it, only a random crop's
    window (NVIDIA's example's decoders.image_random_crop), val decoded whole; on a GPU the
    decode "mixed" and every image resized to CROP x CROP (dense batches, a cheap step there)."""

    def __init__(self, spec, files=None, ceiling: bool = False):
        from nvidia.dali import fn, pipeline_def, types

        from .nvidia import CROP

        root = os.path.join(spec["data"], spec["split"])
        count = len(files) if files is not None else sum(len(f) for _, _, f in os.walk(root))
        self.batches = -(-count // spec["batch_size"])
        where = dict(files=files, labels=[0] * len(files)) if files is not None else dict(file_root=root)
        gpu = ceiling and uses_gpu(spec.get("device"))
        train = ceiling and spec["split"] == "train"

        @pipeline_def(batch_size=spec["batch_size"], num_threads=spec["threads"], device_id=0 if gpu else None)
        def decode():
            encoded, labels = fn.readers.file(**where, random_shuffle=train, name="Reader")
            if not ceiling:
                return decode_only(encoded), labels
            decoder = fn.decoders.image_random_crop if train else fn.decoders.image
            images = decoder(encoded, device="mixed" if gpu else "cpu", output_type=types.RGB)
            return (fn.resize(images, resize_x=CROP, resize_y=CROP) if gpu else images), labels

        self.make_pipeline, self.ceiling, self.runs = decode, ceiling, None

    def __iter__(self):
        if self.runs is None:
            pipeline = self.make_pipeline()
            pipeline.build()
            self.runs = PipelineRuns(pipeline, across_passes=True)
        for images, labels in self.runs.take(self.batches):
            yield images, labels.as_array()


def _decode_only(spec, workers):
    return DecodeOnly(spec)


def _decode_ceiling(spec, workers):
    return DecodeOnly(spec, ceiling=True)
def _hf_decode_only(spec, workers):
    """The image folder the Hugging Face dataset was made of (bench/hf.py)."""
    return DecodeOnly(dict(spec, data=os.path.join(spec["data"], "images")))


def _flowers_decode_only(spec, workers):
    from ..datasets.flowers102 import flowers_source

    return DecodeOnly(spec, flowers_source(spec["data"], spec["split"]).files)
