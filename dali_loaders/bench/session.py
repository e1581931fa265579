"""Timing one workload: the DALI loader, its torchvision twin and the limit, side by side.

Each loader lives in its own worker process (its peak RSS is its own) and they take
turns: a warm-up pass each, a sweep of the twin's num_workers, then rounds of one pass
each, in alternating order (A B C, C B A, ...) so that drift in the machine's load
falls on all of them alike. Only ratios of passes from the same round are reported.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from typing import List, Optional

from .catalog import bench_recipe, mixes
from .contenders import WORKER_KINDS, kinds
from .worker import REPLY

# Untimed passes before each timed run: the contenders take turns, and one that runs ahead into
# its next epoch would otherwise start timed with batches made in another's time (worker._passes).
LEAD_PASSES = 1


@dataclass
class Workload:
    dataset: str          # "cifar10", "imagenet", "mnist", "flowers102" or "hf"
    split: str            # "train" or "val"
    data: str             # the dataset root the loaders read
    batch_size: int
    threads: int          # the most DALI threads and DataLoader workers tried
    recipe: str = "default"   # a name in bench/catalog.py
    images: int = 0       # images per timed pass (the split, unless passes are capped)
    device: Optional[str] = None   # the DALI loader's device= (None: the library's default)

    @property
    def spec(self) -> dict:
        """What a worker needs to make this workload's loaders (its kind added)."""
        return {"dataset": self.dataset, "split": self.split, "data": self.data, "batch_size": self.batch_size,
                "threads": self.threads, "recipe": self.recipe, "device": self.device}

    @property
    def name(self) -> str:
        return f"{self.dataset}/{self.split}" + ("" if self.recipe == "default" else f" [{self.recipe}]")

    @property
    def kinds(self):
        found = kinds(self.dataset)
        if not bench_recipe(self.dataset, self.recipe).tensor_backend:
            found = tuple(k for k in found if k != "tensor")
        if self.recipe != "default" or self.split != "train":   # the baseline ran its own train recipe only
            found = tuple(k for k in found if k != "baseline")
        if self.recipe != "default":   # NVIDIA's example pipeline is the default recipe, hand-written
            found = tuple(k for k in found if k != "nvidia")
        if not mixes(self.dataset, self.recipe, self.split):   # collate_fn= against batch_transform=
            found = tuple(k for k in found if k != "collate")
        return found

    @property
    def worker_kinds(self):
        return [k for k in self.kinds if k in WORKER_KINDS]


@dataclass
class Schedule:
    rounds: int                   # timed passes of each loader
    sweep_batches: int            # batches per pass while choosing num_workers
    max_batches: Optional[int]    # batches per timed pass (None: the whole split)
    min_seconds: float = 0.0      # a timed run repeats passes until this long
    sweep: bool = True            # try every DALI thread count and num_workers (False: --threads' alone)


# (result field, contender): DALI's speed over the contender's, round by round
RATIOS = (("vs_torchvision", "torchvision"), ("vs_tensor", "tensor"), ("vs_baseline", "baseline"),
          ("vs_nvidia", "nvidia"), ("vs_collate", "collate"), ("vs_folder", "folder"), ("of_limit", "limit"))


class WorkerFailed(RuntimeError):
    pass


