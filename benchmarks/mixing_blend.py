"""`python -m benchmarks.mixing_blend`: what mixing a CPU float32 batch costs the loaders.

MixUp's blend (transforms/mixing.py's cpu_blend: each image with the one before it), in one
pass of C (ops/blend.py) and in numpy's three passes (the fallback where the plugin is not);
CutMix's paste (transforms/mixing.py's cutmix, lambda 0.5), into the loader's own batch (in
place: only the box is copied) and into a copy of the batch (a collate_fn's batch, which its
author may hold). On the batches of the bench's recipes: 64 x 3 x 176 x 176 (the ResNet-50
reference's train crop) and 256 x 3 x 32 x 32 (CIFAR-10). The ways take turns, round after
round, on one thread; printed: the median of the rounds, in ms a batch.
"""
import argparse
import statistics
import time

SHAPES = ((64, 3, 176, 176), (256, 3, 32, 32))


def _median_turns(ways: dict, rounds: int, repeats: int) -> dict:
    """{name: ms}: each way (a callable, set up and torn down by itself) run `repeats` times a
    turn, the ways taking turns for `rounds`; the median turn of each."""
    times = {name: [] for name in ways}
    for _ in range(rounds):
        for name, way in ways.items():
            start = time.perf_counter()
            for _ in range(repeats):
                way()
            times[name].append((time.perf_counter() - start) / repeats * 1e3)
    return {name: statistics.median(values) for name, values in times.items()}


def time_blends(rounds: int, repeats: int) -> dict:
    """{shape: {"C": ms, "numpy": ms}}, the median over `rounds` of `repeats` blends each."""
    from dali_loaders.ops import blend
    from dali_loaders.transforms import mixing

    if not blend.usable():
        raise SystemExit("the normalization plugin is not available here: nothing to compare")
    usable = blend.usable

    def blend_with(in_c: bool, images):
        def run():
            blend.usable = lambda: in_c
            mixing.cpu_blend(images, 0.3, "roll")
        return run

    try:
        return {shape: _median_turns({"C": blend_with(True, images), "numpy": blend_with(False, images)},
                                     rounds, repeats)
                for shape, images in _batches()}
    finally:
        blend.usable = usable


def time_pastes(rounds: int, repeats: int) -> dict:
    """{shape: {"in place": ms, "copy": ms}}: CutMix's paste, the median over `rounds` of `repeats` each."""
    import torch

    from dali_loaders.transforms import mixing

    def paste(images, in_place: bool):
        return lambda: mixing.cutmix(images, 0.5, torch.Generator().manual_seed(1), in_place)

    return {shape: _median_turns({"in place": paste(images, True), "copy": paste(images, False)}, rounds, repeats)
            for shape, images in _batches()}


def _batches():
    import torch

    return [(shape, torch.rand(*shape, generator=torch.Generator().manual_seed(0))) for shape in SHAPES]


def main(argv=None) -> int:
    import torch

    parser = argparse.ArgumentParser(prog="python -m benchmarks.mixing_blend", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="turns of each way (default: 5)")
    parser.add_argument("--repeats", type=int, default=20, help="blends or pastes a turn (default: 20)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)   # as the loaders mix: see cpu_blend
    print("| MixUp, batch | one pass of C (ms) | numpy (ms) | numpy / C |")
    print("| --- | ---: | ---: | ---: |")
    for shape, ms in time_blends(args.rounds, args.repeats).items():
        print(f"| {' x '.join(map(str, shape))} | {ms['C']:.2f} | {ms['numpy']:.2f} | {ms['numpy'] / ms['C']:.2f}x |")
    print("\n| CutMix, batch | in place (ms) | into a copy (ms) | copy / in place |")
    print("| --- | ---: | ---: | ---: |")
    for shape, ms in time_pastes(args.rounds, args.repeats).items():
        print(f"| {' x '.join(map(str, shape))} | {ms['in place']:.2f} | {ms['copy']:.2f} | "
              f"{ms['copy'] / ms['in place']:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
