"""The Python face of DaliLoadersChainTail (csrc/chain_tail.h): one slot of the AutoAugment
family's chain, its pixel stages after the warp in one operator. Its stage flags and columns
are the header's, read from it here.

On GPU graphs it runs where the library was built with nvcc (a GPU and the CUDA toolkit at the
first build) and DALI_LOADERS_GPU_CHAIN_TAIL=1 asks for it: the GPU operator has not yet run on a
GPU beside the chain's DALI operators, so it stays a choice until it has. The CPU operator (the
same arithmetic, chain_tail.h) is what tests compare with those operators here, wherever a
chain runs on a CPU graph."""
import os
from typing import Sequence

from .augment import read_enums

HEADER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "csrc", "chain_tail.h")
_ENUMS = read_enums(HEADER)
STAGE = _ENUMS["Stage"]
COLUMNS = [name for name, _ in sorted(_ENUMS["Column"].items(), key=lambda item: item[1]) if name != "NumColumns"]
GPU_ENV = "DALI_LOADERS_GPU_CHAIN_TAIL"


def usable(device: str) -> bool:
    """Whether a graph on `device` runs the chain's stages in the operator."""
    from . import plugin

    if device != "cpu" and os.environ.get(GPU_ENV, "").strip() in ("", "0", "false", "False"):
        return False   # not asked for: the plugin is not even built
    return plugin.chain_available() and (device == "cpu" or plugin.gpu_operator_loaded(plugin.CHAIN.schema))


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
