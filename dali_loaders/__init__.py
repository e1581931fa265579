"""Fast, correct DataLoader replacements for vision datasets on NVIDIA DALI."""
from .cifar import get_cifar_iter_dali, get_cifar_iter_torch

__all__ = ["get_cifar_iter_dali", "get_cifar_iter_torch"]
__version__ = "0.1.0"
