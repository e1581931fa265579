"""`python -m dali_loaders bench --tiny` runs end to end and writes its JSON and chart.

Speed is not tested here (no timing thresholds): the benchmark itself reports it."""
import json
import os
import re
import subprocess
import sys

import pytest

LOADER_FIELDS = ("images_per_s", "runs_images_per_s", "first_batch_s", "next_epoch_first_batch_s", "peak_rss_mb")
# workload -> its contenders: the tensor backend on the image folder and the datasets in
# memory; 38d94aa's loader (the reference) on CIFAR-10 train
THREE = ("dali", "torchvision", "limit")
FOUR = ("dali", "torchvision", "tensor", "limit")
WORKLOADS = {"cifar10/train": ("dali", "torchvision", "tensor", "reference", "limit"), "cifar10/val": FOUR,
             "imagenet/train": FOUR, "imagenet/val": FOUR, "mnist/train": FOUR, "mnist/val": FOUR,
             "flowers102/train": THREE, "flowers102/val": THREE}
# the other recipes (tv176, resnet50, tvref-ta, timm-ra, albumentations) run in the full bench; their
# loaders are tested below and elsewhere
RECIPES = ("default",)
RUN_TIMEOUT = 900  # seconds: a hang must fail the test; eight workloads' workers start on 2 cores


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    command = [sys.executable, "-m", "dali_loaders", "bench", "--tiny", "--threads", "1",
               "--cache-dir", str(out / "cache"), "--json", str(out / "bench.json"),
               "--plot", str(out / "bench.png")] + [f"--recipe={name}" for name in RECIPES]
    done = subprocess.run(command, capture_output=True, text=True, timeout=RUN_TIMEOUT)
    assert done.returncode == 0, done.stderr[-3000:]
    (out / "stderr.txt").write_text(done.stderr)
    with open(out / "bench.json") as f:
        return json.load(f), done.stdout, out


@pytest.mark.slow
@pytest.mark.subprocess
def test_every_workload_reports_every_loader(tiny_run):
    report, _, _ = tiny_run
    assert [r["workload"] for r in report["results"]] == list(WORKLOADS)
    for result in report["results"]:
        assert result["images"] > 0
        assert set(result["loaders"]) == set(WORKLOADS[result["workload"]])
        for kind in WORKLOADS[result["workload"]]:
            loader = result["loaders"][kind]
            for field in LOADER_FIELDS:
                assert loader[field] is not None, (result["workload"], kind, field)
            assert loader["images_per_s"] > 0 and loader["peak_rss_mb"] > 0
            # the steady batch time: the median of a pass's later batches (none in a one-batch pass)
            assert "steady_batch_s" in loader and (loader["steady_batch_s"] is None or loader["steady_batch_s"] > 0)
            assert len(loader["runs_images_per_s"]) == 1  # --tiny: one round
        for kind in {"torchvision", "tensor"} & set(result["loaders"]):
            assert result["loaders"][kind]["num_workers"] in (0, 1)  # 0 .. --threads (torch threads in memory)
        assert result["loaders"]["dali"]["num_threads"] == 1                # 1 .. --threads
        assert set(result["loaders"]["dali"]["sweep_images_per_s"]) == {"1"}
        assert result["vs_torchvision"] > 0 and result["of_limit"] > 0


@pytest.mark.slow
@pytest.mark.subprocess
def test_ratios_are_medians_of_side_by_side_runs(tiny_run):
    report, _, _ = tiny_run
    for result in report["results"]:
        dali = result["loaders"]["dali"]["runs_images_per_s"]
        for field, kind in (("vs_torchvision", "torchvision"), ("vs_tensor", "tensor"), ("vs_reference", "reference"),
                            ("of_limit", "limit")):
            if kind not in result["loaders"]:
                assert field not in result
                continue
            other = result["loaders"][kind]["runs_images_per_s"]
            assert result[field + "_runs"] == pytest.approx([d / o for d, o in zip(dali, other)])


@pytest.mark.slow
@pytest.mark.subprocess
def test_new_workloads_time_the_standard_factories_against_their_twins(tiny_run):
    report, stdout, _ = tiny_run
    by_name = {r["workload"]: r for r in report["results"]}
    assert by_name["mnist/train"]["batch_size"] == 256 and by_name["flowers102/train"]["batch_size"] == 16
    assert by_name["mnist/val"]["images"] == 512 and by_name["flowers102/val"]["images"] == 16
    assert "limit: memory bandwidth, uint8 read + float32 written" in stdout and "limit: DALI decode only" in stdout
    assert "torch v2 on whole batches" in stdout and "38d94aa's loader" in stdout


@pytest.mark.slow
@pytest.mark.subprocess
def test_machine_targets_and_command_are_recorded(tiny_run):
    report, _, _ = tiny_run
    assert {"cpu", "cores", "memory_gb", "torch", "dali"} <= set(report["machine"])
    assert report["command"].startswith("dali-loaders bench --tiny")
    assert {t["workload"] for t in report["targets"]} == {"cifar10/train", "imagenet/train", "imagenet/val"}
    assert {"ImageNet-style train vs torchvision tensors", "ImageNet-style val vs torchvision tensors",
            "CIFAR-10 train vs 38d94aa's loader", "CIFAR-10 train vs torch on whole batches"} <= \
        {t["target"] for t in report["targets"]}
    assert all(isinstance(t["met"], bool) for t in report["targets"])


