"""What ArraySource's feeder does to a whole batch, before DALI sees it.

On 32x32 images a DALI CPU operator costs about as much per sample whatever it does, and
every per-sample argument (a crop position, a flip) adds to it: for CIFAR the random crop's
two positions cost more than the crop itself. So the leading random crop of a recipe on
fixed-size arrays is cut here, for the whole batch, and so is a flip right after it (or
first); a flip after other steps gets its coins drawn here, a batch at a time, and DALI
flips by them. With the normalization plugin the gather, crop and flips are one pass of C
over the source array (ops/gather.py); without it, numpy's gather, padded copy and windows.

Every draw comes from a generator seeded by (pipeline seed, epoch, batch, stream), so a
batch is a pure function of where it stands: a pipeline restored from a DALI checkpoint
draws what the original would have.
"""
from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..ops import gather


def batch_rng(seed: int, epoch: int, iteration: int, stream: int) -> np.random.Generator:
    """The generator of one batch's draws of one kind (stream 0: crops, 1, 2, ...: coins)."""
    return np.random.default_rng([seed, epoch, iteration, stream])


class BatchCrop:
    """Pad every image by (left, top, right, bottom) pixels of `fill`, then cut a
    height x width window at an offset drawn uniformly over the padded image, as
    torchvision's RandomCrop does, for a whole batch at once."""

    def __init__(self, image_shape: Tuple[int, int, int], ltrb: Sequence[int], fill: Sequence[float],
                 height: int, width: int):
        self.image_shape, self.ltrb, self.size = tuple(image_shape), tuple(int(p) for p in ltrb), (height, width)
        self.fill = np.clip(np.round(np.asarray(fill, dtype=np.float64)), 0, 255).astype(np.uint8)
        in_h, in_w, _ = self.image_shape
        left, top, right, bottom = self.ltrb
        self.span = (in_h + top + bottom - height, in_w + left + right - width)
        if min(self.span) < 0:
            raise ValueError(f"a {height}x{width} crop does not fit in {in_h}x{in_w} images padded by {self.ltrb}")
        self._padded: Optional[np.ndarray] = None   # kept between batches: its border never changes
        self._in_c = GatherInC(self.size, self.fill)

    def __call__(self, images: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The windows of a gathered batch."""
        offsets_y, offsets_x = self._offsets(len(images), rng)
        padded = self._padded_batch(images)
        windows = self._windows(padded)
        return windows[np.arange(len(images)), offsets_y, offsets_x]   # one gather: a new array, (n, h, w, c)

    def gathered(self, images: np.ndarray, indices: np.ndarray, rng: np.random.Generator,
                 flips: Optional[np.ndarray] = None) -> np.ndarray:
        """The windows of images[indices], the same draws as __call__(images[indices], rng),
        flipped where `flips` says: in one pass of C when the plugin is here (ops/gather.py),
        else in numpy."""
        gather_windows = self._in_c.over(images)
        if gather_windows is None:
            return mirrored(self(images[indices], rng), flips)
        offsets_y, offsets_x = self._offsets(len(indices), rng)
        left, top, _, _ = self.ltrb
        return gather_windows(indices, offsets_y - top, offsets_x - left, flips)

    def _offsets(self, n: int, rng: np.random.Generator):
        """Each window's origin in the padded image: rows, then columns."""
        return rng.integers(0, self.span[0] + 1, n), rng.integers(0, self.span[1] + 1, n)

    def _padded_batch(self, images: np.ndarray) -> np.ndarray:
        """The images inside their border, in a buffer reused while batches are no larger."""
        left, top, right, bottom = self.ltrb
        n, in_h, in_w, channels = images.shape
        if self._padded is None or len(self._padded) < n:
            self._padded = np.empty((n, in_h + top + bottom, in_w + left + right, channels), np.uint8)
            self._padded[...] = self.fill
        padded = self._padded[:n]
        padded[:, top:top + in_h, left:left + in_w] = images
        return padded

    def _windows(self, padded: np.ndarray) -> np.ndarray:
        """A read-only view (n, offsets_y, offsets_x, h, w, c) of every window of every image."""
        n, _, _, channels = padded.shape
        s_n, s_y, s_x, s_c = padded.strides
        return as_strided(padded, (n, self.span[0] + 1, self.span[1] + 1, *self.size, channels),
                          (s_n, s_y, s_x, s_y, s_x, s_c), writeable=False)


class BatchSteps:
    """The numpy steps a feeder runs on each batch, and the coins it draws, as the
    translator asked for them while it built the graph."""

    def __init__(self, image_shape: Tuple[int, int, int]):
        self.image_shape = image_shape
        self.crop: Optional[BatchCrop] = None
        self.coins: List[float] = []   # the probability of each coin stream
        self.flips: List[int] = []     # the coin streams of the flips the feeder applies itself
        self._in_c = GatherInC(None, None)   # images as they are, flipped

    def add_crop(self, ltrb, fill, height: int, width: int) -> None:
        if self.crop is not None:
            raise RuntimeError("the source crops its images once")
        self.crop = BatchCrop(self.image_shape, ltrb, fill, height, width)

    def add_coin(self, p: float) -> int:
        """A new stream of per-sample coins, 1 with probability p; its index."""
        self.coins.append(float(p))
        return len(self.coins) - 1

    def add_flip(self, p: float) -> int:
        """A horizontal flip the feeder applies, after the crop: a coin stream (as add_coin)."""
        k = self.add_coin(p)
        self.flips.append(k)
        return k

    def images(self, images: np.ndarray, indices: np.ndarray, seed: int, epoch: int, iteration: int) -> np.ndarray:
        """The batch of images[indices], cut if the source crops, flipped if it flips."""
        flips = self._flips(len(indices), seed, epoch, iteration)
        if self.crop is not None:
            return self.crop.gathered(images, indices, batch_rng(seed, epoch, iteration, 0), flips)
        if flips is None:
            return images[indices]
        gather_windows = self._in_c.over(images)
        if gather_windows is None:
            return mirrored(images[indices], flips)
        return gather_windows(indices, None, None, flips)

    def _flips(self, n: int, seed: int, epoch: int, iteration: int) -> Optional[np.ndarray]:
        """Per sample, whether the feeder's flips leave it mirrored (their coins' parity)."""
        if not self.flips:
            return None
        flips = np.zeros(n, np.int32)
        for k in self.flips:
            flips ^= self.coin(k, n, seed, epoch, iteration)
        return flips

    def coin(self, k: int, n: int, seed: int, epoch: int, iteration: int) -> np.ndarray:
        """Coin stream k of the batch: n int32 values, 1 with its probability."""
        return (batch_rng(seed, epoch, iteration, 1 + k).random(n) < self.coins[k]).astype(np.int32)


def mirrored(batch: np.ndarray, flips: Optional[np.ndarray]) -> np.ndarray:
    """The batch (n, h, w, c), its samples i with flips[i] flipped horizontally, in place."""
    if flips is not None and flips.any():
        chosen = np.flatnonzero(flips)
        batch[chosen] = batch[chosen, :, ::-1]
    return batch


class GatherInC:
    """ops.gather's one-pass gather over a source's images, made on first use and kept (one
    per batch step, so it lives as long as the source's feeder)."""

    def __init__(self, size, fill):
        self.size, self.fill = size, fill
        self.gather: Optional[gather.WindowGather] = None

    def over(self, images: np.ndarray) -> Optional[Callable]:
        """The gather over `images`, or None (no plugin, or an array it cannot take): the
        caller then does it in numpy."""
        if not gather.usable() or not images.flags.c_contiguous or images.dtype != np.uint8:
            return None
        if self.gather is None or self.gather.images is not images:
            size = self.size if self.size is not None else images.shape[1:3]
            fill = self.fill if self.fill is not None else np.zeros(images.shape[3])
            self.gather = gather.WindowGather(images, size, fill)
        return self.gather
