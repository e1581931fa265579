"""The GPU bench behind `python -m dali_loaders check-gpu --bench`, run after the checks.

On an ImageNet-style folder it makes itself (photo-like JPEGs, 300 to 500 px on the short
side), for the recipes default and resnet50 (timm-ra when asked for), train and val, it
times: the decode ceiling (DALI reading the same files and decoding them "mixed" as NVIDIA's
example does, train only a random crop's window, each image resized to 224 x 224, nothing
else; without a GPU the CPU decode alone: DALI's CPU resize is no ceiling); NVIDIA's DALI
example pipeline (the default recipe, hand-written; bench/nvidia.py); the DALI loader with
device="gpu" (mixed decode), "cpu-decode" and "cpu"; torchvision's tensor backend at its best
num_workers of 4, 8 and 16 (each tried at steady state, SWEEP_SECONDS after a warm-up pass).
Then a full CIFAR-10 train epoch (50,000 images, batch 256): the DALI loader on the GPU and
on the CPU against its torchvision twin at its best num_workers.

Every contender runs as its users run it: in its own process, one at a time (nothing else on
the GPU meanwhile), its loader or pipeline built once per workload and iterated EPOCHS
whole epochs back to back (EPOCHS, and more until the epochs after the first have lasted
STEADY_SECONDS), each batch timed until it is on the GPU (a CPU loader's copied there). A row
gives the steady state, the median images/s of the epochs after the first, beside the
first epoch's (from construction: the build and warm-up a user waits for), the time to the
first batch, and each row's share of the decode ceiling. The GPU memory is torch's peak
(torch.cuda.max_memory_allocated: the batches DALI hands over) and the device's used memory
at its highest, sampled after every batch, less what was used before the process started
(DALI's own pools are not torch's).
Without a GPU it runs the CPU variants only, and says so. It writes gpu-bench.json and
gpu-bench.md into the output folder.
"""
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import List, Optional

from . import data
from .catalog import RECIPES
from .run import cores, dali_version
from .session import Worker, WorkerFailed

IMAGE_RECIPES = ("default", "resnet50", "timm-ra")
DEFAULT_RECIPES = ("default", "resnet50")   # timm-ra when asked for: the default run fits its time budget
WORKER_CANDIDATES = (4, 8, 16)
EPOCHS = 4      # the first, then the steady state: the median of epochs 2..EPOCHS at least
STEADY_SECONDS = 2.0   # ... and as many more as it takes for the steady epochs to last this long
MAX_EPOCHS = 60        # (a val epoch on a GPU is 12 batches, 80 ms: one epoch's median is noise)
SWEEP_SECONDS = 2.0    # each DataLoader worker count tried, at steady state, for this long
IMAGES = 6000   # train JPEGs (val: a quarter)


@dataclass
class Contender:
    name: str
    kind: str                      # a contenders.KINDS name
    device: Optional[str]          # the DALI loader's device= (NVIDIA's example and the ceiling: "gpu", mixed decode)
    workloads: List[tuple] = field(default_factory=list)   # (dataset, split, recipe)


def contenders(gpu: bool, recipes=DEFAULT_RECIPES) -> List[Contender]:
    images = [("imagenet", split, recipe) for recipe in recipes for split in ("train", "val")]
    splits = [("imagenet", split, "default") for split in ("train", "val")] if recipes else []
    cifar = [("cifar10", "train", "default")]
    where = "gpu" if gpu else "cpu"
    # the most telling first, should the time budget run out: the ceiling and NVIDIA's example
    # (seconds each), ours on the GPU, its peers, then the other variants
    found = [Contender("decode ceiling" + (" (mixed decode + resize)" if gpu else " (CPU decode)"),
                       "ceiling", where, splits),
             Contender("NVIDIA's DALI example" + (" (mixed decode)" if gpu else " (CPU decode)"), "nvidia", where,
                       [w for w in splits if "default" in recipes])]
    if gpu:
        found.append(Contender('DALI loader, device="gpu"', "dali", "gpu", images + cifar))
    found += [Contender("torchvision tensors", "tensor", None, images),
              Contender("torchvision (PIL)", "torchvision", None, cifar)]
    if gpu:
        found.append(Contender('DALI loader, device="cpu-decode"', "dali", "cpu-decode", images))
    found.append(Contender('DALI loader, device="cpu"', "dali", "cpu", images + cifar))
    return [c for c in found if c.workloads]


def worker_candidates(threads: int) -> List[int]:
    return [w for w in WORKER_CANDIDATES if w <= threads] or [threads]


def _throughput(reply: dict) -> float:
    return reply["images"] / reply["seconds"]


def workload_name(dataset: str, split: str, recipe: str) -> str:
    return f"{dataset}/{split}" + ("" if recipe == "default" else f" [{recipe}]")


