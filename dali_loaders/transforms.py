"""torchvision transforms, run as DALI operators: one function per transform, registered by type.

`plan(transform)` flattens a transform (v1 or v2, a Compose or a single one) into steps and
splits them where translation stops; `apply(steps, images)` builds the DALI graph of the
translated steps. Each translator takes the transform and the `Images` in the graph, and
changes them as the twin's transform would change its image.

Pixels stay HWC uint8 in DALI while the twin holds a PIL image or a uint8 tensor. A
horizontal flip, the conversion to float and Normalize are kept pending and done last,
by one crop_mirror_normalize that also writes the output layout, as DALI does fastest.
"""
import math
import numbers
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

TRANSLATORS: Dict[type, Callable] = {}
FLOAT_TYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


class Untranslatable(ValueError):
    """A transform, or one of its parameters, that has no translation into DALI operators."""


def translates(*names: str):
    """Registers a translator for the torchvision transforms of these class names, v1 and v2."""
    def register(translator):
        for cls in _torchvision_classes(names):
            TRANSLATORS[cls] = translator
        return translator
    return register


def _torchvision_classes(names):
    from torchvision import transforms as v1
    from torchvision.transforms import v2

    return [getattr(module, name) for name in names for module in (v1, v2) if hasattr(module, name)]


def register(cls: type):
    """Registers a translator for any class (the project's own transforms, or a user's)."""
    def decorate(translator):
        TRANSLATORS[cls] = translator
        return translator
    return decorate


def supported_names() -> List[str]:
    return sorted({cls.__name__ for cls in TRANSLATORS})


# -- the batch in the graph ----------------------------------------------------------------


@dataclass
class Images:
    """The images in the DALI graph, and what the twin would hold at the same step.

    `data` is HWC (or the output layout once `materialized`); `height` and `width` are
    ints or CPU DataNodes (int), so the same arithmetic serves fixed-size arrays and
    decoded files on both devices. `kind` is "pil" or "tensor": the twin's image type,
    which decides torchvision's antialias semantics. Pending: `crop` (a window, cut first),
    `mirror` (a horizontal flip per sample), `scale`/`offset` (out = x * scale + offset, per
    channel) and `dtype`: crop_mirror_normalize does them all in one pass at the end.
    `pad_source`: while `data` is still `source_data`, the source can pad the images it feeds
    (numpy, a batch at a time) instead of an operator padding each image (see ArraySource).
    """
    data: Any
    height: Any
    width: Any
    channels: int
    device: str
    kind: str = "pil"
    dtype: torch.dtype = torch.uint8
    mirror: Any = None
    scale: List[float] = field(default_factory=list)
    offset: List[float] = field(default_factory=list)
    layout: str = "CHW"            # the output layout asked for: CHW, or HWC for channels_last
    materialized: bool = False     # data is already converted to `dtype` in `layout`
    encoded: bool = False          # data is still the encoded files (see decode)
    decode_args: dict = field(default_factory=dict)
    crop: Any = None               # (height, width, relative y, relative x), cut by crop_mirror_normalize
    pad_source: Optional[Callable] = None
    source_data: Any = None

    def decode(self) -> None:
        """Decodes the files, if not done yet: every step but a leading crop wants pixels."""
        from nvidia.dali import fn

        if self.encoded:
            self.data, self.encoded = fn.decoders.image(self.data, **self.decode_args), False

    def decode_random_crop(self, area: List[float], ratio: List[float]) -> None:
        """RandomResizedCrop's window, drawn by DALI, and only that window decoded."""
        from nvidia.dali import fn

        self.data = fn.decoders.image_random_crop(self.data, random_area=area, random_aspect_ratio=ratio,
                                                  num_attempts=CROP_ATTEMPTS, **self.decode_args)
        self.encoded = False

    @property
    def is_float(self) -> bool:
        return self.dtype in FLOAT_TYPES

    def pad_at_source(self, ltrb: Tuple[int, int, int, int], fill: List[float]) -> bool:
        """Has the source pad the images, if the data is still the source's own; else False."""
        if self.pad_source is None or self.data is not self.source_data or self.crop is not None:
            return False
        left, top, right, bottom = ltrb
        self.pad_source(ltrb, fill)
        self.height, self.width = self.height + top + bottom, self.width + left + right
        return True

    def flush_crop(self) -> None:
        """Cuts a pending crop window: before any step that must see the cropped pixels."""
        from nvidia.dali import fn

        if self.crop is not None:
            height, width, pos_y, pos_x = self.crop
            self.data = fn.crop(self.data, crop=(height, width), crop_pos_y=pos_y, crop_pos_x=pos_x)
            self.crop = None

    def flush_mirror(self) -> None:
        """Applies the pending geometry (crop, then flip): before any step that a flip does not
        commute with."""
        from nvidia.dali import fn

        self.flush_crop()
        if self.mirror is not None:
            self.data = fn.flip(self.data, horizontal=self.mirror)
            self.mirror = None

    def materialize(self) -> None:
        """One crop_mirror_normalize: the pending flip, conversion and normalization, in `layout`."""
        from nvidia.dali import fn

        if self.materialized:
            self.flush_mirror()
            return
        channels = self.channels
        scale = self.scale or [1.0] * channels
        offset = self.offset or [0.0] * channels
        crop = {}
        if self.crop is not None:
            height, width, pos_y, pos_x = self.crop
            crop = dict(crop=(height, width), crop_pos_y=pos_y, crop_pos_x=pos_x)
        self.data = fn.crop_mirror_normalize(
            self.data, mirror=0 if self.mirror is None else self.mirror, dtype=dali_dtype(self.dtype),
            output_layout=self.layout, mean=[-o / s for o, s in zip(offset, scale)],
            std=[1.0 / s for s in scale], **crop)
        self.crop, self.mirror, self.scale, self.offset, self.materialized = None, None, [], [], True

    def uint8_pixels(self, step) -> None:
        """Pixel steps run on HWC uint8, as the twin's PIL image or uint8 tensor: refuse them
        after the conversion to float, which would change their arithmetic. They see the
        pixels of a pending crop window."""
        if self.is_float or self.materialized:
            raise Untranslatable(f"{describe(step)} comes after the conversion to float (ToTensor, ToDtype, "
                                 f"Normalize); move it before the conversion, or pass python_fallback=True")
        self.flush_crop()


def dali_dtype(dtype: torch.dtype):
    from nvidia.dali import types

    # DALI has no bfloat16: float32 out of DALI, cast by the loader (see output_dtype).
    table = {torch.uint8: types.UINT8, torch.float32: types.FLOAT, torch.float16: types.FLOAT16,
             torch.bfloat16: types.FLOAT, torch.float64: types.FLOAT}
    return table[dtype]


