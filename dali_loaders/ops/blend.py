"""MixUp's blend of a float32 batch in one pass of C (csrc/blend_images.cc, through ctypes):
each image times its weight plus its partner's times the other weight, rounded as numpy and
torch round (two products, then their sum), where numpy makes three passes over the batch
and two of its size in memory. Available when the normalization plugin is (ops/plugin.py)."""
import ctypes

import numpy as np
import torch


def usable() -> bool:
    """Whether the compiled function is here (the plugin built and loaded, not turned off)."""
    from . import plugin

    return plugin.normalize_available() and _function() is not None


def _function():
    from . import plugin

    pointer, i64, f32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_float
    return plugin.c_function(plugin.NORMALIZE, "dali_loaders_blend_images",
                             [pointer, i64, i64, pointer, f32, f32, pointer])


def dense(images: torch.Tensor) -> bool:
    """Whether each image of the CPU float32 batch is one block of memory after the last (the
    contiguous or the channels_last layout), which the blend reads as flat images."""
    return images.device.type == "cpu" and images.dtype == torch.float32 and images.dim() >= 1 and (
        images.is_contiguous() or (images.dim() == 4 and images.is_contiguous(memory_format=torch.channels_last)))


def blend_into(out: torch.Tensor, images: torch.Tensor, partners, w_self: float, w_partner: float) -> torch.Tensor:
    """out[i] = images[i] * w_self + images[partners[i]] * w_partner (float32 weights, each
    product rounded, then the sum); `out` laid out as `images` (torch.empty_like makes one)."""
    if not dense(images) or out.stride() != images.stride() or out.shape != images.shape or out.dtype != images.dtype:
        raise ValueError("blend_into: images must be a dense CPU float32 batch and out laid out like it")
    partners = np.ascontiguousarray(partners, dtype=np.int64)
    count = images.shape[0]
    if partners.shape != (count,):
        raise ValueError(f"blend_into: one partner per image ({count}), got {partners.shape}")
    per_image = images[0].numel() if count else 0
    failed = _function()(images.data_ptr(), count, per_image, partners.ctypes.data, w_self, w_partner, out.data_ptr())
    if failed:
        raise IndexError(f"blend_into: partner {partners[failed - 1]} of image {failed - 1} is outside the "
                         f"{count} images")
    return out
