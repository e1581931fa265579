"""AutoAugment, RandAugment, TrivialAugmentWide and RandomErasing, run as DALI operators.

The op choice (which operation, which magnitude bin, which sign) is DALI's own
`nvidia.dali.auto_aug`: apply_trivial_augment, apply_rand_augment and apply_auto_augment
with a `Policy`. The operations are built with its `augmentation` decorator, their
magnitudes read from the torchvision object itself (its augmentation space), so the bins,
ranges and signs are torchvision's by construction. DALI's stock suite differs from
torchvision's (fill 128, bilinear warps, posterize and solarize ranges, colour
operators, sharpness border), so only `invert`, `equalize` and `identity` are taken from
it; docs/augmentations.md lists each difference left and measures it.
"""
import contextlib
import math
import numbers
import re
import warnings
from typing import Dict, List, Optional

import numpy as np

from ..dali_compat import unconverted_augmentation
from . import fused
from ._args import fill_values, interp_type, random_offset, stack
from .augment_space import AUTOAUGMENT_BINS, depends_on_size, policies, space
from ._core import Images, augments, branches, describe, refuses, translates
from .affine import warp_refusal
from .color import luma

RENAMED = re.compile(r"`nvidia\.dali\.fn\.experimental\.\w+` is now deprecated")
ZERO_PROBABILITY = r"The augmentation `\w+` in policy `.*` is used with probability 0"


@contextlib.contextmanager
def quiet_dali():
    """DALI's auto_aug calls operators DALI has since renamed (fn.experimental.equalize), and
    warns of the probability-0 steps that torchvision's policies have: not the user's concern.
    DALI issues the first under a filter of its own ("default"), so no filter can silence it:
    those two are dropped as they are shown, every other warning is shown as it would be."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=ZERO_PROBABILITY)
        show = warnings.showwarning

        def show_unless_renamed(message, category, *args, **kwargs):
            if not (issubclass(category, DeprecationWarning) and RENAMED.search(str(message))):
                show(message, category, *args, **kwargs)

        warnings.showwarning = show_unless_renamed
        yield


def _unconverted(function):
    """Marks a function DALI's autograph must not convert: one that builds graph nodes but
    never branches on a DataNode. Converting is slow (it parses and rewrites the source of
    every function it reaches) and is redone at each pipeline build, that is every epoch."""
    try:
        from nvidia.dali.pipeline import do_not_convert
    except ImportError:   # no DALI: the package still imports, the twins still run
        return function
    return do_not_convert(function)


# -- the operations: (data, param) -> data, on HWC uint8 ----------------------------------------


def warp(images: Images, step, inverse_matrix):
    """Output pixel centres mapped back into the input, as PIL's transform and torchvision's
    grid do; the fill and interpolation are torchvision's (defaults: 0 and NEAREST)."""
    from nvidia.dali import fn

    return lambda data, matrix: fn.warp_affine(data, matrix=inverse_matrix(matrix), inverse_map=True,
                                              fill_value=fill_values(step, 1)[0], interp_type=interp_type(step))


def shear_matrix(axis: int):
    """torchvision shears by atan(m) degrees about (0, 0): the inverse map, in numpy."""
    from torchvision.transforms.functional import _get_inverse_affine_matrix

    def matrix(magnitude):
        shear = [0.0, 0.0]
        shear[axis] = math.degrees(math.atan(magnitude))
        return np.array(_get_inverse_affine_matrix([0.0, 0.0], 0.0, [0.0, 0.0], 1.0, shear),
                        dtype=np.float32).reshape(2, 3)
    return matrix


def rotation_matrix(images: Images):
    """Counter-clockwise by `angle` degrees about the image centre, as F.rotate: the inverse map."""
    from nvidia.dali import fn
    from nvidia.dali import math as dmath

    def matrix(angle):
        r = angle * (-math.pi / 180)
        cos, sin = dmath.cos(r), dmath.sin(r)
        cx, cy = images.width * 0.5, images.height * 0.5
        return fn.reshape(fn.stack(cos, sin, cx - cos * cx - sin * cy, 0.0 - sin, cos, cy + sin * cx - cos * cy),
                          shape=[2, 3])
    return matrix


def translation_matrix(axis: int, scale):
    """By int(m) pixels, truncated toward 0 as torchvision does; `scale` turns a magnitude
    relative to the image size into pixels (1 when the magnitudes are in pixels already)."""
    from nvidia.dali import fn, types
    from nvidia.dali import math as dmath

    def matrix(magnitude):
        pixels = magnitude * scale
        whole = fn.cast(pixels >= 0, dtype=types.FLOAT) * dmath.floor(pixels) + \
            fn.cast(pixels < 0, dtype=types.FLOAT) * dmath.ceil(pixels)
        shift = [0.0, 0.0]
        shift[axis] = 0.0 - whole
        return fn.reshape(fn.stack(1.0, 0.0, shift[0], 0.0, 1.0, shift[1]), shape=[2, 3])
    return matrix