# -- planning: which steps run where ------------------------------------------------------


@dataclass
class Plan:
    translated: List[Any]       # steps DALI runs
    python: List[Any]           # steps from the first untranslatable one on, run per sample in Python
    why: str = ""               # why `python` is not empty

    @property
    def output_dtype(self) -> torch.dtype:
        return final_dtype(self.translated) if not self.python else None


def flatten(transform) -> List[Any]:
    """The steps of a transform: Compose (v1 or v2) unrolled, recursively."""
    from torchvision import transforms as v1
    from torchvision.transforms import v2

    if transform is None:
        return []
    if isinstance(transform, (v1.Compose, v2.Compose)):
        return [step for inner in transform.transforms for step in flatten(inner)]
    if isinstance(transform, (list, tuple)):
        return [step for inner in transform for step in flatten(inner)]
    return [transform]


def plan(transform, python_fallback: bool) -> Plan:
    """Splits the steps at the first one with no translation; raises for it unless python_fallback."""
    steps = flatten(transform)
    for k, step in enumerate(steps):
        reason = check(step)
        if reason:
            if not python_fallback:
                raise ValueError(f"{reason}. Supported: {', '.join(supported_names())}. Or pass "
                                 f"python_fallback=True to run it, and every step after it, in Python")
            return Plan(steps[:k], steps[k:], reason)
    return Plan(steps, [])


def check(step) -> str:
    """Why `step` cannot be translated, or "" if it can (its parameters are checked too)."""
    translator = TRANSLATORS.get(type(step))
    if translator is None:
        return f"{describe(step)} has no DALI translation"
    refusal = getattr(translator, "refuse", None)
    reason = refusal(step) if refusal else ""
    return f"{describe(step)}: {reason}" if reason else ""


def refuses(refusal: Callable[[Any], str]):
    """Attaches a parameter check to a translator: refusal(step) -> "" or why it is refused."""
    def attach(translator):
        translator.refuse = refusal
        return translator
    return attach


def describe(step) -> str:
    name = type(step).__name__
    module = type(step).__module__.split(".")[0]
    return name if module == "torchvision" else f"{module}.{name}"


def is_v1(step) -> bool:
    """A torchvision.transforms (v1) step: some of its tensor kernels round differently from v2's."""
    return not type(step).__module__.startswith("torchvision.transforms.v2")


def final_dtype(steps) -> torch.dtype:
    dtype = torch.uint8
    for step in steps:
        dtype = getattr(TRANSLATORS[type(step)], "dtype_after", lambda s, d: d)(step, dtype)
    return dtype


def dtype_after(rule: Callable[[Any, torch.dtype], torch.dtype]):
    """Declares how a conversion step changes the dtype (for the loader's output)."""
    def attach(translator):
        translator.dtype_after = rule
        return translator
    return attach


def apply(steps: Sequence[Any], images: Images) -> Images:
    """The translated steps, in order, on `images`; pairs that DALI does in one pass are fused."""
    k = 0
    while k < len(steps):
        fused = FUSIONS.get((type(steps[k]).__name__, type(steps[k + 1]).__name__)) if k + 1 < len(steps) else None
        if fused:
            fused(steps[k], steps[k + 1], images)
            k += 2
        else:
            TRANSLATORS[type(steps[k])](steps[k], images)
            k += 1
    return images


FUSIONS: Dict[Tuple[str, str], Callable] = {}


def fuses(first: str, second: str):
    def register(translator):
        FUSIONS[first, second] = translator
        return translator
    return register


# -- arguments shared by several transforms -------------------------------------------------


def interp_type(step, interpolation=None):
    """torchvision's interpolation as DALI's; the others are refused by name."""
    from nvidia.dali import types
    from torchvision.transforms import InterpolationMode

    mode = step.interpolation if interpolation is None else interpolation
    if isinstance(mode, int):   # PIL's constants are accepted by torchvision too
        mode = {0: InterpolationMode.NEAREST, 2: InterpolationMode.BILINEAR, 3: InterpolationMode.BICUBIC}.get(mode, mode)
    elif isinstance(mode, str) and mode in InterpolationMode._value2member_map_:   # v2 may keep the string
        mode = InterpolationMode(mode)
    table = {InterpolationMode.NEAREST: types.INTERP_NN, InterpolationMode.BILINEAR: types.INTERP_LINEAR,
             InterpolationMode.BICUBIC: types.INTERP_CUBIC}
    if mode not in table:
        raise Untranslatable(f"{describe(step)}: interpolation {mode} is not supported (NEAREST, BILINEAR, BICUBIC)")
    return table[mode]


def interpolation_refusal(step) -> str:
    try:
        interp_type(step)
    except Untranslatable as e:
        return str(e).split(": ", 1)[1]
    return ""


def antialias(step, images: Images) -> bool:
    """torchvision resizes a PIL image with antialiasing always; a tensor as `antialias` says."""
    return True if images.kind == "pil" else bool(getattr(step, "antialias", True))


def pair(size) -> Tuple[int, int]:
    """torchvision's (height, width) from an int or a 1- or 2-sequence."""
    if isinstance(size, numbers.Number):
        return int(size), int(size)
    size = list(size)
    return (int(size[0]), int(size[0])) if len(size) == 1 else (int(size[0]), int(size[1]))


def fill_values(step, channels: int) -> List[float]:
    """torchvision's `fill` (a number, a sequence, or v2's {type: fill}) for each channel."""
    fill = step.fill
    if isinstance(fill, dict):   # v2 stores fill per input type
        from torchvision import tv_tensors

        fill = fill.get(tv_tensors.Image, fill.get(next(iter(fill)), 0)) if fill else 0
    if fill is None:
        fill = 0
    if isinstance(fill, numbers.Number):
        return [float(fill)] * channels
    fill = [float(f) for f in fill]
    return fill * channels if len(fill) == 1 else fill


def padding_ltrb(padding) -> Tuple[int, int, int, int]:
    """torchvision's padding: an int, (left/right, top/bottom) or (left, top, right, bottom)."""
    if isinstance(padding, numbers.Number):
        return (int(padding),) * 4
    padding = [int(p) for p in padding]
    if len(padding) == 1:
        return (padding[0],) * 4
    if len(padding) == 2:
        return padding[0], padding[1], padding[0], padding[1]
    return tuple(padding)


def constant_padding_refusal(step) -> str:
    mode = getattr(step, "padding_mode", "constant")
    return "" if mode == "constant" else f"padding_mode={mode!r} is not supported (only 'constant')"


