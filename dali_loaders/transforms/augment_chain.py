"""The AutoAugment family on GPU graphs, without branches: every image goes through one fixed
chain of operators (a warp, the colour blends, posterize, solarize, autocontrast, equalize),
each with the image's own parameters, which leave the image as it is wherever the image drew
another operation. The draws are the fused operator's (fused.py: a table row per slot, so the
choice of operations, magnitudes and signs is the one tested against torchvision's); a
constant table turns the drawn row into the chain's parameters, one gather per slot. The
operations are augment_ops.py's, the conditional graphs' own, so the pixels are theirs.

Why: DALI's conditionals split and merge the batch at each of the 14 operations and work the
magnitudes out per branch in one-number CPU operators: torchvision's ResNet-50 recipe made a
GPU graph of 529 operators, 141 of them splitting and merging (docs/gpu.md). A chain is about
fifty operators a slot, none splitting the batch, whatever the number of operations. On a GPU
graph an operator costs about the same whatever its work (docs/gpu.md), so the stages are
written in as few as their arithmetic allows.

Every no-op parameter is exact: the identity matrix maps each output pixel centre onto its own
input centre (nearest and linear alike); the enhance blend (brightness, colour, contrast,
sharpness in one) with factor 1 gives d + (x - d) = x, the degenerate image d being 0 where the
image drew none of them; mask 255; threshold 256. Where no parameter leaves the image alone
(autocontrast, equalize), a mask of 0 or 255 selects, x ^ ((a ^ x) & mask), exact too.
"""
import numpy as np

from ..ops import augment as op
from ..ops import chain_tail
from .augment_ops import (
    auto_contrast, blend, mean_grey, posterize_bits, rotation_matrix, shear_matrix, smoothed, smoothed_inside, solarize,
    solarize_add, solarize_threshold, warp, whole_pixels)
from ._core import Images, unconverted_function
from .color import luma
from .fused import Table, gated_rows

# A row of the chain's parameters; NO_OP leaves an image as it is (the row of a skipped slot).
# relative_x/y: torchvision's translation, a fraction of the size made whole pixels (to the left);
# fraction_x/y: timm's, a fraction of the size as it is. posterize_bits: timm's posterize (8: all
# kept), where torchvision's tables give the mask. SolarizeAdd: timm's amount added below 128.
NO_OP = {"angle": 0.0, "m0": 1.0, "m1": 0.0, "m2": 0.0, "m3": 0.0, "m4": 1.0, "m5": 0.0,
         "relative_x": 0.0, "relative_y": 0.0, "fraction_x": 0.0, "fraction_y": 0.0, "factor": 1.0,
         "grey_weight": 0.0, "mean_weight": 0.0, "smooth_weight": 0.0, "Posterize": 255.0,
         "posterize_bits": 8.0, "Solarize": 256.0, "SolarizeAdd": 0.0, "AutoContrast": 0.0, "Equalize": 0.0}
COLUMN = {name: k for k, name in enumerate(NO_OP)}
SELECTED = 255.0   # the mask of a stage whose result an image takes (AutoContrast, Equalize)
ENHANCE = ("Brightness", "Color", "Contrast", "Sharpness")   # one blend, factor and degenerate image per row
# the degenerate image each blends with, as a 0/1 weight (Brightness: none, 0)
DEGENERATE = {"Color": "grey_weight", "Contrast": "mean_weight", "Sharpness": "smooth_weight"}
MATRIX = slice(COLUMN["m0"], COLUMN["m5"] + 1)
WARPS = {"ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate"}
KNOWN = WARPS | {"Identity", "Brightness", "Color", "Contrast", "Sharpness", "Posterize", "Solarize",
                 "AutoContrast", "Equalize", "Invert"}


def usable(images: Images) -> bool:
    """Where the chain runs: GPU graphs (a CPU graph runs the fused operator, or DALI's auto_aug
    where the plugin is missing: there a branch costs less than every operation on every image)."""
    return images.device == "gpu"


