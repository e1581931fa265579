"""Conversions to tensors and dtypes, and Normalize: kept pending for the final crop_mirror_normalize."""
from typing import List, Optional

import torch

from ._core import (
    FLOAT_TYPES,
    Images,
    Untranslatable,
    dali_dtype,
    describe,
    dtype_after,
    is_v1,
    refuses,
    refuses_on,
    register,
    translates,
    uint8_only,
)
from .color import repeat_channel

# -- conversion and normalization ----------------------------------------------------------


def _to_float(images: Images, dtype: torch.dtype, factor: float) -> None:
    channels = images.channels
    images.scale = [s * factor for s in (images.scale or [1.0] * channels)]
    images.offset = [o * factor for o in (images.offset or [0.0] * channels)]
    images.dtype = dtype


@translates("ToTensor")
@dtype_after(lambda step, dtype: torch.float32)
def to_tensor(step, images: Images) -> None:
    images.decode()
    images.kind = "tensor"
    if not images.is_float:
        _to_float(images, torch.float32, 1 / 255)


@translates("PILToTensor", "ToImage")
def to_image(step, images: Images) -> None:
    """The twin holds a uint8 tensor from here on. Files stay undecoded: a crop that follows
    (RandomResizedCrop, Resize + CenterCrop) then decodes only its window, as it would after
    a PIL image (the pixels are the same: the decode does not depend on the twin's type)."""
    images.kind = "tensor"


def target_dtype(step) -> Optional[torch.dtype]:
    dtype = step.dtype
    if isinstance(dtype, dict):   # v2: {type: dtype}
        from torchvision import tv_tensors

        dtype = dtype.get(tv_tensors.Image, dtype.get("others"))
    return dtype


def to_dtype_refusal(step) -> str:
    dtype = target_dtype(step)
    if dtype not in FLOAT_TYPES + (torch.uint8,):
        return f"dtype {dtype} is not supported (float32, float16, bfloat16, float64, uint8)"
    return ""


def back_to_uint8_refusal(step, dtype: torch.dtype) -> str:
    """Where the plan sees it: the loader then takes the Python path, not an error at the first batch."""
    if dtype in FLOAT_TYPES and target_dtype(step) == torch.uint8:
        return f"{describe(step)}: converting float back to uint8 is not supported"
    return ""


def _to_dtype(step, images: Images, scale: bool) -> None:
    images.kind = "tensor"
    dtype = target_dtype(step)
    if dtype == torch.uint8:   # nothing to do to uint8 pixels: files may stay undecoded (see to_image)
        if images.is_float:
            raise Untranslatable(f"{describe(step)}: converting float back to uint8 is not supported")
        return
    images.decode()
    if images.is_float:
        if images.materialized and dtype != images.dtype:
            raise Untranslatable(f"{describe(step)}: a dtype change after a float step that DALI already "
                                 f"ran is not supported; convert once")
        images.dtype = dtype
    else:
        _to_float(images, dtype, 1 / 255 if scale else 1.0)


@translates("ToDtype")
@refuses(to_dtype_refusal)
@refuses_on(back_to_uint8_refusal)
@dtype_after(lambda step, dtype: target_dtype(step))
def to_dtype(step, images: Images) -> None:
    _to_dtype(step, images, bool(step.scale))


@translates("ConvertImageDtype")
@refuses(to_dtype_refusal)
@refuses_on(back_to_uint8_refusal)
@dtype_after(lambda step, dtype: target_dtype(step))
def convert_image_dtype(step, images: Images) -> None:
    _to_dtype(step, images, True)


@translates("Normalize")
def normalize(step, images: Images) -> None:
    from nvidia.dali import fn

    if not images.is_float:
        raise Untranslatable(f"{describe(step)} needs a float image: put ToTensor or ToDtype(torch.float32, "
                             f"scale=True) before it, as torchvision does")
    mean, std = _per_channel(step.mean, images.channels), _per_channel(step.std, images.channels)
    if images.channels == 1 and len(mean) == len(std) == 3 and not is_v1(step) and not getattr(step, "inplace", False):
        # v2's (image - mean) / std broadcasts a 1-channel image to three
        repeat_channel(images)
    elif not len(mean) == len(std) == images.channels:
        raise ValueError(f"{describe(step)} has {len(mean)} means and {len(std)} stds for a {images.channels}-channel "
                         f"image, where torchvision raises: give one mean and one std per channel")
    if images.materialized:
        images.data = fn.crop_mirror_normalize(images.data, mean=mean, std=std, dtype=dali_dtype(images.dtype),
                                               output_layout=images.layout)
        return
    images.scale = [s / d for s, d in zip(images.scale, std)]
    images.offset = [(o - m) / d for o, m, d in zip(images.offset, mean, std)]


def _per_channel(values, channels: int) -> List[float]:
    """A number, a sequence or a tensor (as timm passes them) as one float per channel."""
    import numpy as np

    if isinstance(values, torch.Tensor):
        values = values.detach().cpu().double().numpy()
    values = [float(v) for v in np.asarray(values, dtype=np.float64).ravel()]
    return values * channels if len(values) == 1 else values


@translates("ToPureTensor")
def to_pure_tensor(step, images: Images) -> None:
    """v2's unwrapping of tv_tensors into plain tensors: the loader's output is one already."""
    del step, images   # a body of a docstring alone: AutoGraph fails to convert it, and warns


@register(torch.nn.Identity)
@translates("Identity")
def identity(step, images: Images) -> None:
    """v2's Identity, and torch's: nothing to do."""
    del step, images   # as to_pure_tensor


PIL_MODES = {1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}   # to_pil_image's mode for uint8 images of so many channels


@translates("ToPILImage")
@uint8_only
def to_pil_image(step, images: Images) -> None:
    """The twin holds a PIL image from here on (the steps after take PIL's arithmetic); the
    pixels are the same. After the conversion to float (torchvision truncates x * 255) the
    step takes the Python path."""
    if images.kind == "pil":
        raise Untranslatable(f"{describe(step)} takes a tensor or an array, and here the image is a PIL image "
                             f"(torchvision refuses it too); take it out")
    mode = getattr(step, "mode", None)
    if mode is not None and mode != PIL_MODES.get(images.channels):
        raise Untranslatable(f"{describe(step)}: mode={mode!r} for {images.channels}-channel uint8 images, where "
                             f"torchvision makes {PIL_MODES.get(images.channels)!r}; leave mode out")
    images.kind = "pil"
