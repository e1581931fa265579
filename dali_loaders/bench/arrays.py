"""The bench's contenders for datasets held in memory (CIFAR-10, MNIST), beside the loaders:

- TorchBatched: what torch does fastest with the same recipe: uint8 tensors in memory,
  each batch gathered by index and handed whole to the recipe's v2 transforms (one call
  per batch, so one crop offset and one flip per batch, not per image), no workers;
- CifarBaseline: the baseline DALI loader of CIFAR-10 train, as the library's original
  loader did it before recipes became torchvision transforms: crop origins and flips drawn
  in numpy for the whole batch, the batch zero-padded in numpy, one crop_mirror_normalize
  with per-sample crop and flip arguments. The DALI loader's speed over this one is the
  regression check;
- Bandwidth: the physical limit, a numpy copy that reads the batch's uint8 pixels and
  writes them as float32 (CIFAR: 3 KB read and 12 KB written per image), nothing else.
Each runs over the split in a seeded order, a fresh order per pass, as the loaders do.
"""
from typing import Optional

import numpy as np

from .runs import exact_runs

PAD = 4   # CIFAR's RandomCrop(32, padding=4)


def _orders(n: int, shuffle: bool):
    epoch = 0
    while True:
        yield np.random.default_rng(epoch).permutation(n) if shuffle else np.arange(n)
        epoch += 1


class TorchBatched:
    """The recipe's v2 transforms on whole uint8 NCHW batches; `batch_transform` after it."""

    def __init__(self, source, transform, batch_size: int, shuffle: bool, batch_transform=None,
                 threads: Optional[int] = None):
        import torch

        self.images = torch.from_numpy(np.ascontiguousarray(source.images.transpose(0, 3, 1, 2)))
        self.labels = torch.from_numpy(source.labels)
        self.transform, self.batch_transform, self.batch_size = transform, batch_transform, batch_size
        self.orders = _orders(len(self.labels), shuffle)
        self.threads = threads   # torch's intra-op threads during a pass (None: as they are)

    def __iter__(self):
        import torch

        before = torch.get_num_threads()
        if self.threads:
            torch.set_num_threads(self.threads)
        try:
            order = torch.from_numpy(next(self.orders))
            for start in range(0, len(order), self.batch_size):
                index = order[start:start + self.batch_size]
                images, labels = self.transform(self.images[index]), self.labels[index]
                if self.batch_transform is not None:
                    images, labels = self.batch_transform(images, labels)
                yield images, labels
        finally:
            torch.set_num_threads(before)


class CifarBaseline:
    """The original CIFAR-10 train pipeline, rebuilt (see the module's docstring); a fresh
    pipeline per pass, run exactly as many times as the pass has batches."""

    def __init__(self, source, batch_size: int, threads: int, mean, std):
        self.source, self.batch_size, self.threads = source, batch_size, threads
        self.mean, self.std = [255 * m for m in mean], [255 * s for s in std]
        self.orders, self.passes = _orders(len(source), True), 0

    def _feeder(self, order: np.ndarray, seed: int):
        images, labels, size = self.source.images, self.source.labels, self.batch_size

        def feed(info):
            indices = order[info.iteration * size:(info.iteration + 1) * size]
            if len(indices) == 0:
                raise StopIteration
            padded = np.zeros((len(indices), 32 + 2 * PAD, 32 + 2 * PAD, 3), np.uint8)
            padded[:, PAD:PAD + 32, PAD:PAD + 32] = images[indices]
            rng = np.random.default_rng([seed, info.iteration])
            origins = (rng.integers(0, 2 * PAD + 1, (2, len(indices))) / (2 * PAD)).astype(np.float32)
            flips = (rng.random(len(indices)) < 0.5).astype(np.int32)
            return padded, labels[indices], origins[0], origins[1], flips
        return feed

    def _pipeline(self, order: np.ndarray, seed: int):
        from nvidia.dali import fn, pipeline_def, types

        @pipeline_def(batch_size=self.batch_size, num_threads=self.threads, device_id=None, seed=seed)
        def baseline():
            images, labels, crop_y, crop_x, mirror = fn.external_source(
                source=self._feeder(order, seed), num_outputs=5, batch=True, batch_info=True,
                layout=["HWC", "", "", "", ""], dtype=[types.UINT8, types.INT64, types.FLOAT, types.FLOAT, types.INT32])
            images = fn.crop_mirror_normalize(images, crop=(32, 32), crop_pos_x=crop_x, crop_pos_y=crop_y,
                                              mirror=mirror, dtype=types.FLOAT, output_layout="CHW",
                                              mean=self.mean, std=self.std)
            return images, labels
        pipeline = baseline()
        pipeline.build()
        return pipeline

    def __iter__(self):
        import torch


        order = next(self.orders)
        self.passes += 1
        pipeline = self._pipeline(order, self.passes)
        for images, labels in exact_runs(pipeline, -(-len(order) // self.batch_size)):
            yield torch.from_numpy(np.array(images.as_tensor())), torch.from_numpy(np.array(labels.as_tensor()))


class Bandwidth:
    """The physical limit of an in-memory dataset's batch: read its uint8 pixels, write them
    as float32, one numpy copy; consecutive slices of the images, and the writes go round
    buffers larger than the caches, so both ends touch memory."""

    ROTATE = 8

    def __init__(self, source, batch_size: int):
        self.images, self.labels, self.batch_size = source.images, source.labels, batch_size
        self.out = [np.empty((batch_size,) + source.images.shape[1:], np.float32) for _ in range(self.ROTATE)]

    def __iter__(self):
        for k, start in enumerate(range(0, len(self.labels), self.batch_size)):
            pixels = self.images[start:start + self.batch_size]
            out = self.out[k % self.ROTATE][:len(pixels)]
            np.copyto(out, pixels, casting="unsafe")
            yield out, self.labels[start:start + self.batch_size]
