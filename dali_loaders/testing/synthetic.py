"""Small datasets in the real on-disk formats, made locally (nothing is downloaded)."""
import os
import pickle

import numpy as np

from ..datasets.cifar import LAYOUT

# The archives' label-name files, which torchvision's CIFAR10/CIFAR100 read on opening.
META = {"cifar10": ("batches.meta", {"label_names": [f"class_{i}" for i in range(10)], "num_vis": 3072}),
        "cifar100": ("meta", {"fine_label_names": [f"fine_{i}" for i in range(100)],
                              "coarse_label_names": [f"coarse_{i}" for i in range(20)]})}


def smooth_images(n: int, rng: np.random.Generator, size: int = 32) -> np.ndarray:
    """(n, size, size, 3) uint8 images with some structure: blurred noise plus a gradient."""
    coarse = rng.integers(0, 256, (n, 4, 4, 3)).astype(np.float32)
    images = coarse.repeat(size // 4, axis=1).repeat(size // 4, axis=2)
    ramp = np.linspace(-40, 40, size, dtype=np.float32)[None, :, None, None]
    noise = rng.normal(0, 12, images.shape).astype(np.float32)
    return np.clip(images + ramp + noise, 0, 255).astype(np.uint8)


def write_cifar(root: str, dataset: str = "cifar10", n_train: int = 100, n_test: int = 50,
                images=None, seed: int = 0) -> str:
    """Writes `dataset` under root/<folder>/ as the original archive's python pickles (the
    batches and the label-name file, so torchvision's own class opens it) and returns root. `images(n, offset)` may give the (n, 32, 32, 3) uint8 pixels of images
    offset .. offset+n-1 (train first, then test); labels are index % classes."""
    rng = np.random.default_rng(seed)
    folder, train_files, test_files = LAYOUT[dataset]
    os.makedirs(os.path.join(root, folder), exist_ok=True)
    offset = 0
    for files, total in ((train_files, n_train), (test_files, n_test)):
        for name, n in zip(files, np.diff(np.linspace(0, total, len(files) + 1).astype(int))):
            pixels = images(n, offset) if images else smooth_images(n, rng)
            index = np.arange(offset, offset + n)
            entry = {"batch_label": name, "data": pixels.transpose(0, 3, 1, 2).reshape(n, 3072),
                     "filenames": [f"img_{i}.png" for i in index]}
            if dataset == "cifar10":
                entry["labels"] = (index % 10).tolist()
            else:
                entry["fine_labels"], entry["coarse_labels"] = (index % 100).tolist(), (index % 20).tolist()
            with open(os.path.join(root, folder, name), "wb") as f:
                pickle.dump(entry, f, protocol=2)
            offset += n
    meta_name, meta = META[dataset]
    with open(os.path.join(root, folder, meta_name), "wb") as f:
        pickle.dump(meta, f, protocol=2)
    return root
