"""`collate_fn=` where DALI makes the batches, and in the torchvision twin.

DataLoader hands collate_fn a list of the dataset's items and yields what it returns. DALI has
made the whole batch already, so the DALI loader hands collate_fn that batch as the same list:
one item per sample, each the image as a (C, H, W) view of the batch (no copy) and its label as
the dataset's item holds it; default_collate's torch.stack of all the images, in order, is that
batch again, without a copy (rows.py). The rule: `default_collate(items)` is the batch the
loader yields without a collate_fn, so
- a label of one integer is a Python int (torchvision's datasets hand out ints);
- a sequence label (labelled files) is its padded row, an int64 tensor (L,), followed by its
  length, an int: the items are (image, label, length);
- target_transform, when the loader applies it (a source's, or a torchvision dataset's that
  DALI reads), has been called on each label, as the dataset's `__getitem__` would.
default_collate itself, and None, are what the loader does anyway: recognised and skipped.

A collate_fn's random draws (torchvision's MixUp and CutMix draw from torch's global
generator) are seeded per batch from (seed, epoch, rank, batch index), as batch_transform's
are, and the generators put back afterwards: set_epoch and a resumed state reproduce every
batch, and the training script's own draws do not follow the loader's. It runs on one torch
thread, as in DataLoader's worker processes: torch's thread pool beside DALI's busy threads made
torchvision's MixUp/CutMix 5x slower on a 2-core machine (37 against 7 ms a CIFAR batch of 256).
Its CPU tensors come from the library's batch memory (ops/batch_memory.py): torchvision's
MixUp/CutMix make two new batches each time, which fresh pages made 20-25 ms dearer a default
ImageNet train batch.
The twin runs collate_fn as DataLoader does (in its workers, with DataLoader's seeds), on the
same items.
"""
import contextlib
from typing import Callable, Optional, Sequence, Tuple

import torch
from torch.utils.data import default_collate

from ..ops import batch_memory
from ..seeds import derived_seed
from ..sources.label_table import LabelTable, each_label
from ..transforms.python_fallback import seeded_globals
from .python_path import placed
from .rows import batch_rows

COLLATE_STREAM = 0x636F6C   # keeps collate_fn's draws apart from batch_transform's and DALI's


def user_collate(collate_fn, output: str) -> Optional[Callable]:
    """The collate_fn a loader must call, None for none or default_collate; refused with
    output="dict", whose batches are DALI's iterators' and not a collate_fn's."""
    if isinstance(collate_fn, TwinCollate):   # a TorchLoader's own, handed back (frameworks rebuild loaders so)
        collate_fn = collate_fn.collate_fn
    if collate_fn is None or collate_fn is default_collate:
        return None
    if not callable(collate_fn):
        raise TypeError(f"collate_fn must be callable on a list of samples, got {type(collate_fn).__name__}")
    if output == "dict":
        raise ValueError("collate_fn builds the batch the loop gets, and output='dict' builds DALI's iterators' "
                         "[{'data', 'label'}]: pass one of them (output='tuple' with a collate_fn)")
    return collate_fn


class SampleLabels:
    """Labels (B,) as the loader has them -> the columns of each sample's items after the image:
    (labels,) or (labels, lengths), as the module says."""

    def __init__(self, label_table: Optional[LabelTable], target_transform: Optional[Callable]):
        self.label_table, self.target_transform = label_table, target_transform

    @property
    def changes_labels(self) -> bool:
        return self.label_table is not None or self.target_transform is not None

    def __call__(self, labels: torch.Tensor) -> Tuple[Sequence, ...]:
        lengths = None
        if self.label_table is not None:
            labels, lengths = self.label_table(labels)
        if self.target_transform is not None:
            values = [self.target_transform(label) for label in each_label(labels, self.label_table)]
        elif lengths is not None or labels.dim() > 1:
            values = labels.unbind(0)   # rows: default_collate stacks them to (B, L)
        else:
            values = each_label(labels, self.label_table)
        return (values,) if lengths is None else (values, lengths.cpu().tolist())


class DaliCollate:
    """(images, labels, epoch, batch index) -> collate_fn(the batch's items), its draws seeded
    as the module says; pinned where the loader pins its batches."""

    def __init__(self, collate_fn: Callable, order, labels: SampleLabels, pin: bool):
        self.collate_fn, self.order, self.labels, self.pin = collate_fn, order, labels, pin

    def __call__(self, images, labels: torch.Tensor, epoch: int, batch_index: int, extra: tuple = ()):
        """`images`: the batch, or a list of batches, one per view (a sample's image is then the
        list of its views, as DataLoader's items hold them). `extra`: what the items hold after
        the label (the samples' indices), a tensor (B,) each."""
        if isinstance(images, list):
            rows = [list(views) for views in zip(*(batch_rows(view) for view in images))]
            device = images[0].device
        else:
            rows, device = batch_rows(images), images.device
        items = list(zip(rows, *self.labels(labels), *(column.tolist() for column in extra)))
        seed = derived_seed(self.order.seed, epoch, self.order.rank, batch_index, COLLATE_STREAM)
        with seeded_globals(seed, device), one_torch_thread(), batch_memory.allocations():
            batch = self.collate_fn(items)
        return placed(batch, None, True) if self.pin else batch


@contextlib.contextmanager
def one_torch_thread():
    """torch's CPU ops on one thread meanwhile (setting it costs well under a microsecond)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class TwinCollate:
    """The twin's collate_fn: the user's on the same items as the DALI loader's (labels looked
    up and target-transformed where the twin's dataset leaves that to the loader), returning
    (the number of samples, the batch), so that the loader counts samples whatever the batch."""

    def __init__(self, collate_fn: Callable, labels: SampleLabels):
        self.collate_fn, self.labels = collate_fn, labels

    def __call__(self, items: list):
        if self.labels.changes_labels:   # what follows the label in the items (an index) stays
            columns = self.labels(torch.tensor([item[1] for item in items]))
            items = [(item[0], *looked_up, *item[2:]) for item, looked_up in zip(items, zip(*columns))]
        return len(items), self.collate_fn(items)
