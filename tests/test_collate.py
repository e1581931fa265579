"""collate_fn= where DALI makes the batches: the samples it gets (the dataset's items, as
DataLoader hands them), torchvision's classification reference's MixUp/CutMix collate against
DataLoader's, its draws reproduced by set_epoch and resume, and the same items in the twin.
torchvision's md5 checks are patched out: the CIFAR files are written here."""
import itertools
import os
import random

import numpy as np
import pytest
import torch
import torchvision.datasets as tvd
from cifar_data import index_images, write_cifar
from image_data import write_image_folder
from reference_presets import ClassificationPresetTrain, get_mixup_cutmix
from test_labels import ALPHABET, TO_FLOAT, ids_of, solid_dir, words_dir  # noqa: F401  (fixtures)
from torch.utils.data import DataLoader, default_collate
from torchvision import transforms as v1
from torchvision.transforms import v2

from dali_loaders import (
    DaliLoader,
    TorchLoader,
    get_files_iter_dali,
    get_files_iter_torch,
    get_imagefolder_iter_dali,
    get_imagefolder_iter_torch,
)
from dali_loaders.loader.collate import COLLATE_STREAM
from dali_loaders.seeds import derived_seed
from dali_loaders.transforms.python_fallback import seeded_globals

CLASSES = 10


@pytest.fixture(autouse=True)
def no_md5_checks(monkeypatch):
    """torchvision refuses CIFAR files whose md5 is not the published one: ours are not."""
    monkeypatch.setattr(tvd.CIFAR10, "_check_integrity", lambda self: True)
    monkeypatch.setattr(tvd.cifar, "check_integrity", lambda *args, **kwargs: True)


@pytest.fixture(scope="module")
def cifar_root(tmp_path_factory):
    """Image i holds i in every pixel's blue byte (index_images), label i % 10."""
    return write_cifar(str(tmp_path_factory.mktemp("collate")), "cifar10", 64, 21, images=index_images)


def to_float(use_v2: bool):
    """The reference preset's last steps: a float tensor in [0, 1]."""
    if use_v2:
        return v2.Compose([v2.PILToTensor(), v2.ToDtype(torch.float, scale=True), v2.ToPureTensor()])
    return v1.Compose([v1.PILToTensor(), v1.ConvertImageDtype(torch.float)])


def cifar(root, use_v2=True, train=True):
    return tvd.CIFAR10(root, train=train, transform=to_float(use_v2))


def reference_collate(use_v2: bool, num_classes: int = CLASSES):
    """train.py's collate_fn with --mixup-alpha 0.2 --cutmix-alpha 1.0, built as it builds it."""
    mixup_cutmix = get_mixup_cutmix(mixup_alpha=0.2, cutmix_alpha=1.0, num_classes=num_classes, use_v2=use_v2)

    def collate_fn(batch):
        return mixup_cutmix(*default_collate(batch))
    return collate_fn


def same_batches(a, b) -> bool:
    return len(a) == len(b) and all(torch.equal(x, u) and torch.equal(y, v) for (x, y), (u, v) in zip(a, b))


# -- the samples collate_fn gets ---------------------------------------------------------------


@pytest.mark.parametrize("use_v2", [False, True])
def test_collate_fn_gets_the_datasets_items_as_dataloader_hands_them(cifar_root, use_v2):
    dataset = cifar(cifar_root, use_v2, train=False)
    theirs = [item for batch in DataLoader(dataset, 8, collate_fn=list) for item in batch]
    dali, twin = DaliLoader(dataset, 8, collate_fn=list), TorchLoader(dataset, 8, collate_fn=list)
    assert dali.route == "dali" and dali.collate_fn is list
    rebuilt = TorchLoader(dataset, 8, collate_fn=twin.collate_fn)   # as frameworks rebuild a loader
    for loader in (dali, twin, rebuilt):
        ours = [item for batch in loader for item in batch]
        assert len(ours) == len(theirs) == 21
        for (image, label), (want, want_label) in zip(ours, theirs):
            assert type(label) is int and label == want_label
            assert image.shape == want.shape and (image - want).abs().max() <= 1e-5


