"""Steps that keep the image's size, inside RandomApply and RandomChoice: v2's pixel steps
(robustness recipes wrap noise, JPEG, elastic and perspective warps, channel orders in them),
Identity, the AutoAugment family (torchvision's and timm's) and Grayscale to three channels:
translated, each image changed at torchvision's rate, no GPU->CPU edge, and no AutoGraph
warning while the graph is built."""
import logging

import numpy as np
import pytest
import torch
from test_transforms import C, dali_outputs, twin_outputs
from torchvision.transforms import v2

from dali_loaders import transforms
from dali_loaders.sources.arrays import ArraySource

pytest.importorskip("nvidia.dali")

STEPS = {
    "GaussianNoise": v2.GaussianNoise(0.0, 0.1),
    "ElasticTransform": v2.ElasticTransform(),
    "JPEG": v2.JPEG(30),
    "RandomPerspective": v2.RandomPerspective(0.5, p=1.0),
    "RandomChannelPermutation": v2.RandomChannelPermutation(),
    "RandomPhotometricDistort": v2.RandomPhotometricDistort(p=1.0),
}
N = 240


def source():
    pixels = np.random.default_rng(0).integers(0, 256, (1, 24, 24, 3), dtype=np.uint8)
    return ArraySource(np.repeat(pixels, N, axis=0), np.zeros(N, dtype=np.int64), "copies"), pixels[0]


def shares(outputs, image):
    """The share of outputs changed, and of outputs that are the image inverted."""
    original, inverted = image.transpose(2, 0, 1), 255 - image.transpose(2, 0, 1)
    return (np.mean([not np.array_equal(o, original) for o in outputs]),
            np.mean([np.array_equal(o, inverted) for o in outputs]))


@pytest.mark.parametrize("name", sorted(STEPS))
def test_inside_random_apply_each_image_is_changed_at_torchvisions_rate(name):
    images, image = source()
    transform = C(v2.ToImage(), v2.RandomApply([STEPS[name]], p=0.3))
    assert not transforms.plan(transform, python_fallback=False).python
    (ours, _), (theirs, _) = (shares(outputs, image) for outputs in
                              (dali_outputs(images, transform, batch=N), twin_outputs(images, transform)))
    # a channel permutation may draw the identity (1 in 6): 0.25 changed
    expected = 0.3 * (5 / 6 if name == "RandomChannelPermutation" else 1.0)
    assert abs(ours - expected) < 0.1 and abs(theirs - expected) < 0.1, (ours, theirs)


@pytest.mark.parametrize("name", ["GaussianNoise", "JPEG"])
def test_inside_random_choice_each_image_takes_one_of_the_two(name):
    images, image = source()
    transform = C(v2.ToImage(), v2.RandomChoice([STEPS[name], v2.RandomInvert(1.0)], p=[1, 3]))
    assert not transforms.plan(transform, python_fallback=False).python
    changed, inverted = shares(dali_outputs(images, transform, batch=N), image)
    assert changed == 1.0 and abs(inverted - 0.75) < 0.1


@pytest.mark.parametrize("api", ["v2", "torch.nn"])
def test_identity_inside_random_choice_and_random_apply_is_chosen_at_its_weight(api):
    """RandomChoice([Identity(), ...]) leaves an image as it is at Identity's weight (a blur or
    nothing, as recipes write it): the share inverted is torchvision's, not every image."""
    images, image = source()
    identity = v2.Identity() if api == "v2" else torch.nn.Identity()
    transform = C(v2.ToImage(), v2.RandomChoice([identity, v2.RandomInvert(1.0)], p=[1, 3]),
                  v2.RandomApply([identity, v2.RandomVerticalFlip(1.0)], p=0.5))
    assert not transforms.plan(transform, python_fallback=False).python
    for outputs in (dali_outputs(images, transform, batch=N), twin_outputs(images, transform)):
        inverted = np.mean([any(np.array_equal(o, 255 - x.transpose(2, 0, 1)) for x in (image, image[::-1]))
                            for o in outputs])
        unchanged = 1 - shares(outputs, image)[0]
        # Identity drawn 1 in 4; the flip's RandomApply unchanged 1 in 2
        assert abs(inverted - 0.75) < 0.1 and abs(unchanged - 0.125) < 0.08, (inverted, unchanged)


