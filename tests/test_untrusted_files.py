"""Data the loaders did not make (issue 22): crafted files run nothing, decompression bombs
are refused before decoding, broken files are refused by name or skipped and listed, and a
fuzz corpus of broken and unusual files goes through both backends."""
import builtins
import gzip
import io
import json
import os
import pickle
import shutil
import subprocess
import sys
import tracemalloc
import warnings

import numpy as np
import pytest
import torch
from dataset_data import write_tar
from image_data import image_id, solid_colour, write_solid_folder
from PIL import Image
from subprocess_env import subprocess_env
from torchvision.transforms import v2

from dali_loaders import (
    ImageDecodeError,
    get_cifar_iter_dali,
    get_cifar_iter_torch,
    get_imagefolder_iter_dali,
    get_imagefolder_iter_torch,
    get_webdataset_iter_dali,
    get_webdataset_iter_torch,
)
from dali_loaders.testing.synthetic import write_cifar
from dali_loaders.testing.untrusted import bomb_images, broken_images, write_corpus

pytestmark = pytest.mark.filterwarnings("ignore:epoch .* left out:UserWarning")

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


@pytest.fixture(autouse=True)
def own_cache(own_home):
    """The screening cache (under ~/.cache) in this test's own folder."""


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


@pytest.mark.slow
@pytest.mark.subprocess
def test_fuzz_each_file_is_decoded_as_pil_does_or_refused_by_name(corpus, tmp_path):
    out = tmp_path / "results.json"
    env = subprocess_env(home=tmp_path / "home")
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


# -- 3. on_error="skip": the good images exactly once, the broken ones named --------------

SOLID = {"a": 9, "b": 8}   # image ids 0..16, each a flat colour that names it (image_data.solid_colour)
CORPUS_CLASS = "zz_corpus"
SMALL = v2.Compose([v2.Resize((24, 24)), v2.PILToTensor()])
BACKENDS = {"dali": get_imagefolder_iter_dali, "torch": get_imagefolder_iter_torch}


@pytest.fixture(scope="module")
def mixed_folder(tmp_path_factory, corpus):
    """Good solid-colour images in two classes, and the whole corpus as a third."""
    root = tmp_path_factory.mktemp("mixed")
    write_solid_folder(str(root), SOLID)
    os.makedirs(root / CORPUS_CLASS)
    for name, path in corpus.items():
        shutil.copy(path, root / CORPUS_CLASS / name)
    return str(root)


def epoch_ids(loader):
    """(solid image ids in the order served, number of corpus images served), with labels checked."""
    ids, others = [], 0
    for images, labels in loader:
        for image, label in zip(images, labels.tolist()):
            if label == 2:
                others += 1
                continue
            ids.append(image_id(image.float().mean(dim=(1, 2)).tolist()))
            assert label == (0 if ids[-1] < SOLID["a"] else 1)
    return ids, others


@pytest.mark.parametrize("backend", list(BACKENDS))
@pytest.mark.parametrize("train", [True, False])
def test_skip_serves_each_good_image_once_and_names_the_broken(mixed_folder, corpus, backend, train):
    refused = expected_refused(corpus)
    loader = BACKENDS[backend](mixed_folder, 5, train, 2 if backend == "dali" else 0, seed=7, transform=SMALL,
                               on_error="skip")
    assert set(loader.skipped) == {os.path.join(mixed_folder, CORPUS_CLASS, name) for name in refused}
    assert all(loader.skipped.values())
    kept_corpus = len(corpus) - len(refused)
    assert len(loader.dataset) == sum(SOLID.values()) + kept_corpus
    orders = []
    for epoch in range(2):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ids, others = epoch_ids(loader)
        said = [str(w.message) for w in caught if "left out" in str(w.message)]
        assert len(said) == 1 and said[0].startswith(f"epoch {epoch}: {len(refused)} ")
        assert sorted(ids) == list(range(sum(SOLID.values()))) and others == kept_corpus
        orders.append(ids)
    assert (orders[0] != orders[1]) == train


def test_both_backends_skip_the_same_files_and_serve_the_same_order(mixed_folder):
    dali, twin = (factory(mixed_folder, 4, True, 1, seed=3, transform=SMALL, on_error="skip")
                  for factory in BACKENDS.values())
    assert dali.skipped == twin.skipped and dali.dataset.files == twin.dataset.source.files
    assert epoch_ids(dali) == epoch_ids(twin)


