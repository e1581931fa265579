"""WebDataset tar shards on DALI: the index files, parity with the twin, the per-epoch order
(exact-once val, equal train steps per rank, by shard), resume mid-epoch, 1 and 3 ranks
under torchrun, and named errors for bad shards."""
import io
import json
import os
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest
import torch
from dataset_data import write_shards, write_tar
from resume_check import assert_resume_gives_the_rest
from subprocess_env import subprocess_env
from wds_worker import recipe, sample_ids

from dali_loaders import get_webdataset_iter_dali, get_webdataset_iter_torch
from dali_loaders.sources.image_files import ImageDecodeError
from dali_loaders.sources.webdataset import expand_shards, index_path, parse_index

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
HERE = os.path.dirname(os.path.abspath(__file__))
SIZES = (13, 11, 16)        # samples per shard; 40 in all, 3 divides neither
N = sum(SIZES)
TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]
LAUNCH_TIMEOUT = 300        # seconds: a hung rendezvous must fail the test, not the session


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("wds"))
    write_shards(folder, SIZES)
    return folder


def copy_of(folder, tmp_path):
    return shutil.copytree(folder, str(tmp_path / "shards"))


def one_pass(loader):
    """(sample ids, labels, batch sizes) of one epoch."""
    ids, labels, sizes = [], [], []
    for x, y in loader:
        ids += sample_ids(x)
        labels += y.tolist()
        sizes.append(len(y))
    return np.array(ids), np.array(labels), sizes


def shard_of(ids):
    return np.searchsorted(np.cumsum(SIZES), ids, side="right")


# 1. index files ---------------------------------------------------------------------------------


@pytest.mark.subprocess
def test_index_files_are_made_beside_the_shards_in_dalis_format(folder, tmp_path):
    shards = write_shards(str(tmp_path), SIZES)
    get_webdataset_iter_dali(str(tmp_path), 4, 1, train=False)
    for shard, size in zip(shards, SIZES):
        assert os.path.isfile(shard[:-4] + ".idx")
        samples = parse_index(shard[:-4] + ".idx", shard)
        assert len(samples) == size and [m[0] for m in samples[0]] == ["jpg", "json", "cls"]
    # DALI's own tool writes the same file
    wds2idx = os.path.join(os.path.dirname(sys.executable), "wds2idx")
    if os.path.exists(wds2idx):
        subprocess.run([wds2idx, shards[1], str(tmp_path / "dali.idx")], check=True, capture_output=True)
        assert open(tmp_path / "dali.idx").read() == open(shards[1][:-4] + ".idx").read()


@pytest.mark.subprocess
def test_index_command_and_cache_dir(folder, tmp_path):
    shards = copy_of(folder, tmp_path)
    cache = str(tmp_path / "cache")
    pattern = os.path.join(shards, "shard-{000..002}.tar")
    result = subprocess.run([sys.executable, "-m", "dali_loaders", "index", pattern, "--cache-dir", cache],
                            capture_output=True, text=True, check=True)
    assert result.stdout.count("samples of") == 3 and "13 samples" in result.stdout
    assert sorted(os.listdir(cache)) == sorted(os.path.basename(index_path(s, cache)) for s in expand_shards(shards))
    assert not any(name.endswith(".idx") for name in os.listdir(shards))
    loader = get_webdataset_iter_dali(shards, 8, 1, train=False, cache_dir=cache)
    assert len(loader.dataset) == N and not any(name.endswith(".idx") for name in os.listdir(shards))


def test_a_stale_index_is_made_again(folder, tmp_path):
    shards = copy_of(folder, tmp_path)
    get_webdataset_iter_dali(shards, 8, 1, train=False)
    write_shards(shards, (5, 11, 16))              # shard-000 rewritten, shorter
    os.utime(os.path.join(shards, "shard-000.tar"), (2e9, 2e9))
    loader = get_webdataset_iter_dali(shards, 8, 1, train=False, transform=recipe(False))
    assert len(loader.dataset) == 32
    assert one_pass(loader)[0].tolist() == list(range(32))


