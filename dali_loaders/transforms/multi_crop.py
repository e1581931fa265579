"""FiveCrop and TenCrop (v1 and v2), read as views: the steps before them run once, then each
crop is a view of its own, its window cut from the shared image, followed by the steps after
(each applied to every crop, as v2's transforms apply to each image of the tuple).

torchvision returns the crops as a tuple, which DataLoader's default_collate makes a list of
batches, one per crop: the loader makes the same list. Only steps that do the same to every
crop may follow (v2's conversions, Normalize, Resize, CenterCrop, Pad, Grayscale...): a random
v2 step draws once for the whole tuple, a v1 step takes no tuple, and a Lambda sees the tuple
whole; with any of these the crops take the Python path as before. The one Lambda read is
torchvision's documented `Lambda(lambda crops: torch.stack([step(crop) for crop in crops]))`
(v1's: v2's calls it on each crop): its steps run on each crop, and the crops of a sample are
stacked, (crops, C, H, W), a batch (B, crops, C, H, W); after it, more such Lambdas and
Normalize (per crop on the stack).
"""
from typing import Optional

from ._args import centre_offset, crop_window, pair
from ._core import Images, Untranslatable, check, describe, flatten, refuses, register, translates
from ._stack_lambda import stacked_steps
from .split_views import SplitViews

MAKERS = {"FiveCrop": 5, "TenCrop": 10}
# v2 steps that do the same to each image of a tuple, whatever the image
PER_CROP = {"ToImage", "ToDtype", "ConvertImageDtype", "PILToTensor", "ToTensor", "Normalize", "Resize",
            "CenterCrop", "Pad", "Grayscale", "RGB", "Identity", "ToPureTensor"}
TO_TENSOR = {"ToTensor", "PILToTensor", "ToImage"}   # the images are tensors after one of these


class MultiCropView:
    """The `index`-th image of torchvision's FiveCrop (of `size`) or TenCrop (with `flip`:
    "horizontal" or "vertical"): in order top left, top right, bottom left, bottom right, centre;
    then TenCrop's same five of the flipped image."""

    def __init__(self, size, index: int, flip: Optional[str] = None):
        self.size, self.index, self.flip = pair(size), int(index), flip

    def __call__(self, image):
        from torchvision.transforms.v2 import functional as F

        if self.flip is None:
            return F.five_crop(image, list(self.size))[self.index]
        return F.ten_crop(image, list(self.size), vertical_flip=self.flip == "vertical")[self.index]

    def __repr__(self) -> str:
        return f"MultiCropView(size={self.size}, index={self.index}, flip={self.flip!r})"


def _is_torchvision(step, names) -> bool:
    return type(step).__module__.startswith("torchvision.transforms") and type(step).__name__ in names


def crop_views(transform) -> Optional[SplitViews]:
    """`transform` as SplitViews where it holds one FiveCrop or TenCrop that only per-crop v2
    steps follow and every step before it translates; else None."""
    try:
        steps = flatten(transform)
    except ValueError:
        return None
    makers = [k for k, step in enumerate(steps) if _is_torchvision(step, MAKERS)]
    if len(makers) != 1:
        return None
    k = makers[0]
    maker, before, after = steps[k], steps[:k], steps[k + 1:]
    per_crop = _per_crop_steps(after)
    if per_crop is None or any(check(step) for step in before):
        return None
    stacked = any(_is_stack(step) for step in after)
    if stacked and not any(_is_torchvision(step, TO_TENSOR) for step in before + per_crop):
        return None   # PIL crops, which torch.stack refuses: the Python path raises as torchvision does
    count = MAKERS[type(maker).__name__]
    flip = None if count == 5 else ("vertical" if maker.vertical_flip else "horizontal")
    return SplitViews(before or None, [[MultiCropView(maker.size, index, flip), *per_crop] for index in range(count)],
                      stacked=stacked)


def _per_crop_steps(after) -> Optional[list]:
    """The steps each crop goes through, the stacking Lambdas' steps in their place; None where
    a step does not do the same to every crop (or not each crop alone)."""
    steps, stacked = [], False
    for step in after:
        if _is_stack(step):
            inner, _ = stacked_steps(step.lambd)
            steps += inner
            stacked = True
        elif stacked and _is_torchvision(step, {"Normalize"}) or not stacked and \
                type(step).__module__.startswith("torchvision.transforms.v2") and type(step).__name__ in PER_CROP:
            steps.append(step)
        else:
            return None
    return steps


def _is_stack(step) -> bool:
    """v1's Lambda of the stacking lambda (v2's Lambda is called on each crop, not the tuple)."""
    return type(step).__module__ == "torchvision.transforms.transforms" and type(step).__name__ == "Lambda" \
        and stacked_steps(step.lambd)[0] is not None


def maker_refusal(step) -> str:
    """Where planning did not read the recipe as views (crop_views), the maker is refused: why."""
    return (f"read as views (one a crop) only as the recipe's one FiveCrop or TenCrop, after steps that translate "
            f"and before v2 steps alone that do the same to every crop ({', '.join(sorted(PER_CROP))}), or "
            f"v1's Lambda(lambda crops: torch.stack([step(crop) for crop in crops])) of steps that translate, "
            f"named or built with literal arguments, then Normalize")


@translates(*MAKERS)
@refuses(maker_refusal)
def multi_crop(step, images: Images) -> None:
    raise Untranslatable(f"{describe(step)}: {maker_refusal(step)}")   # never reached: always refused


@register(MultiCropView)
def multi_crop_view(step: MultiCropView, images: Images) -> None:
    """The window in the image (TenCrop's last five: in the flipped image, so cut at the mirrored
    place, then flipped). A crop larger than the image is padded with zeros, as the crops of
    RandomCrop are, where torchvision raises."""
    from nvidia.dali import fn

    images.decode()
    height, width = step.size
    extra_height, extra_width = images.height - height, images.width - width
    position = step.index % 5
    corners = [(0, 0), (0, extra_width), (extra_height, 0), (extra_height, extra_width)]
    top, left = corners[position] if position < 4 else (centre_offset(extra_height), centre_offset(extra_width))
    flipped = step.index >= 5
    if flipped and step.flip == "horizontal":
        left = extra_width - left
    elif flipped:
        top = extra_height - top
    crop_window(images, top, left, height, width, [0.0] * images.channels)
    if flipped:
        horizontal = step.flip == "horizontal"
        images.data = fn.flip(images.data, horizontal=int(horizontal), vertical=int(not horizontal))
