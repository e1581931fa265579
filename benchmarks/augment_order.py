"""`python -m benchmarks.augment_order`: what the order of a batch's samples costs
DaliLoadersAugment, milliseconds a batch.

A CPU operator's samples are tasks on DALI's thread pool, and the next operator starts when
the last of them ends. An augmentation's cost varies a hundredfold from sample to sample (no
step, a pointwise one at ~37 us a 224 x 224 image, PIL's bicubic rotation at ~870), so a slow
sample that starts last keeps the other threads waiting. The operator hands the pool each
sample's cost (its steps' passes over its pixels), which runs the costliest first; with its
bench-only `_equal_priority` every sample weighs alike, as before. Both graphs get the same
images and the same steps, drawn as timm's rand-m9 draws them (two slots, each applied with
probability 0.5, one of its fifteen operations, warps bicubic), and take turns round after
round. The gain grows with the samples each thread gets few of: run it with the threads and
batch of the machine in question (16 threads, batch 128 on the GPU machines).
"""
import argparse

import numpy as np

from .turns import median_ms

# timm's rand-m9 operations (ops/csrc/augment_codes.h names) at their magnitude-9 arguments:
# p0, p1 as augment_kernels.h reads them (the warps' p1: PIL's bicubic, 3)
OPERATIONS = {
    "ShearX": (0.27, 3.0), "ShearY": (0.27, 3.0), "TranslateX": (40.0, 3.0), "TranslateY": (40.0, 3.0),
    "Rotate": (27.0, 3.0), "Brightness": (0.81, 1.0), "Color": (0.81, 1.0), "Contrast": (0.81, 1.0),
    "Sharpness": (0.81, 1.0), "Posterize": (5.0, 0.0), "Solarize": (26.0, 0.0), "AutoContrast": (0.0, 0.0),
    "Equalize": (0.0, 0.0), "Invert": (0.0, 0.0), "SolarizeAdd": (99.0, 128.0),
}


def drawn_steps(rng, batches: int, batch: int) -> list:
    """Per batch, per sample, (op codes int32 (K,), params float32 (K, 4)): two slots at p 0.5."""
    from dali_loaders.ops import augment as op

    names = list(OPERATIONS)
    plan = []
    for _ in range(batches):
        codes, params = [], []
        for _ in range(batch):
            chosen = [names[rng.integers(len(names))] for _ in range(2) if rng.random() < 0.5] or ["Identity"]
            codes.append(np.array([op.CODES[name] for name in chosen], np.int32))
            params.append(np.array([list(OPERATIONS.get(name, (0.0, 0.0))) + [0.0, 0.0] for name in chosen],
                                   np.float32))
        plan.append((codes, params))
    return plan


def pipelines(batch: int, threads: int, size: int, batches: int) -> dict:
    """{"costliest first": pipeline, "alike": pipeline}, built, over the same inputs."""
    from nvidia.dali import fn, pipeline_def

    from dali_loaders.ops import plugin

    if not plugin.augment_available():
        raise SystemExit("the augmentation plugin cannot be built here: `python -m dali_loaders build-plugins` says why")
    rng = np.random.default_rng(0)
    images = [rng.integers(0, 256, (size, size, 3), dtype=np.uint8) for _ in range(batch)]
    plan = drawn_steps(rng, batches, batch)

    def make(equal: bool):
        turn = {"k": 0}

        def source():
            codes, params = plan[turn["k"] % batches]
            turn["k"] += 1
            return images, codes, params

        @pipeline_def(batch_size=batch, num_threads=threads, device_id=None, prefetch_queue_depth=1)
        def graph():
            data, codes, params = fn.external_source(source=source, num_outputs=3, batch=True,
                                                     layout=["HWC", "", ""])
            return fn.dali_loaders_augment(data, ops=codes, params=params, kernels="pil", _equal_priority=equal)

        pipeline = graph()
        pipeline.build()
        return pipeline

    return {"costliest first": make(False), "alike (as before)": make(True)}


def measure(batch: int, threads: int, size: int, batches: int, rounds: int) -> dict:
    """{order: median ms a batch over the rounds}, the two taking turns."""
    return median_ms(pipelines(batch, threads, size, batches), rounds, batches, warmup=min(batches, 10))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.augment_order", description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--size", type=int, default=224, help="the images' side")
    parser.add_argument("--batches", type=int, default=100, help="batches a round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    times = measure(args.batch, args.threads, args.size, args.batches, args.rounds)
    print(f"DaliLoadersAugment, timm's rand-m9 steps, batch {args.batch} of {args.size} x {args.size}, "
          f"{args.threads} threads, median of {args.rounds} rounds of {args.batches} batches")
    base = times["alike (as before)"]
    for name, ms in times.items():
        print(f"{name:<24} {ms:8.3f} ms a batch  {base / ms:5.2f}x")


if __name__ == "__main__":
    main()
