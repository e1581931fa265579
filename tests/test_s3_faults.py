"""Faults of a real object store (SeaweedFS, its own server here, killed and started again):
a dead server is named, a resumed epoch serves every sample exactly once, a slow server
(a delaying loopback proxy) still serves every sample once, and no secret is said."""
import glob
import os
import threading
import warnings

import pytest
import torch
from image_data import image_id, write_solid_folder
from s3_server import SECRET_KEY
from torchvision.transforms import v2

from dali_loaders import get_imagefolder_iter_dali, get_webdataset_iter_dali
from dali_loaders.sources import s3_client, storage
from dali_loaders.sources.storage import StorageError
from dali_loaders.testing.object_store import GRPC_OFFSET

COUNTS = {"a": 14, "b": 13}
N = sum(COUNTS.values())
URL = "s3://faults/train"


def recipe(train=True):
    crop = v2.RandomResizedCrop(16, antialias=True) if train else v2.CenterCrop(16)
    return v2.Compose([crop, v2.ToImage(), v2.ToDtype(torch.float32, scale=True)])


def ids_of(images):
    return [image_id(rgb) for rgb in (images.cpu().mean(dim=(2, 3)) * 255).tolist()]


@pytest.fixture(scope="module")
def server(s3_server, tmp_path_factory):
    """The session's server, holding URL's images (the tests stop and start it again)."""
    folder = tmp_path_factory.mktemp("faults")
    write_solid_folder(str(folder / "images"), COUNTS)
    s3_server.upload_folder(str(folder / "images"), URL)
    yield s3_server
    if s3_server.process is None:
        s3_server.start()


@pytest.fixture(autouse=True)
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))


def make():
    return get_imagefolder_iter_dali(URL, 3, True, 1, seed=7, transform=recipe())


@pytest.fixture
def short_retries(monkeypatch):
    """A server that stays down is named after RETRY_WINDOW_S: 3 s here, not the library's 40 s."""
    monkeypatch.setattr(s3_client, "RETRY_WINDOW_S", 3)
    storage.forget_clients()
    yield
    monkeypatch.undo()
    storage.forget_clients()


def test_a_server_restarted_mid_epoch_costs_no_error_and_serves_every_image_once(server, monkeypatch):
    """The server stopped after the third batch and started again (the same data and ports;
    weed takes 15-25 s to come back) while the epoch goes on: the library's retries bridge
    the gap, and every image is served exactly once."""
    import obstore

    down, during = threading.Event(), []

    def noting(get):   # which GETs were sent while the server was down
        def sent(*args, **kwargs):
            during.append(down.is_set())
            return get(*args, **kwargs)
        return sent

    for name in ("get", "get_range_async"):   # a read ahead, and one sent again after a failure
        monkeypatch.setattr(obstore, name, noting(getattr(obstore, name)))
    loader = make()
    loader.set_epoch(1)
    ids, restarting = [], None

    def restart():
        server.start()
        down.clear()

    try:
        for k, (images, _) in enumerate(loader):
            ids += ids_of(images)
            if k == 2:
                down.set()
                server.stop()
                restarting = threading.Thread(target=restart)
                restarting.start()
    finally:
        if restarting is not None:
            restarting.join()
        if server.process is None:
            server.start()
    assert restarting is not None and any(during)   # some GETs met the server down
    assert sorted(ids) == list(range(N))            # every image exactly once, no error


def test_server_killed_mid_epoch_is_named_and_the_epoch_resumes_exactly_once(server, short_retries):
    loader = make()
    loader.set_epoch(2)
    served, state = [], loader.state_dict()
    try:
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            with pytest.raises(StorageError) as failed:
                for k, (images, _) in enumerate(loader):
                    served += ids_of(images)
                    state = loader.state_dict()
                    if k == 2:
                        server.stop()   # batches DALI already read may still come; then the error
    finally:
        if server.process is None:   # the same data, the same ports (the next tests need it, whatever happened)
            server.start()
    assert URL in str(failed.value) and "cannot reach" in str(failed.value)
    assert SECRET_KEY not in str(failed.value) + " ".join(str(w.message) for w in said)
    assert 9 <= len(served) < N

    resumed = make()
    resumed.load_state_dict(state)
    rest = [i for images, _ in resumed for i in ids_of(images)]
    assert sorted(served + rest) == list(range(N))   # every sample exactly once


