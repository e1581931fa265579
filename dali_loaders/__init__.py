"""Fast, correct DataLoader replacements for vision datasets on NVIDIA DALI."""
from .cifar import get_cifar_iter_dali, get_cifar_iter_torch
from .imagenet import (ImageDecodeError, get_imagefolder_iter_dali, get_imagefolder_iter_torch,
                       get_imagenet_iter_dali, get_imagenet_iter_torch, verify_images)

__all__ = ["get_cifar_iter_dali", "get_cifar_iter_torch"]
__all__ += ["get_imagenet_iter_dali", "get_imagenet_iter_torch", "get_imagefolder_iter_dali",
            "get_imagefolder_iter_torch", "verify_images", "ImageDecodeError"]
__version__ = "0.1.0"
