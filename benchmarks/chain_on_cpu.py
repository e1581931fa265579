"""`python -m benchmarks.chain_on_cpu`: torchvision's TrivialAugmentWide as the GPU graphs'
chain of operators (PIL arithmetic), forced onto a CPU graph: milliseconds a batch and the
graph's operators. A CPU operator works per sample where a GPU one pays per batch, so this
stands in for, and does not measure, the chain's cost on a GPU; it shows what a change to the
chain's stages does, run before and after it on the same machine. `--chain-tail`: the stages
after the warp in DaliLoadersChainTail (DALI_LOADERS_CHAIN_TAIL=1), else DALI's operators.
"""
import argparse
import time

import numpy as np


def measure(batch: int, size: int, rounds: int, runs: int, threads: int) -> tuple:
    """(best ms a batch over `rounds` of `runs` batches, operators in the graph)."""
    from nvidia.dali import fn, pipeline_def
    from torchvision.transforms import v2

    from dali_loaders.dali_compat import graph_operators
    from dali_loaders.transforms import Images, augment_chain, augment_ops, fused

    rng = np.random.default_rng(0)
    pixels = [rng.integers(0, 256, (size, size, 3), dtype=np.uint8) for _ in range(batch)]
    step = v2.TrivialAugmentWide()

    @pipeline_def(batch_size=batch, num_threads=threads, device_id=None, seed=3, exec_dynamic=True)
    def chained():
        data = fn.external_source(source=lambda: pixels, batch=True, layout="HWC", no_copy=True)
        images = Images(data, size, size, 3, "cpu", kind="pil")
        table, slots = fused.trivial_augment_slots(step, images)
        values = augment_chain.parameter_rows(step, images, table)
        present = {name for name, _ in table.labels}
        rows = augment_chain.constant_table(values)
        for index, _ in slots:
            augment_chain.chain(images, augment_chain.gathered(rows, fused.row_node(index)), present,
                                augment_ops.warp(images, step, lambda matrix: matrix))
        return images.data

    pipeline = chained()
    pipeline.build()
    for _ in range(3):
        pipeline.run()
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(runs):
            pipeline.run()
        best = min(best, (time.perf_counter() - started) / runs * 1e3)
    return best, len(graph_operators(pipeline.serialize()))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.chain_on_cpu", description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--size", type=int, default=176, help="square images of this side")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=8, help="batches a round")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--chain-tail", action="store_true", help="the stages in DaliLoadersChainTail")
    args = parser.parse_args(argv)
    if args.chain_tail:
        import os

        from dali_loaders.ops import chain_tail

        os.environ[chain_tail.ENV] = "1"
    ms, operators = measure(args.batch, args.size, args.rounds, args.runs, args.threads)
    print(f"TrivialAugmentWide chain on a CPU graph{' (DaliLoadersChainTail)' if args.chain_tail else ''}, "
          f"{args.batch} images of {args.size} x {args.size}, "
          f"{args.threads} threads: {ms:.1f} ms a batch (best of {args.rounds} x {args.runs}), {operators} operators")


if __name__ == "__main__":
    main()
