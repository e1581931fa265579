"""TorchLoader: the torchvision twin. A real DataLoader over the same dataset, taking DaliLoader's
arguments, with the DALI loader's sample order, output layout, batch_transform and batch shape,
so that the two can be compared batch for batch."""

import torch
from torch.utils.data import DataLoader

from ..sources.protocol import is_source
from ..sources.screening import KeptSubset, screen
from ..sources.storage import worker_context
from ..sources.torch_dataset import SourceDataset
from ..sources.torchvision import adapt
from ..transforms import made_views
from ..transforms.mixing import batch_mixer
from .build import check_batch_transform, output_layout
from .collate import SampleLabels, TwinCollate, user_collate
from .dataloader_args import check_dataloader_args, order_of
from .options import accelerate_device, check_options, resolve_device, torch_device
from .orders import LibraryOrder, OrderView
from .outputs import BatchShape, mixed
from .python_path import TransformedDataset, placed
from .resolve import default_transform, own_transform, refuse_iterable
from .skips import skipped_files, warn_skipped


class TorchLoader(DataLoader):
    """DataLoader with DaliLoader's arguments and manners (`set_epoch`, `padded`, `skipped`):
    `dataset` as DaliLoader takes it, read by torchvision and PIL in DataLoader's workers.
    Outputs stay on the CPU whatever the device, as a DataLoader's; where the process has made an
    Accelerator, on its device, as the DataLoaders it prepares (prepare() hands the twin back)."""

    padded = torch.zeros(0, dtype=torch.bool)  # which samples of the last batch are even_batches' padding
    # Accelerate's mark of a DataLoader it has prepared, which its prepare() hands back as it is.
    # Rebuilt as Accelerate rebuilds DataLoaders, the twin would be sharded over the processes a
    # second time and lose what its __iter__ does (batch_transform, output="dict"); it shards
    # itself as the DALI loader does, and puts its batches where Accelerate would (accelerate_device).
    _is_accelerate_prepared = True

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers: int = 0,
                 collate_fn=None, pin_memory: bool = False, drop_last: bool = False, timeout: float = 0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *, prefetch_factor=None,
                 persistent_workers: bool = False, pin_memory_device: str = "", in_order: bool = True, seed=None,
                 transform=None, target_transform=None, batch_transform=None, device=None, device_id=None,
                 output: str = "tuple", memory_format=torch.contiguous_format, even_batches: bool = False,
                 on_error: str = "raise", max_image_pixels="pil", python_fallback: bool = False, rank=None,
                 world_size=None, local_rank=None, dali_cpu=None):
        shuffle = check_dataloader_args(batch_size, shuffle, sampler, batch_sampler, drop_last, num_workers,
                                        timeout, prefetch_factor)
        device, device_id = torch_device(device, device_id)
        options = check_options(device, dali_cpu, output, target_transform)
        collate = user_collate(collate_fn, options.output)
        if options.device is not None:
            resolve_device(options.device, None)   # the same error as the DALI loader's
        layout = output_layout(memory_format)
        twin, counted, target_transform, label_table, recipe = twin_dataset(
            dataset, transform, options.target_transform, max_image_pixels, on_error)
        order, sampler, batch_sampler = order_of(counted, batch_size, shuffle, sampler, batch_sampler, drop_last,
                                                 seed, rank, world_size, local_rank, even_batches, generator)
        check_batch_transform(batch_transform, label_table is not None or target_transform is not None,
                              made_views(recipe) is not None)
        if collate is not None:   # the DALI loader's items; counted, whatever the batch it makes
            collate_fn = TwinCollate(collate, SampleLabels(label_table, target_transform))
        elif collate_fn is None and layout == "HWC":
            collate_fn = _collate_channels_last
        user_batches = batch_sampler if not isinstance(order, LibraryOrder) else None
        batching = dict(batch_sampler=batch_sampler) if user_batches is not None or batch_size is None else \
            dict(batch_size=batch_size, sampler=sampler, drop_last=drop_last)
        super().__init__(twin, **batching, num_workers=num_workers, collate_fn=collate_fn,
                         pin_memory=pin_memory, timeout=timeout, worker_init_fn=worker_init_fn,
                         multiprocessing_context=worker_context(multiprocessing_context, num_workers),
                         generator=generator,
                         prefetch_factor=prefetch_factor, persistent_workers=persistent_workers,
                         pin_memory_device=pin_memory_device, in_order=in_order)
        self._order = order
        self._counted = counted
        self._mixer = batch_mixer(batch_transform, order)
        self._counts = collate is not None   # batches come as (samples, batch): see TwinCollate
        self._shape = None if collate is not None else \
            BatchShape.needed(label_table, target_transform, options.output == "dict")

    def set_epoch(self, epoch: int) -> None:
        self._order.set_epoch(epoch)

    @property
    def order(self):
        """DaliLoader.order: the seed, shard and epoch in progress the loader's draws derive from."""
        return OrderView(self._order)

    @property
    def skipped(self):
        """{path: why} of the files left out with on_error="skip", as DaliLoader's."""
        return skipped_files(self._counted)

    @property
    def classes(self):
        """The class names, as DaliLoader's."""
        return getattr(self._counted, "classes", None)

    def __iter__(self):
        warn_skipped(self._counted, self._order.next_epoch)
        start, unpadded = 0, None
        epoch = None if isinstance(self._order, LibraryOrder) else self._order.start_epoch()
        # the seed first drawn from `generator` here, before DataLoader draws its workers' base
        # seed from it, so the twin's order is the DALI loader's
        self._order.seed  # noqa: B018
        device = accelerate_device()
        for k, batch in enumerate(super().__iter__()):
            if k == 0:   # the library's sampler starts its epoch when the first batch is drawn
                unpadded = self._order.unpadded_len()
                epoch = self._order.sampler.epoch if epoch is None else epoch
            if self._counts:
                count, batch = batch
            elif not isinstance(batch, (tuple, list)) or len(batch) < 2:   # a dataset's own batch shape
                yield batch if device is None else placed(batch, device, False)
                continue
            else:
                count = len(batch[1])
            self.padded = self._order.padding_mask(start, count, unpadded)
            start += count
            if self._mixer is not None:
                batch = mixed(self._mixer, batch, epoch, k)
            batch = batch if self._shape is None else self._shape(*batch)
            yield batch if device is None else placed(batch, device, False)

    # DALIGenericIterator's manners, as DaliLoader's
    def reset(self) -> None:
        """A no-op, as DaliLoader's."""

    @property
    def size(self) -> int:
        return len(self.sampler) if self.sampler is not None else sum(len(b) for b in self.batch_sampler)


