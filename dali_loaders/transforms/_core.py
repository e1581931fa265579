"""The translator's core: translators registered by class, the Images in the DALI graph, and
the steps a transform is made of (what _plan.py splits where translation stops).

Pixels stay HWC uint8 in DALI while the twin holds a PIL image or a uint8 tensor. A
horizontal flip, the conversion to float and Normalize are kept pending and done last,
by one crop_mirror_normalize that also writes the output layout, as DALI does fastest.
"""
import copy
import functools
from dataclasses import dataclass, field
from types import BuiltinFunctionType, FunctionType, MethodType
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch

from ._draws import PendingAugment
from .pil_steps import pil_steps
from .subclasses import as_base, library_base
from .view_makers import views_of
from .wrappers import delegate

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


def unconverted_function(function):
    """Marks a function DALI's autograph must not convert: one that builds graph nodes but
    never branches on a DataNode. Converting is slow (it parses and rewrites the source of
    every function it reaches) and is redone at each pipeline build."""
    try:
        from nvidia.dali.pipeline import do_not_convert
    except ImportError:   # no DALI: the package still imports, the twins still run
        return function
    return do_not_convert(function)


def uint8_only(translator):
    """Marks the translator of a step on uint8 pixels (the twin's PIL image or uint8 tensor),
    which refuses it after the conversion to float (Images.uint8_pixels; its arithmetic would
    change there). The plan reads the mark to refuse it before any graph is made, so that the
    loader takes the Python path for it (_plan.py)."""
    @functools.wraps(translator)
    def checked(step, images, *args, **kwargs):
        images.uint8_pixels(step)
        return translator(step, images, *args, **kwargs)
    return refuses_on(lambda step, dtype: after_float(step) if dtype in FLOAT_TYPES else "")(checked)


def uint8_or_float(on_float: Optional[Callable[[Any, "Images"], None]] = None,
                   float_refusal: Callable[[Any], str] = lambda step: ""):
    """Marks the translator of a step on uint8 pixels that `on_float` translates after the
    conversion to float, in the twin's float arithmetic (None: the translator itself does);
    `float_refusal(step)` says why a step is refused there ("" if not), when the plan is made."""
    def mark(translator):
        @functools.wraps(translator)
        def dispatched(step, images, *args, **kwargs):
            if images.is_float and on_float is not None:
                return on_float(step, images)
            if not images.is_float:
                images.uint8_pixels(step)
            return translator(step, images, *args, **kwargs)
        return refuses_on(lambda step, dtype: float_refusal(step) if dtype in FLOAT_TYPES else "")(dispatched)
    return mark


def after_float(step) -> str:
    return (f"{describe(step)} comes after the conversion to float (ToTensor, ToDtype, Normalize), and it is "
            f"translated on uint8 pixels; move it before the conversion")


def refuses_on(refusal: Callable[[Any, torch.dtype], str]):
    """Attaches a check of a step where it stands: refusal(step, the images' dtype before it) ->
    "" or why it is refused there (the plan reads it: _plan.py)."""
    def attach(translator):
        translator.refuse_on = refusal
        return translator
    return attach


# -- the batch in the graph ----------------------------------------------------------------


