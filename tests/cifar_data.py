"""CIFAR-format test data: the package's writer, and images that carry their own index."""
import numpy as np

from dali_loaders.testing.synthetic import write_cifar  # noqa: F401  (re-exported for the tests


def index_images(n, offset):
    """Every pixel of image i holds i in its (R, G, B) bytes: survives any crop and flip."""
    index = np.arange(offset, offset + n)
    rgb = np.stack([index >> 16, (index >> 8) & 255, index & 255], axis=1).astype(np.uint8)
    return np.broadcast_to(rgb[:, None, None, :], (n, 32, 32, 3)).copy()
