"""RandomApply, RandomChoice and RandomOrder: steps applied at random, per image."""
import numbers
from functools import partial
from itertools import permutations
from typing import Any, List

import torch

from . import color_float, fused
from ._args import coin, one_of
from ._core import (
    TRANSLATORS,
    Images,
    Untranslatable,
    apply,
    check,
    describe,
    flatten,
    is_v1,
    refuses,
    translates,
    translator_of,
    uint8_only,
    uint8_or_float,
)
from ._placement import augments_when, branches, branches_when
from .color import blur, pil_blur
from .photometric import OPERATIONS

# -- composition -----------------------------------------------------------------------------

SHAPE_KEEPING = {"ColorJitter", "GaussianBlur", "PILGaussianBlur", "RandomGrayscale", "RandomHorizontalFlip", "RandomVerticalFlip",
                 "RandomRotation", "RandomAffine", "RandomApply", "RandomChoice", "RandomOrder", *OPERATIONS,
                 # v2's pixel steps on uint8 that keep the size (robustness recipes wrap them)
                 "GaussianNoise", "ElasticTransform", "JPEG", "RandomPerspective", "RandomChannelPermutation",
                 "RandomPhotometricDistort", "Identity",
                 # the AutoAugment family (torchvision's and timm's classes of these names), and
                 # Grayscale to three channels (refused to one below)
                 "AutoAugment", "RandAugment", "TrivialAugmentWide", "AugMix", "AugMixAugment", "Grayscale"}


# Steps that change the image's size, keeping its type: inside a RandomApply or RandomChoice
# each image's size is carried out of its branch (Branches)
SIZE_CHANGING = {"Resize", "CenterCrop", "RandomCrop", "RandomResizedCrop", "Pad", "RandomShortestSize", "RandomResize",
                 "ScaleJitter", "RandomZoomOut",
                 # timm's (transforms.timm_crops), by their class names
                 "RandomResizedCropAndInterpolation", "ResizeKeepRatio", "CenterCropOrPad", "RandomCropOrPad",
                 "TrimBorder"}


def random_apply_refusal(step) -> str:
    return inner_refusal(flatten(list(step.transforms)))


# The steps a RandomApply takes after the conversion to float (color_float.random_apply)
# (each image the steps' result or itself, both made: the steps keep the size)
ON_FLOATS = {"ColorJitter", "GaussianBlur", "RandomGrayscale", "Grayscale", "RandomRotation", "RandomAffine",
             "RandomPerspective"}


def float_apply_refusal(step) -> str:
    for inner in flatten(list(step.transforms)):
        if translator_of(inner) is None:
            return check(inner)
        if type(inner).__name__ not in ON_FLOATS:
            return (f"{describe(step)} comes after the conversion to float, and {describe(inner)} inside it is "
                    f"translated there on uint8 pixels only (after it: {', '.join(sorted(ON_FLOATS))}); move it "
                    f"before the conversion")
        if getattr(inner, "expand", False):
            return (f"{describe(step)} comes after the conversion to float, and {describe(inner)} inside it expands "
                    f"the canvas, which is translated there on uint8 pixels only; move it before the conversion")
        reason = getattr(TRANSLATORS.get(type(inner)), "refuse_on", lambda s, d: "")(inner, torch.float32)
        if reason:
            return reason
    return ""


def inner_refusal(steps) -> str:
    for inner in steps:
        if translator_of(inner) is None:   # a step with no translation anywhere: its own reason
            return check(inner)
        if type(inner).__name__ not in SHAPE_KEEPING | SIZE_CHANGING:
            return (f"{describe(inner)} inside it: only steps that keep the image's type are translated there "
                    f"({', '.join(sorted(SHAPE_KEEPING | SIZE_CHANGING))})")
        if type(inner).__name__ == "Grayscale" and inner.num_output_channels != 3:
            return (f"{describe(inner)} inside it: num_output_channels=1 changes the image's channels; "
                    f"use RandomGrayscale, or Grayscale(num_output_channels=3)")
        reason = check(inner)
        if reason:
            return reason
    return ""


