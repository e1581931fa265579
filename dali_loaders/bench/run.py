"""`python -m dali_loaders bench`: the DALI loaders against torchvision and the machine's limit.

For CIFAR-10, an ImageNet-style folder, MNIST, a Flowers-102-style set and a Hugging Face
dataset of the folder's JPEGs, train and val, it times the loaders side by side, each in its
own process: the DALI loader; its torchvision twin at its best num_workers (0 .. the core
count; on the Hugging Face dataset, DataLoader(ds.with_transform(...))); torchvision's tensor
backend; on the image folder, NVIDIA's DALI example pipeline written by hand; on the Hugging
Face dataset, the DALI loader over ImageFolder of the same files; and the limit: for CIFAR and
MNIST, gathering the batch and converting it to float NCHW in one vectorized pass; for
images, DALI decoding the same files and nothing else. It prints images/s, DALI's speed-up
over each, its fraction of the limit, time to first batch and peak RSS, then writes a JSON
file and a PNG chart.
"""
import argparse
import datetime
import json
import os
import platform
import sys
import textwrap
import time

from tqdm import tqdm

from . import data, report
from .catalog import RECIPES
from .contenders import ARRAY_DATASETS  # in memory: the larger batch
from .session import Schedule, Workers, Workload, commands_per_workload, time_workload

# mode -> CIFAR train/test images, JPEGs train/val, batch sizes, plan
MODES = {
    "full": dict(cifar=(50000, 10000), jpegs=(1280, 500), mnist=(60000, 10000), flowers=(1020, 510),
                 cifar_batch=256, image_batch=64,
                 plan=Schedule(rounds=3, sweep_batches=None, max_batches=None, min_seconds=3.0)),
    "quick": dict(cifar=(10000, 2000), jpegs=(1024, 256), mnist=(10000, 2000), flowers=(512, 256),
                  cifar_batch=256, image_batch=64,
                  plan=Schedule(rounds=3, sweep_batches=None, max_batches=None, min_seconds=1.0)),
    "tiny": dict(cifar=(1024, 512), jpegs=(48, 24), mnist=(1024, 512), flowers=(16, 16),
                 cifar_batch=256, image_batch=16, flowers_short_sides=(96, 128),
                 plan=Schedule(rounds=1, sweep_batches=1, max_batches=None, sweep=False)),
}
SWEEP_IMAGES = {"cifar10": 12800, "imagenet": 384, "mnist": 12800, "flowers102": 384, "hf": 384}  # per pass
DATASETS = ("cifar10", "imagenet", "mnist", "flowers102", "hf")
# Where --data-dir DIR holds each dataset, and the file that says it is there.
DATA_DIR_LAYOUT = {"cifar10": ("", "cifar-10-batches-py"), "imagenet": ("imagenet", "train"),
                   "mnist": ("", os.path.join("MNIST", "raw")), "flowers102": ("", "flowers-102"),
                   "hf": ("hf", "train")}
