"""`python -m dali_loaders check-gpu`: the GPU graphs run beside the CPU ones, one table of
checks, each with its bound, and pass / fail.

Deterministic steps (random ones with their parameters pinned, so each output is determined,
and Cutout and RandomErasing, whose draws DALI makes on the CPU for both) are compared pixel
for pixel: each check builds the same loader twice, the CPU variant and a GPU one, with the
same seed, and walks both epochs together (`zip(strict=True)`: the same number of batches, the
same labels, whole images compared, no centre crop). Its bound is the largest difference
allowed in levels of 0..255 (a normalized output scaled back by 255 x its std): 1 where the
step moves pixels only (a JPEG decoded by nvJPEG differs from libjpeg-turbo by a level on a few
pixels), more where DALI's resampling or colour arithmetic is not PIL's. The truly random
transforms (the AutoAugment family, timm's) draw other numbers on the GPU: they, and erasing
too, are compared by distribution with torchvision's and timm's own classes
(testing/distributions.py), each with a parameter that, ignored, fails it. Checked too: the
decode variants (cpu-decode, mixed) and the CIFAR and ImageNet loaders with their default
recipes. Without a GPU it says so and exits 0. `--against cpu` runs the same checks CPU against
CPU: the machinery, tried on any machine.
"""
import dataclasses
import os
import tempfile
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np
import torch
from torchvision import transforms as v1
from torchvision.transforms import InterpolationMode as IM
from torchvision.transforms import v2

from .. import get_cifar_iter_dali, get_imagefolder_iter_dali, recipes, switches, transforms
from ..loader import build, dali_loader
from ..sources.image_files import ImageFiles
from ..transforms.cutout import Cutout
from ..transforms.pil_blur import PILGaussianBlur
from ..transforms.geometry import pil_nearest_rounds_down
from .distributions import (
    IMAGES,
    DistributionCheck,
    compare_distribution,
    distribution_checks,
    ks_bound,
    made_as,
    write_gradient_images,
)
from .synthetic import smooth_images, write_cifar

FLOAT = [v2.ToImage(), v2.ToDtype(torch.float32, scale=True)]


@dataclass
class Check:
    name: str
    make: Callable[[str], object]   # device variant -> a loader
    bound: float                    # the largest |GPU - CPU| allowed, in levels of 0..255 (labels: equal)
    variant: str = "gpu"
    std: Optional[Sequence[float]] = None   # a normalized output's std per channel: differences times 255 x std
    left_out: Tuple[List[int], List[int]] = ([], [])   # rows and columns not compared (see Resize nearest)


SAME_SIZE = (72, 56)   # (width, height) of the transform checks' images: batches of one shape
NEAREST = (30, 44)


