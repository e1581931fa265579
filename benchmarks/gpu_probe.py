"""`python -m benchmarks.gpu_probe`: what the GPU bench does not time, in one process on a GPU
machine (about 2 minutes on an H200 with 16 cores): the heavy recipes (resnet50:
TrivialAugmentWide + RandomErasing; timm-ra: RandAugment + pixel RandomErasing) and CIFAR-10 on
device="gpu" and "cpu-decode", beside torchvision's tensor backend on persistent workers; the
DALI pipelines built over 3 epochs of each; the val pipeline running ahead into the next epoch
or not; the GPU val path's pixels against torchvision's own (PIL) pipeline. Steady state: the
median of the epochs after the first, as the bench.

`--decode`: the recipes whose steps device="gpu" runs on the CPU, their files decoded on the CPU
and on the GPU (the "gpu-decode" graph), after its check-gpu rows.

`--tail`: the chain's pixel stages in the library's GPU operator (DaliLoadersChainTail), first
checked against DALI's operators pixel for pixel, then timed on the heavy recipes and their
pieces beside the same chain in DALI's operators, the fused CPU operator and torchvision.

From the repository's root; the rows and $OUT/probe-extra.json (where OUT is set).
"""
import argparse
import contextlib
import json
import os
import statistics
import sys
import time
import traceback
from typing import Optional

import torch

from dali_loaders import DaliLoader, get_cifar_iter_dali, recipes, switches
from dali_loaders.bench.catalog import RECIPES
from dali_loaders.bench.data import default_cache_dir, make_cifar, make_image_folder

THREADS = int(os.environ.get("THREADS", str(os.cpu_count())))
N_TRAIN, N_VAL = int(os.environ.get("N_TRAIN", "6000")), int(os.environ.get("N_VAL", "1500"))
EPOCHS, BATCH = 3, 128
CACHE = os.environ.get("PROBE_CACHE") or default_cache_dir()   # the GPU bench's data, where it ran
results = {}


def report(name, rates, warm=False, **extra):
    """`rates` per epoch, the first a build's and warm-up's (steady: the median of the rest, as
    the bench), or all steady (`warm`)."""
    steady = statistics.median(rates if warm or len(rates) == 1 else rates[1:])
    results[name] = {"per_epoch": [round(r) for r in rates], "steady": round(steady), **extra}
    more = "".join(f"  {k} {v}" for k, v in extra.items())
    print(f"{name:56s} {steady:9,.0f} img/s   epochs {[round(r) for r in rates]}{more}", flush=True)


def epochs_of(loader, epochs=EPOCHS):
    rates = []
    for _ in range(epochs):
        start, count = time.perf_counter(), 0
        for images, _ in loader:
            count += images.shape[0]
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        rates.append(count / (time.perf_counter() - start))
    return rates


class Builds:
    """Counts the DALI pipelines built while it is entered."""

    def __enter__(self):
        from nvidia.dali.pipeline import Pipeline

        self.count, self._original = 0, Pipeline._init_pipeline_backend
        probe = self

        def counted(pipe):
            probe.count += 1
            return probe._original(pipe)

        Pipeline._init_pipeline_backend = counted
        return self

    def __exit__(self, *failure):
        from nvidia.dali.pipeline import Pipeline

        Pipeline._init_pipeline_backend = self._original


def guarded(name, run):
    try:
        run()
    except Exception as failure:   # one failing row must not hide the others
        results[name] = {"error": repr(failure)[:400]}
        print(f"{name:56s} FAILED: {failure!r}"[:500], flush=True)
        traceback.print_exc(limit=8)


@contextlib.contextmanager
def steps_on(where: str):
    """device="gpu" with every step the fused CPU operator runs placed on `where` ("cpu" or
    "gpu") meanwhile, whatever the measured placement says."""
    from dali_loaders.loader import build

    with switches.overridden(build.FUSED_STEPS_ENV, where):
        yield


@contextlib.contextmanager
def stages_in_tail(on: Optional[bool]):
    """The GPU chain's pixel stages in DaliLoadersChainTail (on) or DALI's operators (off);
    None: as DALI_LOADERS_CHAIN_TAIL says."""
    from dali_loaders.testing.chain_tail_check import stages_in_operator

    if on is None:
        yield
        return
    with stages_in_operator(on):
        yield


TAILED = ", stages in DaliLoadersChainTail"


