"""timm's three-augment operations (DeiT III's `auto_augment="3a"`, RandAugment's `t3a`):
Desaturate and GaussianBlur pixel for pixel against timm's own ops, on the fused path (CPU
graphs with the plugin) and the conditionals' (without it); GaussianBlurRand's random radius
by distribution against timm's; their GPU graphs run the steps on the CPU, Desaturate's GPU
chain equals the conditionals' operation."""
import random

import numpy as np
import pytest
import torch
from photos import photo_arrays
from scipy import stats
from test_timm_chain import HPARAMS, run_chain_and_reference
from test_transforms import dali_outputs
from torchvision.transforms import v2

from dali_loaders.loader import build, dali_loader
from dali_loaders.sources.arrays import ArraySource
from dali_loaders.transforms import timm_fused

timm = pytest.importorskip("timm")
from timm.data import auto_augment as timm_aa  # noqa: E402
from timm.data import create_transform  # noqa: E402

P_MIN = 1e-3


@pytest.fixture(params=["fused", "conditionals"])
def path(request, monkeypatch):
    from dali_loaders.ops import plugin

    if request.param == "fused" and not plugin.augment_available():
        pytest.skip("the augmentation plugin cannot be built here")
    if request.param == "conditionals":
        monkeypatch.setenv(plugin.DISABLE_AUGMENT_ENV, "1")
    return request.param


def one_op(name, magnitude, prob=1.0, **hparams):
    return timm_aa.RandAugment([timm_aa.AugmentOp(name, prob=prob, magnitude=magnitude,
                                                  hparams=dict(HPARAMS, **hparams))], num_layers=1)


def source_of(images):
    return ArraySource(np.stack(images), np.arange(len(images)), "images")


@pytest.mark.parametrize("name,magnitude", [("Desaturate", 9), ("Desaturate", 3), ("Desaturate", 0),
                                            ("GaussianBlur", 9), ("GaussianBlur", 2), ("GaussianBlur", 10)])
def test_each_operation_matches_timms_own(path, name, magnitude):
    from PIL import Image

    images = photo_arrays(64)
    step = one_op(name, magnitude)
    ours = dali_outputs(source_of(images), [step, v2.PILToTensor()])
    gaps = [np.abs(got.astype(int) - np.asarray(step(Image.fromarray(image))).transpose(2, 0, 1).astype(int))
            for got, image in zip(ours, images)]
    worst, mean = max(int(g.max()) for g in gaps), float(np.mean([g.mean() for g in gaps]))
    print(f"{name} m={magnitude} ({path}): mean {mean:.4f}, worst {worst}")
    assert worst <= 1 and mean <= 0.01, (name, magnitude, worst, mean)
    assert max(int(np.abs(got.astype(int) - image.transpose(2, 0, 1)).max()) for got, image in zip(ours, images)) > 8