def test_default_collate_and_none_are_skipped_and_a_collate_fn_of_ones_own_restacks(cifar_root):
    """channels_last batches are NHWC memory seen as NCHW: default_collate run on their samples
    would hand back a new batch; skipped, the loader's own batch comes out."""
    dataset = cifar(cifar_root, train=False)
    plain = list(DaliLoader(dataset, 8, memory_format=torch.channels_last))
    for collate_fn in (None, default_collate):
        loader = DaliLoader(dataset, 8, memory_format=torch.channels_last, collate_fn=collate_fn)
        batches = list(loader)
        assert same_batches(batches, plain) and loader.route == "dali"
        assert all(x.is_contiguous(memory_format=torch.channels_last) and not x.is_contiguous() for x, _ in batches)
    restacked = list(DaliLoader(dataset, 8, memory_format=torch.channels_last,
                                collate_fn=lambda samples: default_collate(samples)))
    assert same_batches(restacked, plain) and all(x.is_contiguous() for x, _ in restacked)   # DataLoader's layout


def test_batch_transform_runs_on_what_collate_fn_returns(cifar_root):
    dataset = cifar(cifar_root, train=False)
    loader = DaliLoader(dataset, 8, collate_fn=lambda samples: default_collate(samples[::-1]),
                        batch_transform=lambda images, labels: (images[:2], labels[:2] + 100))
    plain = DaliLoader(dataset, 8)
    for (x, y), (u, v) in zip(loader, plain, strict=True):
        assert torch.equal(x, u.flip(0)[:2]) and torch.equal(y, v.flip(0)[:2] + 100)


def test_collate_fn_runs_on_one_torch_thread_as_in_dataloaders_workers(cifar_root):
    dataset = cifar(cifar_root, train=False)

    def threads(samples):
        return torch.get_num_threads(), len(samples)

    before = torch.get_num_threads()
    theirs = {threads for threads, _ in DataLoader(dataset, 8, num_workers=1, collate_fn=threads)}
    ours = {threads for threads, _ in DaliLoader(dataset, 8, num_workers=2, collate_fn=threads)}
    assert ours == theirs == {1} and torch.get_num_threads() == before


# -- torchvision's classification reference: --mixup-alpha 0.2 --cutmix-alpha 1.0 -----------------


def seeded_as_the_loader(collate_fn, seed: int):
    """DataLoader's collate_fn (num_workers=0: called batch by batch, in order) with the draws
    the DALI loader gives batch k of epoch 0 on rank 0, so that the two can be compared exactly."""
    batches = itertools.count()

    def collate(samples):
        with seeded_globals(derived_seed(seed, 0, 0, next(batches), COLLATE_STREAM)):
            return collate_fn(samples)
    return collate


def mixing_of(mixed, soft, images, labels) -> str:
    """Checks that each mixed image is made of itself and the one before it in the batch (the
    batch rolled by one) and that its label weights are each one's share: CutMix's box shows
    the one before, whole; MixUp blends every pixel. Returns which of the two it was."""
    previous = images.roll(1, 0)
    one_hot = torch.nn.functional.one_hot(labels, CLASSES).float()
    own, pasted = (mixed == images).all(1), (mixed == previous).all(1)   # (B, H, W)
    if (own | pasted).all():
        lam = own.float().mean((1, 2))[:, None]
        assert torch.allclose(lam, lam[0].expand_as(lam)), "one box for the whole batch"
        kind = "CutMix"
    else:
        differs = torch.nonzero(labels != labels.roll(1, 0))[0, 0]   # a label that tells lambda
        lam = soft[differs, labels[differs]].expand(len(labels), 1)
        want = images * lam[:, :, None, None] + previous * (1 - lam[:, :, None, None])
        assert (mixed - want).abs().max() <= 1e-5
        kind = "MixUp"
    assert torch.allclose(soft, one_hot * lam + one_hot.roll(1, 0) * (1 - lam), atol=1e-5)
    return kind


