"""The Python face of DaliLoadersAugment (csrc/augment_op.cc): per sample, a short sequence of
augmentations in one CPU operator, in torchvision's or PIL's arithmetic. Its op codes, row
widths and columns are csrc/augment_codes.h's, read from that header here (one list for both
sides); the translators (transforms/fused.py, timm_fused.py) draw them in the graph."""
import os
import re
from typing import Dict, Optional, Sequence

CODES_HEADER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "csrc", "augment_codes.h")


def read_enums(path: str) -> Dict[str, Dict[str, int]]:
    """{enum name: {entry without its k: value}} of a header written as augment_codes.h is:
    every entry `kName = integer,` on a line of its own."""
    with open(path) as f:
        text = re.sub(r"//[^\n]*", "", f.read())
    enums = {}
    for name, body in re.findall(r"\benum\s+(\w+)[^{;]*\{([^}]*)\};", text):
        entries = [entry.strip() for entry in body.split(",") if entry.strip()]
        parsed = [re.fullmatch(r"k(\w+)\s*=\s*(-?\d+)", entry) for entry in entries]
        if not all(parsed):
            bad = next(entry for entry, match in zip(entries, parsed) if not match)
            raise ValueError(f"{path}: enum {name}: {bad!r} is not `kName = integer`")
        enums[name] = {match.group(1): int(match.group(2)) for match in parsed}
    return enums


_ENUMS = read_enums(CODES_HEADER)
SKIP = _ENUMS["OpCode"]["Skip"]
CODES = {name: code for name, code in _ENUMS["OpCode"].items() if name not in ("Skip", "NumOps")}
NUM_PARAMS = _ENUMS["Widths"]["NumParams"]
# A table row: code, p0 .. p3, relative x, relative y, span, probability (csrc/augment_op.cc)
TABLE_COLUMNS = _ENUMS["Widths"]["TableColumns"]
ROW = {name[len("Row"):]: column for name, column in _ENUMS["TableColumn"].items()}
# timm's rows: how a magnitude becomes the argument (csrc/augment_op.cc), and its uniforms per slot
LEVEL_COLUMNS = _ENUMS["Widths"]["LevelColumns"]
LEVEL = {name[len("Level"):]: column for name, column in _ENUMS["LevelColumn"].items()}
LEVEL_DRAWS = _ENUMS["Widths"]["LevelDraws"]
# a GPU graph's timm rows (DaliLoadersTimmRows): each level's column, in order
CHAIN_LEVEL = {name[len("Chain"):].lower(): column for name, column in _ENUMS["ChainLevel"].items()
               if name != "ChainWidth"}
_RESAMPLE = _ENUMS["Resample"]   # PIL's numbers, as the operator takes them
RESAMPLE = {"INTERP_NN": _RESAMPLE["Nearest"], "INTERP_LINEAR": _RESAMPLE["Bilinear"],
            "INTERP_CUBIC": _RESAMPLE["Bicubic"]}
WARPS = ("ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate")
KERNELS = ("pil", "tensor", "tensor_v1")


def table_row(code: str, params: Sequence[float] = (), relative_x: float = 0.0, relative_y: float = 0.0,
              span: float = 0.0, probability: float = 1.0) -> list:
    """A table row (TABLE_COLUMNS floats) for the op named `code`, each value in its column."""
    row = [0.0] * TABLE_COLUMNS
    row[ROW["Code"]] = float(CODES[code])
    for k, value in enumerate(params):
        row[ROW["P0"] + k] = value
    row[ROW["RelativeX"]], row[ROW["RelativeY"]] = relative_x, relative_y
    row[ROW["Span"]], row[ROW["Probability"]] = span, probability
    return row


def usable(device: str) -> bool:
    """Whether a graph on `device` can run the operator (a CPU graph, the plugin built here)."""
    from . import plugin

    return device == "cpu" and plugin.augment_available()


def call(data, ops=None, params=None, kernels: str = "tensor", fill: Optional[Sequence[float]] = None,
         erase_value: Optional[Sequence[float]] = None, *, table=None, levels=None, resamples=None,
         uniforms=None, slot_plan=(), picks=(), keys=(), key_cdf=(), mirror=None, mirror_slot: int = -1,
         fixed_sign: Optional[float] = None):
    """fn.dali_loaders_augment: `ops` int32 (K,) and `params` float32 (K, 4) per sample, and
    slots into `table` (TABLE_COLUMNS values a row, flattened) drawn from `uniforms` float32
    (U,) per sample as `slot_plan`, `picks`, `keys` and `key_cdf` say (csrc/augment_op.cc); `mirror` int32
    per sample flips before slot `mirror_slot`; `fill` per channel for the warps (None:
    torchvision's fill=None), `erase_value` for Erase; `fixed_sign` (tests) every signed timm
    argument's sign."""
    from nvidia.dali import fn

    if kernels not in KERNELS:
        raise ValueError(f"kernels={kernels!r}: one of {', '.join(KERNELS)}")
    extra = {} if fill is None else {"fill": [float(v) for v in fill]}
    if erase_value is not None:
        extra["erase_value"] = [float(v) for v in erase_value]
    for name, value in (("ops", ops), ("params", params), ("uniforms", uniforms), ("mirror", mirror)):
        if value is not None:
            extra[name] = value
    for name, value in (("table", table), ("levels", levels), ("resamples", resamples), ("key_cdf", key_cdf)):
        if value is not None and len(value):
            extra[name] = [float(v) for v in value]
    for name, value in (("slot_plan", slot_plan), ("picks", picks), ("keys", keys)):
        if len(value):
            extra[name] = [int(v) for v in value]
    if mirror is not None:
        extra["mirror_slot"] = int(mirror_slot)
    if fixed_sign is not None:
        extra["_fixed_sign"] = float(fixed_sign)
    return fn.dali_loaders_augment(data, kernels=kernels, **extra)

