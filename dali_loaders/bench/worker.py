"""One loader in its own process: `python -m dali_loaders.bench.worker SPEC_JSON`.

The parent drives it over stdin/stdout, one JSON line each way, so several workers can
take turns (A, B, A, B, ...) while each keeps its loader, its warm caches and its own
peak RSS. It says {"ready": true} once its imports are done. Commands:
  {"cmd": "build", "workers": w,         (re)make the loader with w DataLoader workers (the
   "threads": t, "spec": {...}}           twin) or t DALI threads (the others), for the spec
                                          given (default: the one it started with); replies
                                          first_batch_s, from construction to the first batch
  {"cmd": "run", "max_batches": m|null,   timed passes, as many as fit in min_seconds (at
   "min_seconds": s, "lead_passes": k}    least one), after k untimed ones; replies images,
                                          seconds, passes
  {"cmd": "epochs", "epochs": n,          (re)make the loader as "build" does, then iterate n
   "workers": w, "spec": {...},           whole epochs, and more (at most max_epochs) until the
   "min_steady_seconds": s,               ones after the first lasted s: replies first_batch_s
   "max_epochs": m}                       and epochs, a list of {images, seconds}, the first
                                          epoch's seconds from construction (a user's first)
  {"cmd": "epoch_start",                  one more pass (after k untimed ones), each batch
   "max_batches": m|null,                 timed: replies its first
   "lead_passes": k}                      batch's seconds (an epoch after the first: the
                                          cost of starting an epoch) and the median of the rest
  {"cmd": "memory", "reset": r}           replies peak_rss_mb (this process),
                                          children_peak_rss_mb (its largest DataLoader worker)
                                          and, where spec's measure_gpu and a GPU, the GPU
                                          memory (DeviceMemory), whose peaks restart if r
  {"cmd": "quit"}                         replies as "memory" does, then exits
Replies start with REPLY so that whatever a library prints to stdout is skipped.
"""
import gc
import json
import resource
import sys
import time

REPLY = "@bench "


def _one_pass(loader, max_batches):
    """(images, seconds) of one pass, stopping after max_batches if given."""
    images, start = 0, time.perf_counter()
    for k, (batch, labels) in enumerate(loader):
        DELIVERY.take(batch)
        images += len(labels)
        MEMORY.sample()
        if max_batches is not None and k + 1 >= max_batches:
            break
    DELIVERY.wait()
    return images, time.perf_counter() - start


class Delivery:
    """With spec's to_gpu (the GPU bench): each batch is timed until it is on the GPU, where a
    training step needs it (a CPU loader's batch copied there, a GPU loader's already there),
    the copies waited for at the end of the pass."""

    def __init__(self):
        self.on = False

    def start(self, spec: dict) -> None:
        import torch

        self.on = bool(spec.get("to_gpu")) and torch.cuda.is_available()

    def take(self, batch) -> None:
        if self.on and not getattr(batch, "is_cuda", True):   # a torch tensor on the CPU
            batch.to("cuda", non_blocking=True)

    def wait(self) -> None:
        if self.on:
            import torch

            torch.cuda.synchronize()


DELIVERY = Delivery()


def _passes(loader, max_batches, min_seconds: float, lead: int = 0):
    """(images, seconds, passes): whole passes until min_seconds have gone by. A fast
    loader is timed over as long a stretch as a slow one, so that both see the same
    mix of whatever else the machine is doing. `lead` untimed passes first: a loader that
    runs ahead into its next epoch (DALI's iterators, this library's val graphs) had runs in
    flight since its last command, made while another contender was timed; they are taken
    there, and this loader's own runs ahead then fall into its last timed pass (as a user's
    epochs run back to back) and past it into the next contender's untimed lead."""
    for _ in range(lead):
        _one_pass(loader, max_batches)
    images = seconds = passes = 0
    while passes == 0 or seconds < min_seconds:
        more, took = _one_pass(loader, max_batches)
        images, seconds, passes = images + more, seconds + took, passes + 1
    return images, seconds, passes


def _batch_times(loader, max_batches):
    """Seconds each batch of one pass took, from asking to having it."""
    times, start = [], time.perf_counter()
    for k, _ in enumerate(loader):
        now = time.perf_counter()
        times.append(now - start)
        MEMORY.sample()
        start = now
        if max_batches is not None and k + 1 >= max_batches:
            break
    return times


def _epochs(spec, workers, epochs: int, min_steady_seconds: float = 0.0, max_epochs: int = 0) -> dict:
    """A loader made and iterated `epochs` whole epochs, and more (up to max_epochs) until the
    epochs after the first have lasted min_steady_seconds, each batch until it is delivered."""
    from .contenders import make_loader

    start = time.perf_counter()
    loader, first_batch, found = make_loader(spec, workers), None, []
    while len(found) < epochs or (sum(epoch["seconds"] for epoch in found[1:]) < min_steady_seconds
                                  and len(found) < max_epochs):
        images = 0
        for batch, labels in loader:
            DELIVERY.take(batch)
            images += len(labels)
            MEMORY.sample()
            if first_batch is None:
                DELIVERY.wait()
                first_batch = time.perf_counter() - start
        DELIVERY.wait()
        now = time.perf_counter()
        MEMORY.sample(now=True)
        found.append({"images": images, "seconds": now - start})
        start = now
    return {"first_batch_s": first_batch, "epochs": found}


