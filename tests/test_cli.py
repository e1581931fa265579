"""The command line: demo, verify and index's refusals (bench has its own test)."""
import os
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "dali_loaders", *args], capture_output=True, text=True)


@pytest.mark.subprocess
def test_demo_prints_parity_and_speed(tmp_path):
    done = run_cli("demo", "--cache-dir", str(tmp_path), "--samples", "600")
    assert done.returncode == 0, done.stderr
    assert "val parity: labels identical" in done.stdout
    rows = [line.split() for line in done.stdout.splitlines()]
    rows = [row for row in rows if len(row) > 1 and row[0] in ("train", "val") and row[1].isdigit()]
    assert [(row[0], row[1]) for row in rows] == [("train", "600"), ("val", "120")]
    worst = float(done.stdout.rsplit("max |pixel difference| ", 1)[1].split()[0])
    assert worst <= 1e-5


@pytest.mark.subprocess
def test_verify_lists_the_bad_files_and_fails(tmp_path):
    os.makedirs(tmp_path / "cat")
    Image.fromarray(np.zeros((20, 30, 3), np.uint8)).save(tmp_path / "cat" / "good.jpg")
    (tmp_path / "cat" / "garbage.jpg").write_bytes(b"not an image")
    done = run_cli("verify", str(tmp_path))
    assert done.returncode == 1
    assert "garbage.jpg" in done.stdout and "good.jpg" not in done.stdout
    (tmp_path / "cat" / "garbage.jpg").unlink()
    assert run_cli("verify", str(tmp_path)).returncode == 0


def test_the_demo_times_both_loaders_warm(tmp_path, monkeypatch):
    """Every loader the demo times has run one full epoch before its timed one."""
    from dali_loaders import demo

    epochs = []   # (loader, label) for every pass over a loader, in order

    def count(loader, label):
        epochs.append((loader, label))
        return sum(len(labels) for _, labels in loader) or 1.0

    monkeypatch.setattr(demo, "_images_per_second", count)
    demo.run_demo(str(tmp_path), samples=60)
    timed = [(loader, label) for loader, label in epochs if not label.startswith("warm-up")]
    assert {label.split()[0] for _, label in timed} == {"DALI", "torchvision"} and len(timed) == 4
    for loader, label in timed:
        before = epochs[:epochs.index((loader, label))]
        assert any(other is loader for other, _ in before), f"{label} was timed cold"


def assert_refused(done, *words):
    """A one-line error on stderr naming `words`, exit code 2, no traceback."""
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    for word in words:
        assert word in lines[0], lines[0]


@pytest.mark.subprocess
def test_verify_refuses_a_missing_folder_in_one_line(tmp_path):
    assert_refused(run_cli("verify", str(tmp_path / "nowhere")), "nowhere", "does not exist")


@pytest.mark.subprocess
def test_index_refuses_a_missing_shard_in_one_line(tmp_path):
    assert_refused(run_cli("index", str(tmp_path / "nope.tar")), "nope.tar", "is missing")


@pytest.mark.subprocess
def test_verify_refuses_a_folder_without_images(tmp_path):
    os.makedirs(tmp_path / "cat")
    (tmp_path / "cat" / "notes.txt").write_text("no images here")
    assert_refused(run_cli("verify", str(tmp_path)), "no image files", str(tmp_path))


@pytest.mark.subprocess
def test_verify_of_a_cifar_folder_says_it_found_no_image_files(tmp_path):
    from cifar_data import write_cifar

    write_cifar(str(tmp_path), "cifar10", n_train=4, n_test=2)
    done = run_cli("verify", str(tmp_path))
    assert_refused(done, "no image files", "CIFAR")
    assert "undecodable" not in done.stdout


@pytest.mark.subprocess
def test_verify_refuses_a_file_for_a_folder(tmp_path):
    (tmp_path / "one.jpg").write_bytes(b"x")
    assert_refused(run_cli("verify", str(tmp_path / "one.jpg")), "one.jpg", "not a folder")