@pytest.mark.parametrize("train", [True, False])
def test_a_slow_server_still_serves_every_sample_once(server, train):
    server.proxy.delay_s = 0.02   # before each piece a client sends: every request waits
    try:
        loader = get_imagefolder_iter_dali(URL, 4, train, 2, seed=1, transform=recipe(train))
        server.proxy.reset()
        ids = [i for images, _ in loader for i in ids_of(images)]
        assert sorted(ids) == list(range(N))
        assert ids == sorted(ids) or train
        assert server.proxy.counts()["requests"] >= N   # DALI's reads went through the slow proxy
    finally:
        server.proxy.delay_s = 0.0


def test_a_server_gone_before_a_webdataset_epoch_is_named(server, tmp_path, short_retries):
    from dataset_data import write_shards

    write_shards(str(tmp_path / "shards"), (6, 5))
    server.upload_folder(str(tmp_path / "shards"), "s3://faults/wds")
    loader = get_webdataset_iter_dali("s3://faults/wds/shard-{000..001}.tar", 4, 1, train=False,
                                      transform=recipe(False), cache_dir=str(tmp_path / "idx"))
    server.stop()
    try:
        with pytest.raises(Exception) as failed:
            list(loader)
    finally:
        server.start()
    assert "s3://faults/wds/shard-00" in str(failed.value)
    assert SECRET_KEY not in str(failed.value)


def test_a_server_that_never_answers_is_named_within_the_deadline_and_the_epoch_resumes(server, monkeypatch):
    from dali_loaders.loader.deadline import ENV
    from dali_loaders.sources.storage import BatchTimeout

    monkeypatch.setenv(ENV, "5")   # the bound in place of the default, to keep the test short
    loader = make()
    served, state = [], loader.state_dict()
    try:
        with pytest.raises(BatchTimeout) as failed:
            for k, (images, _) in enumerate(loader):
                served += ids_of(images)
                state = loader.state_dict()
                if k == 0:
                    server.proxy.stall = True   # connections accepted, requests swallowed, nothing sent back
    finally:
        server.proxy.stall = False
    said = str(failed.value)
    assert isinstance(failed.value, TimeoutError) and failed.value.url.startswith(URL + "/")
    assert failed.value.url in said and server.proxy.endpoint in said and "5 s" in said
    assert SECRET_KEY not in said
    assert 3 <= len(served) < N

    resumed = make()   # the store answers again: the rest of the epoch, every sample exactly once
    resumed.load_state_dict(state)
    rest = [i for images, _ in resumed for i in ids_of(images)]
    assert sorted(served + rest) == list(range(N))


@pytest.mark.parametrize("value", ["0", "-3", "soon"])
def test_a_wrong_read_timeout_setting_is_named(value, monkeypatch):
    from dali_loaders.loader.deadline import ENV, batch_deadline
    from dali_loaders.sources.files import FileSource

    monkeypatch.setenv(ENV, value)
    with pytest.raises(ValueError, match=ENV):
        batch_deadline(FileSource([URL + "/a/0.png"], [0], "x"))
    assert batch_deadline(FileSource(["/local/a/0.png"], [0], "x")) is None   # local files: no bound


def test_a_stopped_server_leaves_nothing_in_the_machines_tmp(server):
    """weed's logs go to the server's folder and its unix sockets, named by its ports, go with it."""
    def sockets():
        return [path for path in glob.glob("/tmp/seaweedfs-*.sock")
                if any(path.endswith(f"-{port}.sock") for port in (server.master + GRPC_OFFSET, server.s3))]

    assert sockets(), "weed made no sockets where this test looks: the test no longer sees them"
    server.stop()
    try:
        assert sockets() == []
        assert glob.glob(os.path.join(server.folder, "weed.*INFO*"))
    finally:
        server.start()
