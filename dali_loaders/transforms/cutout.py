"""The project's own Cutout (DeVries & Taylor, 2017), its twin and its translation."""
import torch

from ._args import random_offset
from ._core import Images, register


class Cutout(torch.nn.Module):
    """Zero a length x length square centred on a uniform pixel, clipped at the border
    (DeVries & Taylor, 2017). On a CHW tensor, after normalization as in the paper."""

    def __init__(self, length: int):
        super().__init__()
        self.length = length

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        height, width = image.shape[-2:]
        y, x = int(torch.randint(height, ())), int(torch.randint(width, ()))
        top, left = max(y - self.length // 2, 0), max(x - self.length // 2, 0)
        bottom, right = y - self.length // 2 + self.length, x - self.length // 2 + self.length
        image = image.clone()
        image[..., top:max(bottom, 0), left:max(right, 0)] = 0
        return image

    def __repr__(self) -> str:
        return f"Cutout(length={self.length})"


@register(Cutout)
def cutout(step, images: Images) -> None:
    """The square is zeroed after normalization, as in the paper: on the output itself."""
    from nvidia.dali import fn, types

    images.materialize()
    centre = fn.stack(random_offset(images.height - 1), random_offset(images.width - 1))
    corner = fn.cast(centre - step.length // 2, dtype=types.FLOAT)
    images.data = fn.erase(images.data, anchor=corner, shape=[float(step.length)] * 2, axis_names="HW",
                           fill_value=0.0)
