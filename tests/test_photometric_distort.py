"""v2's RandomChannelPermutation and RandomPhotometricDistort translated into DALI, against
torchvision applying the same objects. Every output is matched against torchvision's own
functional kernels applied with each possible draw (pixel for pixel), which names the draw;
the rates of the draws are then compared with the twin's over many samples."""
import itertools

import numpy as np
import pytest
import torch
from test_transforms import C, both, close, colour_sweep, differences, flat, pil_then, tensor_then
from torchvision.transforms import v2
from torchvision.transforms.v2 import functional as F

pytest.importorskip("nvidia.dali")


@pytest.fixture(params=["fused", "arithmetic"])
def path(request, monkeypatch):
    """Both translations: the augmentation operator's slots (CPU graphs with the plugin) and
    DALI arithmetic (GPU graphs, or no plugin), run on the CPU."""
    from dali_loaders.ops import plugin

    if request.param == "arithmetic":
        monkeypatch.setenv(plugin.DISABLE_AUGMENT_ENV, "1")
    elif not plugin.augment_available():
        pytest.skip("the augmentation operator is not built here")
    return request.param

PERMUTATIONS = list(itertools.permutations(range(3)))


def patch(offset=101):
    """16 x 16 colours of the sweep: saturated and grey ones, every hue."""
    return colour_sweep(offset)[::16, ::16].copy()


def test_channel_permutation_draws_each_order_uniformly():
    image = flat((10, 100, 200))
    ours, theirs = both(image, C(v2.RandomChannelPermutation(), v2.PILToTensor()), n=600)
    rates = []
    for outputs in (ours, theirs):
        orders = [PERMUTATIONS.index(tuple(int(np.argmax(image[0, 0] == o[0, 0, k])) for k in range(3)))
                  for o in outputs]
        assert all((o == o[0, 0]).all() for o in outputs)
        rates.append(np.bincount(orders, minlength=6) / len(outputs))
    for k in range(6):
        assert abs(rates[0][k] - 1 / 6) < 0.06 and abs(rates[1][k] - 1 / 6) < 0.06, rates


def test_channel_permutation_leaves_grey_images_alone(photo_files):
    mean, worst = differences(photo_files, pil_then(v2.Grayscale(1), v2.RandomChannelPermutation()))
    assert mean == worst == 0.0


FIXED = dict(brightness=(1.2, 1.2), contrast=(0.6, 0.6), saturation=(1.5, 1.5), hue=(0.08, 0.08))


def candidates(image: np.ndarray, kind: str, step):
    """{output bytes: [draws]} for every draw of a RandomPhotometricDistort with fixed factors:
    which adjustments apply, contrast before or after, the permutation (None: none), applied
    with torchvision's functional kernels in the step's order."""
    source = v2.functional.to_pil_image(torch.from_numpy(image).permute(2, 0, 1)) if kind == "pil" \
        else torch.from_numpy(image).permute(2, 0, 1).contiguous()
    found = {}
    names = ("brightness", "contrast", "saturation", "hue")
    for on in itertools.product((False, True), repeat=4):
        for before in (False, True):
            for permutation in [None] + PERMUTATIONS:
                applied = dict(zip(names, on))
                x = source
                if applied["brightness"]:
                    x = F.adjust_brightness(x, step.brightness[0])
                if applied["contrast"] and before:
                    x = F.adjust_contrast(x, step.contrast[0])
                if applied["saturation"]:
                    x = F.adjust_saturation(x, step.saturation[0])
                if applied["hue"]:
                    x = F.adjust_hue(x, step.hue[0])
                if applied["contrast"] and not before:
                    x = F.adjust_contrast(x, step.contrast[0])
                if permutation is not None:
                    x = F.permute_channels(x, list(permutation))
                pixels = np.asarray(x) if kind == "pil" else x.permute(1, 2, 0).numpy()
                found.setdefault(pixels.tobytes(), []).append(dict(applied, before=before, permutation=permutation))
    return found


def draws(outputs, table):
    """Each output's draws (a list of the draws that make it), failing on an output no draw makes."""
    named = []
    for output in outputs:
        key = np.ascontiguousarray(output.astype(np.uint8)).tobytes()
        assert key in table, "an output that no draw of torchvision's makes"
        named.append(table[key])
    return named


