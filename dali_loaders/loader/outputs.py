"""What a batch looks like, for both loaders (DALI's or the twin): labels looked up in a
table (sequences, with their lengths), `target_transform` on each label as torchvision
calls it, and `output="dict"`: `[{"data": images, "label": labels}]` as DALI's own
iterators give a batch, with their `reset()` and `size`, so code written for
DALIGenericIterator (and the original DataLoaders_DALI) runs unchanged.

It only reshapes what the loader yields: epochs, order, sharding, set_epoch and state_dict
are the loader's own.
"""
from typing import Callable, Optional

import torch
from torch.utils.data import default_collate

from ..sources.label_table import LabelTable, each_label


class BatchShape:
    """What a batch (images, labels) becomes (see the module): labels from the table, then
    target_transform on each, then the dict of DALI's iterators if asked."""

    def __init__(self, *, label_table: Optional[LabelTable] = None, target_transform: Optional[Callable] = None,
                 as_dict: bool = False):
        self.label_table, self.target_transform, self.as_dict = label_table, target_transform, as_dict

    @classmethod
    def needed(cls, label_table, target_transform, as_dict: bool) -> Optional["BatchShape"]:
        """A BatchShape, or None where batches stay (images, labels) as they are."""
        if label_table is None and target_transform is None and not as_dict:
            return None
        return cls(label_table=label_table, target_transform=target_transform, as_dict=as_dict)

    def __call__(self, images: torch.Tensor, labels: torch.Tensor, *indices):
        """`indices`: the samples' indices, where the dataset's items carry them after the label."""
        lengths = None
        if self.label_table is not None:
            labels, lengths = self.label_table(labels)
        if self.target_transform is not None:
            labels = transform_each(self.target_transform, labels, self.label_table)
        if self.as_dict:
            batch = {"data": images, "label": labels.unsqueeze(1) if labels.dim() == 1 else labels}
            if lengths is not None:
                batch["label_length"] = lengths
            if indices:
                batch["index"] = indices[0]
            return [batch]
        return (images, labels, *indices) if lengths is None else (images, labels, lengths, *indices)


def transform_each(target_transform: Callable, labels: torch.Tensor, table: Optional[LabelTable] = None):
    """target_transform called on each label as the dataset calls it (an int, a list of ints for
    a sequence, or a tensor where `table` says so), the results collated as DataLoader does."""
    device = labels.device
    # a tuple, as DataLoader's collate hands each field over (strings come back as that tuple)
    collated = default_collate(tuple(target_transform(label) for label in each_label(labels, table)))
    return collated.to(device) if isinstance(collated, torch.Tensor) else collated


def mixed(batch_transform: Callable, batch, epoch: int, batch_index: int):
    """batch_transform on a batch's images and labels; what follows them in the batch (the
    samples' indices) stays as it is."""
    if isinstance(batch, (tuple, list)) and len(batch) > 2:
        return (*batch_transform(batch[0], batch[1], epoch, batch_index), *batch[2:])
    return batch_transform(*batch, epoch, batch_index)
