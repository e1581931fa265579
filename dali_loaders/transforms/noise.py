"""v2's GaussianNoise: noise of mean `mean` and deviation `sigma` (on the 0..1 scale) added to
each pixel, clipped to the image's range, on uint8 or float tensors as torchvision adds it: by
our operator on CPU graphs (ops/noise.py: DALI's CPU normals cost ~45 ns a value), by DALI's
operators on the GPU, for other float types and without the plugin."""
from ..ops import noise as op
from ._core import Images, Untranslatable, dali_dtype, describe, refuses, translates
from ._hsv import mask, where


def gaussian_noise_refusal(step) -> str:
    if not float(step.sigma) >= 0.0:
        return f"sigma={step.sigma!r} (a deviation >= 0)"
    return ""


@translates("GaussianNoise")
@refuses(gaussian_noise_refusal)
def gaussian_noise(step, images: Images) -> None:
    """uint8: mean * 255 + N(0, 1) * sigma * 255 in float32, truncated toward zero (torch's
    cast to int16), added, clamped to 0..255 (or, unclipped, wrapped as torch's cast wraps). Float: the pixels are made (converted and
    normalized as far as the recipe has gone), mean + N(0, 1) * sigma added, clamped to 0..1."""
    from nvidia.dali import fn, types
    from nvidia.dali import math as dmath

    if images.kind == "pil":
        raise Untranslatable(f"{describe(step)} takes tensors, and here the image is a PIL image (torchvision "
                             f"refuses it too); put ToImage before it")
    images.decode()
    images.flush_augment()
    mean, sigma = float(step.mean), float(step.sigma)
    if images.is_float:
        images.materialize()
        if _by_our_operator(images, types.FLOAT):
            images.data = op.gaussian_noise(images.data, mean, sigma, step.clip)
            return
        noisy = images.data + fn.random.normal(images.data, mean=mean, stddev=sigma, dtype=types.FLOAT)
        if step.clip:
            noisy = dmath.clamp(noisy, 0.0, 1.0)
        images.data = fn.cast(noisy, dtype=dali_dtype(images.dtype))
        return
    if _by_our_operator(images, types.UINT8):
        images.data = op.gaussian_noise(images.data, mean * 255.0, sigma * 255.0, step.clip)
        return
    noise = fn.random.normal(images.data, mean=mean * 255.0, stddev=sigma * 255.0, dtype=types.FLOAT)
    toward_zero = where(mask(noise < 0.0), dmath.ceil(noise), dmath.floor(noise))
    noisy = fn.cast(images.data, dtype=types.FLOAT) + toward_zero
    if step.clip:
        noisy = dmath.clamp(noisy, 0.0, 255.0)
    else:   # torch's cast to uint8 wraps around: modulo 256 (exact: whole numbers in float32)
        noisy = noisy - 256.0 * dmath.floor(noisy * (1.0 / 256.0))
    images.data = fn.cast(noisy, dtype=types.UINT8)


def _by_our_operator(images: Images, dali_type) -> bool:
    """Whether our operator adds the noise: on the CPU, to uint8 or float32 data (float64 and
    bfloat16 images are float32 in the graph, as DALI's operators would add it too)."""
    return images.data.device == "cpu" and dali_dtype(images.dtype) == dali_type and op.usable()
