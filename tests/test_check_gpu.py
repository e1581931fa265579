"""`python -m dali_loaders check-gpu`: says so and exits 0 without a GPU; its table, its
failures (labels, shapes, batch counts, a graph that raises) and its exit code, tried CPU
against CPU; every translated transform in it."""
import subprocess
import sys

import pytest
import torch

from dali_loaders import get_cifar_iter_dali, transforms
from dali_loaders.testing import check_gpu
from dali_loaders.testing.synthetic import write_cifar


@pytest.mark.subprocess
@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the machine without a GPU")
def test_without_a_gpu_it_says_so_and_exits_0():
    done = subprocess.run([sys.executable, "-m", "dali_loaders", "check-gpu"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "no CUDA GPU on this machine" in done.stdout


def test_every_translated_transform_is_checked():
    used = set()
    for _, transform, _ in check_gpu.transform_cases():
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
                                                      "decode: ImageFolder val, gpu", "loader: CIFAR-10 train"))]
    assert len(picked) == 4
    assert check_gpu.run("cpu", picked) == 0
    assert "4 of 4 checks passed" in capsys.readouterr().out
