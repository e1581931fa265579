"""Colour steps after the conversion to float (ToTensor, ToDtype, Normalize): ColorJitter,
Grayscale, RandomGrayscale, GaussianBlur and RandomApply of them, as torchvision runs them on
the float tensor (unrounded; blends clamped to 0 .. 1, after Normalize too). Both ways a CPU
graph runs ColorJitter there (our operator, and DALI's arithmetic, which GPU graphs use):
pinned parameters against DataLoader's batches, the drawn order against each of
torchvision's orders, drawn factors and coins by distribution."""
from itertools import permutations

import numpy as np
import pytest
import torch
from image_data import photo
from test_transforms import both, close, dali_outputs, flat, hue_of, many
from torchvision import transforms as v1
from torchvision.transforms import v2
from torchvision.transforms.v2 import functional as F

from dali_loaders import DaliLoader, transforms

pytest.importorskip("nvidia.dali")

FLOAT = [v2.ToImage(), v2.ToDtype(torch.float32, scale=True)]
NORM = v2.Normalize([0.5, 0.4, 0.3], [0.2, 0.25, 0.3])
V1_NORM = v1.Normalize([0.5, 0.4, 0.3], [0.2, 0.25, 0.3])


def C(*steps):
    """The steps on the float image (the twin: ToImage, ToDtype float32)."""
    return v2.Compose([*FLOAT, *steps])


PINNED = {
    "v1 brightness": v1.Compose([v1.ToTensor(), v1.ColorJitter(brightness=(1.4, 1.4))]),
    "v1 contrast, Normalize": v1.Compose([v1.ToTensor(), v1.ColorJitter(contrast=(0.6, 0.6)), V1_NORM]),
    "v1 saturation": v1.Compose([v1.ToTensor(), v1.ColorJitter(saturation=(1.7, 1.7))]),
    "v1 hue": v1.Compose([v1.ToTensor(), v1.ColorJitter(hue=(0.2, 0.2))]),
    "v2 brightness dark": v2.Compose([*FLOAT, v2.ColorJitter(brightness=(0.3, 0.3))]),
    "v2 contrast up": v2.Compose([*FLOAT, v2.ColorJitter(contrast=(1.5, 1.5))]),
    "v2 saturation down": v2.Compose([*FLOAT, v2.ColorJitter(saturation=(0.2, 0.2))]),
    "v2 hue negative": v2.Compose([*FLOAT, v2.ColorJitter(hue=(-0.3, -0.3)), NORM]),
    # torchvision clamps the blends to 0 .. 1 whatever the units: after Normalize too
    "v2 after Normalize": v2.Compose([*FLOAT, NORM, v2.ColorJitter(contrast=(1.5, 1.5))]),
    "grey images (one channel)": v2.Compose([v2.Grayscale(1), *FLOAT, v2.ColorJitter(contrast=(1.6, 1.6)),
                                             v2.ColorJitter(brightness=(0.8, 0.8), saturation=(0.5, 0.5), hue=(0.2, 0.2))]),
    "flip, then ColorJitter, then a crop": v2.Compose([*FLOAT, v2.RandomHorizontalFlip(1.0),
                                                       v2.ColorJitter(brightness=(0.7, 0.7)), v2.CenterCrop(20)]),
    "Grayscale one channel": v2.Compose([*FLOAT, v2.Grayscale(1)]),
    "v1 Grayscale three channels, Normalize": v1.Compose([v1.ToTensor(), v1.Grayscale(3), V1_NORM]),
    "RandomGrayscale p=1": v2.Compose([*FLOAT, v2.RandomGrayscale(1.0)]),
    "v1 RandomGrayscale p=0": v1.Compose([v1.ToTensor(), v1.RandomGrayscale(0.0)]),
    "GaussianBlur": v2.Compose([*FLOAT, v2.GaussianBlur((5, 3), sigma=(1.2, 1.2)), NORM]),
    "v1 GaussianBlur after Normalize": v1.Compose([v1.ToTensor(), V1_NORM, v1.GaussianBlur(7, sigma=2.0)]),
    "RandomApply p=1": v1.Compose([v1.ToTensor(), v1.RandomApply([v1.ColorJitter(saturation=(0.5, 0.5)),
                                                                  v1.GaussianBlur(3, sigma=0.8)], p=1.0)]),
    "RandomApply p=0": v2.Compose([*FLOAT, v2.RandomApply([v2.ColorJitter(brightness=(0.5, 0.5))], p=0.0)]),
}



