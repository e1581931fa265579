"""The operations of the AutoAugment family as DALI operators on HWC uint8 pixels, each
(data, param) -> data in the arithmetic the twin computes (PIL or torchvision's tensors), and
torchvision's magnitude -> param for each: shared by the conditional graphs (auto_augment.py,
DALI's auto_aug choosing one operation per sample) and the chained ones (augment_chain.py,
every operation on every sample, each with its own parameters).
"""
import contextlib
import math
import re
import warnings

import numpy as np

from ._args import fill_values, interp_type, stack
from ._core import Images, unconverted_function
from .color import luma, to_uint8

RENAMED = re.compile(r"`nvidia\.dali\.fn\.experimental\.\w+` is now deprecated")
ZERO_PROBABILITY = r"The augmentation `\w+` in policy `.*` is used with probability 0"


@contextlib.contextmanager
def quiet_dali():
    """DALI's auto_aug calls operators DALI has since renamed (fn.experimental.equalize), and
    warns of the probability-0 steps that torchvision's policies have: not the user's concern.
    DALI issues the first under a filter of its own ("default"), so no filter can silence it:
    those two are dropped as they are shown, every other warning is shown as it would be."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=ZERO_PROBABILITY)
        show = warnings.showwarning

        def show_unless_renamed(message, category, *args, **kwargs):
            if not (issubclass(category, DeprecationWarning) and RENAMED.search(str(message))):
                show(message, category, *args, **kwargs)

        warnings.showwarning = show_unless_renamed
        yield


# -- the operations: (data, param) -> data, on HWC uint8 ----------------------------------------


def warp(images: Images, step, inverse_matrix):
    """Output pixel centres mapped back into the input, as PIL's transform and torchvision's
    grid do; the fill and interpolation are torchvision's (defaults: 0 and NEAREST)."""
    from nvidia.dali import fn

    return lambda data, matrix: fn.warp_affine(data, matrix=inverse_matrix(matrix), inverse_map=True,
                                              fill_value=fill_values(step, 1)[0], interp_type=interp_type(step))


def shear_matrix(axis: int):
    """torchvision shears by atan(m) degrees about (0, 0): the inverse map, in numpy."""
    from torchvision.transforms.functional import _get_inverse_affine_matrix

    def matrix(magnitude):
        shear = [0.0, 0.0]
        shear[axis] = math.degrees(math.atan(magnitude))
        return np.array(_get_inverse_affine_matrix([0.0, 0.0], 0.0, [0.0, 0.0], 1.0, shear),
                        dtype=np.float32).reshape(2, 3)
    return matrix


def rotation_matrix(images: Images):
    """Counter-clockwise by `angle` degrees about the image centre, as F.rotate: the inverse map
    (2, 3). One operator (DALI's own rotation transform), where its float32 arithmetic took
    fourteen; angle 0 gives the identity exactly."""
    from nvidia.dali import fn

    def matrix(angle):
        if isinstance(images.width, (int, float)) and isinstance(images.height, (int, float)):
            center = [images.width * 0.5, images.height * 0.5]
        else:
            center = fn.stack(images.width * 0.5, images.height * 0.5)
        return fn.transforms.rotation(angle=angle, center=center)
    return matrix


def translation_matrix(axis: int, scale):
    """By int(m) pixels, truncated toward 0 as torchvision does; `scale` turns a magnitude
    relative to the image size into pixels (1 when the magnitudes are in pixels already)."""
    from nvidia.dali import fn

    def matrix(magnitude):
        shift = [0.0, 0.0]
        shift[axis] = 0.0 - whole_pixels(magnitude * scale)
        return fn.reshape(fn.stack(1.0, 0.0, shift[0], 0.0, 1.0, shift[1]), shape=[2, 3])
    return matrix


def whole_pixels(pixels):
    """int(pixels), as torchvision makes a translation whole: toward 0 (float). DALI's % of
    floats is C's fmod, whose remainder takes the sign of `pixels`."""
    return pixels - pixels % 1.0


def blend(degenerate, data, factor):
    """PIL's ImageEnhance and torchvision's _blend: degenerate + factor * (image - degenerate),
    truncated to uint8 (both truncate; neither rounds)."""
    # with 0 (brightness) the same numbers: x - 0 and 0 + y are x and y exactly
    mixed = factor * data if isinstance(degenerate, float) and degenerate == 0.0 else \
        degenerate + factor * (data - degenerate)
    return to_uint8(mixed)


def brightness(data, factor):
    return blend(0.0, data, factor)


def color(images: Images, grey=None):
    """A blend with the grey image: `grey`, where the caller has it (luma of the same pixels)."""
    def op(data, factor):
        if images.channels == 1:
            return data
        return blend(luma(data, images) if grey is None else grey, data, factor)
    return op


def contrast(images: Images, grey=None):
    """A blend with the mean grey level; `grey` as color's."""
    def op(data, factor):
        return blend(mean_grey(images, luma(data, images) if grey is None else grey), data, factor)
    return op


def mean_grey(images: Images, grey):
    """The mean grey level, (1, 1, 1): PIL rounds it, torchvision's tensors do not."""
    from nvidia.dali import fn
    from nvidia.dali import math as dmath

    mean = fn.reductions.mean(grey, axis_names="HWC", keep_dims=True)
    return dmath.floor(mean + 0.5) if images.kind == "pil" else mean


def sharpen(images: Images):
    """torchvision's adjust_sharpness: a blend with the image smoothed by PIL's SMOOTH kernel,
    whose 1-pixel border keeps the input; the smoothed image is rounded to uint8 first."""
    from nvidia.dali import fn, types

    def op(data, factor):
        return blend(fn.cast(smoothed(images, data), dtype=types.FLOAT), data, factor)   # the blend subtracts it
    return op


