"""The recipes the bench times, by name: each a pair of torchvision transforms (train, val)
that every contender runs, and the loader options they need.

"default" is the library's own recipe (dali_loaders.recipes). The others are recipes that
training repos bring with them.
"""
from dataclasses import dataclass, field
from typing import Callable, Optional, Tuple

from .. import recipes
from . import dino
from .dino import MultiCrop


@dataclass(frozen=True)
class BenchRecipe:
    make: Callable[[bool], object]            # train -> the transform
    splits: Tuple[str, ...] = ("train", "val")
    options: dict = field(default_factory=dict)   # extra loader arguments (python_fallback, ...)
    about: str = ""
    tensor_backend: bool = True                   # torchvision's tensor backend can run it
    mixing: Optional[Callable[[int], object]] = None   # num_classes -> the train batches' batch_transform
    tensor_make: Optional[Callable[[bool], object]] = None   # the tensor backend's, when `make` needs PIL
    needs: Tuple[str, ...] = ()                   # the libraries it imports beyond ours (pip names)

    def missing(self) -> Tuple[str, ...]:
        """The libraries it needs that are not installed here."""
        from importlib.util import find_spec

        return tuple(name for name in self.needs if find_spec(name) is None)


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


def _torchvision_reference_ta(train: bool):
    """torchvision's current classification reference (--auto-augment ta_wide), written in v2."""
    from torchvision.transforms import InterpolationMode, v2

    if not train:
        return _torchvision_176(False)
    steps = [v2.RandomResizedCrop(176, interpolation=InterpolationMode.BICUBIC, antialias=True),
             v2.RandomHorizontalFlip(), v2.TrivialAugmentWide()]
    return v2.Compose(steps + recipes.to_float(recipes.IMAGENET_MEAN, recipes.IMAGENET_STD) +
                      [v2.RandomErasing(p=0.1)])


def _torchvision_reference_augmix(train: bool):
    """torchvision's classification reference with --auto-augment augmix (176 px, bilinear), v2."""
    from torchvision.transforms import v2

    if not train:
        return _torchvision_176(False)
    steps = [v2.RandomResizedCrop(176, antialias=True), v2.RandomHorizontalFlip(), v2.AugMix()]
    return v2.Compose(steps + recipes.to_float(recipes.IMAGENET_MEAN, recipes.IMAGENET_STD))


def _contrastive_views(train: bool):
    """Contrastive learning's views as MoCo v2 makes them, less its Gaussian blur: a random crop,
    a flip, colour jitter with hue most of the time, grey some of the time."""
    from torchvision.transforms import v2

    steps = [v2.RandomResizedCrop(224, scale=(0.2, 1.0), antialias=True), v2.RandomHorizontalFlip(),
             v2.RandomApply([v2.ColorJitter(0.4, 0.4, 0.4, 0.1)], p=0.8), v2.RandomGrayscale(p=0.2)]
    return v2.Compose(steps + recipes.to_float(recipes.IMAGENET_MEAN, recipes.IMAGENET_STD))


def _moco_views(train: bool):
    """MoCo v2's views with the blur: the contrastive views and a Gaussian blur half the time,
    written with torchvision's GaussianBlur (a 23-pixel kernel, a tenth of the size, as SimCLR's;
    MoCo's own code blurs with PIL's ImageFilter instead)."""
    from torchvision.transforms import v2

    steps = [v2.RandomResizedCrop(224, scale=(0.2, 1.0), antialias=True),
             v2.RandomApply([v2.ColorJitter(0.4, 0.4, 0.4, 0.1)], p=0.8), v2.RandomGrayscale(p=0.2),
             v2.RandomApply([v2.GaussianBlur(23, sigma=(0.1, 2.0))], p=0.5), v2.RandomHorizontalFlip()]
    return v2.Compose(steps + recipes.to_float(recipes.IMAGENET_MEAN, recipes.IMAGENET_STD))


class TwoCropsTransform:
    """MoCo's view maker: two views of each image, each drawn by the same transform."""

    def __init__(self, base_transform):
        self.base_transform = base_transform

    def __call__(self, x):
        q = self.base_transform(x)
        k = self.base_transform(x)
        return [q, k]


def _two_crops(train: bool):
    """MoCo v2's training samples: two views of each image (the contrastive views)."""
    return TwoCropsTransform(_contrastive_views(train))


def _multi_crop(train: bool):
    """DINO's training samples with torchvision's steps: two 224 px crops of 40-100% of the image
    and eight 96 px crops of 5-40%, each flipped, colour-jittered and greyed at random (DINO's own
    blur and solarization classes left out)."""
    from torchvision.transforms import v2

    def view(size, scale):
        steps = [v2.RandomResizedCrop(size, scale=scale, antialias=True), v2.RandomHorizontalFlip(),
                 v2.RandomApply([v2.ColorJitter(0.4, 0.4, 0.2, 0.1)], p=0.8), v2.RandomGrayscale(p=0.2)]
        return v2.Compose(steps + recipes.to_float(recipes.IMAGENET_MEAN, recipes.IMAGENET_STD))

    return MultiCrop(view(224, (0.4, 1.0)), view(224, (0.4, 1.0)), view(96, (0.05, 0.4)), 8)


