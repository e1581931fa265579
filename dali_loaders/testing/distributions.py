"""check-gpu's random transforms, checked by distribution: a GPU graph draws other random
numbers than the CPU one (its coins need not fall alike), so the same seed cannot make their
outputs equal. Instead each check runs the loader over the same PNG images (decoded alike
everywhere) epoch after epoch, computes a statistic of every output image against its input
(the fraction of pixels changed, the mean change, the crop's area), and compares the values'
distribution with that of torchvision's or timm's own class applied to the same images in
Python: the two-sample Kolmogorov-Smirnov distance D once each value may move by the check's
`tolerance` (the per-pixel differences docs/augmentations.md states, such as DALI's equalize
formula or its warps' interpolation, move a near-constant statistic a little, and an exact KS
test would flag that as another distribution), bound by D's critical value at ALPHA. Each
check names a parameter set away from its default; a translation that ignored it would draw
from the default's distribution, which the check tells apart (tests/test_check_gpu.py runs
every check with the parameter at its default and sees it fail).
"""
import contextlib
import math
import os
import random
from dataclasses import dataclass
from typing import Callable, List

import numpy as np
import torch
from torchvision.transforms import v2

from .. import switches, transforms
from ..loader import build, dali_loader
from ..sources.image_files import ImageFiles

ALPHA = 1e-4      # the chance that a faithful translation fails a check
EPOCHS = 24       # loader epochs and reference draws: 24 x IMAGES values on each side
IMAGES = 16
FLOAT = [v2.ToImage(), v2.ToDtype(torch.float32, scale=True)]


def changed_fraction(output: np.ndarray, original: np.ndarray) -> float:
    """The fraction of pixels changed (by more than half a level in any channel)."""
    return float((np.abs(output - original).max(axis=-1) > 0.5).mean())


def mean_change(output: np.ndarray, original: np.ndarray) -> float:
    """The mean |output - input| in levels, over every pixel and channel."""
    return float(np.abs(output - original).mean())


def crop_area(output: np.ndarray, original: np.ndarray) -> float:
    """The crop's share of the image, from the gradients the images hold (red across,
    green down, 0 to 255): the span of red times the span of green."""
    return float(np.ptp(output[..., 0]) / 255 * np.ptp(output[..., 1]) / 255)


@dataclass
class DistributionCheck:
    name: str
    transform: object          # given to the loader, and applied in Python as the reference
    statistic: Callable        # (output, input), both HWC levels -> one number per image
    tolerance: float           # how far each value may move (the statistic's unit)
    parameter: str             # the parameter the check sets, and what ignoring it would give
    ignored: object            # the transform with that parameter at its default
    epochs: int = EPOCHS       # loader epochs and reference draws
    variant: str = "gpu"
    folder: str = ""           # the images (write_gradient_images), given when the check is run


def distribution_checks() -> List[DistributionCheck]:
    """torchvision's random transforms and timm's, each with its parameter."""
    return [
        DistributionCheck("RandomErasing p=1, value 0.5", v2.Compose([*FLOAT, v2.RandomErasing(
            1.0, scale=(0.1, 0.2), value=0.5)]), changed_fraction, 0.01, "scale=(0.1, 0.2) (default (0.02, 0.33))",
            v2.Compose([*FLOAT, v2.RandomErasing(1.0, value=0.5)])),
        DistributionCheck("AutoAugment SVHN", v2.AutoAugment(v2.AutoAugmentPolicy.SVHN), mean_change, 2.0,
                          "policy=SVHN (default IMAGENET)", v2.AutoAugment()),
        DistributionCheck("RandAugment", v2.RandAugment(2, 20), mean_change, 2.0, "magnitude=20 (default 9)",
                          v2.RandAugment(2)),
        # 3 bins leave a third of the images unchanged or nearly: few values tell it from 31;
        # twice the draws. (2 bins match too on the CPU, D 0.009 fused and 0.038 as DALI's
        # auto_aug graph against a bound of 0.114; their bin 0 makes most operations the identity.)
        DistributionCheck("TrivialAugmentWide", v2.TrivialAugmentWide(num_magnitude_bins=3), changed_fraction, 0.02,
                          "num_magnitude_bins=3 (default 31)", v2.TrivialAugmentWide(), epochs=2 * EPOCHS),
        DistributionCheck("AugMix", v2.AugMix(severity=9), mean_change, 2.0, "severity=9 (default 3)", v2.AugMix()),
    ] + _timm_checks()


