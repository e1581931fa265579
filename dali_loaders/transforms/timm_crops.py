"""timm's keep-ratio resize and the crops that follow it (create_transform's crop_mode="border"
for evaluation, train_crop_mode="rkrc" / "rkrr" for training): ResizeKeepRatio,
CenterCropOrPad and RandomCropOrPad, translated; and TrimBorder (crop_border_pixels). Sizes in timm's arithmetic: Python doubles
(float64 in the graph), rounded half to even as Python's round(); the random scale and aspect
drawn per sample at timm's rates; padding constant (per-channel fill), reflect or symmetric."""
import math
from types import SimpleNamespace

from timm.data import transforms as timm_transforms

from ._args import (
    as_float64,
    as_int,
    centre_offset,
    coin,
    crop_window,
    fill_values,
    interpolation_refusal,
    is_number,
    random_offset,
    uniform,
)
from ._core import Images, refuses, register
from ._hsv import mask, where
from ._placement import branches_when
from .geometry import resize_to
from .padding_modes import mode_pad, padding_mode_refusal
from .timm import interpolation_modes, random_interpolation, resampled_either_way

# -- ResizeKeepRatio ---------------------------------------------------------------------------


def resize_keep_ratio_refusal(step) -> str:
    for mode in interpolation_modes(step):
        why = interpolation_refusal(SimpleNamespace(interpolation=mode))
        if why:
            return why
    return ""


def _round_half_even(x):
    """Python's round() of a float64 DataNode >= 0, as int32."""
    from nvidia.dali import fn, types
    from nvidia.dali import math as dmath

    whole = dmath.floor(x)
    rest = x - whole
    odd = whole - 2.0 * dmath.floor(whole * 0.5)
    up = as_int(rest > 0.5) + as_int(rest == 0.5) * fn.cast(odd, dtype=types.INT32)
    return fn.cast(whole, dtype=types.INT32) + up


def _fixed_size(step, height: int, width: int):
    """timm's get_params for an image of known size and no random scale or aspect."""
    ratio_h, ratio_w = height / step.size[0], width / step.size[1]
    ratio = max(ratio_h, ratio_w) * step.longest + min(ratio_h, ratio_w) * (1. - step.longest)
    return round(height * 1. / ratio), round(width * 1. / ratio)


def _drawn_size(step, images: Images):
    """timm's get_params per sample: the ratio that fits the target (longest / shortest side
    mixed by `longest`), a scale factor with probability random_scale_prob (1 / sqrt of it with
    random_scale_area), an aspect factor's square root with probability random_aspect_prob."""
    from nvidia.dali import math as dmath

    longest = float(step.longest)
    if is_number(images.height) and is_number(images.width):   # in Python, as timm
        ratio_h, ratio_w = images.height / step.size[0], images.width / step.size[1]
        ratio = as_float64(max(ratio_h, ratio_w) * longest + min(ratio_h, ratio_w) * (1. - longest))
    else:
        height, width = as_float64(images.height), as_float64(images.width)
        ratio_h, ratio_w = height / as_float64(step.size[0]), width / as_float64(step.size[1])
        ratio = dmath.max(ratio_h, ratio_w) * as_float64(longest) + dmath.min(ratio_h, ratio_w) * as_float64(1. - longest)
    factor_h = factor_w = as_float64(1.0)
    if step.random_scale_prob > 0:
        scale = as_float64(uniform(*(float(r) for r in step.random_scale_range)))
        if step.random_scale_area:
            scale = as_float64(1.0) / dmath.sqrt(scale)
        factor_h = factor_w = where(mask(coin(min(float(step.random_scale_prob), 1.0))), scale, as_float64(1.0))
    if step.random_aspect_prob > 0:
        low, high = (math.log(float(r)) for r in step.random_aspect_range)
        aspect = dmath.sqrt(dmath.exp(as_float64(uniform(low, high))))
        aspect = where(mask(coin(min(float(step.random_aspect_prob), 1.0))), aspect, as_float64(1.0))
        factor_h, factor_w = factor_h / aspect, factor_w * aspect
    height, width = as_float64(images.height), as_float64(images.width)
    return _round_half_even(height * factor_h / ratio), _round_half_even(width * factor_w / ratio)


