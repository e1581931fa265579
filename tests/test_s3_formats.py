"""The other layouts from s3:// URLs against the SeaweedFS server: ImageNet (class folders and a
flat val/ with a label file, local or itself a URL), labelled file lists, WebDataset shards."""
import os

import pytest
import torch
from dataset_data import write_shards
from image_data import image_id, write_solid_folder
from s3_server import Requests
from torchvision.transforms import v2

from dali_loaders import (
    get_files_iter_dali,
    get_imagenet_iter_dali,
    get_webdataset_iter_dali,
    get_webdataset_iter_torch,
)

SHARD_SIZES = (13, 11, 16, 9)


def recipe():
    return v2.Compose([v2.CenterCrop(16), v2.ToImage(), v2.ToDtype(torch.float32, scale=True)])


def one_pass(loader):
    ids, labels = [], []
    for images, y in loader:
        ids += [image_id(rgb) for rgb in (images.cpu().mean(dim=(2, 3)) * 255).tolist()]
        labels += y.tolist()
    return ids, labels


@pytest.fixture(scope="module")
def imagenet(s3_server, tmp_path_factory):
    """imagenet/train/<class>/..., imagenet/val/<class>/... and a flat val with a label file."""
    root = tmp_path_factory.mktemp("imagenet")
    write_solid_folder(str(root / "train"), {"n01": 4, "n02": 3, "n03": 5})
    val = write_solid_folder(str(root / "val"), {"n01": 3, "n02": 4, "n03": 2})
    flat = root / "flat" / "val"
    flat.mkdir(parents=True)
    lines = []
    for k, path in enumerate(val):   # flat/val/ILSVRC_<k>.JPEG, the same images, their labels in a file
        os.link(path, flat / f"ILSVRC_{k:03d}.JPEG")
        lines.append(f"ILSVRC_{k:03d}.JPEG {['n01', 'n02', 'n03'].index(os.path.basename(os.path.dirname(path)))}")
    (root / "flat" / "labels.txt").write_text("\n".join(lines) + "\n")
    os.makedirs(root / "flat" / "train")
    os.link(root / "train" / "n01" / "000.jpg", root / "flat" / "train" / "x.jpg")   # flat/train/<class>
    for name in ("n01", "n02", "n03"):
        os.makedirs(root / "flat" / "train" / name, exist_ok=True)
        os.link(root / "train" / name / "000.jpg", root / "flat" / "train" / name / "000.jpg")
    s3_server.upload_folder(str(root), "s3://imagenet-bucket/imagenet")
    return str(root)


@pytest.mark.parametrize("split", ["train", "val"])
def test_imagenet_from_a_url_equals_the_local_folder(imagenet, split):
    local = one_pass(get_imagenet_iter_dali(split, imagenet, 4, 1, transform=recipe(), seed=2))
    remote = one_pass(get_imagenet_iter_dali(split, "s3://imagenet-bucket/imagenet", 4, 1, transform=recipe(),
                                             seed=2))
    assert remote == local and len(remote[0]) == (12 if split == "train" else 9)


@pytest.mark.parametrize("label_file_on", ["disk", "s3"])
def test_flat_imagenet_val_with_a_label_file_local_or_a_url(imagenet, label_file_on):
    label_file = (os.path.join(imagenet, "flat", "labels.txt") if label_file_on == "disk"
                  else "s3://imagenet-bucket/imagenet/flat/labels.txt")
    remote_loader = get_imagenet_iter_dali("val", "s3://imagenet-bucket/imagenet/flat", 4, 1, transform=recipe(),
                                           label_file=label_file)
    remote = one_pass(remote_loader)
    local = one_pass(get_imagenet_iter_dali("val", imagenet, 4, 1, transform=recipe()))
    assert sorted(zip(*remote)) == sorted(zip(*local))     # the same images with the same labels
    assert remote_loader.dataset.classes == ["n01", "n02", "n03"]   # named by train/'s folders


def test_labelled_files_from_a_url(imagenet):
    url = "s3://imagenet-bucket/imagenet/val"
    local = one_pass(get_files_iter_dali(os.path.join(imagenet, "val"), 4, False, 1, transform=recipe(),
                                         label_fn=lambda p: len(os.path.basename(os.path.dirname(p)))))
    remote = one_pass(get_files_iter_dali(url, 4, False, 1, transform=recipe(),
                                          label_fn=lambda p: len(p.rsplit("/", 2)[1])))
    assert remote == local


# -- WebDataset --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shards(s3_server, tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("wds-s3"))
    write_shards(folder, SHARD_SIZES)
    s3_server.upload_folder(folder, "s3://wds-bucket/data")
    return folder


def test_webdataset_shards_from_a_url_equal_the_local_ones(shards, tmp_path):
    pattern = "s3://wds-bucket/data/shard-{000..003}.tar"
    local = one_pass(get_webdataset_iter_dali(shards, 4, 1, train=False, transform=recipe()))
    remote = one_pass(get_webdataset_iter_dali(pattern, 4, 1, train=False, transform=recipe(),
                                               cache_dir=str(tmp_path)))
    twin = one_pass(get_webdataset_iter_torch(pattern, 4, 0, train=False, transform=recipe(),
                                              cache_dir=str(tmp_path)))
    assert remote == local == twin
    assert remote[0] == list(range(sum(SHARD_SIZES)))
    assert len([f for f in os.listdir(tmp_path) if f.endswith(".idx")]) == len(SHARD_SIZES)   # cached locally


def test_webdataset_reads_members_by_ranged_gets_and_the_index_once(shards, tmp_path):
    pattern = "s3://wds-bucket/data/shard-*.tar"
    get_webdataset_iter_dali(pattern, 4, 1, train=False, transform=recipe(), cache_dir=str(tmp_path))
    with Requests() as again:
        loader = get_webdataset_iter_dali(pattern, 4, 1, train=False, transform=recipe(), cache_dir=str(tmp_path))
    assert again.count("GetObject") == 0   # indexes, labels and screening all from the local caches
    with Requests() as epoch:
        ids, _ = one_pass(loader)
    assert ids == list(range(sum(SHARD_SIZES)))
    gets = [r for name, r in epoch.calls if name == "GetObject"]
    assert gets and all(r and r.startswith("bytes=") for r in gets)
    assert len(gets) < sum(SHARD_SIZES) / 2   # neighbouring members share a GET


def test_a_changed_shard_is_indexed_again(s3_server, shards, tmp_path):
    url = "s3://wds-bucket/changing/shard-000.tar"
    s3_server.client().upload_file(os.path.join(shards, "shard-000.tar"), "wds-bucket", "changing/shard-000.tar")
    first = one_pass(get_webdataset_iter_dali(url, 4, 1, train=False, transform=recipe(), cache_dir=str(tmp_path)))
    s3_server.client().upload_file(os.path.join(shards, "shard-003.tar"), "wds-bucket", "changing/shard-000.tar")
    second = one_pass(get_webdataset_iter_dali(url, 4, 1, train=False, transform=recipe(), cache_dir=str(tmp_path)))
    assert first[0] == list(range(13))
    assert second[0] == list(range(40, 49))


def test_a_missing_shard_url_is_named(shards):
    with pytest.raises(FileNotFoundError, match="s3://wds-bucket/data/shard-004.tar"):
        get_webdataset_iter_dali("s3://wds-bucket/data/shard-{003..004}.tar", 4, 1, train=False)