def parameter_rows(step, images: Images, table: Table) -> np.ndarray:
    """(1 + rows, columns) float32: NO_OP, then the chain's parameters for each row of the
    fused table, from its (operation, signed magnitude) labels as the conditional graphs turn a
    magnitude into a parameter."""
    threshold = solarize_threshold(images, step)
    out = [dict(NO_OP)]
    for (name, magnitude), fused_row in zip(table.labels, table.rows):
        if name not in KNOWN:
            raise ValueError(f"{type(step).__name__}: operation {name} has no DALI translation")
        row, m = dict(NO_OP), np.float32(magnitude)
        if name in ("ShearX", "ShearY"):
            matrix = shear_matrix(0 if name == "ShearX" else 1)(magnitude).reshape(-1)
            row.update({f"m{k}": float(v) for k, v in enumerate(matrix)})
        elif name in ("TranslateX", "TranslateY"):
            axis = "x" if name == "TranslateX" else "y"
            # the fused row says whether its magnitude is a fraction of the size (sizes known only per sample)
            if fused_row[op.ROW["RelativeX"]] or fused_row[op.ROW["RelativeY"]]:
                row[f"relative_{axis}"] = float(m)
            else:   # 0 - int(m) pixels, as translation_matrix computes it
                row["m2" if axis == "x" else "m5"] = float(np.float32(0.0) - np.float32(np.trunc(m)))
        elif name == "Rotate":
            row["angle"] = float(m)
        elif name in ENHANCE:
            row["factor"] = float(np.float32(1.0 + magnitude))
            if name in DEGENERATE:
                row[DEGENERATE[name]] = 1.0
        elif name == "Posterize":
            row[name] = float(255 ^ (2 ** (8 - int(magnitude)) - 1))
        elif name == "Solarize":
            row[name] = float(threshold(magnitude))
        elif name == "Invert":   # 255 - x: every pixel is at or above 0
            row["Solarize"] = 0.0
        elif name in ("AutoContrast", "Equalize"):
            row[name] = SELECTED
        out.append(row)
    return np.array([[row[c] for c in NO_OP] for row in out], np.float32)


def constant_table(values: np.ndarray):
    """The rows as one constant of the graph (made once, gathered from per slot)."""
    from nvidia.dali import fn

    return fn.constant(fdata=values.reshape(-1).tolist(), shape=list(values.shape))


def gathered(table, index):
    """table[index + 1] per sample: the row of the drawn table row (-1: the first, NO_OP)."""
    return table[index + 1]


def warp_matrix(images: Images, params, present: set, translated=None):
    """The inverse map (2, 3), CPU: the table's matrix, plus relative translations in whole
    pixels of this image's size, timm's fractions of it (or `translated`, where an operator
    has made all that), then the rotation about its centre."""
    from nvidia.dali import fn, types

    if translated is not None:
        return rotated(images, translated, params, present)
    matrix = fn.reshape(params[MATRIX], shape=[2, 3])
    if present & {"relative_x", "relative_y"}:
        dx = 0.0 - whole_pixels(params[COLUMN["relative_x"]] * images.width)
        dy = 0.0 - whole_pixels(params[COLUMN["relative_y"]] * images.height)
        matrix = matrix + fn.reshape(fn.stack(0.0, 0.0, dx, 0.0, 0.0, dy), shape=[2, 3])
    if present & {"fraction_x", "fraction_y"}:
        width, height = (float(side) if isinstance(side, (int, float)) else fn.cast(side, dtype=types.FLOAT)
                         for side in (images.width, images.height))
        dx, dy = params[COLUMN["fraction_x"]] * width, params[COLUMN["fraction_y"]] * height
        matrix = matrix + fn.reshape(fn.stack(0.0, 0.0, dx, 0.0, 0.0, dy), shape=[2, 3])
    return rotated(images, matrix, params, present)


def rotated(images: Images, matrix, params, present: set):
    """The matrix and the row's rotation about the image's centre, combined."""
    from nvidia.dali import fn

    if "Rotate" in present:
        # a rotation's row holds the identity, every other row the angle 0, whose rotation is
        # the identity exactly: their product is the other one, exactly (products of 1 and 0)
        matrix = fn.transforms.combine(matrix, rotation_matrix(images)(params[COLUMN["angle"]]))
    return matrix


def selected(mask, changed, data):
    """changed where the uint8 mask is SELECTED (255), data where it is 0 (all uint8)."""
    return data ^ ((changed ^ data) & mask)


class Columns:
    """A gathered row's columns as per-sample numbers beside the pixels, each taken once:
    float, or uint8 (the masks and posterize's bits mask) from one cast of the whole row."""

    def __init__(self, params, device: str):
        self.params = params.gpu() if device == "gpu" else params
        self.whole_uint8 = None

    def __call__(self, name: str):
        return self.params[COLUMN[name]]

    def uint8(self, name: str):
        from nvidia.dali import fn, types

        if self.whole_uint8 is None:   # the columns read as uint8 hold whole numbers 0 .. 255
            self.whole_uint8 = fn.cast(self.params, dtype=types.UINT8)
        return self.whole_uint8[COLUMN[name]]


def enhanced(images: Images, data, present: set, value):
    """Brightness, colour, contrast and sharpness as one blend: an image draws one of them a
    slot, so its degenerate image is the weighted sum of the candidates with one weight 1
    (exact: 0 times a level is 0), none for brightness (0); its factor is 1 where it drew none
    of them, which gives the image back exactly (0 + 1 * (x - 0) = x)."""
    terms = []
    grey = luma(data, images) if present & {"Color", "Contrast"} else None   # a 1-channel image is its grey
    if "Color" in present:
        terms.append(value(DEGENERATE["Color"]) * grey)
    if "Contrast" in present:
        terms.append(value(DEGENERATE["Contrast"]) * mean_grey(images, grey))
    if "Sharpness" in present:
        terms.append(value(DEGENERATE["Sharpness"]) * smoothed(images, data))
    degenerate = sum(terms[1:], terms[0]) if terms else 0.0
    return blend(degenerate, data, value("factor"))


