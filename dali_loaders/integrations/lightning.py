"""LightningDataModules over the loaders: `use_dali=True` the DALI loader, False its torchvision twin.

    pip install "dali_loaders[lightning]"

    from ..lightning import CIFAR10DataModule
    trainer.fit(model, datamodule=CIFAR10DataModule("/data/cifar", batch_size=256, num_threads=1))

`train_transform=`, `val_transform=` and `test_transform=` (test and predict) give each split
its own `transform=`; `num_workers=` is the twin's DataLoader workers and the DALI threads
(at least one). Every other keyword goes to the factory unchanged (num_threads,
seed, cutout, drop_last, crop, ... and whatever a factory accepts later), so each split's
loader is exactly what the factory gives: train shuffled and sharded into equal parts per
epoch, val/test/predict every sample exactly once over all ranks. The loaders are built in
the `*_dataloader` hooks, that is in each process once Lightning has made the process
group, and kept for the next call; the DALI loaders run where the Trainer keeps the model (the
CPU under `accelerator="cpu"`, else its GPU) unless `device=` or `device_id=` says. No
sampler needs replacing: Lightning leaves the DALI loaders alone (they are not DataLoaders)
and sees that the twins' sampler is a DistributedSampler already.

A dataset with factories `get_<name>_iter_dali(type, root, batch_size, ...)` and
`get_<name>_iter_torch` is one small class:

    class MNISTDataModule(DaliDataModule):
        factories = (get_mnist_iter_dali, get_mnist_iter_torch)
"""
from typing import Callable, Dict, Optional, Tuple

try:
    from pytorch_lightning import LightningDataModule
except ImportError:  # the extra not installed; `lightning` (the unified package) serves as well
    try:
        from lightning.pytorch import LightningDataModule
    except ImportError:
        raise ImportError('dali_loaders.lightning needs PyTorch Lightning: pip install "dali_loaders[lightning]"') \
            from None

import dali_loaders as _factories

from ..datasets.cifar import get_cifar_iter_dali, get_cifar_iter_torch
from ..datasets.imagenet import (
    get_imagefolder_iter_dali,
    get_imagefolder_iter_torch,
    get_imagenet_iter_dali,
    get_imagenet_iter_torch,
)
from ..datasets.labelled_files import get_files_iter_dali, get_files_iter_torch

__all__ = ["DaliDataModule", "CIFAR10DataModule", "CIFAR100DataModule", "ImageNetDataModule",
           "ImageFolderDataModule", "FilesDataModule", "MNISTDataModule", "FashionMNISTDataModule", "KMNISTDataModule",
           "EMNISTDataModule", "SVHNDataModule", "STL10DataModule", "Flowers102DataModule", "Food101DataModule",
           "OxfordPetDataModule", "TinyImageNetDataModule"]

# Lightning's stage -> the factory's `type`. Evaluation reads the val split (CIFAR's is its test set).
SPLIT_TYPE = {"train": "train", "val": "val", "test": "val", "predict": "val"}


class DaliDataModule(LightningDataModule):
    """Loaders from a pair of factories called as `factory(type, root, batch_size, **kwargs)`.

    A subclass sets `factories = (dali_factory, torch_factory)`; `fixed` holds keywords it
    always passes (CIFAR-100's `dataset="cifar100"`).
    """

    factories: Tuple[Callable, Callable]
    fixed: Dict[str, object] = {}
    split_type: Dict[str, str] = SPLIT_TYPE

    def __init__(self, root: str, batch_size: int, *, use_dali: bool = True, train_transform=None,
                 val_transform=None, test_transform=None, num_workers: Optional[int] = None, **kwargs):
        super().__init__()
        if not isinstance(use_dali, bool):
            raise ValueError(f"use_dali must be True (the DALI loader) or False (its torchvision twin), "
                             f"got {use_dali!r}")
        clash = sorted(set(kwargs) & set(self.fixed))
        if clash:
            raise ValueError(f"{type(self).__name__} sets {clash} itself; pass the other keywords only")
        if num_workers is not None:
            if "num_threads" in kwargs:
                raise ValueError("pass num_workers= or num_threads=, not both: they name the same thing")
            # DataLoader's 0 workers (load in the main process) is one DALI thread
            kwargs["num_threads"] = num_workers if not use_dali else max(1, num_workers)
        self.root, self.batch_size, self.use_dali = root, batch_size, use_dali
        self.kwargs = dict(kwargs, **self.fixed)
        # each split's transform; None: the factory's transform= (or its default recipe)
        self.transforms = {"train": train_transform, "val": val_transform, "test": test_transform,
                           "predict": test_transform}
        self._loaders: Dict[str, object] = {}

    def split_kwargs(self, split: str) -> dict:
        """The factory's keywords for `split`: its own transform, if one was given."""
        chosen = self.transforms[split]
        return self.kwargs if chosen is None else dict(self.kwargs, transform=chosen)

    @property
    def factory(self) -> Callable:
        return self.factories[0] if self.use_dali else self.factories[1]

    def placement(self) -> dict:
        """Where the DALI loader runs, from the Trainer this module is attached to: on the CPU for
        `accelerator="cpu"` (DALI would otherwise take a GPU the model is not on), on the Trainer's
        GPU for a GPU. Nothing for the twin, without a Trainer, or when the keywords name a device."""
        trainer = getattr(self, "trainer", None)
        if not self.use_dali or trainer is None or {"device", "device_id", "dali_cpu"} & set(self.kwargs):
            return {}
        root = trainer.strategy.root_device   # the loaders read torch's devices as `.to(device)` does
        return {"device": root} if root.type in ("cpu", "cuda") else {}

    def make_loader(self, split: str):
        """A new loader for `split` ("train", "val", "test" or "predict")."""
        return self.factory(self.split_type[split], self.root, self.batch_size, **self.split_kwargs(split),
                            **self.placement())

    def loader(self, split: str):
        """The split's loader, built on first use (in the process that will read it)."""
        if split not in self._loaders:
            self._loaders[split] = self.make_loader(split)
        return self._loaders[split]

    def train_dataloader(self):
        return self.loader("train")

    def val_dataloader(self):
        return self.loader("val")

    def test_dataloader(self):
        return self.loader("test")

    def predict_dataloader(self):
        return self.loader("predict")