def impulse(side=15):
    """A black image with one white pixel: after PIL's blur, its centre falls as the radius grows."""
    image = np.zeros((side, side, 3), np.uint8)
    image[side // 2, side // 2] = 255
    return image


def centres_ours(step, samples=512):
    """Through the CPU loader (its graph has conditionals where the path needs them)."""
    from dali_loaders import transforms

    assert not transforms.plan([step, v2.PILToTensor()], python_fallback=False).python   # all in DALI
    loader = dali_loader(source_of([impulse()] * samples), [step, v2.PILToTensor()], train=True, batch_size=128,
                         num_threads=2, seed=5)
    images = torch.cat([images for images, _ in loader])
    return images[:, 0, images.shape[2] // 2, images.shape[3] // 2].numpy().astype(int)


def centres_timm(step, samples=1024):
    from PIL import Image

    random.seed(0)
    outputs = [np.asarray(step(Image.fromarray(impulse()))) for _ in range(samples)]
    return np.array([int(out[out.shape[0] // 2, out.shape[1] // 2, 0]) for out in outputs])


@pytest.mark.parametrize("magnitude,prob", [(10, 1.0), (4, 1.0), (10, 0.5), (0, 1.0), (10, 0.0)])
def test_gaussian_blur_rand_draws_its_radius_as_timm(path, magnitude, prob):
    """The centre of a blurred impulse against timm's, as distributions: the radius uniform in
    0.1 .. 2 * magnitude / 10, applied with the op's probability."""
    step = one_op("GaussianBlurRand", magnitude, prob)
    ours, theirs = centres_ours(step), centres_timm(step)
    assert len(set(theirs)) > 1 or magnitude == 0 or prob == 0   # the statistic sees the radius
    assert stats.ks_2samp(ours, theirs).pvalue > P_MIN, (np.bincount(ours)[-20:], np.bincount(theirs)[-20:])


def test_a_gaussian_blur_rand_magnitude_or_probability_ignored_would_show(path):
    assert stats.ks_2samp(centres_ours(one_op("GaussianBlurRand", 10)),
                          centres_timm(one_op("GaussianBlurRand", 4))).pvalue < 1e-6
    assert stats.ks_2samp(centres_ours(one_op("GaussianBlurRand", 10, 0.5)),
                          centres_timm(one_op("GaussianBlurRand", 10))).pvalue < 1e-6


def test_gaussian_blur_rand_with_magnitude_noise_is_refused_by_name():
    from dali_loaders import transforms

    step = one_op("GaussianBlurRand", 10, magnitude_std=0.5)
    assert "GaussianBlurRand with magnitude noise" in transforms.untranslatable_reason(step)


@pytest.mark.parametrize("auto_augment", ["3a", "rand-m9-n2-mstd0.5-t3a", "rand-m9-mstd0.5-t3aw"])
def test_three_augment_recipes_translate_and_their_gpu_graphs_run_the_steps_on_the_cpu(auto_augment):
    from dali_loaders import transforms

    recipe = create_transform(32, is_training=True, auto_augment=auto_augment)
    plan = transforms.plan(recipe, python_fallback=False)
    source = source_of(photo_arrays(40, 4))
    variant = build.graph_variant("gpu", source, plan)
    assert variant == "cpu-steps"
    assert build.serialized_gpu_graph(source, recipe, variant=variant)
    with pytest.raises(Exception, match="GaussianBlur.* has no stage in the GPU chain"):
        build.serialized_gpu_graph(source, recipe)


def test_desaturate_in_the_gpu_chain_is_the_conditionals_colour_operation():
    """The chain's rows (one per sample, its argument timm's level) against the conditional
    graphs' own operation at that argument, exactly."""
    step = timm_aa.RandAugment([timm_aa.AugmentOp(name, prob=0.5, magnitude=9, hparams=dict(HPARAMS))
                                for name in ("Desaturate", "SolarizeIncreasing")], num_layers=1)
    from test_augment_chain import BATCH, photos

    rng = np.random.default_rng(3)
    rows = np.array(([0, 1] * BATCH)[:BATCH - 2] + [-1, -1], np.int32)
    rng.shuffle(rows)
    level = timm_fused.level_of("Desaturate", {})
    args = np.array([timm_fused.argument(level, float(rng.uniform(0, 10)), 1.0) if r == 0 else
                     (256.0 - float(rng.integers(0, 256)) if r == 1 else 0.0) for r in rows], np.float32)
    pixels = photos(seed=4)
    got, refs = run_chain_and_reference(step, True, rows, args, pixels)
    for i, r in enumerate(rows):
        want = pixels[i] if r < 0 else refs[step.ops[r].name][i]
        assert np.array_equal(got[i], want), (i, r, args[i])
    assert sum(not np.array_equal(got[i], pixels[i]) for i in range(len(rows)) if rows[i] == 0) > len(rows) // 4


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "conditionals"])
def test_three_augment_picks_each_sub_policy_as_timm(fused, monkeypatch):
    """Which op each image gets (one of three, uniform) against timm's own draws."""
    from test_autoaugment import same_distribution
    from test_timm import dali_draws, timm_draws

    make = lambda: timm_aa.auto_augment_transform("3a", dict(HPARAMS))  # noqa: E731
    ours, theirs = dali_draws(make(), monkeypatch, fused=fused), timm_draws(make())
    names = lambda draws: [tuple(name for name, _ in draw) for draw in draws]  # noqa: E731
    assert set(names(theirs)) == {("Solarize",), ("Desaturate",), ("GaussianBlurRand",)}
    assert same_distribution(names(ours), names(theirs)) > P_MIN
