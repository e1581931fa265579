"""The developers' micro-benchmarks (benchmarks/, in the repository, not in the wheel): run
from the repository's root as the docs say, each prints every row it promises."""
import os
import subprocess
import sys

import pytest
from s3_server import needs_s3_extra

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_they_are_not_in_the_package():
    import dali_loaders.bench

    package = os.path.dirname(dali_loaders.bench.__file__)
    for name in ("augment_kernels", "stages", "cifar_stages", "first_build", "screening", "gpu_probe",
                 "graph_sizes", "chain_on_cpu", "s3_client_cost", "augment_order", "mix_cost", "v2_steps",
                 "array_resized_crop"):
        assert not os.path.exists(os.path.join(package, name + ".py"))
        assert os.path.isfile(os.path.join(REPO, "benchmarks", name + ".py"))


def test_each_one_answers_help_from_the_repository_root():
    for name in ("augment_kernels", "stages", "cifar_stages", "first_build", "screening", "gpu_probe",
                 "graph_sizes", "chain_on_cpu", "s3_client_cost", "augment_order", "mix_cost", "v2_steps",
                 "array_resized_crop"):
        done = subprocess.run([sys.executable, "-m", f"benchmarks.{name}", "--help"], capture_output=True,
                              text=True, timeout=120, cwd=REPO)
        assert done.returncode == 0, (name, done.stderr[-2000:])
        assert f"python -m benchmarks.{name}" in done.stdout