def dali_rows(train_folder, variants=(("gpu", "cpu", None), ("gpu", "gpu", None), ("cpu-decode", "cpu", None)),
              recipes_timed=("resnet50", "timm-ra"), decode=None):
    """The heavy recipes under each (device, where the fused operator's steps go, whether the
    GPU chain's stages are DaliLoadersChainTail, None: as the environment says): by default
    device="gpu" with the steps on the CPU (the fused operator) and on the GPU (the chain of
    operators), each forced, and "cpu-decode". `decode` ("cpu" or "gpu"): where the files of
    the steps the CPU runs are decoded (loader/build.py's STEPS_DECODE), named in the row."""
    from torchvision.datasets import ImageFolder

    from dali_loaders.loader import build

    for recipe in recipes_timed:
        make = RECIPES["imagenet"][recipe].make
        for device, steps, tailed in variants:
            name = f"ours {recipe} train, {device}" + (f", steps on the {steps.upper()}" if device == "gpu" else "") + \
                (TAILED if tailed else "") + (f", decoded on the {decode.upper()}" if decode else "")
            decoding = switches.overridden(build.STEPS_DECODE_ENV, decode) if decode else contextlib.nullcontext()

            def run(device=device, make=make, steps=steps, tailed=tailed, name=name, decoding=decoding):
                with steps_on(steps), stages_in_tail(tailed), decoding, Builds() as built:
                    loader = DaliLoader(ImageFolder(train_folder, transform=make(True)), batch_size=BATCH,
                                        shuffle=True, num_workers=THREADS, device=device, seed=1)
                    rates = epochs_of(loader)
                    loader.close()
                report(name, rates, builds=built.count)
            guarded(name, run)


def tail_rows(train_folder):
    """DaliLoadersChainTail on the GPU: its check against DALI's operators (the same pixels, or
    no timing), then the heavy recipes with the chain's stages in DALI's operators and in it,
    the fused CPU operator, torchvision's tensor backend, and the pieces with a chain in it."""
    from dali_loaders.testing import chain_tail_check

    passed = []

    def check():
        cases = chain_tail_check.compare("gpu")
        for name, kind, largest, fraction in cases:
            print(f"chain tail check: {name} ({kind}): largest difference {largest}, {fraction:.4%} differ", flush=True)
        results["chain tail check"] = [list(case) for case in cases]
        passed.append(all(largest == 0 for _, _, largest, _ in cases))
    guarded("chain tail check", check)
    if not passed or not passed[0]:
        print("chain tail check FAILED: nothing timed with the operator", flush=True)
        return False
    dali_rows(train_folder, variants=(("gpu", "gpu", True), ("gpu", "gpu", False), ("gpu", "cpu", False)))
    torchvision_rows(train_folder)
    piece_rows(train_folder, tailed=True)
    return True


def decode_rows(train_folder):
    """The recipes whose steps device="gpu" runs on the CPU (the fused operator's), their files
    decoded on the CPU ("cpu-steps", the placement measured before) and on the GPU ("gpu-decode":
    decoded, cropped and resized there, copied to the CPU for the steps), after the check-gpu
    rows of the "gpu-decode" graphs (no timing if one fails); torchvision's tensor backend beside."""
    import tempfile

    from dali_loaders.testing import check_gpu
    from dali_loaders.transforms import GPU_DECODE

    with tempfile.TemporaryDirectory() as folder:
        checks = [check for check in check_gpu.build_checks(folder) if check.variant == GPU_DECODE]
        failed = check_gpu.run("gpu", checks)
    results["gpu-decode checks"] = {"checks": len(checks), "failed": bool(failed)}
    if failed:
        print("gpu-decode checks FAILED: nothing timed", flush=True)
        return False
    for recipe in ("timm-ra", "resnet50", "tv176"):
        for where in ("cpu", "gpu"):
            dali_rows(train_folder, variants=(("gpu", "cpu", None),), recipes_timed=(recipe,), decode=where)
    torchvision_rows(train_folder)
    return True