def transform_cases() -> List[tuple]:
    """(name, transform, bound in levels): every translated deterministic step, each made
    deterministic where it can be (the random ones: distributions.distribution_checks)."""
    pin = dict(interpolation=IM.BILINEAR)
    return [
        ("Resize bilinear + CenterCrop", v2.Compose([v2.Resize(40), v2.CenterCrop(32)]), 2),
        ("Resize nearest (h, w)", v2.Resize(NEAREST, interpolation=IM.NEAREST), 1),
        ("Resize bicubic", v2.Resize(36, interpolation=IM.BICUBIC), 6),
        ("RandomResizedCrop whole image", v2.RandomResizedCrop(40, scale=(1, 1), ratio=(1, 1)), 2),
        ("RandomCrop padded", v2.RandomCrop(48, padding=(1, 2, 3, 4), pad_if_needed=True, fill=9), 1),
        ("Pad + flips p=1", v2.Compose([v2.Pad((1, 2), fill=(1, 2, 3)), v2.RandomHorizontalFlip(1),
                                        v2.RandomVerticalFlip(1)]), 1),
        # borders cut, flipped and joined there, one warp with numpy's border here; wider than
        # the image, numpy's reflection repeats (a PIL twin's)
        ("Pad reflect, symmetric, edge, wider than the image",
         v2.Compose([v2.Pad((80, 3, 5, 60), padding_mode="reflect"), v2.Pad((2, 130, 170, 1), padding_mode="symmetric"),
                     v2.Pad((3, 1, 0, 2), padding_mode="edge")]), 1),
        ("RandomRotation 10 deg", v2.RandomRotation((10, 10), **pin), 2),
        ("RandomRotation 10 deg, expanded canvas", v2.RandomRotation((10, 10), expand=True, **pin), 2),
        ("RandomAffine pinned", v2.RandomAffine((5, 5), translate=None, scale=(1.1, 1.1), shear=(2, 2, 3, 3), **pin),
         2),
        # the GPU's warps keep the image by a warped mask where the fill differs by channel
        ("Fills per channel, pinned: a turn, an affine",
         v2.Compose([v2.RandomRotation((10, 10), fill=(124, 16, 230), **pin),
                     v2.RandomAffine((5, 5), scale=(1.1, 1.1), fill=[1, 120, 250], **pin)]), 2),
        ("ColorJitter pinned", v2.ColorJitter((1.2, 1.2), (0.8, 0.8), (1.3, 1.3), (0.1, 0.1)), 2),
        ("RandomGrayscale p=1 + Grayscale", v2.Compose([v2.RandomGrayscale(1), v2.Grayscale(3)]), 1),
        ("Grayscale 1 + RGB + Identity", v2.Compose([v2.Grayscale(1), v2.RGB(), v2.Identity()]), 1),
        ("Random sizes pinned", v2.Compose([v2.RandomShortestSize([36], max_size=50), v2.ScaleJitter((40, 40), (0.9, 0.9)),
                                            v2.RandomResize(30, 31)]), 2),
        ("ZoomOut 1x, PhotometricDistort p=0, ChannelPermutation of grey",
         v2.Compose([v2.RandomZoomOut(side_range=(1.0, 1.0), p=1.0), v2.RandomPhotometricDistort(p=0.0),
                     v2.Grayscale(3), v2.RandomChannelPermutation()]), 1),
        # DALI's GPU kernel approximates the codec (DALI's own tests hold its mean within 5 levels
        # of OpenCV's libjpeg), the CPU's is libjpeg's; the table reports how far apart they are
        ("JPEG quality 50", v2.JPEG(50), 60),
        # the identity, solved in float64 and truncated: a level either way (tests/test_perspective.py)
        ("RandomPerspective no distortion", v2.RandomPerspective(0.0, p=1.0), 1),
        # the maps made on the CPU for both from the same field; the image sampled by our
        # operator here, by DALI's remap there
        ("ElasticTransform (same seed)", v2.ElasticTransform(alpha=40.0, sigma=4.0), 2),
        ("ElasticTransform v1, fill per channel (same seed)",
         v1.ElasticTransform(alpha=40.0, sigma=4.0, fill=[10.0, 120.0, 250.0]), 2),
        ("ElasticTransform NEAREST, fill 77 (same seed)",
         v2.ElasticTransform(alpha=40.0, sigma=4.0, interpolation=IM.NEAREST, fill=77), 2),
        ("GaussianNoise sigma 0", v2.Compose([v2.ToImage(), v2.GaussianNoise(0.1, 0.0), v2.ToDtype(torch.float32, scale=True),
                                              v2.GaussianNoise(0.05, 0.0)]), 1),
        # the CPU graph blurs in the augmentation operator, the GPU in DALI's: each within 1 of torchvision
        ("GaussianBlur sigma 1", v2.GaussianBlur(5, sigma=(1.0, 1.0)), 2),
        # PIL's blur (self-supervised repositories' classes read as PILGaussianBlur): DALI's filter on both
        ("PIL's GaussianBlur radius 1.3", PILGaussianBlur(1.3), 1),
        ("RandomApply p=1", v2.RandomApply([v2.ColorJitter(brightness=(0.9, 0.9))], p=1), 1),
        ("RandomChoice of equal steps", v2.RandomChoice([v2.RandomInvert(1), v2.RandomSolarize(0, 1)]), 1),
        ("RandomOrder of commuting steps", v2.RandomOrder([v2.RandomInvert(1), v2.RandomVerticalFlip(1)]), 1),
        ("One-operation steps p=1", v2.Compose([v2.RandomSolarize(100.5, 1), v2.RandomPosterize(5, 1),
                                                 v2.RandomAdjustSharpness(1.8, 1), v2.RandomAutocontrast(1),
                                                 v2.RandomInvert(1)]), 2),
        # DALI's equalize on the GPU (OpenCV's formula), torchvision's on the CPU
        ("RandomEqualize p=1", v2.RandomEqualize(1), 60),
        ("ToTensor + Normalize", v2.Compose([v2.ToImage(), v2.ToDtype(torch.float32, scale=True),
                                             v2.Normalize([0.5] * 3, [0.2] * 3)]), 2),
        ("PILToTensor + ConvertImageDtype half", v2.Compose([v2.PILToTensor(), v2.ConvertImageDtype(torch.float16)]),
         1),
        ("ToTensor v1", _v1_to_tensor(), 1),
        ("Cutout (same seed)", v2.Compose([*FLOAT, Cutout(8)]), 1),
        # the box drawn on the CPU for both, from the same draws (DaliLoadersErase here,
        # DaliLoadersEraseBox + fn.erase there, where the plugin is built)
        ("RandomErasing (same seed)", v2.Compose([*FLOAT, v2.RandomErasing(p=0.7, value=0.5)]), 1),
        ("DaliFunction", transforms.DaliFunction(_resize_20), 2),
        ("ToPureTensor", v2.Compose([*FLOAT, v2.ToPureTensor()]), 1),
        # torch's float resize by our operator on the CPU, DALI's fn.resize in float on the GPU
        # (its border differs most on downscales); a fill of 0.5 is no uint8 level: float pixels
        ("Resize + Pad 0.5 after ToTensor, then Normalize", v2.Compose([*FLOAT, v2.Resize(36), v2.Pad(2, fill=0.5),
                                                                        v2.Normalize([0.5] * 3, [0.2] * 3)]), 12),
        # colour steps on the float image: our operator on the CPU, DALI's arithmetic (each order
        # masked) on the GPU; the order drawn on the CPU for both, from the same draws
        ("Colour steps after ToTensor, pinned",
         v2.Compose([*FLOAT, v2.ColorJitter((1.2, 1.2), (0.8, 0.8), (1.3, 1.3), (0.1, 0.1)),
                     v2.RandomApply([v2.GaussianBlur(5, sigma=(1.0, 1.0))], p=1), v2.Grayscale(3),
                     v2.Normalize([0.5] * 3, [0.2] * 3)]), 1),
        # warps of the float image: the augmentation operator's nearest turn of the uint8 data (a
        # whole level's fill), DALI's warps with a mask channel (a fill in the float image's units)
        ("Warps after ToTensor, pinned: a turn, then an affine of the normalized image",
         v2.Compose([*FLOAT, v2.RandomRotation((10, 10)), v2.Normalize([0.5] * 3, [0.2] * 3),
                     v2.RandomAffine((5, 5), scale=(1.1, 1.1), interpolation=IM.BILINEAR, fill=0.5)]), 2),
        ("ToPILImage between tensor steps", v2.Compose([v2.PILToTensor(), v2.ToPILImage(), v2.PILToTensor()]), 1),
        # one-line Lambdas read as steps: grey, its channel repeated, then to [-1, 1] (2 units a level)
        # no GPU operator: the recipe decodes and runs its steps on the CPU under device="gpu"
        ("LinearTransformation (steps on the CPU)", v2.Compose([v2.Resize((8, 8)), *FLOAT, _neighbour_average()]), 1),
        ("a plain function in the Compose (CLIP's RGB)", v2.Compose([_convert_to_rgb, v2.PILToTensor()]), 1),
        ("Lambdas: convert L, repeat, arithmetic", v2.Compose([v1.Lambda(lambda img: img.convert("L")), *FLOAT,
                                                               v1.Lambda(lambda x: x.repeat(3, 1, 1)),
                                                               v1.Lambda(lambda t: (t * 2) - 1)]), 2),
    ] + _timm_cases()


