"""`python -m dali_loaders demo|bench|verify|index|check-gpu|build-plugins` (installed as `dali-loaders` too)."""
import argparse
import sys
import time


def _demo(args) -> int:
    from .demo import run_demo

    run_demo(args.cache_dir, samples=args.samples)
    return 0


def _bench(args) -> int:
    if args.storage == "s3":
        from .bench.storage import main as storage_main

        return storage_main(args)
    from .bench.run import main as bench_main

    return bench_main(args)


def _verify(args) -> int:
    import os
    import sys

    from . import verify_images

    try:
        if os.path.isfile(args.root):
            raise NotADirectoryError(f"{args.root!r} is a file, not a folder; pass the folder that holds the images")
        bad = verify_images(args.root)
    except OSError as refusal:   # a missing folder, a file, no images: the reason, not a traceback
        print(f"dali-loaders verify: error: {refusal}", file=sys.stderr)
        return 2
    for path, reason in bad.items():
        print(f"{path}: {reason}")
    print(f"{len(bad)} undecodable file(s) under {args.root}")
    return 1 if bad else 0


def _index(args) -> int:
    import sys

    from .sources.webdataset import ensure_index, expand_shards, index_path, write_index

    try:
        for shard in expand_shards(args.shards):
            path = index_path(shard, args.cache_dir) if args.force else ensure_index(shard, args.cache_dir)
            samples = write_index(shard, path) if args.force else int(open(path).readline().split()[1])
            print(f"{path}: {samples} samples of {shard}")
    except (OSError, ValueError) as refusal:   # a missing or broken shard: the reason, not a traceback
        print(f"dali-loaders index: error: {refusal}", file=sys.stderr)
        return 2
    return 0


def _check_gpu(args) -> int:
    import contextlib
    import os
    import sys
    import time

    from .testing.check_gpu import run

    if not args.bench:
        return run(args.against)
    started = time.perf_counter()
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "check-gpu.txt"), "w") as log, \
            contextlib.redirect_stdout(_Tee(sys.stdout, log)):
        checked = run(args.against)
    from .bench.data import default_cache_dir
    from .bench.gpu_run import DEFAULT_RECIPES, run_bench

    timed = run_bench(args.out, args.cache_dir or default_cache_dir(), images=args.images,
                      cifar_images=args.cifar_images, threads=args.threads, recipes=args.recipe or DEFAULT_RECIPES,
                      epochs=args.epochs, deadline=started + args.budget,
                      command="dali-loaders " + " ".join(sys.argv[1:]))
    print(f"check-gpu --bench: {time.perf_counter() - started:.0f} s in all; checks "
          f"{'passed' if checked == 0 else 'FAILED'}, bench {'complete' if timed == 0 else 'had failures'}")
    return checked or timed


class _Tee:
    """stdout to the terminal and to a file."""

    def __init__(self, *streams):
        self.streams = streams

    def write(self, text):
        for stream in self.streams:
            stream.write(text)
        return len(text)

    def flush(self):
        for stream in self.streams:
            stream.flush()


def _build_plugins(args) -> int:
    from .ops import plugin

    try:
        import nvidia.dali  # noqa: F401
    except ImportError:
        print("build-plugins: NVIDIA DALI is not installed (pip install \"dali_loaders[cuda12]\", or [cuda13])",
              file=sys.stderr)
        return 1
    print(f"building the C++ operators for DALI {nvidia.dali.__version__} into {plugin.cache_root()} "
          f"({plugin.USUAL_TIME} each, in parallel)", flush=True)
    try:
        results = plugin.build_all(workers=args.jobs)
    except plugin.Unavailable as e:   # no compiler: nothing can be built
        print(f"build-plugins: {e}", file=sys.stderr)
        return 1
    for built in results:
        if built.error:
            print(f"{built.library.file}: FAILED ({built.error}); the loaders go on {built.library.instead}")
        else:
            how = f"compiled in {built.seconds:.0f} s" if built.compiled else "already built"
            print(f"{built.library.file}: {how}: {built.path}")
    memory_built = _build_batch_memory()
    return 1 if any(built.error for built in results) or not memory_built else 0