class Worker:
    """One loader's process; `ask` sends a command and returns the reply."""

    def __init__(self, spec: dict):
        self.spec = spec
        self.ready = False
        self.log = tempfile.TemporaryFile(mode="w+")
        self.process = subprocess.Popen([sys.executable, "-m", "dali_loaders.bench.worker", json.dumps(spec)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                        text=True, bufsize=1)

    def read(self) -> dict:
        for line in self.process.stdout:
            if line.startswith(REPLY):
                reply = json.loads(line[len(REPLY):])
                if "error" in reply:
                    break
                return reply
        self.process.wait()
        self.log.seek(0)
        tail = "".join(self.log.readlines()[-15:])
        raise WorkerFailed(f"the {self.spec['kind']} worker for {self.spec['dataset']}/{self.spec['split']} "
                           f"failed (exit code {self.process.returncode}):\n{tail}")

    def send(self, **command) -> None:
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()

    def ask(self, **command) -> dict:
        self.send(**command)
        return self.read()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self.log.close()


class Workers:
    """The worker processes: one per workload and loader, so that each peak RSS is that
    loader's own; or, with `reuse` (--tiny), one per loader for the whole run, which starts
    five processes instead of forty (their peak RSS is then the largest of the run)."""

    def __init__(self, reuse: bool = False):
        self.reuse, self.kept = reuse, {}

    def get(self, spec: dict) -> Worker:
        if self.reuse and spec["kind"] in self.kept:
            return self.kept[spec["kind"]]
        worker = Worker(spec)
        if self.reuse:
            self.kept[spec["kind"]] = worker
        return worker

    def finish(self, workers: dict) -> dict:
        """kind -> peak RSS of each worker, which shuts down unless kept (in parallel:
        nothing is timed any more)."""
        for worker in workers.values():
            worker.send(cmd="memory" if self.reuse else "quit")
        memory = {kind: worker.read() for kind, worker in workers.items()}
        if not self.reuse:
            for worker in workers.values():
                worker.process.wait()
                worker.log.close()
        return memory

    def close(self) -> None:
        for worker in self.kept.values():
            worker.send(cmd="quit")
        for worker in self.kept.values():
            try:
                worker.read()
            except WorkerFailed:
                pass
            worker.stop()
        self.kept = {}


def dali_thread_counts(threads: int, sweep: bool = True) -> List[int]:
    """The DALI num_threads tried: 1 .. threads, as the twin's workers. (2 x threads was
    tried: its choice between close speeds was mostly noise, and the peak RSS of a
    worker counts the largest thread count it ever ran.)"""
    return list(range(1, threads + 1)) if sweep else [threads]


def worker_counts(threads: int, sweep: bool = True) -> List[int]:
    """The DataLoaders' num_workers tried: 0 .. threads."""
    return list(range(threads + 1)) if sweep else [threads]


def commands_per_workload(plan: Schedule, workload: Workload) -> int:
    """How many steps `time_workload` reports to `progress` (the bar's length)."""
    dali_sweep = 6 * len(dali_thread_counts(workload.threads, plan.sweep))
    twin_sweep = 4 * len(worker_counts(workload.threads, plan.sweep))
    n = len(workload.kinds)
    single = n - len(workload.worker_kinds)
    restarts = 1 + len(workload.worker_kinds)   # after each sweep: see Session.restart
    return n + dali_sweep + 2 * single + len(workload.worker_kinds) * (twin_sweep + 2) + n * plan.rounds + 2 * n \
        + restarts


def _throughput(reply: dict) -> float:
    return reply["images"] / reply["seconds"]


def _median(values: List[float]) -> float:
    return statistics.median(values) if values else float("nan")


class Session:
    """The three workers of one workload and what they measured."""

    def __init__(self, workload: Workload, plan: Schedule, progress, pool: Optional[Workers] = None):
        self.workload, self.plan, self.progress = workload, plan, progress
        self.pool = pool or Workers()
        self.workers = {}

    def step(self, what: str) -> None:
        self.progress.set_postfix_str(f"{self.workload.name}: {what}", refresh=False)
        self.progress.update(1)

    def start(self) -> None:
        # The imports run in parallel; the measured work below never does.
        for kind in self.workload.kinds:
            self.workers[kind] = self.pool.get(dict(self.workload.spec, kind=kind))
        for kind, worker in self.workers.items():
            if not worker.ready:
                worker.read()
                worker.ready = True
            self.step(f"{kind} ready")

    def restart(self, kind: str) -> None:
        """`kind` in a fresh process, after a sweep built its loader several times: each build
        leaves memory in the allocators' pools (CIFAR-10's DALI loader: ~100 MB over six),
        which the process's peak RSS would count, where a user builds the loader once. Workers
        kept for the whole run (--tiny) stay."""
        if not self.pool.reuse:
            old = self.workers[kind]
            old.ask(cmd="quit")
            old.process.wait()
            old.log.close()
            worker = self.workers[kind] = self.pool.get(dict(self.workload.spec, kind=kind))
            worker.read()
            worker.ready = True
        self.step(f"{kind} ready again")

    def build(self, kind: str, workers: int = 0, threads: int = 0) -> float:
        spec = dict(self.workload.spec, kind=kind)
        seconds = self.workers[kind].ask(cmd="build", workers=workers, threads=threads, spec=spec)["first_batch_s"]
        self.step(f"{kind} first batch")
        return seconds

    def run(self, kind: str, max_batches: Optional[int], min_seconds: float = 0.0, lead: int = 0) -> float:
        reply = self.workers[kind].ask(cmd="run", max_batches=max_batches, min_seconds=min_seconds, lead_passes=lead)
        self.step(f"{kind} pass")
        if kind == "dali":
            self.workload.images = reply["images"] // reply["passes"]
        return _throughput(reply)

    def sweep_dali_threads(self) -> dict:
        """DALI threads -> images/s, the mean of two passes each, taken in the order 1, 2, ..,
        then back, so that drift falls on all alike."""
        found = {}
        candidates = dali_thread_counts(self.workload.threads, self.plan.sweep)
        for threads in candidates + candidates[::-1]:
            self.build("dali", threads=threads)
            self.run("dali", self.plan.sweep_batches)  # warm-up
            found.setdefault(threads, []).append(self.run("dali", self.plan.sweep_batches))
        return {threads: sum(speeds) / len(speeds) for threads, speeds in found.items()}

    def sweep_num_workers(self, kind: str) -> dict:
        """num_workers -> (the DataLoader's speed / DALI's, first batch s), each against an
        adjacent DALI pass."""
        found = {}
        for workers in worker_counts(self.workload.threads, self.plan.sweep):
            first_batch = self.build(kind, workers)
            self.run(kind, self.plan.sweep_batches)  # warm-up: workers up, caches hot
            dali = self.run("dali", self.plan.sweep_batches)
            twin = self.run(kind, self.plan.sweep_batches)
            found[workers] = (twin / dali, first_batch)
        return found

    def epoch_starts(self) -> dict:
        """kind -> the first batch of a later epoch and the steady batch time, from one pass
        each after the rounds (epochs started before: the loaders are warm)."""
        found = {}
        for kind in self.workload.kinds:
            found[kind] = self.workers[kind].ask(cmd="epoch_start", max_batches=self.plan.max_batches,
                                                 lead_passes=LEAD_PASSES)
            self.step(f"{kind} epoch start")
        return found

    def rounds(self) -> dict:
        order = self.workload.kinds
        speeds = {kind: [] for kind in order}
        for r in range(self.plan.rounds):
            for kind in (order if r % 2 == 0 else order[::-1]):
                speeds[kind].append(self.run(kind, self.plan.max_batches, self.plan.min_seconds, LEAD_PASSES))
        return speeds

    def close(self) -> dict:
        """Each worker's peak RSS."""
        memory = self.pool.finish(self.workers)
        for kind in self.workers:
            self.step(f"{kind} done")
        return memory

    def kill(self) -> None:
        """After a failure: every worker of the session goes, kept ones too."""
        for worker in self.workers.values():
            worker.stop()
        for kind, worker in list(self.pool.kept.items()):
            if worker in self.workers.values():
                del self.pool.kept[kind]


def time_workload(workload: Workload, plan: Schedule, progress, pool: Optional[Workers] = None) -> dict:
    session = Session(workload, plan, progress, pool)
    failed = True
    try:
        session.start()
        threads = session.sweep_dali_threads()
        dali_threads = max(threads, key=threads.get)
        session.restart("dali")   # built once from here on, as a user builds it
        # The others get the threads DALI's loader got (the decode limit, the DALI pipelines).
        single = [kind for kind in workload.kinds if kind not in workload.worker_kinds]
        first_batch = {kind: session.build(kind, threads=dali_threads) for kind in single}
        for kind in single:
            session.run(kind, plan.sweep_batches)
        sweeps = {}
        for kind in workload.worker_kinds:   # each DataLoader at its best num_workers
            sweeps[kind] = session.sweep_num_workers(kind)
            best = max(sweeps[kind], key=lambda w: sweeps[kind][w][0])
            session.restart(kind)
            first_batch[kind] = session.build(kind, best)
            session.run(kind, plan.sweep_batches)
        speeds = session.rounds()
        starts = session.epoch_starts()
        memory = session.close()
        failed = False
    finally:
        if failed:
            session.kill()
    return summarize(workload, speeds, first_batch, memory, sweeps, dali_threads, threads, starts)


def _ratios(speeds: dict, kind: str) -> List[float]:
    """DALI's speed over `kind`'s, round by round."""
    return [d / other for d, other in zip(speeds["dali"], speeds[kind])]


def summarize(workload: Workload, speeds: dict, first_batch: dict, memory: dict, sweeps: dict,
              dali_threads: int, thread_sweep: dict, starts: dict) -> dict:
    loaders = {kind: {"images_per_s": _median(speeds[kind]), "runs_images_per_s": speeds[kind],
                      "first_batch_s": first_batch[kind], **starts[kind], **memory[kind]} for kind in workload.kinds}
    loaders["dali"]["num_threads"] = dali_threads
    for kind in ("baseline", "nvidia", "collate", "folder"):
        if kind in loaders:
            loaders[kind]["num_threads"] = dali_threads
    loaders["dali"]["sweep_images_per_s"] = {str(t): speed for t, speed in thread_sweep.items()}
    for kind, sweep in sweeps.items():
        loaders[kind]["num_workers"] = max(sweep, key=lambda w: sweep[w][0])
        loaders[kind]["sweep_speed_vs_dali"] = {str(w): ratio for w, (ratio, _) in sweep.items()}
    result = {"workload": workload.name, "dataset": workload.dataset, "split": workload.split,
              "recipe": workload.recipe, "data": os.path.abspath(workload.data),
              "batch_size": workload.batch_size, "images": workload.images, "threads": workload.threads,
              "loaders": loaders}
    for field, kind in RATIOS:
        if kind in speeds:
            result[field], result[field + "_runs"] = _median(_ratios(speeds, kind)), _ratios(speeds, kind)
    return result
