"""The Python path: a dataset's own `__getitem__` in worker processes, as DataLoader runs it.

A Dataset the library cannot read as files or arrays (a user's own, or one whose transform has
no DALI translation) still gets the loader's order, epochs, resume, sharding and batch steps:
its samples are made by DataLoader's own worker machinery (the same processes, pinning and
collation a DataLoader with these arguments would use) over the batches the loader planned.
Each epoch's workers are seeded from the epoch's seed, so an epoch is reproducible with the
same num_workers.
"""
from typing import Callable, List, Optional

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, default_collate

from ..sources.storage import worker_context


class _PlannedBatches:
    """DataLoader's batch_sampler: the batches the loader planned for the epoch in progress."""

    def __init__(self):
        self.batches: List[List[int]] = []

    def __iter__(self):
        return iter(self.batches)

    def __len__(self) -> int:
        return len(self.batches)


class PythonBatches:
    """Batches of `dataset` made by worker processes (num_workers=0: in this process)."""

    def __init__(self, dataset, *, num_workers: int, collate_fn: Optional[Callable], pin_memory: bool,
                 timeout: float, worker_init_fn, multiprocessing_context, prefetch_factor: Optional[int],
                 persistent_workers: bool, pin_memory_device: str = ""):
        self.dataset = dataset
        self._planned = _PlannedBatches()
        self._options = dict(num_workers=num_workers, collate_fn=collate_fn or default_collate,
                             pin_memory=pin_memory, timeout=timeout, worker_init_fn=worker_init_fn,
                             multiprocessing_context=multiprocessing_context, prefetch_factor=prefetch_factor,
                             persistent_workers=persistent_workers and num_workers > 0,
                             pin_memory_device=pin_memory_device)
        self._loader: Optional[DataLoader] = None

    def epoch(self, batches: List[np.ndarray], seed: int):
        """The collated batches, in order."""
        self._planned.batches = [batch.tolist() for batch in batches]
        if self._loader is None or not self._options["persistent_workers"]:
            context = worker_context(self._options["multiprocessing_context"], self._options["num_workers"])
            self._loader = DataLoader(self.dataset, batch_sampler=self._planned,
                                      generator=torch.Generator().manual_seed(seed),
                                      **{**self._options, "multiprocessing_context": context})
        return iter(self._loader)

    def close(self) -> None:
        self._loader = None   # its worker processes end with their iterator


class TransformedDataset(Dataset):
    """A dataset whose items' first element goes through `transform` (a loader's transform=
    for a dataset that has none of its own), and the label through `target_transform`."""

    def __init__(self, dataset, transform: Optional[Callable], target_transform: Optional[Callable]):
        self.dataset, self.transform, self.target_transform = dataset, transform, target_transform

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, i):
        image, label, *rest = self.dataset[i]
        if self.transform is not None:
            image = self.transform(image)
        if self.target_transform is not None:
            label = self.target_transform(label)
        return (image, label, *rest)


def placed(batch, device: Optional[torch.device], pin: bool):
    """`batch` (tensors nested in tuples, lists, dicts) on `device`, or pinned on the CPU."""
    if isinstance(batch, torch.Tensor):
        if device is not None and device.type != "cpu":
            return batch.to(device, non_blocking=True)
        return batch.pin_memory() if pin and not batch.is_pinned() else batch
    if isinstance(batch, (list, tuple)):
        moved = [placed(item, device, pin) for item in batch]
        return type(batch)(*moved) if hasattr(batch, "_fields") else type(batch)(moved)
    if isinstance(batch, dict):
        return {key: placed(value, device, pin) for key, value in batch.items()}
    return batch
