"""The Python face of DaliLoadersLinear (csrc/linear_op.cc, in the augmentation library):
LinearTransformation's product on the CPU. The mean and the matrix reach the operator as a
file in the library's cache, named by their contents and written once: a matrix for 32 x 32
images is 36 MiB, which as an operator argument took seconds and gigabytes to build."""
import hashlib
import os
import tempfile

import numpy as np

from .elastic import usable  # noqa: F401  (the operator is in the augmentation library, as elastic's)


def matrix_file(matrix: np.ndarray, mean: np.ndarray) -> str:
    """The file holding `mean` then `matrix` as raw float32, in the cache (written if new)."""
    from . import plugin

    data = np.ascontiguousarray(mean, dtype="<f4").tobytes() + np.ascontiguousarray(matrix, dtype="<f4").tobytes()
    folder = os.path.join(plugin.cache_root(), "matrices")
    path = os.path.join(folder, hashlib.sha256(data).hexdigest()[:32] + ".f32")
    if not (os.path.exists(path) and os.path.getsize(path) == len(data)):
        os.makedirs(folder, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=folder, suffix=".part")
        try:
            with os.fdopen(handle, "wb") as f:
                f.write(data)
            os.replace(temporary, path)   # whole or absent, for a loader reading it in another process
        except BaseException:
            if os.path.exists(temporary):
                os.remove(temporary)
            raise
    return path


def linear(data, matrix: np.ndarray, mean: np.ndarray):
    """fn.dali_loaders_linear: each float32 CHW or HWC image of `data` (CPU), in C x H x W
    order, less `mean`, times `matrix`, as torch.mm(x - mean, matrix)."""
    from nvidia.dali import fn

    return fn.dali_loaders_linear(data, matrix_file=matrix_file(matrix, mean), size=int(matrix.shape[0]))
