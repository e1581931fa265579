"""The images a collate_fn gets on the DALI path: the rows of the batch DALI made, as views.

DataLoader's default_collate stacks the samples' images back into a batch: torch.stack, a new
tensor and a copy of every pixel. On the DALI path the samples are rows of a batch that exists
already, so that copy would rebuild what is there: for a default ImageNet train batch (64 x 3 x
224 x 224 float32) 20 ms a batch on a 2-core machine, most of it the kernel handing out the 38
MB's fresh pages. So the first row knows its batch: `torch.stack(rows, 0)` over exactly all the
batch's rows, the very objects in their order, without `out=`, returns the batch itself, which
is what that stack would return (equal values, the same shape, dtype, device and contiguous
layout), with no copy. The batch is the loader's own memory, handed out as it is without a
collate_fn and never written again by the loader.

Everything else is plain torch: any other call involving the first row (another dim, a subset,
another order, a copy of a row, `out=` as default_collate passes in a worker process) runs as
torch runs it and returns plain tensors; the other rows are plain views. Only a contiguous
batch gets a first row that knows it: a channels_last batch restacked is a contiguous one, as
DataLoader's would be, so its rows stay plain. The difference from DataLoader that remains: the
stacked batch and the samples are the same memory, so a write into one in place shows in the
other afterwards (DataLoader's samples are apart from its batch). The batch is handed out once:
a second stack of the same rows (a collate_fn that collates twice) copies, so the two results
are apart, as DataLoader's are.
"""
import operator
from typing import List, Optional, Sequence

import torch


class FirstRow(torch.Tensor):
    """Row 0 of a contiguous batch: a tensor like the others, which in torch.stack of exactly
    the batch's rows (in order, dim 0, no `out=`) stands for the whole batch (see the module)."""

    _batch: torch.Tensor
    _rest: tuple   # rows 1.. of the batch (not row 0 itself: no reference cycle)

    @staticmethod
    def of(batch: torch.Tensor, rows: Sequence[torch.Tensor]) -> "FirstRow":
        first = rows[0].as_subclass(FirstRow)
        first._batch, first._rest = batch, tuple(rows[1:])
        return first

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.stack:
            whole = _stacked_batch(args, kwargs)
            if whole is not None:
                return whole
        elif func in AS_PLAIN:   # a copy, a pickle, a repr: of a plain tensor, without the batch
            args = (args[0].as_subclass(torch.Tensor), *args[1:])
        with torch._C.DisableTorchFunctionSubclass():   # plain torch, plain tensors out
            return func(*args, **kwargs)


# What must see row 0 as the plain tensor it looks like: a FirstRow copied or pickled would
# carry its batch along (and come back a FirstRow), and would print as one.
AS_PLAIN = (torch.Tensor.__deepcopy__, torch.Tensor.__reduce_ex__, torch.Tensor.__repr__)


def _stacked_batch(args: tuple, kwargs: dict) -> Optional[torch.Tensor]:
    """The batch, where `torch.stack(*args, **kwargs)` stacks exactly all its rows, in order,
    along dim 0, into no `out=`; else None."""
    tensors = args[0] if args else kwargs.get("tensors")
    dim = args[1] if len(args) > 1 else kwargs.get("dim", 0)
    if kwargs.get("out") is not None or not isinstance(tensors, (list, tuple)) or not tensors:
        return None
    first = tensors[0]
    if type(first) is not FirstRow or not isinstance(dim, int):
        return None
    batch, rest = first._batch, first._rest
    if batch is None or dim not in (0, -batch.dim()) or len(tensors) != len(rest) + 1 or \
            not all(map(operator.is_, rest, tensors[1:])):   # the very rows, in order
        return None
    first._batch = None   # handed out once: a second stack copies, as DataLoader's stacks are apart
    return batch


def batch_rows(batch: torch.Tensor) -> List[torch.Tensor]:
    """The batch's rows as the samples' images: views, the first a FirstRow where the batch is
    contiguous."""
    rows = list(batch.unbind(0))
    if rows and batch.is_contiguous():
        rows[0] = FirstRow.of(batch, rows)
    return rows