def _timm_rand_augment(train: bool):
    """timm's create_transform: rand-m9-mstd0.5-inc1, pixel RandomErasing(0.25), bicubic; eval
    as resolve_data_config gives for a resnet50 (bicubic, crop_pct 0.95)."""
    from timm.data import create_transform

    if not train:
        return create_transform(224, interpolation="bicubic", crop_pct=0.95)
    transform = create_transform(224, is_training=True, auto_augment="rand-m9-mstd0.5-inc1", re_prob=0.25,
                                 re_mode="pixel", interpolation="bicubic")
    for step in transform.transforms:
        for op in getattr(step, "ops", []):
            # timm 1.0.31's PosterizeIncreasing asks PIL for 0 bits when the noisy magnitude reaches
            # 10 (about 1 image in 700), which Pillow 13 refuses: the PIL contender, timm itself,
            # would crash. Magnitudes clipped at 9.99 instead of 10 keep it running at the same cost.
            op.magnitude_max = 9.99
    return transform


def _timm_rand_augment_on_tensors(train: bool):
    """A torchvision v2 near-equivalent of timm-ra on uint8 tensors (timm's ops need PIL):
    RandAugment(2, 9) with the mean fill, random RandomErasing(0.25)."""
    from torchvision.transforms import InterpolationMode, v2

    bicubic = InterpolationMode.BICUBIC
    if train:
        steps = [v2.RandomResizedCrop(224, interpolation=bicubic, antialias=True), v2.RandomHorizontalFlip(),
                 v2.RandAugment(2, 9, fill=[124, 116, 104])]
        tail = [v2.RandomErasing(p=0.25, value="random")]
    else:
        steps, tail = [v2.Resize(235, interpolation=bicubic, antialias=True), v2.CenterCrop(224)], []
    return v2.Compose(steps + recipes.to_float(recipes.IMAGENET_MEAN, recipes.IMAGENET_STD) + tail)


def _timm_augmix(train: bool):
    """timm's create_transform with AugMix (augmix-m3-w3: three chains, severity 3), train."""
    from timm.data import create_transform

    return create_transform(224, is_training=True, auto_augment="augmix-m3-w3")


def _timm_augmix_on_tensors(train: bool):
    """A torchvision v2 near-equivalent of timm-augmix on uint8 tensors (timm's ops need PIL)."""
    from torchvision.transforms import v2

    steps = [v2.RandomResizedCrop(224, antialias=True), v2.RandomHorizontalFlip(), v2.AugMix(severity=3)]
    return v2.Compose(steps + recipes.to_float(recipes.IMAGENET_MEAN, recipes.IMAGENET_STD))


def _timm_augmix_splits(train: bool):
    """timm's train.py with --aug-splits 3 (AugMixDataset's items, for the JSD loss): one crop
    and flip, then the clean image and two AugMix'd ones of it."""
    from timm.data import create_transform

    from ..transforms import SplitViews

    crop, augment, finish = create_transform(224, is_training=True, auto_augment="augmix-m3-w3", separate=True)
    return SplitViews(crop, [finish, [augment, finish], [augment, finish]])


