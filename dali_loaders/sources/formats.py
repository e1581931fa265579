"""Readers of the container formats datasets ship in: MATLAB .mat files (SVHN, Flowers-102)."""


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
