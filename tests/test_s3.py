"""Roots in object storage (s3:// URLs), against a real SeaweedFS server (tests/s3_server.py):
the same images, order and labels as the local folder, listings paged, screening by ranged
reads and cached by ETag, and errors that name the URL and never a secret."""
import os
import shutil
import warnings

import pytest
import torch
from image_data import image_id, write_garbage, write_solid_folder
from s3_server import SECRET_KEY, Environment, Requests, WeedServer, free_ports, identities_file, needs_s3_extra
from torchvision.datasets import ImageFolder
from torchvision.transforms import v2

from dali_loaders import ImageDecodeError, get_imagefolder_iter_dali, get_imagefolder_iter_torch, verify_images
from dali_loaders.sources import storage

COUNTS = {"cat": 7, "dog": 6, "eel": 5}


def recipe():
    """A centre crop of a flat colour keeps it: each image says which it was."""
    return v2.Compose([v2.CenterCrop(16), v2.ToImage(), v2.ToDtype(torch.float32, scale=True)])


def ids_of(images: torch.Tensor) -> list:
    return [image_id(rgb) for rgb in (images.mean(dim=(2, 3)) * 255).tolist()]


def one_pass(loader):
    ids, labels = [], []
    for images, y in loader:
        ids += ids_of(images.cpu())
        labels += y.tolist()
    return ids, labels


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("solid") / "val"
    write_solid_folder(str(root), COUNTS)
    return str(root)


@pytest.fixture(scope="module")
def val_url(s3_server, folder):
    s3_server.upload_folder(folder, "s3://images/val")
    return "s3://images/val"


def test_listing_is_paged_and_matches_the_folder(s3_server, folder, val_url):
    listed = storage.list_tree(val_url, page_size=4)   # 18 objects: five pages
    local = sorted(os.path.relpath(os.path.join(h, n), folder) for h, _, ns in os.walk(folder) for n in ns)
    assert sorted(u[len(val_url) + 1:] for u in listed) == local
    assert all(size > 0 and etag for size, etag in listed.values())


def test_val_batches_equal_the_local_folders_and_imagefolders_labels(val_url, folder):
    local = one_pass(get_imagefolder_iter_dali(folder, 4, False, 1, transform=recipe()))
    remote_loader = get_imagefolder_iter_dali(val_url, 4, False, 1, transform=recipe())
    remote = one_pass(remote_loader)
    assert remote == local
    assert remote[0] == list(range(sum(COUNTS.values())))   # every image once, in ImageFolder's order
    reference = ImageFolder(folder)
    assert remote[1] == [label for _, label in reference.samples]
    assert all(f.startswith("s3://images/val/") for f in remote_loader.dataset.files)


@pytest.mark.parametrize("reader", ["pool", "dali"])   # GETs ahead of the pipeline, or DALI's S3 reader
def test_default_val_recipe_batches_are_identical_to_the_local_folders(val_url, folder, reader, monkeypatch):
    from dali_loaders.sources.url_reads import READER_ENV

    monkeypatch.setenv(READER_ENV, reader)
    local = list(get_imagefolder_iter_dali(folder, 8, False, 1))
    remote = list(get_imagefolder_iter_dali(val_url, 8, False, 1))
    assert len(local) == len(remote) == 3
    for (x, y), (u, v) in zip(local, remote):
        assert torch.equal(x, u) and torch.equal(y, v)


def test_the_twin_reads_the_url_with_the_same_labels(val_url, folder):
    twin = one_pass(get_imagefolder_iter_torch(val_url, 4, False, 2, transform=recipe()))   # forked workers
    assert twin == one_pass(get_imagefolder_iter_dali(folder, 4, False, 1, transform=recipe()))


def test_ranks_read_every_sample_exactly_once(val_url):
    seen = []
    for rank in range(3):
        seen += one_pass(get_imagefolder_iter_dali(val_url, 2, False, 1, transform=recipe(), rank=rank,
                                                   world_size=3))[0]
    assert sorted(seen) == list(range(sum(COUNTS.values())))


def test_train_epochs_are_permutations(val_url):
    loader = get_imagefolder_iter_dali(val_url, 4, True, 1, seed=3, transform=v2.Compose([
        v2.RandomResizedCrop(16, antialias=True), v2.ToImage(), v2.ToDtype(torch.float32, scale=True)]))
    first = one_pass(loader)[0]
    assert sorted(first) == list(range(sum(COUNTS.values()))) and first != sorted(first)


