"""`python -m benchmarks.augment_kernels`: what each of DaliLoadersAugment's kernels costs.

The kernels (ops/csrc/augment_*.cc) are compiled here as the plugin compiles them (-O3,
-ffp-contract=off, -march=x86-64-v2, -mfma where the CPU has it), without DALI, next to a
small C driver that runs one op sequence on one image many times; ctypes calls it. Printed:
per op and flavour, microseconds per 224x224 RGB image (the best of a few rounds, the
machine being shared), `Identity` being the sequence driver's own cost (the copies in and out).
`--baseline DIR` builds a second copy from the kernel sources in DIR (for instance
`git archive <rev> dali_loaders/ops/csrc | tar -x -C DIR`) and times the two side by side,
round after round in turns, printing both and the speed-up: a ratio measured in one run.

`--digest FILE` writes a digest of the kernels' outputs over a grid of images (1, 3 and 4
channels, odd sizes), ops, parameters and sequences; `--compare FILE` checks the kernels
built now against one: whoever speeds a kernel up shows in this way that no output bit
moved (tests/test_augment_op.py checks them against torchvision and PIL themselves).
"""
import argparse
import ctypes
import hashlib
import json
import os
import platform
import shutil
import subprocess
import tempfile
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from dali_loaders.ops import augment as op
from dali_loaders.ops import plugin

FLAVOURS = {"pil": 0, "tensor": 1, "tensor_v1": 2}   # augk::Flavour's order

DRIVER = r"""
#include <chrono>
#include <vector>
#include "augment_kernels.h"
#include "simd.h"

namespace {
std::vector<augk::Step> steps_of(const int* ops, const float* params, int k) {
  std::vector<augk::Step> steps(k);
  for (int j = 0; j < k; j++) {
    steps[j].op = ops[j];
    for (int p = 0; p < augk::kNumParams; p++) steps[j].p[p] = params[j * augk::kNumParams + p];
  }
  return steps;
}
}  // namespace

// Whether the kernels take their AVX2 paths in this process (DALI_LOADERS_PORTABLE: see simd.h)
extern "C" int augk_bench_avx2() { return simd::have_avx2() ? 1 : 0; }

extern "C" const char* augk_bench_check(const int* ops, const float* params, int k, int flavour) {
  for (const augk::Step& s : steps_of(ops, params, k)) {
    const char* why = augk::check_step(s, static_cast<augk::Flavour>(flavour));
    if (why[0]) return why;
  }
  return "";
}

// Runs the sequence `repeats` times, `in` to `out`; returns the nanoseconds of one run
extern "C" double augk_bench_run(const unsigned char* in, unsigned char* out, int h, int w, int c, const int* ops,
                                 const float* params, int k, int flavour, const float* fill, const float* erase,
                                 int repeats) {
  const std::vector<augk::Step> steps = steps_of(ops, params, k);
  const augk::Settings settings{static_cast<augk::Flavour>(flavour), fill, erase};
  augk::Scratch scratch;
  augk::augment(in, out, h, w, c, steps.data(), k, settings, scratch);   // the scratch grown once
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < repeats; r++) augk::augment(in, out, h, w, c, steps.data(), k, settings, scratch);
  const std::chrono::duration<double, std::nano> took = std::chrono::steady_clock::now() - start;
  return took.count() / repeats;
}
"""


def build(folder: str, sources: str = plugin.SOURCE_DIR) -> ctypes.CDLL:
    """The kernels in `sources` and the driver, compiled into `folder` as the plugin compiles them."""
    compiler = os.environ.get("CXX") or shutil.which("g++") or "c++"
    arch = ["-march=x86-64-v2"] if platform.machine() in ("x86_64", "AMD64") else []
    arch += ["-mfma"] if arch and plugin.cpu_has("fma") else []
    driver = os.path.join(folder, "augk_bench.cc")
    with open(driver, "w") as f:
        f.write(DRIVER)
    common = [compiler, "-std=c++17", "-fPIC", "-w", *arch, "-I", sources]
    objects = []
    for name in plugin.AUGMENT.kernels:
        objects.append(os.path.join(folder, name[:-3] + ".o"))
        _run([*common, "-O3", *plugin.AUGMENT.kernel_flags, "-c", os.path.join(sources, name),
              "-o", objects[-1]])
    library = os.path.join(folder, "augk_bench.so")
    _run([*common, "-O1", "-shared", driver, *objects, "-o", library])
    return load(library)