def _build_batch_memory() -> bool:
    """The batch memory (torch's side, ops/batch_memory.py), said as the plugins are."""
    from .ops import batch_memory, plugin

    start = time.monotonic()
    try:
        path, compiled = batch_memory.build()
    except plugin.Unavailable as e:
        print(f"{batch_memory.FILE}: FAILED ({e}); collate_fn and batch_transform callables use torch's own allocator")
        return False
    how = f"compiled in {time.monotonic() - start:.0f} s" if compiled else "already built"
    print(f"{batch_memory.FILE}: {how}: {path}")
    return True


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dali-loaders", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = commands.add_parser("demo", help="make a small CIFAR-format set, run DALI beside torchvision, "
                                            "print parity and speed")
    demo.add_argument("--cache-dir", default=None, help="where the demo data goes "
                      "(default: ~/.cache/dali_loaders/demo)")
    demo.add_argument("--samples", type=int, default=10000, help="train images to make (default: 10000)")
    demo.set_defaults(run=_demo)

    bench = commands.add_parser("bench", help="measure the loaders against torchvision and the hardware limit")
    from .bench.run import add_arguments

    add_arguments(bench)
    bench.add_argument("--storage", choices=["local", "s3"], default="local",
                       help="s3: one image folder from local disk and from a loopback S3 server, side by side")
    bench.add_argument("--server-cpu", choices=["own", "shared"], default="own",
                       help="with --storage s3: the S3 server on a CPU of its own, as a store on another "
                            "machine would be (default), or on the loaders' CPUs")
    bench.add_argument("--list-keys", type=int, default=0, metavar="N",
                       help="with --storage s3: also time listing a prefix of N empty objects (e.g. 100000)")
    bench.set_defaults(run=_bench)

    verify = commands.add_parser("verify", help="list the files under ROOT that cannot be decoded")
    verify.add_argument("root", help="a dataset folder (class-per-folder, or train/ and val/ inside)")
    verify.set_defaults(run=_verify)

    index = commands.add_parser("index", help="write the index files DALI's webdataset reader needs "
                                              "(beside each shard, or in --cache-dir)")
    index.add_argument("shards", nargs="+", help="tar shards: paths, a folder, a glob or name-{000..009}.tar")
    index.add_argument("--cache-dir", default=None, help="write the indexes here instead of beside the shards")
    index.add_argument("--force", action="store_true", help="write them even where an up-to-date one exists")
    index.set_defaults(run=_index)
    from .bench import gpu_run

    check = commands.add_parser("check-gpu", help="run the GPU graphs beside the CPU ones, whole images "
                                                   "compared; a table of bounds, pass / fail")
    check.add_argument("--against", choices=["gpu", "cpu"], default="gpu",
                       help="cpu: the same checks CPU against CPU (tries the machinery without a GPU)")
    check.add_argument("--bench", action="store_true",
                       help="then time the GPU variants against NVIDIA's DALI example, the decode ceiling and "
                            "torchvision on data it makes, whole epochs at steady state (without a GPU: the CPU "
                            "variants); about 5 minutes in all on 16 cores and an H200")
    check.add_argument("--out", default="gpu-check-results", metavar="DIR",
                       help="--bench: where check-gpu.txt, gpu-bench.json and gpu-bench.md go (default: %(default)s)")
    check.add_argument("--images", type=int, default=gpu_run.IMAGES, metavar="N",
                       help="--bench: train JPEGs to make (val: N/4; default: %(default)s)")
    check.add_argument("--epochs", type=int, default=gpu_run.EPOCHS, metavar="N",
                       help="--bench: whole epochs of each workload at least, more until the epochs after "
                            "the first last 2 s; steady state is their median (default: %(default)s)")
    check.add_argument("--cifar-images", type=int, default=50000, metavar="N",
                       help="--bench: CIFAR-10 train images (default: %(default)s, the full epoch)")
    check.add_argument("--recipe", action="append", choices=["default", "resnet50", "timm-ra"],
                       help="--bench: time this image recipe only (repeatable; default: default and resnet50)")
    check.add_argument("--threads", type=int, default=0, metavar="N",
                       help="--bench: DALI threads and the most DataLoader workers (default: the cores)")
    check.add_argument("--cache-dir", default=None, metavar="DIR",
                       help="--bench: where the made data is kept (default: the bench's cache)")
    check.add_argument("--budget", type=float, default=280, metavar="SECONDS",
                       help="--bench: no workload starts after this long, checks included; the rest are "
                            "listed as skipped (default: %(default)s)")
    check.set_defaults(run=_check_gpu)
    plugins = commands.add_parser("build-plugins", help="compile the C++ operators for the DALI installed now, "
                                                        "ahead of first use (e.g. in a container image)")
    plugins.add_argument("--jobs", type=int, default=None,
                         help="libraries compiled at once (default: one per library, up to the CPU count)")
    plugins.set_defaults(run=_build_plugins)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return args.run(args)


