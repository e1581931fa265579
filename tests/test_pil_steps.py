"""Self-supervised recipes' own PIL classes (MoCo's and DINO's blur, BYOL's and Barlow Twins'
solarization, ...): read from their source as the steps they equal, PIL's blur in DALI within
PIL's pixels, drawn as the classes draw."""
import math
import random
import types

import numpy as np
import pytest
import torch
from PIL import Image, ImageFilter, ImageOps
from scipy import stats
from test_transforms import C, both, dali_outputs, twin_outputs
from torchvision import transforms as v1
from torchvision.transforms import v2

from dali_loaders import DaliLoader, transforms
from dali_loaders.bench.dino import GaussianBlur as DinoBlur   # DINO's, as its repository writes them
from dali_loaders.bench.dino import Solarization
from dali_loaders.loader.build import serialized_gpu_graph
from dali_loaders.sources.arrays import ArraySource
from dali_loaders.transforms.pil_blur import PILGaussianBlur, box_radius

P_MIN = 1e-4   # a Kolmogorov-Smirnov test's p-value below this fails


# -- the classes as their repositories write them ------------------------------------------


class MocoBlur:
    """Gaussian blur augmentation in SimCLR (MoCo v2's moco/loader.py)."""

    def __init__(self, sigma=[0.1, 2.0]):
        self.sigma = sigma

    def __call__(self, x):
        sigma = random.uniform(self.sigma[0], self.sigma[1])
        x = x.filter(ImageFilter.GaussianBlur(radius=sigma))
        return x


class BarlowBlur(object):
    """Barlow Twins' and VICReg's, with NumPy's draws."""

    def __init__(self, p):
        self.p = p

    def __call__(self, img):
        if np.random.rand() < self.p:
            sigma = np.random.rand() * 1.9 + 0.1
            return img.filter(ImageFilter.GaussianBlur(sigma))
        else:
            return img


class AlwaysSolarize:
    """solo-learn's and MoCo v3's: RandomApply gives the coin."""

    def __call__(self, img):
        return ImageOps.solarize(img)


class Equalization:
    def __call__(self, img):
        return ImageOps.equalize(img)


class SkipAbove:
    """A coin the other way round, a coin of torch's, a threshold and a fixed radius."""

    def __init__(self, p):
        self.p = p

    def __call__(self, img):
        if torch.rand(1) > self.p:
            return img
        img = img.filter(ImageFilter.GaussianBlur(1.5))
        return ImageOps.solarize(img, threshold=200)


class SpreadBlur:
    """The ends spread from the object's list, as the library's own PILGaussianBlur writes it."""

    def __init__(self, sigma=(0.1, 2.0)):
        self.sigma = sigma

    def __call__(self, img):
        return img.filter(ImageFilter.GaussianBlur(radius=random.uniform(*self.sigma)))


class SizedDraw:
    """NumPy's third argument is a size: an array of radii, which no step expresses."""

    def __call__(self, img):
        return img.filter(ImageFilter.GaussianBlur(radius=np.random.uniform(0.1, 2.0, 2)))


@pytest.mark.parametrize("obj,expected", [
    (MocoBlur(), [PILGaussianBlur((0.1, 2.0))]),
    (SpreadBlur(), [PILGaussianBlur((0.1, 2.0))]),
    (SpreadBlur([0.5, 3.0]), [PILGaussianBlur((0.5, 3.0))]),
    (MocoBlur([0.5, 0.5]), [PILGaussianBlur(0.5)]),
    (DinoBlur(), [PILGaussianBlur((0.1, 2.0), p=0.5)]),
    (DinoBlur(p=0.1, radius_min=1.0, radius_max=3.0), [PILGaussianBlur((1.0, 3.0), p=0.1)]),
    (BarlowBlur(0.2), [PILGaussianBlur((0.1, 2.0), p=0.2)]),
    (Solarization(0.2), [v1.RandomSolarize(128, p=0.2)]),
    (AlwaysSolarize(), [v1.RandomSolarize(128, p=1.0)]),
    (Equalization(), [v1.RandomEqualize(p=1.0)]),
    (SkipAbove(0.3), [v1.RandomApply([PILGaussianBlur(1.5), v1.RandomSolarize(200, p=1.0)], p=0.3)]),
], ids=lambda value: type(value).__name__ if not isinstance(value, list) else "")
def test_the_classes_read_as_the_steps_they_equal(obj, expected):
    steps = transforms.flatten(obj)
    assert [repr(s) for s in steps] == [repr(e) for e in expected]
    assert transforms.untranslatable_reason(v1.Compose([obj, v1.PILToTensor()])) is None


