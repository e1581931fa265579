"""The torchvision twin: a source as a torch Dataset, and a DataLoader over it with the DALI
loader's sample order, output layout and batch_transform."""

import torch
from torch.utils.data import DataLoader, Dataset

from .. import transforms
from ..transforms.mixing import batch_mixer
from .build import check_labels, output_layout, sampler_for, shaped
from .checks import check_count
from .options import check_options, resolve_device
from ..sources.torch_dataset import SourceDataset  # noqa: F401  (re-exported)
from .skips import skipped_files, warn_skipped


class TorchLoader(DataLoader):
    """The torchvision twins' loader: a DataLoader over an EpochSampler, with
    DistributedSampler's `set_epoch`."""

    padded = torch.zeros(0, dtype=torch.bool)  # which samples of the last batch are even_batches' padding

    def set_epoch(self, epoch: int) -> None:
        self.sampler.set_epoch(epoch)

    @property
    def skipped(self):
        """{path: why} of the files left out with on_error="skip", as DaliLoader's."""
        return skipped_files(self.dataset)

    def __iter__(self):
        warn_skipped(self.dataset, getattr(self.sampler, "next_epoch", 0))
        if not hasattr(self.sampler, "padding_mask"):  # a framework's own sampler (Lightning's predict)
            yield from super().__iter__()
            return
        start = 0
        for images, labels in super().__iter__():
            self.padded = self.sampler.padding_mask(start, len(labels))
            start += len(labels)
            yield images, labels


# -- the torchvision twin ------------------------------------------------------------------


def torch_loader(dataset: Dataset, *, train: bool, batch_size: int, num_workers: int, seed=None,
                 drop_last: bool = False, rank=None, world_size=None, local_rank=None,
                 memory_format=torch.contiguous_format, batch_transform=None, device=None, dali_cpu=None,
                 output="tuple", target_transform=None, label_table=None, even_batches: bool = False):
    """A DataLoader over `dataset` (a SourceDataset, or torchvision's own dataset class) with
    the DALI loader's sample order, output layout and batch_transform; `device`, `dali_cpu`,
    `output`, `target_transform` and `label_table` as dali_loader's (the twin's outputs stay on the CPU whatever the device)."""
    options = check_options(device, dali_cpu, output, target_transform)
    check_labels(options, label_table, batch_transform)
    if options.device is not None:
        resolve_device(options.device, None)   # the same error as the DALI loader's
    check_count("batch_size", batch_size, 1)
    check_count("num_threads", num_workers, 0, " (DataLoader workers)")
    layout = output_layout(memory_format)
    sampler = sampler_for(dataset)(len(dataset), shuffle=train, seed=seed, rank=rank, world_size=world_size,
                                   local_rank=local_rank)
    sampler.even_batches = bool(even_batches)
    collate = _collate_channels_last if layout == "HWC" else None
    mixer = batch_mixer(batch_transform, sampler)
    loader_class = TorchLoader if mixer is None else BatchTransformedTorchLoader
    loader = loader_class(dataset, batch_size=batch_size, sampler=sampler, num_workers=num_workers,
                          drop_last=drop_last, persistent_workers=num_workers > 0, collate_fn=collate)
    loader.batch_transform = mixer
    return shaped(loader, options, label_table)


class BatchTransformedTorchLoader(TorchLoader):
    """The twin with a batch_transform: each batch, as it leaves the DataLoader, goes through
    the same BatchMixer as the DALI loader's, with the same (epoch, batch index)."""

    batch_transform = None

    def __iter__(self):
        for k, (images, labels) in enumerate(super().__iter__()):
            # the sampler starts its epoch when the first batch is drawn: read after it
            yield self.batch_transform(images, labels, self.sampler.epoch, k)


def _collate_channels_last(samples):
    images, labels = torch.utils.data.default_collate(samples)
    return images.contiguous(memory_format=torch.channels_last), labels
