"""One loader in its own process: `python -m dali_loaders.bench.worker SPEC_JSON`.

The parent drives it over stdin/stdout, one JSON line each way, so several workers can
take turns (A, B, A, B, ...) while each keeps its loader, its warm caches and its own
peak RSS. It says {"ready": true} once its imports are done. Commands:
  {"cmd": "build", "workers": w,         (re)make the loader with w DataLoader workers (the
   "threads": t}                          twin) or t DALI threads (the others); replies
                                          first_batch_s, from construction to the first batch
  {"cmd": "run", "max_batches": m|null,   timed passes, as many as fit in min_seconds (at
   "min_seconds": s}                      least one); replies images, seconds, passes
  {"cmd": "epoch_start",                  one more pass, each batch timed: replies its first
   "max_batches": m|null}                 batch's seconds (an epoch after the first: the
                                          cost of starting an epoch) and the median of the rest
  {"cmd": "quit"}                         replies peak_rss_mb (this process) and
                                          children_peak_rss_mb (its largest DataLoader worker)
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
    for k, (_, labels) in enumerate(loader):
        images += len(labels)
        if max_batches is not None and k + 1 >= max_batches:
            break
    return images, time.perf_counter() - start


def _passes(loader, max_batches, min_seconds: float):
    """(images, seconds, passes): whole passes until min_seconds have gone by. A fast
    loader is timed over as long a stretch as a slow one, so that both see the same
    mix of whatever else the machine is doing."""
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
        start = now
        if max_batches is not None and k + 1 >= max_batches:
            break
    return times


def _first_batch(spec, workers):
    from .contenders import make_loader

    start = time.perf_counter()
    loader = make_loader(spec, workers)
    next(iter(loader))
    return loader, time.perf_counter() - start


def _peak_rss_mb(who) -> float:
    return resource.getrusage(who).ru_maxrss / 1024  # Linux reports KiB


def serve(spec: dict, commands, reply) -> None:
    from .contenders import preload

    preload(spec)
    reply({"ready": True})
    loader = None
    for line in commands:
        command = json.loads(line)
        if command["cmd"] == "build":
            loader = None
            gc.collect()  # the previous loader's DataLoader workers exit before the next start
            built = dict(spec, threads=command.get("threads") or spec["threads"])
            loader, seconds = _first_batch(built, command.get("workers", 0))
            reply({"first_batch_s": seconds})
        elif command["cmd"] == "run":
            images, seconds, passes = _passes(loader, command.get("max_batches"), command.get("min_seconds", 0))
            reply({"images": images, "seconds": seconds, "passes": passes})
        elif command["cmd"] == "epoch_start":
            times = _batch_times(loader, command.get("max_batches"))
            steady = sorted(times[1:])[len(times[1:]) // 2] if len(times) > 1 else None
            reply({"next_epoch_first_batch_s": times[0], "steady_batch_s": steady})
        elif command["cmd"] == "quit":
            loader = None
            gc.collect()
            reply({"peak_rss_mb": _peak_rss_mb(resource.RUSAGE_SELF),
                   "children_peak_rss_mb": _peak_rss_mb(resource.RUSAGE_CHILDREN)})
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
