"""`python -m dali_loaders bench --tiny` runs end to end and writes its JSON and chart.

Speed is not tested here (no timing thresholds): the benchmark itself reports it."""
import argparse
import json
import os
import re
import subprocess
import sys

import pytest

LOADER_FIELDS = ("images_per_s", "runs_images_per_s", "first_batch_s", "next_epoch_first_batch_s", "peak_rss_mb")
# workload -> its contenders: the tensor backend on the image folder and the datasets in
# memory; NVIDIA's example pipeline on the image folder; the baseline DALI loader on CIFAR-10 train
THREE = ("dali", "torchvision", "limit")
FOUR = ("dali", "torchvision", "tensor", "limit")
IMAGES = ("dali", "torchvision", "tensor", "nvidia", "limit")
HF = ("dali", "torchvision", "folder", "limit")   # DataLoader(ds.with_transform); ImageFolder of the same files on DALI
WORKLOADS = {"cifar10/train": ("dali", "torchvision", "tensor", "baseline", "limit"), "cifar10/val": FOUR,
             "imagenet/train": IMAGES, "imagenet/val": IMAGES, "mnist/train": FOUR, "mnist/val": FOUR,
             "flowers102/train": THREE, "flowers102/val": THREE, "hf/train": HF, "hf/val": HF}
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# a commit hash: 7 to 40 hex digits with letters and digits both
HASH = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")
# the other recipes (tv176, resnet50, tvref-ta, timm-ra, albumentations) run in the full bench; their
# loaders are tested below and elsewhere
RECIPES = ("default",)
RUN_TIMEOUT = 900  # seconds: a hang must fail the test; ten workloads' workers start on 2 cores


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
        for field, kind in (("vs_torchvision", "torchvision"), ("vs_tensor", "tensor"), ("vs_baseline", "baseline"),
                            ("vs_nvidia", "nvidia"), ("vs_folder", "folder"), ("of_limit", "limit")):
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
    assert "torch v2 on whole batches" in stdout and "baseline DALI loader (CIFAR, original" in stdout
    assert "NVIDIA's DALI example" in stdout
    assert "DataLoader(ds.with_transform)" in stdout and "DALI loader, ImageFolder (same files" in stdout
    assert by_name["hf/train"]["images"] == by_name["imagenet/train"]["images"]   # the same JPEGs


@pytest.mark.slow
@pytest.mark.subprocess
def test_tiny_checks_no_targets_and_names_no_commit(tiny_run):
    """--tiny's few batches mean nothing: no verdicts; nothing printed names a commit."""
    report, stdout, out = tiny_run
    assert {"cpu", "cores", "memory_gb", "torch", "dali"} <= set(report["machine"])
    assert report["command"].startswith("dali-loaders bench --tiny")
    assert report["targets"] == [] and " met " not in stdout and "MISSED" not in stdout
    assert "no targets checked" in stdout
    printed = stdout + (out / "stderr.txt").read_text() + " ".join(strings(report["results"]))
    assert not HASH.findall(printed.replace(str(out), ""))


def strings(value):
    """Every string in a JSON document, keys too (numbers like 1e-05 are no names)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def test_the_targets_of_a_full_run(tiny_run):
    """What a full run checks, on the tiny run's results: every target whose workload ran."""
    from dali_loaders.bench import report as bench_report

    results, _, _ = tiny_run
    checked = bench_report.check_targets(results["results"])
    assert {t["workload"] for t in checked} == {"cifar10/train", "imagenet/train", "imagenet/val", "hf/train"}
    assert {"ImageNet-style train vs torchvision tensors", "ImageNet-style val vs torchvision tensors",
            "CIFAR-10 train vs the baseline DALI loader", "CIFAR-10 train vs torch on whole batches",
            "HF dataset train vs DataLoader(ds.with_transform)",
            "HF dataset train vs its files through ImageFolder on DALI"} <= {t["target"] for t in checked}
    by_name = {r["workload"]: r for r in results["results"]}
    for target in checked:
        value = by_name[target["workload"]].get("vs_baseline") if "baseline" in target["target"] else None
        if value is not None:
            assert target["value"] == value and target["met"] == (value >= 2.0)
    text = bench_report.targets_text(checked)
    assert len(text.splitlines()) == len(checked) and not HASH.findall(text)


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
    assert stdout.index("| workload (batch) |") < stdout.index("wrote ")   # the table, then the chart


@pytest.mark.slow
@pytest.mark.subprocess
def test_progress_bar_ends_full(tiny_run):
    _, _, out = tiny_run
    bars = [line for line in (out / "stderr.txt").read_text().replace("\r", "\n").splitlines()
            if line.startswith("bench:")]
    done, total = re.search(r"(\d+)/(\d+) \[", bars[-1]).groups()
    assert done == total  # the bar's length counts exactly the steps the bench takes


@pytest.mark.subprocess
class _RanAhead:
    """A loader whose first pass after a pause comes at once, `slow` seconds of `clock` quicker
    than the rest (as a loader that ran ahead while another contender was timed), 4 images a pass."""

    def __init__(self, slow: float, clock):
        self.slow, self.clock, self.passes = slow, clock, 0

    def __iter__(self):
        if self.passes > 0:
            self.clock.now += self.slow
        self.passes += 1
        return iter([(None, [0, 1, 2, 3])])