def blend(degenerate, data, factor):
    """PIL's ImageEnhance and torchvision's _blend: degenerate + factor * (image - degenerate),
    truncated to uint8 (both truncate; neither rounds)."""
    from nvidia.dali import fn, types
    from nvidia.dali import math as dmath

    mixed = degenerate + factor * (data - degenerate)
    return fn.cast(dmath.clamp(dmath.floor(mixed), 0.0, 255.0), dtype=types.UINT8)


def brightness(data, factor):
    return blend(0.0, data, factor)


def color(images: Images):
    return lambda data, factor: data if images.channels == 1 else blend(luma(data, images), data, factor)


def contrast(images: Images):
    """A blend with the mean grey level (PIL rounds the mean; torchvision's tensors do not)."""
    from nvidia.dali import fn
    from nvidia.dali import math as dmath

    def op(data, factor):
        mean = fn.reductions.mean(luma(data, images), axis_names="HWC", keep_dims=True)
        return blend(dmath.floor(mean + 0.5) if images.kind == "pil" else mean, data, factor)
    return op


def sharpen(images: Images):
    """torchvision's adjust_sharpness: a blend with the image smoothed by PIL's SMOOTH kernel,
    whose 1-pixel border keeps the input; the smoothed image is rounded to uint8 first."""
    from nvidia.dali import fn, types
    from nvidia.dali import math as dmath

    kernel = np.array([[1, 1, 1], [1, 5, 1], [1, 1, 1]], dtype=np.float32) / 13

    def op(data, factor):
        inner = dmath.floor(fn.filter(data, kernel, dtype=types.FLOAT, mode="valid") + 0.5)
        # the image's size as the graph knows it on the CPU: data.shape() of GPU pixels would be
        # a GPU -> CPU edge, which DALI's executors stall on (or refuse)
        window = dict(start=[-1, -1], shape=stack(images.height, images.width, integer=True), axis_names="HW",
                      out_of_bounds_policy="pad", fill_values=0.0)
        smoothed = fn.slice(inner, **window)
        inside = fn.slice(inner * 0.0 + 1.0, **window)
        return blend(inside * smoothed + (1.0 - inside) * data, data, factor)
    return op


def solarize(data, threshold):
    """Pixels at or above the threshold inverted (PIL: below it kept)."""
    from nvidia.dali import types

    kept = data < threshold
    return kept * data + (kept ^ True) * (types.Constant(255, dtype=types.UINT8) - data)


def solarize_threshold(images: Images, step):
    """torchvision's threshold as the integer it acts as on uint8 pixels: x < t iff x < ceil(t).
    v2's is 255 * m (PIL compares in double, tensors in float32); v1's magnitudes are the
    threshold itself, in pixel levels (its table runs 255 .. 0, v2's 1 .. 0)."""
    def threshold(magnitude):
        if not hasattr(step, "_AUGMENTATION_SPACE"):   # v1
            return np.float32(math.ceil(magnitude))
        t = 255.0 * magnitude if images.kind == "pil" else np.float32(255.0 * np.float32(magnitude))
        return np.float32(math.ceil(t))
    return threshold


def auto_contrast(data, _):
    """Each channel stretched to [0, 255] and truncated, as PIL and torchvision do; a flat
    channel is left as it is."""
    from nvidia.dali import fn, types
    from nvidia.dali import math as dmath

    lo = fn.cast(fn.reductions.min(data, axis_names="HW", keep_dims=True), dtype=types.FLOAT)
    hi = fn.cast(fn.reductions.max(data, axis_names="HW", keep_dims=True), dtype=types.FLOAT)
    flat = fn.cast(hi <= lo, dtype=types.FLOAT)
    scale = 255.0 / (hi - lo + flat) * (1.0 - flat) + flat
    stretched = (data - lo * (1.0 - flat)) * scale
    return fn.cast(dmath.clamp(dmath.floor(stretched), 0.0, 255.0), dtype=types.UINT8)


