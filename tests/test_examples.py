"""examples/train.py trains ResNet-18 for one short epoch with each loader and prints its figures;
examples/contrastive.py pretrains it with SimCLR on two views of each image."""
import os
import re
import subprocess
import sys

import pytest
from cifar_data import write_cifar

pytestmark = pytest.mark.subprocess   # every test runs an example script

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
N_TRAIN, N_VAL = 128, 64


@pytest.fixture(scope="module")
def small_cifar(tmp_path_factory):
    return write_cifar(str(tmp_path_factory.mktemp("cifar")), n_train=N_TRAIN, n_test=N_VAL)


@pytest.mark.parametrize("loader_args, loader_class", [(["--use-dali", "--threads", "1"], "DaliLoader"),
                                                       (["--loader", "torch", "--threads", "0"], "TorchLoader")])
def test_train_example_runs_an_epoch(small_cifar, loader_args, loader_class):
    done = subprocess.run([sys.executable, os.path.join(REPO, "examples", "train.py"), "--root", small_cifar,
                           "--epochs", "1", "--batch-size", "64", *loader_args],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert f"({loader_class})" in lines[0]
    epoch = re.fullmatch(r"epoch 0: ([\d.]+) s, waiting for data ([\d.]+) s \(\d+%\), (\d+) images, "
                         r"train loss [\d.]+, train accuracy [\d.]+%, val accuracy [\d.]+%", lines[1])
    assert epoch, lines[1]
    assert float(epoch[2]) <= float(epoch[1]) and int(epoch[3]) == N_TRAIN
    assert re.fullmatch(rf"inference: {N_VAL} images in [\d.]+ s \(\d+ images/s\), accuracy [\d.]+%", lines[2]), \
        lines[2]


def test_train_example_takes_use_dali_with_an_underscore(small_cifar):
    done = subprocess.run([sys.executable, os.path.join(REPO, "examples", "train.py"), "--root", small_cifar,
                           "--epochs", "1", "--batch-size", "64", "--use_dali", "--threads", "1"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "loader=dali (DaliLoader)" in done.stdout.splitlines()[0]


def test_device_variant_table(small_cifar):
    """Seed 001's three-way comparison: a row per variant; without CUDA the GPU ones say so."""
    import torch

    done = subprocess.run([sys.executable, os.path.join(REPO, "examples", "train.py"), "--root", small_cifar,
                           "--epochs", "1", "--batch-size", "64", "--threads", "1", "--device-variant"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[1].split() == ["variant", "train", "s/epoch", "inference", "s", "data", "wait", "s/epoch"]
    rows = {line.split()[0]: line for line in lines[2:]}
    assert list(rows) == ["cpu", "cpu-decode", "gpu"]
    for variant, row in rows.items():
        if variant != "cpu" and not torch.cuda.is_available():
            assert "unavailable: needs a CUDA GPU" in row
            continue
        found = re.fullmatch(rf"{variant}\s+([\d.]+)\s+([\d.]+)\s+([\d.]+) \(\d+%\)", row)
        assert found and float(found[3]) <= float(found[1]), row


@pytest.mark.parametrize("loader, loader_class", [("dali", "DaliLoader"), ("torch", "TorchLoader")])
def test_contrastive_example_trains_on_two_views_of_each_image(small_cifar, loader, loader_class):
    done = subprocess.run([sys.executable, os.path.join(REPO, "examples", "contrastive.py"), "--root", small_cifar,
                           "--epochs", "1", "--batch-size", "64", "--loader", loader],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert f", {loader_class}, " in lines[0]
    assert "Python path" not in done.stderr   # the view maker runs in DALI
    epoch = re.fullmatch(r"epoch 0: ([\d.]+) s, waiting for data ([\d.]+) s \(\d+%\), (\d+) samples, "
                         r"NT-Xent loss ([\d.]+)", lines[1])
    assert epoch, lines[1]
    # drop_last: whole batches only; the loss of 2 x 64 views starts near log(127)
    assert int(epoch[3]) == N_TRAIN and 3.0 < float(epoch[4]) < 6.0
