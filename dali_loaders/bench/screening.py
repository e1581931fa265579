"""What screening costs (README, "Data you did not make"): `python -m dali_loaders.bench.screening`.

On one ImageNet-like folder, side by side in one run: listing the files, the header scan
(on_error="raise"), the decode check (on_error="skip"), each with the cache cold and warm,
and one validation epoch of the DALI loader for scale.
"""
import argparse
import os
import shutil
import tempfile
import time

from ..datasets.imagenet import get_imagefolder_iter_dali
from ..sources.image_files import ImageFiles, find_classes, is_image
from .data import default_cache_dir, make_image_folder


def timed(work) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def listing(root: str) -> int:
    """What construction did before screening: the class folders and their image names."""
    classes, _ = find_classes(root)
    return sum(1 for c in classes for _, _, names in os.walk(os.path.join(root, c)) for n in names if is_image(n))


def measure(root: str, threads: int) -> list:
    """[(what, seconds)] for the folder `root`, with the screening cache in a fresh folder."""
    home, saved = tempfile.mkdtemp(prefix="dali_loaders_screen_"), os.environ.get("HOME")
    os.environ["HOME"] = home   # the cache lives under ~/.cache: cold here, whatever ran before
    try:
        rows = [("list the files (before screening)", timed(lambda: listing(root)))]
        for on_error, what in (("raise", "header scan"), ("skip", "header scan + PIL decode check")):
            rows.append((f"{what}, cache cold", timed(lambda on_error=on_error: ImageFiles(root, on_error=on_error))))
            rows.append((f"{what}, cache warm", timed(lambda on_error=on_error: ImageFiles(root, on_error=on_error))))
            shutil.rmtree(os.path.join(home, ".cache"), ignore_errors=True)
        loader = get_imagefolder_iter_dali(root, 64, False, threads)
        rows.append((f"one val epoch, DALI, {threads} threads (for scale)", timed(lambda: [x for x in loader])))
    finally:
        if saved is None:
            del os.environ["HOME"]
        else:
            os.environ["HOME"] = saved
        shutil.rmtree(home, ignore_errors=True)
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=1300)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--cache-dir", default=default_cache_dir())
    args = parser.parse_args(argv)
    root = os.path.join(make_image_folder(args.cache_dir, args.images, 10), "train")
    rows = measure(root, args.threads)
    print(f"{args.images} JPEGs (short side 300-500) in {root}")
    for what, seconds in rows:
        print(f"  {what:52s} {seconds:7.2f} s  {1000 * seconds / args.images:6.2f} ms/file")


if __name__ == "__main__":
    main()