@pytest.mark.slow
@pytest.mark.subprocess
def test_table_and_chart(tiny_run):
    _, stdout, out = tiny_run
    assert "| workload (batch) | loader | images/s |" in stdout
    for workload in WORKLOADS:
        assert workload in stdout
    with open(out / "bench.png", "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert os.path.getsize(out / "bench.png") > 10_000


@pytest.mark.slow
@pytest.mark.subprocess
def test_progress_bar_ends_full(tiny_run):
    _, _, out = tiny_run
    bars = [line for line in (out / "stderr.txt").read_text().replace("\r", "\n").splitlines()
            if line.startswith("bench:")]
    done, total = re.search(r"(\d+)/(\d+) \[", bars[-1]).groups()
    assert done == total  # the bar's length counts exactly the steps the bench takes


@pytest.mark.subprocess
def test_help_describes_the_options():
    done = subprocess.run([sys.executable, "-m", "dali_loaders", "bench", "--help"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0
    for option in ("--quick", "--tiny", "--data-dir", "--json", "--plot", "--threads", "--rounds"):
        assert option in done.stdout


@pytest.mark.subprocess
def test_missing_data_dir_is_reported(tmp_path):
    done = subprocess.run([sys.executable, "-m", "dali_loaders", "bench", "--tiny",
                           "--data-dir", str(tmp_path / "nothing")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "skipping cifar10" in done.stderr and "nothing to time" in done.stderr


@pytest.mark.slow
@pytest.mark.subprocess
def test_stages_table_builds_the_train_graph_stage_by_stage(tmp_path):
    from dali_loaders.bench import data

    root = data.make_image_folder(str(tmp_path), 16, 8, classes=2, short_sides=(64, 96), workers=1)
    done = subprocess.run([sys.executable, "-m", "dali_loaders.bench.stages", "--imagenet-dir", root,
                           "--threads", "1", "--rounds", "1", "--batches", "1"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {line[:58].strip(): line[58:].split() for line in done.stdout.splitlines() if len(line) > 58}
    from dali_loaders.bench.stages import STAGES

    for stage in STAGES:
        assert float(rows["train: " + stage][0]) > 0, stage
    assert rows["train: " + STAGES[1]][1] == "100%"  # the decode-only row is the reference
    assert float(rows["val: decode, resize the crop window, normalize"][0]) > 0
    from dali_loaders.bench.stages import (
        STOCK,  # the same graphs with DALI's fn.resize in place of the plugin
    )

    assert float(rows["val: decode, resize the crop window, normalize" + STOCK][0]) > 0
    assert float(rows["train: " + STAGES[4] + STOCK][0]) > 0
    for way in ("DALI fn.resize (CPU)", "PIL Image.resize (torchvision)", "torch interpolate, uint8",
                "external_source alone", "+ per-image crop and flip"):
        assert float(rows[way][0]) > 0, way


@pytest.mark.parametrize("kind", ["dali", "torchvision", "tensor"])
def test_resnet50_recipe_runs_torchvisions_reference(kind, tmp_path):
    """The resnet50 recipe: train 176-pixel crops with MixUp/CutMix soft labels; val
    224-pixel centre crops with class indices; every contender runs it."""
    import torch

    from dali_loaders.bench import contenders, data

    root = data.make_image_folder(str(tmp_path), 16, 8, classes=2)
    for split, size in (("train", 176), ("val", 224)):
        spec = {"kind": kind, "dataset": "imagenet", "recipe": "resnet50", "split": split, "data": root,
                "batch_size": 4, "threads": 1}
        images, labels = next(iter(contenders.make_loader(spec, 0)))
        assert images.shape == (4, 3, size, size) and images.dtype == torch.float32
        assert labels.shape == ((4, 2) if split == "train" else (4,))


@pytest.mark.subprocess
def test_cifar_stages_table_has_every_stage_and_the_contenders(tmp_path):
    from cifar_data import write_cifar

    from dali_loaders.bench.cifar_stages import STAGES

    root = write_cifar(str(tmp_path), "cifar10", 600, 10)
    done = subprocess.run([sys.executable, "-m", "dali_loaders.bench.cifar_stages", "--cifar-dir", root,
                           "--threads", "1", "--rounds", "1"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "600 images" in done.stdout
    rows = {line[:58].strip(): line[58:].split() for line in done.stdout.splitlines() if len(line) > 58}
    for row in [s.strip() for s in STAGES] + ["the DALI loader (graph + DaliLoader's per-batch work)",
                                              "38d94aa's loader, rebuilt (bench/arrays.py)",
                                              "torch v2 on whole uint8 batches, 1 torch thread(s)"]:
        assert float(rows[row][0].replace(",", "")) > 0, row


@pytest.mark.parametrize("recipe,train_size,mixed", [("tvref-ta", 176, True), ("timm-ra", 224, False)])
@pytest.mark.parametrize("kind", ["dali", "torchvision", "tensor"])
def test_issue_17_recipes_run_in_every_contender(recipe, train_size, mixed, kind, tmp_path):
    """tvref-ta (torchvision's reference with TrivialAugmentWide and MixUp/CutMix) and timm-ra
    (timm's create_transform; the tensor backend its v2 near-equivalent): every contender."""
    import torch

    from dali_loaders.bench import contenders, data

    pytest.importorskip("timm")
    root = data.make_image_folder(str(tmp_path), 8, 4, classes=2)
    for split, size in (("train", train_size), ("val", 224)):
        spec = {"kind": kind, "dataset": "imagenet", "recipe": recipe, "split": split, "data": root,
                "batch_size": 4, "threads": 1}
        images, labels = next(iter(contenders.make_loader(spec, 0)))
        assert images.shape == (4, 3, size, size) and images.dtype == torch.float32
        assert labels.shape == ((4, 2) if split == "train" and mixed else (4,))