REAL_PASS_IMAGES = 12800


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = textwrap.fill(__doc__.split("\n\n")[1].replace("\n", " "), 80)
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = ("examples:\n"
                     "  dali-loaders bench                      made-up data, ~5 minutes\n"
                     "  dali-loaders bench --quick              fewer images, ~3 minutes\n"
                     "  dali-loaders bench --tiny               a few batches, default recipes: that it runs\n"
                     "  dali-loaders bench --data-dir ~/data    real CIFAR-10 and ImageNet\n"
                     "  dali-loaders bench --only cifar10 --json cifar.json")
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_const", dest="mode", const="quick",
                      help="10,000 CIFAR and 1,024 JPEG train images (default: 50,000 and 1,280)")
    size.add_argument("--tiny", action="store_const", dest="mode", const="tiny",
                      help="a few batches of each dataset, the default recipes (unless --recipe), one round, "
                           "no targets: checks that it runs, not speed")
    parser.set_defaults(mode="full")
    parser.add_argument("--data-dir", metavar="DIR",
                        help="real data instead of made-up: DIR/cifar-10-batches-py/, DIR/MNIST/raw/, "
                             "DIR/flowers-102/ (torchvision's layouts), DIR/imagenet/{train,val}/<class>/ and "
                             "DIR/hf/{train,val}/<class>/ (made into a Hugging Face dataset in --cache-dir); "
                             "a missing one is skipped")
    parser.add_argument("--cifar-dir", metavar="DIR", help="the CIFAR-10 root alone (overrides --data-dir)")
    parser.add_argument("--imagenet-dir", metavar="DIR",
                        help="the image folder alone, holding train/ and val/ (overrides --data-dir)")
    parser.add_argument("--only", choices=DATASETS, action="append",
                        help="time this dataset only (repeatable; default: all)")
    parser.add_argument("--recipe", action="append", metavar="NAME",
                        choices=sorted({name for named in RECIPES.values() for name in named}),
                        help="time this recipe only (repeatable; default: all, --tiny: default; "
                             "defined in dali_loaders/bench/catalog.py)")
    parser.add_argument("--threads", type=int, default=cores(), metavar="N",
                        help="the most DALI threads and DataLoader workers tried (default: %(default)s, "
                             "the cores this process may use; --tiny tries this many only)")
    parser.add_argument("--rounds", type=int, metavar="N", help="timed runs per loader (default: 3)")
    parser.add_argument("--max-batches", type=int, metavar="N",
                        help="end each pass after N batches (default: the whole split of made-up data, "
                             f"{REAL_PASS_IMAGES:,} images of real data)")
    parser.add_argument("--cache-dir", default=data.default_cache_dir(), metavar="DIR",
                        help="where made-up data is kept between runs (default: %(default)s)")
    parser.add_argument("--json", metavar="PATH", default="bench-results/bench.json",
                        help="write every measurement here (default: %(default)s)")
    parser.add_argument("--plot", metavar="PATH", default="bench-results/bench.png",
                        help="write the chart here (default: %(default)s)")


def _real_root(args, dataset: str):
    """The user's root for `dataset`, "" if they gave data but not this one, None if none."""
    explicit = {"cifar10": args.cifar_dir, "imagenet": args.imagenet_dir}.get(dataset)
    if explicit:
        return explicit
    if args.data_dir:
        folder, marker = DATA_DIR_LAYOUT[dataset]
        root = os.path.join(args.data_dir, folder) if folder else args.data_dir
        return root if os.path.isdir(os.path.join(root, marker)) else ""
    return "" if (args.cifar_dir or args.imagenet_dir) else None


def _data_root(args, dataset: str, mode: dict):
    root = _real_root(args, dataset)
    if dataset == "hf" and root != "":   # a datasets.Dataset of an image folder's JPEGs
        from .hf import make_hf

        return make_hf(args.cache_dir, root or data.make_image_folder(args.cache_dir, *mode["jpegs"]))
    if root is None:
        if dataset == "cifar10":
            return data.make_cifar(args.cache_dir, *mode["cifar"])
        if dataset == "mnist":
            return data.make_mnist(args.cache_dir, *mode["mnist"])
        if dataset == "flowers102":
            return data.make_flowers(args.cache_dir, *mode["flowers"],
                                     short_sides=mode.get("flowers_short_sides", (500, 500)))
        return data.make_image_folder(args.cache_dir, *mode["jpegs"])
    if root == "":
        print(f"skipping {dataset}: no data for it under the given directories", file=sys.stderr)
    return root


def chosen_recipes(args, dataset: str) -> dict:
    """name -> recipe of the dataset's recipes this run times: --recipe's, else all (--tiny:
    the default); one whose library is missing is skipped with a one-line hint."""
    wanted = args.recipe or (["default"] if args.mode == "tiny" else None)
    found = {}
    for name, recipe in RECIPES[dataset].items():
        if wanted and name not in wanted:
            continue
        missing = recipe.missing()
        if missing:
            print(f"{name if name != 'default' else dataset} skipped: pip install {' '.join(missing)}",
                  file=sys.stderr)
            continue
        found[name] = recipe
    return found


def workloads(args, mode: dict):
    """The workloads to time; None when every dataset's recipes asked for were skipped (their
    libraries are missing), so that there is nothing to time but the data is not to blame."""
    found, skipped_all = [], True
    for dataset in args.only or DATASETS:
        recipes = chosen_recipes(args, dataset)
        skipped_all = skipped_all and not recipes
        root = _data_root(args, dataset, mode) if recipes else None
        if not root:
            continue
        batch = mode["cifar_batch" if dataset in ARRAY_DATASETS else "image_batch"]
        for name, recipe in recipes.items():
            for split in recipe.splits:
                found.append(Workload(dataset, split, root, batch, args.threads, name))
    return None if skipped_all else found