def test_graphs_with_conditionals_build_without_autographs_warnings(caplog):
    """The photometric operations' parameter functions are named: AutoGraph, converting them
    inside a branch, warned about one-line lambdas it could not tell apart; and about the
    translators of Identity and ToPureTensor, whose bodies were a docstring alone."""
    images, _ = source()
    transform = C(v2.Identity(), v2.ToImage(), v2.ToPureTensor(),
                  v2.RandomChoice([v2.RandomPosterize(4, 1), v2.RandomSolarize(100, 1),
                                   v2.RandomAdjustSharpness(2, 1), v2.RandomInvert(1), v2.Identity()]),
                  v2.RandomApply([v2.RandomAutocontrast(1), v2.GaussianNoise()], p=0.5))
    with caplog.at_level(logging.WARNING):
        dali_outputs(images, transform, batch=8)
    assert not [r for r in caplog.records if "AutoGraph could not transform" in r.getMessage()]


def gpu_to_cpu_edges(folder, transform, variant):
    """The CPU operators fed by GPU data in the serialized GPU graph of `transform`."""
    from dali_loaders import dali_compat
    from dali_loaders.loader import serialized_gpu_graph

    graph = serialized_gpu_graph(folder, transform, variant=variant)
    return [kind for kind, _, device, inputs in dali_compat.graph_operators(graph) if device == "cpu"
            for _, d in inputs if d == "gpu"]


@pytest.fixture
def folder(tmp_path):
    from image_data import write_image_folder

    from dali_loaders.sources.image_files import ImageFiles

    write_image_folder(str(tmp_path), {"a": 2, "b": 2})
    return ImageFiles(str(tmp_path))


@pytest.mark.parametrize("variant", ["gpu", "cpu-decode"])
def test_their_gpu_graphs_have_no_gpu_to_cpu_edge(folder, variant):
    for name, step in STEPS.items():
        transform = C(v2.ToImage(), v2.RandomApply([step], p=0.5), v2.RandomChoice([step, v2.RandomInvert(1.0)]))
        assert gpu_to_cpu_edges(folder, transform, variant) == [], name


def auto_augment_family():
    """(id, step): torchvision's AutoAugment family, and timm's where it is installed."""
    steps = [("TrivialAugmentWide", v2.TrivialAugmentWide()), ("AutoAugment", v2.AutoAugment()),
             ("RandAugment", v2.RandAugment()), ("AugMix", v2.AugMix())]
    try:
        from timm.data.auto_augment import augment_and_mix_transform, rand_augment_transform
    except ImportError:
        return steps
    hparams = dict(translate_const=10, img_mean=(124, 116, 104))
    return steps + [("timm RandAugment", rand_augment_transform("rand-m9-mstd0.5", hparams)),
                    ("timm AugMixAugment", augment_and_mix_transform("augmix-m5-w3", hparams))]


def mean_change(outputs, image):
    """The mean |output - image| over the images changed, in levels."""
    changes = [np.abs(o.astype(np.float64) - image.transpose(2, 0, 1)).mean() for o in outputs]
    return np.mean([c for c in changes if c > 0])


@pytest.mark.parametrize("plugin_built", [True, False], ids=["fused", "chain"])
@pytest.mark.parametrize("name,step", auto_augment_family(), ids=[name for name, _ in auto_augment_family()])
def test_the_autoaugment_family_inside_random_apply_changes_images_at_torchvisions_rate(
        monkeypatch, plugin_built, name, step):
    """RandomApply([TrivialAugmentWide()], p) (an augmentation on some images only): the share
    changed is the twin's, p times the augmentation's own, and the change as large; applied to
    every image (p ignored), the share is about three times as high."""
    from dali_loaders.ops import plugin

    if not plugin_built:
        monkeypatch.setenv(plugin.DISABLE_AUGMENT_ENV, "1")
    images, image = source()
    # timm's operations take PIL images: the twin keeps one up to the batch
    transform = v2.RandomApply([step], p=0.3) if name.startswith("timm") else C(v2.ToImage(), v2.RandomApply([step], p=0.3))
    assert not transforms.plan(transform, python_fallback=False).python
    ours, theirs = dali_outputs(images, transform, batch=N), twin_outputs(images, transform)
    (changed, _), (expected, _) = shares(ours, image), shares(theirs, image)
    assert abs(changed - expected) < 0.1 and changed < 0.45, (changed, expected)
    assert abs(mean_change(ours, image) - mean_change(theirs, image)) < 0.35 * mean_change(theirs, image)


