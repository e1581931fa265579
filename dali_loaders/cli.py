"""`python -m dali_loaders demo|bench|verify|index|check-gpu` (installed as `dali-loaders` too)."""
import argparse


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
    from . import verify_images

    bad = verify_images(args.root)
    for path, reason in bad.items():
        print(f"{path}: {reason}")
    print(f"{len(bad)} undecodable file(s) under {args.root}")
    return 1 if bad else 0


def _index(args) -> int:
    from .sources.webdataset import ensure_index, expand_shards, index_path, write_index

    for shard in expand_shards(args.shards):
        path = index_path(shard, args.cache_dir) if args.force else ensure_index(shard, args.cache_dir)
        samples = write_index(shard, path) if args.force else int(open(path).readline().split()[1])
        print(f"{path}: {samples} samples of {shard}")
    return 0


def _check_gpu(args) -> int:
    from .testing.check_gpu import run

    return run(args.against)


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
    check = commands.add_parser("check-gpu", help="run the GPU graphs beside the CPU ones, whole images "
                                                   "compared; a table of bounds, pass / fail")
    check.add_argument("--against", choices=["gpu", "cpu"], default="gpu",
                       help="cpu: the same checks CPU against CPU (tries the machinery without a GPU)")
    check.set_defaults(run=_check_gpu)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return args.run(args)