def _plan(args, mode: dict, workload: Workload) -> Schedule:
    plan = mode["plan"]
    sweep = plan.sweep_batches or max(1, SWEEP_IMAGES[workload.dataset] // workload.batch_size)
    return Schedule(rounds=args.rounds or plan.rounds, sweep_batches=sweep, max_batches=_pass_batches(args, workload),
                    min_seconds=plan.min_seconds, sweep=plan.sweep)


def _pass_batches(args, workload: Workload):
    """--max-batches; else whole passes over made-up data, and at most REAL_PASS_IMAGES of a
    real set (a pass over ImageNet's 1.28 M images would take the torchvision twin an hour)."""
    if args.max_batches:
        return args.max_batches
    if _real_root(args, workload.dataset) is None:
        return None
    return max(1, REAL_PASS_IMAGES // workload.batch_size)


def machine() -> dict:
    from importlib.metadata import version

    import torch

    cpu = platform.processor()
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    memory_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2 ** 30
    return {"cpu": cpu, "cores": cores(), "memory_gb": round(memory_gb, 1),
            "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
            "python": platform.python_version(), "platform": platform.platform(),
            "torch": version("torch"), "torchvision": version("torchvision"), "dali": dali_version()}


def dali_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    for name in ("nvidia-dali-cuda120", "nvidia-dali-cuda130", "nvidia-dali-cuda110", "nvidia-dali"):
        try:
            return version(name)
        except PackageNotFoundError:
            pass
    import nvidia.dali

    return nvidia.dali.__version__


def _write_json(path: str, document: dict) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(document, f, indent=2)


def draw_chart(results: list, path: str, title: str) -> bool:
    """The PNG chart; without matplotlib, a one-line hint instead (the table is printed already)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("no chart: matplotlib is not installed (pip install matplotlib, or dali_loaders[bench])",
              file=sys.stderr)
        return False
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    report.plot(results, path, title)
    return True


def main(args) -> int:
    started = time.perf_counter()
    mode = MODES[args.mode]
    chosen = workloads(args, mode)
    if chosen is None:
        print("nothing to time: every recipe asked for was skipped (see above)", file=sys.stderr)
        return 1
    todo = [(w, _plan(args, mode, w)) for w in chosen]
    if not todo:
        print("nothing to time: no data found", file=sys.stderr)
        return 1
    steps = sum(commands_per_workload(plan, w) for w, plan in todo)
    results = []
    pool = Workers(reuse=args.mode == "tiny")   # --tiny: one process per loader, not per workload
    try:
        with tqdm(total=steps, desc="bench", unit="step", dynamic_ncols=True) as progress:
            for workload, plan in todo:
                results.append(time_workload(workload, plan, progress, pool))
    finally:
        pool.close()
    info = machine()
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    command = "dali-loaders bench " + " ".join(sys.argv[2:] if sys.argv[1:2] == ["bench"] else sys.argv[1:])
    checked = report.check_targets(results) if args.mode != "tiny" else []
    document = {"date": when, "command": command.strip(), "mode": args.mode, "machine": info,
                "seconds": time.perf_counter() - started, "results": results, "targets": checked}
    _write_json(args.json, document)
    title = f"{info['cpu']}, {info['cores']} cores, {info['gpu'] or 'no GPU'}, DALI {info['dali']}, {when}"
    print(f"\n{title}; `{document['command']}` in {document['seconds'] / 60:.1f} min\n")
    print(report.markdown_table(results))
    print("\nDALI's ratios are medians over rounds of side-by-side passes.")
    if checked:
        print("\n" + report.targets_text(checked))
    elif args.mode == "tiny":
        print("--tiny: too few batches for the speeds to mean anything; no targets checked.")
    sys.stdout.flush()
    drawn = draw_chart(results, args.plot, title)
    print(f"\nwrote {args.json}" + (f" and {args.plot}" if drawn else ""))
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m dali_loaders.bench.run")
    add_arguments(parser)
    sys.exit(main(parser.parse_args()))
