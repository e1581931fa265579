"""torchvision's AugMix (v1 and v2) as DALI operators, without conditionals.

What torchvision does to each image (PIL images too: it works on their uint8 tensor, so the
operations are its tensor kernels, v1's or v2's): `mixture_width` chains, each of `chain_depth`
operations (1, 2 or 3 at random where it is not positive), each uniform among the augmentation
space (the partial one without `all_ops`) at a magnitude bin uniform among the first
`severity`, signed at random where the operation is; then, in float32,

    mix = m0 * image + w_0 * chain_0 + w_1 * chain_1 + ...,   truncated to uint8,

with (m0, m1) ~ Dirichlet(alpha, alpha) and w = Dirichlet(alpha, ... alpha) * m1.

Here each chain is one table of rows (fused.py's: operation x bin x sign, every operation with
as many rows, so one uniform row is torchvision's three draws), run by one DaliLoadersAugment
call on the original pixels on CPU graphs, or by the GPU chain of operators (augment_chain.py)
elsewhere. A random depth is one uniform per image shared by the chain's second and third
slots, whose rows apply with probability 2/3 and 1/3: depth 1, 2 and 3 each a third of the
time, as torchvision's randint(1, 4). The Dirichlet weights come from DALI's Beta draws by
stick breaking (Dirichlet(a_1 .. a_k): x_1 ~ Beta(a_1, a_2 + .. + a_k), the rest a
Dirichlet of what is left), so they resume from checkpoints like every other draw.
"""
from typing import Callable, List, Optional, Tuple

import numpy as np

from ..ops import augment as op
from . import augment_chain, fused
from ._core import Images, refuses, translates, uint8_only, unconverted_function
from ._draws import Uniform
from ._placement import augments, chains
from .affine import warp_refusal
from .augment_ops import warp

PARAMETER_MAX = 10   # torchvision's AugMix reads magnitudes from 10 bins
MAX_RANDOM_DEPTH = 3   # chain_depth <= 0: torch.randint(1, 4)


def depth_of(chain_depth: int) -> Tuple[int, bool]:
    """(the most operations a chain applies, whether the number is drawn per chain), for the
    depth torchvision and timm take (not positive: 1 to 3 at random)."""
    return (chain_depth, False) if chain_depth > 0 else (MAX_RANDOM_DEPTH, True)


def gate_probability(slot: int, depth: int) -> float:
    """The probability that slot `slot` of a chain of random depth applies, against the draw the
    chain's slots share: depth 1, 2 .. `depth` each 1 / depth of the time."""
    return (depth - slot) / depth


def mixing_refusal(alpha: float, width: int, width_name: str) -> str:
    if not alpha > 0:
        return f"alpha={alpha}: the Dirichlet weights need alpha > 0"
    if width < 1:
        return f"{width_name}={width}: at least one chain"
    return ""


def refusal(step) -> str:
    return mixing_refusal(step.alpha, step.mixture_width, "mixture_width") or warp_refusal(step)


@unconverted_function
def chain_slots(step, images: Images):
    """One chain's table and slots: a uniform row (operation, bin, sign) per slot; with a random
    depth, slot j >= 1 reads a block of the same rows whose probability is (3 - j) / 3, against
    one uniform all the chain's slots share."""
    severity = step.severity
    table, _ = fused.automatic_table(step, images, PARAMETER_MAX,
                                     lambda mags: list(mags[:severity]) if mags is not None else [0.0] * severity)
    depth, drawn = depth_of(step.chain_depth)
    if not drawn:
        return table, [(fused.draw_index(len(table.rows)), None) for _ in range(depth)]
    count = len(table.rows)
    blocks = []
    for j in range(depth):
        block = table.rows.copy()
        block[:, op.ROW["Probability"]] = gate_probability(j, depth)
        blocks.append(block)
    joined = fused.Table(np.concatenate(blocks), table.labels * depth)
    depth_draw = Uniform()
    slots = [(fused.shifted(fused.draw_index(count), j * count), depth_draw if j else None) for j in range(depth)]
    return joined, slots


@unconverted_function
def beta(alpha: float):
    """Beta(alpha, alpha), float32 per sample (CPU): the first part of a Dirichlet(alpha, alpha)."""
    from nvidia.dali import fn

    return fn.random.beta(alpha=float(alpha), beta=float(alpha))