def twin_dataset(dataset, transform, target_transform, max_image_pixels, on_error):
    """(the Dataset DataLoader reads, what the order counts, target_transform left to the
    loader, label_table, the recipe the DALI loader would take): a source through SourceDataset,
    a torchvision dataset as it is (less the files screening leaves out), any other dataset as
    it is. The recipe is `transform=`, else what the dataset's items go through as the DALI
    loader reads it (resolve.py's rule: an AugMixDataset's is its SplitViews)."""
    adapted = adapt(dataset)
    if not is_source(dataset) and (adapted is None or adapted.source is None):
        refuse_iterable(dataset)
    if adapted is not None and adapted.only_as_source and adapted.source is not None:
        dataset = adapted.source   # a Subset of a source: the source cut to it, read as sources are
    if is_source(dataset):
        source = dataset.screened(max_image_pixels, on_error) if hasattr(dataset, "screened") else dataset
        twin = SourceDataset(source, transform if transform is not None else default_transform())
        return twin, source, target_transform, getattr(source, "label_table", None), twin.transform
    given = (transform, target_transform)
    own = adapted if adapted is not None else dataset   # what its __getitem__ applies (resolve.py's rule)
    recipe = own_transform(own, transform, "transform")
    own_transform(own, target_transform, "target_transform")
    if adapted is not None:
        files = getattr(adapted.source, "files", None)
        if files is not None:
            found = screen(files, max_image_pixels, on_error)
            if found.skipped:
                dataset = KeptSubset(dataset, found.kept, found.skipped, getattr(dataset, "classes", None))
    if any(t is not None for t in given):
        dataset = TransformedDataset(dataset, *given)
    return dataset, dataset, None, None, recipe


def _collate_channels_last(samples):
    images, *rest = torch.utils.data.default_collate(samples)   # labels, and an index if the items hold one
    if isinstance(images, list):   # a view maker's views
        return [view.contiguous(memory_format=torch.channels_last) for view in images], *rest
    return images.contiguous(memory_format=torch.channels_last), *rest
