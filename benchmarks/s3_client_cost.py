"""`python -m benchmarks.s3_client_cost`: what reading an image folder from S3 costs the loader's
CPU, split into the library's path and the client's GETs, in the setup of
`python -m dali_loaders bench --storage s3` (SeaweedFS on loopback, the server and its proxy
on the last CPU, the loaders on the others).

Loaders, interleaved round by round in one process (a shared machine's drift falls on every
row alike), three epochs a row a round: local disk; the S3 loader with its objects served from
memory (its graph, feeder and read-ahead, no GET: read once beforehand through the client); the
S3 loader as shipped. A row's speed is its middle epoch's of each block (the steady one), its
CPU the whole block's. The S3 row less the memory row is what the GETs cost. With one CPU for
the loaders, speed follows CPU: "vs local (CPU)" is local's CPU an image over the row's.

GETs alone: the shipped feeder (UrlBytesFeeder) called batch after batch without DALI, its
reads as shipped (obstore's async GETs on the feeder's own event loop, url_reads.BatchReads)
and with obstore's synchronous ranged GET in a pool of 16 threads in their place: CPU and
thread switches a GET.
"""
import argparse
import os
import resource
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

BATCH = 64
EPOCHS = 3   # a row's epochs in a row, each round


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.s3_client_cost", description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=512, help="train images in the folder (default 512)")
    parser.add_argument("--rounds", type=int, default=6, help="timed rounds, each three epochs of every row")
    parser.add_argument("--threads", type=int, default=2, help="DALI threads")
    parser.add_argument("--cache-dir", default=None, help="where the made-up image folder is kept")
    args = parser.parse_args(argv)
    measure(args.images, args.rounds, args.threads, args.cache_dir)


def measure(images: int, rounds: int, threads: int, cache_dir: str = None) -> dict:
    from dali_loaders.bench import data
    from dali_loaders.bench.storage import cpu_split, pin
    from dali_loaders.sources import storage
    from dali_loaders.testing.object_store import Environment, LoopbackProxy, WeedServer, aws_environment

    root = data.make_image_folder(cache_dir or data.default_cache_dir(), images, 16, classes=10)
    loader_cpus, server_cpus = cpu_split(True)
    with tempfile.TemporaryDirectory(prefix="dali-loaders-s3-cost-") as folder:
        server = WeedServer(folder, cpus=server_cpus)
        server.start()
        proxy = LoopbackProxy(server.s3)
        if server_cpus:
            pin(server_cpus, proxy.process.pid)
        everywhere = os.sched_getaffinity(0)
        pin(loader_cpus)
        try:
            with Environment(aws_environment(proxy.endpoint)):
                server.upload_folder(os.path.join(root, "train"), "s3://bench/train")
                urls = sorted(storage.list_tree("s3://bench/train"))
                print(f"loaders on CPUs {sorted(loader_cpus)}, server and proxy on {server_cpus or 'the same'}; "
                      f"{len(urls)} objects, {rounds} rounds", flush=True)
                loaders = _loader_rows(os.path.join(root, "train"), urls, rounds, threads, server)
                gets = _get_rows(urls, rounds)
        finally:
            pin(everywhere)
            proxy.stop()
            server.stop()
    print(_table(loaders, "loader", "images/s (best)", "median", "vs local", "vs local (CPU)", "CPU ms/image",
                 "GETs/image"))
    client = loaders["S3"]["cpu_ms"] - loaders["S3 path, objects from memory"]["cpu_ms"]
    print(f"\nthe GETs cost the loader {client:.3f} ms of CPU an image (S3 less objects from memory)\n")
    print(_table(gets, "GETs alone", "GETs/s (best)", "CPU us/GET", "switches/GET"))
    return {"loaders": loaders, "gets": gets, "client_cpu_ms_per_image": client}


