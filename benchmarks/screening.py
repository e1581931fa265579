"""What screening costs (README, "Data you did not make"): `python -m benchmarks.screening`.

On one ImageNet-like folder, side by side in one run: listing the files, the header scan
(on_error="raise"), the decode check (on_error="skip"), each with the cache cold and warm,
and one validation epoch of the DALI loader for scale. `--bomb`: the peak RSS of one epoch
of 8 images, in a fresh process each, without and with a 20000 x 20000 PNG among them.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

from dali_loaders.datasets.imagenet import get_imagefolder_iter_dali
from dali_loaders.sources.image_files import ImageFiles, find_classes, is_image
from dali_loaders.bench.data import default_cache_dir, make_image_folder


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


PEAK = """
import resource, sys
from dali_loaders import ImageDecodeError, get_imagefolder_iter_dali
root, limit, on_error = sys.argv[1:]
try:
    served = sum(len(y) for _, y in get_imagefolder_iter_dali(root, 4, True, 1, on_error=on_error,
                                                             max_image_pixels=None if limit == "none" else "pil"))
    said = f"served {served}"
except ImageDecodeError as e:
    said = "refused the bomb, by name" if "zz_bomb.png" in str(e) else f"refused: {e}"
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024, said)
"""


def bomb_peaks() -> None:
    import numpy as np
    from PIL import Image

    from dali_loaders.testing.synthetic import smooth_images
    from dali_loaders.testing.untrusted import huge_png

    with tempfile.TemporaryDirectory() as folder:
        plain, bombed = os.path.join(folder, "plain"), os.path.join(folder, "bombed")
        os.makedirs(os.path.join(plain, "a"))
        for i, pixels in enumerate(smooth_images(8, np.random.default_rng(0), 256)):
            Image.fromarray(pixels).save(os.path.join(plain, "a", f"{i}.jpg"))
        shutil.copytree(plain, bombed)
        with open(os.path.join(bombed, "a", "zz_bomb.png"), "wb") as f:
            f.write(huge_png(20000, 20000))
        for root, limit, on_error in ((plain, "pil", "raise"), (bombed, "pil", "raise"), (bombed, "pil", "skip"),
                                      (bombed, "none", "raise")):
            done = subprocess.run([sys.executable, "-c", PEAK, root, limit, on_error], capture_output=True,
                                  text=True, env=dict(os.environ, HOME=folder))
            peak, said = done.stdout.strip().splitlines()[-1].split(" ", 1)
            print(f"  {os.path.basename(root):7s} max_image_pixels={'None' if limit == 'none' else 'PIL rule':8s} "
                  f"on_error={on_error!r:7s} peak RSS {int(peak):6d} MiB  ({said})")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.screening", description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=1300)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--cache-dir", default=default_cache_dir())
    parser.add_argument("--bomb", action="store_true", help="the peak RSS with a decompression bomb instead")
    args = parser.parse_args(argv)
    if args.bomb:
        return bomb_peaks()
    root = os.path.join(make_image_folder(args.cache_dir, args.images, 10), "train")
    rows = measure(root, args.threads)
    print(f"{args.images} JPEGs (short side 300-500) in {root}")
    for what, seconds in rows:
        print(f"  {what:52s} {seconds:7.2f} s  {1000 * seconds / args.images:6.2f} ms/file")


if __name__ == "__main__":
    main()
