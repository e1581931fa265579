"""`python -m dali_loaders check-gpu`: the GPU graphs run beside the CPU ones, whole images
compared, one table of bounds and pass / fail.

No GPU has run this library while it was written: the GPU graphs were checked against DALI's
schemas only. This is how the first GPU verifies them. Each check builds the same loader
twice, the CPU variant and a GPU one, with the same seed, and walks both epochs together
(`zip(strict=True)`: the same number of batches, the same labels, whole images compared, no
centre crop). It covers every translated transform (random ones with their parameters pinned,
so each output is determined; the truly random policies with the same seed, whose draws DALI
makes on the CPU for both), the decode variants (cpu-decode, mixed) and the CIFAR and ImageNet
loaders with their default recipes. Without a GPU it says so and exits 0.
`--against cpu` runs the same checks CPU against CPU: the machinery, tried on any machine.
"""
import os
import tempfile
from dataclasses import dataclass
from typing import Callable, List, Optional

import numpy as np
import torch
from torchvision.transforms import InterpolationMode as IM
from torchvision.transforms import v2

from .. import get_cifar_iter_dali, get_imagefolder_iter_dali, recipes, transforms
from ..loader import dali_loader
from ..sources.image_files import ImageFiles
from ..transforms.cutout import Cutout
from .synthetic import smooth_images, write_cifar

FLOAT = [v2.ToImage(), v2.ToDtype(torch.float32, scale=True)]


@dataclass
class Check:
    name: str
    make: Callable[[str], object]   # device variant -> a loader
    bound: float                    # the largest |GPU - CPU| allowed, on the 0..1 scale (labels: equal)
    variant: str = "gpu"


def transform_cases() -> List[tuple]:
    """(name, transform, bound): every translated step, each made deterministic where it can be."""
    pin = dict(interpolation=IM.BILINEAR)
    return [
        ("Resize bilinear + CenterCrop", v2.Compose([v2.Resize(40), v2.CenterCrop(32)]), 2 / 255),
        ("Resize nearest (h, w)", v2.Resize((30, 44), interpolation=IM.NEAREST), 1 / 255),
        ("Resize bicubic", v2.Resize(36, interpolation=IM.BICUBIC), 6 / 255),
        ("RandomResizedCrop whole image", v2.RandomResizedCrop(40, scale=(1, 1), ratio=(1, 1)), 2 / 255),
        ("RandomCrop padded", v2.RandomCrop(48, padding=(1, 2, 3, 4), pad_if_needed=True, fill=9), 0),
        ("Pad + flips p=1", v2.Compose([v2.Pad((1, 2), fill=(1, 2, 3)), v2.RandomHorizontalFlip(1),
                                        v2.RandomVerticalFlip(1)]), 0),
        ("RandomRotation 10 deg", v2.RandomRotation((10, 10), **pin), 2 / 255),
        ("RandomAffine pinned", v2.RandomAffine((5, 5), translate=None, scale=(1.1, 1.1), shear=(2, 2, 3, 3), **pin),
         2 / 255),
        ("ColorJitter pinned", v2.ColorJitter((1.2, 1.2), (0.8, 0.8), (1.3, 1.3), (0.1, 0.1)), 2 / 255),
        ("RandomGrayscale p=1 + Grayscale", v2.Compose([v2.RandomGrayscale(1), v2.Grayscale(3)]), 1 / 255),
        ("GaussianBlur sigma 1", v2.GaussianBlur(5, sigma=(1.0, 1.0)), 1 / 255),
        ("RandomApply p=1", v2.RandomApply([v2.ColorJitter(brightness=(0.9, 0.9))], p=1), 1 / 255),
        ("ToTensor + Normalize", v2.Compose([v2.ToImage(), v2.ToDtype(torch.float32, scale=True),
                                             v2.Normalize([0.5] * 3, [0.2] * 3)]), 2 / 255 / 0.2),
        ("PILToTensor + ConvertImageDtype half", v2.Compose([v2.PILToTensor(), v2.ConvertImageDtype(torch.float16)]),
         1 / 255),
        ("ToTensor v1", _v1_to_tensor(), 1 / 255),
        ("Cutout", v2.Compose([*FLOAT, Cutout(8)]), 0),
        ("RandomErasing p=1", v2.Compose([*FLOAT, v2.RandomErasing(1.0, value=0.5)]), 0),
        ("AutoAugment (same seed)", v2.AutoAugment(v2.AutoAugmentPolicy.IMAGENET), 3 / 255),
        ("RandAugment (same seed)", v2.RandAugment(2, 9), 3 / 255),
        ("TrivialAugmentWide (same seed)", v2.TrivialAugmentWide(), 3 / 255),
        ("DaliFunction", transforms.DaliFunction(_resize_20), 2 / 255),
        ("ToPureTensor", v2.Compose([*FLOAT, v2.ToPureTensor()]), 1 / 255),
    ] + _timm_cases()


def _timm_cases() -> List[tuple]:
    """timm's classes (when timm is installed): its train and eval building blocks."""
    try:
        from timm.data import auto_augment
        from timm.data.random_erasing import RandomErasing
        from timm.data.transforms import MaybePILToTensor, MaybeToTensor, RandomResizedCropAndInterpolation
    except ImportError:
        return []
    mean = [0.485, 0.456, 0.406]
    return [
        ("timm RandomResizedCropAndInterpolation + MaybeToTensor (same seed)",
         v2.Compose([RandomResizedCropAndInterpolation(32), MaybeToTensor()]), 2 / 255),
        ("timm MaybePILToTensor", v2.Compose([v2.CenterCrop(32), MaybePILToTensor()]), 0),
        ("timm RandomErasing const p=1", v2.Compose([*FLOAT, RandomErasing(1.0, mode="const", device="cpu")]), 0),
        ("timm RandAugment (same seed)", auto_augment.rand_augment_transform(
            "rand-m9-mstd0.5-inc1", {"img_mean": tuple(round(255 * m) for m in mean)}), 3 / 255),
        ("timm AutoAugment (same seed)", auto_augment.auto_augment_transform(
            "original", {"img_mean": tuple(round(255 * m) for m in mean)}), 3 / 255),
    ]