def time_contender(contender: Contender, roots: dict, threads: int, batch: dict, sweep_batches: int,
                   epochs: int = EPOCHS, deadline: float = float("inf"), log=print) -> List[dict]:
    """One row per workload of `contender`, timed in one worker process; past `deadline`
    (time.perf_counter()), the rows left say so instead."""
    rows, worker = [], None
    try:
        for dataset, split, recipe in contender.workloads:
            spec = {"kind": contender.kind, "dataset": dataset, "split": split, "data": roots[dataset],
                    "batch_size": batch[dataset], "threads": threads, "recipe": recipe,
                    "device": contender.device, "measure_gpu": True, "to_gpu": True}
            row = {"workload": workload_name(dataset, split, recipe), "split": f"{dataset}/{split}",
                   "contender": contender.name, "kind": contender.kind, "device": contender.device,
                   "batch_size": batch[dataset]}
            started = time.perf_counter()
            if started > deadline:
                rows.append(dict(row, skipped="the time budget ran out"))
                continue
            try:
                if worker is None:
                    worker = Worker(spec)
                    worker.read()
                row.update(_time_workload(worker, spec, contender, threads, sweep_batches, epochs))
            except WorkerFailed as failure:
                row["error"] = str(failure).strip().splitlines()[-1][:300]
                worker.stop()
                worker = None
            row["seconds"] = time.perf_counter() - started
            log(_progress_line(row))
            rows.append(row)
    finally:
        if worker is not None:
            try:
                worker.ask(cmd="quit")
            except WorkerFailed:
                pass
            worker.stop()
    return rows


def steady_state(epochs: List[float]) -> float:
    """The median images/s of epochs 2..N (the first alone when there is one)."""
    return statistics.median(epochs[1:] or epochs)


def _time_workload(worker: Worker, spec: dict, contender: Contender, threads: int, sweep_batches: int,
                   epochs: int) -> dict:
    found = {}
    workers = 0
    worker.ask(cmd="memory", reset=True)   # this workload's GPU peaks, not the previous one's
    if contender.kind in ("torchvision", "tensor"):
        speeds = {}
        for count in worker_candidates(threads):
            # at steady state: a pass to warm the workers up, then passes of several batches a
            # worker for SWEEP_SECONDS (a pass of fewer batches than workers times their start,
            # and once picked 8 workers where 16 ran twice as fast)
            batches = max(sweep_batches, 4 * count)
            worker.ask(cmd="build", workers=count, spec=spec)
            worker.ask(cmd="run", max_batches=batches)
            speeds[count] = _throughput(worker.ask(cmd="run", max_batches=batches, min_seconds=SWEEP_SECONDS))
        workers = max(speeds, key=speeds.get)
        found["num_workers"] = workers
        found["sweep_images_per_s"] = {str(k): v for k, v in speeds.items()}
    else:
        found["num_threads"] = threads
    timed = worker.ask(cmd="epochs", workers=workers, spec=spec, epochs=epochs, min_steady_seconds=STEADY_SECONDS,
                       max_epochs=max(epochs, MAX_EPOCHS))
    rates = [_throughput(epoch) for epoch in timed["epochs"]]
    found.update(first_batch_s=timed["first_batch_s"], epochs_images_per_s=rates, first_epoch_images_per_s=rates[0],
                 images_per_s=steady_state(rates), images=timed["epochs"][-1]["images"])
    found.update(worker.ask(cmd="memory"))
    return found


def _progress_line(row: dict) -> str:
    if "skipped" in row:
        return f"  {row['workload']:<28} {row['contender']:<44} skipped: {row['skipped']}"
    if "error" in row:
        return f"  {row['workload']:<28} {row['contender']:<44} FAILED: {row['error']}"
    return (f"  {row['workload']:<28} {row['contender']:<44} {row['images_per_s']:>10,.0f} images/s steady, "
            f"first epoch {row['first_epoch_images_per_s']:,.0f} ({row['seconds']:.0f} s)")


def add_ratios(rows: List[dict]) -> None:
    """vs_nvidia / vs_tensor / vs_torchvision on each DALI loader's row: its speed over theirs;
    of_ceiling on every timed row: its speed over the decode ceiling of the same files."""
    by_workload, ceilings = {}, {}
    for row in rows:
        by_workload.setdefault(row["workload"], {})[row["kind"] if row["kind"] != "dali" else row["device"]] = row
        if row["kind"] == "ceiling" and _timed(row):
            ceilings[row["split"]] = row["images_per_s"]
    for row in rows:
        if _timed(row) and row["split"] in ceilings:
            row["of_ceiling"] = row["images_per_s"] / ceilings[row["split"]]
    for peers in by_workload.values():
        for row in peers.values():
            if row["kind"] != "dali" or not _timed(row):
                continue
            for kind in ("nvidia", "tensor", "torchvision"):
                other = peers.get(kind)
                if other and _timed(other):
                    row[f"vs_{kind}"] = row["images_per_s"] / other["images_per_s"]


def _timed(row: dict) -> bool:
    return "error" not in row and "skipped" not in row


def _cell(value, pattern: str) -> str:
    return pattern.format(value) if value is not None else ""


