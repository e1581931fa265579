"""The recipes the bench times, by name: each a pair of torchvision transforms (train, val)
that every contender runs, and the loader options they need.

"default" is the library's own recipe (dali_loaders.recipes). The others are recipes that
training repos bring with them.
"""
from dataclasses import dataclass, field
from typing import Callable, Optional, Tuple

from .. import recipes


@dataclass(frozen=True)
class BenchRecipe:
    make: Callable[[bool], object]            # train -> the transform
    splits: Tuple[str, ...] = ("train", "val")
    options: dict = field(default_factory=dict)   # extra loader arguments (python_fallback, ...)
    about: str = ""
    tensor_backend: bool = True                   # torchvision's tensor backend can run it
    mixing: Optional[Callable[[int], object]] = None   # num_classes -> the train batches' batch_transform


def _torchvision_176(train: bool):
    """torchvision's classification reference style: a 176 px bicubic train crop with colour
    jitter, a 232 px val resize."""
    from torchvision.transforms import InterpolationMode, v2

    if train:
        steps = [v2.RandomResizedCrop(176, interpolation=InterpolationMode.BICUBIC, antialias=True),
                 v2.RandomHorizontalFlip(), v2.ColorJitter(0.4, 0.4, 0.4)]
    else:
        steps = [v2.Resize(232, interpolation=InterpolationMode.BILINEAR, antialias=True), v2.CenterCrop(224)]
    return v2.Compose(steps + recipes.to_float(recipes.IMAGENET_MEAN, recipes.IMAGENET_STD))


def _albumentations_val(train: bool):
    """A deterministic Albumentations pipeline: DALI runs it per sample in Python."""
    import albumentations as A
    from albumentations.pytorch import ToTensorV2

    return A.Compose([A.SmallestMaxSize(256), A.CenterCrop(224, 224), A.Normalize(), ToTensorV2()])


def _cifar_mixing(num_classes: int):
    from torchvision.transforms import v2

    return v2.RandomChoice([v2.MixUp(alpha=1.0, num_classes=num_classes),
                            v2.CutMix(alpha=1.0, num_classes=num_classes)])


def _cifar_autoaugment(train: bool):
    """The AutoAugment paper's CIFAR-10 recipe: pad-crop, flip, the CIFAR10 policy."""
    from torchvision.transforms import v2

    steps = [v2.RandomCrop(32, padding=recipes.CIFAR_PADDING), v2.RandomHorizontalFlip(),
             v2.AutoAugment(v2.AutoAugmentPolicy.CIFAR10)]
    return v2.Compose(steps + recipes.to_float(recipes.CIFAR_MEAN["cifar10"], recipes.CIFAR_STD["cifar10"]))


RECIPES = {
    "imagenet": {
        "default": BenchRecipe(lambda train: recipes.imagenet(train)),
        "tv176": BenchRecipe(_torchvision_176, about="RandomResizedCrop(176, bicubic), flip, ColorJitter(0.4, 0.4, "
                                                      "0.4) / Resize(232), CenterCrop(224)"),
        "resnet50": BenchRecipe(recipes.resnet50_reference, mixing=recipes.resnet50_mixing,
                                about="torchvision's ResNet-50 reference: RandomResizedCrop(176), flip, "
                                      "TrivialAugmentWide, RandomErasing(0.1), MixUp(0.2)/CutMix(1.0) / "
                                      "Resize(232), CenterCrop(224)"),
        "albumentations": BenchRecipe(_albumentations_val, splits=("val",), options={"python_fallback": True},
                                      tensor_backend=False,
                                      about="SmallestMaxSize(256), CenterCrop(224), Normalize, ToTensorV2: "
                                            "python_fallback=True"),
    },
    "cifar10": {
        "default": BenchRecipe(lambda train: recipes.cifar(train)),
        "mixing": BenchRecipe(lambda train: recipes.cifar(train), splits=("train",), mixing=_cifar_mixing,
                              about="the default recipe, then MixUp(1.0)/CutMix(1.0) on each batch"),
        "autoaugment": BenchRecipe(_cifar_autoaugment, splits=("train",),
                                   about="RandomCrop(32, padding=4), flip, AutoAugment(CIFAR10), normalized"),
    },
    "mnist": {"default": BenchRecipe(lambda train: None)},          # None: the factory's own recipe
    "flowers102": {"default": BenchRecipe(lambda train: None)},
}


def bench_recipe(dataset: str, name: str) -> BenchRecipe:
    return RECIPES[dataset][name]


def transform_for(spec: dict) -> Optional[object]:
    return bench_recipe(spec["dataset"], spec.get("recipe", "default")).make(spec["split"] == "train")


def options_for(spec: dict) -> dict:
    return dict(bench_recipe(spec["dataset"], spec.get("recipe", "default")).options)


def batch_options(spec: dict) -> dict:
    """batch_transform= for every contender of a train workload whose recipe mixes batches
    (CIFAR-10: 10 classes; the image folder: one class per folder of its train/)."""
    import os

    mixing = bench_recipe(spec["dataset"], spec.get("recipe", "default")).mixing
    if mixing is None or spec["split"] != "train":
        return {}
    if spec["dataset"] == "cifar10":
        return {"batch_transform": mixing(10)}
    classes = sum(entry.is_dir() for entry in os.scandir(os.path.join(spec["data"], "train")))
    return {"batch_transform": mixing(classes)}
