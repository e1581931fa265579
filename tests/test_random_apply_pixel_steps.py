"""v2's pixel steps that keep the image's size, inside RandomApply and RandomChoice (robustness
recipes wrap noise, JPEG, elastic and perspective warps, channel orders in them): translated,
each image changed at torchvision's rate, and no AutoGraph warning while the graph is built."""
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


@pytest.mark.parametrize("variant", ["gpu", "cpu-decode"])
def test_their_gpu_graphs_have_no_gpu_to_cpu_edge(tmp_path, variant):
    from image_data import write_image_folder

    from dali_loaders import dali_compat
    from dali_loaders.loader import serialized_gpu_graph
    from dali_loaders.sources.image_files import ImageFiles

    write_image_folder(str(tmp_path), {"a": 2, "b": 2})
    folder = ImageFiles(str(tmp_path))
    for name, step in STEPS.items():
        transform = C(v2.ToImage(), v2.RandomApply([step], p=0.5), v2.RandomChoice([step, v2.RandomInvert(1.0)]))
        graph = serialized_gpu_graph(folder, transform, variant=variant)
        edges = [kind for kind, _, device, inputs in dali_compat.graph_operators(graph) if device == "cpu"
                 for _, d in inputs if d == "gpu"]
        assert edges == [], name
