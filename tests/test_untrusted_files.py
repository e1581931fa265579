"""Data the loaders did not make (issue 22): crafted files run nothing, decompression bombs
are refused before decoding, broken files are refused by name or skipped and listed, and a
fuzz corpus of broken and unusual files goes through both backends."""
import builtins
import os
import pickle
import subprocess

import numpy as np
import pytest
from torchvision.transforms import v2

from dali_loaders import get_cifar_iter_dali, get_cifar_iter_torch
from dali_loaders.testing.synthetic import write_cifar

# -- 1. pickles that would run code ------------------------------------------------------


class RunsOnLoad:
    """Unpickling this calls `function(*args)`: what a crafted data file does."""

    def __init__(self, function, *args):
        self.function, self.args = function, args

    def __reduce__(self):
        return self.function, self.args


def touch_command(path):
    return f"touch {path}"


# Each way a pickle can run something when loaded; each would create `marker`.
HOSTILE = {
    "os.system": lambda marker: RunsOnLoad(os.system, touch_command(marker)),
    "builtins.exec": lambda marker: RunsOnLoad(builtins.exec, f"open({str(marker)!r}, 'w').close()"),
    "subprocess.call": lambda marker: RunsOnLoad(subprocess.call, ["touch", str(marker)]),
    # hidden inside what looks like a CIFAR batch: the call sits in a list under "data"
    "inside the data": lambda marker: {"data": [RunsOnLoad(os.system, touch_command(marker))], "labels": [0]},
}


@pytest.mark.parametrize("how", list(HOSTILE))
@pytest.mark.parametrize("factory", [get_cifar_iter_dali, get_cifar_iter_torch])
def test_a_crafted_cifar_pickle_runs_nothing_and_is_named(tmp_path, how, factory):
    root = write_cifar(str(tmp_path / "data"), "cifar10", 20, 10)
    batch = tmp_path / "data" / "cifar-10-batches-py" / "data_batch_1"
    marker = tmp_path / "ran"
    with open(batch, "wb") as f:
        pickle.dump(HOSTILE[how](marker), f, protocol=2)
    with pytest.raises(ValueError, match="data_batch_1.*is not a CIFAR python pickle.*nothing in it was run"):
        factory("train", root, 4, 1)
    assert not marker.exists()


def test_real_cifar_pickles_still_load_from_either_numpy(tmp_path):
    """Batches pickled by numpy 1 name numpy.core.multiarray, by numpy 2 numpy._core; Python 3
    protocol-2 pickles hold bytes as _codecs.encode(text, 'latin1'). All are admitted."""
    root = write_cifar(str(tmp_path), "cifar10", 20, 10, seed=4)
    test_batch = tmp_path / "cifar-10-batches-py" / "test_batch"
    expected = pickle.load(open(test_batch, "rb"), encoding="latin1")
    data = test_batch.read_bytes()
    assert b"numpy._core.multiarray\n_reconstruct" in data and b"_codecs\nencode" in data
    test_batch.write_bytes(data.replace(b"numpy._core.multiarray\n", b"numpy.core.multiarray\n"))
    images, labels = next(iter(get_cifar_iter_torch("val", root, 10, 0, transform=v2.PILToTensor())))
    assert labels.tolist() == expected["labels"]
    assert np.array_equal(images.numpy().reshape(10, 3072), expected["data"])


def test_a_pickle_that_encodes_with_another_codec_is_refused(tmp_path):
    root = write_cifar(str(tmp_path), "cifar10", 20, 10)
    batch = tmp_path / "cifar-10-batches-py" / "test_batch"
    batch.write_bytes(batch.read_bytes().replace(b"X\x06\x00\x00\x00latin1", b"X\x06\x00\x00\x00rot_13", 1))
    with pytest.raises(ValueError, match="test_batch.*not a CIFAR python pickle"):
        get_cifar_iter_dali("val", root, 4, 1)
