"""The Python face of DaliLoadersAugment (csrc/augment_op.cc): per sample, a short sequence of
augmentations in one CPU operator, in torchvision's or PIL's arithmetic. Its op codes and
parameter rows are csrc/augment_kernels.h's; the translators (transforms/fused.py) draw them
in the graph."""
from typing import Optional, Sequence

NUM_PARAMS = 4
SKIP = -1
CODES = {name: code for code, name in enumerate((
    "Identity", "ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate", "Brightness", "Color", "Contrast",
    "Sharpness", "Posterize", "Solarize", "AutoContrast", "Equalize", "Invert", "SolarizeAdd", "Hue", "FlipH",
    "FlipV", "Erase", "Grayscale"))}
WARPS = ("ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate")
KERNELS = ("pil", "tensor", "tensor_v1")
# A table row: code, p0 .. p3, relative x, relative y, span, probability (csrc/augment_op.cc)
TABLE_COLUMNS = 9
# timm's rows: how a magnitude becomes the argument (csrc/augment_op.cc), and its 5 uniforms per slot
LEVEL_COLUMNS = 20
LEVEL_DRAWS = 5
RESAMPLE = {"INTERP_NN": 0, "INTERP_LINEAR": 2, "INTERP_CUBIC": 3}   # PIL's numbers, as the operator takes them


def usable(device: str) -> bool:
    """Whether a graph on `device` can run the operator (a CPU graph, the plugin built here)."""
    from . import plugin

    return device == "cpu" and plugin.augment_available()


def call(data, ops=None, params=None, kernels: str = "tensor", fill: Optional[Sequence[float]] = None,
         erase_value: Optional[Sequence[float]] = None, *, table=None, rows=None, draws=None, levels=None,
         level_draws=None, resamples=None):
    """fn.dali_loaders_augment: `ops` int32 (K,) and `params` float32 (K, 4) per sample, or
    `rows` int32 (K,) per sample into `table` (TABLE_COLUMNS values a row, flattened) with
    `draws` float32 (K,) (see csrc/augment_op.cc); `fill` per channel for the warps (None:
    torchvision's fill=None), `erase_value` for Erase."""
    from nvidia.dali import fn

    if kernels not in KERNELS:
        raise ValueError(f"kernels={kernels!r}: one of {', '.join(KERNELS)}")
    extra = {} if fill is None else {"fill": [float(v) for v in fill]}
    if erase_value is not None:
        extra["erase_value"] = [float(v) for v in erase_value]
    for name, value in (("ops", ops), ("params", params), ("rows", rows), ("draws", draws),
                        ("level_draws", level_draws)):
        if value is not None:
            extra[name] = value
    for name, value in (("table", table), ("levels", levels), ("resamples", resamples)):
        if value is not None and len(value):
            extra[name] = [float(v) for v in value]
    return fn.dali_loaders_augment(data, kernels=kernels, **extra)

ERASE_ATTEMPTS = 10   # torchvision's and timm's tries before an image is left as it is
ERASE_NOISE = ("none", "pixel", "channel")


def erase_draws():
    """The uniforms DaliLoadersErase draws its box from, and the seed of its noise: two
    random operators per graph, where the box drawn in DALI arithmetic took about a hundred."""
    from nvidia.dali import fn, types

    draws = fn.random.uniform(range=[0.0, 1.0], shape=[2 * ERASE_ATTEMPTS + 3])
    seed = fn.random.uniform(range=[0, 2 ** 31 - 1], dtype=types.INT32)
    return draws, seed


def erase(data, probability: float, scale: Sequence[float], ratio: Sequence[float],
          value: Optional[Sequence[float]] = None, noise: str = "none"):
    """fn.dali_loaders_erase on float32 CHW/HWC images: one box per image, drawn as
    torchvision's and timm's RandomErasing draw it, set to `value` per channel (None: zeros)
    or to standard normal noise per pixel or per channel."""
    import math

    from nvidia.dali import fn

    if noise not in ERASE_NOISE:
        raise ValueError(f"noise={noise!r}: one of {', '.join(ERASE_NOISE)}")
    draws, seed = erase_draws()
    return fn.dali_loaders_erase(data, draws=draws, noise_seed=seed, probability=float(probability),
                                 scale=[float(s) for s in scale], log_ratio=[math.log(r) for r in ratio],
                                 value=[float(v) for v in value or []], noise=noise, attempts=ERASE_ATTEMPTS)
