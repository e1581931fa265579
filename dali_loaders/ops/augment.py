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
RESAMPLE = {"INTERP_NN": 0, "INTERP_LINEAR": 2, "INTERP_CUBIC": 3}   # PIL's numbers, as the operator takes them


def usable(device: str) -> bool:
    """Whether a graph on `device` can run the operator (a CPU graph, the plugin built here)."""
    from . import plugin

    return device == "cpu" and plugin.augment_available()


def call(data, ops, params, kernels: str, fill: Optional[Sequence[float]] = None,
         erase_value: Optional[Sequence[float]] = None):
    """fn.dali_loaders_augment: `ops` int32 (K,) and `params` float32 (K, 4) per sample; `fill`
    per channel for the warps (None: torchvision's fill=None), `erase_value` for Erase."""
    from nvidia.dali import fn

    if kernels not in KERNELS:
        raise ValueError(f"kernels={kernels!r}: one of {', '.join(KERNELS)}")
    extra = {} if fill is None else {"fill": [float(v) for v in fill]}
    if erase_value is not None:
        extra["erase_value"] = [float(v) for v in erase_value]
    return fn.dali_loaders_augment(data, ops=ops, params=params, kernels=kernels, **extra)
