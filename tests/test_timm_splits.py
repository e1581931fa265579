"""Split augmentation as timm's train.py runs it (--aug-splits, for the Jensen-Shannon loss):
timm's AugMixDataset and create_loader(num_aug_splits=...), against timm's own create_loader
on the CPU. Each batch is the splits one after the other, each with the batch's labels, as
fast_collate lays them out; the clean split is the crop and flips alone, the others augmented
from the same crop; erasing with re_split spares the clean split."""
import numpy as np
import pytest
import torch
from PIL import Image
from photos import load, photo_paths
from scipy import stats

pytest.importorskip("timm")
import timm.data  # noqa: E402
from timm.data import AugMixDataset, FastCollateMixup, ImageDataset  # noqa: E402
from torchvision.datasets import ImageFolder  # noqa: E402

from dali_loaders.timm import create_loader  # noqa: E402
from timm_datasets import Wrapped  # noqa: E402

CPU = torch.device("cpu")
SIZE = (3, 48, 48)
BATCH, SPLITS = 4, 3
# as the prefetcher scales them (in Python's floats, then float32)
MEAN = torch.tensor([m * 255 for m in timm.data.IMAGENET_DEFAULT_MEAN]).view(1, 3, 1, 1)
STD = torch.tensor([s * 255 for s in timm.data.IMAGENET_DEFAULT_STD]).view(1, 3, 1, 1)
# the window of a square photograph is all of it, and nothing flips: one image per sample
FIXED_CROP = dict(scale=(1.0, 1.0), ratio=(1.0, 1.0), hflip=0.0)
P_MIN = 1e-3


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """The photographs squashed square, each twice, in 3 classes."""
    root = tmp_path_factory.mktemp("timm_splits")
    for k, path in enumerate(photo_paths() * 2):
        (root / f"class_{k % 3}").mkdir(exist_ok=True)
        load(path).resize((96, 96), Image.BILINEAR).save(root / f"class_{k % 3}" / f"{k:03d}.jpg", quality=95)
    return str(root)


def pair(folder, dataset_class=ImageDataset, **kwargs):
    """(ours, timm's) over AugMixDatasets of the same folder, each made after the same torch seed."""
    options = dict(is_training=True, num_aug_splits=SPLITS, device=CPU, **kwargs)
    torch.manual_seed(0)
    ours = create_loader(AugMixDataset(dataset_class(folder), num_splits=SPLITS), SIZE, BATCH, **options)
    torch.manual_seed(0)
    theirs = timm.data.create_loader(AugMixDataset(dataset_class(folder), num_splits=SPLITS), SIZE, BATCH,
                                     num_workers=0, **options)
    return ours, theirs


def clean_images(theirs):
    """timm's clean split of each sample (its dataset item, normalized as its prefetcher does), and labels."""
    items = [theirs.dataset[i] for i in range(len(theirs.dataset))]
    images = torch.stack([torch.as_tensor(splits[0]) for splits, _ in items]).float().sub_(MEAN).div_(STD)
    return images, torch.tensor([label for _, label in items])


def splits_of(x, y):
    """The batch's splits and their labels, checked to be laid out as fast_collate lays them out."""
    assert x.shape == (BATCH * SPLITS, *SIZE) and x.dtype == torch.float32
    assert y.dtype == torch.int64 and torch.equal(y, y[:BATCH].repeat(SPLITS))
    return x.view(SPLITS, BATCH, *SIZE), y[:BATCH]


def sample_of(image, label, reference, labels):
    matches = [i for i in range(len(reference)) if labels[i] == label and torch.equal(reference[i], image)]
    assert len(matches) == 1   # (each photograph is in the folder twice, under two labels)
    return matches[0]


def epochs(loader, n):
    batches = []
    for epoch in range(n):
        loader.sampler.set_epoch(epoch) if hasattr(loader.sampler, "set_epoch") else None   # as train.py
        batches += list(loader)
    return batches


