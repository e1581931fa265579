"""Readers of the container formats datasets ship in: MATLAB .mat files (SVHN, Flowers-102),
pickles of numpy arrays (CIFAR), read so that nothing in a file can run."""
import pickle


def read_mat(path: str, keys) -> dict:
    """The named arrays of a MATLAB file; ValueError naming the file if it cannot be read or
    lacks one. (scipy.io.loadmat, as torchvision uses.)"""
    from scipy.io import loadmat

    try:
        content = loadmat(path)
    except Exception as e:  # scipy raises ValueError, MatReadError, OSError, ... on bad files
        raise ValueError(f"{path!r} is not a readable MATLAB file ({type(e).__name__}: {e}); "
                         f"re-download it") from None
    missing = [k for k in keys if k not in content]
    if missing:
        raise ValueError(f"{path!r} lacks the variable(s) {missing} (it has "
                         f"{sorted(k for k in content if not k.startswith('__'))}); re-download it")
    return content


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