def coin(p: float):
    """Per sample: 1 with probability p, else 0 (a DALI random operator, so it is checkpointed)."""
    from nvidia.dali import fn

    return fn.random.coin_flip(probability=float(p))


def uniform(lo: float, hi: float):
    """Per sample, a float uniform in [lo, hi]; a fixed range (lo == hi) is that number
    (DALI's random.uniform refuses an empty range)."""
    from nvidia.dali import fn

    if not (isinstance(lo, numbers.Number) and isinstance(hi, numbers.Number)):   # e.g. from the image size
        return lo + fn.random.uniform(range=[0.0, 1.0]) * (hi - lo)
    if float(lo) == float(hi):
        return float(lo)
    return fn.random.uniform(range=[float(lo), float(hi)])


def stack(*values, integer: bool = False):
    """A per-sample 1-D tensor (float32, or int32) from numbers or DataNodes."""
    from nvidia.dali import fn, types

    dtype, np_dtype, py = (types.INT32, np.int32, int) if integer else (types.FLOAT, np.float32, float)
    if all(isinstance(v, numbers.Number) for v in values):
        return types.Constant(np.array(values, dtype=np_dtype))
    return fn.stack(*[fn.cast(v, dtype=dtype) if not isinstance(v, numbers.Number) else py(v) for v in values])


def crop_window(images: Images, top, left, height: int, width: int, fill: List[float]) -> None:
    """Cuts height x width from (top, left), which may lie outside the image: padded with `fill`."""
    from nvidia.dali import fn

    images.flush_mirror()
    images.data = fn.slice(images.data, start=stack(top, left, integer=True), shape=stack(height, width, integer=True),
                           axis_names="HW", out_of_bounds_policy="pad", fill_values=fill)
    images.height, images.width = height, width


