"""batch_transform= (issue 10): MixUp and CutMix on whole batches, as torchvision mixes them,
the same in both backends, reproducible by (seed, epoch, rank, batch), and resumable."""
import pickle
import subprocess
import sys

import pytest
import torch
from cifar_data import index_images, write_cifar
from dist_worker import make_loader
from scipy import stats
from test_distributed import (
    LAUNCH_TIMEOUT,
    WORKER,
    assert_same_batches,
    expected_after,
    worker_env,
)
from torchvision import transforms as v1
from torchvision.transforms import v2

from dali_loaders import get_cifar_iter_dali, get_cifar_iter_torch
from dali_loaders.distributed import EpochSampler, Shard
from dali_loaders.transforms.mixing import BatchMixer, mixup

P_MIN = 1e-3
CLASSES = 10


def mixer(batch_transform, seed=0, rank=0):
    return BatchMixer(batch_transform, EpochSampler(100, shuffle=True, seed=seed, shard=Shard(rank, 4, 0)))


def indexed_batch(n=8):
    """Image i is filled with the value i + 1 (so 0 is never an image's), label i % CLASSES."""
    images = (torch.arange(n, dtype=torch.float32) + 1).view(n, 1, 1, 1).expand(n, 3, 12, 16).contiguous()
    return images, torch.arange(n) % CLASSES


def mixup_lambdas(alpha, draws=1500):
    mix = mixer(v2.MixUp(alpha=alpha, num_classes=CLASSES))
    images, labels = indexed_batch()
    return [float(mix(images, labels, 0, k)[1][1, 1]) for k in range(draws)]   # image 1's own label weight


@pytest.mark.parametrize("alpha", [0.2, 1.0])
def test_mixup_lambda_follows_beta_alpha_alpha(alpha):
    assert stats.kstest(mixup_lambdas(alpha), stats.beta(alpha, alpha).cdf).pvalue > P_MIN


def test_mixup_mixes_each_image_with_the_one_before_with_its_label():
    images, labels = indexed_batch()
    for k in range(20):
        mixed, soft = mixer(v2.MixUp(alpha=0.4, num_classes=CLASSES))(images, labels, 3, k)
        lam = float(soft[0, 0])
        previous = torch.roll(torch.arange(8), 1)
        want = lam * (torch.arange(8) + 1) + (1 - lam) * (previous + 1)
        assert torch.allclose(mixed[:, :, 0, 0], want.view(8, 1).expand(8, 3), atol=1e-5)
        assert soft.dtype == torch.float32 and soft.shape == (8, CLASSES)
        assert torch.allclose(soft.sum(1), torch.ones(8))
        assert torch.allclose(soft[torch.arange(8), labels], torch.full((8,), lam))
        assert torch.allclose(soft[torch.arange(8), labels[previous]], torch.full((8,), 1 - lam))


def cutmix_boxes(images, mixed):
    """Per image: the box where the previous image's value shows, and its area fraction."""
    previous = torch.roll(images, 1, 0)
    pasted = (mixed[:, 0] == previous[:, 0]) & (mixed[:, 0] != images[:, 0])
    return pasted, pasted.float().mean(dim=(1, 2))


def test_cutmix_boxes_match_their_lambda_and_labels_follow_the_pixels():
    images, labels = indexed_batch()
    lambdas = []
    for k in range(300):
        mixed, soft = mixer(v2.CutMix(alpha=1.0, num_classes=CLASSES))(images, labels, 0, k)
        pasted, area = cutmix_boxes(images, mixed)
        rows, cols = torch.nonzero(pasted[0], as_tuple=True)
        if len(rows):   # one axis-aligned box, the same for every image
            box = pasted[0, rows.min():rows.max() + 1, cols.min():cols.max() + 1]
            assert box.all() and int(pasted[0].sum()) == box.numel()
        assert (pasted == pasted[0]).all()
        own = soft[torch.arange(8), labels]
        assert torch.allclose(own, 1 - area, atol=1e-6)       # lambda = the unpasted fraction
        assert torch.allclose(soft.sum(1), torch.ones(8))
        lambdas.append(float(own[0]))
    # the box-adjusted lambda of torchvision's own CutMix, drawn the same way, has the same law
    torch.manual_seed(0)
    reference = []
    for _ in range(300):
        _, soft = v2.CutMix(alpha=1.0, num_classes=CLASSES)(images, labels)
        reference.append(float(soft[0, labels[0]]))
    assert stats.ks_2samp(lambdas, reference).pvalue > P_MIN


