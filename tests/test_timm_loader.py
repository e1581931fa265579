"""dali_loaders.timm.create_loader against timm's own create_loader on the CPU (its
PrefetchLoader works there): the same signature, the same transform on the dataset, the same
batches where the recipe is deterministic, and batches of the same kind where it is random
(shapes, dtypes, ranges, labels, how often and how much RandomErasing erases)."""
import inspect

import numpy as np
import pytest
import torch
from photos import write_photo_folder
from scipy import stats

pytest.importorskip("timm")
import timm.data  # noqa: E402
from timm.data import FastCollateMixup, ImageDataset, Mixup  # noqa: E402
from torchvision.datasets import ImageFolder  # noqa: E402

from dali_loaders.timm import create_loader  # noqa: E402
from timm_datasets import Wrapped  # noqa: E402

CPU = torch.device("cpu")
SIZE = (3, 48, 48)
MEAN, STD = np.array(timm.data.IMAGENET_DEFAULT_MEAN), np.array(timm.data.IMAGENET_DEFAULT_STD)
LOW, HIGH = float((-MEAN / STD).min()), float(((1 - MEAN) / STD).max())   # what normalized 0..255 can reach
P_MIN = 1e-3


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("timm_folder"))
    write_photo_folder(root, copies=2, max_side=96, classes=3)
    return root


def pair(folder, dataset_class=ImageDataset, **kwargs):
    """(ours, timm's) over two datasets of the same folder, each made after the same torch seed."""
    ours_data, timm_data = dataset_class(folder), dataset_class(folder)
    torch.manual_seed(0)
    ours = create_loader(ours_data, SIZE, 4, device=CPU, **kwargs)
    torch.manual_seed(0)
    theirs = timm.data.create_loader(timm_data, SIZE, 4, device=CPU, num_workers=0, **kwargs)
    return ours, theirs


def test_the_signature_is_timms_parameter_for_parameter():
    ours = inspect.signature(create_loader).parameters
    theirs = inspect.signature(timm.data.create_loader).parameters
    assert list(ours) == list(theirs)
    assert [p.default for p in ours.values()] == [p.default for p in theirs.values()]


@pytest.mark.parametrize("dataset_class", [ImageDataset, ImageFolder])
@pytest.mark.parametrize("options", [dict(), dict(crop_pct=0.8, interpolation="bicubic"),
                                     dict(img_dtype=torch.float16), dict(crop_mode="squash"),
                                     dict(is_training=True, no_aug=True)],
                         ids=["default", "bicubic", "float16", "squash", "no_aug"])
def test_deterministic_recipes_give_timms_batches(folder, dataset_class, options):
    ours, theirs = pair(folder, dataset_class, **options)
    assert str(ours.dataset.transform) == str(theirs.dataset.transform)   # timm's transform, set as timm sets it
    assert len(ours) == len(theirs) > 1 and len(ours.dataset) == len(theirs.dataset)
    if options.get("is_training"):
        return same_samples_shuffled(ours, theirs)
    batches = 0
    for (x, y), (u, v) in zip(ours, theirs, strict=True):
        assert x.dtype == u.dtype == options.get("img_dtype", torch.float32) and x.shape == u.shape
        assert torch.equal(y, v) and y.dtype == v.dtype == torch.int64
        assert torch.equal(x, u), f"batch {batches}: worst {float((x.float() - u.float()).abs().max())}"
        batches += 1
    assert batches == len(theirs)


def same_samples_shuffled(ours, theirs):
    """A shuffled epoch of a deterministic recipe: each image is exactly timm's for one sample
    of its label (timm's dataset item, normalized as its prefetcher does), none twice."""
    mean = torch.tensor(MEAN * 255, dtype=torch.float32).view(1, 3, 1, 1)
    std = torch.tensor(STD * 255, dtype=torch.float32).view(1, 3, 1, 1)
    items = [theirs.dataset[i] for i in range(len(theirs.dataset))]
    reference = torch.stack([image for image, _ in items]).float().sub_(mean).div_(std)
    labels = torch.tensor([label for _, label in items])
    seen = []
    for x, y in ours:
        assert x.shape[1:] == SIZE and x.dtype == torch.float32
        for image, label in zip(x, y):
            matches = [i for i in range(len(reference)) if labels[i] == label and torch.equal(reference[i], image)]
            assert len(matches) == 1   # (each photograph is in the folder twice, under two labels)
            seen.append(matches[0])
    assert len(seen) == len(set(seen)) == len(ours) * 4   # drop_last, as timm's training loader


def test_without_the_prefetcher_the_transform_normalizes_as_timms(folder):
    ours, theirs = pair(folder, use_prefetcher=False)
    for (x, y), (u, v) in zip(ours, theirs, strict=True):
        assert torch.equal(y, v) and x.shape == u.shape and x.dtype == u.dtype == torch.float32
        assert (x - u).abs().max() <= 1e-5


def test_training_batches_are_of_timms_kind(folder):
    mixing = dict(mixup_alpha=0.8, cutmix_alpha=1.0, label_smoothing=0.1, num_classes=3)
    ours, theirs = pair(folder, is_training=True, auto_augment="rand-m9-mstd0.5", re_prob=0.25,
                        collate_fn=FastCollateMixup(**mixing))
    assert len(ours) == len(theirs) and ours.mixup_enabled and theirs.mixup_enabled
    for (x, y), (u, v) in zip(ours, theirs, strict=True):
        assert x.shape == u.shape == (4, *SIZE) and x.dtype == u.dtype == torch.float32
        assert y.shape == v.shape == (4, 3) and y.dtype == v.dtype
        assert torch.allclose(y.sum(1), torch.ones(4)) and float(y.min()) >= 0.1 / 3 - 1e-6
        assert LOW - 1e-4 <= float(x.min()) and float(x.max()) <= HIGH + 1e-4
    ours.mixup_enabled = False   # train.py does this when mixup ends
    assert not ours.mixup_enabled
    for _, y in ours:
        assert torch.allclose(y.max(1).values, torch.full((4,), 0.9 + 0.1 / 3))   # smoothed one-hot, unmixed