def _first_batch(spec, workers):
    from .contenders import make_loader

    start = time.perf_counter()
    loader = make_loader(spec, workers)
    next(iter(loader))
    return loader, time.perf_counter() - start


def _peak_rss_mb(who) -> float:
    return resource.getrusage(who).ru_maxrss / 1024  # Linux reports KiB


class DeviceMemory:
    """The GPU memory this process uses, when it uses CUDA: torch's peak (DALI's iterators copy
    into torch tensors) and the device's used memory at its highest, sampled after a batch at
    most every SAMPLE_EVERY seconds (and at each epoch's end), less what was used before this
    process touched the GPU (DALI's own pools are not torch's; with one process on the GPU at a
    time, the difference is this process's). Not after every batch: the query is a driver call
    beside the loader's own, and a val epoch on a GPU is 12 batches in 80 ms."""

    SAMPLE_EVERY = 0.2

    def __init__(self):
        self.before = self.peak = None
        self._last = 0.0

    def _used(self):
        import torch

        if not torch.cuda.is_available():
            return None
        free, total = torch.cuda.mem_get_info()
        return total - free

    def start(self, spec: dict) -> None:
        if spec.get("measure_gpu") and self.before is None:
            self.before = self.peak = self._used()

    def sample(self, now: bool = False) -> None:
        if self.before is None:
            return
        clock = time.perf_counter()
        if now or clock - self._last >= self.SAMPLE_EVERY:
            self._last = clock
            self.peak = max(self.peak, self._used())

    def reset(self) -> None:
        """The peaks start again from now (the next workload's own)."""
        if self.before is not None:
            import torch

            torch.cuda.reset_peak_memory_stats()
            self.peak = self._used()

    def report(self) -> dict:
        if self.before is None:
            return {}
        import torch

        return {"gpu_torch_peak_mb": torch.cuda.max_memory_allocated() / 2 ** 20,
                "gpu_used_peak_mb": (self.peak - self.before) / 2 ** 20}


MEMORY = DeviceMemory()


def serve(spec: dict, commands, reply) -> None:
    from .contenders import preload

    preload(spec)
    reply({"ready": True})
    loader = None
    for line in commands:
        command = json.loads(line)
        if command["cmd"] in ("build", "epochs"):
            loader = None
            gc.collect()  # the previous loader's DataLoader workers exit before the next start
            spec = command.get("spec") or spec
            MEMORY.start(spec)
            DELIVERY.start(spec)
            built = dict(spec, threads=command.get("threads") or spec["threads"])
            if command["cmd"] == "epochs":
                reply(_epochs(built, command.get("workers", 0), command["epochs"],
                              command.get("min_steady_seconds", 0.0), command.get("max_epochs", 0)))
                continue
            loader, seconds = _first_batch(built, command.get("workers", 0))
            reply({"first_batch_s": seconds})
        elif command["cmd"] == "run":
            images, seconds, passes = _passes(loader, command.get("max_batches"), command.get("min_seconds", 0),
                                              command.get("lead_passes", 0))
            reply({"images": images, "seconds": seconds, "passes": passes})
        elif command["cmd"] == "epoch_start":
            for _ in range(command.get("lead_passes", 0)):   # as "run": epochs back to back
                _one_pass(loader, command.get("max_batches"))
            times = _batch_times(loader, command.get("max_batches"))
            steady = sorted(times[1:])[len(times[1:]) // 2] if len(times) > 1 else None
            reply({"next_epoch_first_batch_s": times[0], "steady_batch_s": steady})
        elif command["cmd"] in ("memory", "quit"):
            if command.get("reset"):
                MEMORY.reset()
            if command["cmd"] == "quit":
                loader = None
                gc.collect()
            reply({"peak_rss_mb": _peak_rss_mb(resource.RUSAGE_SELF),
                   "children_peak_rss_mb": _peak_rss_mb(resource.RUSAGE_CHILDREN), **MEMORY.report()})
            if command["cmd"] == "quit":
                return


def main() -> None:
    spec = json.loads(sys.argv[1])
    out = sys.stdout

    def reply(message: dict) -> None:
        out.write(REPLY + json.dumps(message) + "\n")
        out.flush()

    sys.stdout = sys.stderr  # keep library chatter off the reply channel
    try:
        serve(spec, sys.stdin, reply)
    except Exception as e:
        reply({"error": f"{type(e).__name__}: {e}"})
        raise


if __name__ == "__main__":
    main()
