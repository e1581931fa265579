"""`python -m dali_loaders demo`: a small CIFAR-format set, the DALI loader beside its
torchvision twin, and a short table of parity and speed."""
import os
import time

import torch
from tqdm import tqdm

from .datasets.cifar import get_cifar_iter_dali, get_cifar_iter_torch
from .testing.synthetic import write_cifar

DEFAULT_CACHE = os.path.join(os.path.expanduser("~"), ".cache", "dali_loaders", "demo")
# What the demo's speed-up is measured against, and where docs/speed.md measured the same thing
# (its CIFAR-10 table, column "vs torchvision (PIL)"; README quotes the same figures).
BASELINE = "torchvision's DataLoader over CIFAR10 with its PIL transforms (the get_cifar_iter_torch twin)"
DOCS_FIGURES = ("docs/speed.md, the same comparison on a quiet 2-core machine with 50,000 images: train 57.1x, "
                "val 50.4x;\nagainst torch's own v2 ops on whole uint8 batches (the strongest CPU peer): "
                "train 1.82x, val 1.61x")


def _make_data(cache_dir: str, samples: int) -> str:
    root = os.path.join(cache_dir, f"cifar10-{samples}")
    if not os.path.exists(os.path.join(root, "cifar-10-batches-py", "test_batch")):
        print(f"making a CIFAR-10-format set of {samples} train / {samples // 5} val images in {root}")
        write_cifar(root, "cifar10", samples, samples // 5)
    return root


def _images_per_second(loader, label: str) -> float:
    start, n = time.perf_counter(), 0
    for _, labels in tqdm(loader, desc=label, leave=False):
        n += len(labels)
    return n / (time.perf_counter() - start)


def _warm_images_per_second(loader, label: str) -> float:
    """One untimed epoch first (DALI builds its pipeline, DataLoader starts its workers, the
    pages are cached), then a timed one: both sides are timed warm, by the same function."""
    _images_per_second(loader, f"warm-up {label}")
    return _images_per_second(loader, label)


def _val_parity(root: str):
    """Labels equal in order, and the largest pixel difference, DALI against torchvision."""
    dali, twin = get_cifar_iter_dali("val", root, 256, 2), get_cifar_iter_torch("val", root, 256, 0)
    same_labels, worst = True, 0.0
    for (x, y), (u, v) in zip(dali, twin, strict=True):
        same_labels &= torch.equal(y.cpu(), v)
        worst = max(worst, (x.cpu() - u).abs().max().item())
    return same_labels, worst


def run_demo(cache_dir=None, samples: int = 10000) -> None:
    root = _make_data(cache_dir or DEFAULT_CACHE, samples)
    workers = min(2, os.cpu_count() or 1)
    same_labels, worst = _val_parity(root)
    rows = []
    for type_ in ("train", "val"):
        dali = get_cifar_iter_dali(type_, root, 256, workers)
        twin = get_cifar_iter_torch(type_, root, 256, workers)
        fast = _warm_images_per_second(dali, f"DALI {type_}")
        slow = _warm_images_per_second(twin, f"torchvision {type_}")
        rows.append((type_, len(dali.dataset), fast, slow))
    print(f"\nCIFAR-10 format, batch 256, {workers} DALI threads / {workers} DataLoader workers; "
          f"each loader timed on its second epoch (warm)")
    print(f"speed-up: DALI against {BASELINE}")
    print(f"{'split':<6} {'samples':>8} {'DALI img/s':>11} {'torchvision img/s':>18} {'speed-up':>9}")
    for type_, n, fast, slow in rows:
        print(f"{type_:<6} {n:>8} {fast:>11,.0f} {slow:>18,.0f} {fast / slow:>8.1f}x")
    print(DOCS_FIGURES)
    print(f"val parity: labels {'identical' if same_labels else 'DIFFER'}, "
          f"max |pixel difference| {worst:.2e} (normalized units)")