def _v1_to_tensor():
    from torchvision.transforms import ToTensor

    return ToTensor()


def _resize_20(images):
    from nvidia.dali import fn

    return fn.resize(images, size=[20, 20])


def build_checks(folder: str) -> List[Check]:
    """Every check, over small data written under `folder`."""
    cifar = write_cifar(os.path.join(folder, "cifar"), n_train=64, n_test=32)
    same = write_image_folder(os.path.join(folder, "same"), [(72, 56)] * 6)   # batches of one shape
    images = write_image_folder(os.path.join(folder, "images"), SIZES)
    checks = []
    for name, transform, bound in transform_cases():
        def make(variant, transform=transform):
            return dali_loader(ImageFiles(same), transform, train=True, batch_size=4, num_threads=2, seed=7,
                               device=variant)
        checks.append(Check(f"transform: {name}", make, bound))
    val = recipes.imagenet(False, 32, 40)
    for variant, bound in (("cpu-decode", 2 / 255), ("gpu", 12 / 255)):
        checks.append(Check(f"decode: ImageFolder val, {variant}", lambda v: get_imagefolder_iter_dali(
            images, 4, False, 2, transform=val, device=v), bound, variant))
    for split, bound in (("val", 2 / 255), ("train", 2 / 255)):
        checks.append(Check(f"loader: CIFAR-10 {split}", lambda v, split=split: get_cifar_iter_dali(
            split, cifar, 16, 2, seed=3, device=v), bound))
    for train, bound in ((False, 12 / 255), (True, 12 / 255)):
        checks.append(Check(f"loader: ImageNet recipe {'train' if train else 'val'}", lambda v, t=train:
                            get_imagefolder_iter_dali(images, 4, t, 2, crop=32, val_size=40, seed=3, device=v), bound))
    return checks


SIZES = [(64, 48), (50, 70), (81, 81), (96, 57), (45, 45), (70, 66)]


def write_image_folder(root: str, sizes) -> str:
    """Three classes of JPEG and PNG files of these (width, height), smooth content with edges."""
    from PIL import Image

    rng = np.random.default_rng(0)
    for k, (width, height) in enumerate(sizes):
        folder = os.path.join(root, f"class{k % 3}")
        os.makedirs(folder, exist_ok=True)
        pixels = smooth_images(1, rng, size=96)[0][:height, :width]
        Image.fromarray(pixels).save(os.path.join(folder, f"{k}.{'png' if k % 2 else 'jpg'}"), quality=90)
    return root


def compare(check: Check, against: str) -> dict:
    """Walks the two epochs together; the largest and mean |difference| on the 0..1 scale."""
    worst, total, count = 0.0, 0.0, 0
    reference, other = check.make("cpu"), check.make(check.variant if against == "gpu" else "cpu")
    for (a, labels_a), (b, labels_b) in zip(reference, other, strict=True):
        if not torch.equal(labels_a.cpu(), labels_b.cpu()):
            return dict(worst=float("inf"), mean=float("inf"), why="labels differ")
        if a.shape != b.shape:
            return dict(worst=float("inf"), mean=float("inf"), why=f"shapes {tuple(a.shape)} and {tuple(b.shape)}")
        scale = 255.0 if a.dtype == torch.uint8 else 1.0
        difference = (a.float() - b.cpu().float()).abs() / scale
        worst = max(worst, difference.max().item())
        total, count = total + difference.sum().item(), count + difference.numel()
    return dict(worst=worst, mean=total / max(count, 1), why="")


def run(against: str = "gpu", checks: Optional[List[Check]] = None) -> int:
    """Prints the table; 0 if every check is within its bound (or there is no GPU), else 1."""
    if against == "gpu" and not torch.cuda.is_available():
        print("check-gpu: no CUDA GPU on this machine (torch.cuda.is_available() is False): nothing to check. "
              "Run it where the GPU is; `--against cpu` tries the checks CPU against CPU.")
        return 0
    with tempfile.TemporaryDirectory() as folder:
        checks = checks if checks is not None else build_checks(folder)
        print(f"{'check':<48}{'variant':<12}{'bound':>9}{'max diff':>10}{'mean diff':>11}  result")
        failed = 0
        for check in checks:
            variant = check.variant if against == "gpu" else "cpu"
            try:
                found = compare(check, against)
            except Exception as error:   # a graph that does not build or run on the GPU is a failure too
                found = dict(worst=float("inf"), mean=float("inf"), why=f"{type(error).__name__}: {error}"[:200])
            ok = found["worst"] <= check.bound + 1e-6
            failed += not ok
            print(f"{check.name:<48}{variant:<12}{check.bound:>9.4f}{found['worst']:>10.4f}{found['mean']:>11.5f}  "
                  f"{'pass' if ok else 'FAIL'} {found['why']}".rstrip())
    print(f"{len(checks) - failed} of {len(checks)} checks passed (differences on the 0..1 scale)")
    return 1 if failed else 0