def test_stages_table_builds_the_train_graph_stage_by_stage(tmp_path):
    from dali_loaders.bench import data

    root = data.make_image_folder(str(tmp_path), 16, 8, classes=2, short_sides=(64, 96), workers=1)
    done = subprocess.run([sys.executable, "-m", "benchmarks.stages", "--imagenet-dir", root,
                           "--threads", "1", "--rounds", "1", "--batches", "1"],
                          capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {line[:58].strip(): line[58:].split() for line in done.stdout.splitlines() if len(line) > 58}
    from benchmarks.stages import STAGES

    for stage in STAGES:
        assert float(rows["train: " + stage][0]) > 0, stage
    assert rows["train: " + STAGES[1]][1] == "100%"  # the decode-only row is the reference
    from benchmarks.stages import (
        STOCK,  # the same graphs with DALI's fn.resize in place of the plugin
        VAL,
        VAL_WHOLE,
    )

    for row in (VAL, VAL_WHOLE, VAL_WHOLE + STOCK):
        assert float(rows[row][0]) > 0, row
    assert float(rows["train: " + STAGES[4] + STOCK][0]) > 0
    for way in ("DALI fn.resize (CPU)", "PIL Image.resize (torchvision)", "torch interpolate, uint8",
                "external_source alone", "+ per-image crop and flip"):
        assert float(rows[way][0]) > 0, way


def test_cifar_stages_table_has_every_stage_and_the_contenders(tmp_path):
    from cifar_data import write_cifar

    from benchmarks.cifar_stages import STAGES

    root = write_cifar(str(tmp_path), "cifar10", 600, 10)
    done = subprocess.run([sys.executable, "-m", "benchmarks.cifar_stages", "--cifar-dir", root,
                           "--threads", "1", "--rounds", "1"], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "600 images" in done.stdout
    rows = {line[:58].strip(): line[58:].split() for line in done.stdout.splitlines() if len(line) > 58}
    for row in [s.strip() for s in STAGES] + ["the DALI loader (graph + DaliLoader's per-batch work)",
                                              "baseline DALI loader (CIFAR, original)",
                                              "torch v2 on whole uint8 batches, 1 torch thread(s)"]:
        assert float(rows[row][0].replace(",", "")) > 0, row


def test_graph_sizes_counts_the_heavy_recipes_gpu_graphs_without_conditionals():
    done = subprocess.run([sys.executable, "-m", "benchmarks.graph_sizes"], capture_output=True, text=True,
                          timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {cells[0]: [int(c) for c in cells[1:]] for cells in
            ([c.strip() for c in line.strip("|").split("|")] for line in done.stdout.splitlines()
             if line.startswith("| ") and not line.startswith("| recipe") and not line.startswith("| ---"))}
    assert rows["resnet50"][3] == 0 and 0 < rows["resnet50"][0] < 300, rows
    assert rows["resnet50"][1] + rows["resnet50"][2] == rows["resnet50"][0]
    # the chain's stages in few GPU operators (each costs a batch about the same whatever its
    # work): TrivialAugmentWide's chain, decoding and the rest of the recipe took 104 once, 60 now
    assert rows["resnet50"][2] <= 70, rows
    # timm's rows and warp maps from the draws in one operator of ours where the plugin is built (151 CPU
    # operators in DALI arithmetic, 193 before its shared level columns became constants)
    from dali_loaders.ops import plugin

    assert rows["timm-ra"][1] <= (45 if plugin.augment_available() else 155), rows
    assert rows["default"][0] < rows["resnet50"][0]
    # the chain's pixel stages in one operator of ours: resnet50's GPU operators 60 -> 16 (the
    # same counts where the chain plugin is not built)
    assert rows["resnet50"][5] <= (25 if plugin.chain_available() else 70), rows
    assert rows["default"][4:] == [rows["default"][0], rows["default"][2]], rows


def test_chain_on_cpu_times_the_chain_and_counts_its_operators():
    done = subprocess.run([sys.executable, "-m", "benchmarks.chain_on_cpu", "--batch", "4", "--size", "24",
                           "--rounds", "1", "--runs", "1", "--threads", "1"],
                          capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    words = done.stdout.split()
    assert float(words[words.index("ms") - 1]) > 0 and int(words[words.index("operators") - 1]) > 10, done.stdout


def test_gpu_probe_tail_times_nothing_with_an_operator_that_failed_its_check(tmp_path, monkeypatch, capsys):
    """`gpu_probe --tail`: the chain-tail operator is timed only after its pixel check passed,
    and then beside the chain in DALI's operators and the fused CPU steps."""
    monkeypatch.syspath_prepend(REPO)
    from benchmarks import gpu_probe

    from dali_loaders.loader import build
    from dali_loaders.ops import chain_tail
    from dali_loaders.testing import chain_tail_check

    made = []

    def loader(dataset, **kwargs):   # what each row asked for, instead of iterating it
        made.append((kwargs["device"], build.fused_steps(), chain_tail.asked()))
        return _Empty()

    monkeypatch.setattr(gpu_probe, "DaliLoader", loader)
    monkeypatch.setattr(gpu_probe, "torchvision_rows", lambda folder: made.append("torchvision"))
    from PIL import Image

    (tmp_path / "a").mkdir()
    Image.new("RGB", (8, 8)).save(tmp_path / "a" / "x.png")
    monkeypatch.setattr(chain_tail_check, "compare", lambda device: [("TrivialAugmentWide", "pil", 2, 0.01)])
    assert gpu_probe.tail_rows(str(tmp_path)) is False
    assert made == [] and "nothing timed" in capsys.readouterr().out

    monkeypatch.setattr(chain_tail_check, "compare", lambda device: [("TrivialAugmentWide", "pil", 0, 0.0)])
    assert gpu_probe.tail_rows(str(tmp_path)) is True
    heavy = [("gpu", "gpu", True), ("gpu", "gpu", False), ("gpu", "cpu", False)]
    assert made[:7] == heavy + heavy + ["torchvision"], made
    assert made[7:] == [("gpu", "gpu", True)] * 3, made   # the pieces with a chain, each in the operator
    assert not chain_tail.asked() and build.fused_steps() == "measured"   # both put back


def test_gpu_probe_decode_times_both_decodes_only_after_the_checks_pass(tmp_path, monkeypatch, capsys):
    """`gpu_probe --decode`: the "gpu-decode" graphs' check-gpu rows first (nothing timed if one
    fails), then each recipe with its steps on the CPU, its files decoded on the CPU and on the
    GPU, and torchvision; the placement put back after."""
    monkeypatch.syspath_prepend(REPO)
    from benchmarks import gpu_probe

    from dali_loaders.loader import build
    from dali_loaders.testing import check_gpu
    from dali_loaders.transforms import GPU_DECODE

    made, ran = [], []

    def loader(dataset, **kwargs):   # what each row asked for, instead of iterating it
        made.append((kwargs["device"], build.fused_steps(), build.steps_decode()))
        return _Empty()

    def run(against, checks):
        ran.append([check.variant for check in checks])
        return verdict[0]

    monkeypatch.setattr(gpu_probe, "DaliLoader", loader)
    monkeypatch.setattr(gpu_probe, "torchvision_rows", lambda folder: made.append("torchvision"))
    monkeypatch.setattr(check_gpu, "run", run)
    monkeypatch.delenv(build.STEPS_DECODE_ENV, raising=False)
    from PIL import Image

    (tmp_path / "a").mkdir()
    Image.new("RGB", (8, 8)).save(tmp_path / "a" / "x.png")
    verdict = [1]
    assert gpu_probe.decode_rows(str(tmp_path)) is False
    assert made == [] and "nothing timed" in capsys.readouterr().out
    assert len(ran[0]) >= 6 and set(ran[0]) == {GPU_DECODE}
    verdict = [0]
    assert gpu_probe.decode_rows(str(tmp_path)) is True
    assert made == [("gpu", "cpu", "cpu"), ("gpu", "cpu", "gpu")] * 3 + ["torchvision"], made
    assert build.fused_steps() == "measured" and build.steps_decode() == "cpu"   # both put back


def test_gpu_probe_cifar_rows_place_the_steps_of_pixels_as_named(tmp_path, monkeypatch):
    """`gpu_probe`'s CIFAR rows: the CPU loader, then device="gpu" with the steps of the pixels
    on the CPU (as placed) and on the GPU (forced), each made with that placement and no other;
    the placement put back after."""
    monkeypatch.syspath_prepend(REPO)
    from benchmarks import gpu_probe

    from dali_loaders.loader import build

    made, reported = [], []

    def loader(split, root, batch_size, threads, device, seed):
        made.append((device, build.decoded_steps()))
        return _Empty()

    monkeypatch.setattr(gpu_probe, "get_cifar_iter_dali", loader)
    monkeypatch.setattr(gpu_probe, "make_cifar", lambda *args: str(tmp_path))
    monkeypatch.setattr(gpu_probe, "report", lambda name, rates, **extra: reported.append(name))
    monkeypatch.setattr(gpu_probe.torch.cuda, "synchronize", lambda: None)
    monkeypatch.delenv(build.DECODED_STEPS_ENV, raising=False)
    gpu_probe.cifar_rows()
    assert made == [("cpu", "cpu"), ("gpu", "cpu"), ("gpu", "gpu")], made
    assert reported == ["ours CIFAR-10 train, cpu", "ours CIFAR-10 train, gpu, steps on the CPU",
                        "ours CIFAR-10 train, gpu, steps on the GPU"]
    assert build.DECODED_STEPS_ENV not in os.environ


def test_augment_order_times_both_orders_on_the_same_steps():
    """benchmarks/augment_order.py: the operator's costliest-first order beside every sample
    alike; the steps drawn as timm's rand-m9 (about a quarter of the samples without one)."""
    from dali_loaders.ops import plugin

    if not plugin.augment_available():
        pytest.skip("the augmentation plugin cannot be built here")
    from benchmarks import augment_order
    import numpy as np

    plan = augment_order.drawn_steps(np.random.default_rng(0), 8, 64)
    counts = [len(codes) for batch_codes, _ in plan for codes in batch_codes]
    identity = sum(codes.tolist() == [0] for batch_codes, _ in plan for codes in batch_codes)
    assert max(counts) == 2 and 0.15 < identity / len(counts) < 0.35
    done = subprocess.run([sys.executable, "-m", "benchmarks.augment_order", "--batch", "4", "--size", "32",
                           "--batches", "3", "--rounds", "1"], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {line[:24].strip(): line[24:].split() for line in done.stdout.splitlines()[1:]}
    assert set(rows) == {"costliest first", "alike (as before)"}, done.stdout
    assert all(float(row[0]) > 0 for row in rows.values()) and rows["alike (as before)"][-1] == "1.00x"


def test_blur_cost_times_both_blurs_and_their_baselines():
    """benchmarks/blur_cost.py: DALI's blur and the operator's, each beside its pipeline with a
    step that leaves the image as it is, and the blur alone as the difference."""
    from dali_loaders.ops import plugin

    if not plugin.augment_available():
        pytest.skip("the augmentation plugin cannot be built here")
    done = subprocess.run([sys.executable, "-m", "benchmarks.blur_cost", "--batch", "2", "--size", "40",
                           "--kernel", "5", "--runs", "1", "--rounds", "1"], capture_output=True, text=True,
                          timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    rows = {line[:34].strip(): float(line[34:]) for line in lines[1:5]}
    assert set(rows) == {"DALI fn.gaussian_blur", "DALI, 1 x 1 window", "augmentation operator",
                         "augmentation operator, Identity"}, done.stdout
    assert all(ms > 0 for ms in rows.values()) and lines[5].startswith("the blur alone: DALI "), done.stdout


def test_the_gpu_sessions_script_asks_only_for_options_that_exist():
    """benchmarks/on_gpu.sh runs on a lent GPU machine, where a renamed option would cost the
    call: each command it names answers --help here with every option it passes."""
    import re
    import shlex

    path = os.path.join(REPO, "benchmarks", "on_gpu.sh")
    assert subprocess.run(["bash", "-n", path]).returncode == 0
    text = open(path).read().replace("\\\n", " ")
    commands = [line.split("python3 -m", 1)[1].split("2>&1")[0] for line in text.splitlines()
                if "python3 -m" in line and not line.lstrip().startswith("#")]
    assert len(commands) == 4, commands
    for command in commands:
        words = shlex.split(command)
        subcommand = [words[1]] if len(words) > 1 and not words[1].startswith("-") else []
        done = subprocess.run([sys.executable, "-m", words[0], *subcommand, "--help"], capture_output=True,
                              text=True, timeout=120, cwd=REPO)
        assert done.returncode == 0, (command, done.stderr[-2000:])
        for option in re.findall(r"(?<!\S)(--[a-z][a-z-]*)", command):
            assert option in done.stdout, (command, option)


class _Empty:
    def __iter__(self):
        return iter(())

    def close(self):
        pass


@pytest.mark.slow
@pytest.mark.subprocess
def test_s3_client_cost_splits_the_gets_from_the_path(tmp_path):
    """Its memory row runs the S3 loader without a GET; its S3 row sends one GET an image; each
    row and each way of sending GETs is timed."""
    needs_s3_extra()
    done = subprocess.run([sys.executable, "-m", "benchmarks.s3_client_cost", "--images", "128", "--rounds", "1",
                           "--threads", "1", "--cache-dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=600, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {cells[0]: cells[1:] for cells in
            ([c.strip() for c in line.strip("|").split("|")] for line in done.stdout.splitlines() if line.startswith("| "))}
    assert float(rows["S3 path, objects from memory"][-1]) == 0   # GETs an image
    assert float(rows["S3"][-1]) == 1
    assert float(rows["local"][-1]) == 0
    for name in ("local", "S3 path, objects from memory", "S3"):
        assert float(rows[name][0]) > 0 and float(rows[name][4]) > 0, name   # images/s, CPU ms an image
    for name in ("async, the feeder's event loop (shipped)", "sync get_range, 16 threads"):
        assert float(rows[name][0]) > 0 and float(rows[name][1]) > 0, name   # GETs/s, CPU us a GET
    assert "the GETs cost the loader" in done.stdout


def test_mixing_blend_times_both_ways_and_puts_the_fallback_back():
    from benchmarks.mixing_blend import SHAPES, time_blends

    from dali_loaders.ops import blend, plugin

    if not plugin.normalize_available():
        pytest.skip("the normalization plugin cannot be built here")
    usable = blend.usable
    rates = time_blends(rounds=1, repeats=1)
    assert list(rates) == list(SHAPES)
    assert all(ms["C"] > 0 and ms["numpy"] > 0 for ms in rates.values())
    assert blend.usable is usable


def test_mixing_blend_times_cutmix_in_place_and_into_a_copy():
    from benchmarks.mixing_blend import SHAPES, time_pastes

    rates = time_pastes(rounds=1, repeats=1)
    assert list(rates) == list(SHAPES)
    assert all(ms["in place"] > 0 and ms["copy"] > 0 for ms in rates.values())
