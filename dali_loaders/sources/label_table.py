"""Labels that are not one integer per sample (a sequence of characters, a vector of attributes):
the source serves each sample's row number as its DALI label, and the loader looks the row up
here, so that order, sharding and resume stay the image loaders' own."""
from typing import Optional

import numpy as np
import torch


class LabelTable:
    """The labels, (N,) or (N, L), with `lengths` (N,) where they are padded sequences;
    `tensors`: the dataset hands each label to its target_transform and collate_fn as a tensor
    (CelebA's rows), not as an int or a list of ints."""

    def __init__(self, labels: np.ndarray, lengths: Optional[np.ndarray] = None, tensors: bool = False):
        self.labels = torch.as_tensor(np.asarray(labels, dtype=np.int64))
        self.lengths = None if lengths is None else torch.as_tensor(np.asarray(lengths, dtype=np.int64))
        self.tensors = tensors

    def __call__(self, index: torch.Tensor):
        rows = index.cpu().long()
        labels = self.labels[rows].to(index.device)
        return labels, (None if self.lengths is None else self.lengths[rows].to(index.device))

    def each(self, labels: torch.Tensor) -> list:
        """Each sample's label (rows looked up already) as the dataset hands it over."""
        return list(labels.cpu().unbind(0)) if self.tensors else labels.cpu().tolist()


def each_label(labels: torch.Tensor, table: Optional[LabelTable]) -> list:
    """Each sample's label as the dataset hands it to target_transform and collate_fn: the
    table's way where there is one (after its lookup), else ints."""
    return table.each(labels) if table is not None else labels.cpu().tolist()