class CIFAR10DataModule(DaliDataModule):
    """CIFAR-10 from `root` (see get_cifar_iter_dali for the keywords)."""
    factories = (get_cifar_iter_dali, get_cifar_iter_torch)
    fixed = {"dataset": "cifar10"}


class CIFAR100DataModule(DaliDataModule):
    """CIFAR-100 from `root`; `label_type="coarse"` for the 20 superclasses."""
    factories = (get_cifar_iter_dali, get_cifar_iter_torch)
    fixed = {"dataset": "cifar100"}


class ImageNetDataModule(DaliDataModule):
    """ImageNet from `root` holding train/ and val/ (see get_imagenet_iter_dali)."""
    factories = (get_imagenet_iter_dali, get_imagenet_iter_torch)


class ImageFolderDataModule(DaliDataModule):
    """Class-per-folder datasets: `root` is the train folder; `val_root` (and `test_root`,
    default val_root) the evaluation ones. See get_imagefolder_iter_dali for the keywords."""
    factories = (get_imagefolder_iter_dali, get_imagefolder_iter_torch)

    def __init__(self, root: str, batch_size: int, *, val_root: Optional[str] = None,
                 test_root: Optional[str] = None, **kwargs):
        super().__init__(root, batch_size, **kwargs)
        self.roots = {"train": root, "val": val_root, "test": test_root or val_root,
                      "predict": test_root or val_root}

    def make_loader(self, split: str):
        if self.roots[split] is None:
            raise ValueError(f"ImageFolderDataModule has no {split} folder: pass val_root= (and test_root= "
                             f"if it differs)")
        return self.factory(self.roots[split], self.batch_size, split == "train", **self.split_kwargs(split),
                            **self.placement())


class FilesDataModule(ImageFolderDataModule):
    """Image files labelled by `label_fn=` or `label_file=` (sequences too: a captcha set), with
    `root` the training folder and `val_root` / `test_root` as ImageFolderDataModule's. See
    get_files_iter_dali for the keywords."""
    factories = (get_files_iter_dali, get_files_iter_torch)


def _pair(name: str) -> Tuple[Callable, Callable]:
    return getattr(_factories, f"get_{name}_iter_dali"), getattr(_factories, f"get_{name}_iter_torch")


# The standard datasets: `root` as their factory takes it (torchvision's layout); test and
# predict read the val split (the dataset's test split where it has no other), except
# Flowers-102, which has all three.
class MNISTDataModule(DaliDataModule):
    factories = _pair("mnist")


class FashionMNISTDataModule(DaliDataModule):
    factories = _pair("fashion_mnist")


class KMNISTDataModule(DaliDataModule):
    factories = _pair("kmnist")


class EMNISTDataModule(DaliDataModule):
    """`split=` (EMNIST's: balanced, byclass, ...) goes to the factory."""
    factories = _pair("emnist")


class SVHNDataModule(DaliDataModule):
    factories = _pair("svhn")


class STL10DataModule(DaliDataModule):
    factories = _pair("stl10")


class Flowers102DataModule(DaliDataModule):
    factories = _pair("flowers102")
    split_type = dict(SPLIT_TYPE, test="test", predict="test")


class Food101DataModule(DaliDataModule):
    factories = _pair("food101")


class OxfordPetDataModule(DaliDataModule):
    factories = _pair("oxford_pet")


class TinyImageNetDataModule(DaliDataModule):
    factories = _pair("tiny_imagenet")