def test_random_choice_picks_with_its_probabilities():
    choice = v2.RandomChoice([v2.MixUp(alpha=1.0, num_classes=CLASSES), v2.CutMix(alpha=1.0, num_classes=CLASSES)],
                             p=[0.3, 0.7])
    mix = mixer(choice)
    images, labels = indexed_batch()
    cutmixed = 0
    for k in range(1000):
        mixed, _ = mix(images, labels, 0, k)
        cutmixed += bool(((mixed == images) | (mixed == torch.roll(images, 1, 0))).all())   # no blended pixel
    assert stats.binomtest(cutmixed, 1000, 0.7).pvalue > P_MIN


def test_draws_depend_on_seed_epoch_rank_and_batch_only():
    images, labels = indexed_batch()
    mixup = v2.MixUp(alpha=1.0, num_classes=CLASSES)
    draw = lambda seed, rank, epoch, batch: float(mixer(mixup, seed, rank)(images, labels, epoch, batch)[1][1, 1])  # noqa: E731
    assert draw(1, 0, 2, 3) == draw(1, 0, 2, 3)
    assert len({draw(1, 0, 2, 3), draw(2, 0, 2, 3), draw(1, 1, 2, 3), draw(1, 0, 3, 3), draw(1, 0, 2, 4)}) == 5


def test_a_batch_of_one_is_mixed_with_itself_as_torchvision_does():
    images, labels = indexed_batch(1)
    for transform in (v2.MixUp(alpha=1.0, num_classes=CLASSES), v2.CutMix(alpha=1.0, num_classes=CLASSES)):
        mixed, soft = mixer(transform)(images, labels, 0, 0)
        assert torch.equal(mixed, images) and torch.allclose(soft, torch.nn.functional.one_hot(labels, 10).float())


@pytest.mark.parametrize("transform,named", [
    (v2.MixUp(alpha=1.0), "num_classes"),
    (v1.RandomChoice([v2.MixUp(alpha=1.0, num_classes=10), v2.CutMix(alpha=1.0, num_classes=10)]),
     "RandomChoice \\(v1\\) is not supported: use torchvision.transforms.v2"),
])
def test_other_batch_transforms_are_refused_by_name(transform, named, tmp_path):
    root = write_cifar(str(tmp_path), "cifar10", 20, 10)
    for factory in (get_cifar_iter_dali, get_cifar_iter_torch):
        with pytest.raises(ValueError, match=named):
            factory("train", root, 4, 1, batch_transform=transform)


def test_labels_beyond_num_classes_are_refused_by_name():
    images, labels = indexed_batch()
    with pytest.raises(ValueError, match="num_classes=5"):
        mixer(v2.MixUp(alpha=1.0, num_classes=5))(images, labels, 0, 0)


# -- in the loaders ---------------------------------------------------------------------------

MIXING = v2.RandomChoice([v2.MixUp(alpha=0.2, num_classes=CLASSES), v2.CutMix(alpha=1.0, num_classes=CLASSES)])


@pytest.fixture(scope="module")
def indexed_cifar(tmp_path_factory):
    return write_cifar(str(tmp_path_factory.mktemp("mix")), "cifar10", 203, 37, images=index_images)


def test_both_backends_mix_the_same_batches_the_same_way_including_the_short_last(indexed_cifar):
    dali = get_cifar_iter_dali("val", indexed_cifar, 16, 2, seed=3, batch_transform=MIXING)
    twin = get_cifar_iter_torch("val", indexed_cifar, 16, 0, seed=3, batch_transform=MIXING)
    sizes = []
    for (x, y), (u, v) in zip(dali, twin, strict=True):
        assert torch.equal(y, v) and y.shape == (len(x), CLASSES) and y.dtype == torch.float32
        assert (x - u).abs().max() < 1e-5
        sizes.append(len(x))
    assert sizes[-1] == 37 % 16