def test_every_rank_skips_the_same_files_and_the_shards_stay_disjoint(mixed_folder):
    loaders = [get_imagefolder_iter_dali(mixed_folder, 3, True, 1, seed=2, rank=r, world_size=2, transform=SMALL,
                                         on_error="skip") for r in range(2)]
    assert loaders[0].skipped == loaders[1].skipped and len(loaders[0]) == len(loaders[1])
    served = [epoch_ids(loader)[0] for loader in loaders]
    assert not set(served[0]) & set(served[1])
    assert set(served[0]) | set(served[1]) == set(range(sum(SOLID.values())))


def test_resume_with_skipped_files_is_bit_identical(mixed_folder):
    recipe = v2.Compose([v2.RandomResizedCrop(24), v2.RandomHorizontalFlip(), v2.PILToTensor()])

    def loader():
        return get_imagefolder_iter_dali(mixed_folder, 4, True, 2, seed=11, transform=recipe, on_error="skip")

    whole = [(x.clone(), y.clone()) for x, y in loader()]
    first = loader()
    batches = iter(first)
    for _ in range(2):
        next(batches)
    state = first.state_dict()
    resumed = loader()
    resumed.load_state_dict(state)
    rest = list(resumed)
    assert len(rest) == len(whole) - 2
    for (x, y), (x_whole, y_whole) in zip(rest, whole[2:]):
        assert torch.equal(x, x_whole) and torch.equal(y, y_whole)


def test_raise_stays_the_default_and_names_the_first_broken_file(mixed_folder):
    """Broken data past a sound header is met by the decoder, as before; a bomb is refused at once."""
    with pytest.raises(ImageDecodeError, match="animated_gif_named.png.*a GIF.*on_error='skip'") as e:
        get_imagefolder_iter_dali(mixed_folder, 4, False, 1)
    assert e.value.path.endswith("animated_gif_named.png")   # the first refused in ImageFolder's order
    with pytest.raises(ValueError, match="on_error must be 'raise'.*or 'skip'"):
        get_imagefolder_iter_torch(mixed_folder, 4, False, 0, on_error="ignore")


# -- 4. decompression bombs and max_image_pixels ------------------------------------------

PEAK_RSS = """
import resource, sys
from dali_loaders import ImageDecodeError, get_imagefolder_iter_dali, get_imagefolder_iter_torch
backend, *runs = sys.argv[1:]
factory = {"dali": get_imagefolder_iter_dali, "torch": get_imagefolder_iter_torch}[backend]
for run in runs:
    root, on_error = run.split("|")
    try:
        served = sum(len(y) for _, y in factory(root, 4, True, 1 if backend == "dali" else 0, on_error=on_error))
        said = f"served {served}"
    except ImageDecodeError as e:
        said = f"refused {e}"
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, said)   # KiB on Linux
"""