# Steps whose fused slots a RandomApply gates with one coin (fused.gated): colour steps and the
# blur, which neither warp nor take a fill, so that theirs stay in one DaliLoadersAugment call.
GATED = {"ColorJitter", "RandomGrayscale", "GaussianBlur", "PILGaussianBlur", *OPERATIONS}


def gates(step) -> bool:
    """Whether the fused operator runs the RandomApply where it is usable: its steps all in
    GATED, of one torchvision API (v1 and v2 tensors differ in arithmetic: two calls)."""
    return fusable(flatten(list(step.transforms)))


def fusable(steps) -> bool:
    """Steps in GATED of one API; PIL's blur only without a coin of its own (one gate a step)."""
    return bool(steps) and all(type(s).__name__ in GATED for s in steps) and len({is_v1(s) for s in steps}) == 1 \
        and not any(type(s).__name__ == "PILGaussianBlur" and s.p < 1.0 for s in steps)


BLURS = {"GaussianBlur": blur, "PILGaussianBlur": pil_blur}


def blurs_only(step) -> bool:
    """Whether every step inside is a blur, torchvision's or PIL's: one coin then picks each
    image's kernel (the blur's, or the identity), no conditional (color.blur, color.pil_blur)."""
    inner = flatten(list(step.transforms))
    return bool(inner) and all(type(s).__name__ in BLURS for s in inner)


@translates("RandomApply")
@refuses(random_apply_refusal)
@branches_when(lambda step: not blurs_only(step))
@augments_when(gates)
@uint8_or_float(color_float.random_apply, float_apply_refusal)
def random_apply(step, images: Images) -> None:
    images.decode()
    if fused.usable(images) and gates(step):   # one coin in the DaliLoadersAugment call, no conditional
        fused.gated(images, float(step.p), lambda: apply(flatten(list(step.transforms)), images, flush=False))
        return
    images.flush_mirror()
    if blurs_only(step):
        applied = coin(step.p)   # int32
        for inner in flatten(list(step.transforms)):
            BLURS[type(inner).__name__](inner, images, applied)
        return
    steps = flatten(list(step.transforms))
    if changes_size(steps):
        branches = Branches(images)
        data, height, width = images.data, size_node(images.height), size_node(images.width)
        if coin(step.p):
            data, height, width = branches.sized(steps, data)
        branches.merge(data, height, width, kept=True)
        return
    data = images.data
    if coin(step.p):
        data = applied_to(steps, images, data)
    images.data = data


def applied_to(steps, images: Images, data):
    """The steps on `data` inside a conditional's branch (see Images.branch)."""
    return branch_of(steps, images, data).data


def branch_of(steps, images: Images, data) -> Images:
    inner = images.branch(data)
    apply(steps, inner)
    inner.flush_mirror()
    if inner.channels != images.channels:   # Grayscale(3) of a grey image: torchvision could not batch it either
        raise Untranslatable(f"{describe(steps[0])} inside a RandomApply or RandomChoice changes the images' "
                             f"channels from {images.channels} to {inner.channels} on some images only")
    return inner


# -- branches that change the images' size ------------------------------------------------------


def changes_size(steps) -> bool:
    """Whether any of the steps (or of those inside the containers among them) may change the
    images' size."""
    for inner in steps:
        name = type(inner).__name__
        if name in SIZE_CHANGING or (name == "RandomRotation" and inner.expand):
            return True
        if name in ("RandomApply", "RandomChoice", "RandomOrder") and changes_size(flatten(list(inner.transforms))):
            return True
    return False


def size_node(side):
    """An image side as an int32 CPU DataNode: DALI's conditionals merge DataNodes only, each
    branch's of one type."""
    import numpy as np
    from nvidia.dali import fn, types

    if isinstance(side, numbers.Number):
        return types.Constant(np.int32(side), device="cpu")
    return fn.cast(side, dtype=types.INT32)


