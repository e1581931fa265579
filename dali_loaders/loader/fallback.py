"""No DALI on this platform: the torchvision twin instead."""
import warnings
from typing import Callable


def dali_available() -> bool:
    try:
        import nvidia.dali  # noqa: F401
        from nvidia.dali.plugin import pytorch  # noqa: F401
    except ImportError:
        return False
    return True


_warned_fallback = False
INSTALL_DALI = ('`pip install "dali_loaders[cuda12]"` (CUDA 13: `[cuda13]`), or `pip install nvidia-dali-cuda120` '
                '(`nvidia-dali-cuda130`); Linux x86_64 and aarch64 only')


def warn_fallback(fallback: bool) -> None:
    """No DALI on this platform: a warning (once) that the twin serves instead, or ImportError."""
    global _warned_fallback
    if not fallback:
        raise ImportError(f"NVIDIA DALI is not installed: {INSTALL_DALI} (or pass fallback=True to get "
                          f"the torchvision loader instead)")
    if not _warned_fallback:
        warnings.warn(f"NVIDIA DALI is not installed; using the torchvision loader instead ({INSTALL_DALI} "
                      f"for the fast path)", RuntimeWarning, stacklevel=4)
        _warned_fallback = True


def fall_back(fallback: bool, torch_twin: Callable, arguments: dict):
    """No DALI on this platform: the torchvision twin, with a warning (once), or ImportError."""
    warn_fallback(fallback)
    return torch_twin(**{k: v for k, v in arguments.items() if k != "fallback"})