class TiedDraws:
    def __call__(self, img):
        s = random.random()
        if s < 0.5:
            return img.filter(ImageFilter.GaussianBlur(s))
        return img


class BothWays:
    def __call__(self, img):
        if random.random() < 0.5:
            return ImageOps.solarize(img)
        return ImageOps.equalize(img)


class OnAFlag:
    def __init__(self):
        self.enabled = True

    def __call__(self, img):
        if self.enabled:
            return ImageOps.solarize(img)
        return img


class OnADraw:
    def __call__(self, img):
        if random.random():
            return ImageOps.solarize(img)
        return img


class OtherOperation:
    def __call__(self, img):
        return ImageOps.grayscale(img)


class DoesMore:
    def __call__(self, img):
        img = img.convert("RGB")
        return ImageOps.solarize(img)


class NegativeRadius:
    def __call__(self, img):
        return img.filter(ImageFilter.GaussianBlur(random.random() - 0.5))


class RadiusProperty:
    @property
    def radius(self):
        return 2.0

    def __call__(self, img):
        return img.filter(ImageFilter.GaussianBlur(self.radius))


@pytest.mark.parametrize("obj,says", [
    (TiedDraws(), "uses one draw twice"),
    (BothWays(), "changes the image both ways"),
    (OnAFlag(), "reads `self.enabled`, which is bool"),
    (OnADraw(), "not on a coin"),
    (OtherOperation(), "not one of PIL's operations that read"),
    (DoesMore(), "computes `img.convert('RGB')`"),
    (RadiusProperty(), "which is property"),
    (NegativeRadius(), "cannot be negative"),
    (SpreadBlur((0.1, 2.0, 3.0)), "uniform(low, high) reads"),
    (SpreadBlur(2.0), "not a list of numbers"),
    (SizedDraw(), "uniform(low, high) reads"),
])
def test_what_does_not_read_takes_the_python_path_and_says_why(obj, says):
    reason = transforms.untranslatable_reason(obj)
    assert "nor PIL's operations behind coins" in reason and says in reason, reason
    assert transforms.plan(obj, python_fallback=True).python == [obj]


LOOKALIKE = types.SimpleNamespace(solarize=lambda image: image)


class Lookalike:
    def __call__(self, img):
        return LOOKALIKE.solarize(img)


def test_a_function_of_the_same_name_from_elsewhere_is_not_read():
    """Names are resolved to the functions themselves: nothing of PIL's here, so no PIL reading."""
    reason = transforms.untranslatable_reason(Lookalike())
    assert reason and "PIL's operations" not in reason


@pytest.fixture(params=["augmentation operator", "DALI's filters"])
def blur_path(request, monkeypatch):
    """Each blur test twice: in the augmentation operator (CPU graphs), and without it in DALI's
    filters and arithmetic (GPU graphs' path)."""
    from dali_loaders.ops import plugin

    if request.param == "DALI's filters":
        monkeypatch.setenv(plugin.DISABLE_AUGMENT_ENV, "1")
    return request.param


# -- PIL's blur in DALI ------------------------------------------------------------------------


