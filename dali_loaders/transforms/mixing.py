"""batch_transform=: torchvision v2's MixUp and CutMix, or a RandomChoice of them, or timm's
Mixup / FastCollateMixup (batch mode), on each whole batch; any other callable
(images, labels) -> (images, labels) as it is (CallableBatchTransform).

Both backends call the same `BatchMixer` on each batch where it already is (the GPU when
DALI outputs there, else the CPU). Its draws come from a torch.Generator of its own,
seeded from (seed, epoch, rank, batch index): set_epoch and a resumed state reproduce
every batch, and the DALI loader and its twin mix identical batches identically. The
mixing follows torchvision's (v2 _augment.py): one lambda ~ Beta(alpha, alpha) per batch,
each image mixed with the one before it (the batch rolled by 1, the first with the last,
a short last batch included), labels one-hot then mixed with the same lambda; CutMix
pastes a box whose side follows sqrt(1 - lambda) around a uniform centre, clipped at the
border, and then takes lambda from the box's area.
"""
import math
from dataclasses import dataclass
from typing import Callable, List, Optional, Tuple

import torch

from ..ops import batch_memory, blend
from ..seeds import derived_seed

NUMPY_TYPES = (torch.float32, torch.float64, torch.float16, torch.uint8)   # what numpy holds as torch does
NUMPY_ARITHMETIC = (torch.float32, torch.float64)   # where numpy also computes as torch does
MIXING_STREAM = 0x6D6978   # keeps the mixing draws apart from DALI's, which mix (seed, epoch, rank)


@dataclass(frozen=True)
class Mixing:
    kind: str           # "MixUp" or "CutMix"
    alpha: float
    num_classes: int


def parse(batch_transform) -> Tuple[List[Mixing], List[float]]:
    """The mixings a batch_transform may apply, and the probability of each."""
    from torchvision.transforms import v2

    if isinstance(batch_transform, v2.RandomChoice):
        mixings = [_one(t) for t in batch_transform.transforms]
        total = float(sum(batch_transform.p))
        return mixings, [float(p) / total for p in batch_transform.p]
    return [_one(batch_transform)], [1.0]


def _one(transform) -> Mixing:
    from torchvision import transforms as v1
    from torchvision.transforms import v2

    if isinstance(transform, v1.RandomChoice):
        raise ValueError("batch_transform: torchvision.transforms.RandomChoice (v1) is not supported: use "
                         "torchvision.transforms.v2.RandomChoice([v2.MixUp(...), v2.CutMix(...)]) instead")
    if not isinstance(transform, (v2.MixUp, v2.CutMix)):
        raise ValueError(f"batch_transform: {type(transform).__name__} is not supported; give "
                         f"torchvision.transforms.v2 MixUp(alpha, num_classes), CutMix(alpha, num_classes), "
                         f"or RandomChoice([MixUp(...), CutMix(...)])")
    name = type(transform).__name__
    if transform.num_classes is None or int(transform.num_classes) < 1:
        raise ValueError(f"batch_transform: {name} needs num_classes (the loaders' labels are class indices)")
    if not transform.alpha > 0:
        raise ValueError(f"batch_transform: {name}'s alpha must be > 0, got {transform.alpha}")
    return Mixing(name, float(transform.alpha), int(transform.num_classes))


