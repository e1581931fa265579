"""timm's AugMix (create_transform(auto_augment="augmix-m3-w3..."): AugMixAugment), translated.

What timm does to each PIL image: `width` chains, each of `depth` operations (1, 2 or 3 at
random where it is not positive), each uniform among its AugmentOps (with repeats), each
applied as timm applies it (its magnitude uniform in 0 .. m for the default mstd=inf, a
random sign); then, in float32, mixed = trunc(clip(w_0 * chain_0 + w_1 * chain_1 + ...)) with
w ~ Dirichlet(alpha x width), and PIL's Image.blend(image, mixed, m) with m ~ Beta(alpha, alpha).

Each chain is a timm_fused.Chain: its ops once per slot, slot j uniform among its own copy,
whose ops apply with probability 1, 2/3, 1/3 on one draw the later slots share (a random depth
as torchvision's AugMix draws it here, aug_mix.py). It runs as timm's RandAugment does: one
DaliLoadersAugment call in PIL's arithmetic on CPU graphs (timm_fused), the GPU chain of
operators elsewhere (timm_chain); the mix is aug_mix's, in timm's arithmetic.
"""
import copy

from timm.data import auto_augment as timm_aa

from . import aug_mix, timm_chain, timm_fused
from ._core import Images, refuses, register, uint8_only, unconverted_function
from ._placement import augments_when, chains
from .timm import augment_refusal, fill_of, warp


def refusal(step) -> str:
    if step.blended:
        return "blended=True (the 'b1' option, which timm calls not well tested) is not translated"
    if aug_mix.depth_of(step.depth)[1] and any(float(o.prob) < 1.0 for o in step.ops):
        return "an op with prob < 1 in a chain of random depth (timm's augmix ops apply always)"
    return aug_mix.mixing_refusal(step.alpha, step.width, "width") or augment_refusal(step)


@unconverted_function
def chain_of(step) -> timm_fused.Chain:
    """One chain's slots: the ops once per slot, slot j's copies applying with (depth - j) / depth
    where the depth is drawn."""
    depth, drawn = aug_mix.depth_of(step.depth)
    ops = []
    for j in range(depth):
        for o in step.ops:
            copied = copy.copy(o)
            if drawn:
                copied.prob = aug_mix.gate_probability(j, depth)
            ops.append(copied)
    return timm_fused.Chain(ops, depth, len(step.ops), drawn)


def run_chain(step, member: Images) -> None:
    chain = chain_of(step)
    if timm_fused.translate(chain, member):
        member.flush_augment()
    else:
        timm_chain.run(chain, member, warp(fill_of(step.ops)))


@register(timm_aa.AugMixAugment)
@refuses(refusal)
@chains(slots=lambda step: step.width * aug_mix.depth_of(step.depth)[0])
@augments_when(timm_fused.fusable)
@uint8_only
def timm_aug_mix(step, images: Images) -> None:
    """The chains on the original pixels, then timm's mix and blend."""
    original, outputs = aug_mix.chains_on(images, step, step.width, lambda member: run_chain(step, member))
    images.data = aug_mix.mixed(original, outputs, aug_mix.beta(step.alpha), aug_mix.dirichlet(step.alpha, step.width),
                                images.device, blend=True)
