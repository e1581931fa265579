"""An array source's batch in one pass of C (csrc/normalize_kernels.cc, through ctypes): the
images picked by index, each cut to its window (padding where the window leaves the image).
What numpy does in three passes (gather, pad, window), in one, without the padded copy. Available when the normalization plugin is (ops/plugin.py)."""
import ctypes
from typing import Optional

import numpy as np

_function = None


def usable() -> bool:
    """Whether the compiled function is here (the plugin built and loaded, not turned off)."""
    from . import plugin

    return plugin.normalize_available() and _load() is not None


def _load():
    global _function
    if _function is None:
        from . import plugin

        path = plugin.loaded_path(plugin.NORMALIZE)
        if path is None:
            return None
        function = ctypes.CDLL(path).dali_loaders_gather_windows
        pointer, i32, i64 = ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64
        function.argtypes = [pointer, i64, i32, i32, i32, pointer, i32, pointer, pointer, i32, i32, pointer,
                             pointer]
        function.restype = ctypes.c_int
        _function = function
    return _function


def _address(array: Optional[np.ndarray]):
    return None if array is None else array.ctypes.data


def gather_windows(images: np.ndarray, indices: np.ndarray, tops: Optional[np.ndarray], lefts: Optional[np.ndarray],
                   size, fill: np.ndarray) -> np.ndarray:
    """(n, size[0], size[1], c) uint8: images[indices[i]] cut at (tops[i], lefts[i]) (image
    coordinates; None: 0); outside the image, `fill` per channel."""
    count, h, w, c = images.shape
    if images.dtype != np.uint8 or not images.flags.c_contiguous:
        raise ValueError("gather_windows takes a C-contiguous uint8 (N, H, W, C) array")
    indices = np.ascontiguousarray(indices, dtype=np.int64)
    n = len(indices)
    tops, lefts = (None if v is None else np.ascontiguousarray(v, dtype=np.int32) for v in (tops, lefts))
    for name, values in (("tops", tops), ("lefts", lefts)):
        if values is not None and len(values) != n:
            raise ValueError(f"gather_windows: {name} has {len(values)} values for {n} indices")
    fill = np.ascontiguousarray(fill, dtype=np.uint8)
    if fill.shape != (c,):
        raise ValueError(f"gather_windows: fill must have one value per channel ({c}), got {fill.shape}")
    out = np.empty((n, int(size[0]), int(size[1]), c), np.uint8)
    failed = _load()(images.ctypes.data, count, h, w, c, indices.ctypes.data, n, _address(tops), _address(lefts),
                     out.shape[1], out.shape[2], fill.ctypes.data, out.ctypes.data)
    if failed:
        raise IndexError(f"gather_windows: index {indices[failed - 1]} of sample {failed - 1} is outside the "
                         f"{count} images")
    return out
