"""`python -m dali_loaders check-gpu`: says so and exits 0 without a GPU; its table, its
failures (labels, shapes, batch counts, a graph that raises) and its exit code, tried CPU
against CPU; every translated transform in it; bounds in levels of 0..255 whatever the output's
scale; the random transforms' checks by distribution, which pass on graphs built as a GPU's
are (DALI's own operators) and fail when their parameter is left at its default."""
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from dali_loaders import get_cifar_iter_dali, transforms
from dali_loaders.ops import plugin
from dali_loaders.testing import check_gpu, distributions
from dali_loaders.testing.synthetic import write_cifar


@pytest.mark.subprocess
@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the machine without a GPU")
def test_without_a_gpu_it_says_so_and_exits_0():
    done = subprocess.run([sys.executable, "-m", "dali_loaders", "check-gpu"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "no CUDA GPU on this machine" in done.stdout


def test_every_translated_transform_is_checked():
    used = set()
    cases = [transform for _, transform, _ in check_gpu.transform_cases()]
    for _, transform, _ in check_gpu.view_cases():   # FiveCrop's, and each view's steps (MultiCropView)
        cases += [transform] + (transforms.made_views(transform) or [])
    for transform in cases + [check.transform for check in distributions.distribution_checks()]:
        for step in transforms.flatten(transform):
            used |= {type(step).__name__} | {type(inner).__name__ for inner in getattr(step, "transforms", [])}
    assert set(transforms.supported_names()) <= used


def test_the_table_and_the_exit_code(tmp_path, capsys):
    root = write_cifar(str(tmp_path), n_train=24, n_test=12)
    seeds = iter(range(100))

    def same(variant):
        return get_cifar_iter_dali("train", root, 8, 1, seed=1, device=variant)

    def other_seed_each_time(variant):   # another order each build: labels differ
        return get_cifar_iter_dali("train", root, 8, 1, seed=next(seeds), device=variant)

    def fewer_batches(variant, calls=[]):
        calls.append(variant)
        return get_cifar_iter_dali("val", root, 8, 1, device=variant, drop_last=len(calls) % 2 == 1)

    def broken(variant):
        raise RuntimeError("no such operator on the GPU")

    good = check_gpu.Check("same loader twice", same, 0.0)
    assert check_gpu.run("cpu", [good]) == 0
    assert "1 of 1 checks passed" in capsys.readouterr().out
    checks = [good, check_gpu.Check("labels", other_seed_each_time, 1.0),
              check_gpu.Check("batches", fewer_batches, 1.0), check_gpu.Check("raises", broken, 1.0)]
    assert check_gpu.run("cpu", checks) == 1
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[1:-1]}
    assert rows["same"].split()[-1] == "pass"
    assert "FAIL labels differ" in rows["labels"]
    assert "FAIL ValueError" in rows["batches"] and "zip()" in rows["batches"]
    assert "FAIL RuntimeError: no such operator" in rows["raises"]


def test_the_real_checks_run_cpu_against_cpu(tmp_path, capsys):
    """A few of the real checks (all of them take a minute): built, run, within bounds."""
    checks = check_gpu.build_checks(str(tmp_path))
    picked = [c for c in checks if c.name.startswith(("transform: RandomAffine", "transform: DaliFunction",
                                                      "transform: Lambdas", "transform: ElasticTransform",
                                                      "decode: ImageFolder val, gpu", "loader: CIFAR-10 train",
                                                      "views:"))]
    assert len(picked) == 13
    assert check_gpu.run("cpu", picked) == 0
    assert "13 of 13 checks passed" in capsys.readouterr().out


def test_the_steps_the_cpu_runs_are_checked_again_decoded_on_the_gpu(tmp_path, monkeypatch):
    """Each check whose steps device="gpu" runs on the CPU comes again as a "gpu-decode" graph
    (files decoded on the GPU, steps on the CPU), made with that placement asked for and no
    other: the loaders made for it see DALI_LOADERS_STEPS_DECODE=gpu, the rest of the run not."""
    from dali_loaders.loader import build

    monkeypatch.delenv(build.STEPS_DECODE_ENV, raising=False)
    checks = check_gpu.build_checks(str(tmp_path))
    again = {c.name for c in checks if c.variant == transforms.GPU_DECODE}
    assert {"transform: ColorJitter pinned, decoded on the GPU", "random: RandAugment, decoded on the GPU",
            "transform: LinearTransformation (steps on the CPU), decoded on the GPU"} <= again
    assert "transform: Pad + flips p=1, decoded on the GPU" not in again   # all on the GPU already
    pixel = {c.name: c for c in checks if isinstance(c, check_gpu.Check)}
    assert pixel["transform: ColorJitter pinned, decoded on the GPU"].bound == \
        pixel["transform: ColorJitter pinned"].bound + 1
    seen = []
    with distributions.made_as(transforms.GPU_DECODE) as device:
        seen.append((device, build.steps_decode()))
    with distributions.made_as("gpu") as device:
        seen.append((device, build.steps_decode()))
    assert seen == [("gpu", "gpu"), ("gpu", "cpu")] and build.STEPS_DECODE_ENV not in os.environ


class Batches:
    """A fake loader: the same (images, labels) batches each epoch."""

    def __init__(self, *batches):
        self.batches = batches

    def __iter__(self):
        return iter(self.batches)


def test_bounds_are_in_levels_whatever_the_output_scale(tmp_path):
    """A difference of 7 levels reads 7 on uint8, 0..1 and normalized outputs alike; rows and
    columns left out (Resize nearest's ties) are not compared, and only those."""
    labels = torch.zeros(2, dtype=torch.int64)
    std = [0.229, 0.224, 0.225]
    base = torch.zeros(2, 3, 6, 5)
    moved = base.clone()
    moved[:, 1, 2, 3] = 7
    cases = {"uint8": (base.to(torch.uint8), moved.to(torch.uint8), None),
             "0..1": (base, moved / 255, None),
             "normalized": (base, moved / (255 * torch.tensor(std).view(1, 3, 1, 1)), std)}
    for name, (a, b, scale) in cases.items():
        def make(variant, a=a, b=b):
            return Batches((a if variant == "cpu" else b, labels))
        check = check_gpu.Check(name, make, 7, std=scale)
        found = check_gpu.compare(check, "gpu")
        assert found["worst"] == pytest.approx(7, abs=1e-3), name
        assert check_gpu.compare(check_gpu.Check(name, make, 7, std=scale, left_out=([2], [])), "gpu")["worst"] == 0
        assert check_gpu.compare(check_gpu.Check(name, make, 7, std=scale, left_out=([1], [2])), "gpu")["worst"] > 6
    checks = {c.name: c for c in check_gpu.build_checks(str(tmp_path)) if isinstance(c, check_gpu.Check)}
    normalized = [name for name in checks if name.startswith(("loader:", "decode:")) or "Normalize" in name]
    assert len(normalized) == 8 and all(checks[name].std is not None for name in normalized)
    assert checks["transform: Resize nearest (h, w)"].left_out == ([], [27, 38])   # PIL: 72 -> 44 px rounds 2 down


def test_every_check_states_its_bound(tmp_path, capsys):
    """One pixel check and one random check, run CPU against CPU: each row shows its bound
    (levels, or D's critical value) and what it found; the random one its parameter."""
    checks = check_gpu.build_checks(str(tmp_path))
    picked = [c for c in checks if c.name in ("transform: Pad + flips p=1", "random: timm RandomErasing const p=1",
                                              "random: RandomErasing p=1, value 0.5")]
    assert len(picked) == 3 - (distributions._timm_checks() == [])
    assert check_gpu.run("cpu", picked) == 0
    out = capsys.readouterr().out
    assert "<= 1 level " in out and "D <= 0.161" in out and "set: scale=(0.1, 0.2) (default (0.02, 0.33))" in out


@pytest.mark.slow
def test_the_random_checks_pass_as_a_gpu_graph_is_built_and_fail_with_their_parameter_ignored(tmp_path,
                                                                                               monkeypatch):
    """Each random check on the CPU with DALI's own operators (the plugins off, as a GPU graph
    has them): within its bound; with the transform's parameter at its default instead (what a
    translation that ignored it would give), past it."""
    monkeypatch.setenv(plugin.DISABLE_ENV, "1")
    folder = distributions.write_gradient_images(str(tmp_path))
    checks = distributions.distribution_checks()
    assert len(checks) == 5 + len(distributions._timm_checks())
    for check in checks:
        faithful = distributions.compare_distribution(check, "cpu", folder)
        assert faithful["distance"] <= faithful["bound"], (check.name, faithful)
        ignored = distributions.compare_distribution(check, "cpu", folder, transform=check.ignored)
        assert ignored["distance"] > ignored["bound"], (check.name, check.parameter, ignored)


def test_the_distance_allows_the_tolerance_and_no_more():
    rng = np.random.default_rng(0)
    a = rng.normal(10, 3, 400)
    assert distributions.ks_distance(a, a + 1.5) > 0.15   # a shift the plain statistic sees
    assert distributions.ks_distance(a, a + 1.5, tolerance=2) == 0
    assert distributions.ks_distance(a, a + 3, tolerance=2) > 0.1
    assert distributions.ks_bound(384, 384) == pytest.approx(0.1606, abs=1e-3)