class BatchMixer:
    """(images, labels, epoch, batch_index) -> (mixed images, float labels (B, num_classes)).
    `sampler` gives the seed and rank at call time (a loaded state may change the seed)."""

    def __init__(self, batch_transform, sampler, in_place: bool = False):
        self.mixings, self.probabilities = parse(batch_transform)
        self.sampler, self.in_place = sampler, in_place

    def generator(self, epoch: int, batch_index: int) -> torch.Generator:
        seed = derived_seed(self.sampler.seed, epoch, self.sampler.shard.rank, batch_index, MIXING_STREAM)
        return torch.Generator().manual_seed(seed)

    def __call__(self, images: torch.Tensor, labels: torch.Tensor, epoch: int, batch_index: int):
        generator = self.generator(epoch, batch_index)
        mixing = self.mixings[0]
        if len(self.mixings) > 1:
            chosen = torch.multinomial(torch.tensor(self.probabilities), 1, generator=generator)
            mixing = self.mixings[int(chosen)]
        lam = beta(mixing.alpha, generator)
        if mixing.kind == "MixUp":
            return mixup(images, lam), mixed_labels(labels, lam, mixing.num_classes)
        images, box = cutmix(images, lam, generator, self.in_place)
        return images, mixed_labels(labels, box_lambda(box, images.shape[-2:]), mixing.num_classes)


def beta(alpha: float, generator: torch.Generator) -> float:
    """One draw of Beta(alpha, alpha): the first part of a Dirichlet(alpha, alpha), as
    torch.distributions.Beta draws it, but from `generator` and in float64 (float32 rounds
    the draws of a small alpha, which pile up near 0 and 1)."""
    concentration = torch.tensor([alpha, alpha], dtype=torch.float64)
    return float(torch._sample_dirichlet(concentration, generator=generator)[0])


def _memory_format(images: torch.Tensor):
    channels_last = images.dim() == 4 and not images.is_contiguous() and \
        images.is_contiguous(memory_format=torch.channels_last)
    return torch.channels_last if channels_last else torch.contiguous_format


def mixup(images: torch.Tensor, lam: float) -> torch.Tensor:
    if not images.is_floating_point():
        raise TypeError(f"batch_transform MixUp needs float images, got {images.dtype}: end the transform with "
                        f"ToDtype(torch.float32, scale=True) (torchvision's MixUp cannot mix integers either)")
    if on_numpy(images, NUMPY_ARITHMETIC):
        return cpu_blend(images, lam, "roll")
    mixed = images.roll(1, 0).mul_(1.0 - lam).add_(images.mul(lam))
    return mixed.contiguous(memory_format=_memory_format(images))


def on_numpy(images: torch.Tensor, dtypes) -> bool:
    """Whether the batch is mixed in numpy: a CPU tensor of one of `dtypes`."""
    return images.device.type == "cpu" and images.dtype in dtypes


def cpu_blend(images: torch.Tensor, lam: float, partner: str) -> torch.Tensor:
    """partner * (1 - lam) + images * lam, each product rounded, as torchvision (partner: the
    batch rolled by one) and timm (flipped) compute it, on one thread: torch's intra-op threads
    made numpy's three passes 6x slower on a 2-core machine (37 ms against 6 ms a 64 x 3 x 176 x
    176 batch), beside DALI's threads. One pass of C where the plugin is (ops/blend.py), else numpy."""
    import numpy as np

    if blend.usable() and blend.dense(images):
        (result,) = _like(images, 1)
        count = images.shape[0]
        partners = np.arange(count)[::-1] if partner == "flip" else (np.arange(count) - 1) % max(count, 1)
        return blend.blend_into(result, images, partners, lam, 1.0 - lam)
    batch = images.numpy()
    result, product = _like(images, 2)
    mixed = result.numpy()
    if partner == "flip":
        np.multiply(batch[::-1], 1.0 - lam, out=mixed)
    else:
        np.multiply(batch[:-1], 1.0 - lam, out=mixed[1:])
        np.multiply(batch[-1:], 1.0 - lam, out=mixed[:1])
    mixed += np.multiply(batch, lam, out=product.numpy())
    return result


def _like(images: torch.Tensor, count: int) -> tuple:
    """`count` empty tensors like the batch (its strides: channels_last stays channels_last), from
    the batch memory: a fresh batch-sized block every batch costs more in new pages than the mixing."""
    with batch_memory.allocations():
        return tuple(torch.empty_like(images) for _ in range(count))