def _timm_checks() -> List[DistributionCheck]:
    """timm's (when timm is installed)."""
    try:
        from timm.data import auto_augment
        from timm.data.random_erasing import RandomErasing
        from timm.data.transforms import MaybeToTensor, RandomResizedCropAndInterpolation
    except ImportError:
        return []
    hparams = {"img_mean": (124, 116, 104)}
    policy = auto_augment.auto_augment_policy("original", hparams)
    every_op_applied = auto_augment.AutoAugment([[auto_augment.AugmentOp(op.name, 1.0, op.magnitude, hparams)
                                                  for op in sub] for sub in policy])
    return [
        DistributionCheck("timm RandomResizedCropAndInterpolation", v2.Compose([
            RandomResizedCropAndInterpolation(32, scale=(0.25, 0.5)), MaybeToTensor()]), crop_area, 0.01,
            "scale=(0.25, 0.5) (default (0.08, 1))", v2.Compose([RandomResizedCropAndInterpolation(32),
                                                                   MaybeToTensor()])),
        DistributionCheck("timm RandomErasing const p=1", v2.Compose([*FLOAT, RandomErasing(
            1.0, min_area=0.1, max_area=0.2, mode="const", device="cpu")]), changed_fraction, 0.01,
            "min_area=0.1, max_area=0.2 (default 0.02, 1/3)",
            v2.Compose([*FLOAT, RandomErasing(1.0, mode="const", device="cpu")])),
        # m7: timm's PosterizeIncreasing keeps 0 bits at magnitude 10, which Pillow refuses
        DistributionCheck("timm RandAugment m7", auto_augment.rand_augment_transform(
            "rand-m7-n4-mstd0.5-inc1", hparams), mean_change, 2.0, "n4: 4 ops an image (default 2)",
            auto_augment.rand_augment_transform("rand-m7-mstd0.5-inc1", hparams)),
        # the changed fraction: DALI's equalize (6 of the policy's ops) is not PIL's formula
        DistributionCheck("timm AutoAugment original", auto_augment.auto_augment_transform("original", hparams),
                          changed_fraction, 0.02, "each op's probability (ignored: every op applied)",
                          every_op_applied),
        DistributionCheck("timm AugMix", auto_augment.augment_and_mix_transform("augmix-m7-w3", hparams), mean_change,
                          2.0, "m7: severity 7 (default 3)", auto_augment.augment_and_mix_transform("augmix-m3-w3",
                                                                                                    hparams)),
    ]


