"""Images in memory (CIFAR, MNIST, SVHN, STL-10), fed to DALI by external_source."""
import zlib

import numpy as np

from .. import transforms


class ArraySource:
    """Images in memory, (N, H, W, C) uint8 (C is 1 or 3), and labels (N,) int64."""

    def __init__(self, images: np.ndarray, labels: np.ndarray, name: str):
        if images.ndim == 3:
            images = images[..., None]
        self.images, self.labels, self.name = images, np.asarray(labels, dtype=np.int64), name

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def fingerprint(self) -> str:
        return f"{self.name}/{len(self)}/{zlib.crc32(self.labels.tobytes()):08x}"

    def pil_image(self, i: int):
        """Sample i as torchvision's dataset classes hand it to a transform: a PIL image."""
        from PIL import Image

        pixels = self.images[i]
        return Image.fromarray(pixels[..., 0], "L") if pixels.shape[-1] == 1 else Image.fromarray(pixels, "RGB")

    def read(self, order: np.ndarray, batch_size: int, device: str):
        """The graph's first step: batch after batch of `order`, as (Images, labels)."""
        from nvidia.dali import fn, types

        feeder = _ArrayFeeder(self, order, batch_size)
        images, labels = fn.external_source(source=feeder, num_outputs=2, batch=True, batch_info=True,
                                            layout=["HWC", ""], dtype=[types.UINT8, types.INT64])
        fed = images.gpu() if device == "gpu" else images
        _, height, width, channels = self.images.shape
        return transforms.Images(fed, height, width, channels, device, pad_source=feeder.pad, source_data=fed), labels


class _ArrayFeeder:
    """external_source callback: batch `info.iteration` of `order`, padded if the transform
    asked for it (transforms.Images.pad_at_source). A pure function of the iteration, so a
    pipeline restored from a DALI checkpoint resumes where it stopped."""

    def __init__(self, source: ArraySource, order: np.ndarray, batch_size: int):
        self.source, self.order, self.batch_size = source, order, batch_size
        self.padding, self.fill, self.mode = (0, 0, 0, 0), None, "constant"

    def pad(self, ltrb, fill, mode: str = "constant") -> None:
        """Every image fed from now on padded by (left, top, right, bottom) pixels of `fill`, or
        as numpy's (and torchvision's) padding `mode` reflect, edge or symmetric says."""
        self.padding, self.fill = tuple(int(p) for p in ltrb), np.asarray(fill, dtype=np.float64)
        self.mode = mode

    def __call__(self, info):
        indices = self.order[info.iteration * self.batch_size:(info.iteration + 1) * self.batch_size]
        if len(indices) == 0:
            raise StopIteration
        images = self.source.images[indices]
        return (self._padded(images) if any(self.padding) else images), self.source.labels[indices]

    def _padded(self, images: np.ndarray) -> np.ndarray:
        left, top, right, bottom = self.padding
        if self.mode != "constant":
            return np.pad(images, ((0, 0), (top, bottom), (left, right), (0, 0)), mode=self.mode)
        n, height, width, channels = images.shape
        padded = np.empty((n, height + top + bottom, width + left + right, channels), np.uint8)
        padded[...] = np.clip(np.round(self.fill), 0, 255).astype(np.uint8)
        padded[:, top:top + height, left:left + width] = images
        return padded
