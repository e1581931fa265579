"""The loaders themselves: DaliLoader (DataLoader's shape, DALI's batches), the torchvision twin
TorchLoader, and what they are made of (orders, the pipeline, the Python path)."""
from ._dali import lean_api_checks
from .build import serialized_gpu_graph
from .checks import check_count
from .dali_loader import DaliLoader
from .resolve import PythonPathNote
from .shortcuts import dali_loader, torch_loader
from .torch_loader import TorchLoader

__all__ = ["DaliLoader", "PythonPathNote", "TorchLoader", "check_count", "dali_loader", "lean_api_checks",
           "serialized_gpu_graph", "torch_loader"]