def cutmix(images: torch.Tensor, lam: float, generator: torch.Generator, in_place: bool = False):
    """The rolled batch pasted into a box of each image: (images, (x1, y1, x2, y2)). `in_place`
    pastes into `images` itself (a batch nobody else holds): only the box is copied, not the batch."""
    height, width = images.shape[-2:]
    r_x = int(torch.randint(width, (1,), generator=generator))
    r_y = int(torch.randint(height, (1,), generator=generator))
    r = 0.5 * math.sqrt(1.0 - lam)
    half_w, half_h = int(r * width), int(r * height)
    box = (max(r_x - half_w, 0), max(r_y - half_h, 0), min(r_x + half_w, width), min(r_y + half_h, height))
    x1, y1, x2, y2 = box
    if on_numpy(images, NUMPY_TYPES):   # one thread: see cpu_blend
        import numpy as np

        batch = images.numpy()
        pasted = np.roll(batch[..., y1:y2, x1:x2], 1, axis=0)   # a copy: read before any write
        (result,) = (images,) if in_place else _like(images, 1)
        mixed = result.numpy()
        if not in_place:
            np.copyto(mixed, batch)
        mixed[..., y1:y2, x1:x2] = pasted
        return result, box
    pasted = images[..., y1:y2, x1:x2].roll(1, 0)   # only the box is rolled (a copy)
    mixed = images if in_place else images.clone(memory_format=_memory_format(images))
    mixed[..., y1:y2, x1:x2] = pasted
    return mixed, box


def box_lambda(box, size) -> float:
    """CutMix's lambda once the box is drawn: the fraction of each image left as it was."""
    x1, y1, x2, y2 = box
    height, width = size
    return float(1.0 - (x2 - x1) * (y2 - y1) / (width * height))


def mixed_labels(labels: torch.Tensor, lam: float, num_classes: int) -> torch.Tensor:
    if labels.numel() and int(labels.max()) >= num_classes:
        raise ValueError(f"batch_transform: label {int(labels.max())} is out of range for num_classes="
                         f"{num_classes}; give the number of classes of the dataset")
    one_hot = torch.nn.functional.one_hot(labels.long(), num_classes).float()
    return one_hot.roll(1, 0).mul_(1.0 - lam).add_(one_hot.mul(lam))


def batch_mixer(batch_transform, sampler, in_place: bool = False) -> Optional[Callable]:
    """The per-batch hook of a loader, or None without a batch_transform: torchvision's and
    timm's mixings on their own paths, any other callable as CallableBatchTransform.
    `in_place`: the loader's batches are its own (nobody else holds them), so CutMix may paste
    into them rather than into a copy; a user's callable always gets the batch as it is."""
    if batch_transform is None:
        return None
    if is_timm_mixup(batch_transform):
        if timm_refusal(batch_transform) and type(batch_transform).__name__ == "Mixup":
            return CallableBatchTransform(batch_transform, sampler)   # elem / pair modes: timm's own code
        return TimmBatchMixer(batch_transform, sampler, in_place)
    if is_torchvision_mixing(batch_transform):
        return BatchMixer(batch_transform, sampler, in_place)
    if not callable(batch_transform):
        raise TypeError(f"batch_transform must be callable as (images, labels) -> (images, labels), got "
                        f"{type(batch_transform).__name__}")
    return CallableBatchTransform(batch_transform, sampler)


def is_torchvision_mixing(batch_transform) -> bool:
    """torchvision v2's MixUp or CutMix, or a RandomChoice (v1 named as unsupported) of them only."""
    from torchvision import transforms as v1
    from torchvision.transforms import v2

    if isinstance(batch_transform, (v2.MixUp, v2.CutMix)):
        return True
    return isinstance(batch_transform, (v1.RandomChoice, v2.RandomChoice)) and \
        all(isinstance(t, (v2.MixUp, v2.CutMix)) for t in batch_transform.transforms)