def operations(step, images: Images, relative: bool):
    """torchvision's operation name -> (function(data, param), magnitude -> param).
    `relative`: the translations' magnitudes are fractions of the image size (see suite)."""
    from nvidia.dali.auto_aug import augmentations as stock

    width, height = (images.width, images.height) if relative else (1, 1)
    factor = lambda m: np.float32(1.0 + m)   # noqa: E731
    return {
        "Identity": (stock.identity.op, None),
        "ShearX": (warp(images, step, lambda m: m), shear_matrix(0)),
        "ShearY": (warp(images, step, lambda m: m), shear_matrix(1)),
        "TranslateX": (warp(images, step, translation_matrix(0, width)), np.float32),
        "TranslateY": (warp(images, step, translation_matrix(1, height)), np.float32),
        "Rotate": (warp(images, step, rotation_matrix(images)), np.float32),
        "Brightness": (brightness, factor),
        "Color": (color(images), factor),
        "Contrast": (contrast(images), factor),
        "Sharpness": (sharpen(images), factor),
        "Posterize": (lambda data, mask: data & mask, lambda bits: np.uint8(255 ^ (2 ** (8 - int(bits)) - 1))),
        "Solarize": (solarize, solarize_threshold(images, step)),
        "AutoContrast": (auto_contrast, None),
        "Equalize": (stock.equalize.op, None),
        "Invert": (stock.invert.op, None),
    }


WARPS = ("ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate")   # their matrix is a CPU argument


@_unconverted
def suite(step, images: Images, num_bins: int) -> Dict:
    """The step's operations as DALI auto_aug augmentations, with torchvision's magnitudes.
    Translations are in pixels of this image size when it is known when the graph is built,
    else relative to a size of 1 and scaled per sample."""
    from nvidia.dali.auto_aug.core import augmentation

    sized = isinstance(images.width, numbers.Number) and isinstance(images.height, numbers.Number)
    magnitudes = space(step, num_bins, images.height if sized else 1.0, images.width if sized else 1.0)
    relative = not sized and depends_on_size(step, num_bins)
    ops = operations(step, images, relative)
    unknown = sorted(set(magnitudes) - set(ops))
    if unknown:
        raise ValueError(f"{describe(step)}: operations {unknown} have no DALI translation")
    made = {}
    for name, (mags, signed) in magnitudes.items():
        function, to_param = ops[name]
        made[name] = augmentation(function, name=name, augmentation_cls=unconverted_augmentation(), mag_range=mags, randomly_negate=signed and mags is not None,
                                  mag_to_param=to_param if mags is not None else None,
                                  param_device="cpu" if name in WARPS else "auto")
    return made


@_unconverted
def prepare(step, images: Images) -> None:
    images.uint8_pixels(step)
    images.decode()
    images.flush_mirror()


@_unconverted
def fused_on_cpu(step, images: Images, make_slots) -> bool:
    """On a CPU graph with the plugin: the draws, queued for one DaliLoadersAugment call
    (fused.py), and True; else False, for DALI's auto_aug and its conditionals."""
    if not fused.usable(images):
        return False
    images.uint8_pixels(step)
    images.decode()
    fused.automatic(step, images, make_slots)
    return True


def automatic_refusal(step) -> str:
    reason = warp_refusal(step)
    magnitude, bins = getattr(step, "magnitude", 0), getattr(step, "num_magnitude_bins", AUTOAUGMENT_BINS)
    if not reason and not 0 <= magnitude < bins:
        reason = f"magnitude={magnitude} is outside the {bins} magnitude bins (0 .. {bins - 1})"
    return reason


@translates("TrivialAugmentWide")
@refuses(automatic_refusal)
@branches
@augments
def trivial_augment_wide(step, images: Images) -> None:
    """One operation per image, uniform, at a uniform magnitude bin with a random sign."""
    from nvidia.dali.auto_aug.trivial_augment import apply_trivial_augment

    if fused_on_cpu(step, images, fused.trivial_augment_slots):
        return
    prepare(step, images)
    with quiet_dali():
        ops = list(suite(step, images, step.num_magnitude_bins).values())
        images.data = apply_trivial_augment(ops, images.data, num_magnitude_bins=step.num_magnitude_bins)


@translates("RandAugment")
@refuses(automatic_refusal)
@branches
@augments
def rand_augment(step, images: Images) -> None:
    """num_ops operations per image, each uniform (with repeats), at the one magnitude bin."""
    from nvidia.dali.auto_aug.rand_augment import apply_rand_augment

    if fused_on_cpu(step, images, fused.rand_augment_slots):
        return
    prepare(step, images)
    if step.num_ops == 0:
        return
    with quiet_dali():
        ops = list(suite(step, images, step.num_magnitude_bins).values())
        images.data = apply_rand_augment(ops, images.data, n=step.num_ops, m=step.magnitude,
                                         num_magnitude_bins=step.num_magnitude_bins)


@translates("AutoAugment")
@refuses(automatic_refusal)
@branches
@augments
def auto_augment(step, images: Images) -> None:
    """One sub-policy per image, uniform; each of its steps with its probability, at its bin."""
    from nvidia.dali.auto_aug.auto_augment import apply_auto_augment
    from nvidia.dali.auto_aug.core import Policy

    if fused_on_cpu(step, images, fused.auto_augment_slots):
        return
    prepare(step, images)
    with quiet_dali():
        ops = suite(step, images, AUTOAUGMENT_BINS)
        sub_policies = [[(ops[name], float(p), None if ops[name].mag_range is None else int(level))
                         for name, p, level in sub_policy] for sub_policy in policies(step)]
        policy = Policy(f"torchvision {step.policy}", num_magnitude_bins=AUTOAUGMENT_BINS,
                        sub_policies=sub_policies)
        images.data = apply_auto_augment(policy, images.data)


