"""What a source is: the contract between a dataset's reader and the loaders.

A source holds one split of a dataset, N samples, and says how DALI reads them. The loaders
need nothing else of it; the library's sources (ArraySource, FileSource and ImageFiles,
WebDatasetSource, LabelledFiles, HuggingFaceSource) and a user's own all keep this contract.

Must provide:
  __len__()                       the number of samples
  fingerprint: str                what a saved state must match (changes when the samples do)
  labels: numpy int64 array (N,)  each sample's label (an index into label_table, if it has one)
  pil_image(i)                    sample i as torchvision's class hands it to a transform (the twin)
  read(order, batch_size, device) the graph's first step: (Images, labels DataNode) for batch after
                                  batch of `order` (loader/pipeline.py's EpochOrder: batch k is
                                  order.batch(info.iteration, batch_size) in an external_source)
May provide:
  read(..., labels=False)         (Images, None): the loader then reads host_labels itself
  host_labels(indices)            the labels of those samples, read on the host
  epoch_sampler(n, *, shuffle, seed, rank, world_size, local_rank, generator)
                                  the orders it can be read in (WebDataset: shard by shard);
                                  seed=None: drawn from generator alone, 0 across processes
  screened(max_image_pixels, on_error)
                                  a new source holding only the samples screening keeps, with
                                  `skipped` ({name: why}); the source itself if nothing to do
  skipped                         {name: why} of the samples screening left out
  classes                         the class names, as torchvision's datasets name them
  label_table                     sources.label_table.LabelTable: labels that are not one integer
  name_failure(batch_size)        a hook naming the sample behind a failed batch
                                  (failure, remaining indices) -> Exception or None
  decoded                         True when read() hands DALI pixels, not encoded files: no
                                  decode for a GPU to take over (the loader may then keep the
                                  steps on the CPU: loader/build.py's graph_variant)
  subset(indices)                 the samples at those indices, a source of their own
                                  (how torch's Subset of the dataset is read)
The library's own sources derive from ReadInBatches, whose indexing names the way to resume.
"""
from typing import Protocol, runtime_checkable


@runtime_checkable
class Source(Protocol):
    labels: object

    def __len__(self) -> int: ...

    @property
    def fingerprint(self) -> str: ...

    def pil_image(self, i: int): ...

    def read(self, order, batch_size: int, device: str): ...


class ReadInBatches:
    """The library's sources' base: DALI reads them a batch at a time, by `read`, never by index.
    A DataLoader rebuilt over a DALI loader's `dataset` (accelerate's `skip_first_batches`
    builds one) would index it: the error names what works instead."""

    def __getitem__(self, i):
        raise TypeError(f"{type(self).__name__} is read by the DALI loader in batches, not by index: a DataLoader "
                        f"rebuilt over loader.dataset (accelerator.skip_first_batches builds one) cannot read it. "
                        f"To resume mid-epoch: accelerator.register_for_checkpointing(loader) before save_state / "
                        f"load_state, or loader.load_state_dict(state)")


def is_source(obj) -> bool:
    """Whether `obj` keeps the source contract (checked by its members, not its class)."""
    return isinstance(obj, Source)
