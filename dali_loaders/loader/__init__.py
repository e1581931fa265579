"""The loaders themselves: the DataLoader look-alike over DALI, the torchvision twin, who reads
which samples (sharding and seeds), and the factories that build either from a source."""
from ..dali_compat import lean_api_checks
from .build import dali_loader, serialized_gpu_graph
from .checks import check_count
from .dali_loader import DaliLoader
from .torch_loader import SourceDataset, TorchLoader, torch_loader

__all__ = ["DaliLoader", "SourceDataset", "TorchLoader", "check_count", "dali_loader", "lean_api_checks",
           "serialized_gpu_graph", "torch_loader"]
