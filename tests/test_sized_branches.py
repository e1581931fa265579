"""Steps that change the image's size inside RandomChoice, RandomApply and RandomOrder (v1 and
v2): each image goes through one branch, whose size it carries out. Every output is
torchvision's output of one of the choices for that image, pixel for pixel, and the choices
come at the twin's rates (each test fails if the weights or p are ignored); on fixed-size
arrays and on files of every size (sizes per sample); through the loader; and no GPU graph
reads GPU data on the CPU."""
import numpy as np
import pytest
import torch
from image_data import photo
from test_transforms import C, close, dali_outputs, many, twin_outputs
from torchvision import transforms as v1
from torchvision.transforms import v2

from dali_loaders import transforms
from dali_loaders.ops import plugin

pytest.importorskip("nvidia.dali")

N = 400


@pytest.fixture(autouse=True)
def pil_exact_resizes():
    if not plugin.available():
        pytest.skip("the resize operator is not built here: the resizes are DALI's, within levels of PIL's")


def which(outputs, candidates, levels=0):
    """The index of the candidate each output equals, or is within `levels` of (all candidates
    far apart)."""
    picked = []
    for output in outputs:
        found = [k for k, candidate in enumerate(candidates) if output.shape == candidate.shape
                 and np.abs(output.astype(np.float64) - candidate.astype(np.float64)).max() <= levels]
        assert len(found) == 1, f"an output of shape {output.shape} is none of the choices"
        picked.append(found[0])
    return np.array(picked)


def rates_apart(source, transform, choices, tolerance, levels=0):
    """Each output of ours and of the twin is one of `choices` (transforms, applied by
    torchvision to each sample; ours within `levels`); their rates within `tolerance`.
    Returns our rates."""
    ours, theirs = dali_outputs(source, transform, batch=100), twin_outputs(source, transform)
    picked_ours, picked_theirs = [], []
    for k in range(len(source)):
        one = many_of(source, k)
        candidates = [twin_outputs(one, choice)[0] for choice in choices]
        picked_ours.append(which([ours[k]], candidates, levels)[0])
        picked_theirs.append(which([theirs[k]], candidates)[0])
    picked_ours, picked_theirs = np.array(picked_ours), np.array(picked_theirs)
    for k in range(len(choices)):
        close(picked_ours == k, picked_theirs == k, tolerance, f"choice {k}")
    return np.bincount(picked_ours, minlength=len(choices)) / len(source)


def many_of(source, k):
    from dali_loaders.sources.arrays import ArraySource
    from dali_loaders.sources.files import FileSource

    if isinstance(source, ArraySource):
        return ArraySource(source.images[k:k + 1], source.labels[k:k + 1], "one")
    return FileSource([source.files[k]], [0], "one")


PHOTO = np.asarray(photo(64, 48, 3))


@pytest.mark.parametrize("T", [v1, v2])
def test_random_choice_of_sizes_by_its_weights(T):
    weights = [0.6, 0.3, 0.1]
    pick = T.RandomChoice([T.Resize((20, 30)), T.CenterCrop((20, 30)), T.Compose([T.Pad(5, fill=7), T.Resize((20, 30))])],
                          p=weights)
    assert transforms.untranslatable_reason(pick) is None
    choices = [T.Compose([step, T.PILToTensor()]) for step in pick.transforms]
    rates = rates_apart(many(PHOTO, N), T.Compose([pick, T.PILToTensor()]), choices, 0.12)
    assert np.allclose(rates, weights, atol=0.1)   # uniform draws would miss the first by 0.27


def test_random_apply_of_a_resize_then_one_crop_for_all():
    step = v2.RandomApply([v2.Resize((30, 50))], p=0.3)
    transform = C(step, v2.CenterCrop((28, 40)), v2.PILToTensor())
    choices = [C(v2.CenterCrop((28, 40)), v2.PILToTensor()), C(v2.Resize((30, 50)), v2.CenterCrop((28, 40)), v2.PILToTensor())]
    rates = rates_apart(many(PHOTO, N), transform, choices, 0.1)
    assert abs(rates[1] - 0.3) < 0.08   # p=0.5 would be 0.2 away


def test_on_files_of_every_size_each_image_carries_its_own_size(photo_files):
    """Short sides set per image, then one crop: the size each branch gives each image (a
    DataNode per sample) is the one the crop reads."""
    pick = v2.RandomChoice([v2.Resize(40), v2.Resize(56), v2.RandomShortestSize([48], max_size=60)])
    transform = C(pick, v2.CenterCrop(36), v2.PILToTensor())
    choices = [C(step, v2.CenterCrop(36), v2.PILToTensor()) for step in pick.transforms]
    outputs = dali_outputs(photo_files, transform)
    picked = set()
    for k, output in enumerate(outputs):
        candidates = [twin_outputs(many_of(photo_files, k), choice)[0] for choice in choices]
        picked |= set(which([output], candidates))
    assert len(outputs) >= 6 and len(picked) >= 2


