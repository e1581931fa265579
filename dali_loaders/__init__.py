"""Fast, correct DataLoader replacements for vision datasets on NVIDIA DALI.

`get_<dataset>_iter_dali` returns a DataLoader look-alike running on DALI; its twin
`get_<dataset>_iter_torch` runs the same recipe with torchvision. See docs/architecture.md
for the packages."""
from .datasets.cifar import get_cifar_iter_dali, get_cifar_iter_torch
from .datasets.flowers102 import get_flowers102_iter_dali, get_flowers102_iter_torch
from .datasets.food101 import get_food101_iter_dali, get_food101_iter_torch
from .datasets.imagenet import (
                                get_imagefolder_iter_dali,
                                get_imagefolder_iter_torch,
                                get_imagenet_iter_dali,
                                get_imagenet_iter_torch,
)
from .datasets.labelled_files import get_files_iter_dali, get_files_iter_torch
from .datasets.mnist import (
                                get_emnist_iter_dali,
                                get_emnist_iter_torch,
                                get_fashion_mnist_iter_dali,
                                get_fashion_mnist_iter_torch,
                                get_kmnist_iter_dali,
                                get_kmnist_iter_torch,
                                get_mnist_iter_dali,
                                get_mnist_iter_torch,
)
from .datasets.oxford_pet import get_oxford_pet_iter_dali, get_oxford_pet_iter_torch
from .datasets.stl10 import get_stl10_iter_dali, get_stl10_iter_torch
from .datasets.svhn import get_svhn_iter_dali, get_svhn_iter_torch
from .datasets.tiny_imagenet import (
                                get_tiny_imagenet_iter_dali,
                                get_tiny_imagenet_iter_torch,
)
from .datasets.webdataset import get_webdataset_iter_dali, get_webdataset_iter_torch
from .loader.dali_loader import DaliLoader
from .loader.torch_loader import TorchLoader
from .sources.hf import HuggingFaceSource
from .sources.image_files import ImageDecodeError, verify_images
from .transforms import DaliFunction, PILGaussianBlur, Untranslatable, register
from .version import __version__


# The standard datasets' names, in the README's order (datasets/ has one module each).
STANDARD_DATASETS = ("mnist", "fashion_mnist", "kmnist", "emnist", "svhn", "stl10", "flowers102", "food101",
                     "oxford_pet", "tiny_imagenet")

__all__ = [
    "get_cifar_iter_dali", "get_cifar_iter_torch", "get_imagenet_iter_dali", "get_imagenet_iter_torch",
    "get_imagefolder_iter_dali", "get_imagefolder_iter_torch", "get_mnist_iter_dali", "get_mnist_iter_torch",
    "get_fashion_mnist_iter_dali", "get_fashion_mnist_iter_torch", "get_kmnist_iter_dali",
    "get_kmnist_iter_torch", "get_emnist_iter_dali", "get_emnist_iter_torch", "get_svhn_iter_dali",
    "get_svhn_iter_torch", "get_stl10_iter_dali", "get_stl10_iter_torch", "get_flowers102_iter_dali",
    "get_flowers102_iter_torch", "get_food101_iter_dali", "get_food101_iter_torch", "get_oxford_pet_iter_dali",
    "get_oxford_pet_iter_torch", "get_tiny_imagenet_iter_dali", "get_tiny_imagenet_iter_torch",
    "get_webdataset_iter_dali", "get_webdataset_iter_torch", "get_files_iter_dali", "get_files_iter_torch",
    "DaliLoader", "DaliFunction", "PILGaussianBlur", "TorchLoader", "HuggingFaceSource", "ImageDecodeError",
    "Untranslatable", "verify_images", "register", "STANDARD_DATASETS", "__version__",
]
