"""`python -m benchmarks.cifar_stages`: where the CIFAR-10 train loader's time goes.

The loader's graph for the default recipe (RandomCrop(32, padding=4), flip, normalize),
built one stage at a time from the array source, then the whole loader (the graph plus
DaliLoader's per-batch work: the torch tensors, the labels), beside the baseline DALI loader
(CIFAR, original; dali_loaders/bench/arrays.py) and torch's v2 ops on whole batches (one crop
and one flip per batch, not per image: cheaper work than the loaders'), with 1 torch thread and with as many as DALI's
(torch's intra-op threads are the batched contender's only parallelism; with 2 on 2 shared
cores it slows down far more than the loaders under load). Every row runs whole passes
over the split, the rows taking turns round after round (A, B, C, A, B, C, ...), with the
same threads and batch; the median of the rounds is printed. The difference between
consecutive rows is the cost of what was added.
"""
import argparse
import statistics
import time

import numpy as np

from dali_loaders import recipes
from dali_loaders.bench import data
from dali_loaders.bench.runs import exact_runs
from dali_loaders.bench.run import cores

BATCH = 256

STAGES = ("external_source: the batch gathered by index", "  + the source's pad and random crop",
          "  + the flips (the source's too)", "  + the final normalize (= the loader's graph)")


def _graph_stage(source, stage: int):
    """The loader's train graph up to stage `stage` (see STAGES)."""
    from dali_loaders import transforms
    from dali_loaders.loader import build
    from dali_loaders.loader.pipeline import EpochOrder

    steps = transforms.flatten(recipes.cifar(True))   # RandomCrop, flip, ToImage, ToDtype, Normalize
    order = EpochOrder(np.random.default_rng(0).permutation(len(source)))   # what graph() hands a source
    # the labels stay on the host, as the loader's graph leaves them (DaliLoader reads them)
    if stage == len(STAGES) - 1:
        return build.graph(source, order, BATCH, transforms.plan(recipes.cifar(True), False), "CHW", "cpu", True)
    images, _ = source.read(order, BATCH, "cpu", labels=False)
    transforms.apply(steps[:stage], images)
    return (images.data,) + ((images.mirror,) if images.mirror is not None else ())


def _pipelines(source, threads: int) -> dict:
    from nvidia.dali import pipeline_def

    from dali_loaders.loader import lean_api_checks

    def made(stage):
        def make():
            pipeline = pipeline_def(_graph_stage, batch_size=BATCH, num_threads=threads, device_id=None,
                                    seed=0)(source, stage)
            lean_api_checks(pipeline)   # as the loader's pipeline
            pipeline.build()
            return exact_runs(pipeline, -(-len(source) // BATCH))
        return make
    return {name: made(stage) for stage, name in enumerate(STAGES)}


def _loaders(root: str, source, threads: int) -> dict:
    from dali_loaders import get_cifar_iter_dali
    from dali_loaders.bench.arrays import CifarBaseline, TorchBatched

    loader = get_cifar_iter_dali("train", root, BATCH, threads, seed=0)
    baseline = CifarBaseline(source, BATCH, threads, recipes.CIFAR_MEAN["cifar10"], recipes.CIFAR_STD["cifar10"])
    rows = {"the DALI loader (graph + DaliLoader's per-batch work)": lambda: iter(loader),
            "baseline DALI loader (CIFAR, original)": lambda: iter(baseline)}
    for torch_threads in sorted({1, threads}):   # torch's intra-op threads: 1, and DALI's count
        batched = TorchBatched(source, recipes.cifar(True), BATCH, shuffle=True, threads=torch_threads)
        rows[f"torch v2 on whole uint8 batches, {torch_threads} torch thread(s)"] = \
            lambda batched=batched: iter(batched)
    return rows


def _rate(make_pass, images: int) -> float:
    passes = make_pass()   # built before the clock starts
    start = time.perf_counter()
    for _ in passes:
        pass
    return images / (time.perf_counter() - start)


def time_rows(root: str, threads: int, rounds: int) -> dict:
    """{row: median images/s}, every row one whole pass per round, the rows taking turns."""
    from dali_loaders.datasets.cifar import cifar_source

    source = cifar_source(root, True)
    rows = {**_pipelines(source, threads), **_loaders(root, source, threads)}
    for make_pass in rows.values():   # warm-up
        _rate(make_pass, len(source))
    rates = {name: [] for name in rows}
    for _ in range(rounds):
        for name, make_pass in rows.items():
            rates[name].append(_rate(make_pass, len(source)))
    return {name: statistics.median(r) for name, r in rates.items()}


def print_table(rates: dict, threads: int, images: int) -> None:
    print(f"\nCIFAR-10 train, {images:,} images, batch {BATCH}, {threads} DALI thread(s), median of the rounds:")
    print(f"{'row':58s} {'img/s':>10s} {'us/batch':>9s}")
    for name, rate in rates.items():
        print(f"{name:58s} {rate:10,.0f} {BATCH / rate * 1e6:9.0f}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cifar_stages",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--cifar-dir", metavar="DIR", help="a CIFAR-10 root (default: the bench's made-up "
                        "50,000 + 10,000 images, made if missing)")
    parser.add_argument("--threads", type=int, default=cores(), help="DALI threads (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=3, help="passes per row (default: %(default)s)")
    parser.add_argument("--cache-dir", default=data.default_cache_dir(), metavar="DIR")
    args = parser.parse_args(argv)
    root = args.cifar_dir or data.make_cifar(args.cache_dir, 50000, 10000)
    rates = time_rows(root, args.threads, args.rounds)
    from dali_loaders.datasets.cifar import cifar_source

    print_table(rates, args.threads, len(cifar_source(root, True)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