def test_shards_can_be_named_every_way(folder):
    by_folder = expand_shards(folder)
    assert len(by_folder) == 3
    assert expand_shards(os.path.join(folder, "shard-{000..002}.tar")) == by_folder
    assert expand_shards(os.path.join(folder, "shard-*.tar")) == by_folder
    assert expand_shards(by_folder) == by_folder


# 2. parity, order, exact-once, len ----------------------------------------------------------------


def test_val_matches_the_twin(folder):
    dali = get_webdataset_iter_dali(folder, 6, 1, train=False)
    twin = get_webdataset_iter_torch(folder, 6, 0, train=False)
    assert len(dali) == len(twin) == -(-N // 6) and len(dali.dataset) == N
    for (x, y), (u, v) in zip(dali, twin, strict=True):
        assert x.shape == u.shape and x.shape[1:] == (3, 224, 224)
        assert torch.equal(y, v)
        assert (x - u).abs().max().item() <= 1e-5


def test_val_reads_every_sample_once_in_shard_order_with_its_label(folder):
    ids, labels, sizes = one_pass(get_webdataset_iter_dali(folder, 6, 2, train=False, transform=recipe(False)))
    assert ids.tolist() == list(range(N))
    assert np.array_equal(labels, ids % 7)
    assert sizes == [6] * 6 + [4]


@pytest.mark.parametrize("drop_last", [False, True])
def test_train_epochs_are_seeded_permutations_grouped_by_shard(folder, drop_last):
    loader = get_webdataset_iter_dali(folder, 6, 2, train=True, seed=3, drop_last=drop_last, transform=recipe(True))
    twin = get_webdataset_iter_torch(folder, 6, 0, train=True, seed=3, drop_last=drop_last, transform=recipe(True))
    assert len(loader) == (N // 6 if drop_last else -(-N // 6))
    orders = []
    for _ in range(2):
        ids, labels, sizes = one_pass(loader)
        assert np.array_equal(labels, ids % 7)
        assert len(np.unique(ids)) == len(ids)
        if drop_last:
            assert len(ids) == N // 6 * 6 and set(sizes) == {6}
        else:
            assert sorted(ids) == list(range(N))
        runs = np.flatnonzero(np.diff(shard_of(ids))) + 1
        assert len(runs) <= 2                           # each shard read in one run
        orders.append(ids)
        assert np.array_equal(one_pass(twin)[0], ids)   # the twin serves the same order
    assert not np.array_equal(orders[0], orders[1])


def test_ranks_share_train_equally_and_val_exactly_once(folder):
    trains, vals = [], []
    for rank in range(3):
        train = get_webdataset_iter_dali(folder, 4, 1, train=True, seed=8, rank=rank, world_size=3,
                                         transform=recipe(True))
        val = get_webdataset_iter_dali(folder, 4, 1, train=False, rank=rank, world_size=3, transform=recipe(False))
        trains.append(one_pass(train)[0])
        vals.append(one_pass(val)[0])
        assert len(train) == -(-(N // 3) // 4)
    assert [len(t) for t in trains] == [N // 3] * 3
    assert len(np.unique(np.concatenate(trains))) == N // 3 * 3
    assert np.concatenate(vals).tolist() == list(range(N))


# 3. resume mid-epoch ---------------------------------------------------------------------------


@pytest.mark.parametrize("train", [True, False])
def test_resume_mid_epoch_gives_the_rest_of_that_epoch(folder, train):
    def make():
        return get_webdataset_iter_dali(folder, 4, 1, train=train, seed=11)

    loader, resumed = assert_resume_gives_the_rest(make)
    following = list(loader)
    assert all(torch.equal(y, v) for (_, y), (_, v) in zip(resumed, following, strict=True))


# 4. 1 and 3 ranks under torchrun --------------------------------------------------------------


def torchrun(folder, processes, tmp_path):
    out = tmp_path / f"out{processes}"
    out.mkdir()
    env = subprocess_env(tmp=out)
    cmd = [*TORCHRUN, "--standalone", f"--nproc_per_node={processes}", os.path.join(HERE, "wds_worker.py"),
           folder, str(out)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        log = proc.communicate(timeout=LAUNCH_TIMEOUT)[0]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, f"torchrun failed:\n{log[-5000:]}"
    return [json.load(open(out / f"rank{r}.json")) for r in range(processes)]


@pytest.mark.subprocess
@pytest.mark.parametrize("processes", [1, 3])
def test_torchrun_ranks_split_train_equally_and_read_val_once(folder, processes, tmp_path):
    reports = torchrun(copy_of(folder, tmp_path), processes, tmp_path)
    per_rank = N // processes
    assert [r["train"]["rank"] for r in reports] == list(range(processes))
    assert {r["train"]["world_size"] for r in reports} == {processes}
    assert {r["train"]["len"] for r in reports} == {-(-per_rank // 4)}     # equal steps
    for epoch in range(2):
        served = []
        for r in reports:
            batches = r["train"]["epochs"][epoch]
            assert len(batches) == r["train"]["len"]
            for ids, labels in batches:
                assert labels == [i % 7 for i in ids]
                served += ids
        assert len(served) == len(set(served)) == per_rank * processes
    val = [i for r in reports for ids, labels in r["val"]["epochs"][0] for i in ids]
    assert sorted(val) == val == list(range(N))


# 5. named errors --------------------------------------------------------------------------------


def test_a_missing_shard_is_named(folder, tmp_path):
    shards = copy_of(folder, tmp_path)
    with pytest.raises(FileNotFoundError, match="shard-007.tar"):
        get_webdataset_iter_dali([os.path.join(shards, "shard-000.tar"), os.path.join(shards, "shard-007.tar")],
                                 4, 1, train=False)
    with pytest.raises(FileNotFoundError, match="no tar shards"):
        get_webdataset_iter_dali(os.path.join(shards, "nothing-*.tar"), 4, 1, train=False)


def test_a_truncated_shard_is_named(folder, tmp_path):
    shards = copy_of(folder, tmp_path)
    path = os.path.join(shards, "shard-001.tar")
    data = open(path, "rb").read()
    open(path, "wb").write(data[:len(data) // 2 + 100])
    for factory in (get_webdataset_iter_dali, get_webdataset_iter_torch):
        with pytest.raises(ValueError, match="shard-001.tar.*truncated"):
            factory(shards, 4, 1, train=False)


def test_a_sample_without_an_image_is_named(tmp_path):
    path = write_tar(str(tmp_path / "bad.tar"), [("a.cls", b"1"), ("a.txt", b"no image")])
    with pytest.raises(ValueError, match="sample 'a' of shard .*bad.tar.* has no image"):
        get_webdataset_iter_dali(path, 4, 1, train=False)


def test_a_label_that_is_not_a_number_is_named(tmp_path):
    image = io.BytesIO()
    from PIL import Image
    Image.new("RGB", (8, 8)).save(image, "PNG")
    path = write_tar(str(tmp_path / "label.tar"), [("a.png", image.getvalue()), ("a.cls", b"cat")])
    with pytest.raises(ValueError, match="label 'a.cls' of shard .*label.tar.* not an integer"):
        get_webdataset_iter_dali(path, 4, 1, train=False)


def test_unlabeled_samples_get_minus_one(tmp_path):
    shards = write_shards(str(tmp_path), (5,), labels=False)
    labels = torch.cat([y for _, y in get_webdataset_iter_dali(shards, 4, 1, train=False)])
    assert labels.tolist() == [-1] * 5


def test_an_undecodable_image_is_named_with_its_shard(folder, tmp_path):
    shards = copy_of(folder, tmp_path)
    path = os.path.join(shards, "shard-001.tar")
    loader = get_webdataset_iter_dali(shards, 4, 1, train=False)
    key, offset, size, name = loader.dataset.members[13 + 5]     # shard-001's sixth sample
    with open(path, "r+b") as f:                                  # garbage in place, same size
        f.seek(offset)
        f.write(np.random.default_rng(0).integers(0, 256, size, dtype=np.uint8).tobytes())
    for factory, threads in ((get_webdataset_iter_dali, 1), (get_webdataset_iter_torch, 0)):
        with pytest.raises(ImageDecodeError, match=f"shard-001.tar:{name}") as failure:
            for _ in factory(shards, 4, threads, train=False):
                pass
        assert failure.value.path.endswith(f"shard-001.tar:{name}")
