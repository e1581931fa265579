"""The loaders with the factories' words: a source, its recipe, and `train` (shuffle) in one call."""
from .dali_loader import DaliLoader
from .torch_loader import TorchLoader


def dali_loader(source, transform, *, train: bool, batch_size: int, num_threads: int, **options) -> DaliLoader:
    """DaliLoader(source, batch_size, shuffle=train, num_workers=num_threads, transform=transform, ...)."""
    return DaliLoader(source, batch_size, shuffle=train, num_workers=num_threads, transform=transform, **options)


def torch_loader(dataset, *, train: bool, batch_size: int, num_workers: int, **options) -> TorchLoader:
    """TorchLoader(dataset, batch_size, shuffle=train, num_workers=num_workers, ...); workers persist."""
    options.setdefault("persistent_workers", num_workers > 0)
    return TorchLoader(dataset, batch_size=batch_size, shuffle=train, num_workers=num_workers, **options)