HEADER = ["workload (batch)", "loader", "images/s, steady", "images/s, first epoch", "of decode ceiling",
          "vs NVIDIA's example", "vs torchvision tensors", "vs torchvision (PIL)", "first batch (s)",
          "peak RSS (MB)", "GPU: torch peak (MB)", "GPU: device used (MB)"]


def markdown(rows: List[dict]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + " --- |" * len(HEADER)]
    for row in sorted(rows, key=lambda r: r["workload"]):
        count = row.get("num_workers")
        who = row["contender"] + (f" ({count} worker{'' if count == 1 else 's'})" if count is not None else "")
        if not _timed(row):
            why = "failed: " + row["error"] if "error" in row else "skipped: " + row["skipped"]
            cells = [f"{row['workload']} ({row['batch_size']})", who, why] + [""] * (len(HEADER) - 3)
        else:
            cells = [f"{row['workload']} ({row['batch_size']})", who, f"{row['images_per_s']:,.0f}",
                     f"{row['first_epoch_images_per_s']:,.0f}", _cell(row.get("of_ceiling"), "{:.0%}"),
                     _cell(row.get("vs_nvidia"), "{:.2f}x"), _cell(row.get("vs_tensor"), "{:.2f}x"),
                     _cell(row.get("vs_torchvision"), "{:.2f}x"), f"{row['first_batch_s']:.2f}",
                     f"{row['peak_rss_mb']:,.0f}", _cell(row.get("gpu_torch_peak_mb"), "{:,.0f}"),
                     _cell(row.get("gpu_used_peak_mb"), "{:,.0f}")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def available_recipes(recipes) -> List[str]:
    """The recipes whose libraries are installed; a hint for each of the others."""
    for recipe in recipes:
        lacking = RECIPES["imagenet"][recipe].missing()
        if lacking:
            print(f"{recipe} skipped: pip install {' '.join(lacking)}", file=sys.stderr)
    found = [r for r in recipes if not RECIPES["imagenet"][r].missing()]
    if recipes and not found:
        print("every image recipe asked for was skipped: no image folder to time, CIFAR-10 only", file=sys.stderr)
    return found


def run_bench(out_dir: str, cache_dir: str, images: int = IMAGES, cifar_images: int = 50000, threads: int = 0,
              recipes=DEFAULT_RECIPES, epochs: int = EPOCHS, deadline: float = float("inf"),
              command: str = "") -> int:
    """Times everything (see the module's docstring) until `deadline` (time.perf_counter());
    0 if every contender ran, else 1."""
    import torch

    gpu = torch.cuda.is_available()
    threads = threads or cores()
    print(f"\nGPU bench: {torch.cuda.get_device_name(0) if gpu else 'no CUDA GPU: the CPU variants only'}, "
          f"{threads} thread{'' if threads == 1 else 's'}, {images:,} + {images // 4:,} JPEGs, "
          f"CIFAR-10 {cifar_images:,} train images, {epochs} epochs each at least and {STEADY_SECONDS:g} s of "
          f"steady epochs (steady: the median of the epochs after the first)")
    started = time.perf_counter()
    recipes = available_recipes(recipes)
    classes = min(10, max(1, images // 4))   # every val class holds an image
    roots = {"imagenet": data.make_image_folder(cache_dir, images, images // 4, classes=classes) if recipes else None,
             "cifar10": data.make_cifar(cache_dir, cifar_images, 1000)}
    made = time.perf_counter() - started
    print(f"data ready in {made:.0f} s")
    rows = []
    for contender in contenders(gpu, recipes):
        rows += time_contender(contender, roots, threads, {"imagenet": 128, "cifar10": 256},
                               sweep_batches=max(2, images // 128 // 3), epochs=epochs, deadline=deadline)
    add_ratios(rows)
    document = {"gpu": torch.cuda.get_device_name(0) if gpu else None, "cores": cores(), "threads": threads,
                "dali": dali_version(), "torch": torch.__version__, "command": command, "images": images,
                "cifar_images": cifar_images, "epochs": epochs, "data_seconds": made,
                "seconds": time.perf_counter() - started, "rows": rows}
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "gpu-bench.json"), "w") as f:
        json.dump(document, f, indent=2)
    table = markdown(rows)
    with open(os.path.join(out_dir, "gpu-bench.md"), "w") as f:
        f.write(f"# GPU bench: {document['gpu'] or 'no GPU (CPU variants)'}, {document['cores']} cores, "
                f"{threads} DALI threads, DALI {document['dali']}, torch {document['torch']}\n\n"
                f"`{command}`: {images:,} train and {images // 4:,} val JPEGs, {epochs} epochs of each at least, "
                f"more until the epochs after the first lasted {STEADY_SECONDS:g} s; images/s steady is the "
                f"median of the epochs after the first\n\n{table}\n")
    print("\n" + table)
    print(f"\nGPU bench took {document['seconds']:.0f} s; wrote {out_dir}/gpu-bench.json and gpu-bench.md")
    return 1 if not all(_timed(row) for row in rows) else 0