def peak_rss(backend, runs, home):
    """[(peak RSS in MiB so far, what the epoch did)] after each (root, on_error) epoch of
    `runs`, one after the other in one fresh process (a peak only grows)."""
    env = subprocess_env(home=home)
    done = subprocess.run([sys.executable, "-c", PEAK_RSS, backend, *(f"{r}|{e}" for r, e in runs)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()[-len(runs):]
    return [(int(line.split(" ", 1)[0]) / 1024, line.split(" ", 1)[1]) for line in lines]


@pytest.mark.subprocess
@pytest.mark.parametrize("backend", list(BACKENDS))
def test_the_bomb_is_refused_undecoded_within_an_ordinary_epochs_memory(tmp_path, backend):
    """Decoded, the 20000 x 20000 bomb alone would take 1.2 GB as RGB."""
    plain, bombed = tmp_path / "plain", tmp_path / "bombed"
    write_solid_folder(str(plain), {"a": 8})
    shutil.copytree(plain, bombed)
    (bombed / "a" / "zz_bomb.png").write_bytes(bomb_images()["bomb_20000x20000.png"])
    (ordinary, said), (after_raise, refused), (after_skip, skipped) = peak_rss(
        backend, [(plain, "raise"), (bombed, "raise"), (bombed, "skip")], tmp_path / "home")
    assert said == "served 8" and skipped == "served 8"
    assert refused.startswith("refused") and "zz_bomb.png" in refused and "400000000 pixels" in refused
    assert after_skip < ordinary + 300, (ordinary, after_raise, after_skip)


@pytest.fixture
def big_images(tmp_path):
    """A folder of a 3000 x 2000 (6M pixels) and a 3000 x 3000 (9M pixels) PNG."""
    root = tmp_path / "big"
    os.makedirs(root / "a")
    for (w, h) in ((3000, 2000), (3000, 3000)):
        Image.new("RGB", (w, h), (40, 90, 200)).save(root / "a" / f"{w}x{h}.png")
    return str(root)


def served_sizes(factory, root, **kwargs):
    return sorted(tuple(x.shape[-2:]) for x, _ in factory(root, 1, False, 1 if factory is BACKENDS["dali"] else 0,
                                                            transform=v2.PILToTensor(), **kwargs))


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_max_image_pixels_is_honoured_the_same_by_both_backends(big_images, backend, monkeypatch):
    factory = BACKENDS[backend]
    with pytest.raises(ImageDecodeError, match=r"3000x2000.png.*6000000 pixels, above max_image_pixels=5000000"):
        factory(big_images, 1, False, 1, max_image_pixels=5_000_000)
    assert served_sizes(factory, big_images, max_image_pixels=7_000_000, on_error="skip") == [(2000, 3000)]
    # above PIL's own limit (twice MAX_IMAGE_PIXELS), chosen by the user: served, PIL's check lifted
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 4_000_000)
    assert served_sizes(factory, big_images, max_image_pixels=10_000_000) == [(2000, 3000), (3000, 3000)]
    assert served_sizes(factory, big_images, max_image_pixels=None) == [(2000, 3000), (3000, 3000)]
    assert Image.MAX_IMAGE_PIXELS == 4_000_000
    # the default, PIL's rule: 6M (above 4M) is served with a warning, 9M (above 8M) refused
    with pytest.warns(UserWarning, match="1 image.* more than 4000000 pixels"):
        loader = factory(big_images, 1, False, 1, on_error="skip")
    assert list(loader.skipped) == [os.path.join(big_images, "a", "3000x3000.png")]
    assert [tuple(x.shape[-2:]) for x, _ in loader] == [(224, 224)]


# -- 5. WebDataset: the same, for tar members ---------------------------------------------

WDS_KEYS = ("jpg", "jpeg", "png", "webp", "tiff")


@pytest.fixture(scope="module")
def mixed_shards(tmp_path_factory, corpus):
    """Two shards: solid-colour images 0..16 (class 0 or 1) and the corpus (class 2), interleaved."""
    folder = tmp_path_factory.mktemp("wds")
    solid = []
    for i in range(sum(SOLID.values())):
        image = io.BytesIO()
        Image.new("RGB", (40 + i, 30), solid_colour(i)).save(image, "PNG")
        solid.append((f"solid{i:03d}", "png", image.getvalue(), 0 if i < SOLID["a"] else 1))
    odd = [(name.split(".")[0], name.split(".", 1)[1], open(path, "rb").read(), 2) for name, path in corpus.items()]
    samples = [s for pair in zip(solid, odd) for s in pair] + solid[len(odd):] + odd[len(solid):]
    half = len(samples) // 2
    return [write_tar(folder / f"shard-{k}.tar", [m for stem, key, data, label in part for m in
                                                   ((f"{stem}.{key}", data), (f"{stem}.cls", str(label).encode()))])
            for k, part in enumerate((samples[:half], samples[half:]))]


@pytest.mark.parametrize("backend", ["dali", "torch"])
@pytest.mark.parametrize("train", [True, False])
def test_webdataset_skip_serves_each_good_sample_once_and_names_the_broken(mixed_shards, corpus, backend, train):
    factory = get_webdataset_iter_dali if backend == "dali" else get_webdataset_iter_torch
    loader = factory(mixed_shards, 5, 2 if backend == "dali" else 0, train=train, seed=5, transform=SMALL,
                     image_keys=WDS_KEYS, on_error="skip")
    refused = expected_refused(corpus)
    assert {name.rsplit(":", 1)[1] for name in loader.skipped} == refused
    assert all(name.rsplit(":", 1)[0] in mixed_shards for name in loader.skipped)
    for _ in range(2):
        ids, others = epoch_ids(loader)
        assert sorted(ids) == list(range(sum(SOLID.values()))) and others == len(corpus) - len(refused)


def test_webdataset_raise_names_the_first_refused_member(mixed_shards):
    with pytest.raises(ImageDecodeError, match=r"shard-0.tar:png16.png.*mode I;16"):
        get_webdataset_iter_dali(mixed_shards, 5, 1, train=False, image_keys=WDS_KEYS)


def test_a_webdataset_label_member_of_any_size_is_not_read_whole(tmp_path):
    image = io.BytesIO()
    Image.new("RGB", (8, 8)).save(image, "PNG")
    path = write_tar(tmp_path / "big_label.tar", [("a.png", image.getvalue()), ("a.cls", b"1" * 100_000)])
    with pytest.raises(ValueError, match="label 'a.cls' of shard .*big_label.tar.* 100000 bytes"):
        get_webdataset_iter_torch(path, 4, 0, train=False)


# -- 6. the other format readers: claims larger than the file ----------------------------


def idx_header(shape):
    return bytes([0, 0, 8, len(shape)]) + np.array(shape, dtype=">u4").tobytes()


@pytest.mark.parametrize("gzipped", [False, True])
def test_an_idx_header_claiming_huge_dimensions_is_refused_before_reading(tmp_path, gzipped):
    from dali_loaders.datasets.mnist import read_idx

    path = str(tmp_path / ("huge-idx3-ubyte" + (".gz" if gzipped else "")))
    data = idx_header((4_000_000_000, 28, 28)) + bytes(784 * 3)
    with (gzip.open if gzipped else open)(path, "wb") as f:
        f.write(data)
    with pytest.raises(ValueError, match=r"huge-idx3-ubyte.*holds 2352 bytes of data but its header promises "
                                         r"3136000000000"):
        read_idx(path, 3)


def test_a_gzip_idx_bomb_is_not_decompressed_past_its_header(tmp_path):
    """1 GB of zeros behind a header promising 3 images, its trailer forged to match: the
    reader stops one byte past the promise."""
    from dali_loaders.datasets.mnist import read_idx

    path = tmp_path / "bomb-idx3-ubyte.gz"
    with gzip.open(path, "wb", compresslevel=1) as f:
        f.write(idx_header((3, 28, 28)))
        zeros = bytes(1 << 24)
        for _ in range(64):
            f.write(zeros)
    data = bytearray(path.read_bytes())
    data[-4:] = (16 + 3 * 784).to_bytes(4, "little")
    path.write_bytes(bytes(data))
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match="bomb-idx3-ubyte.gz.*holds more bytes of data.*promises 2352"):
            read_idx(str(path), 3)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 10 << 20   # bytes: far below the 1 GB the file would decompress to