def view_cases() -> List[tuple]:
    """(name, transform, bound in levels) of the transforms whose batches are lists of views;
    each image's views are compared side by side."""
    return [
        ("two of each image, a view maker", TwoViews(v2.Compose([v2.Resize(40), v2.CenterCrop(32)]),
                                                     v2.Compose([v2.CenterCrop(40), v2.Resize((32, 32))])), 2),
        ("from shared first steps (SplitViews)",
         transforms.SplitViews(v2.Resize(40), [v2.CenterCrop(32), [v2.CenterCrop(36), v2.Resize((32, 32))]]), 2),
        ("TenCrop, flipped vertically", v2.Compose([v2.Resize(40), v2.TenCrop(32, vertical_flip=True), v2.ToImage()]),
         2),
        ("FiveCrop (v1), v2's steps after", v2.Compose([v1.FiveCrop((30, 36)), *FLOAT]), 1),
        ("TenCrop stacked by v1's Lambda, as torchvision's docs write it",
         v1.Compose([v1.Resize(40), v1.TenCrop(32),
                     v1.Lambda(lambda crops: torch.stack([v1.PILToTensor()(crop) for crop in crops]))]), 2),
    ]


def _timm_cases() -> List[tuple]:
    """timm's deterministic building blocks (when timm is installed)."""
    try:
        from timm.data.transforms import CenterCropOrPad, MaybePILToTensor, RandomCropOrPad, ResizeKeepRatio, TrimBorder
    except ImportError:
        return []
    return [("timm MaybePILToTensor", v2.Compose([v2.CenterCrop(32), MaybePILToTensor()]), 1),
            # the images are 72 x 56: the keep-ratio size pads one axis and crops the other
            ("timm TrimBorder, ResizeKeepRatio, CenterCropOrPad",
             v2.Compose([TrimBorder(2), ResizeKeepRatio(48, longest=1.0), CenterCropOrPad(44, fill=(124, 116, 104))]), 2),
            # the window drawn on the CPU for both, from the same draws
            ("timm RandomCropOrPad reflect (same seed)", RandomCropOrPad((64, 60), padding_mode="reflect"), 1)]