def half_to_even(extra):
    """int(round(extra / 2)) for extra >= 0, rounding half to even as Python does."""
    half = extra // 2
    return half + (extra - 2 * half) * (half - 2 * (half // 2))


def centre_offset(extra):
    """CenterCrop's offset: round-half-even of extra/2 when the image is larger; when smaller,
    torchvision pads (crop - size) // 2 on the top/left and crops at 0."""
    if isinstance(extra, numbers.Number):
        return int(round(extra / 2)) if extra >= 0 else -((-extra) // 2)
    from nvidia.dali import fn, types

    positive = fn.cast(extra >= 0, dtype=types.INT32)
    return positive * half_to_even(extra) - (1 - positive) * ((0 - extra) // 2)


# -- geometry -----------------------------------------------------------------------------


def resized_shape(size, max_size, height, width):
    """torchvision's Resize output (height, width): an int (or 1-sequence) sets the short side,
    the long side scaled and truncated, then both capped by max_size; (h, w) is taken as is.
    Integer arithmetic gives the same truncation as torchvision's float division."""
    if not (isinstance(size, numbers.Number) or len(size) == 1):
        return pair(size)
    short = int(size) if isinstance(size, numbers.Number) else int(size[0])
    width_is_short = _is(width <= height)
    long = width_is_short * height + (1 - width_is_short) * width
    short_in = width_is_short * width + (1 - width_is_short) * height
    new_short, new_long = short, short * long // short_in
    if max_size is not None:
        over = _is(new_long > max_size)
        new_short = over * (max_size * new_short // new_long) + (1 - over) * new_short
        new_long = over * max_size + (1 - over) * new_long
    return (width_is_short * new_long + (1 - width_is_short) * new_short,
            width_is_short * new_short + (1 - width_is_short) * new_long)


def _is(condition):
    """A comparison of ints or DataNodes as 1 or 0, usable in arithmetic."""
    from nvidia.dali import fn, types

    return int(condition) if isinstance(condition, (bool, np.bool_)) else fn.cast(condition, dtype=types.INT32)


def resize_refusal(step) -> str:
    size = step.size
    if size is None:
        return "size=None (only max_size) is not supported; give size"
    if isinstance(size, (list, tuple)) and len(size) == 2 and step.max_size is not None:
        return "max_size with a (height, width) size: torchvision refuses it too"
    return interpolation_refusal(step)


@translates("Resize")
@refuses(resize_refusal)
def resize(step, images: Images) -> None:
    from dali_loaders import resample

    images.uint8_pixels(step)
    images.decode()
    images.flush_mirror()
    height, width = resized_shape(step.size, step.max_size, images.height, images.width)
    shift = tensor_nearest_shift(step, images, height, width)
    roi = {} if shift is None else dict(roi_start=stack(*shift), roi_end=stack(images.height + shift[0],
                                                                               images.width + shift[1]))
    images.data = resample.resize(images.data, size=stack(height, width), interp_type=interp_type(step),
                                  antialias=antialias(step, images), device=images.device,
                                  pil_image=images.kind == "pil", **roi)
    images.height, images.width = height, width


def tensor_nearest_shift(step, images: Images, height, width):
    """torch's "nearest" reads source pixel floor(x * in / out), PIL's (and DALI's)
    floor((x + 0.5) * in / out): for a tensor twin the window moves by half an output
    pixel, in source pixels, (y, x). None when no move is needed. Exact ties (x * in / out
    whole) are nudged up by a quarter of the 1 / out spacing of its fractions, so float32
    rounding cannot pick the pixel below. The resize then stays on fn.resize: the plugin's
    NEAREST is PIL's."""
    from nvidia.dali import types

    if images.kind != "tensor" or interp_type(step) != types.INTERP_NN:
        return None
    return tuple(_ratio(size_in, size_out) * -0.5 + _ratio(0.25, size_out)
                 for size_in, size_out in ((images.height, height), (images.width, width)))


@translates("CenterCrop")
def center_crop(step, images: Images) -> None:
    images.decode()
    height, width = pair(step.size)
    crop_window(images, centre_offset(images.height - height), centre_offset(images.width - width),
                height, width, [0.0] * images.channels)


@fuses("Resize", "CenterCrop")
def resize_center_crop(resize_step, crop_step, images: Images) -> None:
    """Resamples only the window CenterCrop keeps: the same grid and filter as resizing the
    whole image, at crop^2 output pixels instead of ~size^2 * aspect (fn.resize's CPU cost
    follows its output size). When the crop is larger than the resize, nothing is fused."""
    from dali_loaders import resample

    crop_h, crop_w = pair(crop_step.size)
    size = resize_step.size
    short = size if isinstance(size, numbers.Number) else (size[0] if len(size) == 1 else None)
    fits = (short is not None and resize_step.max_size is None and max(crop_h, crop_w) <= short) or \
           (short is None and crop_h <= size[0] and crop_w <= size[1])
    if not fits or images.is_float or images.materialized:
        resize(resize_step, images)
        center_crop(crop_step, images)
        return
    images.decode()
    images.flush_mirror()
    height, width = resized_shape(size, None, images.height, images.width)
    top, left = centre_offset(height - crop_h), centre_offset(width - crop_w)
    scale_y, scale_x = _ratio(images.height, height), _ratio(images.width, width)
    shift_y, shift_x = tensor_nearest_shift(resize_step, images, height, width) or (0, 0)
    images.data = resample.resize(images.data, size=[float(crop_h), float(crop_w)],
                                  roi_start=stack(top * scale_y + shift_y, left * scale_x + shift_x),
                                  roi_end=stack((top + crop_h) * scale_y + shift_y, (left + crop_w) * scale_x + shift_x),
                                  interp_type=interp_type(resize_step), antialias=antialias(resize_step, images),
                                  device=images.device, window=(stack(height, width), stack(top, left)),
                                  pil_image=images.kind == "pil")
    images.height, images.width = crop_h, crop_w


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
    """First in a recipe over files, only the crop window is decoded (ROI decode)."""
    from nvidia.dali import fn

    from dali_loaders import resample

    images.uint8_pixels(step)
    height, width = pair(step.size)
    area, ratio = [float(s) for s in step.scale], [float(r) for r in step.ratio]
    if images.encoded:
        images.decode_random_crop(area, ratio)
        images.data = resample.resize(images.data, size=[float(height), float(width)], interp_type=interp_type(step),
                                      antialias=antialias(step, images), device=images.device,
                                      pil_image=images.kind == "pil")
    else:
        images.flush_mirror()
        images.data = fn.random_resized_crop(images.data, size=[height, width], random_area=area,
                                             random_aspect_ratio=ratio, num_attempts=CROP_ATTEMPTS,
                                             interp_type=interp_type(step), antialias=antialias(step, images))
    images.height, images.width = height, width


CROP_ATTEMPTS = 10  # torchvision's tries before it falls back to a centre crop


def random_offset(extent):
    """Per sample, an int uniform in [0, extent] (extent an int, or a DataNode >= 0)."""
    from nvidia.dali import fn, math as dmath, types

    if isinstance(extent, numbers.Number):
        return fn.random.uniform(values=list(range(max(int(extent), 0) + 1)), dtype=types.INT32)
    # u * (extent + 1) can round up to extent + 1 in float32: clamped
    drawn = dmath.floor(fn.random.uniform(range=[0.0, 1.0]) * fn.cast(extent + 1, dtype=types.FLOAT))
    return fn.cast(dmath.clamp(drawn, 0.0, fn.cast(extent, dtype=types.FLOAT)), dtype=types.INT32)


def random_crop_refusal(step) -> str:
    return constant_padding_refusal(step)


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
    or, first on fixed-size arrays, padded by the source and cut by crop_mirror_normalize."""
    images.decode()
    crop_h, crop_w = pair(step.size)
    left, top, right, bottom = random_crop_padding(step)
    if _crop_at_the_end(step, images, (left, top, right, bottom), crop_h, crop_w):
        return
    height, width = images.height + top + bottom, images.width + left + right
    if step.pad_if_needed:   # torchvision pads both sides of a short axis by the whole shortfall
        grow_h = _is(height < crop_h) * (crop_h - height)
        grow_w = _is(width < crop_w) * (crop_w - width)
        top, left, height, width = top + grow_h, left + grow_w, height + 2 * grow_h, width + 2 * grow_w
    crop_window(images, random_offset(height - crop_h) - top, random_offset(width - crop_w) - left,
                crop_h, crop_w, fill_values(step, images.channels))


def _crop_at_the_end(step, images: Images, ltrb, crop_h: int, crop_w: int) -> bool:
    """CIFAR's pad-and-crop at the cost of a crop: the source pads the batch in numpy, and the
    window, drawn per sample from the span's whole offsets, is left to crop_mirror_normalize.
    Only for fixed sizes that fit, where the window's offsets are exact in relative terms."""
    fixed = all(isinstance(v, numbers.Number) for v in (images.height, images.width))
    left, top, right, bottom = ltrb
    if not fixed or step.pad_if_needed or images.mirror is not None:
        return False
    span_y, span_x = images.height + top + bottom - crop_h, images.width + left + right - crop_w
    if span_y < 0 or span_x < 0 or not images.pad_at_source(ltrb, fill_values(step, images.channels)):
        return False
    images.crop = (crop_h, crop_w, relative_offset(span_y), relative_offset(span_x))
    images.height, images.width = crop_h, crop_w
    return True


def relative_offset(span: int):
    """Per sample, k / span for k uniform in 0 .. span: a whole offset as a crop position."""
    from nvidia.dali import fn

    return fn.random.uniform(values=[k / span for k in range(span + 1)]) if span else 0.0


@translates("Pad")
@refuses(constant_padding_refusal)
def pad(step, images: Images) -> None:
    images.decode()
    left, top, right, bottom = padding_ltrb(step.padding)
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
    else:
        images.mirror = coin(step.p)


@translates("RandomVerticalFlip")
def vertical_flip(step, images: Images) -> None:
    from nvidia.dali import fn

    images.decode()
    images.flush_crop()
    images.data = fn.flip(images.data, vertical=coin(step.p), horizontal=0)


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
    images.decode()
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


def _to_dtype(step, images: Images, scale: bool) -> None:
    images.decode()
    images.kind = "tensor"
    dtype = target_dtype(step)
    if dtype == torch.uint8:
        if images.is_float:
            raise Untranslatable(f"{describe(step)}: converting float back to uint8 is not supported")
        return
    if images.is_float:
        if images.materialized and dtype != images.dtype:
            raise Untranslatable(f"{describe(step)}: a dtype change after a float step that DALI already "
                                 f"ran is not supported; convert once")
        images.dtype = dtype
    else:
        _to_float(images, dtype, 1 / 255 if scale else 1.0)


@translates("ToDtype")
@refuses(to_dtype_refusal)
@dtype_after(lambda step, dtype: target_dtype(step))
def to_dtype(step, images: Images) -> None:
    _to_dtype(step, images, bool(step.scale))


@translates("ConvertImageDtype")
@refuses(to_dtype_refusal)
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
    if images.materialized:
        images.data = fn.crop_mirror_normalize(images.data, mean=mean, std=std, dtype=dali_dtype(images.dtype),
                                               output_layout=images.layout)
        return
    images.scale = [s / d for s, d in zip(images.scale, std)]
    images.offset = [(o - m) / d for o, m, d in zip(images.offset, mean, std)]


def _per_channel(values, channels: int) -> List[float]:
    values = [float(v) for v in (values if isinstance(values, (list, tuple)) else [values])]
    return values * channels if len(values) == 1 else values


# -- steps that DALI runs per sample in Python (python_fallback=True) ----------------------


def is_albumentations(step) -> bool:
    return type(step).__module__.split(".")[0] == "albumentations"


def as_tensor(image) -> torch.Tensor:
    """A step's output as a CHW tensor: PIL and HWC arrays become uint8 CHW, tensors stay."""
    from PIL import Image

    if isinstance(image, Image.Image):
        from torchvision.transforms.functional import pil_to_tensor

        return pil_to_tensor(image)
    if isinstance(image, np.ndarray):
        image = torch.from_numpy(np.ascontiguousarray(image))
        return image[None] if image.dim() == 2 else image.permute(2, 0, 1)
    return image.as_subclass(torch.Tensor) if isinstance(image, torch.Tensor) else image


def call_step(step, image):
    """One step, handed what it expects: Albumentations an HWC uint8 array (its result is the
    "image" of the dict it returns), torchvision what the step before produced."""
    if is_albumentations(step):
        if not isinstance(image, np.ndarray):
            image = as_tensor(image).permute(1, 2, 0).numpy()
        return step(image=image)["image"]
    if isinstance(image, np.ndarray) and type(step).__name__ != "ToTensor":
        image = as_tensor(image)
    return step(image)


def call_steps(transform, image):
    """The twin's application of a transform: each step in turn (as Compose does)."""
    for step in flatten(transform):
        image = call_step(step, image)
    return image


def seed_everything(seed: int) -> None:
    """Python's, numpy's and torch's generators, set per sample from DALI's checkpointed RNG."""
    import random

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


class PythonSteps:
    """The python_function body: the image as the twin would hold it, the steps, the output
    in the loader's layout."""

    def __init__(self, steps, kind: str, layout_in: str, layout_out: str):
        self.steps, self.kind, self.layout_in, self.layout_out = steps, kind, layout_in, layout_out

    def __call__(self, pixels: np.ndarray, seed: np.ndarray) -> np.ndarray:
        seed = int(seed)
        seed_everything(seed)
        for step in self.steps:
            if hasattr(step, "set_random_seed"):   # Albumentations 2 keeps generators of its own
                step.set_random_seed(seed)
        image = call_steps(self.steps, self._twin_input(pixels))
        out = as_tensor(image)
        if out.dtype == torch.bfloat16:   # numpy has no bfloat16; the loader casts back
            out = out.float()
        out = out.permute(1, 2, 0) if self.layout_out == "HWC" else out
        return np.ascontiguousarray(out.numpy())

    def _twin_input(self, pixels: np.ndarray):
        from PIL import Image

        chw = self.layout_in == "CHW"
        if self.kind == "pil" and pixels.dtype == np.uint8:
            hwc = pixels.transpose(1, 2, 0) if chw else pixels
            return Image.fromarray(hwc[..., 0], "L") if hwc.shape[-1] == 1 else Image.fromarray(hwc)
        tensor = torch.from_numpy(np.array(pixels))
        return tensor if chw else tensor.permute(2, 0, 1)


def run_in_python(steps, images: Images) -> None:
    """The rest of the recipe, per sample in Python inside the pipeline (on the CPU)."""
    from nvidia.dali import fn, types

    layout_out = images.layout
    if images.is_float and not images.materialized:   # the twin holds a float tensor by now
        images.layout = "HWC"
        images.materialize()
    images.flush_mirror()
    layout_in = images.layout if images.materialized else "HWC"
    seeds = fn.random.uniform(range=[0, 2 ** 30], dtype=types.INT32)   # 2**31 - 1 rounds up in float32
    images.data = fn.python_function(images.data, seeds, function=PythonSteps(steps, images.kind, layout_in,
                                                                               layout_out),
                                     batch_processing=False, output_layouts=layout_out)
    images.layout, images.materialized = layout_out, True


_warned = set()


def warn_slow(recipe: Plan) -> None:
    """Once per kind of step and process: which step makes the loader slow, and why."""
    name = describe(recipe.python[0])
    if name not in _warned:
        _warned.add(name)
        warnings.warn(f"{recipe.why}: it and the {len(recipe.python) - 1} step(s) after it run per sample in "
                      f"Python inside the DALI pipeline, on the CPU (python_fallback=True). This is much "
                      f"slower than the translated steps", RuntimeWarning, stacklevel=4)


def needs_conditionals(recipe: Plan) -> bool:
    """Whether the graph has per-sample `if`s: DALI then needs enable_conditionals."""
    return any(getattr(TRANSLATORS[type(step)], "branches", False) for step in recipe.translated)


def branches(translator):
    """Marks a translator that uses `if` on DataNodes (DALI's conditional execution)."""
    translator.branches = True
    return translator


# -- the project's own transforms -------------------------------------------------------------


def _cutout_translator():
    from .recipes import Cutout

    @register(Cutout)
    def cutout(step, images: Images) -> None:
        """The square is zeroed after normalization, as in the paper: on the output itself."""
        from nvidia.dali import fn, types

        images.materialize()
        centre = fn.stack(random_offset(images.height - 1), random_offset(images.width - 1))
        corner = fn.cast(centre - step.length // 2, dtype=types.FLOAT)
        images.data = fn.erase(images.data, anchor=corner, shape=[float(step.length)] * 2, axis_names="HW",
                               fill_value=0.0)


_cutout_translator()


# -- colour ---------------------------------------------------------------------------------


def to_uint8(values):
    """Float pixels back to uint8 as the twin stores them: PIL's blend and torchvision's
    tensor kernels both truncate (a clamp, then a cast that drops the fraction)."""
    from nvidia.dali import fn, math as dmath, types

    return fn.cast(dmath.floor(dmath.clamp(values, 0.0, 255.0)), dtype=types.UINT8)


def as_float(data):
    from nvidia.dali import fn, types

    return fn.cast(data, dtype=types.FLOAT)


def luma(data, images: Images):
    """The grey image (float, HW1) each twin computes from uint8 pixels: PIL's convert("L")
    in 16-bit fixed point, rounded; torchvision's tensors 0.2989 R + 0.587 G + 0.114 B in
    float32, truncated. A 1-channel image is its own grey."""
    from nvidia.dali import fn, math as dmath, types

    if images.channels == 1:
        return as_float(data)
    if images.kind == "pil":
        r, g, b = (fn.cast(data[:, :, k:k + 1], dtype=types.INT32) for k in range(3))
        return as_float((r * 19595 + g * 38470 + b * 7471 + 32768) // 65536)
    r, g, b = (as_float(data[:, :, k:k + 1]) for k in range(3))
    return dmath.floor(r * 0.2989 + g * 0.587 + b * 0.114)


def blend(data, other, factor, images: Images):
    """torchvision's blend of the image with `other` (0 for brightness, the grey mean for
    contrast, the grey image for saturation), in each twin's order of float operations."""
    pixels = as_float(data)
    if images.kind == "pil":   # Image.blend(degenerate, image, factor)
        return to_uint8(other + factor * (pixels - other))
    return to_uint8(pixels * factor + other * (1.0 - factor))


def adjust_brightness(data, factor, images: Images):
    return blend(data, 0.0, factor, images)


def adjust_contrast(data, factor, images: Images):
    """A blend with the mean grey: PIL rounds the mean to an integer, tensors keep it float."""
    from nvidia.dali import fn, math as dmath

    mean = fn.reductions.mean(luma(data, images), axis_names="HWC")
    if images.kind == "pil":
        mean = dmath.floor(mean + 0.5)
    return blend(data, mean, factor, images)


def adjust_saturation(data, factor, images: Images):
    """A blend with the grey image; a grey image has no saturation to change."""
    if images.channels == 1:
        return data
    return blend(data, luma(data, images), factor, images)


def adjust_hue(data, factor, images: Images, v1: bool = False):
    """torchvision's hue shift in HSV, in each twin's arithmetic: PIL's 8-bit HSV shifted by
    int(factor * 255) levels (wrapping), or the tensor kernels' float HSV (v1's and v2's
    differ in a few roundings). A grey image has no hue."""
    from nvidia.dali import fn, types

    if images.channels == 1:
        return data
    r, g, b = (fn.cast(data[:, :, k:k + 1], dtype=types.FLOAT) for k in range(3))
    if images.kind == "pil":
        h, s, v = pil_rgb_to_hsv(r, g, b)
        h = h + pil_hue_levels(factor)
        rgb = pil_hsv_to_rgb(h - 256.0 * _mask(h >= 256.0), s, v)
        return fn.cat(*(fn.cast(c, dtype=types.UINT8) for c in rgb), axis=2)
    h, s, v = tensor_rgb_to_hsv(*(c / 255.0 if v1 else c * (1.0 / 255.0) for c in (r, g, b)), v1=v1)
    h = h + factor
    h = h - _mask(h >= 1.0) + _mask(h < 0.0)   # torch's remainder(h, 1.0), h in [-0.5, 1.5)
    return fn.cat(*(to_uint8(c * 255.999) for c in tensor_hsv_to_rgb(h, s, v, v1)), axis=2)


def _mask(condition):
    """A comparison as 0.0 / 1.0, to select by arithmetic (exact for finite values)."""
    from nvidia.dali import fn, types

    return fn.cast(condition, dtype=types.FLOAT)


def _select(*pairs):
    """sum(mask * value) over (mask, value) pairs of which exactly one mask is 1: that value."""
    out = None
    for mask, value in pairs:
        out = mask * value if out is None else out + mask * value
    return out


def _where(mask, yes, no):
    return mask * yes + (1.0 - mask) * no


def _double(x):
    from nvidia.dali import fn, types

    return fn.cast(x, dtype=types.FLOAT64)


def _single(x):
    from nvidia.dali import fn, types

    return fn.cast(x, dtype=types.FLOAT)


def _hue_case_masks(top, r, g):
    """Which channel holds the maximum, as torchvision's and PIL's HSV pick it: r, else g, else b."""
    is_r = _mask(top == r)
    is_g = _mask(top == g) * (1.0 - is_r)
    return is_r, is_g, 1.0 - is_r - is_g


def _sector_masks(i):
    """sector = i mod 6 (i in 0..6) as six masks."""
    masks = [_mask(i == float(k)) for k in range(6)]
    masks[0] = masks[0] + _mask(i == 6.0)
    return masks


def _sector_rgb(sector, v, p, q, t):
    """(r, g, b) of the HSV sector: (v,t,p) (q,v,p) (p,v,t) (p,q,v) (t,p,v) (v,p,q)."""
    m0, m1, m2, m3, m4, m5 = sector
    return (_select((m0 + m5, v), (m1, q), (m2 + m3, p), (m4, t)),
            _select((m0, t), (m1 + m2, v), (m3, q), (m4 + m5, p)),
            _select((m0 + m1, p), (m2, t), (m3 + m4, v), (m5, q)))


def pil_rgb_to_hsv(r, g, b):
    """PIL's convert("HSV") of integer r, g, b (float32): the ratios in float, the hue's
    scaling in double, H and S truncated to integers (returned as float64)."""
    from nvidia.dali import math as dmath

    top, bottom = dmath.max(dmath.max(r, g), b), dmath.min(dmath.min(r, g), b)
    spread = top - bottom
    s = spread / (top + _mask(top == 0.0))
    rc, gc, bc = ((top - c) / (spread + _mask(spread == 0.0)) for c in (r, g, b))
    is_r, is_g, is_b = _hue_case_masks(top, r, g)
    h = _select((is_r, bc - gc), (is_g, _single(_double(rc) + 2.0 - bc)), (is_b, _single(_double(gc) + 4.0 - rc)))
    h = _double(h) / 6.0 + 1.0
    h = _double(_single(h - _mask(h >= 1.0)))
    return dmath.floor(h * 255.0), dmath.floor(_double(s) * 255.0), _double(top)


def pil_hsv_to_rgb(h, s, v):
    """PIL's convert("RGB") of integer h, s, v (float64): the sector's fraction in float,
    p, q, t in double, rounded to integers."""
    from nvidia.dali import math as dmath

    x = h * 6.0 / 255.0
    i = dmath.floor(x)
    f = _single(x - i)
    fs = f * _single(s)
    p = dmath.floor(v * (1.0 - s / 255.0) + 0.5)
    q = dmath.floor(v * (1.0 - _double(fs) / 255.0) + 0.5)
    t = dmath.floor(v * (1.0 - _double(_single(s) - fs) / 255.0) + 0.5)
    return _sector_rgb(_sector_masks(i), v, p, q, t)


def pil_hue_levels(factor):
    """torchvision's shift of PIL's 8-bit hue: int(factor * 255) in double (towards zero), mod 256."""
    from nvidia.dali import math as dmath

    if isinstance(factor, numbers.Number):
        return float(int(float(np.float32(factor)) * 255) % 256)
    x = _double(factor) * 255.0
    negative = _mask(x < 0.0)
    return _where(negative, dmath.ceil(x) + 256.0, dmath.floor(x))


def tensor_rgb_to_hsv(r, g, b, v1: bool):
    """torchvision's float32 rgb -> hsv of a tensor (hue in [0, 1)); v1 divides by 6, v2
    multiplies by 1/6."""
    from nvidia.dali import math as dmath

    top, bottom = dmath.max(dmath.max(r, g), b), dmath.min(dmath.min(r, g), b)
    same = _mask(top == bottom)
    spread = top - bottom
    s = spread / _where(same, 1.0, top)
    rc, gc, bc = ((top - c) / _where(same, 1.0, spread) for c in (r, g, b))
    is_r, is_g, is_b = _hue_case_masks(top, r, g)
    h = _select((is_r, bc - gc), (is_g, rc + 2.0 - bc), (is_b, gc + 4.0 - rc))
    h = (h / 6.0 if v1 else h * (1.0 / 6.0)) + 1.0
    return h - _mask(h >= 1.0), s, top


def tensor_hsv_to_rgb(h, s, v, v1: bool):
    """torchvision's float32 hsv -> rgb of a tensor, p, q, t clamped to [0, 1] (v1 and v2
    group the products differently)."""
    from nvidia.dali import math as dmath

    h6 = h * 6.0
    i = dmath.floor(h6)
    f = h6 - i
    if v1:
        p, q, t = v * (1.0 - s), v * (1.0 - s * f), v * (1.0 - s * (1.0 - f))
    else:
        p, q, t = (1.0 - s) * v, (1.0 - s * f) * v, (s * f + (1.0 - s)) * v
    p, q, t = (dmath.clamp(c, 0.0, 1.0) for c in (p, q, t))
    return _sector_rgb(_sector_masks(i), v, p, q, t)


JITTERS = {"brightness": adjust_brightness, "contrast": adjust_contrast, "saturation": adjust_saturation,
           "hue": adjust_hue}


@translates("ColorJitter")
@branches
def color_jitter(step, images: Images) -> None:
    """Each factor uniform in its range, the adjustments in a random order, as torchvision does."""
    from functools import partial
    from itertools import permutations

    from nvidia.dali import fn, types

    images.uint8_pixels(step)
    images.decode()
    jitters = dict(JITTERS, hue=partial(adjust_hue, v1=is_v1(step)))
    active = [name for name in jitters if getattr(step, name) is not None]
    factors = {name: uniform(*getattr(step, name)) for name in active}
    orders = list(permutations(range(len(active))))
    order = fn.random.uniform(values=list(range(len(orders))), dtype=types.INT32) if len(orders) > 1 else None
    data = images.data
    for position in range(len(active)):
        if order is None:
            data = jitters[active[0]](data, factors[active[0]], images)
            continue
        chosen = fn.lookup_table(order, keys=list(range(len(orders))), dtype=types.INT32,
                                 values=[o[position] for o in orders])
        data = _one_of(chosen, 0, len(active) - 1, [jitters[name] for name in active], data,
                       [factors[name] for name in active], images)
    images.data = data


def _one_of(chosen, lo: int, hi: int, jitters, data, factors, images: Images):
    """jitters[chosen](data, factors[chosen]) per sample, as a binary tree of DALI conditionals."""
    if lo == hi:
        return jitters[lo](data, factors[lo], images)
    mid = (lo + hi) // 2
    if chosen <= mid:
        out = _one_of(chosen, lo, mid, jitters, data, factors, images)
    else:
        out = _one_of(chosen, mid + 1, hi, jitters, data, factors, images)
    return out


def grayscale_refusal(step) -> str:
    channels = getattr(step, "num_output_channels", 3)
    return "" if channels in (1, 3) else f"num_output_channels={channels} (1 or 3)"


def _grey_channels(data, channels: int, images: Images):
    """The twin's grey image as uint8, 1 or 3 channels."""
    from nvidia.dali import fn, types

    grey = fn.cast(luma(data, images), dtype=types.UINT8)
    return grey if channels == 1 else fn.cat(grey, grey, grey, axis=2)


@translates("Grayscale")
@refuses(grayscale_refusal)
def grayscale(step, images: Images) -> None:
    images.uint8_pixels(step)
    images.decode()
    if images.channels == 3:
        images.data = _grey_channels(images.data, step.num_output_channels, images)
    elif step.num_output_channels == 3:
        from nvidia.dali import fn

        images.data = fn.cat(images.data, images.data, images.data, axis=2)
    images.channels = step.num_output_channels


@translates("RandomGrayscale")
@branches
def random_grayscale(step, images: Images) -> None:
    """Keeps the number of channels, as torchvision does."""
    images.uint8_pixels(step)
    images.decode()
    if images.channels == 1:
        return
    data = images.data
    if coin(step.p):
        data = _grey_channels(data, 3, images)
    images.data = data


@translates("GaussianBlur")
def gaussian_blur(step, images: Images) -> None:
    """One sigma per image for both axes, uniform in the range, as torchvision draws it; the
    kernel (width, height) and the border (reflect-101) are torchvision's."""
    from nvidia.dali import fn

    images.uint8_pixels(step)
    images.decode()
    kernel_x, kernel_y = step.kernel_size if not isinstance(step.kernel_size, int) else (step.kernel_size,) * 2
    sigma = uniform(*step.sigma) if step.sigma[0] != step.sigma[1] else float(step.sigma[0])
    images.data = fn.gaussian_blur(images.data, window_size=[int(kernel_y), int(kernel_x)], sigma=sigma)


# -- composition -----------------------------------------------------------------------------

SHAPE_KEEPING = {"ColorJitter", "GaussianBlur", "RandomGrayscale", "RandomHorizontalFlip", "RandomVerticalFlip",
                 "RandomRotation", "RandomAffine", "RandomApply"}


def random_apply_refusal(step) -> str:
    for inner in flatten(list(step.transforms)):
        if type(inner).__name__ not in SHAPE_KEEPING:
            return (f"{describe(inner)} inside it: only steps that keep the image's size and type are "
                    f"translated there ({', '.join(sorted(SHAPE_KEEPING))})")
        reason = check(inner)
        if reason:
            return reason
    return ""


@translates("RandomApply")
@refuses(random_apply_refusal)
@branches
def random_apply(step, images: Images) -> None:
    from dataclasses import replace

    images.uint8_pixels(step)
    images.decode()
    images.flush_mirror()
    data = images.data
    if coin(step.p):
        inner = replace(images, data=data)
        apply(flatten(list(step.transforms)), inner)
        inner.flush_mirror()
        data = inner.data
    images.data = data


# -- rotation and affine warps ---------------------------------------------------------------


def inverse_affine(angle, translate, scale, shear, center):
    """torchvision's _get_inverse_affine_matrix, per sample, as a 2x3 output->input matrix.
    `angle` (clockwise) and `shear` are in degrees; numbers or DataNodes."""
    from nvidia.dali import fn

    rot, shear_x, shear_y = angle * (math.pi / 180), shear[0] * (math.pi / 180), shear[1] * (math.pi / 180)
    cos, sin, tan = _trig("cos"), _trig("sin"), _trig("tan")
    a = cos(rot - shear_y) / cos(shear_y)
    b = -cos(rot - shear_y) * tan(shear_x) / cos(shear_y) - sin(rot)
    c = sin(rot - shear_y) / cos(shear_y)
    d = -sin(rot - shear_y) * tan(shear_x) / cos(shear_y) + cos(rot)
    m = [d / scale, -b / scale, -c / scale, a / scale]
    (cx, cy), (tx, ty) = center, translate
    shift_x = m[0] * (-cx - tx) + m[1] * (-cy - ty) + cx
    shift_y = m[2] * (-cx - tx) + m[3] * (-cy - ty) + cy
    return fn.reshape(stack(m[0], m[1], shift_x, m[2], m[3], shift_y), shape=[2, 3])


def _trig(name: str):
    """math.<name> for numbers (fixed parameters), DALI's for DataNodes (drawn per sample)."""
    from nvidia.dali import math as dmath

    def function(x):
        return getattr(math, name)(x) if isinstance(x, numbers.Number) else getattr(dmath, name)(x)
    return function


def warp_refusal(step) -> str:
    from torchvision.transforms import InterpolationMode

    mode = step.interpolation
    mode = InterpolationMode(mode) if isinstance(mode, str) else mode
    if mode not in (InterpolationMode.NEAREST, InterpolationMode.BILINEAR, 0, 2):
        return f"interpolation {mode} is not supported (NEAREST, BILINEAR)"
    if getattr(step, "expand", False):
        return "expand=True is not supported"
    fill = fill_values(step, 3)
    if len(set(fill)) > 1:
        return f"fill={step.fill!r}: one value for every channel only"
    return ""


def warp(step, images: Images, angle, translate=(0, 0), scale=1.0, shear=(0.0, 0.0)) -> None:
    """Nearest: DALI's warp is the twins' (pixel centres mapped back, the fill where the
    source pixel is outside). Bilinear: each twin's own border and rounding (see below)."""
    from nvidia.dali import fn, types

    images.uint8_pixels(step)
    images.decode()
    images.flush_mirror()
    center = step.center if step.center is not None else (images.width * 0.5, images.height * 0.5)
    matrix = inverse_affine(angle, translate, scale, shear, center)
    fill = fill_values(step, 1)[0]
    if interp_type(step) == types.INTERP_NN:
        images.data = fn.warp_affine(images.data, matrix=matrix, fill_value=fill, interp_type=types.INTERP_NN,
                                     inverse_map=True)
    elif images.kind == "pil":
        images.data = pil_bilinear_warp(images.data, matrix, fill)
    else:
        images.data = tensor_bilinear_warp(images.data, matrix, fill, v1=is_v1(step))


def _ones_channel(data):
    """An HW1 uint8 image of ones, the size of `data`."""
    from nvidia.dali import fn, types

    return fn.cast(data[:, :, 0:1] >= 0, dtype=types.UINT8)


def pil_bilinear_warp(data, matrix, fill: float):
    """PIL's bilinear transform: where the mapped pixel centre falls inside the image, the
    neighbours clamped to the border (never blended with the fill) and the result truncated;
    elsewhere the fill. The inside test is the nearest warp's, which is PIL's."""
    from nvidia.dali import fn, math as dmath, types

    inside = fn.warp_affine(_ones_channel(data), matrix=matrix, fill_value=0, interp_type=types.INTERP_NN,
                            inverse_map=True)
    clamped = fn.warp_affine(data, matrix=matrix, interp_type=types.INTERP_LINEAR, inverse_map=True,
                             dtype=types.FLOAT)   # no fill_value: DALI clamps to the border
    return fn.cast(_where(_mask(inside > 0), dmath.floor(clamped), fill), dtype=types.UINT8)


def tensor_bilinear_warp(data, matrix, fill: float, v1: bool):
    """torchvision's grid_sample with zeros outside, and a channel of ones warped alongside
    as the mask: out = mask * warped + (1 - mask) * fill (v2 groups it as
    (warped - fill) * mask + fill), rounded half to even. A pixel partly outside is thus
    blended twice: its outside neighbours count as 0, then the mask weighs it again."""
    from nvidia.dali import fn, types

    channels = fn.cat(data, _ones_channel(data), axis=2)
    warped = fn.warp_affine(channels, matrix=matrix, fill_value=0, interp_type=types.INTERP_LINEAR,
                            inverse_map=True, dtype=types.FLOAT)
    image, mask = warped[:, :, 0:-1], warped[:, :, -1:]
    out = image * mask + (1.0 - mask) * fill if v1 else (image - fill) * mask + fill
    return fn.cast(_round_half_even(out), dtype=types.UINT8)


def _round_half_even(x):
    """torch.round of x >= 0."""
    from nvidia.dali import math as dmath

    nearest = dmath.floor(x + 0.5)
    nearest = nearest - _mask(nearest - x > 0.5)   # x + 0.5 rounded up to an integer (x just below 0.5)
    tie_to_odd = _mask(nearest - x == 0.5) * (nearest - 2.0 * dmath.floor(nearest * 0.5))
    return nearest - tie_to_odd


@translates("RandomRotation")
@refuses(warp_refusal)
def random_rotation(step, images: Images) -> None:
    """Counter-clockwise by an angle uniform in `degrees` (torchvision's affine turns clockwise)."""
    warp(step, images, -uniform(*step.degrees))


@translates("RandomAffine")
@refuses(warp_refusal)
def random_affine(step, images: Images) -> None:
    """torchvision's get_params, drawn per sample: the translation in whole pixels."""
    from nvidia.dali import math as dmath

    translate = (0, 0)
    if step.translate is not None:
        translate = tuple(dmath.floor(uniform(-t * side, t * side) + 0.5)
                          for t, side in zip(step.translate, (images.width, images.height)))
    scale = uniform(*step.scale) if step.scale is not None else 1.0
    shear = (0.0, 0.0)
    if step.shear is not None:
        shear = (uniform(step.shear[0], step.shear[1]),
                 uniform(step.shear[2], step.shear[3]) if len(step.shear) == 4 else 0.0)
    warp(step, images, uniform(*step.degrees), translate, scale, shear)
