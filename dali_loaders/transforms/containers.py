"""RandomApply and the composition of steps."""

from ._args import coin
from ._core import (
    Images,
    apply,
    check,
    describe,
    flatten,
    refuses,
    translates,
)
from ._placement import branches

# -- composition -----------------------------------------------------------------------------

SHAPE_KEEPING = {"ColorJitter", "GaussianBlur", "RandomGrayscale", "RandomHorizontalFlip", "RandomVerticalFlip",
                 "RandomRotation", "RandomAffine", "RandomApply"}


def random_apply_refusal(step) -> str:
    for inner in flatten(list(step.transforms)):
        if type(inner).__name__ not in SHAPE_KEEPING:
            return (f"{describe(inner)} inside it: only steps that keep the image's size and type are "
                    f"translated there ({', '.join(sorted(SHAPE_KEEPING))})")
        reason = check(inner)
        if reason:
            return reason
    return ""


@translates("RandomApply")
@refuses(random_apply_refusal)
@branches
def random_apply(step, images: Images) -> None:
    from dataclasses import replace

    images.uint8_pixels(step)
    images.decode()
    images.flush_mirror()
    data = images.data
    if coin(step.p):
        inner = replace(images, data=data, at_source=None)   # nothing of the source inside a branch
        apply(flatten(list(step.transforms)), inner)
        inner.flush_mirror()
        data = inner.data
    images.data = data
