"""`python -m benchmarks.mixing_blend`: what MixUp's blend of a CPU float32 batch costs, in one
pass of C (ops/blend.py) and in numpy's three passes (the fallback where the plugin is not).

The blend the loaders run on a mixed batch (transforms/mixing.py's cpu_blend: each image with
the one before it), on the batches of the bench's recipes: 64 x 3 x 176 x 176 (the ResNet-50
reference's train crop) and 256 x 3 x 32 x 32 (CIFAR-10). The two ways take turns, round
after round, on one thread; printed: the median of the rounds, in ms a batch.
"""
import argparse
import statistics
import time

SHAPES = ((64, 3, 176, 176), (256, 3, 32, 32))


def time_blends(rounds: int, repeats: int) -> dict:
    """{shape: {"C": ms, "numpy": ms}}, the median over `rounds` of `repeats` blends each."""
    import torch

    from dali_loaders.ops import blend
    from dali_loaders.transforms import mixing

    if not blend.usable():
        raise SystemExit("the normalization plugin is not available here: nothing to compare")
    usable = blend.usable
    rates = {}
    try:
        for shape in SHAPES:
            images = torch.rand(*shape, generator=torch.Generator().manual_seed(0))
            times = {"C": [], "numpy": []}
            for _ in range(rounds):
                for name, in_c in (("C", True), ("numpy", False)):
                    blend.usable = lambda in_c=in_c: in_c
                    start = time.perf_counter()
                    for _ in range(repeats):
                        mixing.cpu_blend(images, 0.3, "roll")
                    times[name].append((time.perf_counter() - start) / repeats * 1e3)
            rates[shape] = {name: statistics.median(values) for name, values in times.items()}
    finally:
        blend.usable = usable
    return rates


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.mixing_blend", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="turns of each way (default: 5)")
    parser.add_argument("--repeats", type=int, default=20, help="blends a turn (default: 20)")
    args = parser.parse_args(argv)
    print("| batch | one pass of C (ms) | numpy (ms) | numpy / C |")
    print("| --- | ---: | ---: | ---: |")
    for shape, ms in time_blends(args.rounds, args.repeats).items():
        print(f"| {' x '.join(map(str, shape))} | {ms['C']:.2f} | {ms['numpy']:.2f} | {ms['numpy'] / ms['C']:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
