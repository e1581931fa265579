"""ElasticTransform (v1 and v2): torchvision's displacement, a field of uniforms per sample
blurred, scaled and added to the identity grid, made into source pixels on the CPU by our
operator (ops/elastic.py) on both devices; the image sampled there as grid_sample samples it
(its mask channel and the fill): by our operator on CPU graphs, where DALI has no remap, and
by DALI's fn.experimental.remap on GPU graphs."""
import numpy as np

from ..ops import elastic as op
from ..ops.noise import sample_seeds
from ._args import fill_values, interp_type, stack
from ._core import Images, Untranslatable, describe, is_v1, refuses, translates, uint8_only
from .affine import fill_blended, ones_channel


def elastic_refusal(step) -> str:
    from nvidia.dali import types

    try:
        interpolation = interp_type(step)
    except Untranslatable as e:
        return str(e).split(": ", 1)[1]
    if interpolation not in (types.INTERP_NN, types.INTERP_LINEAR):
        return f"interpolation {step.interpolation} is not supported (NEAREST, BILINEAR)"
    sigma = [float(s) for s in step.sigma]
    if (sigma[0] > 0) != (sigma[1] > 0):
        return f"sigma={step.sigma!r}: torchvision blurs with both or neither (both > 0, or both 0)"
    if any(not 0 <= f <= 255 for f in fill_values(step, 1)):
        return f"fill={step.fill!r}: levels within 0 .. 255"
    if not op.usable():
        return "needs the augmentation plugin (our C++ operators), which is not built here"
    return ""


@translates("ElasticTransform")
@refuses(elastic_refusal)
@uint8_only
def elastic_transform(step, images: Images) -> None:
    """One field of (2, H, W) uniforms per sample, drawn on the CPU by our operator from a
    seed the graph draws, as torchvision draws its two; v1 and v2 differ only in how the fill
    is blended."""
    from nvidia.dali import types

    images.decode()
    images.flush_mirror()
    fill = fill_values(step, images.channels)
    if len(fill) != images.channels:
        raise Untranslatable(f"{describe(step)}: fill={step.fill!r} has {len(fill)} values for "
                             f"{images.channels}-channel images; give one, or one a channel")
    field = stack(sample_seeds(), images.height, images.width, integer=True)
    xs, ys = op.source_maps(field, [float(a) for a in step.alpha], [float(s) for s in step.sigma])
    nearest = interp_type(step) == types.INTERP_NN
    if images.data.device == "gpu":
        images.data = remapped_on_gpu(images.data, xs.gpu(), ys.gpu(), nearest, is_v1(step), fill)
    else:
        images.data = op.grid_sample(images.data, xs, ys, nearest, is_v1(step), fill)


def remapped_on_gpu(data, xs, ys, nearest: bool, v1: bool, fill):
    """DALI's remap (zeros outside, pixel centres at integers as the maps have them) of the
    image and of a channel of ones, the mask, blended with the fill as the CPU operator does
    (DALI's remap takes 1 or 3 channels: the two are remapped apart)."""
    from nvidia.dali import fn, types

    interpolation = types.INTERP_NN if nearest else types.INTERP_LINEAR
    if nearest and not any(fill):   # zeros outside are the fill
        return fn.experimental.remap(data, xs, ys, interp=interpolation, pixel_origin="center")

    def remap(image):
        return fn.experimental.remap(fn.cast(image, dtype=types.FLOAT), xs, ys, interp=interpolation,
                                     pixel_origin="center")
    fills = types.Constant(np.array(fill, dtype=np.float32).reshape(1, 1, -1))
    return fill_blended(remap(data), remap(ones_channel(data)), fills, v1)
