"""The translator's resize: PIL's exact arithmetic on the CPU where the plugin covers it,
DALI's fn.resize everywhere else.

After the conversion to float (`float_pixels`), torchvision resizes a float tensor: torch's
antialiased kernel, unrounded and unclamped. The plugin's FLOAT mode computes it on CPU graphs
(within float32's rounding of torch's); elsewhere fn.resize, in float, does it approximately.

DALI's CPU fn.resize (antialiased, uint8) costs about 5x the plugin and is only close to
PIL; the plugin (dali_loaders/csrc, built by plugin.py) equals PIL's Image.resize bit for
bit. It serves CPU graphs for antialiased BILINEAR and BICUBIC, which is what torchvision
runs on a PIL image, and on a tensor with antialias=True, and NEAREST when the twin holds a
PIL image (`pil_image=True`): fn.resize picks another pixel than PIL at exact ties (up to
~1/2 of the pixels at some scales). NEAREST on a tensor (torch's grid, see
transforms.geometry.nearest_shift), antialias=False and every GPU graph keep the stock
operator, so a GPU graph never needs the plugin.
"""
from typing import Any, Optional, Tuple


def resize(data, size, interp_type, antialias: bool, roi_start=None, roi_end=None, device: str = "cpu",
           window: Optional[Tuple[Any, Any]] = None, pil_image: bool = False, float_pixels: bool = False,
           channels_first: bool = False):
    """fn.resize(data, size=, roi_start=, roi_end=, interp_type=, antialias=) or its PIL-exact
    twin. `window`, when given, is (resized_size, window_start): the output is the `size`
    window at window_start of the whole image resized to resized_size, as the ROI describes;
    the plugin computes it from these integers, so that it equals PIL's resize then crop.
    `pil_image`: the twin resizes a PIL image, so NEAREST is PIL's too. `float_pixels`: the
    twin resizes a float tensor (see makes_float): float32 out, in the input's units (uint8's or
    float32 ones), unrounded. `channels_first`: the data is CHW (the converted image), which
    the plugin takes in float only."""
    from nvidia.dali import fn, types

    floats = makes_float(interp_type, float_pixels)
    if (floats or not channels_first) and uses_plugin(interp_type, antialias, device, pil_image):
        extra = {"dtype": types.FLOAT} if floats else {}
        return fn.dali_loaders_resize(data, size=size, filter=_FILTERS[_name(interp_type)],
                                      pillow_major=pillow_major(), **_geometry(roi_start, roi_end, window), **extra)
    roi = {} if roi_start is None else {"roi_start": roi_start, "roi_end": roi_end}
    extra = {"dtype": types.FLOAT} if floats else {}
    return fn.resize(data, size=size, interp_type=interp_type, antialias=antialias, **roi, **extra)


def makes_float(interp_type, float_pixels: bool) -> bool:
    """Whether a resize of a float tensor's pixels gives float ones: NEAREST only picks pixels,
    the same on uint8 as on their float conversion, so it keeps the input's type."""
    return float_pixels and _name(interp_type) != "INTERP_NN"


def resize_centre_crop(data, short_side: int, crop, interp_type, region=None):
    """The plugin's torchvision Resize(short_side) then CenterCrop(crop), the geometry worked
    out per image inside the operator (uses_plugin must hold): a graph that computed it from
    the image's shape took ~50 small arithmetic operators, ~0.1 ms a batch each. `region`:
    (sizes, start) when `data` holds only a region of each image (see centre_crop_region)."""
    from nvidia.dali import fn

    where = {} if region is None else dict(image_size=region[0], region_start=region[1])
    return fn.dali_loaders_resize(data, pillow_major=pillow_major(), **_centre_crop(short_side, crop, interp_type),
                                  **where)


def centre_crop_region(sizes, short_side: int, crop, interp_type):
    """(start, shape), int32 (y, x): the region of each image, of int32 (H, W) `sizes`, that
    resize_centre_crop reads (the window and its filter's reach). Decoded alone, it gives the
    same output (DALI's region decode is the whole decode's region); on the CPU a decode of
    256 -> 224's window costs ~3/4 of the whole one's."""
    from nvidia.dali import fn

    return fn.dali_loaders_resize_region(sizes, **_centre_crop(short_side, crop, interp_type))


def _centre_crop(short_side: int, crop, interp_type) -> dict:
    return dict(size=[float(c) for c in crop], short_side=int(short_side), filter=_FILTERS[_name(interp_type)])


_FILTERS = {"INTERP_LINEAR": "bilinear", "INTERP_CUBIC": "bicubic", "INTERP_NN": "nearest"}


def uses_plugin(interp_type, antialias: bool, device: str, pil_image: bool = False) -> bool:
    """torchvision's PIL resize is antialiased (for NEAREST the flag means nothing): the
    translator passes antialias=True for a PIL twin."""
    from ..ops import plugin

    name = _name(interp_type)
    if name == "INTERP_NN" and not pil_image:
        return False
    return device == "cpu" and antialias and name in _FILTERS and plugin.available()


def _name(interp_type) -> str:
    return getattr(interp_type, "name", str(interp_type))


def _geometry(roi_start, roi_end, window) -> dict:
    if window is not None:
        resized_size, window_start = window
        return {"resized_size": resized_size, "window_start": window_start}
    return {} if roi_start is None else {"roi_start": roi_start, "roi_end": roi_end}


def pillow_major() -> int:
    """The installed Pillow's major version: Pillow 13 changed the order of the two passes."""
    import PIL

    return int(PIL.__version__.split(".")[0])
