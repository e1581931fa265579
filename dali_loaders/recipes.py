"""The default recipes, as torchvision transforms: what a loader runs when given no `transform=`.

Both backends run these very objects: the DALI loaders translate them (transforms.py),
the torchvision twins call them.
"""
import torch
from torchvision.transforms import v2

from .transforms.cutout import Cutout

CIFAR_MEAN = {"cifar10": (0.4914, 0.4822, 0.4465), "cifar100": (0.5071, 0.4865, 0.4409)}
CIFAR_STD = {"cifar10": (0.2470, 0.2435, 0.2616), "cifar100": (0.2673, 0.2564, 0.2762)}
CIFAR_PADDING = 4          # train: zero-pad, then a random 32x32 crop
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
IMAGENET_CROP = 224
IMAGENET_VAL_SIZE = 256    # Resize(256) before CenterCrop(224)

# torchvision.datasets.folder.IMG_EXTENSIONS, matched case-insensitively as ImageFolder does.
IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


def to_float(mean, std):
    """The last steps of every default recipe: a float32 tensor, normalized."""
    return [v2.ToImage(), v2.ToDtype(torch.float32, scale=True), v2.Normalize(mean, std)]


def cifar(train: bool, dataset: str = "cifar10", cutout: int = 0) -> v2.Compose:
    """Train: pad 4 + random 32x32 crop, flip, normalize (+ Cutout); val: normalize."""
    steps = [v2.RandomCrop(32, padding=CIFAR_PADDING), v2.RandomHorizontalFlip()] if train else []
    steps += to_float(CIFAR_MEAN[dataset], CIFAR_STD[dataset])
    return v2.Compose(steps + ([Cutout(cutout)] if train and cutout else []))


def imagenet(train: bool, crop: int = IMAGENET_CROP, val_size: int = IMAGENET_VAL_SIZE) -> v2.Compose:
    """Train: RandomResizedCrop + flip; val: Resize(val_size) + CenterCrop(crop); normalized."""
    if train:
        steps = [v2.RandomResizedCrop(crop, antialias=True), v2.RandomHorizontalFlip()]
    else:
        steps = [v2.Resize(val_size, antialias=True), v2.CenterCrop(crop)]
    return v2.Compose(steps + to_float(IMAGENET_MEAN, IMAGENET_STD))


# The usual per-channel statistics of each dataset's training split, on the 0..1 scale.
DATASET_MEAN = {"mnist": (0.1307,), "fashion_mnist": (0.2860,), "kmnist": (0.1918,), "emnist": (0.1751,),
                "svhn": (0.4377, 0.4438, 0.4728), "stl10": (0.4467, 0.4398, 0.4066),
                "tiny_imagenet": (0.4802, 0.4481, 0.3975)}
DATASET_STD = {"mnist": (0.3081,), "fashion_mnist": (0.3530,), "kmnist": (0.3483,), "emnist": (0.3332,),
               "svhn": (0.1980, 0.2010, 0.1970), "stl10": (0.2603, 0.2566, 0.2713),
               "tiny_imagenet": (0.2770, 0.2691, 0.2821)}


def normalized(dataset: str) -> v2.Compose:
    """A float32 tensor normalized with the dataset's usual mean and std, and nothing else:
    the default recipe of the small fixed-size datasets (MNIST and kin, SVHN, STL-10,
    Tiny-ImageNet), train and val alike. Grey datasets stay one channel."""
    return v2.Compose(to_float(DATASET_MEAN[dataset], DATASET_STD[dataset]))


# torchvision's classification reference for ResNet-50 at 80.9% top-1 (its "new recipe")
RESNET50_TRAIN_CROP, RESNET50_VAL_SIZE = 176, 232


def resnet50_reference(train: bool) -> v2.Compose:
    """Train: RandomResizedCrop(176), flip, TrivialAugmentWide, normalized, RandomErasing(0.1);
    val: Resize(232), CenterCrop(224), normalized."""
    if not train:
        return imagenet(False, IMAGENET_CROP, RESNET50_VAL_SIZE)
    steps = [v2.RandomResizedCrop(RESNET50_TRAIN_CROP, antialias=True), v2.RandomHorizontalFlip(),
             v2.TrivialAugmentWide()]
    return v2.Compose(steps + to_float(IMAGENET_MEAN, IMAGENET_STD) + [v2.RandomErasing(p=0.1)])


def resnet50_mixing(num_classes: int) -> v2.RandomChoice:
    """The reference's batch mixing: MixUp(0.2) or CutMix(1.0), one of them per batch."""
    return v2.RandomChoice([v2.MixUp(alpha=0.2, num_classes=num_classes),
                            v2.CutMix(alpha=1.0, num_classes=num_classes)])
