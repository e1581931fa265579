"""The Python face of DaliLoadersChainTail (csrc/chain_tail.h): one slot of the AutoAugment
family's chain, its pixel stages after the warp in one operator. Its stage flags and columns
are the header's, read from it here.

A chain runs it where DALI_LOADERS_CHAIN_TAIL=1 asks for it, on either device (the same graph,
other device names): on a GPU graph where the library was built with nvcc (a GPU and the CUDA
toolkit at its first build). Unasked, a chain's stages are DALI's operators, as GPU graphs run
them by default: the GPU operator has not yet run on a GPU beside them, so it stays a choice
until `python -m dali_loaders.testing.chain_tail_check` has passed there. The tests ask for it
on CPU graphs, where it gives DALI's operators' pixels."""
import os
from typing import Sequence

from .augment import read_enums

HEADER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "csrc", "chain_tail.h")
_ENUMS = read_enums(HEADER)
STAGE = _ENUMS["Stage"]
COLUMNS = [name for name, _ in sorted(_ENUMS["Column"].items(), key=lambda item: item[1]) if name != "NumColumns"]
ENV = "DALI_LOADERS_CHAIN_TAIL"


def asked() -> bool:
    from . import plugin

    return plugin.flag(ENV)


def usable(device: str) -> bool:
    """Whether a chain on `device` runs its stages in the operator (asked for, and built for
    that device; unasked, the plugin is not even built)."""
    from . import plugin

    return asked() and plugin.chain_available() and (device == "cpu" or plugin.gpu_operator_loaded(plugin.CHAIN.schema))


def call(data, row, stages: Sequence[str], columns: Sequence[int], mean=None, inner=None, lo=None, hi=None,
         equalized=None):
    """fn.dali_loaders_chain_tail: `stages` the header's Stage names, `columns` the row's column
    for each of its Column entries (COLUMNS' order, -1 unused); the optional inputs with their stages."""
    from nvidia.dali import fn

    flags = 0
    for name in stages:
        flags |= STAGE[name]
    inputs = [data, row, *[x for x in (mean, inner, lo, hi, equalized) if x is not None]]
    return fn.dali_loaders_chain_tail(*inputs, stages=flags, columns=[int(c) for c in columns])
