"""`python -m benchmarks.blur_cost`: what a Gaussian blur costs a 224 x 224 image in DALI's
`fn.gaussian_blur` and in the augmentation operator (DaliLoadersAugment's blur, what CPU graphs
run), milliseconds an image on one thread.

Each is timed in a pipeline of its own over the same images, and again with a step that leaves
the image as it is (a 1 x 1 window; the Identity step), which costs each pipeline its feed and
its copy: the blur's cost is the difference. The four pipelines take turns, round after round;
the medians are printed. The kernel is torchvision's for the size and sigma asked.
"""
import argparse

import numpy as np

from .turns import median_ms_per_image


def pipelines(batch: int, size: int, kernel: int, sigma: float) -> dict:
    """{name: built pipeline} over the same `batch` images."""
    from nvidia.dali import fn, pipeline_def

    from dali_loaders.ops import augment as op
    from dali_loaders.ops import plugin

    if not plugin.augment_available():
        raise SystemExit("the augmentation plugin cannot be built here: `python -m dali_loaders build-plugins` says why")
    rng = np.random.default_rng(0)
    images = [rng.integers(0, 256, (size, size, 3), dtype=np.uint8) for _ in range(batch)]
    steps = {"blur": ("GaussianBlur", [sigma, float(kernel), float(kernel), 0.0]), "identity": ("Identity", [0.0] * 4)}

    def dali(window: int):
        @pipeline_def(batch_size=batch, num_threads=1, device_id=None, prefetch_queue_depth=1)
        def graph():
            data = fn.external_source(source=lambda: images, batch=True, layout="HWC")
            return fn.gaussian_blur(data, window_size=[window, window], sigma=sigma)
        return graph()

    def ours(step: str):
        name, params = steps[step]
        codes = [np.array([op.CODES[name]], np.int32)] * batch
        rows = [np.array([params], np.float32)] * batch

        @pipeline_def(batch_size=batch, num_threads=1, device_id=None, prefetch_queue_depth=1)
        def graph():
            data, ops, parameters = fn.external_source(source=lambda: (images, codes, rows), num_outputs=3,
                                                       batch=True, layout=["HWC", "", ""])
            return op.call(data, ops, parameters, "tensor")
        return graph()

    made = {"DALI fn.gaussian_blur": dali(kernel), "DALI, 1 x 1 window": dali(1),
            "augmentation operator": ours("blur"), "augmentation operator, Identity": ours("identity")}
    for pipeline in made.values():
        pipeline.build()
    return made


def measure(batch: int, size: int, kernel: int, sigma: float, rounds: int, runs: int) -> dict:
    """{name: median ms an image over the rounds}, the pipelines taking turns."""
    return median_ms_per_image(pipelines(batch, size, kernel, sigma), batch, rounds, runs)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.blur_cost", description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", type=int, default=23, help="the kernel's side (odd)")
    parser.add_argument("--sigma", type=float, default=1.0)
    parser.add_argument("--size", type=int, default=224, help="the images' side")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--runs", type=int, default=3, help="batches a round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    times = measure(args.batch, args.size, args.kernel, args.sigma, args.rounds, args.runs)
    print(f"a {args.kernel} x {args.kernel} blur (sigma {args.sigma}) of {args.size} x {args.size} RGB images, "
          f"one thread, median of {args.rounds} rounds, ms an image")
    for name, ms in times.items():
        print(f"{name:<34} {ms:7.3f}")
    dali = times["DALI fn.gaussian_blur"] - times["DALI, 1 x 1 window"]
    ours = times["augmentation operator"] - times["augmentation operator, Identity"]
    print(f"the blur alone: DALI {dali:.3f}, the augmentation operator {ours:.3f}: {dali / ours:.1f}x")


if __name__ == "__main__":
    main()
