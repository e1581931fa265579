"""The project's PILGaussianBlur: PIL's `ImageFilter.GaussianBlur` at a radius drawn per image,
as self-supervised recipes (MoCo, SimCLR, BYOL, DINO, Barlow Twins, VICReg) blur. Its
translation is in color.py.

PIL's Gaussian blur is not torchvision's GaussianBlur: it is three passes of an extended box
filter (Gwosdek et al., 2011) along each axis, the box's radius chosen so the passes' variance
is radius ** 2, the border pixel repeated, uint8 rounding after every pass; torchvision's is
one Gaussian kernel of a given size with mirrored borders.
"""
import math
import random
from typing import Sequence, Tuple, Union

import numpy as np
import torch

PASSES = 3   # PIL's GaussianBlur: three box passes per axis


class PILGaussianBlur(torch.nn.Module):
    """With probability p, `image.filter(ImageFilter.GaussianBlur(radius))`, the radius uniform in
    `radius` (a number: that radius) and drawn per image, both with Python's `random`, as the
    recipes draw them. On PIL images, which is what `filter` takes."""

    def __init__(self, radius: Union[float, Sequence[float]] = (0.1, 2.0), p: float = 1.0):
        super().__init__()
        low, high = (radius, radius) if isinstance(radius, (int, float)) else tuple(radius)
        if not 0 <= float(low) <= float(high):
            raise ValueError(f"PILGaussianBlur: radius={radius!r}; give a number >= 0 or a range (low, high), "
                             f"0 <= low <= high")
        if not 0.0 <= float(p) <= 1.0:
            raise ValueError(f"PILGaussianBlur: p={p!r}; give a probability in [0, 1]")
        self.radius: Tuple[float, float] = (float(low), float(high))
        self.p = float(p)

    def forward(self, image):
        from PIL import ImageFilter

        if self.p < 1.0 and not random.random() < self.p:
            return image
        return image.filter(ImageFilter.GaussianBlur(radius=random.uniform(*self.radius)))

    def __repr__(self) -> str:
        return f"PILGaussianBlur(radius={self.radius}, p={self.p})"


def box_radius(radius: float) -> float:
    """The extended box's radius whose PASSES passes have variance radius ** 2: its whole part
    l is the largest whose plain box stays below, its fraction weighs the two pixels at
    +-(l + 1) (the paper's equations 11 and 14). In float32, as PIL computes it (the square
    root in double); color.py computes the same in DALI's float32 arithmetic."""
    f = np.float32
    variance = f(radius) * f(radius) / f(PASSES)
    lower = f(math.floor((float(f(math.sqrt(12.0 * float(variance) + 1.0))) - 1.0) / 2.0))
    fraction = (f(2) * lower + f(1)) * (lower * (lower + f(1)) - f(3) * variance)
    fraction = fraction / (f(6) * (variance - (lower + f(1)) * (lower + f(1))))
    return float(lower + fraction)


ONE = 1 << 24   # PIL's fixed point: weights in units of 2 ** -24


def fixed_point(radius: float) -> Tuple[int, int, int]:
    """(the box's whole radius, the weight of each whole pixel, the weight of each end pixel),
    the weights in units of 2 ** -24, as PIL truncates them: a pass's pixel is then
    (sum of whole pixels * weight + sum of end pixels * end weight + 2 ** 23) >> 24."""
    box = np.float32(box_radius(radius))
    whole = int(math.floor(box))
    whole_weight = int(np.float32(ONE) / (box * np.float32(2) + np.float32(1)))
    return whole, whole_weight, (ONE - (2 * whole + 1) * whole_weight) // 2


def kernel_width(high: float) -> int:
    """Taps of a kernel wide enough for every radius up to `high`: 2 * (l + 1) + 1."""
    return 2 * (math.floor(box_radius(high)) + 1) + 1