def test_train_epochs_read_ahead_equal_the_local_folders_epochs(val_url, folder):
    """Reads ahead cross epochs (and a set_epoch back): each epoch's batches are the local folder's."""
    train = v2.Compose([v2.RandomResizedCrop(16, antialias=True), v2.ToImage(), v2.ToDtype(torch.float32, scale=True)])
    local = get_imagefolder_iter_dali(folder, 4, True, 1, seed=5, transform=train)
    remote = get_imagefolder_iter_dali(val_url, 4, True, 1, seed=5, transform=train)
    for epoch in (0, 1, 0, 2):
        local.set_epoch(epoch)
        remote.set_epoch(epoch)
        ids = one_pass(remote)
        assert ids == one_pass(local) and sorted(ids[0]) == list(range(sum(COUNTS.values())))


def test_each_image_is_one_get_of_its_listed_size_and_the_next_epoch_is_read_before_it_starts(val_url, monkeypatch):
    """An image is one GET, ranged to one byte past the size the listing gave (the whole object
    in one call); near an epoch's end the next epoch's first batches are asked for, so that
    epoch starts on bytes already read."""
    from dali_loaders.sources import url_reads

    started, start = [], url_reads.BatchReads.start
    monkeypatch.setattr(url_reads.BatchReads, "start", lambda self, urls: started.append(urls) or start(self, urls))
    train = v2.Compose([v2.RandomResizedCrop(16, antialias=True), v2.ToImage(), v2.ToDtype(torch.float32, scale=True)])
    loader = get_imagefolder_iter_dali(val_url, 4, True, 1, seed=2, transform=train)   # random: each epoch anew
    files, n = loader.dataset.files, sum(COUNTS.values())
    with Requests() as first:
        assert sorted(one_pass(loader)[0]) == list(range(n))
    sizes = storage.list_tree(val_url)
    gets = [r for name, r in first.calls if name == "GetObject"]
    asked = [u for urls in started for u in urls]
    assert sorted(gets) == sorted(f"bytes=0-{sizes[u][0]}" for u in asked)   # one each, the size + 1 byte
    before = len(started)
    second = one_pass(loader)[0]
    assert sorted(second) == list(range(n))
    assert [files[i] for i in second[:4]] in started[:before]   # asked for during the first epoch
    assert [files[i] for i in second[:4]] not in started[before:]


def test_an_object_grown_since_the_listing_is_read_whole(s3_server, folder, tmp_path, monkeypatch):
    """The listing's size asks for one byte more: an answer that long means the object grew
    since, and it is read again whole (a large image in place of a small one, another colour)."""
    from image_data import solid_colour
    from PIL import Image

    monkeypatch.setenv("HOME", str(tmp_path))
    url = "s3://growing/val"
    s3_server.upload_folder(folder, url)
    loader = get_imagefolder_iter_dali(url, 4, False, 1, transform=recipe())
    listed = storage.getsize(f"{url}/cat/000.jpg")
    larger = tmp_path / "larger.jpg"
    Image.new("RGB", (1500, 1500), solid_colour(9)).save(larger, "JPEG", quality=100)
    assert os.path.getsize(larger) > 4 * listed
    s3_server.client().upload_file(str(larger), "growing", "val/cat/000.jpg")
    with Requests() as reads:
        ids = one_pass(loader)[0]
    assert ids == [9] + list(range(1, sum(COUNTS.values())))
    whole = reads.calls.count(("GetObject", None))   # (a val loader may also read the next epoch ahead)
    assert whole >= 1 and whole == reads.calls.count(("GetObject", f"bytes=0-{listed}"))


def test_reads_work_from_a_thread_running_an_event_loop_of_its_own(val_url):
    """A notebook runs its cells inside an event loop: the reads' own loop then runs on another thread."""
    import asyncio

    from dali_loaders.sources import url_reads

    urls = sorted(storage.list_tree(val_url))[:5]

    async def notebook_cell():
        reads = url_reads.BatchReads()
        return reads.collect(urls, reads.start(urls))

    got = asyncio.run(notebook_cell())
    assert [bytes(b) for b in got] == [bytes(url_reads.get_object(u)) for u in urls]


def test_several_listings_are_kept_and_the_oldest_dropped(s3_server, folder, val_url):
    """A train and a val root both keep their listing (the reads take the sizes from it): the
    newest KEPT_TREES are kept, and a path helper answers from them without a request."""
    kept = [f"s3://kept/{i}" for i in range(storage.KEPT_TREES + 1)]
    for url in kept:
        s3_server.upload_folder(folder, url)
    for url in kept:
        storage.list_tree(url)
    with Requests() as asked:
        assert all(storage.listed_size(f"{url}/cat/000.jpg") for url in kept[1:])
        assert sorted(u[len(kept[1]):] for u in storage.tree(kept[1])) == \
            sorted(u[len(kept[-1]):] for u in storage.tree(kept[-1]))
        assert storage.isfile(f"{kept[2]}/dog/000.jpg") and not storage.isfile(f"{kept[2]}/dog/999.jpg")
    assert asked.calls == []
    assert storage.listed_size(f"{kept[0]}/cat/000.jpg") is None   # the oldest, dropped: no request made