class CallableBatchTransform:
    """Any callable (images, labels) -> (images, labels) on each whole batch, as a DataLoader's
    collate_fn would be: images where the loader put them, labels int64. Its random draws
    (torch's, numpy's and Python's global generators, and the images' GPU's) are seeded per
    batch from (seed, epoch, rank, batch index) and put back afterwards: both loaders hand it
    the same draws, set_epoch and a resumed state reproduce every batch, and the training
    script's own draws do not follow the loader's."""

    def __init__(self, function, sampler):
        self.function, self.sampler = function, sampler
        self.name = getattr(function, "__qualname__", None) or type(function).__qualname__

    def __call__(self, images: torch.Tensor, labels: torch.Tensor, epoch: int, batch_index: int):
        from .python_fallback import seeded_globals

        seed = derived_seed(self.sampler.seed, epoch, self.sampler.shard.rank, batch_index, MIXING_STREAM)
        with seeded_globals(seed, images.device), batch_memory.allocations():   # its new batches: see there
            out = self.function(images, labels.long())
        if not (isinstance(out, (tuple, list)) and len(out) == 2 and all(isinstance(t, torch.Tensor) for t in out)):
            got = f"{type(out).__name__} of {len(out)}" if isinstance(out, (tuple, list)) else type(out).__name__
            raise TypeError(f"batch_transform {self.name} returned a {got}; it must return (images, labels), "
                            f"two tensors")
        return tuple(out)


# -- timm's Mixup and FastCollateMixup, batch mode ------------------------------------------------


def is_timm_mixup(batch_transform) -> bool:
    """timm's Mixup or FastCollateMixup exactly (a subclass may mix otherwise)."""
    if type(batch_transform).__module__.split(".")[0] != "timm":
        return False
    from timm.data.mixup import FastCollateMixup, Mixup

    return type(batch_transform) in (Mixup, FastCollateMixup)


def timm_refusal(mixup) -> str:
    if mixup.mode != "batch":
        return f"mode={mixup.mode!r} is not supported (only 'batch')"
    if mixup.multi_label:
        return "multi_label=True is not supported (the loaders' labels are class indices)"
    if not (mixup.mixup_alpha > 0 or mixup.cutmix_alpha > 0):
        return "one of mixup_alpha, cutmix_alpha (or cutmix_minmax) must be > 0"
    return ""


class TimmBatchMixer(BatchMixer):
    """timm's Mixup semantics on whole batches: with probability `prob` (and while the trainer
    leaves `mixup_enabled` on, read at every batch), CutMix with `switch_prob` when both are
    active, else MixUp; each image mixed with its mirror in the batch (flipped, not rolled);
    CutMix's box as timm's rand_bbox (or rand_bbox_minmax) with its lambda correction; labels
    one-hot with label smoothing, then mixed. The draws are this loader's own (seed, epoch,
    rank, batch), not numpy's global generator. FastCollateMixup: the same, rounded on uint8."""

    def __init__(self, mixup, sampler, in_place: bool = False):
        reason = timm_refusal(mixup)
        if reason:
            raise ValueError(f"batch_transform: timm.{type(mixup).__name__}: {reason}")
        self.mixup, self.sampler, self.in_place = mixup, sampler, in_place

    def __call__(self, images: torch.Tensor, labels: torch.Tensor, epoch: int, batch_index: int):
        mixup = self.mixup
        generator = self.generator(epoch, batch_index)
        lam, use_cutmix = self.draw(generator)
        if lam != 1.0 and use_cutmix:
            (y1, y2, x1, x2), lam = timm_box(images.shape[-2:], lam, mixup, generator)
            pasted = images[..., y1:y2, x1:x2].flip(0)   # the box alone flipped (a copy), not the batch
            if not self.in_place:
                images = images.clone(memory_format=_memory_format(images))
            images[..., y1:y2, x1:x2] = pasted
        elif lam != 1.0:
            images = timm_blend(images, lam, type(mixup).__name__)
        return images, smoothed_mixed_labels(labels, lam, mixup.num_classes, mixup.label_smoothing)

    def draw(self, generator: torch.Generator) -> Tuple[float, bool]:
        """(lambda, CutMix?) as timm's _params_per_batch."""
        mixup = self.mixup
        if not (mixup.mixup_enabled and _uniform(generator) < mixup.mix_prob):
            return 1.0, False
        if mixup.mixup_alpha > 0 and mixup.cutmix_alpha > 0:
            use_cutmix = _uniform(generator) < mixup.switch_prob
        else:
            use_cutmix = not mixup.mixup_alpha > 0
        return beta(mixup.cutmix_alpha if use_cutmix else mixup.mixup_alpha, generator), use_cutmix