def batches_apart(root, transform, **loader_args):
    """The largest difference between DaliLoader's batches and DataLoader's (labels equal)."""
    from torchvision.datasets import ImageFolder

    dataset = ImageFolder(root, transform=transform)
    assert transforms.untranslatable_reason(transform) is None
    ours = list(DaliLoader(dataset, batch_size=1, **loader_args))
    theirs = list(torch.utils.data.DataLoader(dataset, batch_size=1))
    assert len(ours) == len(theirs) == 6
    for (a, la), (b, lb) in zip(ours, theirs):
        assert torch.equal(la, lb) and a.shape == b.shape and a.dtype == b.dtype
    # torchvision's hue meets 0 / 0 where a pixel's largest channel is 0 (after Normalize): NaN
    # there, on every channel in v1 (its einsum), on those selected here; the rest is equal
    return max((a.float().nan_to_num() - b.float().nan_to_num()).abs().max().item()
               for (a, _), (b, _) in zip(ours, theirs))


@pytest.mark.parametrize("name", list(PINNED))
def test_pinned_colour_steps_after_the_float_conversion_are_torchvisions(photo_classes, name, augment_path):
    assert batches_apart(photo_classes, PINNED[name]) <= 2e-5   # float32 rounding (torch's sums and fused products)


@pytest.mark.parametrize("version", [v1, v2], ids=["v1", "v2"])
def test_the_hue_of_values_outside_0_1_is_torchvisions(photo_classes, version, augment_path):
    """After Normalize. torchvision clamps p, q and t but not v, so there its hue is
    discontinuous at the sectors' borders: an input a float32 step apart (torch's normalization
    and ours round differently) can land in the next sector. So torchvision's hue is applied to
    our own normalized images here, and the two compared."""
    from torchvision.datasets import ImageFolder

    before = version.Compose([version.ToTensor() if version is v1 else v2.Compose(FLOAT), V1_NORM])
    after = version.Compose([*before.transforms, version.ColorJitter(hue=(0.1, 0.1))])
    ours = [a for a, _ in DaliLoader(ImageFolder(photo_classes, transform=after), batch_size=1)]
    normalized = [a for a, _ in DaliLoader(ImageFolder(photo_classes, transform=before), batch_size=1)]
    theirs = [(F.adjust_hue if version is v2 else v1.functional.adjust_hue)(a, 0.1) for a in normalized]
    assert max((a.nan_to_num() - b.nan_to_num()).abs().max().item() for a, b in zip(ours, theirs)) <= 2e-5
    assert max(a.abs().max().item() for a in normalized) > 1.5   # values well outside 0 .. 1


def test_half_precision_images_are_jittered_in_float32_and_stored_as_half(photo_classes, augment_path):
    """torch computes float16 images in float16; here in float32, then rounded to float16: a
    float16 step (1e-3 near 1.0) apart at most."""
    transform = v2.Compose([v2.ToImage(), v2.ToDtype(torch.float16, scale=True), v2.ColorJitter(contrast=(1.3, 1.3))])
    assert batches_apart(photo_classes, transform) <= 2e-3


# -- the order of the adjustments ------------------------------------------------------------

FACTORS = {"brightness": 1.3, "contrast": 0.6, "saturation": 1.8, "hue": 0.15}
ADJUST = {"brightness": F.adjust_brightness, "contrast": F.adjust_contrast, "saturation": F.adjust_saturation,
          "hue": F.adjust_hue}


def orders_of(image: torch.Tensor, names):
    """{order: torchvision's image} for every order of the adjustments `names`."""
    results = {}
    for order in permutations(names):
        out = image
        for name in order:
            out = ADJUST[name](out, FACTORS[name])
        results[order] = out.numpy()
    return results


