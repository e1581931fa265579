"""DataLoader's own arguments, as DaliLoader and TorchLoader take them: checked with DataLoader's
rules, and turned into the loader's order (orders.py)."""
import warnings
from typing import Callable

from torch.utils.data import BatchSampler

from ..distributed import epoch_sampler
from .checks import check_count
from .orders import LibraryOrder, SamplerOrder


def check_dataloader_args(batch_size, shuffle, sampler, batch_sampler, drop_last, num_workers, timeout,
                          prefetch_factor) -> bool:
    """DataLoader's rules for its arguments, in its words where it has some; returns shuffle."""
    if batch_sampler is not None:
        if batch_size != 1 or shuffle or sampler is not None or drop_last:
            raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and "
                             "drop_last (as in DataLoader)")
    elif batch_size is None:
        raise ValueError("batch_size=None (samples one by one, unbatched) is not supported: pass a batch size")
    else:
        check_count("batch_size", batch_size, 1)
    if sampler is not None and shuffle:
        raise ValueError("sampler option is mutually exclusive with shuffle (as in DataLoader): the sampler "
                         "chooses the order")
    check_count("num_workers", num_workers, 0, " (DALI threads, or worker processes on the Python path)")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0:
        raise ValueError(f"timeout option should be non-negative, got {timeout!r}")
    if prefetch_factor is not None:
        check_count("prefetch_factor", prefetch_factor, 1, " (batches prepared ahead)")
    return bool(shuffle)


def check_dali_path_args(worker_init_fn) -> None:
    """The DataLoader arguments that mean nothing where DALI makes the batches: not called, said
    once. worker_init_fn runs in worker processes, and the DALI path has none, as DataLoader with
    num_workers=0 has none and does not call it either; torch's reproducibility recipe
    (worker_init_fn=seed_worker, generator=g) then runs unchanged."""
    if worker_init_fn is not None:
        warnings.warn("worker_init_fn is not called: DaliLoader's DALI path has no worker processes (DALI makes the "
                      "batches in threads, their randomness seeded by seed= or generator=), as DataLoader with "
                      "num_workers=0 has none", UserWarning, stacklevel=4)


def sampler_for(source) -> Callable:
    """The source's own `epoch_sampler` if it has one (a source that can only read its samples
    in some orders, as WebDatasetSource its shards), else distributed.epoch_sampler."""
    return getattr(source, "epoch_sampler", epoch_sampler)


def order_of(dataset, batch_size, shuffle, sampler, batch_sampler, drop_last, seed, rank, world_size, local_rank,
             even_batches, generator=None):
    """(the loader's order, its `sampler`, its `batch_sampler`): the library's own order (the
    dataset's samples, sharded across ranks), or the user's sampler / batch_sampler."""
    if sampler is None and batch_sampler is None:
        epochs = sampler_for(dataset)(len(dataset), shuffle=shuffle, seed=seed, rank=rank, world_size=world_size,
                                      local_rank=local_rank, generator=generator)
        epochs.even_batches = bool(even_batches)
        return LibraryOrder(epochs, batch_size, drop_last), epochs, BatchSampler(epochs, batch_size, drop_last)
    if even_batches:
        raise ValueError("even_batches=True evens the library's own shards; with sampler= or batch_sampler= the "
                         "sampler decides what each rank reads (DistributedSampler pads its shards itself)")
    for what, given in (("sampler", sampler), ("batch_sampler", batch_sampler)):
        if given is not None and not hasattr(given, "__iter__"):
            raise ValueError(f"{what} must be iterable (a torch Sampler or any iterable of indices), got "
                             f"{type(given).__name__}")
    order = SamplerOrder(sampler=sampler, batch_sampler=batch_sampler, batch_size=batch_size, drop_last=drop_last,
                         seed=seed, rank=rank, world_size=world_size, local_rank=local_rank, generator=generator)
    if batch_sampler is None:
        batch_sampler = BatchSampler(sampler, batch_size, drop_last)
    return order, sampler if sampler is not None else getattr(batch_sampler, "sampler", None), batch_sampler
