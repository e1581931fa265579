"""timm's transforms (what timm.data.create_transform builds), translated into DALI operators.

Imported when a timm step is first planned (see _core.LAZY_TRANSLATORS): timm stays optional.
Each class is registered exactly, so a subclass that changes behaviour is never translated
silently. timm's RandAugment and AutoAugment are not torchvision's: each operation is applied
with its own probability (0.5 in RandAugment), at a magnitude drawn per application around
its level (Gaussian noise `mstd`, clipped to 0 .. 10), with a random sign where it has one;
warps fill with the per-channel mean. On CPU graphs with the augment plugin, the draws and
the operations are one DaliLoadersAugment call in PIL's arithmetic (timm_fused.py, exact);
on GPU graphs every image goes through one chain of operators a slot (timm_chain.py); elsewhere
the choice is made per sample with DALI conditionals. Off the CPU operator timm's bicubic warps are
DALI's bilinear (docs: the measured bound).
"""
import math
from types import SimpleNamespace

import numpy as np
import torch
from timm.data import auto_augment as timm_aa
from timm.data import random_erasing as timm_erasing
from timm.data import transforms as timm_transforms

from . import augment_ops
from . import auto_augment as aa
from ._args import coin
from . import fused, timm_chain, timm_fused
from ._core import Images, dtype_after, refuses, register, uint8_only
from ._placement import augments_when, branches, branches_when, chains, on_cpu_when
from .color import pil_blurred
from .auto_augment import erase_window
from .conversion import to_image, to_tensor
from .geometry import random_resized_crop


# -- crops and conversions ---------------------------------------------------------------------


def _resized_crop_as(step, interpolation):
    """The step as torchvision's RandomResizedCrop translator reads it (timm's is the same crop)."""
    return SimpleNamespace(size=step.size, scale=step.scale, ratio=step.ratio, interpolation=interpolation)


def interpolation_modes(step) -> list:
    """timm's interpolation: one mode, or the modes interpolation='random' picks from."""
    return list(step.interpolation) if isinstance(step.interpolation, (list, tuple)) else [step.interpolation]


def random_interpolation(step) -> bool:
    return len(interpolation_modes(step)) > 1


def resampled_either_way(images: Images, modes, resample):
    """The data of resample(images, mode) with modes[0] or modes[1], each image at random with
    equal probability (timm's random.choice of two): one DALI conditional."""
    from dataclasses import replace

    first, second = replace(images), replace(images)
    data = images.data
    if coin(0.5):
        resample(first, modes[0])
        data = first.data
    else:
        resample(second, modes[1])
        data = second.data
    return data


@register(timm_transforms.RandomResizedCropAndInterpolation)
@branches_when(random_interpolation)   # one interpolation: no `if`, and no conditionals for the graph
@uint8_only
def random_resized_crop_and_interpolation(step, images: Images) -> None:
    """interpolation='random': bilinear or bicubic per image, with equal probability."""
    modes = interpolation_modes(step)
    if not random_interpolation(step):
        random_resized_crop(_resized_crop_as(step, modes[0]), images)
        return
    images.data = resampled_either_way(images, modes,
                                       lambda part, mode: random_resized_crop(_resized_crop_as(step, mode), part))
    images.encoded = False
    images.height, images.width = step.size


@register(timm_transforms.MaybeToTensor)
@dtype_after(lambda step, dtype: torch.float32)
def maybe_to_tensor(step, images: Images) -> None:
    """torchvision's ToTensor (the loader's images are never tensors yet: the 'maybe' is moot)."""
    to_tensor(step, images)


@register(timm_transforms.MaybePILToTensor)
def maybe_pil_to_tensor(step, images: Images) -> None:
    to_image(step, images)


# -- RandomErasing ----------------------------------------------------------------------------------


MAX_BOXES = 4   # a count drawn in min .. max takes max * (max + 1) / 2 erase calls at most


def erasing_refusal(step) -> str:
    if step.mode not in ("const", "rand", "pixel"):
        return f"mode={step.mode!r} is not supported (const, rand, pixel)"
    if not 1 <= step.min_count <= step.max_count <= MAX_BOXES:
        return f"min_count={step.min_count}, max_count={step.max_count}: 1 <= min_count <= max_count <= {MAX_BOXES}"
    if step.num_splits:
        return f"num_splits={step.num_splits} is not supported"
    return ""