# -- screening: ranged header reads, cached by ETag --------------------------------------


def test_screening_reads_headers_by_ranged_gets_then_the_cache(s3_server, folder, tmp_path, monkeypatch):
    """Screening's reads are the library's own GETs (tests/test_s3_reads.py shows their Range
    header): the server counts one GET an image, none again, one for the object that changed."""
    monkeypatch.setenv("HOME", str(tmp_path))   # a fresh screening cache
    url = "s3://screened/val"
    s3_server.upload_folder(folder, url)
    n = sum(COUNTS.values())

    def gets_while(build):
        before = s3_server.requests("screened").get("GET", 0)
        build()
        return s3_server.requests("screened").get("GET", 0) - before

    from dali_loaders.sources import url_reads

    asked, get_object = [], url_reads.get_object
    monkeypatch.setattr(url_reads, "get_object", lambda u, *span: asked.append(span) or get_object(u, *span))
    build = lambda: get_imagefolder_iter_dali(url, 4, False, 1, transform=recipe())  # noqa: E731
    assert gets_while(build) == n
    assert asked == [(0, 1 << 16)] * n   # each image's first 64 KiB
    with Requests() as again:
        assert gets_while(build) == 0
    assert again.count("ListObjectsV2") >= 1   # the listing, then the cache

    replaced = os.path.join(folder, "cat", "000.jpg")
    s3_server.client().upload_file(os.path.join(folder, "dog", "000.jpg"), "screened", "val/cat/000.jpg")
    assert gets_while(build) == 1   # the one object whose ETag changed
    assert os.path.isfile(replaced)