@pytest.mark.parametrize("use_v2", [False, True])
def test_the_references_mixup_cutmix_collate_mixes_as_with_dataloader(cifar_root, use_v2):
    dataset = cifar(cifar_root, use_v2)
    collate_fn = reference_collate(use_v2)
    ours = DaliLoader(dataset, batch_size=4, collate_fn=collate_fn, seed=4)
    theirs = DataLoader(dataset, batch_size=4, collate_fn=seeded_as_the_loader(collate_fn, 4))
    kinds = []
    for (x, y), (u, v), (images, labels) in zip(ours, theirs, DaliLoader(dataset, batch_size=4), strict=True):
        one_hot = torch.nn.functional.one_hot(labels, CLASSES).float()
        for mixed, soft in ((x, y), (u, v)):
            assert soft.shape == (4, CLASSES) and torch.allclose(soft.sum(1), torch.ones(4))
            assert torch.allclose(soft.sum(0), one_hot.sum(0), atol=1e-5)   # mixing moves label mass, loses none
        kinds.append(mixing_of(x, y, images, labels))
        assert torch.allclose(y, v, atol=1e-6) and (x - u).abs().max() <= 1e-5
    assert ours.route == "dali" and len(kinds) == 16 and set(kinds) == {"MixUp", "CutMix"}


@pytest.fixture(scope="module")
def image_folder(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("reference_folder"))
    write_image_folder(root, {"ant": 6, "bee": 5, "cat": 5})
    return root


