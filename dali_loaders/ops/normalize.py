"""The Python face of DaliLoadersNormalize (csrc/normalize_op.cc): a CPU graph's last step,
HWC uint8 to float32 normalized (or uint8), CHW or HWC, with a per-sample horizontal flip.
It equals crop_mirror_normalize without a crop, bit for bit, and costs a fraction of it on
small images (CIFAR: most of the graph's time was crop_mirror_normalize's)."""
from typing import Optional, Sequence

DTYPES = ("FLOAT", "UINT8")


def usable(device: str, dtype_name: str, layout: str) -> bool:
    """Whether a graph on `device` can end with the operator for this output (a CPU graph,
    float32 or uint8, CHW or HWC, the plugin built here)."""
    from . import plugin

    return device == "cpu" and dtype_name in DTYPES and layout in ("CHW", "HWC") and plugin.normalize_available()


def call(data, mirror, dtype, layout: str, mean: Optional[Sequence[float]] = None,
         std: Optional[Sequence[float]] = None, erase: Optional[dict] = None):
    """fn.dali_loaders_normalize: `mirror` an int32 per sample (a DataNode) or 0; `mean` and
    `std` per channel, as crop_mirror_normalize takes them (float32 output only); `erase`,
    RandomErasing's box on the normalized image (ops/augment.erase_arguments: the same draws
    and arithmetic as DaliLoadersErase after it, without that operator's copy of each image)."""
    from nvidia.dali import fn

    extra = {} if mean is None else {"mean": [float(m) for m in mean], "std": [float(s) for s in std]}
    if not (isinstance(mirror, int) and mirror == 0):
        extra["mirror"] = mirror
    extra.update({f"erase_{name}": value for name, value in (erase or {}).items()})
    return fn.dali_loaders_normalize(data, dtype=dtype, output_layout=layout, **extra)
