"""Writes CIFAR-format python pickles, as the original archives hold them, for the tests."""
import os
import pickle

import numpy as np

from dali_loaders.cifar import LABEL_KEY, LAYOUT


def write_cifar(root, dataset="cifar10", n_train=100, n_test=50, images=None, seed=0):
    """Writes `dataset` under root/<folder>/ and returns root. `images(n, offset)` may give
    the (n, 32, 32, 3) uint8 pixels; random by default. Labels are index % classes."""
    rng = np.random.default_rng(seed)
    folder, train_files, test_files = LAYOUT[dataset]
    os.makedirs(os.path.join(root, folder), exist_ok=True)
    classes = 10 if dataset == "cifar10" else 100
    offset = 0
    for files, total in ((train_files, n_train), (test_files, n_test)):
        for name, n in zip(files, np.diff(np.linspace(0, total, len(files) + 1).astype(int))):
            pixels = images(n, offset) if images else rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8)
            index = np.arange(offset, offset + n)
            entry = {"batch_label": name, "data": pixels.transpose(0, 3, 1, 2).reshape(n, 3072),
                     "filenames": [f"img_{i}.png" for i in index]}
            if dataset == "cifar10":
                entry[LABEL_KEY["cifar10", "fine"]] = (index % classes).tolist()
            else:
                entry["fine_labels"] = (index % classes).tolist()
                entry["coarse_labels"] = (index % 20).tolist()
            with open(os.path.join(root, folder, name), "wb") as f:
                pickle.dump(entry, f, protocol=2)
            offset += n
    return root


def index_images(n, offset):
    """Every pixel of image i holds i in its (R, G, B) bytes: survives any crop and flip."""
    index = np.arange(offset, offset + n)
    rgb = np.stack([index >> 16, (index >> 8) & 255, index & 255], axis=1).astype(np.uint8)
    return np.broadcast_to(rgb[:, None, None, :], (n, 32, 32, 3)).copy()