def _loader_rows(local_root: str, urls: list, rounds: int, threads: int, server) -> dict:
    from dali_loaders import get_imagefolder_iter_dali
    from dali_loaders.bench.storage import one_epoch, settled
    from dali_loaders.sources import url_reads

    objects = {url: url_reads.get_object(url) for url in urls}

    class MemoryReads(url_reads.BatchReads):
        """The shipped feeder's reads, answered from `objects` (no GET)."""

        def start(self, batch_urls):
            return []

        def collect(self, batch_urls, reads):
            return [objects[url] for url in batch_urls]

    loaders = {"local": get_imagefolder_iter_dali(local_root, BATCH, True, threads, seed=0),
               "S3 path, objects from memory": get_imagefolder_iter_dali("s3://bench/train", BATCH, True, threads,
                                                                       seed=0),
               "S3": get_imagefolder_iter_dali("s3://bench/train", BATCH, True, threads, seed=0)}
    shipped = url_reads.BatchReads
    url_reads.BatchReads = MemoryReads   # the feeder is made with the pipeline, at the first epoch
    try:
        one_epoch(loaders["S3 path, objects from memory"])
    finally:
        url_reads.BatchReads = shipped
    one_epoch(loaders["local"])
    one_epoch(loaders["S3"])
    timed = {name: [] for name in loaders}
    for _ in range(rounds):
        for name, loader in loaders.items():
            # EPOCHS in a row, as a run reads them. The speed is the middle epoch's: its first
            # batches were read while the epoch before it ran, and it reads the next one's
            # (the first epoch's were read before the block, the last's after it). The counts
            # and the CPU are the whole block's, the reads it left in flight settled into it.
            before, gets_before = os.times(), settled(server)[0].get("GET", 0)
            epochs = [one_epoch(loader) for _ in range(EPOCHS)]
            counts, asking = settled(server)
            after = os.times()
            n = sum(images for images, _ in epochs)
            cpu = after.user - before.user + after.system - before.system - asking
            middle = epochs[EPOCHS // 2]
            timed[name].append((middle[0] / middle[1], cpu / n * 1e3, (counts.get("GET", 0) - gets_before) / n))
    local = timed["local"]
    rows = {}
    for name, runs in timed.items():
        best = max(speed for speed, *_ in runs)
        cpu = statistics.median(r[1] for r in runs)
        rows[name] = {"best": best, "median": statistics.median(r[0] for r in runs),
                      "vs_local": best / max(r[0] for r in local),
                      "cpu_vs_local": statistics.median(r[1] for r in local) / cpu,
                      "cpu_ms": cpu, "gets": statistics.median(r[2] for r in runs)}
    return rows


def _get_rows(urls: list, rounds: int) -> dict:
    """The shipped feeder (UrlBytesFeeder: its read-ahead, its per-batch Python) over epochs of
    `urls` in order, DALI left out: its own reads, and obstore's synchronous ranged GET in a
    pool of threads in their place."""
    import types

    import numpy as np

    from dali_loaders.loader.pipeline import EpochOrder
    from dali_loaders.sources import s3_client, storage, url_reads

    pool = ThreadPoolExecutor(16)

    class SyncPoolReads(url_reads.BatchReads):
        def start(self, batch_urls):
            return [pool.submit(self._get, url) for url in batch_urls]

        def collect(self, batch_urls, reads):
            return [future.result() for future in reads]

        @staticmethod
        def _get(url):
            key = s3_client.split_url(url)[1]
            body = s3_client.module(url).get_range(s3_client.store(url), key, start=0, end=storage.listed_size(url) + 1)
            return np.frombuffer(body, dtype=np.uint8)

    class SyncPoolFeeder(url_reads.UrlBytesFeeder):
        def __init__(self, *args):
            super().__init__(*args)
            self.reads = SyncPoolReads()

    runs = len(urls) // BATCH
    feeders = {"async, the feeder's event loop (shipped)": url_reads.UrlBytesFeeder,
               "sync get_range, 16 threads": SyncPoolFeeder}
    feeders = {name: make(urls, np.zeros(len(urls), np.int64), EpochOrder(np.arange(len(urls))), BATCH)
               for name, make in feeders.items()}

    def epoch(feeder) -> int:
        return sum(len(feeder(types.SimpleNamespace(iteration=k))[0]) for k in range(runs))

    timed = {name: [] for name in feeders}
    for feeder in feeders.values():
        epoch(feeder)   # connections opened
    for _ in range(rounds):
        for name, feeder in feeders.items():
            before, usage, started = os.times(), resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
            n = epoch(feeder)
            seconds, after, usage_after = time.perf_counter() - started, os.times(), resource.getrusage(resource.RUSAGE_SELF)
            switches = usage_after.ru_nvcsw - usage.ru_nvcsw + usage_after.ru_nivcsw - usage.ru_nivcsw
            timed[name].append((n / seconds, (after.user - before.user + after.system - before.system) / n * 1e6,
                                switches / n))
    pool.shutdown()
    return {name: {"best": max(r[0] for r in runs), "cpu_us": statistics.median(r[1] for r in runs),
                   "switches": statistics.median(r[2] for r in runs)} for name, runs in timed.items()}


def _table(rows: dict, *header) -> str:
    lines = ["| " + " | ".join(header) + " |", "| --- |" + " ---: |" * (len(header) - 1)]
    for name, row in rows.items():
        cells = [f"{value:.2f}" if key in ("vs_local", "cpu_vs_local", "gets") else f"{value:.3f}" if key == "cpu_ms"
                 else f"{value:.1f}" if key == "switches" else f"{value:.0f}" for key, value in row.items()]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
