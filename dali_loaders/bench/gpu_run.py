"""The GPU bench behind `python -m dali_loaders check-gpu --bench`, run after the checks.

On an ImageNet-style folder it makes itself (photo-like JPEGs, 300 to 500 px on the short
side), for the recipes default, resnet50 and timm-ra, train and val, it times: the DALI
loader with device="gpu" (mixed decode), "cpu-decode" and "cpu"; NVIDIA's DALI example
pipeline (the default recipe, hand-written; bench/nvidia.py); torchvision's tensor backend
at its best num_workers of 4, 8 and 16. Then a full CIFAR-10 train epoch (50,000 images,
batch 256): the DALI loader on the GPU and on the CPU against its torchvision twin at its
best num_workers. Every contender runs in its own process, one at a time (nothing else on
the GPU meanwhile), 3 epochs of each workload after its first batch, each batch timed until
it is on the GPU (a CPU loader's copied there): images/s is their median. The GPU memory is
torch's peak (torch.cuda.max_memory_allocated: the batches DALI hands over) and the device's
used memory at its highest, sampled after every batch, less what was used before the
process started (DALI's own pools are not torch's).
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
WORKER_CANDIDATES = (4, 8, 16)
EPOCHS = 3


@dataclass
class Contender:
    name: str
    kind: str                      # a contenders.KINDS name
    device: Optional[str]          # the DALI loader's device= (NVIDIA's example: "gpu" means mixed decode)
    workloads: List[tuple] = field(default_factory=list)   # (dataset, split, recipe)


def contenders(gpu: bool, recipes=IMAGE_RECIPES) -> List[Contender]:
    images = [("imagenet", split, recipe) for recipe in recipes for split in ("train", "val")]
    defaults = [w for w in images if w[2] == "default"]
    cifar = [("cifar10", "train", "default")]
    # the most telling first, should the time budget run out: ours on the GPU, its peers, then
    # the other variants
    found = [Contender('DALI loader, device="gpu"', "dali", "gpu", images + cifar)] if gpu else []
    found += [Contender("NVIDIA's DALI example" + (" (mixed decode)" if gpu else " (CPU decode)"), "nvidia",
                        "gpu" if gpu else "cpu", defaults),
              Contender("torchvision tensors", "tensor", None, images),
              Contender("torchvision (PIL)", "torchvision", None, cifar)]
    if gpu:
        found.append(Contender('DALI loader, device="cpu-decode"', "dali", "cpu-decode", images))
    found.append(Contender('DALI loader, device="cpu"', "dali", "cpu", images + cifar))
    return found


def worker_candidates(threads: int) -> List[int]:
    return [w for w in WORKER_CANDIDATES if w <= threads] or [threads]


def _throughput(reply: dict) -> float:
    return reply["images"] / reply["seconds"]


def time_contender(contender: Contender, roots: dict, threads: int, batch: dict, sweep_batches: int,
                   deadline: float = float("inf"), log=print) -> List[dict]:
    """One row per workload of `contender`, timed in one worker process; past `deadline`
    (time.perf_counter()), the rows left say so instead."""
    rows, worker = [], None
    try:
        for dataset, split, recipe in contender.workloads:
            spec = {"kind": contender.kind, "dataset": dataset, "split": split, "data": roots[dataset],
                    "batch_size": batch[dataset], "threads": threads, "recipe": recipe,
                    "device": contender.device, "measure_gpu": True, "to_gpu": True}
            row = {"workload": f"{dataset}/{split}" + ("" if recipe == "default" else f" [{recipe}]"),
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
                row.update(_time_workload(worker, spec, contender, threads, sweep_batches))
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


def _time_workload(worker: Worker, spec: dict, contender: Contender, threads: int, sweep_batches: int) -> dict:
    found = {}
    workers = 0
    worker.ask(cmd="memory", reset=True)   # this workload's GPU peaks, not the previous one's
    if contender.kind in ("torchvision", "tensor"):
        speeds = {}
        for count in worker_candidates(threads):
            worker.ask(cmd="build", workers=count, spec=spec)
            speeds[count] = _throughput(worker.ask(cmd="run", max_batches=sweep_batches))
        workers = max(speeds, key=speeds.get)
        found["num_workers"] = workers
        found["sweep_images_per_s"] = {str(k): v for k, v in speeds.items()}
    else:
        found["num_threads"] = threads
    found["first_batch_s"] = worker.ask(cmd="build", workers=workers, spec=spec)["first_batch_s"]
    epochs = [_throughput(worker.ask(cmd="run", max_batches=None)) for _ in range(EPOCHS)]
    found.update(images_per_s=statistics.median(epochs), epochs_images_per_s=epochs)
    found.update(worker.ask(cmd="memory"))
    return found


def _progress_line(row: dict) -> str:
    if "skipped" in row:
        return f"  {row['workload']:<28} {row['contender']:<40} skipped: {row['skipped']}"
    if "error" in row:
        return f"  {row['workload']:<28} {row['contender']:<40} FAILED: {row['error']}"
    return (f"  {row['workload']:<28} {row['contender']:<40} {row['images_per_s']:>10,.0f} images/s "
            f"({row['seconds']:.0f} s)")


def add_ratios(rows: List[dict]) -> None:
    """vs_nvidia / vs_tensor / vs_torchvision on each DALI loader's row: its speed over theirs."""
    by_workload = {}
    for row in rows:
        by_workload.setdefault(row["workload"], {})[row["kind"] if row["kind"] != "dali" else row["device"]] = row
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