@pytest.mark.parametrize("dataset_class", [ImageDataset, ImageFolder])
def test_the_splits_of_a_fixed_crop_without_augmentation_are_timms_clean_images(folder, dataset_class):
    ours, theirs = pair(folder, dataset_class, color_jitter=0.0, **FIXED_CROP)
    assert ours.loader.route == "dali" and len(ours) == len(theirs) > 1
    reference, labels = clean_images(theirs)
    seen = []
    for (x, y), (u, v) in zip(ours, theirs, strict=True):
        assert x.shape == u.shape and torch.equal(v, v[:BATCH].repeat(SPLITS))
        splits, batch_labels = splits_of(x, y)
        for k, label in enumerate(batch_labels):
            assert all(torch.equal(split[k], splits[0][k]) for split in splits)
            seen.append(sample_of(splits[0][k], label, reference, labels))
    assert len(seen) == len(set(seen)) == len(ours) * BATCH


def mean_change(batches):
    """Per augmented image: its mean absolute difference from the clean split of its sample."""
    changes = []
    for x, y in batches:
        splits, _ = splits_of(x, y)
        changes += (splits[1:] - splits[:1]).abs().mean((2, 3, 4)).flatten().tolist()
    return changes


def test_augmix_splits_keep_the_clean_image_and_augment_the_others_as_much_as_timms(folder):
    ours, theirs = pair(folder, auto_augment="augmix-m5-w3", **FIXED_CROP)
    reference, labels = clean_images(theirs)
    mine, timms = epochs(ours, 10), epochs(theirs, 10)
    for x, y in mine:
        splits, batch_labels = splits_of(x, y)
        for image, label in zip(splits[0], batch_labels):
            sample_of(image, label, reference, labels)
    changes, their_changes = mean_change(mine), mean_change(timms)
    print(f"mean change {np.mean(changes):.3f} (timm {np.mean(their_changes):.3f})")
    assert min(changes) >= 0 and np.mean(changes) > 0.05
    assert stats.ks_2samp(changes, their_changes).pvalue > P_MIN


def erased_by_split(batches):
    """Per split, per image: whether any pixel is erased (const mode writes 0.0 in every
    channel, which no normalized pixel of 0..255 is)."""
    hits = [[] for _ in range(SPLITS)]
    for x, y in batches:
        splits, _ = splits_of(x, y)
        for k, split in enumerate(splits):
            hits[k] += (split == 0).all(1).flatten(1).any(1).tolist()
    return hits


@pytest.mark.parametrize("re_split", [True, False])
def test_erasing_with_re_split_spares_the_clean_split_as_timms_prefetcher(folder, re_split):
    ours, theirs = pair(folder, color_jitter=0.0, re_prob=0.5, re_split=re_split, **FIXED_CROP)
    mine, timms = erased_by_split(epochs(ours, 6)), erased_by_split(epochs(theirs, 6))
    print(f"erased per split {[sum(h) for h in mine]} (timm {[sum(h) for h in timms]}) of {len(mine[0])}")
    erased = mine[1] + mine[2] + ([] if re_split else mine[0])
    assert stats.binomtest(sum(erased), len(erased), 0.5).pvalue > P_MIN
    if re_split:
        assert not any(mine[0]) and not any(timms[0])
    for k in range(SPLITS):
        table = [[sum(mine[k]), len(mine[k]) - sum(mine[k])], [sum(timms[k]), len(timms[k]) - sum(timms[k])]]
        assert stats.fisher_exact(table).pvalue > P_MIN


def test_without_the_prefetcher_the_splits_are_a_list_as_default_collate_makes(folder):
    ours, theirs = pair(folder, color_jitter=0.0, use_prefetcher=False, **FIXED_CROP)
    items = [theirs.dataset[i] for i in range(len(theirs.dataset))]
    reference, labels = torch.stack([splits[0] for splits, _ in items]), torch.tensor([y for _, y in items])
    seen = []
    for (x, y), (u, v) in zip(ours, theirs, strict=True):
        assert isinstance(x, list) and isinstance(u, list) and len(x) == len(u) == SPLITS
        assert all(a.shape == b.shape == (BATCH, *SIZE) and a.dtype == b.dtype == torch.float32 for a, b in zip(x, u))
        assert y.shape == v.shape == (BATCH,)
        for k, label in enumerate(y):
            near = [i for i in range(len(reference)) if labels[i] == label
                    and all(float((split[k] - reference[i]).abs().max()) <= 1e-5 for split in x)]
            assert len(near) == 1
            seen.append(near[0])
    assert len(set(seen)) == len(seen) == len(ours) * BATCH