@pytest.mark.parametrize("use_v2", [False, True])
@pytest.mark.parametrize("Loader", [DaliLoader, TorchLoader, DataLoader])
def test_the_references_training_loop_runs_with_only_the_loader_changed(image_folder, use_v2, Loader):
    """train.py's data section and loop with --auto-augment ta_wide --random-erase 0.1
    --mixup-alpha 0.2 --cutmix-alpha 1.0 --label-smoothing 0.1 (and --use-v2), `Loader` its one change."""
    preset = ClassificationPresetTrain(crop_size=32, auto_augment_policy="ta_wide", random_erase_prob=0.1,
                                       use_v2=use_v2)
    dataset = tvd.ImageFolder(image_folder, preset)
    num_classes = len(dataset.classes)
    mixup_cutmix = get_mixup_cutmix(mixup_alpha=0.2, cutmix_alpha=1.0, num_classes=num_classes, use_v2=use_v2)

    def collate_fn(batch):
        return mixup_cutmix(*default_collate(batch))

    train_sampler = torch.utils.data.RandomSampler(dataset)
    data_loader = Loader(dataset, batch_size=4, sampler=train_sampler, num_workers=2, pin_memory=True,
                         collate_fn=collate_fn)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                                torch.nn.Linear(4, num_classes))
    criterion = torch.nn.CrossEntropyLoss(label_smoothing=0.1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    seen = 0
    for image, target in data_loader:
        assert image.shape == (len(target), 3, 32, 32) and target.shape == (len(image), num_classes)
        assert torch.allclose(target.sum(1), torch.ones(len(target)))
        loss = criterion(model(image), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        assert torch.isfinite(loss)
        seen += len(image)
    assert seen == 16
    if Loader is DaliLoader:
        assert data_loader.route == "dali"


# -- reproducible: seeded per (seed, epoch, rank, batch) -----------------------------------------


def test_collate_draws_follow_seed_and_epoch_resume_exactly_and_leave_the_globals_alone(cifar_root):
    dataset = cifar(cifar_root)

    def make(seed=7):
        return DaliLoader(dataset, 8, shuffle=True, seed=seed, collate_fn=reference_collate(True))

    loader = make()
    torch.manual_seed(99), random.seed(99), np.random.seed(99)
    first = list(loader)
    after = torch.rand(2), random.random(), np.random.rand()
    torch.manual_seed(99), random.seed(99), np.random.seed(99)
    assert (torch.equal(after[0], torch.rand(2)) and after[1] == random.random() and after[2] == np.random.rand()), \
        "collate_fn's draws moved the training script's generators"
    second = list(loader)
    again = make()
    assert same_batches(list(again), first)
    again.set_epoch(1)
    assert same_batches(list(again), second) and not same_batches(first, second)
    assert not same_batches(list(make(seed=8)), first)
    interrupted = make()
    epoch = iter(interrupted)
    next(epoch), next(epoch)
    state = interrupted.state_dict()
    resumed = make(seed=None)
    resumed.load_state_dict(state)
    assert same_batches(list(resumed), first[2:])


# -- labels beyond one integer: the items default_collate turns into the loader's batch ----------

FILE_LOADERS = [pytest.param(get_files_iter_dali, 1, id="dali"), pytest.param(get_files_iter_torch, 0, id="torch")]


@pytest.mark.parametrize("make, threads", FILE_LOADERS)
def test_sequence_labels_reach_collate_fn_as_label_and_length(words_dir, make, threads):  # noqa: F811
    kwargs = dict(label_fn=lambda p: os.path.splitext(os.path.basename(p))[0], alphabet=ALPHABET,
                  transform=TO_FLOAT, seed=2)
    plain, items = list(make(words_dir, 4, True, threads, **kwargs)), list(make(words_dir, 4, True, threads,
                                                                                 collate_fn=list, **kwargs))
    for batch, samples in zip(plain, items, strict=True):
        for image, label, length in samples:
            assert label.shape == (5,) and label.dtype == torch.int64 and type(length) is int
            assert label[length:].eq(0).all() and label[:length].ne(0).all()
        restacked = default_collate(samples)
        assert len(restacked) == 3 and all(torch.equal(a, b) for a, b in zip(restacked, batch))


def tens(label: int) -> list:
    return [10 * label, label]


@pytest.mark.parametrize("loader", ["dali factory", "torch factory", "dali over ImageFolder"])
def test_target_transform_is_applied_to_each_item_as_imagefolder_applies_it(solid_dir, loader):  # noqa: F811
    reference = tvd.ImageFolder(solid_dir, target_transform=tens)
    if loader == "dali over ImageFolder":
        made = DaliLoader(tvd.ImageFolder(solid_dir, transform=TO_FLOAT, target_transform=tens), 4, shuffle=True,
                          seed=1, collate_fn=list)
        assert made.route == "dali"
    else:
        factory = get_imagefolder_iter_dali if loader == "dali factory" else get_imagefolder_iter_torch
        made = factory(solid_dir, 4, True, 1 if loader == "dali factory" else 0, seed=1, transform=TO_FLOAT,
                       target_transform=tens, collate_fn=list)
    seen = []
    for samples in made:
        images = torch.stack([image for image, _ in samples])
        for i, (_, label) in zip(ids_of(images), samples):
            assert label == reference[i][1]
            seen.append(i)
    assert sorted(seen) == list(range(13)) and seen != list(range(13))


def test_output_dict_is_refused_with_a_collate_fn_on_both_loaders(cifar_root):
    for Loader in (DaliLoader, TorchLoader):
        with pytest.raises(ValueError, match="collate_fn.*output='dict'.*pass one of them"):
            Loader(cifar(cifar_root), 4, collate_fn=list, output="dict")


@pytest.mark.parametrize("Loader", [DaliLoader, TorchLoader])
def test_even_batches_padding_is_counted_whatever_collate_fn_returns(cifar_root, Loader):
    """Rank 1 of 3 reads 21 of the 64 samples and pads to 22: `padded` marks the last one,
    counted from the samples, not from what the collate_fn made of them."""
    dataset = cifar(cifar_root)
    kwargs = dict(seed=3, rank=1, world_size=3, even_batches=True)
    plain = Loader(dataset, 8, **kwargs)
    want = [(labels.tolist(), plain.padded.tolist()) for _, labels in plain]
    loader = Loader(dataset, 8, collate_fn=lambda samples: ([label for _, label in samples], "made"), **kwargs)
    got = [(labels, loader.padded.tolist()) for labels, _ in loader]
    assert got == want and sum(sum(mask) for _, mask in got) == 1
