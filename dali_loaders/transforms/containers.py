"""RandomApply and the composition of steps."""

from . import fused
from ._args import coin
from .color import blur
from ._core import (
    Images,
    apply,
    check,
    describe,
    flatten,
    is_v1,
    refuses,
    translates,
)
from ._placement import augments_when, branches_when
from .photometric import OPERATIONS

# -- composition -----------------------------------------------------------------------------

SHAPE_KEEPING = {"ColorJitter", "GaussianBlur", "RandomGrayscale", "RandomHorizontalFlip", "RandomVerticalFlip",
                 "RandomRotation", "RandomAffine", "RandomApply", *OPERATIONS}


def random_apply_refusal(step) -> str:
    for inner in flatten(list(step.transforms)):
        if type(inner).__name__ not in SHAPE_KEEPING:
            return (f"{describe(inner)} inside it: only steps that keep the image's size and type are "
                    f"translated there ({', '.join(sorted(SHAPE_KEEPING))})")
        reason = check(inner)
        if reason:
            return reason
    return ""


# Steps whose fused slots a RandomApply gates with one coin (fused.gated): colour steps and the
# blur, which neither warp nor take a fill, so that theirs stay in one DaliLoadersAugment call.
GATED = {"ColorJitter", "RandomGrayscale", "GaussianBlur", *OPERATIONS}


def gates(step) -> bool:
    """Whether the fused operator runs the RandomApply where it is usable: its steps all in
    GATED, of one torchvision API (v1 and v2 tensors differ in arithmetic: two calls)."""
    inner = flatten(list(step.transforms))
    return bool(inner) and all(type(s).__name__ in GATED for s in inner) and len({is_v1(s) for s in inner}) == 1


def blurs_only(step) -> bool:
    """Whether every step inside is a GaussianBlur: one coin then picks each image's window
    (the blur's, or 1 x 1: the image as it is), no conditional (color.blur)."""
    inner = flatten(list(step.transforms))
    return bool(inner) and all(type(s).__name__ == "GaussianBlur" for s in inner)


@translates("RandomApply")
@refuses(random_apply_refusal)
@branches_when(lambda step: not blurs_only(step))
@augments_when(gates)
def random_apply(step, images: Images) -> None:
    from dataclasses import replace

    images.uint8_pixels(step)
    images.decode()
    if fused.usable(images) and gates(step):   # one coin in the DaliLoadersAugment call, no conditional
        fused.gated(images, float(step.p), lambda: apply(flatten(list(step.transforms)), images, flush=False))
        return
    images.flush_mirror()
    if blurs_only(step):
        applied = coin(step.p)   # int32
        for inner in flatten(list(step.transforms)):
            blur(inner, images, applied)
        return
    data = images.data
    if coin(step.p):
        inner = replace(images, data=data, at_source=None)   # nothing of the source inside a branch
        apply(flatten(list(step.transforms)), inner)
        inner.flush_mirror()
        data = inner.data
    images.data = data