@register(timm_erasing.RandomErasing)
@refuses(erasing_refusal)
def random_erasing(step, images: Images) -> None:
    """On the normalized float tensor, as timm applies it: one box drawn as torchvision's
    (area, log-uniform aspect, 10 tries), or several (_boxes), filled with zeros, one normal
    value per channel ("rand") or normal noise per pixel ("pixel")."""
    if not images.is_float:
        raise ValueError("timm.RandomErasing on uint8 pixels is not translated: put it after MaybeToTensor and "
                         "Normalize, as timm's create_transform does, or pass python_fallback=True")
    noise = {"const": "none", "rand": "channel", "pixel": "pixel"}[step.mode]
    ratio = tuple(math.exp(r) for r in step.log_aspect_ratio)
    if step.max_count == 1 and fused.erase_float(images, step.probability, (step.min_area, step.max_area), ratio,
                                                 None, noise):
        return
    images.materialize()
    if step.max_count == 1:
        box = SimpleNamespace(scale=(step.min_area, step.max_area), p=step.probability, ratio=ratio)
        _erase(step, images, erase_window(box, images))
        return
    for window in _boxes(step, images, ratio):
        _erase(step, images, window)


def _boxes(step, images: Images, ratio):
    """timm's boxes when it draws several: one coin for them all, a count uniform in min_count ..
    max_count, then that many boxes, each of area scale / count. Each possible count c has its
    own c boxes drawn at scale / c; those of the other counts are emptied (shape 0)."""
    from nvidia.dali import fn, types

    counts = list(range(step.min_count, step.max_count + 1))
    erasing = fn.cast(coin(step.probability), dtype=types.FLOAT)
    count = fn.random.uniform(values=counts, dtype=types.INT32) if len(counts) > 1 else counts[0]
    for c in counts:
        kept = erasing if len(counts) == 1 else erasing * fn.cast(count == c, dtype=types.FLOAT)
        for _ in range(c):
            box = SimpleNamespace(scale=(step.min_area / c, step.max_area / c), p=1.0, ratio=ratio)
            window = erase_window(box, images)
            yield dict(window, shape=window["shape"] * kept)


def _erase(step, images: Images, window) -> None:
    """The box `window` erased as the step's mode fills it."""
    from nvidia.dali import fn

    if step.mode == "const":
        images.data = fn.erase(images.data, fill_value=0.0, **window)
        return
    kept = fn.erase(images.data * 0.0 + 1.0, fill_value=0.0, **window)
    if step.mode == "pixel":   # zeros around the box: (1 - kept) hides the 1 x 1 of an empty box
        noise = box_noise(images, window["anchor"], window["shape"])
    else:
        per_channel = [images.channels, 1, 1] if images.layout == "CHW" else [1, 1, images.channels]
        noise = images.data * 0.0 + fn.random.normal(shape=per_channel)
    images.data = images.data * kept + noise * (1.0 - kept)


def box_noise(images: Images, anchor, shape):
    """Normal noise per pixel inside the box, zeros around it: drawn at the box's size (at
    least 1 x 1) and placed by a padding slice, so that an image draws only its box's noise."""
    from nvidia.dali import fn, types
    from nvidia.dali import math as dmath

    sides = fn.cast(dmath.max(shape, 1.0), dtype=types.INT32)
    box = [sides[0], sides[1]]
    chw = images.layout == "CHW"
    noise = fn.random.normal(shape=fn.stack(images.channels, *box) if chw else fn.stack(*box, images.channels))
    if images.device == "gpu":   # padded there: only the box's noise crosses, not the image's size in zeros
        noise = noise.gpu()
    full = [fn.cast(side, dtype=types.INT32) if not isinstance(side, int) else side
            for side in (images.height, images.width)]
    return fn.slice(noise, start=0 - fn.cast(anchor, dtype=types.INT32), shape=fn.stack(*full),
                    axes=[1, 2] if chw else [0, 1], out_of_bounds_policy="pad", fill_values=0.0)


# -- RandAugment and AutoAugment ---------------------------------------------------------------------

SIGNED = {"Rotate", "ShearX", "ShearY", "TranslateX", "TranslateY", "TranslateXRel", "TranslateYRel",
          "ColorIncreasing", "ContrastIncreasing", "BrightnessIncreasing", "SharpnessIncreasing"}