def markdown(rows: List[dict]) -> str:
    header = ["workload (batch)", "loader", "images/s", "vs NVIDIA's example", "vs torchvision tensors",
              "vs torchvision (PIL)", "first batch (s)", "peak RSS (MB)", "GPU: torch peak (MB)",
              "GPU: device used (MB)"]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for row in sorted(rows, key=lambda r: r["workload"]):
        count = row.get("num_workers")
        who = row["contender"] + (f" ({count} worker{'' if count == 1 else 's'})" if count is not None else "")
        if not _timed(row):
            why = "failed: " + row["error"] if "error" in row else "skipped: " + row["skipped"]
            cells = [f"{row['workload']} ({row['batch_size']})", who, why] + [""] * 7
        else:
            cells = [f"{row['workload']} ({row['batch_size']})", who, f"{row['images_per_s']:,.0f}",
                     _cell(row.get("vs_nvidia"), "{:.2f}x"), _cell(row.get("vs_tensor"), "{:.2f}x"),
                     _cell(row.get("vs_torchvision"), "{:.2f}x"), f"{row['first_batch_s']:.2f}",
                     f"{row['peak_rss_mb']:,.0f}", _cell(row.get("gpu_torch_peak_mb"), "{:,.0f}"),
                     _cell(row.get("gpu_used_peak_mb"), "{:,.0f}")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def run_bench(out_dir: str, cache_dir: str, images: int = 2000, cifar_images: int = 50000, threads: int = 0,
              recipes=IMAGE_RECIPES, deadline: float = float("inf")) -> int:
    """Times everything (see the module's docstring) until `deadline` (time.perf_counter());
    0 if every contender ran, else 1."""
    import torch

    gpu = torch.cuda.is_available()
    threads = threads or cores()
    print(f"\nGPU bench: {torch.cuda.get_device_name(0) if gpu else 'no CUDA GPU: the CPU variants only'}, "
          f"{threads} thread{'' if threads == 1 else 's'}, {images:,} + {images // 4:,} JPEGs, "
          f"CIFAR-10 {cifar_images:,} train images")
    started = time.perf_counter()
    for recipe in recipes:
        lacking = RECIPES["imagenet"][recipe].missing()
        if lacking:
            print(f"{recipe} skipped: pip install {' '.join(lacking)}", file=sys.stderr)
    recipes = [r for r in recipes if not RECIPES["imagenet"][r].missing()]
    classes = min(10, max(1, images // 4))   # every val class holds an image
    roots = {"imagenet": data.make_image_folder(cache_dir, images, images // 4, classes=classes),
             "cifar10": data.make_cifar(cache_dir, cifar_images, 1000)}
    made = time.perf_counter() - started
    print(f"data ready in {made:.0f} s")
    rows = []
    for contender in contenders(gpu, recipes):
        rows += time_contender(contender, roots, threads, {"imagenet": 128, "cifar10": 256},
                               sweep_batches=max(2, images // 128 // 3), deadline=deadline)
    add_ratios(rows)
    document = {"gpu": torch.cuda.get_device_name(0) if gpu else None, "cores": cores(), "threads": threads,
                "dali": dali_version(), "torch": torch.__version__, "images": images, "cifar_images": cifar_images,
                "data_seconds": made, "seconds": time.perf_counter() - started, "rows": rows}
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "gpu-bench.json"), "w") as f:
        json.dump(document, f, indent=2)
    table = markdown(rows)
    with open(os.path.join(out_dir, "gpu-bench.md"), "w") as f:
        f.write(f"# GPU bench: {document['gpu'] or 'no GPU (CPU variants)'}, {threads} DALI threads, DALI "
                f"{document['dali']}\n\n{table}\n")
    print("\n" + table)
    print(f"\nGPU bench took {document['seconds']:.0f} s; wrote {out_dir}/gpu-bench.json and gpu-bench.md")
    return 1 if not all(_timed(row) for row in rows) else 0