# -- RandomErasing, on the normalized float tensor ------------------------------------------------

ERASE_ATTEMPTS = 10   # torchvision's tries before it leaves the image as it is


def erase_value(step) -> Optional[List[float]]:
    """The fill per channel (v1 or v2), or None for per-pixel normal noise ("random")."""
    value = step.value
    if value is None or isinstance(value, str):
        return None
    return [float(value)] if isinstance(value, numbers.Number) else [float(v) for v in value]


def erasing_refusal(step) -> str:
    value = erase_value(step)
    if value is not None and len(value) not in (1, 3):
        return f"value={step.value!r}: one value, or one per channel"
    return ""


def erase_box(step, images: Images):
    """(top, left, height, width) per image as torchvision draws them: up to 10 tries of an
    area and log-uniform aspect, the first that fits inside the image wins; none fitting, or
    the coin (p) saying no, gives an empty box."""
    from nvidia.dali import fn, types
    from nvidia.dali import math as dmath

    attempts = [ERASE_ATTEMPTS]
    area = fn.random.uniform(range=[float(s) for s in step.scale], shape=attempts)
    aspect = dmath.exp(fn.random.uniform(range=[math.log(r) for r in step.ratio], shape=attempts))
    img_h, img_w = (fn.cast(side, dtype=types.FLOAT) if not isinstance(side, numbers.Number) else float(side)
                    for side in (images.height, images.width))
    h = dmath.floor(dmath.sqrt(area * (img_h * img_w) * aspect) + 0.5)
    w = dmath.floor(dmath.sqrt(area * (img_h * img_w) / aspect) + 0.5)
    fits = fn.cast((h < img_h) & (w < img_w), dtype=types.FLOAT)
    box_h, box_w = 0.0, 0.0
    for k in reversed(range(ERASE_ATTEMPTS)):   # the first try that fits overrides the later ones
        box_h = fits[k] * h[k] + (1.0 - fits[k]) * box_h
        box_w = fits[k] * w[k] + (1.0 - fits[k]) * box_w
    on = fn.cast(fn.random.coin_flip(probability=float(step.p)), dtype=types.FLOAT)
    box_h, box_w = on * box_h, on * box_w
    top = random_offset(fn.cast(img_h - box_h, dtype=types.INT32))
    left = random_offset(fn.cast(img_w - box_w, dtype=types.INT32))
    return top, left, box_h, box_w


def uint8_erasing(step, images: Images) -> None:
    """On uint8 pixels (a CPU graph, a constant value in 0 .. 255): the fused operator's Erase;
    otherwise refused by name."""
    value = erase_value(step)
    if not (fused.usable(images) and value is not None and all(0 <= v <= 255 for v in value)):
        raise ValueError(f"{describe(step)} on uint8 pixels is not translated (but for a value in 0 .. 255 on "
                         f"the CPU): put it after ToDtype(float32, scale=True) and Normalize, as torchvision's "
                         f"references do, or pass python_fallback=True")
    images.uint8_pixels(step)
    images.decode()
    fused.erase(step, images, erase_box(step, images), value)


@translates("RandomErasing")
@refuses(erasing_refusal)
@augments
def random_erasing(step, images: Images) -> None:
    """On the output tensor (normalized, in the output layout), as torchvision's references
    and timm do: one DaliLoadersErase call on CPU graphs, else the box drawn in DALI
    arithmetic and DALI's fn.erase; no branches. Only a twin that erases uint8 pixels gets
    the fused operator's Erase (uint8_erasing)."""
    from nvidia.dali import fn, types

    if not images.is_float:
        return uint8_erasing(step, images)
    images.materialize()
    value = erase_value(step)
    if value is not None:
        value = value * images.channels if len(value) == 1 else value
    if fused.erase_float(images, step.p, step.scale, step.ratio, value, "none" if value is not None else "pixel"):
        return
    top, left, height, width = erase_box(step, images)
    window = dict(anchor=fn.stack(fn.cast(top, dtype=types.FLOAT), fn.cast(left, dtype=types.FLOAT)),
                  shape=fn.stack(height, width), axis_names="HW")
    if value is not None:
        images.data = fn.erase(images.data, fill_value=value, **window)
        return
    kept = fn.erase(images.data * 0.0 + 1.0, fill_value=0.0, **window)
    images.data = images.data * kept + fn.random.normal(images.data) * (1.0 - kept)