def test_images_and_labels_stay_paired_in_a_shuffled_epoch(indexed_cifar):
    """Every image shows its own index (index_images: the blue byte, below 256) and, CutMixed,
    the previous image's in a box; each class's label weight is the share of the image its
    indices (label = index % 10) cover. MixUp's one value per image is checked in the unit tests."""
    loader = get_cifar_iter_dali("train", indexed_cifar, 16, 2, seed=5, batch_transform=MIXING,
                                 transform=v2.Compose([v2.ToImage(), v2.ToDtype(torch.float32, scale=False)]))
    cutmixed = 0
    for images, soft in loader:
        blue = images[:, 2]
        if not torch.equal(blue, blue.round()) or any(len(torch.unique(b)) > 2 for b in blue):
            continue   # a MixUp batch
        cutmixed += 1
        for image, weights in zip(blue, soft):
            shares = torch.zeros(CLASSES)
            for value in torch.unique(image):
                shares[int(value) % CLASSES] += float((image == value).float().mean())
            assert torch.allclose(weights, shares, atol=1e-6)
    assert cutmixed > 0


def test_cutmix_leaves_a_collate_fns_batch_as_it_returned_it(indexed_cifar):
    """The loader's own batch is pasted into in place; a collate_fn's result is the user's
    (it may hold it, as this one does), so CutMix pastes into a copy of it."""
    from torch.utils.data import default_collate

    kept = []

    def collate_fn(samples):
        images, labels = default_collate(samples)
        kept.append((images, images.clone()))
        return images, labels

    cutmix = v2.CutMix(alpha=1.0, num_classes=CLASSES)
    loader = get_cifar_iter_dali("val", indexed_cifar, 16, 2, seed=3, batch_transform=cutmix, collate_fn=collate_fn)
    plain = get_cifar_iter_dali("val", indexed_cifar, 16, 2, seed=3, batch_transform=cutmix)
    for (images, soft), (want, want_soft) in zip(loader, plain, strict=True):
        assert torch.equal(images, want) and torch.equal(soft, want_soft)
    assert len(kept) == 3 and all(torch.equal(held, copy) for held, copy in kept)


@pytest.mark.subprocess
def test_resume_in_a_new_process_is_bit_identical_with_trivial_augment_erasing_and_mixing(indexed_cifar, tmp_path):
    transform = v2.Compose([v2.RandomCrop(32, padding=4), v2.RandomHorizontalFlip(), v2.TrivialAugmentWide(),
                            v2.ToImage(), v2.ToDtype(torch.float32, scale=True),
                            v2.Normalize([0.5] * 3, [0.25] * 3), v2.RandomErasing(0.5, value="random")])
    kwargs = dict(type="train", image_dir=indexed_cifar, batch_size=64, num_threads=1, seed=11, transform=transform,
                  batch_transform=MIXING)
    uninterrupted = make_loader("cifar", kwargs)
    reference = [list(uninterrupted) for _ in range(2)]
    interrupted, batches, states = make_loader("cifar", kwargs), [], {}
    for k, batch in enumerate(interrupted, start=1):   # states after the first and the last-but-one batch
        batches.append(batch)
        if k in (1, len(interrupted) - 1):
            states[f"after_{k}"] = pickle.loads(pickle.dumps(interrupted.state_dict()))
    assert_same_batches(batches, reference[0], "epoch 0 while saving states")
    job = {"kind": "cifar", "kwargs": dict(kwargs, seed=None), "states": states}
    job_path, out_path = tmp_path / "job.pkl", tmp_path / "resumed.pt"
    job_path.write_bytes(pickle.dumps(job))
    subprocess.run([sys.executable, WORKER, "resume", str(job_path), str(out_path)], env=worker_env(),
                   check=True, timeout=LAUNCH_TIMEOUT)
    resumed = torch.load(out_path)
    for name, state in states.items():
        rest, following = expected_after(state, reference)
        assert_same_batches(resumed[name]["rest"], rest, f"{name}: rest of epoch {state['epoch']}")
        assert_same_batches(resumed[name]["next_epoch"], following, f"{name}: the epoch after")