ERASE_ATTEMPTS = 10   # torchvision's and timm's tries before an image is left as it is
ERASE_NOISE = ("none", "pixel", "channel")


def erase_draws():
    """The uniforms DaliLoadersErase draws its box from, and the seed of its noise: two
    random operators per graph, where the box drawn in DALI arithmetic took about a hundred."""
    from .noise import sample_seeds

    return box_draws(), sample_seeds()


def box_draws():
    """The uniforms a box is drawn from: per try an area and a log aspect, then the coin and
    the two offsets."""
    from nvidia.dali import fn

    return fn.random.uniform(range=[0.0, 1.0], shape=[2 * ERASE_ATTEMPTS + 3])


def erase_arguments(probability: float, scale: Sequence[float], ratio: Sequence[float],
                    value: Optional[Sequence[float]] = None, noise: str = "none") -> dict:
    """The arguments of an erased box, its draws included: DaliLoadersErase's as they are,
    DaliLoadersNormalize's with "erase_" before each name (ops/normalize.py)."""
    import math

    if noise not in ERASE_NOISE:
        raise ValueError(f"noise={noise!r}: one of {', '.join(ERASE_NOISE)}")
    draws, seed = erase_draws()
    return dict(draws=draws, noise_seed=seed, probability=float(probability), scale=[float(s) for s in scale],
                log_ratio=[math.log(r) for r in ratio], value=[float(v) for v in value or []], noise=noise,
                attempts=ERASE_ATTEMPTS)


def erase(data, arguments: dict):
    """fn.dali_loaders_erase on float32 CHW/HWC images: one box per image, drawn as
    torchvision's and timm's RandomErasing draw it, filled as `arguments` (erase_arguments)
    say: a value per channel (none: zeros) or standard normal noise per pixel or per channel."""
    from nvidia.dali import fn

    return fn.dali_loaders_erase(data, **arguments)


def mix(image, chains: Sequence, weights, blend: bool = False):
    """fn.dali_loaders_mix: AugMix's float32 mix of the uint8 `image` and its `chains`, truncated to
    uint8; `weights` float32 (1 + len(chains),) per sample. `blend`: timm's (the chains' sum
    truncated, then PIL's blend of the image towards it by weights[0])."""
    from nvidia.dali import fn

    return fn.dali_loaders_mix(image, *chains, weights=weights, blend=blend)


def erase_box(height, width, probability: float, scale: Sequence[float], ratio: Sequence[float]):
    """fn.dali_loaders_erase_box: (anchor, shape) per sample, float32 (top, left) and (height,
    width), the box DaliLoadersErase would erase in a `height` x `width` image (ints, or CPU
    int DataNodes), for DALI's fn.erase on a GPU graph; an empty box where none is drawn."""
    import math
    import numbers

    from nvidia.dali import fn, types

    sides = [int(side) if isinstance(side, numbers.Integral) else fn.cast(side, dtype=types.INT32)
             for side in (height, width)]
    return fn.dali_loaders_erase_box(box_draws(), height=sides[0], width=sides[1], probability=float(probability),
                                     scale=[float(s) for s in scale], log_ratio=[math.log(r) for r in ratio],
                                     attempts=ERASE_ATTEMPTS)


def draws_usable() -> bool:
    """Whether a graph (either device: these run on the CPU) can work its draws out in our
    operators: RandomErasing's box (DaliLoadersEraseBox), timm's chain rows (DaliLoadersTimmRows)."""
    from . import plugin

    return plugin.augment_available()


def timm_rows(indices, uniforms, normals, levels, base, hot, per_level: float, noisy: bool, uniform: bool,
              matrix_column: int, fraction_columns: Sequence[int], height, width):
    """fn.dali_loaders_timm_rows: per sample (S, columns) float32, each slot's row of a GPU
    graph's chain from its draws: `indices` int32 (S,), `uniforms` (S, 3), `normals` (S,)
    (csrc/timm_rows_op.cc); `levels`, `base` and `hot` the tables (numpy, rows + 1 each); and
    (S, 2, 3) each row's inverse warp map before its rotation, for a `height` x `width` image
    (ints, or CPU int DataNodes)."""
    import numbers

    from nvidia.dali import fn, types

    sides = [int(side) if isinstance(side, numbers.Integral) else fn.cast(side, dtype=types.INT32)
             for side in (height, width)]
    return fn.dali_loaders_timm_rows(indices, uniforms, normals, levels=[float(v) for v in levels.reshape(-1)],
                                     base=[float(v) for v in base.reshape(-1)],
                                     hot=[float(v) for v in hot.reshape(-1)], columns=int(base.shape[1]),
                                     per_level=float(per_level), noisy=bool(noisy), uniform=bool(uniform),
                                     matrix_column=int(matrix_column),
                                     fraction_columns=[int(c) for c in fraction_columns],
                                     height=sides[0], width=sides[1])
