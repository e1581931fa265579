"""v2's JPEG: each image compressed at a quality drawn from the range (both ends included, as
torch.randint draws it) and decompressed. On CPU graphs DALI's operator encodes and decodes
with libjpeg-turbo as torchvision's encode_jpeg / decode_jpeg and PIL's save / open do, with
the same settings: the same pixels. GPU graphs run DALI's GPU kernel, its own approximation
of the codec (check-gpu measures how far it is from the CPU's)."""
from ._core import Images, Untranslatable, describe, translates, uint8_only


@translates("JPEG")
@uint8_only
def jpeg(step, images: Images) -> None:
    from nvidia.dali import fn, types

    images.decode()
    images.flush_mirror()   # the 8 x 8 blocks sit at the left edge: a flip does not commute
    if images.channels != 3:
        raise Untranslatable(f"{describe(step)} on {images.channels}-channel images: translated for RGB images "
                             f"(DALI's operator compresses RGB); pass python_fallback=True")
    low, high = (int(q) for q in step.quality)
    quality = low if low == high else fn.random.uniform(values=list(range(low, high + 1)), dtype=types.INT32)
    images.data = fn.jpeg_compression_distortion(images.data, quality=quality)
