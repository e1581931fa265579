"""Readers of the container formats datasets ship in: MATLAB .mat files (SVHN, Flowers-102),
pickles of numpy arrays (CIFAR), read so that nothing in a file can run."""
import os
import pickle


def read_mat(path: str, keys) -> dict:
    """The named arrays of a MATLAB file; ValueError naming the file if it cannot be read or
    lacks one. (scipy.io.loadmat, as torchvision uses.)"""
    from scipy.io import loadmat

    try:
        check_mat_sizes(path)
        content = loadmat(path, variable_names=list(keys))
    except MemoryError:
        raise
    except Exception as e:  # scipy raises ValueError, MatReadError, OSError, ... on bad files
        if isinstance(e, ValueError) and str(e).startswith(repr(path)):
            raise
        raise ValueError(f"{path!r} is not a readable MATLAB file ({type(e).__name__}: {e}); "
                         f"re-download it") from None
    missing = [k for k in keys if k not in content]
    if missing:
        raise ValueError(f"{path!r} lacks the variable(s) {missing} (it has "
                         f"{sorted(k for k in content if not k.startswith('__'))}); re-download it")
    return content


# A compressed variable may inflate ~1000-fold; real datasets' .mat files hold at most this
# many times their size in arrays (plus the slack, for small, highly compressible label files).
MAT_EXPANSION, MAT_SLACK = 16, 1 << 20


MX_ITEMSIZE = {6: 8, 7: 4, 8: 1, 9: 1, 10: 2, 11: 2, 12: 4, 13: 4, 14: 8, 15: 8}   # MATLAB class -> bytes
MI_MATRIX, MI_COMPRESSED, MI_INT32 = 14, 15, 5


def mat_declared_bytes(path: str) -> int:
    """The bytes a MATLAB 5 file's variables declare (their dimensions times their element
    size), read from each variable's header: a compressed one is inflated only that far."""
    import zlib

    import numpy as np

    with open(path, "rb") as f:
        data = f.read()
    order = "<" if data[126:128] == b"IM" else ">"
    offset, declared = 128, 0
    while offset + 8 <= len(data):
        kind, size = np.frombuffer(data, f"{order}u4", 2, offset)
        body = data[offset + 8:offset + 8 + int(size)]
        if kind == MI_COMPRESSED:
            body = zlib.decompressobj().decompress(body, 512)[8:]   # the miMATRIX tag, then its header
        if kind in (MI_COMPRESSED, MI_MATRIX) and len(body) >= 24:
            klass = int(np.frombuffer(body, f"{order}u4", 1, 8)[0]) & 0xFF
            dims_kind, dims_size = np.frombuffer(body, f"{order}u4", 2, 16)
            if dims_kind == MI_INT32:
                dims = np.frombuffer(body, f"{order}i4", min(int(dims_size), len(body) - 24) // 4, 24)
                declared += int(np.prod(dims.astype(object))) * MX_ITEMSIZE.get(klass, 8)
        offset += 8 + int(size) + (-int(size) % 8 if kind != MI_COMPRESSED else 0)
    return declared


def check_mat_sizes(path: str) -> None:
    """Refuses, by name, a .mat file whose variables would take far more memory than the
    file's size: a compressed bomb is not inflated, a header claiming huge sides not believed."""
    declared, size = mat_declared_bytes(path), os.path.getsize(path)
    if declared > MAT_EXPANSION * size + MAT_SLACK:
        raise ValueError(f"{path!r} declares {declared} bytes of arrays in a file of {size} bytes (more than "
                         f"{MAT_EXPANSION} times its size): a decompression bomb, or not the dataset's file; "
                         f"re-download it")


# -- pickles of numpy arrays (CIFAR) ------------------------------------------------------


class NotAnArrayPickle(pickle.UnpicklingError):
    """A pickle that asks for something other than plain data and numpy arrays."""


def _latin1_encode(text, encoding="latin1", errors="strict"):
    """_codecs.encode as protocol-2 pickles use it (bytes written by Python 3), text codecs only."""
    if encoding.lower().replace("_", "-") not in ("latin1", "latin-1", "iso-8859-1"):
        raise NotAnArrayPickle(f"it encodes bytes with {encoding!r}, not latin1")
    return text.encode("latin1", errors)


class ArrayUnpickler(pickle.Unpickler):
    """An Unpickler that builds only plain data (dicts, lists, str, bytes, numbers) and numpy
    arrays and dtypes, which is all a CIFAR batch holds. Any other global (os.system, eval,
    a class with a __reduce__) is refused before it is looked up, so nothing in the file runs."""

    def find_class(self, module: str, name: str):
        import numpy as np

        allowed = {
            ("numpy.core.multiarray", "_reconstruct"): _reconstruct(),
            ("numpy._core.multiarray", "_reconstruct"): _reconstruct(),
            ("numpy", "ndarray"): np.ndarray,
            ("numpy", "dtype"): np.dtype,
            ("_codecs", "encode"): _latin1_encode,
            ("builtins", "set"): set, ("builtins", "frozenset"): frozenset,
            ("builtins", "bytearray"): bytearray,
            ("__builtin__", "set"): set, ("__builtin__", "frozenset"): frozenset,
            ("__builtin__", "bytearray"): bytearray,
        }
        if (module, name) not in allowed:
            raise NotAnArrayPickle(f"it asks for {module}.{name}")
        return allowed[module, name]


def _reconstruct():
    """numpy's array reconstructor (numpy._core in numpy 2, numpy.core before)."""
    try:
        from numpy._core.multiarray import _reconstruct as reconstruct
    except ImportError:  # numpy < 2
        from numpy.core.multiarray import _reconstruct as reconstruct
    return reconstruct


def load_array_pickle(path: str, what: str):
    """The object pickled in `path`, built by ArrayUnpickler (Python 2 strings as latin1);
    ValueError naming the file and saying it is not `what` if it is not such a pickle."""
    try:
        with open(path, "rb") as f:
            return ArrayUnpickler(f, encoding="latin1").load()
    except NotAnArrayPickle as e:
        raise ValueError(f"{path!r} is not {what}: {e}, which a data file never needs; nothing in it "
                         f"was run. Replace it with the original download") from None
    except Exception as e:  # a damaged pickle raises UnpicklingError, EOFError, ValueError, ...
        raise ValueError(f"{path!r} is not {what} ({type(e).__name__}: {e}); re-download it") from None