def _uniform(generator: torch.Generator) -> float:
    return float(torch.rand(1, generator=generator, dtype=torch.float64))


def _randint(low: int, high: int, generator: torch.Generator) -> int:
    return int(torch.randint(low, high, (1,), generator=generator))


def timm_box(size, lam: float, mixup, generator: torch.Generator):
    """((y1, y2, x1, x2), lambda): timm's rand_bbox (a centre uniform over the image, sides
    int(side * sqrt(1 - lambda)), clipped) or rand_bbox_minmax, and its lambda correction."""
    height, width = int(size[0]), int(size[1])
    if mixup.cutmix_minmax is None:
        ratio = math.sqrt(1.0 - lam)
        cut_h, cut_w = int(height * ratio), int(width * ratio)
        cy, cx = _randint(0, height, generator), _randint(0, width, generator)
        box = (min(max(cy - cut_h // 2, 0), height), min(max(cy + (cut_h + 1) // 2, 0), height),
               min(max(cx - cut_w // 2, 0), width), min(max(cx + (cut_w + 1) // 2, 0), width))
    else:
        low, high = mixup.cutmix_minmax
        cut_h = _randint(int(height * low), int(height * high), generator)
        cut_w = _randint(int(width * low), int(width * high), generator)
        y1, x1 = _randint(0, height - cut_h + 1, generator), _randint(0, width - cut_w + 1, generator)
        box = (y1, y1 + cut_h, x1, x1 + cut_w)
    if mixup.correct_lam or mixup.cutmix_minmax is not None:
        y1, y2, x1, x2 = box
        lam = 1.0 - (y2 - y1) * (x2 - x1) / float(height * width)
    return box, lam


def timm_blend(images: torch.Tensor, lam: float, name: str) -> torch.Tensor:
    """x * lam + x.flip(0) * (1 - lam); on uint8 (FastCollateMixup's collate) in float32, rounded."""
    if on_numpy(images, NUMPY_ARITHMETIC):
        return cpu_blend(images, lam, "flip")
    if images.is_floating_point():
        return images.flip(0).mul_(1.0 - lam).add_(images.mul(lam)).contiguous(memory_format=_memory_format(images))
    if name != "FastCollateMixup":
        raise TypeError(f"batch_transform timm.{name} needs float images, got {images.dtype}: end the transform "
                        f"with MaybeToTensor or ToDtype(torch.float32, scale=True), or use FastCollateMixup")
    mixed = images.float().mul_(lam).add_(images.flip(0).float().mul_(1.0 - lam)).round_()
    return mixed.to(images.dtype).contiguous(memory_format=_memory_format(images))


def smoothed_mixed_labels(labels: torch.Tensor, lam: float, num_classes: int, smoothing: float) -> torch.Tensor:
    """timm's mixup_target: one-hot with smoothing / num_classes off and 1 - smoothing + that on,
    mixed with the flipped batch's."""
    one_hot = mixed_labels(labels, 1.0, num_classes)
    off = smoothing / num_classes
    smoothed = one_hot * (1.0 - smoothing) + off
    return smoothed * lam + smoothed.flip(0) * (1.0 - lam)
