"""`python -m benchmarks.graph_sizes`: the operators of each ImageNet-style bench recipe's GPU
graph (train), counted without a GPU: all, those on the CPU, those on the GPU (the mixed
decoder included), and the conditionals' splits and merges. Each operator costs the executor a
scheduling round a batch, so the count is what a graph pays besides its pixels (on an H200 a GPU
operator of the augmentation chain cost a batch of 128 some 0.05 to 0.1 ms, whatever its work:
docs/gpu.md). Runs anywhere DALI does (the graph is serialized, not run). The last two columns
count the same graph with the chain's pixel stages in DaliLoadersChainTail (the chain plugin's
GPU operator, used where it is built and DALI_LOADERS_CHAIN_TAIL=1 asks for it).
"""
import collections
import os
import tempfile

import numpy as np


def counts(transform, index) -> dict:
    from dali_loaders.dali_compat import graph_operators
    from dali_loaders.loader import serialized_gpu_graph

    ops = graph_operators(serialized_gpu_graph(index, transform))
    kinds = collections.Counter((device, kind) for kind, _, device, *_ in ops)
    on_cpu = sum(n for (device, _), n in kinds.items() if device == "cpu")
    return {"operators": len(ops), "on the CPU": on_cpu, "on the GPU": len(ops) - on_cpu,
            "conditional splits and merges": sum(n for (_, kind), n in kinds.items() if "conditional" in kind)}


def with_chain_tail(transform, index) -> dict:
    """counts() with the chain's stages in DaliLoadersChainTail (its schema is enough to
    serialize the graph: no GPU needed); the plain counts where the plugin is not built."""
    from dali_loaders.ops import chain_tail, plugin

    if not plugin.chain_available():
        return counts(transform, index)
    usable = chain_tail.usable
    chain_tail.usable = lambda device: True
    try:
        return counts(transform, index)
    finally:
        chain_tail.usable = usable


def main(argv=None) -> None:
    import argparse

    from PIL import Image

    argparse.ArgumentParser(prog="python -m benchmarks.graph_sizes", description=__doc__.splitlines()[0]).parse_args(argv)

    from dali_loaders import get_imagenet_iter_torch
    from dali_loaders.bench.catalog import RECIPES

    with tempfile.TemporaryDirectory() as root:
        for split in ("train", "val"):
            os.makedirs(os.path.join(root, split, "a"))
            Image.fromarray(np.zeros((64, 64, 3), np.uint8)).save(os.path.join(root, split, "a", "x.jpg"))
        index = get_imagenet_iter_torch("val", root, 4, 0).dataset.source
        print("| recipe (train) | operators | on the CPU | on the GPU | conditional splits and merges "
              "| with DaliLoadersChainTail: operators | on the GPU |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        for name, recipe in RECIPES["imagenet"].items():
            if recipe.missing() or recipe.options.get("python_fallback"):
                continue
            row, tail = counts(recipe.make(True), index), with_chain_tail(recipe.make(True), index)
            print(f"| {name} | {row['operators']} | {row['on the CPU']} | {row['on the GPU']} | "
                  f"{row['conditional splits and merges']} | {tail['operators']} | {tail['on the GPU']} |")


if __name__ == "__main__":
    main()