def test_a_timed_run_takes_what_ran_ahead_in_an_untimed_lead_pass(monkeypatch):
    """The bench's contenders take turns: what one made ahead while another was timed is
    taken by an untimed lead pass before its timed ones (bench.worker._passes)."""
    import types

    from dali_loaders.bench import session, worker

    clock = types.SimpleNamespace(now=0.0)
    monkeypatch.setattr(worker, "time", types.SimpleNamespace(perf_counter=lambda: clock.now))
    loader = _RanAhead(0.05, clock)
    images, seconds, passes = worker._passes(loader, None, 0.0)
    assert (images, passes, loader.passes, seconds) == (4, 1, 1, 0.0)   # the free pass, timed
    loader = _RanAhead(0.05, clock)
    images, seconds, passes = worker._passes(loader, None, 0.0, lead=1)
    assert (images, passes, loader.passes) == (4, 1, 2) and seconds == pytest.approx(0.05)   # it, untimed
    assert session.LEAD_PASSES >= 1


def test_help_describes_the_options():
    done = subprocess.run([sys.executable, "-m", "dali_loaders", "bench", "--help"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0
    for option in ("--quick", "--tiny", "--data-dir", "--json", "--plot", "--threads", "--rounds"):
        assert option in done.stdout
    named = re.findall(r"[\w/]+\.py\b", done.stdout.replace("\n", " "))
    assert named, "the help names where the recipes are defined"
    for path in named:
        assert os.path.isfile(os.path.join(REPO, path)), path


def test_a_recipe_whose_library_is_missing_is_skipped_with_a_hint(monkeypatch, capsys):
    from dali_loaders.bench import catalog, run

    lacking = catalog.BenchRecipe(lambda train: None, needs=("no_such_library_here",))
    monkeypatch.setitem(catalog.RECIPES, "imagenet", dict(catalog.RECIPES["imagenet"], lacking=lacking))
    args = argparse.Namespace(recipe=None, mode="full")
    chosen = run.chosen_recipes(args, "imagenet")
    assert "lacking" not in chosen and "default" in chosen
    assert capsys.readouterr().err.strip().splitlines() == ["lacking skipped: pip install no_such_library_here"]


def test_when_every_recipe_asked_for_is_skipped_the_run_says_so(monkeypatch, tmp_path, capsys):
    """`bench --only imagenet --recipe R` where R's library is missing: its hint, then that
    nothing was timed because of it (not that no data was found); no data is made."""
    from dali_loaders.bench import catalog, run

    lacking = catalog.BenchRecipe(lambda train: None, needs=("no_such_library_here",))
    monkeypatch.setitem(catalog.RECIPES, "imagenet", dict(catalog.RECIPES["imagenet"], lacking=lacking))
    parser = argparse.ArgumentParser()
    run.add_arguments(parser)
    args = parser.parse_args(["--tiny", "--only", "imagenet", "--recipe", "default", "--cache-dir", str(tmp_path)])
    args.recipe = ["lacking"]   # argparse's choices were fixed before the patch
    assert run.main(args) == 1
    assert capsys.readouterr().err.strip().splitlines() == [
        "lacking skipped: pip install no_such_library_here",
        "nothing to time: every recipe asked for was skipped (see above)"]
    assert list(tmp_path.iterdir()) == []


def test_without_matplotlib_the_chart_alone_is_missing(monkeypatch, tmp_path, capsys):
    from dali_loaders.bench import run

    monkeypatch.setitem(sys.modules, "matplotlib", None)   # import matplotlib raises ImportError
    assert run.draw_chart([], str(tmp_path / "chart.png"), "title") is False
    assert not (tmp_path / "chart.png").exists()
    assert capsys.readouterr().err.count("\n") == 1


@pytest.mark.subprocess
def test_missing_data_dir_is_reported(tmp_path):
    done = subprocess.run([sys.executable, "-m", "dali_loaders", "bench", "--tiny",
                           "--data-dir", str(tmp_path / "nothing")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "skipping cifar10" in done.stderr and "nothing to time" in done.stderr


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


@pytest.mark.parametrize("recipe,train_size,mixed", [("tvref-ta", 176, True), ("timm-ra", 224, False)])
@pytest.mark.parametrize("kind", ["dali", "torchvision", "tensor"])
def test_reference_recipes_run_in_every_contender(recipe, train_size, mixed, kind, tmp_path):
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


@pytest.mark.parametrize("kind", ["dali", "torchvision", "tensor"])
def test_the_timm_split_recipe_gives_three_images_of_each_sample_in_every_contender(kind, tmp_path):
    """timm-jsd (AugMixDataset's items as SplitViews): a clean image and two AugMix'd ones of one
    crop, three (B, 3, 224, 224) batches, as default_collate stacks AugMixDataset's tuples."""
    import torch

    from dali_loaders.bench import contenders, data

    pytest.importorskip("timm")
    root = data.make_image_folder(str(tmp_path), 8, 4, classes=2)
    spec = {"kind": kind, "dataset": "imagenet", "recipe": "timm-jsd", "split": "train", "data": root,
            "batch_size": 4, "threads": 1}
    views, labels = next(iter(contenders.make_loader(spec, 0)))
    assert isinstance(views, list) and len(views) == 3 and labels.shape == (4,)
    assert all(view.shape == (4, 3, 224, 224) and view.dtype == torch.float32 for view in views)
    assert not torch.equal(views[0], views[1]) and not torch.equal(views[1], views[2])


@pytest.mark.parametrize("dataset", ["imagenet", "cifar10"])
def test_mixing_workloads_time_the_collate_fn_spelling_beside_batch_transform(dataset, tmp_path):
    """Train workloads whose recipe mixes batches get the "collate" contender: the DALI loader
    with the same mixing as collate_fn=lambda batch: mixing(*default_collate(batch)), as
    torchvision's reference writes it; other workloads do not."""
    import torch

    from dali_loaders.bench import contenders, data
    from dali_loaders.bench.session import Workload

    root = data.make_image_folder(str(tmp_path), 8, 4, classes=2) if dataset == "imagenet" else \
        data.make_cifar(str(tmp_path), 64, 16)
    assert "collate" in Workload(dataset, "train", root, 4, 1, "mixing").kinds
    assert "collate" not in Workload(dataset, "train", root, 4, 1).kinds
    assert "collate" not in Workload("imagenet", "val", root, 4, 1, "resnet50").kinds
    spec = dict(Workload(dataset, "train", root, 4, 1, "mixing").spec, kind="collate")
    loader = contenders.make_loader(spec, 0)
    mixed = contenders.make_loader(dict(spec, kind="dali"), 0)   # batch_transform=mixing
    assert loader.collate_fn is not None and mixed.collate_fn is None and loader.route == mixed.route == "dali"
    for images, labels in (next(iter(loader)), next(iter(mixed))):
        assert labels.shape == (4, 2 if dataset == "imagenet" else 10) and labels.dtype == torch.float32
        assert torch.allclose(labels.sum(1), torch.ones(4))


def test_the_hf_contenders_read_the_same_images(tmp_path):
    """The hf workload's DALI loader, DataLoader(ds.with_transform) and the DALI loader over
    ImageFolder serve the same val batches (the same work timed); the limit decodes every file."""
    import torch

    from dali_loaders.bench import contenders, data, hf

    pytest.importorskip("datasets")
    root = hf.make_hf(str(tmp_path), data.make_image_folder(str(tmp_path), 8, 8, classes=2))
    spec = {"dataset": "hf", "recipe": "default", "split": "val", "data": root, "batch_size": 4, "threads": 1}
    batches = {kind: next(iter(contenders.make_loader(dict(spec, kind=kind), 1 if kind == "torchvision" else 0)))
               for kind in ("dali", "torchvision", "folder")}
    images, labels = batches["dali"]
    assert images.shape == (4, 3, 224, 224) and labels.tolist() == [0, 0, 0, 0]
    for kind in ("torchvision", "folder"):
        assert torch.equal(batches[kind][1], labels)
        assert (batches[kind][0] - images).abs().max().item() < 0.02   # one level of 255, normalized
    assert sum(len(y) for _, y in contenders.make_loader(dict(spec, kind="limit"), 0)) == 8


@pytest.mark.subprocess
def test_each_swept_loader_is_timed_in_a_fresh_process_built_once(tmp_path, monkeypatch):
    """A sweep builds a loader several times in its process, and each build leaves memory in the
    allocators' pools; the loader then timed (and its peak RSS) is the only one its process builds."""
    from dali_loaders.bench import data, session

    root = data.make_mnist(str(tmp_path), 256, 64)
    workload = session.Workload("mnist", "train", root, batch_size=32, threads=1)
    plan = session.Schedule(rounds=1, sweep_batches=1, max_batches=1)   # threads 1: DALI 1, 1; workers 0, 1
    started, builds = [], {}
    real_get, real_ask = session.Workers.get, session.Worker.ask

    def get(pool, spec):
        worker = real_get(pool, spec)
        started.append((spec["kind"], worker))
        return worker

    def ask(worker, **command):
        if command["cmd"] == "build":
            builds[id(worker)] = builds.get(id(worker), 0) + 1
        return real_ask(worker, **command)

    monkeypatch.setattr(session.Workers, "get", get)
    monkeypatch.setattr(session.Worker, "ask", ask)

    class Bar:
        steps = 0

        def set_postfix_str(self, text, refresh=False):
            pass

        def update(self, n):
            Bar.steps += n

    result = session.time_workload(workload, plan, Bar())
    kinds = [kind for kind, _ in started]
    swept = ["dali"] + workload.worker_kinds
    assert sorted(kinds) == sorted(list(workload.kinds) + swept)   # each swept kind started twice
    for kind in swept:
        first, last = [worker for k, worker in started if k == kind]
        assert builds[id(first)] >= 2 and builds[id(last)] == 1
    assert Bar.steps == session.commands_per_workload(plan, workload)
    assert result["loaders"]["dali"]["peak_rss_mb"] > 0