def piece_rows(train_folder, tailed=None):
    """The heavy recipes a piece at a time (RandomResizedCrop(176), flip and normalize; then
    TrivialAugmentWide, RandomErasing, RandAugment(2, 9)): the augmentations on the GPU (the
    chain) and, for those the fused CPU operator runs, on the CPU; where each one's time goes.
    `tailed`: only the pieces with a chain, on the GPU, its stages in DaliLoadersChainTail."""
    from torchvision.datasets import ImageFolder
    from torchvision.transforms import v2

    norm = recipes.to_float(recipes.IMAGENET_MEAN, recipes.IMAGENET_STD)
    base = [v2.RandomResizedCrop(176, antialias=True), v2.RandomHorizontalFlip()]
    pieces = {
        "RandomResizedCrop(176), flip, normalize": (v2.Compose(base + norm), True),
        "+ TrivialAugmentWide": (v2.Compose(base + [v2.TrivialAugmentWide()] + norm), True),
        "+ RandomErasing(0.1)": (v2.Compose(base + norm + [v2.RandomErasing(0.1)]), False),
        "+ RandomErasing(1.0)": (v2.Compose(base + norm + [v2.RandomErasing(1.0)]), False),
        "+ TrivialAugmentWide + RandomErasing(0.1)": (
            v2.Compose(base + [v2.TrivialAugmentWide()] + norm + [v2.RandomErasing(0.1)]), True),
        "+ RandAugment(2, 9)": (v2.Compose(base + [v2.RandAugment(2, 9)] + norm), True),
    }
    chained = [name for name in pieces if "Augment" in name]   # the pieces with a chain
    cases = [(item, False) for item in pieces.items() if item[0] in chained or not tailed] + \
        [(item, True) for item in pieces.items() if item[1][1] and not tailed]
    for (name, (transform, _)), on_cpu in cases:
        label = f"piece {name}, steps on the {'CPU' if on_cpu else 'GPU'}" + (TAILED if tailed else "")

        def run(transform=transform, on_cpu=on_cpu, label=label):
            with steps_on("cpu" if on_cpu else "gpu"), stages_in_tail(tailed):
                loader = DaliLoader(ImageFolder(train_folder, transform=transform), batch_size=BATCH, shuffle=True,
                                    num_workers=THREADS, device="gpu", seed=1)
                rates = epochs_of(loader)
                loader.close()
            report(label, rates)
        guarded(label, run)


def torchvision_rows(train_folder):
    from torchvision.datasets import ImageFolder
    from torchvision.io import ImageReadMode, decode_jpeg, read_file

    def load(path):
        return decode_jpeg(read_file(path), mode=ImageReadMode.RGB)

    for recipe in ("resnet50", "timm-ra"):
        spec = RECIPES["imagenet"][recipe]
        make = spec.tensor_make or spec.make

        def run(recipe=recipe, make=make):
            data = ImageFolder(train_folder, transform=make(True), loader=load)
            loader = torch.utils.data.DataLoader(data, batch_size=BATCH, shuffle=True, num_workers=THREADS,
                                                 persistent_workers=True, pin_memory=True, prefetch_factor=4)
            rates = []
            for _ in range(2):   # the first epoch starts the workers
                start, count = time.perf_counter(), 0
                for images, _ in loader:
                    images = images.cuda(non_blocking=True)
                    count += images.shape[0]
                torch.cuda.synchronize()
                rates.append(count / (time.perf_counter() - start))
            report(f"torchvision tensors {recipe} train, {THREADS} workers", rates)
        guarded(f"torchvision tensors {recipe} train", run)


def run_ahead_rows(val_folder):
    """The default val recipe on the GPU, its pipeline running ahead into the next epoch and
    not (each epoch from an idle pipeline), on short epochs (12 batches) where that shows."""
    from torchvision.datasets import ImageFolder

    from dali_loaders.loader import pipeline

    for ahead in (False, True, False, True):
        name = "ours default val, gpu, " + ("running ahead" if ahead else "each epoch from idle")

        def run(ahead=ahead, name=name):
            saved, pipeline.RUN_AHEAD = pipeline.RUN_AHEAD, ahead
            try:
                loader = DaliLoader(ImageFolder(val_folder, transform=recipes.imagenet(False)), batch_size=BATCH,
                                    num_workers=THREADS, device="gpu", seed=1)
                report(name, epochs_of(loader, 8))
                loader.close()
            finally:
                pipeline.RUN_AHEAD = saved
        guarded(name, run)


def pair_rows(root, rounds=4, epochs=6, device="gpu"):
    """NVIDIA's example and this library's factory, built once each, taking turns `rounds`
    times on the same data (`epochs` whole epochs a turn): the ratio of their steady epochs,
    round by round, so that what else the machine does falls on both."""
    from dali_loaders import get_imagenet_iter_dali
    from dali_loaders.bench.nvidia import NvidiaExample

    for split in ("val", "train"):
        loaders = {"NVIDIA's example": NvidiaExample(root, split, BATCH, THREADS, gpu=device == "gpu"),
                   "ours": get_imagenet_iter_dali(split, root, BATCH, THREADS, seed=0, device=device)}
        rates = {name: [] for name in loaders}
        for _ in range(rounds):
            for name, loader in loaders.items():
                rates[name] += epochs_of(loader, epochs)[1:]
        for name in loaders:
            report(f"pairs {split}: {name}", rates[name], warm=True)
        ratio = statistics.median(rates["ours"]) / statistics.median(rates["NVIDIA's example"])
        results[f"pairs {split}: ours / NVIDIA's example"] = round(ratio, 3)
        print(f"pairs {split}: ours / NVIDIA's example {ratio:.3f}", flush=True)
        loaders["ours"].close()


