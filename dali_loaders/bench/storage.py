"""`python -m dali_loaders bench --storage s3`: one image folder read from local disk and from
an S3 server on loopback (SeaweedFS, started here), the default train recipe, side by side:
images per second, and the requests and bytes per epoch the server counted, the S3 root read
both ways (the library's GETs ahead of the pipeline, DALI's own S3 reader), each also with
5 ms added to every request (a distant store) by the proxy every S3 request goes through.

A store is another machine: its work does not take the loader's CPUs. Here the server runs
on the last CPU and every row's loader on the others (`--server-cpu shared`, or a machine of
one CPU: they share them, and the table says so). Loopback has no network latency: the plain
S3 rows say what the S3 path costs the loader in requests and CPU; the 5 ms rows, how well
each way hides a round trip.
"""
import json
import os
import statistics
import tempfile
import time

DISTANT_S = 0.005   # a distant store's round trip, added by the proxy in front of the server
# (row, root: None for local disk, how URL images are read: GETs ahead or DALI's own S3 reader,
# the round trip the proxy adds to each request)
READS = (("local", None, "pool", 0), ("s3", "s3://bench/train", "pool", 0),
         ("s3 + 5 ms a request", "s3://bench/train", "pool", DISTANT_S),
         ("s3, DALI's reader", "s3://bench/train", "dali", 0),
         ("s3 + 5 ms a request, DALI's reader", "s3://bench/train", "dali", DISTANT_S))
SIZES = {"tiny": (48, 16), "quick": (512, 64), "full": (1280, 64)}   # (train images, batch size)
ROUNDS = 5   # timed epochs a row, after one that builds the pipeline


def one_epoch(loader) -> tuple:
    """(images, seconds) of one pass."""
    started, n = time.perf_counter(), 0
    for _, labels in loader:
        n += len(labels)
    return n, time.perf_counter() - started


SETTLE_S = 0.1   # the server's GET count unchanged this long: the reads an epoch started are done


def settled(server) -> tuple:
    """(the server's counts once the reads in flight have arrived, the CPU seconds this thread
    spent asking): an epoch ends with the next one's first batches asked for, and these belong
    to the epoch that asked (counted and timed with it, the CPU they take included)."""
    spent = time.thread_time()
    counts, deadline = server.requests("bench"), time.monotonic() + 10
    while time.monotonic() < deadline:
        time.sleep(SETTLE_S)
        again = server.requests("bench")
        if again.get("GET") == counts.get("GET"):
            counts = again
            break
        counts = again
    return counts, time.thread_time() - spent


def _row(name, loader, rounds, server=None) -> dict:
    one_epoch(loader)   # the first pass builds the pipeline (and, on S3, opens the connections)
    before = settled(server)[0] if server else None
    cpu_before = time.process_time()   # this process's CPU (DALI's threads, the GETs): the server is another
    passes = [one_epoch(loader) for _ in range(rounds)]
    after, asking = settled(server) if server else (None, 0.0)
    cpu = time.process_time() - cpu_before - asking   # the metrics' parsing left out
    n = passes[0][0]
    best = min(seconds for _, seconds in passes)
    row = {"storage": name, "images": n, "seconds": best, "images_per_s": n / best,
           "median_images_per_s": statistics.median(n / seconds for _, seconds in passes),
           "cpu_ms_per_image": cpu * 1000 / (n * rounds)}
    if server is not None:
        for method in ("GET", "HEAD"):
            row[f"{method.lower()}_per_epoch"] = round((after.get(method, 0) - before.get(method, 0)) / rounds)
        row["mib_per_epoch"] = (after["bytes_sent"] - before["bytes_sent"]) / rounds / 2 ** 20
    return row


def cpu_split(own: bool) -> tuple:
    """(the loader's CPUs, the server's): the last CPU for the server where there are two or
    more and it is to have its own; else all for both (server: None)."""
    mine = sorted(os.sched_getaffinity(0))
    return (set(mine[:-1]), {mine[-1]}) if own and len(mine) > 1 else (set(mine), None)


def pin(cpus, process="self") -> None:
    """Every thread of `process` (a pid, or this one) onto `cpus`; threads made later inherit
    their maker's."""
    for task in os.listdir(f"/proc/{process}/task"):
        try:
            os.sched_setaffinity(int(task), cpus)
        except OSError:   # a thread that ended meanwhile
            pass


LISTING_PREFIX = "s3://bench-listing/keys"
PUT_THREADS = 16


