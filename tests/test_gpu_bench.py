"""`python -m dali_loaders check-gpu --bench`: the checks, then the GPU bench. Here (no GPU) it
says so and times the CPU variants: every contender of every workload, whole epochs (the
first beside the steady state), a JSON and a Markdown table in the output folder."""
import json
import statistics
import subprocess
import sys

import pytest
import torch

from dali_loaders.bench import gpu_run


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the machine without a GPU")
def test_without_a_gpu_it_times_the_cpu_variants(tmp_path):
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "dali_loaders", "check-gpu", "--bench", "--out", str(out),
                           "--cache-dir", str(tmp_path / "cache"), "--images", "16", "--cifar-images", "512",
                           "--recipe", "default", "--threads", "1", "--epochs", "3"],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "no CUDA GPU on this machine" in done.stdout and "the CPU variants only" in done.stdout
    assert "no CUDA GPU" in (out / "check-gpu.txt").read_text()
    report = json.loads((out / "gpu-bench.json").read_text())
    assert report["epochs"] == 3 and report["command"].startswith("dali-loaders check-gpu --bench")
    rows = {(r["workload"], r["contender"]): r for r in report["rows"]}
    expected = {("imagenet/train", 'DALI loader, device="cpu"'), ("imagenet/val", 'DALI loader, device="cpu"'),
                ("cifar10/train", 'DALI loader, device="cpu"'),
                ("imagenet/train", "NVIDIA's DALI example (CPU decode)"),
                ("imagenet/val", "NVIDIA's DALI example (CPU decode)"),
                ("imagenet/train", "decode ceiling (CPU decode)"), ("imagenet/val", "decode ceiling (CPU decode)"),
                ("imagenet/train", "torchvision tensors"), ("imagenet/val", "torchvision tensors"),
                ("cifar10/train", "torchvision (PIL)")}
    assert set(rows) == expected
    for row in rows.values():
        assert "error" not in row, row
        epochs = row["epochs_images_per_s"]
        steady_seconds = sum(row["images"] / rate for rate in epochs[1:])
        assert len(epochs) >= 3 and row["first_epoch_images_per_s"] == epochs[0]
        # 3 epochs at least, then more until the steady ones have lasted STEADY_SECONDS
        assert steady_seconds >= gpu_run.STEADY_SECONDS or len(epochs) == gpu_run.MAX_EPOCHS
        assert len(epochs) == 3 or steady_seconds - row["images"] / epochs[-1] < gpu_run.STEADY_SECONDS
        assert row["images_per_s"] == statistics.median(epochs[1:]) > 0   # the steady state: epochs 2..N
        assert row["peak_rss_mb"] > 0 and "gpu_torch_peak_mb" not in row   # no GPU: nothing measured there
    ours = rows["imagenet/train", 'DALI loader, device="cpu"']
    assert ours["vs_nvidia"] == pytest.approx(
        ours["images_per_s"] / rows["imagenet/train", "NVIDIA's DALI example (CPU decode)"]["images_per_s"])
    for (workload, _), row in rows.items():   # each image row's share of its split's ceiling
        ceiling = rows.get((workload, "decode ceiling (CPU decode)"))
        assert row.get("of_ceiling") == (None if ceiling is None else
                                         pytest.approx(row["images_per_s"] / ceiling["images_per_s"]))
    assert rows["cifar10/train", "torchvision (PIL)"]["num_workers"] == 1
    table = (out / "gpu-bench.md").read_text()
    assert table.count("\n| ") == len(rows) + 2   # the header and its rule, then a row each
    assert "| cifar10/train (256) |" in table and "median of the epochs after the first" in table


def test_past_the_time_budget_the_rest_is_listed_as_skipped(tmp_path):
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "dali_loaders", "check-gpu", "--bench", "--out", str(out),
                           "--cache-dir", str(tmp_path / "cache"), "--images", "8", "--cifar-images", "256",
                           "--recipe", "default", "--budget", "0"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    rows = json.loads((out / "gpu-bench.json").read_text())["rows"]
    assert rows and all(row["skipped"] == "the time budget ran out" for row in rows)
    assert (out / "gpu-bench.md").read_text().count("skipped: the time budget ran out") == len(rows)


def test_on_a_gpu_the_ceiling_and_nvidias_example_come_first_and_every_variant_follows():
    """What a GPU machine runs, by default (the default and resnet50 recipes): the quick and
    telling rows first, should the time budget run out."""
    from dali_loaders.bench import contenders, gpu_run

    found = gpu_run.contenders(True)
    assert [(c.kind, c.device) for c in found] == [
        ("ceiling", "gpu"), ("nvidia", "gpu"), ("dali", "gpu"), ("tensor", None), ("torchvision", None),
        ("dali", "cpu-decode"), ("dali", "cpu")]
    assert all(c.kind in contenders.KINDS for c in found)
    images = {(split, recipe) for split in ("train", "val") for recipe in ("default", "resnet50")}
    by_kind = {(c.kind, c.device): c.workloads for c in found}
    assert set(by_kind["ceiling", "gpu"]) == set(by_kind["nvidia", "gpu"]) == {
        ("imagenet", split, "default") for split in ("train", "val")}
    assert {(s, r) for d, s, r in by_kind["dali", "gpu"] if d == "imagenet"} == images
    assert ("cifar10", "train", "default") in by_kind["dali", "gpu"]
    assert [c.kind for c in gpu_run.contenders(True, recipes=[])] == ["dali", "torchvision", "dali"]   # CIFAR only