def cifar_rows():
    """CIFAR-10 on the CPU, and under device="gpu" with its steps on the CPU (as placed) and on
    the GPU (forced), the batches on the GPU in all three."""
    from dali_loaders.loader import build

    root = make_cifar(CACHE, int(os.environ.get("N_CIFAR", "50000")), 1000)   # the GPU bench's, where it ran
    for device, on_cpu in (("cpu", True), ("gpu", True), ("gpu", False)):
        name = f"ours CIFAR-10 train, {device}" + ("" if device == "cpu" else
                                                   ", steps on the " + ("CPU" if on_cpu else "GPU"))

        def run(device=device, on_cpu=on_cpu, name=name):
            with switches.overridden(build.DECODED_STEPS_ENV, "cpu" if on_cpu else "gpu"), Builds() as built:
                loader = get_cifar_iter_dali("train", root, 256, THREADS, device=device, seed=1)
                rates = []
                for _ in range(EPOCHS):
                    start, count = time.perf_counter(), 0
                    for images, _ in loader:
                        images = images.cuda(non_blocking=True)   # where training wants them
                        count += images.shape[0]
                    torch.cuda.synchronize()
                    rates.append(count / (time.perf_counter() - start))
                loader.close()
            report(name, rates, builds=built.count)
        guarded(name, run)


def val_parity(val_folder):
    """The GPU val path against torchvision's own: levels of 0..255 after undoing Normalize."""
    from torchvision.datasets import ImageFolder

    def run():
        transform = recipes.imagenet(False)
        ours = DaliLoader(ImageFolder(val_folder, transform=transform), batch_size=64, num_workers=THREADS,
                          device="gpu")
        theirs = torch.utils.data.DataLoader(ImageFolder(val_folder, transform=transform), batch_size=64,
                                             num_workers=THREADS)
        std = torch.tensor(recipes.IMAGENET_STD).view(1, 3, 1, 1) * 255
        worst, means = 0.0, []
        for k, ((a, la), (b, lb)) in enumerate(zip(ours, theirs)):
            assert torch.equal(la.cpu(), lb), "labels differ"
            levels = ((a.cpu() - b).abs() * std)
            worst, means = max(worst, levels.max().item()), means + [levels.mean().item()]
            if k == 3:
                break
        results["val parity, gpu vs torchvision (levels)"] = {"max": round(worst, 2),
                                                              "mean": round(sum(means) / len(means), 4)}
        print(f"val parity, gpu vs torchvision: max {worst:.2f} levels, mean {sum(means) / len(means):.4f}",
              flush=True)
    guarded("val parity", run)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu_probe", description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", action="store_true",
                        help="only NVIDIA's example and this library's factory taking turns, val and train")
    parser.add_argument("--pieces", action="store_true",
                        help="only the heavy recipes a piece at a time, steps on the GPU and on the CPU")
    parser.add_argument("--decode", action="store_true",
                        help="only the recipes whose steps run on the CPU, decoded on the CPU and on the GPU (after "
                             "their check-gpu rows), beside torchvision")
    parser.add_argument("--tail", action="store_true",
                        help="only DaliLoadersChainTail: its check, then the heavy recipes and pieces with it and without")
    args = parser.parse_args(argv)
    start, failed = time.perf_counter(), False
    root = make_image_folder(CACHE, N_TRAIN, N_VAL)
    train, val = os.path.join(root, "train"), os.path.join(root, "val")
    print(f"gpu_probe: {torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no GPU'}, "
          f"{THREADS} threads, {N_TRAIN} train images", flush=True)
    if args.pairs:
        pair_rows(root)
    elif args.pieces:
        piece_rows(train)
    elif args.decode:
        failed = not decode_rows(train)
    elif args.tail:
        failed = not tail_rows(train)
    else:
        val_parity(val)
        run_ahead_rows(val)
        dali_rows(train)
        cifar_rows()
        torchvision_rows(train)
    out = os.environ.get("OUT")
    if out:
        with open(os.path.join(out, "probe-extra.json"), "w") as f:
            json.dump(results, f, indent=1)
    print(f"gpu_probe: {time.perf_counter() - start:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