def write_gradient_images(root: str, count: int = IMAGES) -> str:
    """PNG files (one class) of 64 x 48 pixels (batches of one shape): red rising across,
    green down, blue in 8-pixel blocks of noise (each image its own), so that crops, erasing
    and colour operations all show."""
    from PIL import Image

    rng = np.random.default_rng(0)
    folder = os.path.join(root, "images")
    os.makedirs(folder, exist_ok=True)
    for k in range(count):
        width, height = 64, 48
        x, y = np.meshgrid(np.arange(width), np.arange(height))
        blocks = rng.integers(0, 256, (height // 8 + 1, width // 8 + 1)).repeat(8, 0).repeat(8, 1)
        pixels = np.stack([x * 255 // (width - 1), y * 255 // (height - 1), blocks[:height, :width]], -1)
        Image.fromarray(pixels.astype(np.uint8)).save(os.path.join(folder, f"{k:03d}.png"))
    return root


def levels(image) -> np.ndarray:
    """An output as HWC float levels of 0..255: a PIL image, or a CHW tensor (uint8, or float
    on the 0..1 scale)."""
    if isinstance(image, torch.Tensor):
        pixels = image.detach().cpu().permute(1, 2, 0).to(torch.float64).numpy()
        return pixels if image.dtype == torch.uint8 else pixels * 255
    return np.asarray(image, dtype=np.float64)


def reference_values(check: DistributionCheck, files: List[str], originals: List[np.ndarray],
                     epochs: int = EPOCHS) -> np.ndarray:
    """The statistic of torchvision's (timm's) own class, `epochs` draws on every image."""
    from PIL import Image

    random.seed(0)        # timm draws from Python's random (its AugMix from numpy's too), torchvision from torch's
    np.random.seed(0)
    torch.manual_seed(0)
    images = [Image.open(path).convert("RGB") for path in files]
    return np.array([check.statistic(levels(check.transform(image)), original)
                     for _ in range(epochs) for image, original in zip(images, originals)])


def loader_values(transform, statistic: Callable, folder: str, originals: List[np.ndarray], variant: str,
                  epochs: int = EPOCHS) -> np.ndarray:
    """The statistic of the loader's outputs (`variant` its device), `epochs` epochs in the
    files' order (train=False: no shuffle; the transform still draws afresh each epoch)."""
    with made_as(variant) as device:
        loader = dali_loader(ImageFiles(folder), transform, train=False, batch_size=8, num_threads=2, seed=11,
                             device=device)
    found = []
    for _ in range(epochs):
        outputs = [image for images, _ in loader for image in images]
        if len(outputs) != len(originals):
            raise ValueError(f"an epoch served {len(outputs)} images of {len(originals)}")
        found += [statistic(levels(output), original) for output, original in zip(outputs, originals)]
    return np.array(found)


@contextlib.contextmanager
def made_as(variant: str):
    """The loader device of a check's variant, with the placement it asks for while the loader
    is made: "gpu-decode" is device="gpu" with the files of the steps the CPU runs decoded on
    the GPU (loader/build.py's STEPS_DECODE)."""
    if variant != transforms.GPU_DECODE:
        yield variant
        return
    with switches.overridden(build.STEPS_DECODE_ENV, "gpu"):
        yield "gpu"


def ks_distance(a: np.ndarray, b: np.ndarray, tolerance: float = 0.0) -> float:
    """The two-sample Kolmogorov-Smirnov statistic once every value may move by `tolerance`:
    the largest gap between one empirical distribution function and the other's shifted by
    `tolerance` either way (0: the plain statistic)."""
    a, b = np.sort(a), np.sort(b)
    points = np.concatenate([a, b, a + tolerance, b + tolerance])

    def cdf(values, at):
        return np.searchsorted(values, at, side="right") / len(values)

    gaps = [cdf(a, points - tolerance) - cdf(b, points), cdf(b, points - tolerance) - cdf(a, points)]
    return float(max(0.0, *(gap.max() for gap in gaps)))


def ks_bound(n: int, m: int, alpha: float = ALPHA) -> float:
    """D's critical value for samples of n and m at level alpha (the asymptotic formula)."""
    return math.sqrt(-math.log(alpha / 2) / 2) * math.sqrt((n + m) / (n * m))


def compare_distribution(check: DistributionCheck, variant: str, folder: str, transform=None) -> dict:
    """D (with the check's tolerance) between the loader's statistic, `transform` given to it
    (default: the check's own), and the reference's; `bound` its critical value."""
    files = ImageFiles(folder).files
    originals = [levels(_open(path)) for path in files]
    ours = loader_values(check.transform if transform is None else transform, check.statistic, folder, originals,
                         variant, check.epochs)
    theirs = reference_values(check, files, originals, check.epochs)
    return dict(distance=ks_distance(ours, theirs, check.tolerance), bound=ks_bound(len(ours), len(theirs)),
                ours_mean=float(ours.mean()), reference_mean=float(theirs.mean()))


def _open(path: str):
    from PIL import Image

    return Image.open(path).convert("RGB")
