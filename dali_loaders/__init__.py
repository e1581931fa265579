"""Fast, correct DataLoader replacements for vision datasets on NVIDIA DALI."""
from .cifar import get_cifar_iter_dali, get_cifar_iter_torch
from .flowers102 import get_flowers102_iter_dali, get_flowers102_iter_torch
from .food101 import get_food101_iter_dali, get_food101_iter_torch
from .imagenet import (ImageDecodeError, get_imagefolder_iter_dali, get_imagefolder_iter_torch,
                       get_imagenet_iter_dali, get_imagenet_iter_torch, verify_images)
from .mnist import (get_emnist_iter_dali, get_emnist_iter_torch, get_fashion_mnist_iter_dali,
                    get_fashion_mnist_iter_torch, get_kmnist_iter_dali, get_kmnist_iter_torch,
                    get_mnist_iter_dali, get_mnist_iter_torch)
from .oxford_pet import get_oxford_pet_iter_dali, get_oxford_pet_iter_torch
from .stl10 import get_stl10_iter_dali, get_stl10_iter_torch
from .svhn import get_svhn_iter_dali, get_svhn_iter_torch
from .tiny_imagenet import get_tiny_imagenet_iter_dali, get_tiny_imagenet_iter_torch
from .webdataset import get_webdataset_iter_dali, get_webdataset_iter_torch

__all__ = ["get_cifar_iter_dali", "get_cifar_iter_torch"]
__all__ += ["get_imagenet_iter_dali", "get_imagenet_iter_torch", "get_imagefolder_iter_dali",
            "get_imagefolder_iter_torch", "verify_images", "ImageDecodeError"]
# The standard datasets (standard.py says what their factories share).
STANDARD_DATASETS = ("mnist", "fashion_mnist", "kmnist", "emnist", "svhn", "stl10", "flowers102", "food101",
                     "oxford_pet", "tiny_imagenet")
__all__ += [f"get_{name}_iter_{backend}" for name in STANDARD_DATASETS for backend in ("dali", "torch")]
__all__ += ["get_webdataset_iter_dali", "get_webdataset_iter_torch"]
__version__ = "0.1.0"