@pytest.mark.parametrize("channels_last", [False, True])
def test_mixup_is_torchvisions_arithmetic_bit_for_bit(channels_last):
    """The mixer blends in numpy (one thread): each rounded product and sum must be
    torchvision's own MixUp.transform's, for any lambda, in either memory format."""
    images = torch.rand(6, 3, 9, 11, generator=torch.Generator().manual_seed(1)) * 4 - 2
    if channels_last:
        images = images.contiguous(memory_format=torch.channels_last)
    labels = torch.arange(6)
    theirs = v2.MixUp(alpha=1.0, num_classes=CLASSES)
    for lam in torch.rand(20, dtype=torch.float64, generator=torch.Generator().manual_seed(2)).tolist():
        mixed = mixup(images, lam)
        assert torch.equal(mixed, theirs.transform(images, dict(lam=lam, labels=labels, batch_size=6)))
        assert mixed.is_contiguous(memory_format=torch.channels_last) == channels_last


def test_float32_batches_blend_in_one_pass_of_c_where_the_plugin_is(monkeypatch):
    """The bit-for-bit tests above check the C blend only if it runs: it must, for a dense
    float32 batch, and refuse a partner outside the batch by name."""
    from dali_loaders.ops import blend, plugin

    if not plugin.normalize_available():
        pytest.skip("the normalization plugin cannot be built here")
    calls, real = [], blend.blend_into
    monkeypatch.setattr(blend, "blend_into", lambda *args: calls.append(1) or real(*args))
    images = torch.rand(4, 3, 5, 6)
    assert torch.equal(mixup(images, 0.25), images.roll(1, 0).mul_(0.75).add_(images.mul(0.25)))
    assert calls == [1]
    with pytest.raises(IndexError, match="partner 4 of image 2 is outside the 4 images"):
        real(torch.empty_like(images), images, [1, 2, 4, 0], 0.5, 0.5)


def test_timm_mixup_blend_is_timms_arithmetic_bit_for_bit(monkeypatch):
    timm_mixup = pytest.importorskip("timm.data.mixup")
    from dali_loaders.transforms.mixing import timm_blend

    images = torch.rand(6, 3, 9, 11, generator=torch.Generator().manual_seed(3)) * 4 - 2
    theirs = timm_mixup.Mixup(mixup_alpha=1.0, cutmix_alpha=0.0, num_classes=CLASSES)
    for lam in (0.123456789, 0.5, 0.987654321):
        monkeypatch.setattr(theirs, "_params_per_batch", lambda lam=lam: (lam, False))
        want = images.clone()
        theirs._mix_batch(want)
        assert torch.equal(timm_blend(images, lam, "Mixup"), want)


@pytest.mark.parametrize("in_place", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.uint8, torch.bfloat16])
def test_cutmix_pastes_as_torchvisions_cutmix_transform(dtype, in_place):
    """The paste (numpy for what numpy holds, torch for bfloat16) equals torchvision's own
    CutMix.transform for the drawn box, in either memory format; in place (the loader's own
    batch) into the batch itself, else into a copy that leaves the batch as it was."""
    from dali_loaders.transforms.mixing import cutmix

    images = (torch.rand(5, 3, 10, 14, generator=torch.Generator().manual_seed(4)) * 200).to(dtype)
    theirs = v2.CutMix(alpha=1.0, num_classes=CLASSES)
    for k, lam in enumerate((0.1, 0.5, 0.9)):
        for layout in (torch.contiguous_format, torch.channels_last):
            batch = images.contiguous(memory_format=layout).clone(memory_format=layout)
            mixed, box = cutmix(batch, lam, torch.Generator().manual_seed(k), in_place)
            want = theirs.transform(images, dict(box=box, labels=None, batch_size=5, lam_adjusted=lam))
            assert torch.equal(mixed, want) and mixed.dtype == dtype
            assert mixed.is_contiguous(memory_format=layout)
            assert (mixed.data_ptr() == batch.data_ptr()) == in_place
            assert torch.equal(batch, want if in_place else images)
