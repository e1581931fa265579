"""Data the loaders did not make (issue 22): crafted files run nothing, decompression bombs
are refused before decoding, broken files are refused by name or skipped and listed, and a
fuzz corpus of broken and unusual files goes through both backends."""
import builtins
import json
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image
from torchvision.transforms import v2

from dali_loaders import get_cifar_iter_dali, get_cifar_iter_torch
from dali_loaders.testing.synthetic import write_cifar
from dali_loaders.testing.untrusted import bomb_images, broken_images, write_corpus

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


# -- 2. the fuzz corpus, one file at a time, both backends --------------------------------

POLICY_REFUSED = {"png16.png": "16-bit", "animated_gif_named.png": "GIF"}   # PIL decodes them; DALI differs
TESTS = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(TESTS)


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    """The screening cache (under ~/.cache) in this test's own folder."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus(str(tmp_path_factory.mktemp("corpus")))


def pil_decodes(path) -> bool:
    try:
        with Image.open(path) as image:
            image.convert("RGB")
        return True
    except Exception:  # the reference's own verdict, whatever PIL raises
        return False


def expected_refused(corpus) -> set:
    """The files the loaders must not serve: those PIL itself cannot decode (bombs included:
    PIL refuses them too), and the two whose decodes differ between the backends."""
    return {name for name, path in corpus.items() if name in POLICY_REFUSED or not pil_decodes(path)}


def test_the_corpus_is_what_it_claims(corpus):
    refused = expected_refused(corpus)
    assert set(broken_images(0)) | set(bomb_images()) | set(POLICY_REFUSED) == refused
    with pytest.raises(Image.DecompressionBombError):
        Image.open(corpus["bomb_20000x20000.png"])
    assert Image.open(corpus["png16.png"]).mode == "I;16" and Image.open(corpus["animated.webp"]).n_frames == 3
    assert {Image.open(corpus[n]).mode for n in ("palette_transparency.png", "grey_alpha.png", "cmyk.jpg")} == \
        {"P", "LA", "CMYK"}


def test_fuzz_each_file_is_decoded_as_pil_does_or_refused_by_name(corpus, tmp_path):
    out = tmp_path / "results.json"
    env = dict(os.environ, HOME=str(tmp_path / "home"), PYTHONPATH=os.pathsep.join([REPO, TESTS]))
    folder = os.path.dirname(next(iter(corpus.values())))
    done = subprocess.run([sys.executable, os.path.join(TESTS, "untrusted_worker.py"), folder, str(out)],
                          env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]   # no crash (a segfault's code is negative)
    results = json.loads(out.read_text())
    assert set(results) == set(corpus)
    refused = expected_refused(corpus)
    for name, by_backend in results.items():
        for backend, (kind, detail) in by_backend.items():
            if name in refused:
                assert kind == "refused" and name in detail, (name, backend, kind, detail)
            else:   # served: equal to PIL's decode (exactly, up to one grey level)
                assert kind == "decoded" and 0 <= detail <= 1, (name, backend, kind, detail)
    assert "max_image_pixels" in results["bomb_20000x20000.png"]["dali"][1]
    assert "400000000 pixels" in results["bomb_20000x20000.png"]["torch"][1]