def erased(batches):
    """Per image: the fraction of its pixels erased (const mode writes 0.0 in every channel,
    which no normalized pixel of 0..255 is)."""
    return [float((image == 0).all(0).float().mean()) for images, _ in batches for image in images]


def epochs(loader, n):
    out = []
    for epoch in range(n):
        if hasattr(loader.sampler, "set_epoch"):   # as train.py
            loader.sampler.set_epoch(epoch)
        out += list(loader)
    return out


def test_random_erasing_erases_as_often_and_as_much_as_timms_prefetcher(folder):
    ours, theirs = pair(folder, is_training=True, re_prob=0.5, hflip=0.0, color_jitter=0.0, scale=(1.0, 1.0),
                        ratio=(1.0, 1.0))
    mine, timms = erased(epochs(ours, 12)), erased(epochs(theirs, 12))
    hits, their_hits = sum(a > 0 for a in mine), sum(a > 0 for a in timms)
    print(f"erased {hits}/{len(mine)} (timm {their_hits}/{len(timms)})")
    assert stats.binomtest(hits, len(mine), 0.5).pvalue > P_MIN
    assert stats.fisher_exact([[hits, len(mine) - hits], [their_hits, len(timms) - their_hits]]).pvalue > P_MIN
    areas, their_areas = [a for a in mine if a > 0], [a for a in timms if a > 0]
    assert all(0.02 - 1e-3 <= a <= 1 / 3 + 0.05 for a in areas)   # timm's area range, boxes rounded to pixels
    assert stats.ks_2samp(areas, their_areas).pvalue > P_MIN


def test_the_seed_comes_from_torchs_generator(folder):
    runs = []
    for seed in (5, 5, 6):
        torch.manual_seed(seed)
        loader = create_loader(ImageDataset(folder), SIZE, 4, is_training=True, device=CPU, re_prob=0.5)
        runs.append(torch.cat([x for x, _ in loader]))
    assert torch.equal(runs[0], runs[1]) and not torch.equal(runs[0], runs[2])


def test_a_resumed_epoch_is_mixed_and_erased_as_the_uninterrupted_one(folder):
    def made():
        torch.manual_seed(9)
        return create_loader(ImageDataset(folder), SIZE, 4, is_training=True, device=CPU, re_prob=0.5,
                             collate_fn=FastCollateMixup(mixup_alpha=1.0, cutmix_alpha=1.0, num_classes=3))

    whole = list(made())
    first = made()
    batches = iter(first)
    next(batches)
    state = first.state_dict()
    resumed = made()
    resumed.load_state_dict(state)
    rest = list(resumed)
    assert len(rest) == len(whole) - 1 > 0
    for (x, y), (u, v) in zip(rest, whole[1:]):
        assert torch.equal(x, u) and torch.equal(y, v)


@pytest.mark.parametrize("mixup_class", [FastCollateMixup, Mixup])
def test_an_odd_batch_to_timms_mixup_is_refused_as_timm_refuses_it(folder, mixup_class):
    mixup = mixup_class(mixup_alpha=1.0, num_classes=3)
    with pytest.raises(ValueError, match=f"timm.{mixup_class.__name__} needs an even batch_size"):
        create_loader(ImageDataset(folder), SIZE, 3, is_training=True, device=CPU, collate_fn=mixup)
    if mixup_class is FastCollateMixup:   # timm's own loader stops at the first batch
        loader = timm.data.create_loader(ImageDataset(folder), SIZE, 3, is_training=True, device=CPU,
                                         num_workers=0, collate_fn=mixup)
        with pytest.raises(AssertionError):
            next(iter(loader))
    # an odd last batch (not training: nothing dropped) is refused when it comes
    dataset = ImageDataset(folder)
    dataset.reader.samples = dataset.reader.samples[:-1]   # an odd number of images
    loader = create_loader(dataset, SIZE, 4, device=CPU, collate_fn=mixup_class(mixup_alpha=1.0, num_classes=3))
    assert len(loader.dataset) % 4 in (1, 3)
    with pytest.raises(ValueError, match="needs batches of an even size"):
        list(loader)


@pytest.mark.parametrize("options,named", [
    (dict(input_size_choices=[32, 48]), "input_size_choices"),
    (dict(num_aug_repeats=3), "num_aug_repeats > 0 needs distributed=True"),
    (dict(collate_fn=lambda batch: batch), "collate_fn .*<lambda> is not supported"),
    (dict(worker_seeding="none"), "worker_seeding"),
])
def test_what_cannot_be_honoured_is_refused_by_name(folder, options, named):
    with pytest.raises(ValueError, match=named):
        create_loader(ImageDataset(folder), SIZE, 4, device=CPU, **options)


def test_another_dataset_takes_the_python_path_with_timms_batches(folder):
    torch.manual_seed(0)
    with pytest.warns(UserWarning, match="Python path"):
        ours = create_loader(Wrapped(folder), SIZE, 4, device=CPU, num_workers=0)
    theirs = timm.data.create_loader(Wrapped(folder), SIZE, 4, device=CPU, num_workers=0)
    assert ours.loader.route.startswith("python")
    for (x, y), (u, v) in zip(ours, theirs, strict=True):
        assert torch.equal(y, v) and torch.equal(x, u)