def smoothed(images: Images, data):
    """The image smoothed by PIL's SMOOTH kernel inside its 1-pixel border, itself on the
    border (uint8)."""
    from nvidia.dali import fn

    inner = smoothed_inside(data)
    # the change smoothing makes inside the border, padded with 0 to the image's size as the
    # graph knows it on the CPU (data.shape() of GPU pixels would be a GPU -> CPU edge, which
    # DALI's executors stall on or refuse); added to the image it gives the smoothed image
    # inside and the image itself on the border, exactly: uint8 arithmetic wraps modulo 256
    # and the result is a level
    change = fn.slice(inner - data[1:-1, 1:-1], start=[-1, -1], shape=stack(images.height, images.width, integer=True),
                      axis_names="HW", out_of_bounds_policy="pad", fill_values=0)
    return data + change


def smoothed_inside(data):
    """The image smoothed by PIL's SMOOTH kernel, inside its 1-pixel border (uint8, 2 pixels
    less each way)."""
    from nvidia.dali import fn

    kernel = np.array([[1, 1, 1], [1, 5, 1], [1, 1, 1]], dtype=np.float32) / 13
    # uint8 out: DALI rounds to nearest, which is PIL's half up here since a sum of whole
    # numbers over 13 is never within float error of a half
    return fn.filter(data, kernel, mode="valid")


def solarize(data, threshold):
    """Pixels at or above the threshold inverted (PIL: below it kept)."""
    from nvidia.dali import types

    # 255 - x is x ^ 255 on uint8: three operators where a select took six
    return data ^ ((data >= threshold) * types.Constant(255, dtype=types.UINT8))


def solarize_add(data, add):
    """timm's solarize_add: `add` added to the pixels below 128, rounded and clamped (PIL's point table)."""
    from nvidia.dali import types

    # 0 added above: x + 0 rounds to x (no select needed)
    return rounded_uint8(data + (data < types.Constant(128, dtype=types.UINT8)) * add)


def posterize_bits(data, bits):
    """PIL's posterize keeping `bits` bits (8: all)."""
    from nvidia.dali import fn, types
    from nvidia.dali import math as dmath

    mask = 255 - (fn.cast(dmath.pow(2.0, 8.0 - bits), dtype=types.INT32) - 1)
    return data & fn.cast(mask, dtype=types.UINT8)


def rounded_uint8(x):
    """x rounded half up and clamped to 0 .. 255, as uint8 (PIL's resampling filters and point
    tables)."""
    return to_uint8(x + 0.5)


def solarize_threshold(images: Images, step):
    """torchvision's threshold as the integer it acts as on uint8 pixels: x < t iff x < ceil(t).
    v2's is 255 * m (PIL compares in double, tensors in float32); v1's magnitudes are the
    threshold itself, in pixel levels (its table runs 255 .. 0, v2's 1 .. 0)."""
    def threshold(magnitude):
        if not hasattr(step, "_AUGMENTATION_SPACE"):   # v1
            return np.float32(math.ceil(magnitude))
        t = 255.0 * magnitude if images.kind == "pil" else np.float32(255.0 * np.float32(magnitude))
        return np.float32(math.ceil(t))
    return threshold


def auto_contrast(data, _):
    """Each channel stretched to [0, 255] and truncated, as PIL and torchvision do; a flat
    channel is left as it is."""
    from nvidia.dali import fn
    from nvidia.dali import math as dmath

    # uint8 throughout where exact: x - lo and hi - lo cannot go below 0. A flat channel
    # (hi = lo) is all lo: stretched to 0 (its span taken as 1, never a division by 0), then
    # given lo back. Twelve operators, where float copies of lo and hi took nineteen.
    lo = fn.reductions.min(data, axis_names="HW", keep_dims=True)
    hi = fn.reductions.max(data, axis_names="HW", keep_dims=True)
    scale = 255.0 / dmath.max(hi - lo, 1)
    stretched = to_uint8((data - lo) * scale)
    return stretched + (hi == lo) * lo


def operations(step, images: Images, relative: bool):
    """torchvision's operation name -> (function(data, param), magnitude -> param).
    `relative`: the translations' magnitudes are fractions of the image size (see suite)."""
    from nvidia.dali.auto_aug import augmentations as stock

    width, height = (images.width, images.height) if relative else (1, 1)
    factor = lambda m: np.float32(1.0 + m)   # noqa: E731
    return {
        "Identity": (stock.identity.op, None),
        "ShearX": (warp(images, step, lambda m: m), shear_matrix(0)),
        "ShearY": (warp(images, step, lambda m: m), shear_matrix(1)),
        "TranslateX": (warp(images, step, translation_matrix(0, width)), np.float32),
        "TranslateY": (warp(images, step, translation_matrix(1, height)), np.float32),
        "Rotate": (warp(images, step, rotation_matrix(images)), np.float32),
        "Brightness": (brightness, factor),
        "Color": (color(images), factor),
        "Contrast": (contrast(images), factor),
        "Sharpness": (sharpen(images), factor),
        "Posterize": (lambda data, mask: data & mask, lambda bits: np.uint8(255 ^ (2 ** (8 - int(bits)) - 1))),
        "Solarize": (solarize, solarize_threshold(images, step)),
        "AutoContrast": (auto_contrast, None),
        "Equalize": (stock.equalize.op, None),
        "Invert": (stock.invert.op, None),
    }


WARPS = ("ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate")   # their matrix is a CPU argument
