"""The data the benchmark runs on when it is given none: made once, cached, reused.

CIFAR: the python pickles of CIFAR-10, written by dali_loaders.synthetic, holding random
pixels; the loaders' cost does not depend on what the pixels show.
MNIST: torchvision's MNIST/raw/ idx files of blurred random strokes.
Flowers-102: its jpg/ and .mat files, JPEGs made as the image folder's are.
Images: an ImageNet-style folder (train/<class>/, val/<class>/) of JPEGs 300 to 500 px
on the short side, smooth and textured like photographs, so that they decode at the
speed and compress to the size of real ones (random noise would do neither).
"""
import os
import shutil
from concurrent.futures import ProcessPoolExecutor

import numpy as np
from tqdm import tqdm

DONE = ".complete"  # written last: a folder without it was interrupted and is remade


def default_cache_dir() -> str:
    return os.path.join(os.path.expanduser("~"), ".cache", "dali_loaders", "bench")


def _is_complete(folder: str) -> bool:
    return os.path.isfile(os.path.join(folder, DONE))


def _start_fresh(folder: str) -> None:
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)


def _mark_complete(folder: str) -> None:
    open(os.path.join(folder, DONE), "w").close()


def make_cifar(cache_dir: str, n_train: int, n_test: int) -> str:
    """A CIFAR-10 root (holding cifar-10-batches-py/) with n_train + n_test random images."""
    from ..testing.synthetic import write_cifar

    root = os.path.join(cache_dir, f"cifar10-{n_train}-{n_test}")
    if _is_complete(root):
        return root
    _start_fresh(root)
    rng = np.random.default_rng(0)
    write_cifar(root, "cifar10", n_train, n_test,
                images=lambda n, offset: rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8))
    _mark_complete(root)
    return root


def photo_like(seed: int, height: int, width: int) -> np.ndarray:
    """An RGB uint8 image with a photograph's mix of smooth regions, edges and grain."""
    from PIL import Image, ImageFilter

    rng = np.random.default_rng(seed)
    coarse = rng.integers(0, 256, (rng.integers(3, 9), rng.integers(3, 9), 3), dtype=np.uint8)
    base = Image.fromarray(coarse).resize((width, height), Image.BICUBIC)
    detail = rng.integers(0, 256, (height // 4, width // 4, 3), dtype=np.uint8)
    detail = Image.fromarray(detail).resize((width, height), Image.NEAREST).filter(ImageFilter.GaussianBlur(1))
    image = 0.7 * np.asarray(base, np.float32) + 0.3 * np.asarray(detail, np.float32)
    image += rng.normal(0, 8, image.shape)  # sensor grain
    return np.clip(image, 0, 255).astype(np.uint8)


def _write_jpeg(job) -> None:
    from PIL import Image

    path, seed, short_side = job
    rng = np.random.default_rng(seed)
    long_side = int(short_side * rng.uniform(1.0, 1.5))
    height, width = (short_side, long_side) if rng.random() < 0.75 else (long_side, short_side)
    Image.fromarray(photo_like(seed, height, width)).save(path, quality=90)


def _jpeg_jobs(root: str, counts: dict, classes: int, short_sides) -> list:
    jobs, seed = [], 0
    rng = np.random.default_rng(1)
    for split, n in counts.items():
        for c in range(classes):
            os.makedirs(os.path.join(root, split, f"class_{c:03d}"), exist_ok=True)
        for i in range(n):
            path = os.path.join(root, split, f"class_{i % classes:03d}", f"{split}_{i:06d}.JPEG")
            jobs.append((path, seed, int(rng.integers(short_sides[0], short_sides[1] + 1))))
            seed += 1
    return jobs


def make_image_folder(cache_dir: str, n_train: int, n_val: int, classes: int = 10,
                      short_sides=(300, 500), workers: int = None) -> str:
    """An ImageNet-style root (train/<class>/*.JPEG, val/<class>/*.JPEG); made in parallel."""
    root = os.path.join(cache_dir, f"images-{n_train}-{n_val}-{classes}-{short_sides[0]}-{short_sides[1]}")
    if _is_complete(root):
        return root
    _start_fresh(root)
    jobs = _jpeg_jobs(root, {"train": n_train, "val": n_val}, classes, short_sides)
    with ProcessPoolExecutor(workers or os.cpu_count()) as pool:
        for _ in tqdm(pool.map(_write_jpeg, jobs, chunksize=16), total=len(jobs),
                      desc="making JPEGs", unit="image", leave=False):
            pass
    _mark_complete(root)
    return root


def make_mnist(cache_dir: str, n_train: int, n_test: int) -> str:
    """An MNIST root (MNIST/raw/ with the plain idx files torchvision reads) of n_train +
    n_test 28x28 grey images: blurred strokes on black, labels cycling 0..9."""
    root = os.path.join(cache_dir, f"mnist-{n_train}-{n_test}")
    if _is_complete(root):
        return root
    _start_fresh(root)
    raw = os.path.join(root, "MNIST", "raw")
    os.makedirs(raw)
    rng = np.random.default_rng(0)
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        coarse = (rng.random((n, 7, 7)) < 0.3) * 255.0
        images = np.clip(coarse.repeat(4, axis=1).repeat(4, axis=2) + rng.normal(0, 20, (n, 28, 28)), 0, 255)
        _write_idx(os.path.join(raw, f"{prefix}-images-idx3-ubyte"), images.astype(np.uint8))
        _write_idx(os.path.join(raw, f"{prefix}-labels-idx1-ubyte"), (np.arange(n) % 10).astype(np.uint8))
    _mark_complete(root)
    return root


def _write_idx(path: str, array: np.ndarray) -> None:
    with open(path, "wb") as f:
        f.write(bytes([0, 0, 0x08, array.ndim]) + np.array(array.shape, dtype=">u4").tobytes() + array.tobytes())


def make_flowers(cache_dir: str, n_train: int, n_val: int, classes: int = 102, short_sides=(500, 500),
                 workers: int = None) -> str:
    """A Flowers-102 root (flowers-102/ with jpg/, imagelabels.mat, setid.mat): photo-like
    JPEGs 500 px on the short side, as the real set's are; train first, then val, then a
    test split of one image (the loaders need all three keys)."""
    from scipy.io import savemat

    root = os.path.join(cache_dir, f"flowers-{n_train}-{n_val}-{short_sides[0]}-{short_sides[1]}")
    if _is_complete(root):
        return root
    _start_fresh(root)
    base = os.path.join(root, "flowers-102")
    os.makedirs(os.path.join(base, "jpg"))
    n = n_train + n_val + 1
    rng = np.random.default_rng(2)
    jobs = [(os.path.join(base, "jpg", f"image_{k:05d}.jpg"), 10 ** 6 + k,
             int(rng.integers(short_sides[0], short_sides[1] + 1))) for k in range(1, n + 1)]
    with ProcessPoolExecutor(workers or os.cpu_count()) as pool:
        for _ in tqdm(pool.map(_write_jpeg, jobs, chunksize=16), total=len(jobs),
                      desc="making JPEGs", unit="image", leave=False):
            pass
    savemat(os.path.join(base, "imagelabels.mat"), {"labels": (np.arange(n) % classes + 1)[None, :]})
    ids = np.arange(1, n + 1)
    savemat(os.path.join(base, "setid.mat"), {"trnid": ids[None, :n_train], "valid": ids[None, n_train:n - 1],
                                              "tstid": ids[None, n - 1:]})
    _mark_complete(root)
    return root