def load(library: str) -> ctypes.CDLL:
    """The built library at this path, its functions typed."""
    lib = ctypes.CDLL(library)
    pointer = ctypes.c_void_p
    lib.augk_bench_check.restype = ctypes.c_char_p
    lib.augk_bench_check.argtypes = [pointer, pointer, ctypes.c_int, ctypes.c_int]
    lib.augk_bench_run.restype = ctypes.c_double
    lib.augk_bench_run.argtypes = [pointer, pointer, *[ctypes.c_int] * 3, pointer, pointer, ctypes.c_int,
                                   ctypes.c_int, pointer, pointer, ctypes.c_int]
    return lib


def _run(command: List[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"compiling the kernels failed:\n{' '.join(command)}\n{done.stderr}")


Steps = Sequence[Tuple[str, Sequence[float]]]


class Kernels:
    """The compiled kernels: one sequence of (op name, params) on one HWC uint8 image."""

    def __init__(self, lib: ctypes.CDLL):
        self.lib = lib

    def run(self, image: np.ndarray, steps: Steps, kernels: str, fill: Optional[Sequence[float]] = None,
            repeats: int = 1) -> Tuple[np.ndarray, float]:
        """The output and the nanoseconds of one run."""
        image = np.ascontiguousarray(image, np.uint8)
        h, w, c = image.shape
        codes = np.array([op.CODES[name] if name != "Skip" else op.SKIP for name, _ in steps], np.int32)
        params = np.zeros((max(1, len(steps)), op.NUM_PARAMS), np.float32)
        for k, (_, p) in enumerate(steps):
            params[k, :len(p)] = p
        why = self.lib.augk_bench_check(codes.ctypes.data, params.ctypes.data, len(steps), FLAVOURS[kernels])
        if why:
            raise ValueError(f"{steps} in {kernels}: {why.decode()}")
        out = np.empty_like(image)
        fills = None if fill is None else np.array(fill, np.float32)
        erase = np.array([17.0, 200.0, 90.0, 255.0][:c], np.float32)
        took = self.lib.augk_bench_run(image.ctypes.data, out.ctypes.data, h, w, c, codes.ctypes.data,
                                       params.ctypes.data, len(steps), FLAVOURS[kernels],
                                       None if fills is None else fills.ctypes.data, erase.ctypes.data, repeats)
        return out, took


def photo_like(height: int, width: int, channels: int, seed: int = 0) -> np.ndarray:
    """Smooth gradients and edges with noise: every level used, flat and busy areas both."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    planes = []
    for b in range(channels):
        fx, fy, phase = rng.uniform(0.01, 0.08, 2).tolist() + [rng.uniform(0, 6)]
        plane = 128 + 90 * np.sin(x * fx + phase) * np.cos(y * fy) + rng.normal(0, 12, (height, width))
        plane[(x // 40 + y // 40) % 3 == 0] *= 0.6
        planes.append(plane)
    return np.clip(np.stack(planes, -1), 0, 255).astype(np.uint8)


# -- the timing table ------------------------------------------------------------------------

def timed_ops(kernels: str) -> List[Tuple[str, Steps]]:
    """(label, steps) per row: one op with the magnitudes the AutoAugment family draws."""
    rows: List[Tuple[str, Steps]] = [("Identity", [("Identity", ())])]
    resamples = (0, 2, 3) if kernels == "pil" else (0, 2)
    names = {0: "nearest", 2: "bilinear", 3: "bicubic"}
    for r in resamples:
        rows += [(f"ShearX {names[r]}", [("ShearX", (0.3, r, 0.0 if kernels == "pil" else 1.0))]),
                 (f"ShearY {names[r]}", [("ShearY", (-0.3, r, 0.0 if kernels == "pil" else 1.0))]),
                 (f"TranslateX {names[r]}", [("TranslateX", (-67.0, r))]),
                 (f"Rotate {names[r]}", [("Rotate", (23.0, r))])]
    rows += [("Brightness", [("Brightness", (0.4, 1.0))]), ("Color", [("Color", (-0.4, 1.0))]),
             ("Contrast", [("Contrast", (0.4, 1.0))]), ("Sharpness", [("Sharpness", (0.4, 1.0))]),
             ("Hue", [("Hue", (0.1,))]), ("Posterize", [("Posterize", (4,))]), ("Solarize", [("Solarize", (128,))]),
             ("SolarizeAdd", [("SolarizeAdd", (60, 128))]), ("Invert", [("Invert", ())]),
             ("AutoContrast", [("AutoContrast", ())]), ("Equalize", [("Equalize", ())]),
             ("Grayscale", [("Grayscale", ())]), ("FlipH", [("FlipH", ())]), ("FlipV", [("FlipV", ())]),
             ("Erase", [("Erase", (50, 60, 80, 70))]),
             ("GaussianBlur 23, sigma 1", [("GaussianBlur", (1.0, 23, 23))]),
             ("GaussianBlur 5, sigma 1", [("GaussianBlur", (1.0, 5, 5))]),
             ("PIL's blur, radius 2", [("PilBlur", (2.0,))]), ("PIL's blur, radius 0.5", [("PilBlur", (0.5,))]),
             ("ColorJitter b/c/s", [("Brightness", (1.3, 0.0)), ("Contrast", (0.7, 0.0)), ("Color", (1.2, 0.0))])]
    return rows


def timings(builds: Sequence[Kernels], kernels: str, rounds: int, budget: float,
            only: Sequence[str] = ()) -> List[Dict[str, float]]:
    """Per build, microseconds per 224x224 RGB image: the best of `rounds` rounds of about
    `budget` s each, the builds taking turns within each op's rounds."""
    image = photo_like(224, 224, 3)
    fill = (128.0, 128.0, 128.0)
    result: List[Dict[str, float]] = [{} for _ in builds]
    for label, steps in timed_ops(kernels):
        if only and not any(word.lower() in label.lower() for word in only):
            continue
        repeats = []
        for kern in builds:
            _, once = kern.run(image, steps, kernels, fill)
            repeats.append(max(1, int(budget / max(once * 1e-9, 1e-6))))
        best = [float("inf")] * len(builds)
        for _ in range(rounds):
            for k, kern in enumerate(builds):
                best[k] = min(best[k], kern.run(image, steps, kernels, fill, repeats[k])[1] / 1000)
        for k in range(len(builds)):
            result[k][label] = best[k]
    return result


# -- the digest: every output, hashed ---------------------------------------------------------

def digest_cases(kernels: str) -> List[Tuple[str, Steps]]:
    """Ops over their parameter range (edges included), and sequences that chain them."""
    warps = []
    forms = (0.0, 1.0, 2.0) if kernels == "pil" else ((1.0,) if kernels == "tensor" else (2.0,))
    for r in (0, 2, 3) if kernels == "pil" else (0, 2):
        for name in ("ShearX", "ShearY"):
            warps += [(name, (m, r, form)) for m in (-0.3, -0.05, 0.0, 0.17, 0.3, 1.5) for form in forms]
        for name in ("TranslateX", "TranslateY"):
            warps += [(name, (t, r)) for t in (-300.0, -14.4, -3.0, 0.0, 0.5, 7.0, 21.7)]
        warps += [("Rotate", (a, r)) for a in (-30.0, -0.1, 0.0, 12.5, 90.0, 180.0, 270.0, 359.0, 450.0)]
    enhance = [(name, (m, base)) for name in ("Brightness", "Color", "Contrast", "Sharpness")
               for m, base in ((0.0, 0.0), (1.0, 0.0), (-0.9, 1.0), (-0.3, 1.0), (0.0, 1.0), (0.37, 1.0), (0.9, 1.0),
                               (0.123, 0.0), (1.77, 0.0), (5.0, 0.0))]
    tables = ([("Posterize", (b,)) for b in range(9)] + [("Solarize", (t,)) for t in (0, 1, 77.5, 128, 255, 256)]
              + [("SolarizeAdd", (a, t)) for a, t in ((0, 128), (30, 128), (110, 256), (60, 0))]
              + [("Hue", (h,)) for h in (-0.5, -0.27, -0.01, 0.0, 0.08, 0.33, 0.5)]
              + [(name, ()) for name in ("AutoContrast", "Equalize", "Invert", "Grayscale", "FlipH", "FlipV")]
              + [("Erase", box) for box in ((0, 0, 5, 7), (10, 3, 400, 400), (-3, -4, 9, 9))]
              + [("GaussianBlur", b) for b in ((0.1, 3, 3), (1.5, 5, 9), (2.0, 23, 23), (0.7, 1, 7), (3.0, 61, 1))]
              + [("PilBlur", (r,)) for r in (0.0, 0.3, 1.0, 1.5, 2.0, 4.45, 150.0)])
    cases = [(f"{name} {p}", [(name, p)]) for name, p in warps + enhance + tables]
    chains = [[], [("Skip", ())], [("Identity", ()), ("Skip", ())],
              [("Brightness", (1.3, 0.0)), ("Contrast", (0.7, 0.0)), ("Color", (1.2, 0.0)), ("Hue", (0.05,))],
              [("FlipH", ()), ("Rotate", (17.0, 2)), ("Equalize", ()), ("Sharpness", (0.5, 1.0))],
              [("TranslateY", (9.0, 0)), ("Skip", ()), ("ShearX", (0.2, 2, forms[0])), ("Posterize", (3,)),
               ("FlipV", ()), ("AutoContrast", ()), ("Erase", (4, 4, 6, 6))]]
    return cases + [(f"chain {k}", chain) for k, chain in enumerate(chains)]


def digest(kern: Kernels) -> Dict[str, str]:
    images = [photo_like(224, 224, 3, 1), photo_like(37, 53, 3, 2), photo_like(31, 29, 1, 3),
              photo_like(20, 23, 4, 4), photo_like(2, 3, 3, 5), np.full((9, 8, 3), 77, np.uint8)]
    result = {}
    for kernels in FLAVOURS:
        for label, steps in digest_cases(kernels):
            for fill in (None, (255.0, 9.0, 120.5, 33.0)):
                hasher = hashlib.sha256()
                for image in images:
                    out, _ = kern.run(image, steps, kernels, None if fill is None else fill[:image.shape[2]])
                    hasher.update(out.tobytes())
                result[f"{kernels} {label} fill={fill is not None}"] = hasher.hexdigest()[:20]
    return result


def changed(found: Dict[str, str], expected: Dict[str, str]) -> List[str]:
    """The cases of `expected` whose output is not the same in `found` (or is missing)."""
    return sorted(k for k in expected if found.get(k) != expected[k])


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.augment_kernels", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="timing rounds per op (the best is printed)")
    parser.add_argument("--budget", type=float, default=0.04, help="seconds per timing round")
    parser.add_argument("--digest", metavar="FILE", help="write the outputs' digest to FILE instead of timing")
    parser.add_argument("--compare", metavar="FILE", help="compare the outputs with FILE's digest instead of timing")
    parser.add_argument("--baseline", metavar="DIR", help="also time the kernel sources in DIR, side by side")
    parser.add_argument("--only", action="append", default=[], metavar="WORD",
                        help="time only the ops whose label contains WORD (repeatable)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="augk-bench-") as folder:
        builds = [Kernels(build(folder))]
        if args.digest or args.compare:
            return _digest_command(builds[0], args.digest, args.compare)
        if args.baseline:
            os.makedirs(os.path.join(folder, "baseline"))
            builds.append(Kernels(build(os.path.join(folder, "baseline"), _sources_in(args.baseline))))
        table = {kernels: timings(builds, kernels, args.rounds, args.budget, args.only) for kernels in FLAVOURS}
    _print(table)
    return 0


def _sources_in(folder: str) -> str:
    """The folder under `folder` holding augment_kernels.h (a checkout's or an archive's csrc)."""
    for root, _, files in os.walk(folder):
        if "augment_kernels.h" in files:
            return root
    raise SystemExit(f"--baseline {folder}: no augment_kernels.h under it")


def _print(table: Dict[str, List[Dict[str, float]]]) -> None:
    labels = list(dict.fromkeys(label for runs in table.values() for label in runs[0]))
    both = len(next(iter(table.values()))) == 2
    cells = [f"{k:>11}" + (f"{'baseline':>10}{'x':>6}" if both else "") for k in FLAVOURS]
    print(f"{'op (224x224 RGB), us per image':32}" + "".join(cells))
    for label in labels:
        line = f"{label:32}"
        for k in FLAVOURS:
            runs = table[k]
            if label not in runs[0]:
                line += f"{'-':>11}" + (" " * 16 if both else "")
                continue
            line += f"{runs[0][label]:11.1f}"
            if both:
                line += f"{runs[1][label]:10.1f}{runs[1][label] / runs[0][label]:6.1f}"
        print(line)


def _digest_command(kern: Kernels, write: Optional[str], compare: Optional[str]) -> int:
    found = digest(kern)
    if write:
        with open(write, "w") as f:
            json.dump(found, f, indent=0, sort_keys=True)
        print(f"{len(found)} cases written to {write}")
    if compare:
        with open(compare) as f:
            expected = json.load(f)
        moved = changed(found, expected)
        for key in moved:
            print(f"changed: {key}")
        print(f"{len(expected) - len(moved)} of {len(expected)} cases bit-identical")
        return 1 if moved else 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