def _timm_augmix_splits_on_tensors(train: bool):
    """A torchvision v2 near-equivalent of timm-jsd on uint8 tensors: v2.AugMix for timm's."""
    from torchvision.transforms import v2

    from ..transforms import SplitViews

    finish = recipes.to_float(recipes.IMAGENET_MEAN, recipes.IMAGENET_STD)
    crop = v2.Compose([v2.RandomResizedCrop(224, antialias=True), v2.RandomHorizontalFlip()])
    return SplitViews(crop, [finish, [v2.AugMix(severity=3)] + finish, [v2.AugMix(severity=3)] + finish])


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
        "mixing": BenchRecipe(lambda train: recipes.imagenet(train), splits=("train",),
                              mixing=recipes.resnet50_mixing,
                              about="the default recipe, then the reference's MixUp(0.2)/CutMix(1.0) on each batch"),
        "resnet50": BenchRecipe(recipes.resnet50_reference, mixing=recipes.resnet50_mixing,
                                about="torchvision's ResNet-50 reference: RandomResizedCrop(176), flip, "
                                      "TrivialAugmentWide, RandomErasing(0.1), MixUp(0.2)/CutMix(1.0) / "
                                      "Resize(232), CenterCrop(224)"),
        "tvref-ta": BenchRecipe(_torchvision_reference_ta, mixing=recipes.resnet50_mixing,
                                about="RandomResizedCrop(176, bicubic), flip, TrivialAugmentWide, RandomErasing(0.1), "
                                      "MixUp(0.2)/CutMix(1.0) / Resize(232), CenterCrop(224)"),
        "tvref-augmix": BenchRecipe(_torchvision_reference_augmix, splits=("train",),
                                    about="RandomResizedCrop(176), flip, AugMix() (3 chains of 1-3 operations, "
                                          "Dirichlet-mixed): torchvision's reference with --auto-augment augmix"),
        "timm-ra": BenchRecipe(_timm_rand_augment, tensor_make=_timm_rand_augment_on_tensors, needs=("timm",),
                               about="timm create_transform(224, rand-m9-mstd0.5-inc1, re_prob 0.25 pixel, bicubic) / "
                                     "its eval (Resize(235, bicubic), CenterCrop(224)); tensor backend: a v2 "
                                     "near-equivalent"),
        "timm-augmix": BenchRecipe(_timm_augmix, splits=("train",), tensor_make=_timm_augmix_on_tensors,
                                   needs=("timm",),
                                   about="timm create_transform(224, augmix-m3-w3): RandomResizedCrop, flip, "
                                         "AugMix (PIL ops, numpy mix, PIL blend); tensor backend: v2.AugMix"),
        "timm-jsd": BenchRecipe(_timm_augmix_splits, splits=("train",), tensor_make=_timm_augmix_splits_on_tensors,
                                needs=("timm",),
                                about="timm's train.py --aug-splits 3 (AugMixDataset): RandomResizedCrop and flip "
                                      "once, then the clean image and two AugMix (augmix-m3-w3) images of it "
                                      "(images/s counts samples, each three images); tensor backend: v2.AugMix"),
        "contrastive": BenchRecipe(_contrastive_views, splits=("train",),
                              about="RandomResizedCrop(224, scale=(0.2, 1)), flip, RandomApply([ColorJitter(0.4, "
                                    "0.4, 0.4, 0.1)], p=0.8), RandomGrayscale(0.2): MoCo v2's views, less the blur"),
        "moco": BenchRecipe(_moco_views, splits=("train",),
                            about="RandomResizedCrop(224, scale=(0.2, 1)), RandomApply([ColorJitter(0.4, 0.4, 0.4, "
                                  "0.1)], p=0.8), RandomGrayscale(0.2), RandomApply([GaussianBlur(23, (0.1, 2))], "
                                  "p=0.5), flip: MoCo v2's views, the blur torchvision's"),
        "two-crops": BenchRecipe(_two_crops, splits=("train",),
                                 about="TwoCropsTransform of the contrastive views: two views of each image, as "
                                       "MoCo v2 trains (images/s counts samples, each two views)"),
        "multi-crop": BenchRecipe(_multi_crop, splits=("train",),
                                  about="DINO's multi-crop view maker: two 224 px and eight 96 px views of each "
                                        "image (RandomResizedCrop, flip, ColorJitter, RandomGrayscale; images/s "
                                        "counts samples)"),
        "dino": BenchRecipe(lambda train: dino.dino(train), splits=("train",), tensor_backend=False,
                            about="DINO's multi-crop as its repository writes it: 2 x 224 + 8 x 96 px views, "
                                  "torchvision's v1 steps with DINO's own PIL GaussianBlur and Solarization "
                                  "classes (images/s counts samples)"),
        "albumentations": BenchRecipe(_albumentations_val, splits=("val",), options={"python_fallback": True},
                                      tensor_backend=False, needs=("albumentations",),
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
    "flowers102": {"default": BenchRecipe(lambda train: None, needs=("scipy",))},   # its .mat files
    "hf": {"default": BenchRecipe(lambda train: recipes.imagenet(train), needs=("datasets",))},
}


def bench_recipe(dataset: str, name: str) -> BenchRecipe:
    return RECIPES[dataset][name]


def transform_for(spec: dict) -> Optional[object]:
    return bench_recipe(spec["dataset"], spec.get("recipe", "default")).make(spec["split"] == "train")


def tensor_transform_for(spec: dict) -> Optional[object]:
    """The tensor backend's transform: the recipe's own, unless it needs PIL images."""
    recipe = bench_recipe(spec["dataset"], spec.get("recipe", "default"))
    return (recipe.tensor_make or recipe.make)(spec["split"] == "train")


def options_for(spec: dict) -> dict:
    return dict(bench_recipe(spec["dataset"], spec.get("recipe", "default")).options)


def mixes(dataset: str, recipe: str, split: str) -> bool:
    """Whether the workload's batches are mixed (its recipe's mixing, on train batches)."""
    return bench_recipe(dataset, recipe).mixing is not None and split == "train"


def batch_options(spec: dict) -> dict:
    """batch_transform= for every contender of a train workload whose recipe mixes batches
    (CIFAR-10: 10 classes; the image folder: one class per folder of its train/); for the
    "collate" contender the same mixing as torchvision's reference passes it, collate_fn=."""
    import os

    if not mixes(spec["dataset"], spec.get("recipe", "default"), spec["split"]):
        return {}
    make = bench_recipe(spec["dataset"], spec.get("recipe", "default")).mixing
    classes = 10 if spec["dataset"] == "cifar10" else \
        sum(entry.is_dir() for entry in os.scandir(os.path.join(spec["data"], "train")))
    mixing = make(classes)
    if spec.get("kind") == "collate":
        from torch.utils.data import default_collate

        return {"collate_fn": lambda batch: mixing(*default_collate(batch))}
    return {"batch_transform": mixing}