def photographs(n=6, size=(96, 80)):
    rng = np.random.default_rng(3)
    images = [np.asarray(Image.fromarray(rng.integers(0, 256, (12, 10, 3), np.uint8)).resize(size, Image.BICUBIC))
              for _ in range(n)]
    return ArraySource(np.stack(images), np.zeros(n, np.int64), "photographs")


RADII = [0.0, 0.05, 0.3, 0.5, 0.7, 1.0, 1.3, 1.5, 1.8, 2.0, 2.5, 4.0, 5.0, 60.0]


def test_a_fixed_radius_gives_pils_pixels(blur_path):
    """Against PIL's own GaussianBlur (the twin runs MoCo's class), every pixel, on images with
    edges everywhere, in the augmentation operator (CPU graphs) and in DALI's filters and
    arithmetic (GPU graphs): the same, ties included (radii 0.5, 1.0, 1.5, 2.0 and 4.0 give
    PIL's box weights that tie at .5, which float32 weights break the other way, up to 4
    levels), and a radius wider than the image."""
    source = photographs()
    for radius in RADII:
        transform = C(MocoBlur([radius, radius]), v2.PILToTensor())
        ours, theirs = dali_outputs(source, transform), twin_outputs(source, transform)
        assert ours[0].shape == (3, 80, 96)
        for o, t in zip(ours, theirs):
            assert np.array_equal(o.astype(np.float32), t), (radius, np.abs(o.astype(float) - t).max())


def test_each_images_weights_are_pils():
    """The box and its fixed-point weights from each image's drawn radius, in DALI's float32
    arithmetic (the GPU graph's), against pil_blur.fixed_point (the float32 PIL computes in,
    whose pixels the test above checks), over 4,000 radii."""
    from nvidia.dali import fn, pipeline_def

    from dali_loaders.transforms.color import pil_fixed_point
    from dali_loaders.transforms.pil_blur import fixed_point

    @pipeline_def(batch_size=1000, num_threads=1, device_id=None, seed=5)
    def weights():
        radius = fn.random.uniform(range=[0.0, 6.0])
        return (radius, *pil_fixed_point(radius))

    pipe = weights()
    pipe.build()
    for _ in range(4):
        radius, *drawn = (np.array(x.as_array()) for x in pipe.run())
        for k in range(len(radius)):
            assert fixed_point(float(radius[k])) == tuple(int(d[k]) for d in drawn), radius[k]