@register(timm_transforms.ResizeKeepRatio)
@refuses(resize_keep_ratio_refusal)
@branches_when(random_interpolation)   # interpolation="random": bilinear or bicubic per image
def resize_keep_ratio(step, images: Images) -> None:
    images.decode()
    images.flush_mirror()
    fixed = is_number(images.height) and is_number(images.width) and step.random_scale_prob <= 0 \
        and step.random_aspect_prob <= 0
    height, width = _fixed_size(step, images.height, images.width) if fixed else _drawn_size(step, images)
    modes = interpolation_modes(step)
    if len(modes) == 1:
        resize_to(SimpleNamespace(interpolation=modes[0]), images, height, width)
        return
    images.data = resampled_either_way(
        images, modes, lambda part, mode: resize_to(SimpleNamespace(interpolation=mode), part, height, width))
    images.height, images.width = height, width


# -- the crops -------------------------------------------------------------------------------


def _mode_padded(step, images: Images, ltrb) -> None:
    """Pads by amounts that may differ per image (each at most the crop's side), in the step's
    mode (not constant)."""
    crop_h, crop_w = step.size
    mode_pad(images, ltrb, step.padding_mode, most=(crop_w, crop_h))


def _positive_part(x):
    """max(x, 0) for an int or an int DataNode."""
    return max(x, 0) if is_number(x) else as_int(x > 0) * x


@register(timm_transforms.CenterCropOrPad)
@refuses(padding_mode_refusal)
def center_crop_or_pad(step, images: Images) -> None:
    """Where the image is smaller, padded (the odd pixel after), then the centre window;
    constant padding is the window's own fill."""
    images.decode()
    images.flush_mirror()
    crop_h, crop_w = step.size
    if step.padding_mode != "constant":
        grow_h, grow_w = _positive_part(crop_h - images.height), _positive_part(crop_w - images.width)
        _mode_padded(step, images, (grow_w // 2, grow_h // 2, (grow_w + 1) // 2, (grow_h + 1) // 2))
    crop_window(images, centre_offset(images.height - crop_h), centre_offset(images.width - crop_w), crop_h, crop_w,
                fill_values(step, images.channels))


def _signed_offset(extra):
    """timm's copysign(randint(0, |extra|), extra): a window start inside the image where it is
    larger, a padding before it where it is smaller."""
    if is_number(extra):
        offset = random_offset(abs(extra))
        return offset if extra >= 0 else 0 - offset
    sign = 2 * as_int(extra >= 0) - 1
    return random_offset(extra * sign) * sign


@register(timm_transforms.RandomCropOrPad)
@refuses(padding_mode_refusal)
def random_crop_or_pad(step, images: Images) -> None:
    images.decode()
    images.flush_mirror()
    crop_h, crop_w = step.size
    top, left = _signed_offset(images.height - crop_h), _signed_offset(images.width - crop_w)
    if step.padding_mode == "constant":
        crop_window(images, top, left, crop_h, crop_w, fill_values(step, images.channels))
        return
    before_h, before_w = _positive_part(0 - top), _positive_part(0 - left)
    after_h, after_w = _positive_part(top + crop_h - images.height), _positive_part(left + crop_w - images.width)
    _mode_padded(step, images, (before_w, before_h, after_w, after_h))
    crop_window(images, top + before_h, left + before_w, crop_h, crop_w, [0.0] * images.channels)


@register(timm_transforms.TrimBorder)
def trim_border(step, images: Images) -> None:
    """border_size pixels cut from every side, as timm cuts them (its left offset is capped by
    the height, as timm's is)."""
    images.decode()
    border = int(step.border_size)
    height, width = images.height, images.width
    crop_window(images, border - _positive_part(border - height), border - _positive_part(border - height),
                _positive_part(height - 2 * border), _positive_part(width - 2 * border), [0.0] * images.channels)