def warp(fill):
    """PIL's Image.transform(AFFINE, inverse map) with fillcolor per channel: DALI's bilinear
    warp of the image less the fill, with fill 0, and the fill added back: where the warp's
    coverage of the image is c, that is the warp plus (1 - c) times the fill (a bilinear warp
    is linear), in four GPU operators fewer than warping the coverage too."""
    from nvidia.dali import fn, types

    def op(data, matrix):
        colour = types.Constant(np.array(fill, np.float32))
        warped = fn.warp_affine(data - colour, matrix=matrix, inverse_map=True, fill_value=0.0,
                                interp_type=types.INTERP_LINEAR, dtype=types.FLOAT)
        return augment_ops.rounded_uint8(warped + colour)
    return op


def affine(*row):
    """A 2x3 inverse map from six scalars (numbers or DataNodes)."""
    from nvidia.dali import fn

    from ._args import stack

    return fn.reshape(stack(*row), shape=[2, 3])


def operations(images: Images, fill):
    """timm's operation name -> function(data, argument) on HWC uint8, PIL's arithmetic."""
    from nvidia.dali import fn, types
    from nvidia.dali.auto_aug import augmentations as stock

    warped = warp(fill)
    rotation = augment_ops.rotation_matrix(images)

    def shift(axis):
        """timm's translate_*_abs: by `pixels` (a float, interpolated) along x (0) or y (1)."""
        return lambda data, pixels: warped(data, affine(1.0, 0.0, pixels, 0.0, 1.0, 0.0) if axis == 0 else
                                           affine(1.0, 0.0, 0.0, 0.0, 1.0, pixels))

    def shift_relative(axis):
        """timm's translate_*_rel: by a fraction of the image's width (x) or height (y)."""
        side = images.width if axis == 0 else images.height
        side = float(side) if isinstance(side, (int, float)) else fn.cast(side, dtype=types.FLOAT)
        return lambda data, fraction: shift(axis)(data, fraction * side)

    table = {
        "AutoContrast": lambda data, _: augment_ops.auto_contrast(data, None),
        "Equalize": stock.equalize.op,
        "Invert": stock.invert.op,
        "Rotate": lambda data, angle: warped(data, rotation(angle)),
        "ShearX": lambda data, f: warped(data, affine(1.0, f, 0.0, 0.0, 1.0, 0.0)),
        "ShearY": lambda data, f: warped(data, affine(1.0, 0.0, 0.0, f, 1.0, 0.0)),
        "TranslateXRel": shift_relative(0), "TranslateYRel": shift_relative(1),
        "TranslateX": shift(0), "TranslateY": shift(1),
        "Posterize": augment_ops.posterize_bits, "PosterizeIncreasing": augment_ops.posterize_bits,
        "PosterizeOriginal": augment_ops.posterize_bits, "Solarize": augment_ops.solarize,
        "SolarizeIncreasing": augment_ops.solarize, "SolarizeAdd": augment_ops.solarize_add,
    }
    enhance = {"Color": augment_ops.color(images), "Contrast": augment_ops.contrast(images),
               "Brightness": augment_ops.brightness, "Sharpness": augment_ops.sharpen(images)}
    for name, function in enhance.items():
        table[name] = table[name + "Increasing"] = function
    table["Desaturate"] = enhance["Color"]   # its argument: the colour factor (timm_fused.level_of)
    table.update(blurs(images.device))
    return table


def blurs(device: str):
    """timm's blurs on HWC uint8 (PIL's arithmetic, color.pil_blurred): GaussianBlur at its
    argument, the radius; GaussianBlurRand at a radius uniform in 0.1 .. 2 * its argument."""
    from nvidia.dali import fn

    low, high = timm_fused.BLUR_LOW, timm_fused.BLUR_HIGH
    return {"GaussianBlur": lambda data, radius: pil_blurred(data, radius, high, device),
            "GaussianBlurRand": lambda data, factor: pil_blurred(
                data, low + fn.random.uniform(range=[0.0, 1.0]) * (high * factor - low), high, device)}


def blurs_in(step) -> bool:
    """Whether the step holds timm's blurs: no GPU chain runs them, so its GPU graphs run the
    steps on the CPU (the fused operator, or the conditionals where it is missing)."""
    ops = step.ops if hasattr(step, "ops") else [op for sub in step.policy for op in sub]
    return any(op.name in BLURS for op in ops)


BLURS = ("GaussianBlur", "GaussianBlurRand")