def impulse(size=31):
    image = np.zeros((size, size, 3), np.uint8)
    image[size // 2, size // 2] = 255
    return image


def spread(output: np.ndarray) -> float:
    """The blurred impulse's standard deviation along the width: PIL's blur makes it the radius."""
    row = output[..., 0].astype(np.float64).sum(axis=0)
    x = np.arange(len(row)) - len(row) // 2
    return math.sqrt((row * x * x).sum() / row.sum()) if row.sum() else 0.0


def test_the_radius_is_drawn_as_the_class_draws_it(blur_path):
    """DINO's class with radius 0.5-2.5 at p=0.6: the spread of a blurred impulse (about the drawn
    radius) by DALI against the class itself, by distribution; the share left as it was. A
    translation ignoring the range or p would fail (the spreads of the default range or the
    default p are checked to be told apart)."""
    image = impulse()
    transform = C(DinoBlur(p=0.6, radius_min=0.5, radius_max=2.5), v2.PILToTensor())
    ours, theirs = both(image, transform)
    left = [[np.array_equal(o, image) for o in outputs] for outputs in (ours, theirs)]
    assert abs(np.mean(left[0]) - 0.4) < 0.08 and abs(np.mean(left[1]) - 0.4) < 0.08
    spreads = [[spread(o) for o in outputs if not np.array_equal(o, image)] for outputs in (ours, theirs)]
    assert stats.ks_2samp(*spreads).pvalue > P_MIN
    assert 0.4 < min(spreads[0]) < 0.7 and 2.2 < max(spreads[0]) < 2.6
    default = [spread(o) for o in both(image, C(DinoBlur(p=0.6), v2.PILToTensor()))[0]
               if not np.array_equal(o, image)]
    assert stats.ks_2samp(spreads[1], default).pvalue < P_MIN


def test_random_apply_of_the_blur_needs_no_conditional_and_blurs_at_its_rate(blur_path):
    """MoCo v2's `RandomApply([GaussianBlur([.1, 2.])], p=0.5)`, here p=0.3: each image is left
    or blurred (a spread over 0), at the rate, on CPU and GPU graphs without conditionals."""
    image = impulse()
    transform = C(v1.RandomApply([MocoBlur([1.0, 2.0])], p=0.3), v2.PILToTensor())
    recipe = transforms.plan(transform, False)
    assert not transforms.needs_conditionals(recipe, "cpu") and not transforms.needs_conditionals(recipe, "gpu")
    ours, theirs = both(image, transform)
    rates = [np.mean([not np.array_equal(o, image) for o in outputs]) for outputs in (ours, theirs)]
    assert abs(rates[0] - 0.3) < 0.08 and abs(rates[1] - 0.3) < 0.08
    spreads = [[spread(o) for o in outputs if not np.array_equal(o, image)] for outputs in (ours, theirs)]
    assert stats.ks_2samp(*spreads).pvalue > P_MIN and min(spreads[0]) > 0.8


def test_solarization_gives_the_classes_pixels():
    source = photographs()
    transform = C(Solarization(1.0), SkipAbove(1.0), v2.PILToTensor())
    for o, t in zip(dali_outputs(source, transform), twin_outputs(source, transform)):
        assert np.array_equal(o.astype(np.float32), t)


def test_the_box_radius_has_the_radius_as_its_deviation():
    """Three passes of the extended box have variance radius ** 2 (the box's own variance,
    (l(l+1)(2l+1)/3 + 2a(l+1)^2) / (2l+1+2a), three times)."""
    for radius in (0.1, 0.7, 1.0, 2.0, 3.3):
        box = box_radius(radius)
        whole, fraction = math.floor(box), box - math.floor(box)
        variance = (whole * (whole + 1) * (2 * whole + 1) / 3 + 2 * fraction * (whole + 1) ** 2) / (2 * box + 1)
        assert math.isclose(3 * variance, radius * radius, rel_tol=1e-5)   # the box in float32, as PIL


def test_a_blur_after_the_conversion_to_a_tensor_is_refused_with_the_reason(tmp_path):
    with pytest.raises(ValueError, match="filters PIL images"):
        dali_outputs(photographs(), C(v2.PILToTensor(), PILGaussianBlur(1.0)))


# -- a recipe as MoCo v2 writes it ---------------------------------------------------------------


def test_mocos_recipe_with_its_own_blur_runs_in_dali_on_both_graphs():
    from dali_loaders.bench.catalog import TwoCropsTransform

    augmentation = v1.Compose([
        v1.RandomResizedCrop(64, scale=(0.2, 1.0)),
        v1.RandomApply([v1.ColorJitter(0.4, 0.4, 0.4, 0.1)], p=0.8),
        v1.RandomGrayscale(p=0.2),
        v1.RandomApply([MocoBlur([0.1, 2.0])], p=0.5),
        v1.RandomHorizontalFlip(),
        v1.ToTensor(),
        v1.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
    ])
    maker = TwoCropsTransform(augmentation)
    assert transforms.untranslatable_reason(maker) is None
    source = photographs(8)
    loader = DaliLoader(source, batch_size=4, shuffle=True, transform=maker, num_workers=1)
    batches = list(loader)
    assert len(batches) == 2 and all(len(views) == 2 and views[0].shape == (4, 3, 64, 64) for views, _ in batches)
    for variant in ("gpu", "cpu-decode"):
        graph = serialized_gpu_graph(source, maker, variant=variant)
        assert b"Filter" in graph