class Branches:
    """The branches of one conditional whose steps may change the images' size: each carries its
    images' height and width out as DataNodes, merged beside the pixels. The rest of what the
    images hold comes out of every branch alike: the containers take uint8 pixels only
    (uint8_only), and the steps they allow keep the type (branch_of checks the channels)."""

    def __init__(self, images: Images):
        self.images, self.sizes = images, []

    def sized(self, steps, data):
        inner = branch_of(steps, self.images, data)
        self.sizes.append(_known(inner))
        return inner.data, size_node(inner.height), size_node(inner.width)

    def merge(self, data, height, width, kept: bool) -> None:
        """The merged pixels and sizes into the images; `kept`: some images took no branch."""
        images = self.images
        sizes = self.sizes + ([_known(images)] if kept else [])
        images.data = data
        if None not in sizes and len(set(sizes)) == 1:
            images.height, images.width = sizes[0]   # one size known now: the steps after read it so
        else:
            images.height, images.width = height, width


def _known(images: Images):
    """(height, width) where both are known now, else None (a DataNode made in a branch must
    not be read outside it, not even by AutoGraph's bookkeeping)."""
    sides = (images.height, images.width)
    return sides if all(isinstance(v, numbers.Number) for v in sides) else None


# -- RandomChoice -----------------------------------------------------------------------------


def groups(step) -> List[List[Any]]:
    """RandomChoice's transforms, each flattened into its steps."""
    return [flatten(transform) for transform in step.transforms]


def choice_weights(step) -> List[float]:
    """Each transform's weight (v1 keeps p as given, None for equal; v2 normalizes it)."""
    p = getattr(step, "p", None)
    return [1.0] * len(step.transforms) if p is None else [float(w) for w in p]


def random_choice_refusal(step) -> str:
    if not step.transforms:
        return "no transforms to choose from"
    weights = choice_weights(step)
    if len(weights) != len(step.transforms) or min(weights) < 0 or sum(weights) <= 0:
        return f"p={step.p!r} (a weight >= 0 per transform, not all 0)"
    return inner_refusal([inner for group in groups(step) for inner in group])


def chooses(step) -> bool:
    """Whether the fused operator runs the RandomChoice where it is usable (see gates)."""
    return fusable([inner for group in groups(step) for inner in group])


@translates("RandomChoice")
@refuses(random_choice_refusal)
@branches
@augments_when(chooses)
@uint8_only
def random_choice(step, images: Images) -> None:
    """One of the transforms per image, by its weight: in the augmentation operator, one draw
    (fused.chosen); else a DALI conditional per split of the choices."""
    from nvidia.dali import fn

    images.decode()
    weights = choice_weights(step)
    if fused.usable(images) and chooses(step):
        fused.chosen(images, weights, [partial(apply, group, images, flush=False) for group in groups(step)])
        return
    images.flush_mirror()
    total = sum(weights)
    index = fn.random.choice(len(weights), p=[w / total for w in weights])
    if changes_size([inner for group in groups(step) for inner in group]):
        branches = Branches(images)
        merged = one_of(index, [partial(branches.sized, group) for group in groups(step)], images.data)
        branches.merge(*merged, kept=False)
        return
    images.data = one_of(index, [partial(applied_to, group, images) for group in groups(step)], images.data)


# -- RandomOrder ------------------------------------------------------------------------------

MOST_ORDERED = 4   # 4! = 24 orders; more take the Python path


def as_choice(step):
    """RandomOrder as the RandomChoice it equals: every order of its transforms, equally
    likely (torch.randperm in v2, random.shuffle in v1)."""
    from torchvision.transforms import v2

    return v2.RandomChoice([v2.Compose([step.transforms[k] for k in order])
                            for order in permutations(range(len(step.transforms)))])


def random_order_refusal(step) -> str:
    if len(step.transforms) > MOST_ORDERED:
        return f"{len(step.transforms)} transforms ({MOST_ORDERED} at most: each of their orders is a branch)"
    return random_choice_refusal(as_choice(step))


@translates("RandomOrder")
@refuses(random_order_refusal)
@branches
@augments_when(lambda step: chooses(as_choice(step)))
@uint8_only
def random_order(step, images: Images) -> None:
    random_choice(as_choice(step), images)
