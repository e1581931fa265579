"""`python -m dali_loaders bench --tiny` runs end to end and writes its JSON and chart.

Speed is not tested here (no timing thresholds): the benchmark itself reports it."""
import json
import os
import re
import subprocess
import sys

import pytest
import torch

LOADERS = ("dali", "torchvision", "limit")
LOADER_FIELDS = ("images_per_s", "runs_images_per_s", "first_batch_s", "peak_rss_mb")
WORKLOADS = ("cifar10/train", "cifar10/val", "imagenet/train", "imagenet/val", "resnet50/train", "resnet50/val")


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    command = [sys.executable, "-m", "dali_loaders", "bench", "--tiny", "--threads", "1",
               "--cache-dir", str(out / "cache"), "--json", str(out / "bench.json"),
               "--plot", str(out / "bench.png")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    (out / "stderr.txt").write_text(done.stderr)
    with open(out / "bench.json") as f:
        return json.load(f), done.stdout, out


def test_every_workload_reports_every_loader(tiny_run):
    report, _, _ = tiny_run
    assert [r["workload"] for r in report["results"]] == list(WORKLOADS)
    for result in report["results"]:
        assert result["images"] > 0
        for kind in LOADERS:
            loader = result["loaders"][kind]
            for field in LOADER_FIELDS:
                assert loader[field] is not None, (result["workload"], kind, field)
            assert loader["images_per_s"] > 0 and loader["peak_rss_mb"] > 0
            assert len(loader["runs_images_per_s"]) == 1  # --tiny: one round
        assert result["loaders"]["torchvision"]["num_workers"] in (0, 1)  # 0 .. --threads
        assert result["loaders"]["dali"]["num_threads"] == 1                # 1 .. --threads
        assert set(result["loaders"]["dali"]["sweep_images_per_s"]) == {"1"}
        assert result["vs_torchvision"] > 0 and result["of_limit"] > 0


def test_ratios_are_medians_of_side_by_side_runs(tiny_run):
    report, _, _ = tiny_run
    for result in report["results"]:
        dali = result["loaders"]["dali"]["runs_images_per_s"]
        twin = result["loaders"]["torchvision"]["runs_images_per_s"]
        limit = result["loaders"]["limit"]["runs_images_per_s"]
        assert result["vs_torchvision_runs"] == pytest.approx([d / t for d, t in zip(dali, twin)])
        assert result["of_limit_runs"] == pytest.approx([d / lim for d, lim in zip(dali, limit)])


def test_machine_targets_and_command_are_recorded(tiny_run):
    report, _, _ = tiny_run
    assert {"cpu", "cores", "memory_gb", "torch", "dali"} <= set(report["machine"])
    assert report["command"].startswith("dali-loaders bench --tiny")
    assert {t["workload"] for t in report["targets"]} == {"cifar10/train", "imagenet/train", "imagenet/val"}
    assert all(isinstance(t["met"], bool) for t in report["targets"])


def test_table_and_chart(tiny_run):
    _, stdout, out = tiny_run
    assert "| workload (batch) | loader | images/s |" in stdout
    for workload in WORKLOADS:
        assert workload in stdout
    with open(out / "bench.png", "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert os.path.getsize(out / "bench.png") > 10_000


def test_progress_bar_ends_full(tiny_run):
    _, _, out = tiny_run
    bars = [line for line in (out / "stderr.txt").read_text().replace("\r", "\n").splitlines()
            if line.startswith("bench:")]
    done, total = re.search(r"(\d+)/(\d+) \[", bars[-1]).groups()
    assert done == total  # the bar's length counts exactly the steps the bench takes


def test_help_describes_the_options():
    done = subprocess.run([sys.executable, "-m", "dali_loaders", "bench", "--help"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0
    for option in ("--quick", "--tiny", "--data-dir", "--json", "--plot", "--threads", "--rounds"):
        assert option in done.stdout


def test_missing_data_dir_is_reported(tmp_path):
    done = subprocess.run([sys.executable, "-m", "dali_loaders", "bench", "--tiny",
                           "--data-dir", str(tmp_path / "nothing")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "skipping cifar10" in done.stderr and "nothing to time" in done.stderr


def test_stages_table_builds_the_train_graph_stage_by_stage(tmp_path):
    from dali_loaders.bench import data

    root = data.make_image_folder(str(tmp_path), 16, 8, classes=2, short_sides=(64, 96), workers=1)
    done = subprocess.run([sys.executable, "-m", "benchmarks.stages", "--imagenet-dir", root,
                           "--threads", "1", "--rounds", "1", "--batches", "1"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {line[:58].strip(): line[58:].split() for line in done.stdout.splitlines() if len(line) > 58}
    from benchmarks.stages import STAGES

    for stage in STAGES:
        assert float(rows["train: " + stage][0]) > 0, stage
    assert rows["train: " + STAGES[1]][1] == "100%"  # the decode-only row is the reference
    assert float(rows["val: decode, resize the crop window, normalize"][0]) > 0
    for way in ("DALI fn.resize (CPU)", "PIL Image.resize (torchvision)", "torch interpolate, uint8",
                "external_source alone", "+ per-image crop and flip (= CIFAR train)"):
        assert float(rows[way][0]) > 0, way


@pytest.mark.parametrize("kind", ["dali", "torchvision"])
def test_resnet50_workload_runs_the_reference_recipe(kind, tmp_path):
    """Train: 176-pixel crops, MixUp/CutMix soft labels; val: 224-pixel centre crops, class indices."""
    from dali_loaders.bench import contenders, data

    root = data.make_image_folder(str(tmp_path), 16, 8, classes=2)
    classes = sum(entry.is_dir() for entry in os.scandir(os.path.join(root, "train")))
    for split, size in (("train", 176), ("val", 224)):
        spec = {"kind": kind, "dataset": "resnet50", "split": split, "data": root, "batch_size": 4, "threads": 1}
        images, labels = next(iter(contenders.make_loader(spec, 0)))
        assert images.shape == (4, 3, size, size) and images.dtype == torch.float32
        assert labels.shape == ((4, classes) if split == "train" else (4,))