@dataclass
class Images:
    """The images in the DALI graph, and what the twin would hold at the same step.

    `data` is HWC (or the output layout once `materialized`); `height` and `width` are
    ints or CPU DataNodes (int), so the same arithmetic serves fixed-size arrays and
    decoded files on both devices. `kind` is "pil" or "tensor": the twin's image type,
    which decides torchvision's antialias semantics. Pending: `mirror` (a horizontal flip per
    sample), `scale`/`offset` (out = x * scale + offset, per channel) and `dtype`:
    crop_mirror_normalize does them all in one pass at the end.
    `at_source`: what the source can do to whole batches before DALI sees them (ArraySource:
    pad, crop and flip while `data` is still `source_data`, and draw coins); None for other sources.
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
    at_source: Any = None
    source_data: Any = None
    augment: Optional[PendingAugment] = None   # slots for one DaliLoadersAugment call, run by flush_augment
    sizes: Any = field(default=None, repr=False)   # see size_vector
    sized: Tuple[Any, Any] = field(default=(None, None), repr=False)
    float_pixels: bool = False     # data is float32 in uint8's units, unrounded (a resize after the conversion)

    def size_vector(self):
        """(height, width) as one int32 CPU DataNode, where the graph has one that still holds
        (set by with_size_vector, and no step has set height or width since); else None.
        Window arithmetic on it takes one operator where per-number arithmetic takes two or
        more, and each operator costs the executor a scheduling round a batch."""
        if self.sizes is None or self.height is not self.sized[0] or self.width is not self.sized[1]:
            return None
        return self.sizes

    def with_size_vector(self, sizes) -> None:
        """Sets height and width from `sizes`, an int32 (H, W) CPU DataNode, and keeps it."""
        self.height, self.width = sizes[0], sizes[1]
        self.sizes, self.sized = sizes, (self.height, self.width)

    def branch(self, data=None) -> "Images":
        """These images as Images of their own, for steps that see only part of the graph: one
        view of a view maker (view_makers.py), or a conditional's branch (`data`: the branch's
        samples). Their steps set its fields, never these; nothing the source does to whole
        batches (a crop or flip at the source would be every view's, and a branch holds only
        some of the batch's samples). Files still encoded are decoded by each view, a leading
        crop decoding only its window (the loader decodes once before branching where that
        costs less: loader/build.py's DECODE_ONCE_VIEWS)."""
        view = copy.copy(self)
        view.scale, view.offset, view.decode_args = list(self.scale), list(self.offset), dict(self.decode_args)
        view.at_source = None
        if data is not None:
            view.data = data
        return view

    @property
    def decodes_whole(self) -> bool:
        """Whether the decode is the GPU's, which decodes whole images (see decode_random_crop)."""
        return self.decode_args.get("device") == "mixed"

    def decode(self) -> None:
        """Decodes the files, if not done yet: every step but a leading crop wants pixels."""
        from nvidia.dali import fn

        if self.encoded:
            self.data, self.encoded = self.on_device(fn.decoders.image(self.data, **self.decode_args)), False

    def decode_random_crop(self, area: List[float], ratio: List[float]) -> None:
        """RandomResizedCrop's window, drawn by DALI, and only that window decoded: on the
        CPU. nvJPEG's hardware engine decodes a region only without PIL's fancy chroma
        upsampling (up to 85 levels apart on subsampled JPEGs), and with it a region leaves
        the engine (3x slower); a whole image keeps both. So on the GPU the window is drawn
        as DALI draws it for a region decode, and cut from the whole decoded image."""
        from nvidia.dali import fn

        if self.decodes_whole:
            sizes = self.size_vector()
            anchor, window = fn.random_crop_generator(sizes if sizes is not None else fn.stack(self.height, self.width), random_area=area, random_aspect_ratio=ratio,
                                                      num_attempts=CROP_ATTEMPTS)
            whole = fn.decoders.image(self.data, **self.decode_args)
            self.data = fn.slice(whole, start=anchor, shape=window, axis_names="HW")
        else:
            self.data = self.on_device(fn.decoders.image_random_crop(
                self.data, random_area=area, random_aspect_ratio=ratio, num_attempts=CROP_ATTEMPTS,
                **self.decode_args))
        self.encoded = False

    def decode_region(self, start, shape) -> None:
        """Decodes only a region of each file: int32 (y, x) `start` and `shape` DataNodes."""
        from nvidia.dali import fn

        self.data = self.on_device(fn.decoders.image_slice(self.data, start, shape, axis_names="HW",
                                                           **self.decode_args))
        self.encoded = False

    def on_device(self, decoded):
        """Decoded pixels where the steps run: a CPU decode for GPU steps ("cpu-decode") moves them."""
        return decoded.gpu() if self.device == "gpu" and self.decode_args.get("device") == "cpu" else decoded

    def to_host(self) -> None:
        """The pixels copied to the CPU, where the steps that follow run ("gpu-decode": files
        decoded on the GPU, steps on the CPU; DALI's default executor makes the copy)."""
        self.decode()
        self.flush_augment()
        if self.device == "gpu":
            self.data, self.device = self.data.cpu(), "cpu"

    @property
    def is_float(self) -> bool:
        return self.dtype in FLOAT_TYPES

    @property
    def untouched_at_source(self) -> bool:
        """The data is still the source's own, nothing pending: the source can still act on it."""
        return self.at_source is not None and self.data is self.source_data and self.mirror is None \
            and self.augment is None

    def crop_at_source(self, ltrb: Tuple[int, int, int, int], fill: List[float], height: int, width: int) -> bool:
        """Has the source pad the images and cut a random window of each, a batch at a time in
        its gather, if it can still act on them; else False."""
        if not (self.untouched_at_source and self.at_source.crop(ltrb, fill, height, width)):
            return False
        self.height, self.width = height, width
        return True

    def flip_at_source(self, p: float) -> bool:
        """Has the source flip each image with probability p in its gather (after its crop),
        if it can still act on them; else False."""
        return self.untouched_at_source and self.at_source.flip(p)

    def pending_augment(self, kernels: str, fill: Optional[List[float]], warps: bool,
                        erase_value: Optional[List[float]] = None) -> PendingAugment:
        """The pending slots new ones join (after those of earlier steps); before warps and
        erasing, a pending horizontal flip goes to the call, applied before the slots that follow
        (colour steps commute with it: it stays for crop_mirror_normalize). A new call when the arithmetic, the warps' fill or
        the erased value differs."""
        pending = self.augment
        if pending and (pending.kernels != kernels or (warps and pending.warps and pending.fill != fill)
                        or (erase_value and pending.erase_value and pending.erase_value != erase_value)):
            self.flush_augment()
            pending = None
        if pending is None:
            pending = self.augment = PendingAugment(kernels, fill)
        if warps:
            pending.warps, pending.fill = True, fill
        if erase_value:
            pending.erase_value = erase_value
        if (warps or erase_value) and self.mirror is not None:   # a flip does not commute with the warps: it comes first
            if pending.mirror is not None:   # one flip a call
                self.flush_augment()
                pending = self.augment = PendingAugment(kernels, fill, warps, erase_value)
            pending.mirror, pending.mirror_slot, self.mirror = self.mirror, len(pending.rows), None
        return pending

    def flush_augment(self) -> None:
        """Runs the pending slots, in one call."""
        pending, self.augment = self.augment, None
        if pending and (pending.rows or pending.mirror is not None):
            self.data = pending.call(self.data)

    def flush_mirror(self) -> None:
        """Applies the pending augmentation slots and the pending flip: before any step that a
        flip does not commute with."""
        from nvidia.dali import fn

        self.flush_augment()
        if self.mirror is not None:
            self.data = fn.flip(self.data, horizontal=self.mirror)
            self.mirror = None

    def materialize(self, erase: Optional[dict] = None) -> bool:
        """One pass: the pending flip, conversion and normalization, in `layout`. On a CPU
        graph, our DaliLoadersNormalize (ops/normalize.py: crop_mirror_normalize's output bit
        for bit, several times faster); DALI's crop_mirror_normalize on the GPU, for float16,
        and without the plugin. `erase` (ops/augment.erase_arguments): RandomErasing's box,
        written by our operator as it writes the image, where it makes the float image now;
        returns whether it did (else the caller erases)."""
        from nvidia.dali import fn

        from ..ops import normalize as own

        self.decode()
        self.flush_augment()
        if self.materialized:
            self.flush_mirror()
            return False
        channels = self.channels
        scale = self.scale or [1.0] * channels
        offset = self.offset or [0.0] * channels
        mirror, dtype = 0 if self.mirror is None else self.mirror, dali_dtype(self.dtype)
        mean, std = [-o / s for o, s in zip(offset, scale)], [1.0 / s for s in scale]
        ours = own.usable(self.device, dtype.name, self.layout) and not self.float_pixels   # it takes uint8
        erased = erase is not None and self.is_float and ours
        if ours:
            self.data = own.call(self.data, mirror, dtype, self.layout, *((mean, std) if self.is_float else ()),
                                 erase=erase if erased else None)
        else:
            self.data = fn.crop_mirror_normalize(self.data, mirror=mirror, dtype=dtype, output_layout=self.layout,
                                                 mean=mean, std=std)
        self.mirror, self.scale, self.offset, self.materialized = None, [], [], True
        return erased

    def uint8_pixels(self, step) -> None:
        """Pixel steps run on HWC uint8, as the twin's PIL image or uint8 tensor: refuse them
        after the conversion to float, which would change their arithmetic."""
        if self.is_float or self.materialized:
            raise Untranslatable(after_float(step))


def dali_dtype(dtype: torch.dtype):
    from nvidia.dali import types

    # DALI has no bfloat16: float32 out of DALI, cast by the loader (see output_dtype).
    table = {torch.uint8: types.UINT8, torch.float32: types.FLOAT, torch.float16: types.FLOAT16,
             torch.bfloat16: types.FLOAT, torch.float64: types.FLOAT}
    return table[dtype]


# -- steps: what a transform is made of --------------------------------------------------


# class -> a function giving the steps an object of it runs (a library's composite transform
# whose forward is a fixed sequence of steps): see `expands`
EXPANSIONS: Dict[type, Callable[[Any], List[Any]]] = {}


def expands(cls: type):
    """Registers what an object of `cls` is made of: steps(step) -> the transforms it applies."""
    def decorate(steps):
        EXPANSIONS[cls] = steps
        return steps
    return decorate


def flatten(transform, _depth: int = 0) -> List[Any]:
    """The steps of a transform: Compose (v1 or v2) and nn.Sequential unrolled, recursively, composites
    registered with `expands` replaced by their steps, and wrappers (an object of a user's
    class that only hands the image to a transform it holds, as torchvision's reference
    presets do) replaced by the transform they hold."""
    from torchvision import transforms as v1
    from torchvision.transforms import v2

    if _depth > MAX_NESTING:
        raise ValueError(f"{describe(transform)}: transforms nested over {MAX_NESTING} deep (a wrapper that "
                         f"holds itself?)")
    if transform is None:
        return []
    base, _ = library_base(transform, _library_class)
    if base is not None:   # a subclass that only sets its library class's arguments
        return flatten(as_base(transform, base), _depth + 1)
    if type(transform) in (v1.Compose, v2.Compose):
        return [step for inner in transform.transforms for step in flatten(inner, _depth + 1)]
    if type(transform) is torch.nn.Sequential and not _hooked(transform):   # torchvision's scriptable Compose
        return [step for inner in transform for step in flatten(inner, _depth + 1)]
    if isinstance(transform, (list, tuple)):
        return [step for inner in transform for step in flatten(inner, _depth + 1)]
    if type(transform) in EXPANSIONS:
        return flatten(EXPANSIONS[type(transform)](transform), _depth + 1)
    inner, _ = wrapped(transform)
    if inner is not None:
        return flatten(inner, _depth + 1)
    steps, _ = pil_operations(transform)
    if steps is not None:
        return steps
    return [transform]


MAX_NESTING = 64
# packages whose unregistered classes are transforms in their own right, never read as wrappers
LIBRARIES = {"torchvision", "timm", "albumentations", "torch", "kornia", "PIL", "functools"}
PLAIN_CALLABLES = (FunctionType, BuiltinFunctionType, MethodType)   # no class of the user's


def users_class(step) -> bool:
    """Whether `step` is an object of a class of the user's: not registered, not a library's,
    not a function."""
    return translator_of(step) is None and type(step).__module__.split(".")[0] not in LIBRARIES \
        and not isinstance(step, PLAIN_CALLABLES)


def wrapped(step) -> Tuple[Optional[Any], str]:
    """(the transform a wrapper hands each image to, "") for an object of an unregistered class
    of the user's that only does that; else (None, why it is not read as a wrapper; "" for a
    registered class or a library's)."""
    return delegate(step) if users_class(step) else (None, "")


def pil_operations(step) -> Tuple[Optional[List[Any]], str]:
    """(the steps it equals, "") for an object of a class of the user's whose call is PIL's
    operations behind coins (pil_steps.py); (None, why not) when it uses PIL's ImageOps or
    ImageFilter and does not read; else (None, "")."""
    return pil_steps(step) if users_class(step) else (None, "")


LAZY_TRANSLATORS = {"timm": ("timm", "timm_aug_mix", "timm_crops")}


def translator_of(step) -> Optional[Callable]:
    return _translator_of_class(type(step))


def _translator_of_class(cls: type) -> Optional[Callable]:
    package = cls.__module__.split(".")[0]
    if cls not in TRANSLATORS and package in LAZY_TRANSLATORS:
        import importlib

        for module in LAZY_TRANSLATORS[package]:
            importlib.import_module(f".{module}", __package__)
    return TRANSLATORS.get(cls)


def _library_class(cls: type) -> bool:
    """A class whose objects flatten reads as they are: translated, expanded, or a Compose."""
    from torchvision import transforms as v1
    from torchvision.transforms import v2

    return cls in (v1.Compose, v2.Compose, torch.nn.Sequential) or cls in EXPANSIONS \
        or _translator_of_class(cls) is not None


def _hooked(module: torch.nn.Module) -> bool:
    """Hooks run besides the module's steps: it is then not read as its steps alone."""
    return bool(module._forward_hooks or module._forward_pre_hooks)


def check(step) -> str:
    """Why `step` cannot be translated, or "" if it can (its parameters are checked too)."""
    translator = translator_of(step)
    if translator is None:
        _, why = library_base(step, _library_class)
        if why:
            return f"{describe(step)} has no DALI translation ({why})"
        _, why = wrapped(step)
        if why:   # a class of the user's: no kind of class the translator reads
            views, views_why = views_of(step)
            why += "; nor a view maker: " + (views_why if views is None else "it is one, inside another transform, "
                                             "where it must be the whole transform")
            _, pil_why = pil_operations(step)
            why += f"; nor PIL's operations behind coins: {pil_why}" if pil_why else ""
        return f"{describe(step)} has no DALI translation" + (f" (nor is it a mere wrapper: {why})" if why else "")
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
    if isinstance(step, FunctionType):   # a plain function in a Compose: by its own name
        return f"function {step.__qualname__}"
    name = type(step).__name__
    module = type(step).__module__.split(".")[0]
    return name if module == "torchvision" else f"{module}.{name}"


def is_v1(step) -> bool:
    """A torchvision.transforms (v1) step: some of its tensor kernels round differently from v2's."""
    return not type(step).__module__.startswith("torchvision.transforms.v2")


def dtype_past(step, dtype: torch.dtype) -> torch.dtype:
    """The images' dtype after `step`, from `dtype` before it (its translator's dtype_after)."""
    return getattr(TRANSLATORS[type(step)], "dtype_after", lambda s, d: d)(step, dtype)


def final_dtype(steps) -> torch.dtype:
    dtype = torch.uint8
    for step in steps:
        dtype = dtype_past(step, dtype)
    return dtype


def dtype_after(rule: Callable[[Any, torch.dtype], torch.dtype]):
    """Declares how a conversion step changes the dtype (for the loader's output)."""
    def attach(translator):
        translator.dtype_after = rule
        return translator
    return attach


def apply(steps: Sequence[Any], images: Images, flush: bool = True) -> Images:
    """The translated steps, in order, on `images`; pairs that DALI does in one pass are fused.
    `flush=False` leaves the last steps' augmentation slots pending (for a caller to gate them)."""
    k = 0
    while k < len(steps):
        fused = FUSIONS.get((type(steps[k]).__name__, type(steps[k + 1]).__name__)) if k + 1 < len(steps) else None
        if fused:
            fused(steps[k], steps[k + 1], images)
            k += 2
        else:
            translator = TRANSLATORS[type(steps[k])]
            if not getattr(translator, "augments", False):   # it sees the pixels of the pending slots
                images.flush_augment()
            translator(steps[k], images)
            k += 1
    if flush:
        images.flush_augment()
    return images


FUSIONS: Dict[Tuple[str, str], Callable] = {}


def fuses(first: str, second: str):
    def register(translator):
        FUSIONS[first, second] = translator
        return translator
    return register


CROP_ATTEMPTS = 10  # torchvision's tries before it falls back to a centre crop