def _listing(server, keys: int) -> dict:
    """Seconds to list a prefix of `keys` empty objects (put here first, 16 at a time): the
    library's listing (storage.list_tree, as a loader is built) and boto3's paginator, each
    best of 3, side by side."""
    from concurrent.futures import ThreadPoolExecutor

    import obstore

    from ..sources import s3_client, storage

    bucket, _, prefix = LISTING_PREFIX[len("s3://"):].partition("/")
    server.bucket(bucket)
    store = s3_client.store(LISTING_PREFIX)
    print(f"  putting {keys} empty objects under {LISTING_PREFIX} ...", flush=True)
    with ThreadPoolExecutor(PUT_THREADS) as pool:
        list(pool.map(lambda i: obstore.put(store, f"{prefix}/{i // 1000:04d}/{i:07d}", b""), range(keys)))

    def library():
        return len(storage.list_tree(LISTING_PREFIX))

    def boto3_pages():   # the same endpoint (the proxy) and settings, from the environment
        import boto3

        client = boto3.session.Session().client("s3")
        pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/")
        return sum(page.get("KeyCount", 0) for page in pages)

    timed = {}
    for name, listing in (("library", library), ("boto3", boto3_pages)):
        best = None
        for _ in range(3):
            started = time.perf_counter()
            found = listing()
            seconds = time.perf_counter() - started
            best = seconds if best is None else min(best, seconds)
        if found != keys:
            raise RuntimeError(f"listing {LISTING_PREFIX} found {found} keys of {keys}")
        timed[name] = best
    return {"keys": keys, "library_s": timed["library"], "boto3_s": timed["boto3"]}


def run(mode: str = "tiny", threads: int = 2, rounds: int = ROUNDS, cache_dir: str = None,
        server_cpu: str = "own", list_keys: int = 0) -> dict:
    from .. import get_imagefolder_iter_dali
    from ..sources.url_reads import READER_ENV
    from ..testing.object_store import Environment, LoopbackProxy, WeedServer, aws_environment
    from . import data

    n_train, batch = SIZES[mode]
    root = data.make_image_folder(cache_dir or data.default_cache_dir(), n_train, 16, classes=10)
    loader_cpus, server_cpus = cpu_split(server_cpu == "own")
    with tempfile.TemporaryDirectory(prefix="dali-loaders-s3-bench-") as folder:
        server = WeedServer(folder, cpus=server_cpus)
        server.start()
        proxy = LoopbackProxy(server.s3)   # the network, on the server's CPU: every S3 row goes through it
        if server_cpus:
            pin(server_cpus, proxy.process.pid)
        everywhere = os.sched_getaffinity(0)
        pin(loader_cpus)
        try:
            with Environment(aws_environment(proxy.endpoint)):   # one endpoint: DALI reads it once a process
                server.upload_folder(os.path.join(root, "train"), "s3://bench/train")
                rows = []
                for name, where, reader, delay in READS:
                    print(f"  {name}: {rounds + 1} epochs of {n_train} images ...", flush=True)
                    proxy.delay_s = delay
                    with Environment({READER_ENV: reader}):   # read when the pipeline is built
                        loader = get_imagefolder_iter_dali(os.path.join(root, "train") if where is None else where,
                                                           batch, True, threads, seed=0)
                        rows.append(_row(name, loader, rounds, server if where else None))
                        del loader
                proxy.delay_s = 0
                listing = _listing(server, list_keys) if list_keys else None
        finally:
            pin(everywhere)   # the threads made meanwhile too (the GET pool's)
            proxy.stop()
            server.stop()
    local = rows[0]["images_per_s"]
    for row in rows:
        row["vs_local"] = row["images_per_s"] / local
    return {"mode": mode, "recipe": "recipes.imagenet(train=True)", "threads": threads, "rounds": rounds,
            "loader_cpus": sorted(loader_cpus), "server_cpus": sorted(server_cpus) if server_cpus else "shared",
            "rows": rows, "listing": listing}


def table(result: dict) -> str:
    where = (f"loaders on CPU {','.join(map(str, result['loader_cpus']))}, S3 server on CPU "
             f"{','.join(map(str, result['server_cpus']))}" if result["server_cpus"] != "shared"
             else f"loaders and S3 server sharing CPU {','.join(map(str, result['loader_cpus']))}")
    lines = [f"{result['threads']} DALI threads, best and median of {result['rounds']} epochs; {where}",
             "| storage | images | best epoch (s) | images/s | median images/s | vs local | CPU ms/image "
             "| GETs/epoch | HEADs/epoch | MiB/epoch |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in result["rows"]:
        lines.append(f"| {r['storage']} | {r['images']} | {r['seconds']:.2f} | {r['images_per_s']:.0f} | "
                     f"{r['median_images_per_s']:.0f} | {r['vs_local']:.2f}x | {r['cpu_ms_per_image']:.2f} | "
                     f"{r.get('get_per_epoch', '-')} | "
                     f"{r.get('head_per_epoch', '-')} | "
                     f"{format(r['mib_per_epoch'], '.1f') if 'mib_per_epoch' in r else '-'} |")
    listing = result.get("listing")
    if listing:
        lines.append(f"listing a prefix of {listing['keys']} keys (best of 3): the library {listing['library_s']:.2f} s, "
                     f"boto3's paginator {listing['boto3_s']:.2f} s")
    return "\n".join(lines)


def main(args) -> int:
    """The bench's --storage s3 hook: its --tiny/--quick, --threads, --rounds, --cache-dir."""
    mode = args.mode if args.mode in SIZES else "full"
    result = run(mode, threads=min(args.threads, 4), rounds=args.rounds or ROUNDS, cache_dir=args.cache_dir,
                 server_cpu=args.server_cpu, list_keys=getattr(args, "list_keys", 0))
    print(table(result))
    path = os.path.join(os.path.dirname(os.path.abspath(args.json)), "bench-storage.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    print(f"wrote {path}")
    return 0