def rate(named, what, least=0.8):
    """The rate of `what(draw)` over the outputs whose draws all agree on it (at least `least`
    of them)."""
    values = [what(options[0]) for options in named if len({what(o) for o in options}) == 1]
    assert len(values) > least * len(named), what
    return np.array(values, dtype=float)


@pytest.mark.parametrize("kind", ["pil", "tensor"])
def test_photometric_distort_outputs_are_torchvisions_and_draws_come_at_their_rates(kind, path):
    image = patch()
    step = v2.RandomPhotometricDistort(**FIXED, p=0.4)
    transform = C(step, v2.PILToTensor()) if kind == "pil" else C(v2.ToImage(), step)
    table = candidates(image, kind, step)
    ours, theirs = (draws(outputs, table) for outputs in both(image, transform))
    for name in ("brightness", "contrast", "saturation", "hue"):
        a, b = rate(ours, lambda d: d[name]), rate(theirs, lambda d: d[name])
        close(a, b, 0.1, f"{name} rate")   # p = 0.5 (the default) is ~4 standard errors away
        assert abs(a.mean() - 0.4) < 0.08, name
    # the identity permutation is no permutation: 5 of the 6 drawn show
    permuted = [rate(named, lambda d: d["permutation"] not in (None, PERMUTATIONS[0])) for named in (ours, theirs)]
    close(*permuted, 0.1, "permutation rate")
    assert abs(permuted[0].mean() - 0.4 * 5 / 6) < 0.08
    # seen only where contrast and a step between its two places (saturation, hue) both apply
    before = [rate(named, lambda d: d["before"], least=0.15) for named in (ours, theirs)]
    close(*before, 0.25, "contrast before")


def test_photometric_distort_always_applied_permutes_uniformly(path):
    image = patch(7)
    step = v2.RandomPhotometricDistort(**FIXED, p=1.0)
    table = candidates(image, "pil", step)
    for named in (draws(outputs, table) for outputs in both(image, C(step, v2.PILToTensor()), n=600)):
        orders = rate(named, lambda d: PERMUTATIONS.index(d["permutation"] or PERMUTATIONS[0]))
        assert all(abs((orders == k).mean() - 1 / 6) < 0.06 for k in range(6))
        assert rate(named, lambda d: d["hue"]).min() == 1.0


def test_photometric_distort_draws_factors_from_their_ranges(path):
    """Brightness on a grey image (the other adjustments leave grey as it is), and saturation
    as the spread of a colour's channels (the permutation keeps it)."""
    grey = C(v2.RandomPhotometricDistort(brightness=(0.5, 0.9), contrast=(1.0, 1.0), saturation=(1.0, 1.0),
                                         hue=(0.0, 0.0), p=1.0), v2.PILToTensor())
    ours, theirs = ([o.mean() / 128.0 for o in outputs] for outputs in both(flat(), grey))
    close(ours, theirs, 0.03, "brightness factor")
    assert 0.49 <= min(ours) and max(ours) <= 0.91
    colour = flat((150, 110, 90))
    luma = (150 * 19595 + 110 * 38470 + 90 * 7471 + 32768) >> 16
    saturation = C(v2.RandomPhotometricDistort(brightness=(1.0, 1.0), contrast=(1.0, 1.0), saturation=(0.2, 0.6),
                                               hue=(0.0, 0.0), p=1.0), v2.ToImage())
    spread = [[(float(o[0, 0].max()) - luma) / (150 - luma) for o in outputs] for outputs in both(colour, saturation)]
    close(*spread, 0.04, "saturation factor")
    assert 0.15 <= min(spread[0]) and max(spread[0]) <= 0.65


@pytest.mark.parametrize("transform", [pil_then(v2.RandomPhotometricDistort(p=0.0)),
                                       tensor_then(v2.RandomPhotometricDistort(p=0.0))], ids=["pil", "tensor"])
def test_photometric_distort_never_applied_gives_the_photographs_back(photo_files, transform, path):
    mean, worst = differences(photo_files, transform)
    assert mean == worst == 0.0