def _normalized_std(transform) -> Optional[Sequence[float]]:
    """The std of the Normalize step a transform ends with, if any."""
    last = transform.transforms[-1] if isinstance(transform, v2.Compose) else transform
    return list(last.std) if isinstance(last, v2.Normalize) else None


def _convert_to_rgb(image):   # CLIP's and open_clip's, read as v2.RGB
    return image.convert("RGB")


def _neighbour_average() -> v2.LinearTransformation:
    """Each value of an 8 x 8 x 3 image averaged with the next in C x H x W order."""
    side = 3 * 8 * 8
    matrix = 0.5 * (torch.eye(side) + torch.roll(torch.eye(side), 1, dims=1))
    return v2.LinearTransformation(matrix, torch.zeros(side))


def _v1_to_tensor():
    from torchvision.transforms import ToTensor

    return ToTensor()


def _resize_20(images):
    from nvidia.dali import fn

    return fn.resize(images, size=[20, 20])


def build_checks(folder: str) -> list:
    """Every check, over small data written under `folder`: the pixel checks (Check), then the
    random transforms' (DistributionCheck)."""
    cifar = write_cifar(os.path.join(folder, "cifar"), n_train=64, n_test=32)
    same = write_image_folder(os.path.join(folder, "same"), [SAME_SIZE] * 6)
    images = write_image_folder(os.path.join(folder, "images"), SIZES)
    checks, transformed = [], []
    for name, transform, bound in transform_cases():
        def make(variant, transform=transform):
            return dali_loader(ImageFiles(same), transform, train=True, batch_size=4, num_threads=2, seed=7,
                               device=variant)
        # PIL's running sum rounds some exact ties down, where a GPU graph's NEAREST breaks them up
        left_out = (pil_nearest_rounds_down(SAME_SIZE[1], NEAREST[0]), pil_nearest_rounds_down(
            SAME_SIZE[0], NEAREST[1])) if "nearest" in name else ([], [])
        checks.append(Check(f"transform: {name}", make, bound, std=_normalized_std(transform), left_out=left_out))
        transformed.append((checks[-1], transform))
    val = recipes.imagenet(False, 32, 40)
    imagenet_std = list(recipes.IMAGENET_STD)
    for variant, bound in (("cpu-decode", 2), ("gpu", 12)):
        checks.append(Check(f"decode: ImageFolder val, {variant}", lambda v: get_imagefolder_iter_dali(
            images, 4, False, 2, transform=val, device=v), bound, variant, imagenet_std))
    for split in ("val", "train"):
        checks.append(Check(f"loader: CIFAR-10 {split}", lambda v, split=split: get_cifar_iter_dali(
            split, cifar, 16, 2, seed=3, device=v), 1, std=list(recipes.CIFAR_STD["cifar10"])))
    for train in (False, True):
        checks.append(Check(f"loader: ImageNet recipe {'train' if train else 'val'}", lambda v, t=train:
                            get_imagefolder_iter_dali(images, 4, t, 2, crop=32, val_size=40, seed=3, device=v), 12,
                            std=imagenet_std))
    for name, transform, bound in view_cases():
        checks.append(Check(f"views: {name}", lambda v, t=transform: side_by_side(dali_loader(
            ImageFiles(same), t, train=True, batch_size=4, num_threads=2, seed=7, device=v)), bound))
    checks += decoded_on_gpu(transformed, ImageFiles(same))
    random_images = write_gradient_images(os.path.join(folder, "random"))
    randoms = [dataclasses.replace(check, name=f"random: {check.name}", folder=random_images)
               for check in distribution_checks()]
    return checks + randoms + decoded_on_gpu([(check, check.transform) for check in randoms],
                                             ImageFiles(random_images))