def augment_refusal(step) -> str:
    ops = step.ops if hasattr(step, "ops") else [op for sub in step.policy for op in sub]
    unknown = sorted({op.name for op in ops} - set(KNOWN_OPS))
    if unknown:
        return f"operations {unknown} have no DALI translation"
    if any(op.name == "GaussianBlurRand" and timm_fused.noise_of(op) > 0 for op in ops):
        return "GaussianBlurRand with magnitude noise (mstd) has no DALI translation; its fixed magnitude has"
    if getattr(step, "choice_weights", None) is not None:
        return timm_fused.weighted_refusal(step)
    return ""


KNOWN_OPS = ("AutoContrast", "Equalize", "Invert", "Rotate", "ShearX", "ShearY", "TranslateX", "TranslateY",
             "TranslateXRel", "TranslateYRel", "Posterize", "PosterizeIncreasing", "PosterizeOriginal", "Solarize",
             "SolarizeIncreasing", "SolarizeAdd", "Color", "ColorIncreasing", "Contrast", "ContrastIncreasing",
             "Brightness", "BrightnessIncreasing", "Sharpness", "SharpnessIncreasing", "Desaturate", *BLURS)


def fill_of(ops):
    fills = {tuple(op.kwargs.get("fillcolor", (128, 128, 128))) for op in ops}
    return [float(f) for f in next(iter(fills))]


def apply_one_of(images: Images, ops, index, table) -> None:
    """The op at `index` (a per-sample DataNode) of `ops`, if its coin (op.prob) says so."""
    from nvidia.dali import fn, types

    data = images.data
    for k, op in enumerate(ops):
        chosen = index == k
        if op.prob < 1.0:
            chosen = chosen & fn.cast(coin(op.prob), dtype=types.BOOL)
        argument = None
        if timm_fused.level_of(op.name, op.hparams) is not None:
            argument = timm_chain.argument(timm_chain.op_level(op), *timm_chain.magnitude_draws([op]),
                                           timm_chain.sign_draw())
        if chosen:
            data = table[op.name](data, argument)
    images.data = data


def fused_on_cpu(translator):
    """On a CPU graph with the plugin (and a step it takes), timm_fused's slots in place of
    the conditionals."""
    return chains(augments_when(timm_fused.fusable)(branches(translator)))


@register(timm_aa.RandAugment)
@refuses(augment_refusal)
@on_cpu_when(blurs_in)
@fused_on_cpu
@uint8_only
def rand_augment(step, images: Images) -> None:
    """num_layers operations per image, each uniform (with repeats) or by timm's weights
    (without), each applied with its p."""
    if timm_fused.translate(step, images):
        return
    if timm_chain.translate(step, images, warp(fill_of(step.ops))):
        return
    aa.prepare(step, images)
    with augment_ops.quiet_dali():
        table = operations(images, fill_of(step.ops))
        for index in timm_fused.slot_indices(step):   # uniform, or timm's weighted choice
            apply_one_of(images, step.ops, index, table)


@register(timm_aa.AutoAugment)
@refuses(augment_refusal)
@on_cpu_when(blurs_in)
@fused_on_cpu
@uint8_only
def auto_augment(step, images: Images) -> None:
    """One sub-policy per image, uniform; each of its operations with its probability."""
    from nvidia.dali import fn, types

    if timm_fused.translate(step, images):
        return
    ops = [op for sub in step.policy for op in sub]
    if timm_chain.translate(step, images, warp(fill_of(ops))):
        return
    aa.prepare(step, images)
    index = fn.random.uniform(values=list(range(len(step.policy))), dtype=types.INT32)
    with augment_ops.quiet_dali():
        table = operations(images, fill_of(ops))
        for position in range(max(len(sub) for sub in step.policy)):
            slots = [sub[position] if position < len(sub) else None for sub in step.policy]
            present = [k for k, op in enumerate(slots) if op is not None]
            apply_one_of(images, [slots[k] for k in present], _remap(index, present), table)


def _remap(index, present):
    """`index` among all sub-policies -> its place among those with an op at this position, or -1."""
    from nvidia.dali import types

    lookup = np.full(max(present) + 1 if present else 1, -1, np.int32)
    lookup[present] = np.arange(len(present), dtype=np.int32)
    if list(present) == list(range(len(lookup))):
        return index
    remapped = index * 0 - 1
    for k, place in enumerate(lookup):
        if place >= 0:
            remapped = remapped + (index == k) * types.Constant(int(place) + 1, dtype=types.INT32)
    return remapped