def test_random_order_of_a_crop_and_a_resize():
    """Crop then resize, or resize then crop: the two orders give different windows."""
    order = v1.RandomOrder([v1.CenterCrop((40, 40)), v1.Resize((30, 30))])
    transform = v1.Compose([order, v1.CenterCrop(24), v1.PILToTensor()])
    choices = [v1.Compose([v1.CenterCrop((40, 40)), v1.Resize((30, 30)), v1.CenterCrop(24), v1.PILToTensor()]),
               v1.Compose([v1.Resize((30, 30)), v1.CenterCrop((40, 40)), v1.CenterCrop(24), v1.PILToTensor()])]
    rates = rates_apart(many(PHOTO, 200), transform, choices, 0.15)
    assert abs(rates[0] - 0.5) < 0.12


def test_nested_and_beside_pixel_steps():
    """A size change inside a RandomApply inside a RandomChoice, beside a colour step."""
    pick = v2.RandomChoice([v2.RandomApply([v2.Resize((24, 24))], p=0.5), v2.Compose([v2.CenterCrop(24),
                                                                                       v2.RandomInvert(1.0)])])
    transform = C(pick, v2.CenterCrop(20), v2.PILToTensor())
    choices = [C(v2.CenterCrop(20), v2.PILToTensor()), C(v2.Resize((24, 24)), v2.CenterCrop(20), v2.PILToTensor()),
               C(v2.CenterCrop(24), v2.RandomInvert(1.0), v2.CenterCrop(20), v2.PILToTensor())]
    rates = rates_apart(many(PHOTO, N), transform, choices, 0.12)
    assert np.allclose(rates, [0.25, 0.25, 0.5], atol=0.1)


def test_through_the_loader_a_batch_of_one_size(tmp_path):
    """torchvision's training of several scales: one of three resizes, then one crop."""
    from torchvision.datasets import ImageFolder

    from dali_loaders import DaliLoader

    for k in range(12):
        (tmp_path / f"c{k % 3}").mkdir(exist_ok=True)
        photo(60 + 7 * k, 50 + 3 * k, k).save(tmp_path / f"c{k % 3}" / f"{k}.png")
    transform = v2.Compose([v2.RandomChoice([v2.Resize(s) for s in (40, 48, 56)]), v2.RandomCrop(32),
                            v2.RandomHorizontalFlip(), v2.ToImage(), v2.ToDtype(torch.float32, scale=True)])
    loader = DaliLoader(ImageFolder(str(tmp_path), transform=transform), batch_size=4, shuffle=True, num_workers=2)
    assert not loader.route.startswith("python"), loader.route
    labels = []
    for epoch in range(2):
        for images, targets in loader:
            assert images.shape == (4, 3, 32, 32) and images.dtype == torch.float32
            labels += targets.tolist()
    assert sorted(labels) == sorted([k % 3 for k in range(12)] * 2)


def test_no_gpu_graph_reads_gpu_data_on_the_cpu(photo_files):
    from test_gpu_graphs import VARIANTS, gpu_to_cpu_edges

    from dali_loaders.loader.build import serialized_gpu_graph

    transform = C(v2.RandomChoice([v2.Resize(40), v2.RandomResizedCrop(36), v2.Pad(3, padding_mode="reflect")]),
                  v2.RandomApply([v2.RandomRotation(20, expand=True), v2.ScaleJitter((40, 40))], p=0.5),
                  v2.CenterCrop(32), v2.PILToTensor())
    for variant in VARIANTS:
        assert gpu_to_cpu_edges(serialized_gpu_graph(photo_files, transform, variant=variant)) == [], variant


def test_an_expanded_rotation_inside_random_apply():
    """The canvas the angle makes, carried out of the branch: a crop of it after."""
    rotate = v2.RandomRotation((30, 30), expand=True, interpolation=v2.InterpolationMode.BILINEAR)
    transform = C(v2.RandomApply([rotate], p=0.5), v2.CenterCrop((60, 70)), v2.PILToTensor())
    choices = [C(v2.CenterCrop((60, 70)), v2.PILToTensor()), C(rotate, v2.CenterCrop((60, 70)), v2.PILToTensor())]
    rates = rates_apart(many(PHOTO, 200), transform, choices, 0.15, levels=1)   # the rotation's rounding, as outside
    assert abs(rates[1] - 0.5) < 0.12
