"""`python -m dali_loaders bench --storage s3`: one image folder read from local disk and from
an S3 server on loopback (SeaweedFS, started here, behind a proxy that counts requests), the
default train recipe, side by side: images per second and requests and bytes per epoch, the
S3 root read both ways (the library's GETs ahead of the pipeline, DALI's own S3 reader). The
proxy runs in a process of its own, so its work does not take the loader's GIL.

Loopback S3 has no network latency: the figures say what the S3 path costs in requests and
CPU, not how a distant bucket performs (each request there adds a round trip, which DALI's
threads overlap).
"""
import json
import os
import tempfile
import time

# (row, root: None for local disk, how URL images are read: GETs ahead, or DALI's own S3 reader)
READS = (("local", None, "pool"), ("s3", "s3://bench/train", "pool"), ("s3, DALI's reader", "s3://bench/train", "dali"))
SIZES = {"tiny": (48, 16), "quick": (512, 64), "full": (1280, 64)}   # (train images, batch size)


def _epoch(loader) -> tuple:
    """(images, seconds) of one pass."""
    started, n = time.perf_counter(), 0
    for _, labels in loader:
        n += len(labels)
    return n, time.perf_counter() - started


def _row(name, loader, rounds, proxy=None) -> dict:
    _epoch(loader)   # the first pass builds the pipeline (and, on S3, warms the connections)
    best, counts = None, None
    for _ in range(rounds):
        if proxy is not None:
            proxy.reset()
        n, seconds = _epoch(loader)
        best = seconds if best is None else min(best, seconds)
        counts = proxy.counts() if proxy is not None else None
    row = {"storage": name, "images": n, "seconds": best, "images_per_s": n / best}
    if counts:
        row.update(requests_per_epoch=counts["requests"], mib_per_epoch=counts["bytes_down"] / 2 ** 20)
    return row


def run(mode: str = "tiny", threads: int = 2, rounds: int = 2, cache_dir: str = None) -> list:
    from .. import get_imagefolder_iter_dali
    from ..sources.url_reads import READER_ENV
    from ..testing.object_store import Environment, LoopbackProxy, WeedServer, aws_environment
    from . import data

    n_train, batch = SIZES[mode]
    root = data.make_image_folder(cache_dir or data.default_cache_dir(), n_train, 16, classes=10)
    with tempfile.TemporaryDirectory(prefix="dali-loaders-s3-bench-") as folder:
        server = WeedServer(folder)
        server.start()
        proxy = LoopbackProxy(server.s3)
        try:
            with Environment(aws_environment(proxy.endpoint)):
                server.upload_folder(os.path.join(root, "train"), "s3://bench/train")
                rows = []
                for name, where, reader in READS:
                    with Environment({READER_ENV: reader}):   # read when the pipeline is built: at the first pass
                        loader = get_imagefolder_iter_dali(os.path.join(root, "train") if where is None else where,
                                                           batch, True, threads, seed=0)
                        rows.append(_row(name, loader, rounds, proxy if where else None))
                        del loader
        finally:
            proxy.stop()
            server.stop()
    return rows


def table(rows) -> str:
    lines = ["| storage | images | best epoch (s) | images/s | requests/epoch | MiB/epoch |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(f"| {r['storage']} | {r['images']} | {r['seconds']:.2f} | {r['images_per_s']:.0f} | "
                     f"{r.get('requests_per_epoch', '-')} | "
                     f"{format(r['mib_per_epoch'], '.1f') if 'mib_per_epoch' in r else '-'} |")
    return "\n".join(lines)


def main(args) -> int:
    """The bench's --storage s3 hook: its --tiny/--quick, --threads, --rounds, --cache-dir."""
    mode = args.mode if args.mode in SIZES else "full"
    rows = run(mode, threads=min(args.threads, 4), rounds=args.rounds or 2, cache_dir=args.cache_dir)
    print(table(rows))
    path = os.path.join(os.path.dirname(os.path.abspath(args.json)), "bench-storage.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump({"mode": mode, "recipe": "recipes.imagenet(train=True)", "rows": rows}, f, indent=1)
    print(f"wrote {path}")
    return 0
