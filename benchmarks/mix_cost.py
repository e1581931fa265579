"""`python -m benchmarks.mix_cost`: what AugMix's mix costs an image on one thread, milliseconds:
the augmentation plugin's DaliLoadersMix (what CPU graphs run) against the same mix in DALI's
arithmetic operators (what GPU graphs, and CPU graphs without the plugin, run), torchvision's
mix and timm's (the chains' sum, then PIL's blend).

Each is a pipeline of its own over the same image and three chains (random uint8 images fed by
external_source) and weights; a fifth pipeline only feeds them, and its time is taken off the
others'. The pipelines take turns, round after round; the medians are printed.
"""
import argparse

import numpy as np

from .turns import median_ms_per_image

CHAINS = 3


def pipelines(batch: int, size: int) -> dict:
    """{name: built pipeline} over the same images and weights."""
    from nvidia.dali import fn, pipeline_def

    from dali_loaders.ops import augment as op
    from dali_loaders.ops import plugin
    from dali_loaders.transforms import aug_mix

    if not plugin.augment_available():
        raise SystemExit("the augmentation plugin cannot be built here: `python -m dali_loaders build-plugins` says why")
    rng = np.random.default_rng(0)
    images = [[rng.integers(0, 256, (size, size, 3), dtype=np.uint8) for _ in range(batch)] for _ in range(1 + CHAINS)]
    weights = [rng.dirichlet([1.0] * (1 + CHAINS)).astype(np.float32) for _ in range(batch)]

    def feed(values):
        return lambda: values

    def made(mix):
        @pipeline_def(batch_size=batch, num_threads=1, device_id=None, prefetch_queue_depth=1)
        def graph():
            inputs = [fn.external_source(source=feed(images[k]), batch=True, layout="HWC") for k in range(1 + CHAINS)]
            w = fn.external_source(source=feed(weights), batch=True)
            return mix(inputs, w)
        pipeline = graph()
        pipeline.build()
        return pipeline

    def arithmetic(blend: bool):
        def mix(inputs, w):
            usable = op.usable
            op.usable = lambda device: False   # aug_mix.mixed as a graph without the plugin builds it
            try:
                return aug_mix.mixed(inputs[0], inputs[1:], w[0], [w[k + 1] for k in range(CHAINS)], "cpu", blend)
            finally:
                op.usable = usable
        return mix

    return {"fed only": made(lambda inputs, w: inputs[0]),
            "torchvision's mix: DaliLoadersMix": made(lambda inputs, w: op.mix(inputs[0], inputs[1:], w)),
            "torchvision's mix: DALI arithmetic": made(arithmetic(False)),
            "timm's mix and blend: DaliLoadersMix": made(lambda inputs, w: op.mix(inputs[0], inputs[1:], w, True)),
            "timm's mix and blend: DALI arithmetic": made(arithmetic(True))}


def measure(batch: int, size: int, rounds: int, runs: int) -> dict:
    """{name: median ms an image over the rounds}, the pipelines taking turns."""
    return median_ms_per_image(pipelines(batch, size), batch, rounds, runs)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.mix_cost", description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=176, help="the images' side")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--runs", type=int, default=3, help="batches a round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    times = measure(args.batch, args.size, args.rounds, args.runs)
    print(f"AugMix's mix of {args.size} x {args.size} RGB images and {CHAINS} chains, one thread, median of "
          f"{args.rounds} rounds, ms an image (the feed's time taken off)")
    fed = times.pop("fed only")
    for name, ms in times.items():
        print(f"{name:<40} {ms - fed:7.3f}")
    for kind in ("torchvision's mix", "timm's mix and blend"):
        ours, theirs = times[f"{kind}: DaliLoadersMix"] - fed, times[f"{kind}: DALI arithmetic"] - fed
        print(f"{kind}: DaliLoadersMix {theirs / ours:.1f}x faster than DALI's arithmetic")


if __name__ == "__main__":
    main()