def decoded_on_gpu(checks: List[tuple], source) -> list:
    """The (check, its transform) again as "gpu-decode" graphs, for those whose steps
    device="gpu" runs on the CPU: the files decoded (and cropped) on the GPU, copied to the
    CPU for the steps (loader/build.py's STEPS_DECODE). A pixel check's bound grows by a level,
    the decoders' difference (the CPU graph decodes with libjpeg-turbo)."""
    with switches.overridden(build.STEPS_DECODE_ENV, "gpu"):
        picked = [check for check, transform in checks if build.graph_variant(
            "gpu", source, transforms.plan(transform, False)) == transforms.GPU_DECODE]
    return [dataclasses.replace(check, name=f"{check.name}, decoded on the GPU", variant=transforms.GPU_DECODE,
                                **({} if isinstance(check, DistributionCheck) else {"bound": check.bound + 1}))
            for check in picked]


SIZES = [(64, 48), (50, 70), (81, 81), (96, 57), (45, 45), (70, 66)]


class TwoViews:
    """A view maker as self-supervised repos write one: each image's views side by side in the
    batch (transforms/view_makers.py)."""

    def __init__(self, first, second):
        self.first, self.second = first, second

    def __call__(self, image):
        return [self.first(image), self.second(image)]


def side_by_side(loader):
    """A loader's batches of views as one batch, the views joined along the width."""
    for views, labels in loader:
        views = views.unbind(1) if isinstance(views, torch.Tensor) else views   # stacked: (B, views, C, H, W)
        yield torch.cat(views, dim=-1), labels


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
    """Walks the two epochs together; the largest and mean |difference| in levels of 0..255."""
    worst, total, count = 0.0, 0.0, 0
    reference = check.make("cpu")
    with made_as(check.variant if against == "gpu" else "cpu") as device:
        other = check.make(device)
    for (a, labels_a), (b, labels_b) in zip(reference, other, strict=True):
        if not torch.equal(labels_a.cpu(), labels_b.cpu()):
            return dict(worst=float("inf"), mean=float("inf"), why="labels differ")
        if a.shape != b.shape:
            return dict(worst=float("inf"), mean=float("inf"), why=f"shapes {tuple(a.shape)} and {tuple(b.shape)}")
        difference = (a.float() - b.cpu().float()).abs() * _levels_per_unit(a, check.std)
        rows, columns = check.left_out
        kept = difference[..., [r for r in range(a.shape[-2]) if r not in rows], :]
        kept = kept[..., [c for c in range(a.shape[-1]) if c not in columns]]
        worst = max(worst, kept.max().item())
        total, count = total + kept.sum().item(), count + kept.numel()
    return dict(worst=worst, mean=total / max(count, 1), why="")


