"""Images in memory (CIFAR, MNIST, SVHN, STL-10), fed to DALI by external_source."""
import zlib

from typing import Optional

import numpy as np

from .. import transforms
from .array_batches import BatchSteps
from .protocol import ReadInBatches


class ArraySource(ReadInBatches):
    """Images in memory, (N, H, W, C) uint8 (C is 1 or 3), and labels (N,) int64."""

    decoded = True   # pixels already: nothing for a GPU decoder to do

    def __init__(self, images: np.ndarray, labels: np.ndarray, name: str,
                 kept_positions: Optional[np.ndarray] = None):
        if images.ndim == 3:
            images = images[..., None]
        self.images, self.labels, self.name = images, np.asarray(labels, dtype=np.int64), name
        self.kept_positions = kept_positions   # cut from a dataset: each sample's index there

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def fingerprint(self) -> str:
        return f"{self.name}/{len(self)}/{zlib.crc32(self.labels.tobytes()):08x}"

    def pil_image(self, i: int):
        """Sample i as torchvision's dataset classes hand it to a transform: a PIL image."""
        from PIL import Image

        pixels = self.images[i]
        return Image.fromarray(pixels[..., 0], "L") if pixels.shape[-1] == 1 else Image.fromarray(pixels, "RGB")

    def host_labels(self, indices: np.ndarray) -> np.ndarray:
        """The labels of these samples, read here: a loader that has them from the host leaves
        them out of the graph (read(..., labels=False)), where 256 one-number samples a batch
        cost DALI about as much as the images' last step."""
        return self.labels[indices]

    def read(self, order, batch_size: int, device: str, labels: bool = True):
        """The graph's first step: batch after batch of `order` (loader.pipeline.EpochOrder:
        the loader sets its indices and seed each epoch), as (Images, labels); labels=False:
        (Images, None), the labels left to host_labels."""
        from nvidia.dali import fn, types

        feeder = _ArrayFeeder(self, order, batch_size, _pipeline_seed(), labels)
        outputs = fn.external_source(source=feeder, num_outputs=2 if labels else 1, batch=True, batch_info=True,
                                     layout=["HWC", ""][:1 + labels], dtype=[types.UINT8, types.INT64][:1 + labels])
        images, labels = outputs if labels else (outputs[0], None)
        fed = images.gpu() if device == "gpu" else images
        _, height, width, channels = self.images.shape
        return transforms.Images(fed, height, width, channels, device, at_source=_SourceSteps(feeder),
                                 source_data=fed), labels


class ViewedArrays(ArraySource):
    """An ArraySource over a view of the dataset's own array (CIFAR's, SVHN's and STL10's
    are transposed views): pil_image reads the view, no copy. DALI takes dense batches only,
    and the one-pass C gather a C-contiguous array only (a strided gather costs ~10x as
    much per batch), so the first read() into a DALI graph makes it C-contiguous, once."""

    def read(self, *args, **kwargs):
        if not self.images.flags.c_contiguous:
            self.images = np.ascontiguousarray(self.images)
        return super().read(*args, **kwargs)


def _pipeline_seed() -> int:
    """The seed of the pipeline being defined (DALI's own pick if it was given none)."""
    from nvidia.dali.pipeline import Pipeline

    pipeline = Pipeline.current()
    seed = pipeline.seed if pipeline is not None else -1
    return int(seed) if seed is not None and seed >= 0 else int(np.random.SeedSequence().entropy % 2 ** 31)


class _ArrayFeeder:
    """external_source callback: batch `info.iteration` of `order` (an EpochOrder), with the
    batch steps the translator handed to the source (array_batches.BatchSteps). A pure function
    of the epoch's order and seed and the batch's position, so a pipeline restored from a DALI
    checkpoint resumes where it stopped. One pipeline serves every epoch (loader/pipeline.py):
    the draws are keyed on the epoch's seed, which the loader sets with its order."""

    def __init__(self, source: ArraySource, order, batch_size: int, seed: int, labels: bool = True):
        self.source, self.order, self.batch_size, self.seed = source, order, batch_size, seed
        self.labels = labels   # whether the labels are fed too
        self.steps = BatchSteps(source.images.shape[1:])

    def indices(self, info) -> np.ndarray:
        return self.order.batch(info.iteration, self.batch_size)

    def stream(self, info):
        """(seed, epoch) of the batch's draws: the epoch's seed when the loader sets one, else
        the pipeline's seed and DALI's epoch (a graph built for one pass)."""
        if self.order.seed is not None:
            return self.order.seed, 0
        return self.seed, info.epoch_idx

    def __call__(self, info):
        indices = self.indices(info)
        images = self.steps.images(self.source.images, indices, *self.stream(info), info.iteration)
        return (images, self.source.labels[indices]) if self.labels else (images,)

    def coins(self, k: int):
        """external_source callback for coin stream k: one int32 per sample of the batch."""
        def draw(info):
            n = len(self.indices(info))
            return self.steps.coin(k, n, *self.stream(info), info.iteration)
        return draw


class _SourceSteps:
    """What transforms.Images may ask of an ArraySource (see Images.at_source): a leading
    random crop, then horizontal flips, done by the feeder to whole batches."""

    def __init__(self, feeder: _ArrayFeeder):
        self.feeder = feeder

    def crop(self, ltrb, fill, height: int, width: int) -> bool:
        """Every image padded by ltrb pixels of `fill`, then a random height x width window of it;
        False if the source crops already, or flips already (a crop after a flip is DALI's)."""
        steps = self.feeder.steps
        if steps.crop is not None or steps.flips:
            return False
        steps.add_crop(ltrb, fill, height, width)
        return True

    def flip(self, p: float) -> bool:
        """Each image flipped with probability p by the feeder, in the gather after its crop."""
        self.feeder.steps.add_flip(p)
        return True

    def coin(self, p: float):
        """Per sample, 1 with probability p, drawn by the feeder for the whole batch (for a flip
        the graph does)."""
        from nvidia.dali import fn, types

        k = self.feeder.steps.add_coin(p)
        return fn.external_source(source=self.feeder.coins(k), batch=True, batch_info=True, dtype=types.INT32)
