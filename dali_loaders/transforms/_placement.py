"""Where a recipe's steps run and what its graph needs: the marks translators carry (they
branch per sample, fuse into DaliLoadersAugment, chain on GPU graphs) and what follows from
them for a whole recipe (conditionals; the fused steps on the CPU under device="gpu")."""
from typing import Any, Callable, Optional, Union

from ._core import TRANSLATORS
from ._plan import Plan, Views, every_plan


def needs_conditionals(recipe: Union[Plan, Views], variant: str = "gpu") -> bool:
    """Whether the graph has per-sample `if`s: DALI then needs enable_conditionals. Where the
    steps run on the CPU, the steps DaliLoadersAugment runs have none (see fused.py); the
    plugin is only built when the recipe has such a step. On the GPU, the chained steps
    have none (see augment_chain.py)."""
    from ..ops import augment as op

    for view in every_plan(recipe):   # each view's steps are their own calls
        # the translated steps run where the pixels are read: the CPU for Python steps
        device = "cpu" if view.python or variant in CPU_STEPS or variant == GPU_DECODE else "gpu"
        branching = [(step, t) for step, t in _branching(view) if not (device == "gpu" and getattr(t, "chains", False))]
        fusing = [_fuses(step, t) for step, t in branching]
        fused = any(fusing) and op.usable(device)
        if branching and not (fused and all(fusing)):
            return True
    return False


CPU_STEPS = ("cpu", "cpu-steps")   # the variants whose translated steps run on the CPU (loader/build.py)
# The variant that decodes on the GPU and runs the steps from host_steps_from on on the CPU; its
# steps that branch, fuse or run on the CPU alone are all on the CPU (loader/build.py)
GPU_DECODE = "gpu-decode"


def host_steps_from(recipe: Plan) -> int:
    """Where a "gpu-decode" graph moves the pixels to the CPU: before the recipe's first step
    that branches per sample, fuses into DaliLoadersAugment, chains on GPU graphs or runs on
    the CPU alone. The steps before it (crops, resizes, flips) run on the GPU on the decoded
    images, so that the images that cross over are the crop's, not the whole files'."""
    for k, step in enumerate(recipe.translated):
        translator = TRANSLATORS[type(step)]
        if getattr(translator, "branches", lambda s: False)(step) or _fuses(step, translator) or \
                getattr(translator, "chains", False) or _runs_on_cpu(step, translator):
            return k
    return len(recipe.translated)


def fused_on_cpu(recipe: Union[Plan, Views], one_slot_on_gpu: bool = True) -> bool:
    """Whether a per-sample branching step of the recipe (the AutoAugment family, ColorJitter's
    order, RandomApply, ...) is one the fused CPU operator runs, and that operator is built here;
    with `one_slot_on_gpu`, a step whose GPU chain has one slot does not count (a GPU graph runs
    it faster)."""
    from ..ops import augment as op

    return any(_fuses(step, t) and not (one_slot_on_gpu and _one_slot_on_gpu(step, t))
               for view in every_plan(recipe) for step, t in _branching_or_chained(view)) and op.usable("cpu")


def _one_slot_on_gpu(step, translator) -> bool:
    """A step the GPU chain runs in one slot (TrivialAugmentWide, RandAugment(1)): on an H200
    with 16 cores, the chain of TrivialAugmentWide ran 8,681 images/s against 6,025 with the
    fused CPU operator (decoding on the CPU then), where two slots (RandAugment(2, 9)) ran
    4,736 against 5,241."""
    slots = getattr(translator, "chain_slots", None)   # set by `chains`
    return slots is not None and slots(step) <= 1


def _branching(recipe: Plan):
    steps = [(step, TRANSLATORS[type(step)]) for step in recipe.translated]
    return [(step, t) for step, t in steps if getattr(t, "branches", lambda s: False)(step)]


def _branching_or_chained(recipe: Plan):
    """The steps that either branch or, on GPU graphs, chain (AugMix chains without branching)."""
    steps = [(step, TRANSLATORS[type(step)]) for step in recipe.translated]
    return [(step, t) for step, t in steps
            if getattr(t, "branches", lambda s: False)(step) or getattr(t, "chains", False)]


def _fuses(step, translator) -> bool:
    return getattr(translator, "augments", False) and getattr(translator, "fuses", lambda s: True)(step)


def branches(translator):
    """Marks a translator that uses `if` on DataNodes (DALI's conditional execution)."""
    translator.branches = lambda step: True
    return translator


def branches_when(condition: Callable[[Any], bool]):
    """Marks a translator that uses `if` on DataNodes for the steps `condition` holds for."""
    def mark(translator):
        translator.branches = condition
        return translator
    return mark


def chains(translator=None, *, slots: Optional[Callable[[Any], int]] = None):
    """Marks a branching translator that on GPU graphs runs without branches (augment_chain.py);
    `slots(step)`, where given, counts the chain's slots (operations an image goes through)."""
    def mark(translator):
        translator.chains = True
        translator.chain_slots = slots
        return translator
    return mark(translator) if translator is not None else mark


def on_cpu(translator):
    """Marks a translator whose operator runs on the CPU alone: a recipe holding it runs its
    steps on the CPU in GPU graphs too (see steps_on_cpu)."""
    translator.on_cpu = lambda step: True
    return translator


def on_cpu_when(condition: Callable[[Any], bool]):
    """on_cpu for the steps `condition` holds for."""
    def mark(translator):
        translator.on_cpu = condition
        return translator
    return mark


def _runs_on_cpu(step, translator) -> bool:
    return getattr(translator, "on_cpu", lambda s: False)(step)


def steps_on_cpu(recipe: Union[Plan, Views]) -> bool:
    """Whether a step of the recipe runs on the CPU alone (its GPU graphs then decode and run
    the steps on the CPU, and hand the batch over on the GPU)."""
    return any(_runs_on_cpu(step, TRANSLATORS[type(step)])
               for view in every_plan(recipe) for step in view.translated)


def augments(translator):
    """Marks a translator that adds slots to the pending DaliLoadersAugment call where the
    operator is usable (a CPU graph) instead of branching; it flushes them itself otherwise.
    A translator's `fuses(step)`, where it has one, says which of its steps it fuses."""
    translator.augments = True
    return translator


def augments_when(condition: Callable[[Any], bool]):
    """Marks a translator that adds slots to the pending DaliLoadersAugment call (as `augments`)
    for the steps `condition` holds for, and branches or flushes for the others."""
    def mark(translator):
        translator = augments(translator)
        translator.fuses = condition
        return translator
    return mark
