"""The Python face of ElasticTransform's operators (csrc/elastic_op.cc, in the augmentation
library): the source pixels from a field of uniforms (DaliLoadersElasticMaps, CPU, for both
devices' graphs) and the CPU's sample of the image there (DaliLoadersGridSample)."""
from typing import Sequence


def usable() -> bool:
    """Whether graphs can run the operators (the augmentation library built here)."""
    from . import plugin

    return plugin.augment_available()


def kernel_size(sigma: float) -> int:
    """torchvision's: int(8 * sigma + 1), made odd."""
    size = int(8 * sigma + 1)
    return size + 1 if size % 2 == 0 else size


def source_maps(field, alpha: Sequence[float], sigma: Sequence[float]):
    """fn.dali_loaders_elastic_maps: (x, y) float32 (H, W) maps of source pixels (centres at
    integers) from `field`, float32 (2, H, W) uniforms in [-1, 1) per sample on the CPU, or
    int32 (seed, H, W) per sample: the operator draws the field from the seed."""
    from nvidia.dali import fn

    return fn.dali_loaders_elastic_maps(field, alpha=[float(a) for a in alpha], sigma=[float(s) for s in sigma],
                                        sizes=[kernel_size(s) if s > 0 else 1 for s in sigma])


def grid_sample(image, xs, ys, nearest: bool, v1: bool, fill: Sequence[float]):
    """fn.dali_loaders_grid_sample: the HWC uint8 `image` (CPU) sampled at (xs, ys) as
    torchvision's elastic_transform samples it (v1's or v2's blend of `fill`)."""
    from nvidia.dali import fn

    return fn.dali_loaders_grid_sample(image, xs, ys, nearest=bool(nearest), v1=bool(v1),
                                       fill=[float(f) for f in fill])