def _levels_per_unit(batch: torch.Tensor, std: Optional[Sequence[float]]):
    """What one unit of a batch (N, C, H, W) is in levels: 1 for uint8, 255 for 0..1, 255 x std
    per channel for a normalized one."""
    if batch.dtype == torch.uint8:
        return 1.0
    if std is None:
        return 255.0
    return 255.0 * torch.tensor(std, dtype=torch.float32).view(1, -1, 1, 1)


def _row(check, variant: str, against: str) -> Tuple[bool, str, List[str]]:
    """(passed, the table row, lines under it) of one check."""
    if isinstance(check, DistributionCheck):
        values = IMAGES * check.epochs   # on each side: the bound is known before the loader runs
        bound = f"D <= {ks_bound(values, values):.3f}"
        try:
            found = compare_distribution(check, variant, check.folder)
            ok, shown = found["distance"] <= found["bound"], f"D {found['distance']:.3f}"
            why = f"(means: {found['ours_mean']:.3g} here, {found['reference_mean']:.3g} {_whose(check)})"
        except Exception as error:   # a graph that does not build or run on the GPU is a failure too
            ok, shown, why = False, "", f"{type(error).__name__}: {error}"[:200]
        unit = "levels" if check.tolerance >= 1 else "of the image"
        note = [f"    {check.statistic.__name__.replace('_', ' ')} within {check.tolerance:g} {unit}, "
                f"{check.epochs} draws of each image against {_whose(check)}; set: {check.parameter}"]
        return ok, _line(check.name, variant, bound, shown, "", ok, why), note
    try:
        found = compare(check, against)
    except Exception as error:
        found = dict(worst=float("inf"), mean=float("inf"), why=f"{type(error).__name__}: {error}"[:200])
    ok = found["worst"] <= check.bound + 1e-3
    left_out = "" if check.left_out == ([], []) else (f" (rows {check.left_out[0]} and columns {check.left_out[1]} "
                                                       "left out: PIL's ties rounded down)")
    bound = f"<= {check.bound:g} level{'' if check.bound == 1 else 's'}"
    return ok, _line(check.name, variant, bound, f"{found['worst']:.2f}", f"{found['mean']:.3f}", ok,
                     found["why"] + left_out), []


def _whose(check: DistributionCheck) -> str:
    return "timm's" if check.name.startswith("random: timm") else "torchvision's"


def _line(name: str, variant: str, bound: str, found: str, mean: str, ok: bool, why: str) -> str:
    return f"{name:<52}{variant:<12}{bound:>16}{found:>9}{mean:>8}  {'pass' if ok else 'FAIL'} {why}".rstrip()


def run(against: str = "gpu", checks: Optional[list] = None) -> int:
    """Prints the table; 0 if every check is within its bound (or there is no GPU), else 1."""
    if against == "gpu" and not torch.cuda.is_available():
        print("check-gpu: no CUDA GPU on this machine (torch.cuda.is_available() is False): nothing to check. "
              "Run it where the GPU is; `--against cpu` tries the checks CPU against CPU.")
        return 0
    with tempfile.TemporaryDirectory() as folder:
        checks = checks if checks is not None else build_checks(folder)
        print(f"{'check':<52}{'variant':<12}{'bound':>16}{'found':>9}{'mean':>8}  result", flush=True)
        failed = 0
        for check in checks:
            variant = check.variant if against == "gpu" else "cpu"
            ok, line, notes = _row(check, variant, against)
            failed += not ok
            print("\n".join([line] + notes), flush=True)
    print(f"{len(checks) - failed} of {len(checks)} checks passed. Pixel checks: the largest |GPU - CPU| and its "
          "mean, in levels of 0..255. Random checks: the Kolmogorov-Smirnov distance D between the loader's and "
          "the reference class's per-image statistic, each value allowed to move by the tolerance, against D's "
          "critical value at alpha = 1e-4.")
    return 1 if failed else 0