def test_splits_of_another_dataset_take_the_python_path_laid_out_as_timms(folder):
    torch.manual_seed(0)
    with pytest.warns(UserWarning, match="Python path"):
        ours = create_loader(AugMixDataset(Wrapped(folder), num_splits=SPLITS), SIZE, BATCH, is_training=True,
                             num_aug_splits=SPLITS, color_jitter=0.0, device=CPU, num_workers=0, **FIXED_CROP)
    assert ours.loader.route.startswith("python")
    batches = list(ours)
    assert len(batches) == len(ours) > 1
    for x, y in batches:
        splits, _ = splits_of(x, y)
        assert all(torch.equal(split, splits[0]) for split in splits)


@pytest.mark.parametrize("wrap,options,named", [
    (False, dict(num_aug_splits=3), "needs the dataset wrapped in timm.data.AugMixDataset"),
    (True, dict(num_aug_splits=0), "AugMixDataset needs num_aug_splits > 0"),
    (True, dict(num_aug_splits=3, collate_fn=FastCollateMixup(mixup_alpha=1.0, num_classes=3)),
     "FastCollateMixup does not mix split batches"),
])
def test_splits_that_cannot_be_honoured_are_refused_by_name(folder, wrap, options, named):
    dataset = AugMixDataset(ImageDataset(folder), num_splits=3) if wrap else ImageDataset(folder)
    with pytest.raises(ValueError, match=named):
        create_loader(dataset, SIZE, BATCH, is_training=True, device=CPU, **options)


def test_mixing_split_batches_is_refused_by_both_loaders(folder):
    """A batch_transform mixes one batch of images; AugMixDataset's items are several."""
    from torchvision.transforms import v2

    from dali_loaders import DaliLoader, TorchLoader

    crop, augment, finish = timm.data.create_transform(SIZE[1:], is_training=True, separate=True)
    dataset = AugMixDataset(ImageDataset(folder, transform=(crop, augment, finish)), num_splits=SPLITS)
    for loader_class in (DaliLoader, TorchLoader):
        with pytest.raises(ValueError, match="several views"):
            loader_class(dataset, batch_size=BATCH, batch_transform=v2.MixUp(num_classes=3))


def test_an_aug_mix_dataset_gives_dataloaders_batches_from_both_loaders(folder):
    """DaliLoader over timm's AugMixDataset, as a training script of one's own would use it:
    ([clean, augmented, augmented], labels) as DataLoader's default_collate stacks the tuples."""
    from torchvision import transforms as v1

    from dali_loaders import DaliLoader, TorchLoader

    trio = (v1.Compose([v1.Resize(40), v1.CenterCrop(32)]), v1.RandomHorizontalFlip(1.0), v1.PILToTensor())
    dataset = AugMixDataset(ImageDataset(folder, transform=trio), num_splits=SPLITS)
    ours, twin = DaliLoader(dataset, batch_size=BATCH), TorchLoader(dataset, batch_size=BATCH)
    assert ours.route == "dali"
    batches = 0
    for (views, labels), (want, want_labels) in zip(ours, twin, strict=True):
        assert torch.equal(labels, want_labels) and isinstance(views, list) and len(views) == SPLITS
        for view, expected in zip(views, want, strict=True):
            assert view.shape == expected.shape == (len(labels), 3, 32, 32) and view.dtype == torch.uint8
            assert int((view.int() - expected.int()).abs().max()) <= 1
        assert torch.equal(views[1], views[0].flip(-1)) and torch.equal(views[2], views[1])
        batches += 1
    assert batches == len(twin) > 1
