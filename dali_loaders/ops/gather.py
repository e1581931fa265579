"""An array source's batch in one pass of C (csrc/normalize_kernels.cc, through ctypes): the
images picked by index, each cut to its window (padding where the window leaves the image)
and flipped or not. What numpy does in three passes (gather, pad, window), in one, without
the padded copy.
Available when the normalization plugin is (ops/plugin.py)."""
import ctypes
from typing import Optional, Sequence

import numpy as np


def usable() -> bool:
    """Whether the compiled function is here (the plugin built and loaded, not turned off)."""
    from . import plugin

    return plugin.normalize_available() and _function() is not None


def _function():
    from . import plugin

    pointer, i32, i64 = ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64
    return plugin.c_function(plugin.NORMALIZE, "dali_loaders_gather_windows",
                             [pointer, i64, i32, i32, i32, pointer, i32, pointer, pointer, i32, i32, pointer,
                              pointer, pointer])


class WindowGather:
    """Windows of size (height, width) of images picked by index, from a C-contiguous uint8
    (N, H, W, C) array, `fill` (one value per channel) where a window leaves its image. Checks
    what it can once, so that a batch costs one call."""

    def __init__(self, images: np.ndarray, size: Sequence[int], fill):
        if not usable():
            raise RuntimeError("WindowGather needs the normalization plugin (ops/plugin.py), which is not "
                               "available here: gather with numpy instead")
        if images.dtype != np.uint8 or images.ndim != 4 or not images.flags.c_contiguous:
            raise ValueError("WindowGather takes a C-contiguous uint8 (N, H, W, C) array")
        self.images, self.size = images, (int(size[0]), int(size[1]))
        self.fill = np.ascontiguousarray(fill, dtype=np.uint8)
        if self.fill.shape != images.shape[3:]:
            raise ValueError(f"WindowGather: fill must have one value per channel ({images.shape[3]}), "
                             f"got {self.fill.shape}")
        self._fixed = (images.ctypes.data, *images.shape)

    def __call__(self, indices: np.ndarray, tops: Optional[np.ndarray], lefts: Optional[np.ndarray],
                 flips: Optional[np.ndarray] = None) -> np.ndarray:
        """(n, height, width, c): images[indices[i]] cut at (tops[i], lefts[i]) (the window's
        top-left corner in image coordinates, negative in the padding; None: 0), then flipped
        horizontally where flips[i] is nonzero (None: none)."""
        indices = np.ascontiguousarray(indices, dtype=np.int64)
        n = len(indices)
        tops, lefts = (None if v is None else np.ascontiguousarray(v, dtype=np.int64) for v in (tops, lefts))
        flips = None if flips is None else np.ascontiguousarray(flips, dtype=np.uint8)
        if any(v is not None and v.shape != (n,) for v in (tops, lefts, flips)):
            raise ValueError(f"WindowGather: tops, lefts and flips must have one value per index ({n})")
        out = np.empty((n, *self.size, self.images.shape[3]), np.uint8)
        failed = _function()(*self._fixed, indices.ctypes.data, n, None if tops is None else tops.ctypes.data,
                         None if lefts is None else lefts.ctypes.data, *self.size,
                         None if flips is None else flips.ctypes.data, self.fill.ctypes.data, out.ctypes.data)
        if failed:
            raise IndexError(f"WindowGather: index {indices[failed - 1]} of sample {failed - 1} is outside the "
                             f"{len(self.images)} images")
        return out


def gather_windows(images: np.ndarray, indices: np.ndarray, tops: Optional[np.ndarray], lefts: Optional[np.ndarray],
                   size, fill, flips: Optional[np.ndarray] = None) -> np.ndarray:
    """WindowGather(images, size, fill)(indices, tops, lefts, flips), for one batch."""
    return WindowGather(images, size, fill)(indices, tops, lefts, flips)
