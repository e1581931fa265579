"""Repeated augmentation as timm's train.py runs it (--aug-repeats 3, DeiT's recipe):
create_loader(num_aug_repeats=3, distributed=True) samples through timm's RepeatAugSampler, so
each rank reads the very samples timm's loader reads, in its order, and each copy of a sample
is augmented apart. The processes are stood in for by torch.distributed's rank and world size,
which RepeatAugSampler reads, set per test (no process group: the loader's own shard then only
seeds its draws)."""
import pytest
import torch
from photos import write_photo_folder

pytest.importorskip("timm")
import timm.data  # noqa: E402
from timm.data import ImageDataset  # noqa: E402
from timm.data.distributed_sampler import RepeatAugSampler  # noqa: E402

from dali_loaders.timm import create_loader  # noqa: E402

CPU = torch.device("cpu")
SIZE = (3, 32, 32)
BATCH, REPEATS = 4, 3


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("timm_repeats"))
    write_photo_folder(root, copies=3, max_side=64, classes=3)
    return root


def as_rank(monkeypatch, rank, world_size):
    monkeypatch.setattr(torch.distributed, "get_world_size", lambda *args, **kwargs: world_size)
    monkeypatch.setattr(torch.distributed, "get_rank", lambda *args, **kwargs: rank)


def epochs(loader, n):
    """n epochs as timm's train.py runs them (set_epoch on the sampler when distributed)."""
    out = []
    for epoch in range(n):
        loader.sampler.set_epoch(epoch)
        out.append(list(loader))
    return out


@pytest.mark.parametrize("rank,world_size", [(0, 1), (0, 2), (1, 2)])
def test_each_rank_reads_timms_repeated_samples_in_timms_order(folder, monkeypatch, rank, world_size):
    as_rank(monkeypatch, rank, world_size)
    options = dict(is_training=True, no_aug=True, num_aug_repeats=REPEATS, distributed=True, device=CPU)
    ours = create_loader(ImageDataset(folder), SIZE, BATCH, **options)
    theirs = timm.data.create_loader(ImageDataset(folder), SIZE, BATCH, num_workers=0, **options)
    assert isinstance(ours.sampler, RepeatAugSampler) and ours.loader.route == "dali"
    assert len(ours) == len(theirs) > 1
    for epoch, (mine, timms) in enumerate(zip(epochs(ours, 2), epochs(theirs, 2))):
        assert len(mine) == len(timms) == len(ours)
        for k, ((x, y), (u, v)) in enumerate(zip(mine, timms)):
            assert torch.equal(y, v), (epoch, k)
            assert torch.equal(x, u), (epoch, k, float((x - u).abs().max()))


def test_the_copies_of_a_sample_are_augmented_apart(folder, monkeypatch):
    """One process: each sample three times in a row (RepeatAugSampler's order), each copy
    with its own crop and flip."""
    as_rank(monkeypatch, 0, 1)
    torch.manual_seed(0)
    loader = create_loader(ImageDataset(folder), SIZE, REPEATS, is_training=True, num_aug_repeats=REPEATS,
                           distributed=True, color_jitter=0.0, device=CPU)
    indices = list(loader.sampler)
    assert indices[::REPEATS] == indices[1::REPEATS] == indices[2::REPEATS]
    copies = 0
    for x, y in loader:   # a batch of 3: the three copies of one sample
        assert len(set(y.tolist())) == 1
        assert not torch.equal(x[0], x[1]) and not torch.equal(x[1], x[2])
        copies += 1
    assert copies == len(indices) // REPEATS


def test_ranks_seeded_apart_as_train_py_seeds_them_read_every_sample_once(tmp_path, monkeypatch):
    """timm's train.py seeds torch with seed + rank before create_loader(distributed=True);
    timm's loader orders with DistributedSampler's seed 0, so the ranks' shards still
    partition the samples. Every image says its own index: over two ranks each sample comes
    once an epoch, with its label."""
    from dist_worker import labelled_indices
    from test_distributed import FOLDER_CODE, write_index_folder

    count, classes = 60, 10
    write_index_folder(str(tmp_path), count)
    mean = 255 * torch.tensor(timm.data.IMAGENET_DEFAULT_MEAN, dtype=torch.float64)
    std = 255 * torch.tensor(timm.data.IMAGENET_DEFAULT_STD, dtype=torch.float64)
    served = [[], []]
    for rank in range(2):
        for name, value in (("RANK", rank), ("WORLD_SIZE", 2), ("LOCAL_RANK", 0)):
            monkeypatch.setenv(name, str(value))
        torch.manual_seed(42 + rank)   # timm.utils.random_seed(42, rank)
        loader = create_loader(ImageDataset(str(tmp_path)), SIZE, 5, is_training=True, no_aug=True,
                               distributed=True, device=CPU)
        for epoch in range(2):
            loader.sampler.set_epoch(epoch)
            for images, labels in loader:
                served[epoch] += labelled_indices(images, labels, mean, std, FOLDER_CODE, count // classes)
    for seen in served:
        assert sorted(seen) == list(range(count)), "ranks lost or repeated samples"
        assert seen != sorted(seen)
    assert served[0] != served[1]