@unconverted_function
def chain(images: Images, params, present: set, warp_with, translated=None) -> None:
    """One slot: images.data through the stages in `present`, each with the sample's own
    parameters (a gathered row, CPU); `warp_with(data, matrix)` is the step's warp;
    `translated` as warp_matrix takes it."""
    from nvidia.dali import fn

    data = images.data
    value = Columns(params, images.device)
    if present & WARPS:
        data = warp_with(data, warp_matrix(images, params, present, translated))
    if chain_tail.usable(images.device):
        images.data = tail(images, data, present, value)
        return
    if present & set(ENHANCE):
        data = enhanced(images, data, present, value)
    if "posterize_bits" in present:
        data = posterize_bits(data, value("posterize_bits"))
    elif "Posterize" in present:
        data = data & value.uint8("Posterize")
    if present & {"Solarize", "Invert"}:
        data = solarize(data, value("Solarize"))
    if "SolarizeAdd" in present:   # adding 0 below 128 rounds each pixel to itself
        data = solarize_add(data, value("SolarizeAdd"))
    if "AutoContrast" in present:
        data = selected(value.uint8("AutoContrast"), auto_contrast(data, None), data)
    if "Equalize" in present:   # the operator of DALI's auto_aug equalize (fn.experimental.equalize then)
        data = selected(value.uint8("Equalize"), fn.equalize(data), data)
    images.data = data


# the chain's column for each of DaliLoadersChainTail's (ops/chain_tail.py's COLUMNS)
TAIL_COLUMNS = {"Factor": "factor", "GreyWeight": "grey_weight", "MeanWeight": "mean_weight",
                "SmoothWeight": "smooth_weight", "Posterize": "Posterize", "PosterizeBitsColumn": "posterize_bits",
                "SolarizeColumn": "Solarize", "SolarizeAddColumn": "SolarizeAdd",
                "AutoContrastColumn": "AutoContrast", "EqualizeColumn": "Equalize"}


def tail(images: Images, data, present: set, value):
    """The stages after the warp in one operator (DaliLoadersChainTail, the same pixels): an
    image draws one operation a slot, so the statistics of the stage it drew are those of
    `data`, computed here by DALI's operators."""
    from nvidia.dali import fn

    stages, inputs = [], {}
    if present & set(ENHANCE):
        stages.append("Enhance")
        if "Color" in present:
            stages.append("Color")
        if "Contrast" in present:
            stages.append("Contrast")   # the mean unrounded: the operator rounds it as mean_grey does
            inputs["mean"] = fn.reductions.mean(luma(data, images), axis_names="HWC", keep_dims=True)
            if images.kind == "pil":
                stages.append("RoundMean")
        if "Sharpness" in present:
            stages.append("Sharpness")
            inputs["inner"] = smoothed_inside(data)
    if "posterize_bits" in present:
        stages.append("PosterizeBits")
    elif "Posterize" in present:
        stages.append("PosterizeMask")
    if present & {"Solarize", "Invert"}:
        stages.append("Solarize")
    if "SolarizeAdd" in present:
        stages.append("SolarizeAdd")
    if "AutoContrast" in present:
        stages.append("AutoContrast")
        inputs["lo"] = fn.reductions.min(data, axis_names="HW", keep_dims=True)
        inputs["hi"] = fn.reductions.max(data, axis_names="HW", keep_dims=True)
    if "Equalize" in present:
        stages.append("Equalize")
        inputs["equalized"] = fn.equalize(data)
    if images.kind == "pil":
        stages.append("PilGrey")
    return chain_tail.call(data, value.params, stages, [COLUMN[TAIL_COLUMNS[name]] for name in chain_tail.COLUMNS],
                           **inputs)


def automatic(step, images: Images, make_slots) -> None:
    """The step (TrivialAugmentWide, RandAugment, AutoAugment) on GPU pixels: its draws
    (make_slots, fused.py's), then one chain per slot."""
    images.decode()
    images.flush_mirror()
    table, slots = make_slots(step, images)
    run_slots(step, images, table, slots, warp(images, step, lambda matrix: matrix))


def run_slots(step, images: Images, table: Table, slots, warp_with) -> None:
    """images.data through one chain per slot, each with its drawn row of `table`."""
    values = parameter_rows(step, images, table)
    present = {name for name, _ in table.labels}   # the operations the table can draw
    present |= {c for c in ("relative_x", "relative_y") if np.any(values[:, COLUMN[c]] != 0.0)}
    parameters = constant_table(values)
    for index in gated_rows(table, slots):   # a step not applied: row -1, NO_OP
        chain(images, gathered(parameters, index), present, warp_with)
