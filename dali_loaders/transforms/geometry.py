"""Resize, crops, padding and flips."""
import numbers
from typing import List, Tuple

import numpy as np

from ._args import (
    antialias,
    as_int,
    centre_offset,
    coin,
    crop_window,
    fill_levels,
    fill_values,
    interp_type,
    interpolation_refusal,
    padding_ltrb,
    pair,
    pending_levels,
    random_offset,
    stack,
)
from ._core import (
    CROP_ATTEMPTS,
    Images,
    fuses,
    refuses,
    translates,
)
from .padding_modes import check_mode_padding, mode_pad, padding_mode_refusal

# -- geometry -----------------------------------------------------------------------------


def resized_shape(size, max_size, height, width):
    """torchvision's Resize output (height, width): an int (or 1-sequence) sets the short side,
    the long side scaled and truncated, then both capped by max_size; None (v2) sets the long
    side to max_size; (h, w) is taken as is. Integer arithmetic gives the same truncation as
    torchvision's float division."""
    if size is not None and not (isinstance(size, numbers.Number) or len(size) == 1):
        return pair(size)
    width_is_short = as_int(width <= height)
    long = width_is_short * height + (1 - width_is_short) * width
    short_in = width_is_short * width + (1 - width_is_short) * height
    if size is None:
        new_short, new_long = max_size * short_in // long, max_size
    else:
        short = int(size) if isinstance(size, numbers.Number) else int(size[0])
        new_short, new_long = short, short * long // short_in
    if size is not None and max_size is not None:
        over = as_int(new_long > max_size)
        new_short = over * (max_size * new_short // new_long) + (1 - over) * new_short
        new_long = over * max_size + (1 - over) * new_long
    return (width_is_short * new_long + (1 - width_is_short) * new_short,
            width_is_short * new_short + (1 - width_is_short) * new_long)


def resize_refusal(step) -> str:
    size = step.size
    if size is None and not isinstance(step.max_size, numbers.Integral):
        return "size=None needs max_size, the long side's length"
    if isinstance(size, (list, tuple)) and len(size) == 2 and step.max_size is not None:
        return "max_size with a (height, width) size: torchvision refuses it too"
    return interpolation_refusal(step)


@translates("Resize")
@refuses(resize_refusal)
def resize(step, images: Images) -> None:
    """On uint8 pixels as the twin's PIL image or uint8 tensor; after the conversion to float,
    as torch resizes the float tensor (see resampled)."""
    images.decode()
    images.flush_mirror()
    short = _short_side(step.size)
    if short is not None and step.max_size is None and images.size_vector() is not None \
            and not _is_nearest(step):
        from nvidia.dali import fn, types

        resized = _resized_vector(images.size_vector(), short)
        resampled(step, images, size=fn.cast(resized, dtype=types.FLOAT))
        images.with_size_vector(resized)
        return
    resize_to(step, images, *resized_shape(step.size, step.max_size, images.height, images.width))


def resize_to(step, images: Images, height, width) -> None:
    """Resamples the images to (height, width), ints or int DataNodes, with the step's
    interpolation and antialiasing, as torchvision's resize to that size."""
    shift = nearest_shift(step, images, height, width)
    roi = {} if shift is None else dict(roi_start=stack(*shift), roi_end=stack(images.height + shift[0],
                                                                               images.width + shift[1]))
    resampled(step, images, size=stack(height, width), **roi)
    images.height, images.width = height, width


def resampled(step, images: Images, **geometry) -> None:
    """images.data resized by resample.resize with the step's interpolation and antialiasing,
    for the twin's image: a PIL image or a uint8 tensor, or, after the conversion to float
    (ToTensor, ToDtype), the float tensor that torch resizes without rounding or clamping, so
    the pixels become float (Images.float_pixels; the conversion itself stays pending).
    `geometry`: size, and roi_start / roi_end or window, as resample.resize takes them."""
    from ..ops import resample

    interpolation = interp_type(step)
    images.data = resample.resize(images.data, interp_type=interpolation, antialias=antialias(step, images),
                                  device=images.device, pil_image=images.kind == "pil",
                                  float_pixels=images.is_float,
                                  channels_first=images.materialized and images.layout == "CHW", **geometry)
    images.float_pixels = images.float_pixels or resample.makes_float(interpolation, images.is_float)


def nearest_shift(step, images: Images, height, width):
    """The ROI's move, in source pixels (y, x), that makes fn.resize's NEAREST the twin's;
    None when no move is needed (the plugin, PIL-exact, resizes).

    A tensor twin: torch's "nearest" reads source pixel floor(x * in / out), PIL's (and
    DALI's) floor((x + 0.5) * in / out): the window moves by half an output pixel. Exact
    ties (x * in / out whole) are nudged up by a quarter of the 1 / out spacing of its
    fractions, so float32 rounding cannot pick the pixel below.
    A PIL twin where the plugin does not resize (GPU graphs): PIL reads pixel
    floor((x + 0.5) * in / out), and fn.resize's float32 arithmetic breaks exact ties either
    way; the same quarter-spacing nudge (below the 1 / (2 out) spacing of the fractions, so
    no other pixel changes) breaks every tie up, to the pixel whose left edge the centre
    falls on, as PIL's arithmetic does unless the rounding of its running double sum lands
    just below the tie (see pil_nearest_rounds_down)."""
    from nvidia.dali import types

    from ..ops import resample

    if interp_type(step) != types.INTERP_NN:
        return None
    if images.kind == "tensor":
        return tuple(_ratio(size_in, size_out) * -0.5 + _ratio(0.25, size_out)
                     for size_in, size_out in ((images.height, height), (images.width, width)))
    if resample.uses_plugin(types.INTERP_NN, True, images.device, pil_image=True):
        return None
    return _ratio(0.25, height), _ratio(0.25, width)


def pil_nearest_rounds_down(size_in: int, size_out: int) -> List[int]:
    """The output indices at which PIL's NEAREST reads the pixel below an exact tie: it adds
    in / out to a running double sum `size_out` times, whose rounding lands below some ties
    ((x + 0.5) * in / out whole) and not others. No rule of the sizes alone predicts them, so
    the stock fn.resize (tie up) differs from PIL there: a row or column each."""
    step, where, found = size_in / size_out, size_in / size_out * 0.5, []
    for x in range(size_out):
        if (2 * x + 1) * size_in % (2 * size_out) == 0 and int(where) < (2 * x + 1) * size_in // (2 * size_out):
            found.append(x)
        where += step
    return found


def _is_nearest(step) -> bool:
    """NEAREST: its window moves (nearest_shift), so the vector arithmetic leaves it alone."""
    from nvidia.dali import types

    return interp_type(step) == types.INTERP_NN


@translates("CenterCrop")
def center_crop(step, images: Images) -> None:
    images.decode()
    height, width = pair(step.size)
    if images.size_vector() is not None:
        from nvidia.dali import fn

        images.flush_mirror()
        crop, fill = _pair_constant(height, width), fill_levels(images, [0.0] * images.channels)
        images.data = fn.slice(images.data, start=_centre_offsets(images.size_vector() - crop), shape=crop,
                               axis_names="HW", out_of_bounds_policy="pad", fill_values=fill)
        images.height, images.width = height, width
        return
    crop_window(images, centre_offset(images.height - height), centre_offset(images.width - width),
                height, width, [0.0] * images.channels)


@fuses("Resize", "CenterCrop")
def resize_center_crop(resize_step, crop_step, images: Images) -> None:
    """Resamples only the window CenterCrop keeps: the same grid and filter as resizing the
    whole image, at crop^2 output pixels instead of ~size^2 * aspect (fn.resize's CPU cost
    follows its output size). When the crop is larger than the resize, nothing is fused."""
    from ..ops import resample

    crop_h, crop_w = pair(crop_step.size)
    size = resize_step.size
    short = _short_side(size)
    fits = (short is not None and resize_step.max_size is None and max(crop_h, crop_w) <= short) or \
           (size is not None and short is None and crop_h <= size[0] and crop_w <= size[1])
    if not fits or images.is_float or images.materialized:
        resize(resize_step, images)
        center_crop(crop_step, images)
        return
    interp, smooth = interp_type(resize_step), antialias(resize_step, images)
    if short is not None and resample.uses_plugin(interp, smooth, images.device, images.kind == "pil"):
        sizes, region = images.size_vector(), None
        if images.encoded and sizes is not None:   # first in the recipe: only what the resize reads is decoded
            start, shape = resample.centre_crop_region(sizes, short, (crop_h, crop_w), interp)
            images.decode_region(start, shape)
            region = (sizes, start)
        else:
            images.decode()
            images.flush_mirror()
        images.data = resample.resize_centre_crop(images.data, short, (crop_h, crop_w), interp, region)
        images.height, images.width = crop_h, crop_w
        return
    images.decode()
    images.flush_mirror()
    if short is not None and images.size_vector() is not None and not _is_nearest(resize_step):
        _resize_centre_crop_window(resize_step, images, short, crop_h, crop_w)
        return
    height, width = resized_shape(size, None, images.height, images.width)
    top, left = centre_offset(height - crop_h), centre_offset(width - crop_w)
    scale_y, scale_x = _ratio(images.height, height), _ratio(images.width, width)
    shift_y, shift_x = nearest_shift(resize_step, images, height, width) or (0, 0)
    images.data = resample.resize(images.data, size=[float(crop_h), float(crop_w)],
                                  roi_start=stack(top * scale_y + shift_y, left * scale_x + shift_x),
                                  roi_end=stack((top + crop_h) * scale_y + shift_y, (left + crop_w) * scale_x + shift_x),
                                  interp_type=interp_type(resize_step), antialias=antialias(resize_step, images),
                                  device=images.device, window=(stack(height, width), stack(top, left)),
                                  pil_image=images.kind == "pil")
    images.height, images.width = crop_h, crop_w


def _resize_centre_crop_window(resize_step, images: Images, short: int, crop_h: int, crop_w: int) -> None:
    """The same window as above, worked out on (height, width) vectors: a dozen small CPU
    operators a batch instead of ~80 (each costs the executor a scheduling round, ~0.1 ms)."""
    from ..ops import resample

    crop = _pair_constant(crop_h, crop_w)
    size = images.size_vector()                           # (H, W), int32
    resized = _resized_vector(size, short)
    offset = _centre_offsets(resized - crop, fits=True)   # the crop fits: checked by the caller
    scale = size / resized                                # float32, as the scalar arithmetic's
    images.data = resample.resize(images.data, size=[float(crop_h), float(crop_w)], roi_start=offset * scale,
                                  roi_end=(offset + crop) * scale, interp_type=interp_type(resize_step),
                                  antialias=antialias(resize_step, images), device=images.device,
                                  window=(resized, offset), pil_image=images.kind == "pil")
    images.height, images.width = crop_h, crop_w


def _short_side(size):
    """Resize's size as the short side's length, or None for an (h, w) size or None (v2's
    max_size alone)."""
    if size is None:
        return None
    if isinstance(size, numbers.Number):
        return int(size)
    return int(size[0]) if len(size) == 1 else None


def _resized_vector(sizes, short: int):
    """torchvision's Resize(short) output (H, W) of an int32 (H, W) DataNode: the short side
    `short`, the long one scaled and truncated (integer arithmetic, as resized_shape)."""
    from nvidia.dali import fn

    return sizes * int(short) // fn.reductions.min(sizes)


def _pair_constant(height: int, width: int):
    from nvidia.dali import types

    return types.Constant(np.array([height, width], np.int32))


def _centre_offsets(extra, fits: bool = False):
    """centre_offset of each of an int32 vector of (size - crop): round-half-even of extra / 2
    where the image is larger, -((-extra) // 2) where smaller (torchvision pads, then cuts).
    `fits`: every extra is known to be >= 0."""
    from nvidia.dali import fn, types

    half = extra // 2
    inside = half + (extra & half & 1)   # for extra >= 0; DALI's // truncates toward 0
    if fits:
        return inside
    larger = fn.cast(extra >= 0, dtype=types.INT32)
    return larger * inside - (1 - larger) * ((0 - extra) // 2)


def _ratio(a, b):
    from nvidia.dali import fn, types

    if isinstance(a, numbers.Number) and isinstance(b, numbers.Number):
        return a / b
    return fn.cast(a, dtype=types.FLOAT) / fn.cast(b, dtype=types.FLOAT)


def random_resized_crop_refusal(step) -> str:
    return interpolation_refusal(step)


@translates("RandomResizedCrop")
@refuses(random_resized_crop_refusal)
def random_resized_crop(step, images: Images) -> None:
    """First in a recipe over files, only the crop window is decoded (ROI decode). Else the
    window is cut, then resized as the twin resizes the crop (see resize_to: PIL's or torch's
    arithmetic, on uint8 or, after the conversion to float, on the float tensor); uint8 images
    on GPU graphs, but for NEAREST, take DALI's fn.random_resized_crop."""
    from nvidia.dali import fn

    height, width = pair(step.size)
    area, ratio = [float(s) for s in step.scale], [float(r) for r in step.ratio]
    if images.encoded:
        images.decode_random_crop(area, ratio)
        resampled(step, images, size=[float(height), float(width)])
    elif images.is_float or images.device == "cpu" or _is_nearest(step):
        # the window cut, then resized as torchvision resizes the crop (resize_to: PIL's or
        # torch's arithmetic, torch's nearest grid, the float tensor after the conversion)
        images.flush_mirror()
        sizes = images.size_vector()
        anchor, window = fn.random_crop_generator(sizes if sizes is not None else stack(images.height, images.width,
                                                                                        integer=True),
                                                  random_area=area, random_aspect_ratio=ratio,
                                                  num_attempts=CROP_ATTEMPTS)
        images.data = fn.slice(images.data, start=anchor, shape=window, axis_names="HW")
        images.height, images.width = window[0], window[1]
        resize_to(step, images, height, width)
    else:   # uint8 on the GPU: DALI's crop and resize in one operator
        images.flush_mirror()
        images.data = fn.random_resized_crop(images.data, size=[height, width], random_area=area,
                                             random_aspect_ratio=ratio, num_attempts=CROP_ATTEMPTS,
                                             interp_type=interp_type(step), antialias=antialias(step, images))
    images.height, images.width = height, width


def random_crop_refusal(step) -> str:
    return padding_mode_refusal(step)


def random_crop_padding(step) -> Tuple[int, int, int, int]:
    """(left, top, right, bottom): v2's RandomCrop stores its padding parsed, as
    [left, right, top, bottom]; v1's keeps what it was given."""
    from torchvision.transforms import v2

    if step.padding is None:
        return 0, 0, 0, 0
    if isinstance(step, v2.RandomCrop):
        left, right, top, bottom = step.padding
        return left, top, right, bottom
    return padding_ltrb(step.padding)


@translates("RandomCrop")
@refuses(random_crop_refusal)
def random_crop(step, images: Images) -> None:
    """Pad (padding, then pad_if_needed), then a uniform window: one slice, padded with `fill`;
    or, first on fixed-size arrays, padded and cut by the source, a batch at a time."""
    images.decode()
    crop_h, crop_w = pair(step.size)
    left, top, right, bottom = random_crop_padding(step)
    check_mode_padding(step, images, (left, top, right, bottom))
    if step.padding_mode == "constant" and _crop_at_source(step, images, (left, top, right, bottom),
                                                           crop_h, crop_w):
        return
    if step.padding_mode != "constant":
        _mode_padded_random_crop(step, images, (left, top, right, bottom), crop_h, crop_w)
        return
    height, width = images.height + top + bottom, images.width + left + right
    if step.pad_if_needed:   # torchvision pads both sides of a short axis by the whole shortfall
        grow_h = as_int(height < crop_h) * (crop_h - height)
        grow_w = as_int(width < crop_w) * (crop_w - width)
        top, left, height, width = top + grow_h, left + grow_w, height + 2 * grow_h, width + 2 * grow_w
    crop_window(images, random_offset(height - crop_h) - top, random_offset(width - crop_w) - left,
                crop_h, crop_w, fill_values(step, images.channels))


def _crop_at_source(step, images: Images, ltrb, crop_h: int, crop_w: int) -> bool:
    """CIFAR's pad-and-crop at the cost of one gather per batch (see sources/array_batches.py):
    for fixed sizes, where the padding pad_if_needed adds is known now."""
    if not all(isinstance(v, numbers.Number) for v in (images.height, images.width)):
        return False
    left, top, right, bottom = ltrb
    if step.pad_if_needed:
        grow_h = max(crop_h - (images.height + top + bottom), 0)
        grow_w = max(crop_w - (images.width + left + right), 0)
        left, top, right, bottom = left + grow_w, top + grow_h, right + grow_w, bottom + grow_h
    fits = images.height + top + bottom >= crop_h and images.width + left + right >= crop_w
    levels = pending_levels(images, fill_values(step, images.channels))   # the source pads uint8
    return fits and levels is not None and images.crop_at_source((left, top, right, bottom), levels, crop_h, crop_w)


def _mode_padded_random_crop(step, images: Images, ltrb, crop_h: int, crop_w: int) -> None:
    """RandomCrop with reflect, edge or symmetric padding: the padding built in the graph, then
    a window inside it. pad_if_needed pads by a shortfall known only for fixed sizes."""
    images.flush_mirror()
    mode_pad(images, ltrb, step.padding_mode)
    if step.pad_if_needed:
        if all(isinstance(v, numbers.Number) for v in (images.height, images.width)):
            grow_h, grow_w = max(crop_h - images.height, 0), max(crop_w - images.width, 0)
        else:   # per image, at most the crop's side
            grow_h = as_int(images.height < crop_h) * (crop_h - images.height)
            grow_w = as_int(images.width < crop_w) * (crop_w - images.width)
        mode_pad(images, (grow_w, grow_h, grow_w, grow_h), step.padding_mode, most=(crop_w, crop_h))
    crop_window(images, random_offset(images.height - crop_h), random_offset(images.width - crop_w),
                crop_h, crop_w, [0.0] * images.channels)


@translates("Pad")
@refuses(padding_mode_refusal)
def pad(step, images: Images) -> None:
    images.decode()
    left, top, right, bottom = padding_ltrb(step.padding)
    if step.padding_mode != "constant":
        check_mode_padding(step, images, (left, top, right, bottom))
        images.flush_mirror()
        mode_pad(images, (left, top, right, bottom), step.padding_mode)
        return
    crop_window(images, -top, -left, images.height + top + bottom, images.width + left + right,
                fill_values(step, images.channels))


@translates("RandomHorizontalFlip")
def horizontal_flip(step, images: Images) -> None:
    """Kept pending: crop_mirror_normalize flips for free at the end."""
    images.decode()
    if images.mirror is not None:
        images.flush_mirror()
    if images.materialized:
        from nvidia.dali import fn

        images.data = fn.flip(images.data, horizontal=coin(step.p))
    elif not images.flip_at_source(step.p):   # else on arrays the source draws the coins, a batch at a time
        images.mirror = images.at_source.coin(step.p) if images.at_source is not None else coin(step.p)


@translates("RandomVerticalFlip")
def vertical_flip(step, images: Images) -> None:
    from nvidia.dali import fn

    images.decode()
    images.data = fn.flip(images.data, vertical=coin(step.p), horizontal=0)