@pytest.mark.parametrize("names", [tuple(FACTORS), ("contrast", "hue")], ids=["all four", "contrast and hue"])
def test_each_image_gets_one_of_torchvisions_orders_uniformly(names, augment_path):
    """Pinned factors whose orders give different images: each output is one of them, and the
    orders come about equally often (a chi-square test; a fixed order would see one)."""
    from scipy import stats

    pixels = np.array(photo(12, 10, 3))
    transform = v2.Compose([*FLOAT, v2.ColorJitter(**{name: (FACTORS[name], FACTORS[name]) for name in names})])
    image = transform.transforms[1](transform.transforms[0](torch.from_numpy(pixels).permute(2, 0, 1)))
    results = orders_of(image, names)
    assert min(np.abs(a - b).max() for a in results.values() for b in results.values() if a is not b) > 1e-3
    n = 60 * len(results)
    counts = dict.fromkeys(results, 0)
    for output in dali_outputs(many(pixels, n), transform, batch=n // 4):
        gaps = {order: np.abs(output - result).max() for order, result in results.items()}
        order = min(gaps, key=gaps.get)
        assert gaps[order] <= 2e-5, gaps[order]
        counts[order] += 1
    statistic = stats.chisquare(list(counts.values())).statistic
    assert statistic <= stats.chi2.ppf(1 - 1e-4, len(results) - 1), counts


# -- drawn factors and coins -----------------------------------------------------------------


def unit(outputs):
    return [o.astype(np.float64) for o in outputs]


def test_brightness_factor_after_the_float_conversion(augment_path):
    transform = C(v2.ColorJitter(brightness=(0.3, 0.9)))
    ours, theirs = [[o.mean() / (128 / 255) for o in unit(out)] for out in both(flat(), transform)]
    close(ours, theirs, 0.03, "brightness factor")   # ignored: 1.0
    assert 0.29 <= min(ours) and max(ours) <= 0.91


def test_contrast_factor_after_the_float_conversion(augment_path):
    """Two grey levels: the contrast factor is the ratio of their differences."""
    image = flat((100, 100, 100))
    image[:, 4:] = 160
    transform = C(v2.ColorJitter(contrast=(1.2, 1.6)))
    factors = [[(o[0, 5, 0] - o[0, 0, 0]) / (60 / 255) for o in unit(out)] for out in both(image, transform)]
    close(*factors, 0.03, "contrast factor")
    assert 1.19 <= min(factors[0]) and max(factors[0]) <= 1.61


def test_saturation_factor_after_the_float_conversion(augment_path):
    """A colour pixel's distance from its (float) grey scales with the saturation factor."""
    image = flat((150, 110, 90))
    grey = (0.2989 * 150 + 0.587 * 110 + 0.114 * 90) / 255
    transform = C(v2.ColorJitter(saturation=(0.2, 0.6)))
    factors = [[(o[0, 0, 0] - grey) / (150 / 255 - grey) for o in unit(out)] for out in both(image, transform)]
    close(*factors, 0.03, "saturation factor")
    assert 0.19 <= min(factors[0]) and max(factors[0]) <= 0.61


def test_hue_shift_after_the_float_conversion(augment_path):
    image = flat((200, 60, 60))
    base = hue_of((200, 60, 60))
    transform = C(v2.ColorJitter(hue=(0.05, 0.15)))
    shifts = [[(hue_of(o[0, 0] * 255) - base + 0.5) % 1.0 - 0.5 for o in unit(out)] for out in both(image, transform)]
    close(*shifts, 0.01, "hue shift")   # ignored: 0
    assert min(shifts[0]) >= 0.049 and max(shifts[0]) <= 0.151


def test_blur_sigma_after_the_float_conversion():
    """An impulse's peak after the blur falls as sigma grows: its distribution, torchvision's."""
    image = flat((0, 0, 0), size=9)
    image[4, 4] = 255
    transform = C(v2.GaussianBlur(9, sigma=(0.5, 2.0)))
    peaks = [[o[4, 4, 0] for o in unit(out)] for out in both(image, transform)]
    close(*peaks, 0.02, "blurred peak")   # sigma 0.5: 0.62; 2.0: 0.04
    assert max(peaks[0]) <= 0.62 and min(peaks[0]) >= 0.039


@pytest.mark.parametrize("transform", [C(v2.RandomGrayscale(0.3)),
                                       C(v2.RandomApply([v2.ColorJitter(brightness=(0.5, 0.5))], p=0.3)),
                                       v1.Compose([v1.ToTensor(), v1.RandomApply([v1.Grayscale(3)], p=0.7)])],
                         ids=["RandomGrayscale", "RandomApply", "v1 RandomApply"])
def test_coins_after_the_float_conversion_land_at_torchvisions_rate(transform, augment_path):
    """Each image the step's result or the image itself; the rate of the first, torchvision's."""
    image = flat((200, 60, 60))
    rates = [np.mean([abs(o[0, 0, 0] - 200 / 255) > 1e-3 for o in unit(out)]) for out in both(image, transform)]
    close(*rates, 0.1, "rate applied")   # 4 standard errors of the difference at 400 samples
    p = transform.transforms[-1].p
    assert abs(rates[0] - p) <= 0.1, rates



# -- what stays refused ----------------------------------------------------------------------


def test_a_random_apply_of_a_uint8_step_after_the_conversion_is_refused_by_name():
    transform = v2.Compose([*FLOAT, v2.RandomApply([v2.ColorJitter(0.2), v2.ElasticTransform()])])
    why = transforms.untranslatable_reason(transform)
    assert why and "ElasticTransform inside it is translated there on uint8 pixels only" in why, why
    assert transforms.plan(transform, python_fallback=True).python == transform.transforms[2:]


def test_the_float_steps_gpu_graph_has_no_gpu_to_cpu_edge(photo_classes):
    """The GPU graph runs ColorJitter in DALI's arithmetic: nothing it computes goes back to the CPU."""
    from test_gpu_graphs import gpu_to_cpu_edges

    from dali_loaders.loader.build import serialized_gpu_graph
    from dali_loaders.sources.image_files import ImageFiles

    transform = v2.Compose([*FLOAT, v2.RandomApply([v2.ColorJitter(0.4, 0.4, 0.4, 0.1)], p=0.8),
                            v2.RandomGrayscale(0.2), v2.GaussianBlur(5, (0.1, 2.0)), NORM])
    for variant in ("gpu", "cpu-decode"):
        assert gpu_to_cpu_edges(serialized_gpu_graph(ImageFiles(photo_classes), transform, variant=variant)) == []