def test_grayscale_to_three_channels_inside_random_apply_is_torchvisions_on_some_images():
    images, image = source()
    transform = C(v2.ToImage(), v2.RandomApply([v2.Grayscale(3)], p=0.3))
    assert not transforms.plan(transform, python_fallback=False).python
    grey = v2.Grayscale(3)(torch.from_numpy(image.transpose(2, 0, 1).copy())).numpy()
    outputs = dali_outputs(images, transform, batch=N)
    kinds = [1 if np.array_equal(o, grey) else 0 if np.array_equal(o, image.transpose(2, 0, 1)) else -1
             for o in outputs]
    assert -1 not in kinds and abs(np.mean(kinds) - 0.3) < 0.1


def test_grayscale_to_one_channel_inside_random_apply_is_refused_by_name():
    why = transforms.untranslatable_reason(v2.RandomApply([v2.Grayscale(1)]))
    assert "Grayscale" in why and "num_output_channels=1" in why


class Turn:
    """A class of the user's that no reading takes (PIL's rotate is not among them)."""

    def __call__(self, image):
        return image.rotate(3)


@pytest.mark.parametrize("container", [
    lambda inner: v2.RandomApply([inner], p=0.5),
    lambda inner: v2.RandomChoice([v2.RandomInvert(1.0), inner]),
    lambda inner: v2.RandomOrder([v2.RandomInvert(1.0), inner]),
    lambda inner: C(v2.ToImage(), v2.ToDtype(torch.float32, scale=True), v2.RandomApply([inner], p=0.5)),
], ids=["RandomApply", "RandomChoice", "RandomOrder", "RandomApply on floats"])
def test_a_users_class_inside_a_container_is_refused_with_its_own_reason(container):
    """Its own reason, as at the top level: not a list of the steps that keep the type."""
    why = transforms.untranslatable_reason(container(Turn()))
    assert "Turn has no DALI translation" in why and "returns `image.rotate(3)`" in why, why
    assert "only steps that keep" not in why and "uint8 pixels only" not in why, why


def test_grayscale_to_three_channels_of_grey_images_on_some_images_only_is_refused_by_name():
    """A grey source: the images the step leaves alone keep one channel, so a batch would mix
    one and three (torchvision's default_collate cannot stack it either). Raised while the
    graph is traced: DALI's AutoGraph re-raises it as its StagingError, with the message."""
    grey = np.random.default_rng(0).integers(0, 256, (8, 16, 16, 1), dtype=np.uint8)
    images = ArraySource(grey, np.zeros(8, dtype=np.int64), "grey")
    with pytest.raises(Exception, match="Grayscale inside a RandomApply or RandomChoice changes the images' "
                                        "channels from 1 to 3"):
        dali_outputs(images, C(v2.ToImage(), v2.RandomApply([v2.Grayscale(3)], p=0.5)), batch=8)


@pytest.mark.parametrize("variant", ["gpu", "cpu-decode"])
def test_the_autoaugment_family_and_grayscale_inside_have_no_gpu_to_cpu_edge(folder, variant):
    for name, step in [*auto_augment_family(), ("Grayscale", v2.Grayscale(3))]:
        transform = v2.Compose([v2.RandomApply([step], p=0.5), v2.RandomChoice([step, v2.Identity()])])
        assert gpu_to_cpu_edges(folder, transform, variant) == [], name
