"""What a batch looks like, on top of any loader (DALI's or the twin): labels looked up in a
table (sequences, with their lengths), `target_transform` on each label as torchvision
calls it, and `output="dict"`: `[{"data": images, "label": labels}]` as DALI's own
iterators give a batch, with their `reset()` and `size`, so code written for
DALIGenericIterator (and the original DataLoaders_DALI) runs unchanged.

It only reshapes what the loader yields: epochs, order, sharding, set_epoch and state_dict
are the wrapped loader's own.
"""
from typing import Callable, Optional

import numpy as np
import torch
from torch.utils.data import default_collate


class LabelTable:
    """Labels a source cannot hand DALI as one integer: the source's label is the sample's
    index, and this table holds its label, (N,) or (N, L) padded, with `lengths` (N,) when
    the labels are sequences."""

    def __init__(self, labels: np.ndarray, lengths: Optional[np.ndarray] = None):
        self.labels = torch.as_tensor(np.asarray(labels, dtype=np.int64))
        self.lengths = None if lengths is None else torch.as_tensor(np.asarray(lengths, dtype=np.int64))

    def __call__(self, index: torch.Tensor):
        rows = index.cpu().long()
        labels = self.labels[rows].to(index.device)
        return labels, (None if self.lengths is None else self.lengths[rows].to(index.device))


class ShapedLoader:
    """`loader` with each batch reshaped (see the module); everything else is `loader`'s."""

    def __init__(self, loader, *, label_table: Optional[LabelTable] = None,
                 target_transform: Optional[Callable] = None, as_dict: bool = False):
        self.loader, self.label_table, self.target_transform = loader, label_table, target_transform
        self.as_dict = as_dict

    def __getattr__(self, name):   # dataset, sampler, batch_size, set_epoch, state_dict, ...
        if name == "loader":
            raise AttributeError(name)
        return getattr(self.loader, name)

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self):
        for images, labels in self.loader:
            yield self.shape(images, labels)

    def shape(self, images: torch.Tensor, labels: torch.Tensor):
        lengths = None
        if self.label_table is not None:
            labels, lengths = self.label_table(labels)
        if self.target_transform is not None:
            labels = transform_each(self.target_transform, labels)
        if self.as_dict:
            batch = {"data": images, "label": labels.unsqueeze(1) if labels.dim() == 1 else labels}
            if lengths is not None:
                batch["label_length"] = lengths
            return [batch]
        return (images, labels) if lengths is None else (images, labels, lengths)

    # -- DALIGenericIterator's manners ------------------------------------------------------

    def reset(self) -> None:
        """A no-op: each loop over the loader is a fresh epoch already (DALI's iterators need
        reset() between epochs; code that calls it keeps working)."""

    @property
    def size(self) -> int:
        """The samples this process reads per epoch, as DALIGenericIterator's `size`."""
        return len(self.loader.sampler)

    @property
    def _size(self) -> int:   # the original DataLoaders_DALI read this private name
        return self.size


def transform_each(target_transform: Callable, labels: torch.Tensor):
    """target_transform called on each label as torchvision's datasets call it (an int, or a
    list of ints for a sequence), the results collated as DataLoader collates them."""
    device = labels.device
    collated = default_collate([target_transform(label) for label in labels.cpu().tolist()])
    return collated.to(device) if isinstance(collated, torch.Tensor) else collated