def test_on_error_skip_and_verify_on_a_url(s3_server, folder, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    broken = tmp_path / "broken"
    shutil.copytree(folder, broken)
    write_garbage(str(broken / "dog" / "zzz.jpg"))
    url = "s3://broken/val"
    s3_server.upload_folder(str(broken), url)
    assert list(verify_images(url, progress=False)) == [f"{url}/dog/zzz.jpg"]
    loader = get_imagefolder_iter_dali(url, 4, False, 1, transform=recipe(), on_error="skip")
    assert list(loader.skipped) == [f"{url}/dog/zzz.jpg"]
    assert one_pass(loader)[0] == list(range(sum(COUNTS.values())))
    with pytest.raises(ImageDecodeError, match="s3://broken/val/dog/zzz.jpg"):   # met by the decoder
        one_pass(get_imagefolder_iter_dali(url, 4, False, 1, transform=recipe()))


def test_max_image_pixels_refuses_by_the_header(val_url):
    with pytest.raises(Exception, match=r"s3://images/val/.*max_image_pixels"):
        get_imagefolder_iter_dali(val_url, 4, False, 1, transform=recipe(), max_image_pixels=1000)


# -- errors -------------------------------------------------------------------------------


def no_secret(text: str) -> None:
    assert SECRET_KEY not in text


def test_a_missing_bucket_or_prefix_is_named(s3_server):
    with pytest.raises(FileNotFoundError, match="s3://no-such-bucket/val") as missing_bucket:
        get_imagefolder_iter_dali("s3://no-such-bucket/val", 4, False)
    s3_server.bucket("empty-bucket")
    with pytest.raises(FileNotFoundError, match="s3://empty-bucket/nothing") as missing_prefix:
        get_imagefolder_iter_dali("s3://empty-bucket/nothing", 4, False)
    for e in (missing_bucket, missing_prefix):
        no_secret(str(e.value))


def test_an_object_gone_since_the_listing_is_named(s3_server, folder, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    url = "s3://vanishing/val"
    s3_server.upload_folder(folder, url)
    loader = get_imagefolder_iter_dali(url, 4, False, 1, transform=recipe())
    s3_server.client().delete_object(Bucket="vanishing", Key="val/eel/002.jpg")
    with pytest.raises(FileNotFoundError, match="s3://vanishing/val/eel/002.jpg") as gone:
        one_pass(loader)
    no_secret(str(gone.value))


def test_a_closed_port_fails_fast_naming_the_url(val_url, monkeypatch):
    from dali_loaders.sources import s3_client

    monkeypatch.setattr(s3_client, "RETRY_WINDOW_S", 2)   # refused connections are retried: 40 s by default
    closed = free_ports(1)[0]
    with Environment({"AWS_ENDPOINT_URL": f"http://127.0.0.1:{closed}"}):
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            with pytest.raises(OSError, match=f"127.0.0.1:{closed}.*s3://images/val|s3://images/val") as e:
                get_imagefolder_iter_dali(val_url, 4, False, 1, transform=recipe())
    no_secret(str(e.value))
    no_secret(" ".join(str(w.message) for w in said))


@pytest.fixture(scope="module")
def guarded(tmp_path_factory, folder):
    """A second server that lets in only the test keys (the session's lets anyone in)."""
    needs_s3_extra()
    where = str(tmp_path_factory.mktemp("guarded"))
    server = WeedServer(where, ["-s3.config=" + identities_file(where)])
    server.start()
    try:
        server.upload_folder(folder, "s3://guarded/val")
        yield server
    finally:
        server.stop()


def test_wrong_credentials_are_named_without_the_secret(guarded):
    """Listing is boto3's (DALI keeps the session's endpoint): a wrong key is named, never said."""
    wrong_secret = SECRET_KEY + "-wrong"
    with Environment({"AWS_ENDPOINT_URL": guarded.endpoint, "AWS_SECRET_ACCESS_KEY": wrong_secret}):
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            with pytest.raises(OSError, match=r"access to s3://guarded/val was denied") as e:
                get_imagefolder_iter_dali("s3://guarded/val", 4, False, 1, transform=recipe())
        text = str(e.value) + repr(e.value) + " ".join(str(w.message) for w in said)
        assert wrong_secret not in text and SECRET_KEY not in text
    with Environment({"AWS_ENDPOINT_URL": guarded.endpoint}):   # the right keys: listed
        assert len(storage.list_tree("s3://guarded/val")) == sum(COUNTS.values())


def test_verify_command_on_a_url(val_url, capsys):
    from dali_loaders.cli import main

    assert main(["verify", val_url]) == 0
    assert "0 undecodable file(s) under s3://images/val" in capsys.readouterr().out


def test_a_trivialaugment_train_epoch_equals_the_local_folders_and_serves_each_image_once(val_url, folder):
    """The same seed: the URL's train epoch is the local folder's, augmentations and all (so the
    samples are the same ones, each once, as the local loader's tests show), with its labels."""
    def recipe():
        return v2.Compose([v2.RandomResizedCrop(16, antialias=True), v2.TrivialAugmentWide(), v2.ToImage(),
                           v2.ToDtype(torch.float32, scale=True)])

    remote = get_imagefolder_iter_dali(val_url, 4, True, 1, seed=11, transform=recipe(), device="cpu")
    local = get_imagefolder_iter_dali(folder, 4, True, 1, seed=11, transform=recipe(), device="cpu")
    remote_batches, local_batches = list(remote), list(local)
    assert len(remote_batches) == len(local_batches) == len(remote)
    for (images, labels), (local_images, local_labels) in zip(remote_batches, local_batches):
        assert torch.equal(images, local_images) and torch.equal(labels, local_labels)
    served = sorted(torch.cat([labels for _, labels in remote_batches]).tolist())
    assert served == sorted(ImageFolder(folder).targets)
    planned = sorted(i for batch in remote.batch_sampler for i in batch)
    assert planned == list(range(sum(COUNTS.values())))


def test_daliloader_and_its_twin_over_a_url_source_and_a_users_sampler(val_url, folder):
    """torchvision's ImageFolder cannot list a URL; ImageFiles is its counterpart that can.
    DaliLoader takes it (and FileSource over object URLs) as a dataset, with DataLoader's
    arguments: the local folder's batches, in a user's sampler's order, on both loaders."""
    from torch.utils.data import SubsetRandomSampler

    from dali_loaders import DaliLoader, TorchLoader
    from dali_loaders.sources import FileSource, ImageFiles

    reference = ImageFolder(folder)
    remote = ImageFiles(val_url)
    assert remote.classes == reference.classes
    assert [label for _, label in remote.samples] == [label for _, label in reference.samples]
    order = [16, 0, 5, 11, 3, 17, 8]
    sampler = SubsetRandomSampler(order, generator=torch.Generator().manual_seed(3))
    expected = list(sampler)   # the sampler's own draw, as DataLoader would take it
    sampler.generator.manual_seed(3)
    ids, labels = one_pass(DaliLoader(remote, batch_size=3, sampler=sampler, transform=recipe()))
    local_ids, local_labels = one_pass(get_imagefolder_iter_dali(folder, 18, False, 1, transform=recipe()))
    assert ids == [local_ids[i] for i in expected] and labels == [local_labels[i] for i in expected]
    twin = TorchLoader(ImageFiles(val_url), batch_size=5, transform=recipe())
    assert one_pass(twin) == (local_ids, local_labels)
    files = FileSource(list(remote.files), list(remote.labels), name="listed")
    assert one_pass(DaliLoader(files, batch_size=4, transform=recipe())) == (local_ids, local_labels)