@unconverted_function
def dirichlet(alpha: float, width: int) -> List:
    """Dirichlet(alpha x width), its `width` parts, float32 per sample (CPU), by stick breaking."""
    from nvidia.dali import fn, types

    shares, left = [], None
    for i in range(width - 1):
        part = fn.random.beta(alpha=float(alpha), beta=float(alpha * (width - 1 - i)))
        share = part if left is None else left * part
        shares.append(share)
        left = 1.0 - part if left is None else left - share
    return shares + [left if left is not None else fn.constant(fdata=1.0, shape=[], dtype=types.FLOAT)]


@unconverted_function
def mixing_weights(alpha: float, width: int):
    """(m0, [w_0 .. w_{width-1}]), float32 per sample (CPU), as torchvision combines them:
    m ~ Dirichlet(alpha, alpha), the chains' shares ~ Dirichlet(alpha x width), each times m1."""
    m0 = beta(alpha)
    m1 = 1.0 - m0
    return m0, [share * m1 for share in dirichlet(alpha, width)]


@unconverted_function
def mixed(original, chains_out: List, m0, weights: List, device: str, blend: bool = False):
    """m0 * original + w_0 * chain_0 + ... in float32, in torchvision's order, truncated to uint8
    (the weights add up to 1 within rounding, so the sum stays in 0 .. 255); with `blend`,
    timm's: trunc(clip(w_0 * chain_0 + ...)), then PIL's blend of the original towards it by
    m0 (x + m0 * (mixed - x) in float, truncated). One pass of our operator on CPU graphs,
    DALI's arithmetic elsewhere."""
    from nvidia.dali import fn, types
    from nvidia.dali import math as dmath

    if op.usable(device):
        return op.mix(original, chains_out, fn.stack(m0, *weights), blend=blend)
    if device == "gpu":   # the weights beside the pixels: one copy of all of them
        vector = fn.stack(m0, *weights).gpu()
        m0, weights = vector[0], [vector[i + 1] for i in range(len(weights))]
    if blend:
        total = weights[0] * chains_out[0]
        for weight, chain in zip(weights[1:], chains_out[1:]):
            total = total + weight * chain
        chains_mix = fn.cast(dmath.floor(dmath.clamp(total, 0.0, 255.0)), dtype=types.FLOAT)
        image = fn.cast(original, dtype=types.FLOAT)
        return fn.cast(dmath.floor(image + m0 * (chains_mix - image)), dtype=types.UINT8)
    total = m0 * original
    for weight, chain in zip(weights, chains_out):
        total = total + weight * chain
    return fn.cast(dmath.floor(total), dtype=types.UINT8)


def chains_on(images: Images, step, count: int, run_one: Callable[[Images], None], kind: Optional[str] = None):
    """(the original pixels, `count` chains' outputs): each chain run_one(member) on a branch of
    the original (of the twin's `kind` of image, where given); a pending flip goes first."""
    images.decode()
    images.flush_mirror()
    original = images.data
    outputs = []
    for _ in range(count):
        member = images.branch(original)
        member.kind = kind or member.kind
        run_one(member)
        outputs.append(member.data)
    return original, outputs


def run_chain(step, member: Images) -> None:
    """One chain's operations on member.data: one DaliLoadersAugment call where the graph runs
    it, else the GPU chain's operators (a CPU graph without the plugin too)."""
    table, slots = chain_slots(step, member)
    if fused.usable(member):
        fused.queue(member, step, table, slots, warps=True)
        member.flush_augment()
    else:
        augment_chain.run_slots(step, member, table, slots, warp(member, step, lambda matrix: matrix))


@translates("AugMix")
@refuses(refusal)
@chains(slots=lambda step: step.mixture_width * depth_of(step.chain_depth)[0])
@augments
@uint8_only
def aug_mix(step, images: Images) -> None:
    """The chains on the original pixels, as torchvision's tensor kernels, then the mix."""
    # torchvision mixes the image's uint8 tensor, a PIL image's too: its tensor kernels
    original, outputs = chains_on(images, step, step.mixture_width, lambda member: run_chain(step, member), "tensor")
    m0, weights = mixing_weights(step.alpha, step.mixture_width)
    images.data = mixed(original, outputs, m0, weights, images.device)
