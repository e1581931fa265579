"""The numbers of each dataset's recipe, in one place, read by both backends.

Means and standard deviations are on torchvision's 0..1 scale; the DALI pipelines
read uint8 pixels and scale them with `on_255_scale`.
"""
from dataclasses import dataclass
from typing import Tuple

Triple = Tuple[float, float, float]


@dataclass(frozen=True)
class CifarRecipe:
    mean: Triple
    std: Triple
    size: int = 32      # images are size x size
    padding: int = 4    # train: zero-pad, then a random size x size crop
    flip_p: float = 0.5


CIFAR = {
    "cifar10": CifarRecipe(mean=(0.4914, 0.4822, 0.4465), std=(0.2470, 0.2435, 0.2616)),
    "cifar100": CifarRecipe(mean=(0.5071, 0.4865, 0.4409), std=(0.2673, 0.2564, 0.2762)),
}


@dataclass(frozen=True)
class ImageNetRecipe:
    mean: Triple = (0.485, 0.456, 0.406)
    std: Triple = (0.229, 0.224, 0.225)
    scale: Tuple[float, float] = (0.08, 1.0)       # RandomResizedCrop area fraction
    ratio: Tuple[float, float] = (3 / 4, 4 / 3)    # RandomResizedCrop aspect ratio
    flip_p: float = 0.5
    crop: int = 224
    val_size: int = 256                            # Resize(val_size) before CenterCrop(crop)


IMAGENET = ImageNetRecipe()

# torchvision.datasets.folder.IMG_EXTENSIONS, matched case-insensitively as ImageFolder does.
IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


def on_255_scale(values):
    """Mean or std for uint8 pixels: DALI normalizes x in 0..255, torchvision x/255."""
    return [255.0 * v for v in values]
