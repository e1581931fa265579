"""torchvision's augmentation spaces, v1's and v2's: which operations the AutoAugment family
applies, at which magnitudes per bin, signed or not, and AutoAugment's policies. Read from
the torchvision object itself; both the DALI operators' translation (auto_augment.py) and
the fused operator's tables (fused.py) build on it."""
import inspect
from typing import Dict, Optional, Tuple

import numpy as np

AUTOAUGMENT_BINS = 10   # torchvision's AutoAugment reads its policies' magnitudes from 10 bins


def space(step, num_bins: int, height: float, width: float) -> Dict[str, Tuple[Optional[np.ndarray], bool]]:
    """name -> (magnitudes of the bins, or None; signed), as the torchvision object defines them."""
    if hasattr(step, "_AUGMENTATION_SPACE"):   # v2 (AugMix without all_ops: its partial space)
        ops = step._AUGMENTATION_SPACE if getattr(step, "all_ops", True) else step._PARTIAL_AUGMENTATION_SPACE
        table = {name: (make(num_bins, height, width), signed) for name, (make, signed) in ops.items()}
    else:                                      # v1: a method, taking (height, width) unless it has no use for it
        table = step._augmentation_space(num_bins, *v1_image_size(step, (height, width)))
        table = {name: (None if mags.ndim == 0 else mags, signed) for name, (mags, signed) in table.items()}
    return {name: (None if mags is None else mags.numpy().astype(np.float64), bool(signed))
            for name, (mags, signed) in table.items()}


def v1_image_size(step, size) -> list:
    """v1's TrivialAugmentWide._augmentation_space takes the bins only (its translations are in
    pixels); RandAugment's and AutoAugment's take the image size too."""

    return [size] if "image_size" in inspect.signature(step._augmentation_space).parameters else []


def policies(step):
    return step._policies if hasattr(step, "_policies") else step.policies


def depends_on_size(step, num_bins: int) -> bool:
    """Whether the translations' magnitudes scale with the image (AutoAugment, RandAugment) or
    are in pixels (TrivialAugmentWide)."""
    small, large = space(step, num_bins, 1.0, 1.0), space(step, num_bins, 2.0, 2.0)
    return any(not np.array_equal(small[name][0], large[name][0])
               for name in ("TranslateX", "TranslateY") if name in small)