def test_a_compressed_mat_bomb_is_refused_before_it_is_inflated(tmp_path):
    from scipy.io import savemat

    from dali_loaders.sources.formats import read_mat

    path = str(tmp_path / "test_32x32.mat")
    savemat(path, {"X": np.zeros((32, 32, 3, 100_000), np.uint8), "y": np.zeros((100_000, 1))},
            do_compression=True)
    assert os.path.getsize(path) < 1 << 20
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=r"test_32x32.mat.*declares 308000000 bytes .*decompression bomb"):
            read_mat(path, ("X", "y"))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 10 << 20


def test_a_mat_header_claiming_huge_dimensions_is_refused(tmp_path):
    from scipy.io import savemat

    from dali_loaders.sources.formats import read_mat

    path = tmp_path / "setid.mat"
    savemat(str(path), {"trnid": np.arange(24, dtype=np.uint8).reshape(2, 3, 4)})
    data = path.read_bytes()
    path.write_bytes(data.replace(np.array([2, 3, 4], "<i4").tobytes(), np.array([50000] * 3, "<i4").tobytes()))
    with pytest.raises(ValueError, match="setid.mat.*declares 125000000000000 bytes"):
        read_mat(str(path), ["trnid"])


# -- 7. the screening cache ---------------------------------------------------------------


def test_screening_is_cached_per_file_and_redone_when_a_file_changes(tmp_path, monkeypatch):
    from dali_loaders.sources import screening

    paths = write_solid_folder(str(tmp_path / "data"), {"a": 5})
    root = str(tmp_path / "data")
    assert not get_imagefolder_iter_dali(root, 2, False, 1, on_error="skip").skipped

    def must_not_run(*args):
        raise AssertionError("read again although the cache holds it")

    with monkeypatch.context() as patched:
        patched.setattr(screening, "read_header", must_not_run)
        patched.setattr(screening, "decode_failure", must_not_run)
        assert len(get_imagefolder_iter_torch(root, 2, False, 0, on_error="skip").dataset) == 5
    with open(paths[3], "r+b") as f:   # same size, a later mtime: cut off in the middle, as by a crash
        f.seek(os.path.getsize(paths[3]) // 2)
        f.write(bytes(os.path.getsize(paths[3]) - f.tell()))
    os.utime(paths[3], ns=(os.stat(paths[3]).st_atime_ns, os.stat(paths[3]).st_mtime_ns + 10 ** 9))
    assert list(get_imagefolder_iter_dali(root, 2, False, 1, on_error="skip").skipped) == [paths[3]]
