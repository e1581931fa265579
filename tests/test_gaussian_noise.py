"""v2's GaussianNoise translated into DALI, against torchvision applying the same object: the
noise's mean, spread, truncation and clipping over many samples of flat images, on uint8 and
float tensors; each test fails if the parameter it covers is ignored."""
import numpy as np
import pytest
from test_transforms import FLOAT, C, both, close, flat, many
from torchvision.transforms import v2

from dali_loaders import transforms
from dali_loaders.loader import dali_loader

pytest.importorskip("nvidia.dali")


def noise(outputs, level):
    return np.concatenate([o.astype(np.float64).ravel() - level for o in outputs])


def test_uint8_noise_mean_and_spread():
    ours, theirs = (noise(o, 100) for o in both(flat((100,) * 3, 16), C(v2.ToImage(), v2.GaussianNoise(0.05, 0.04)),
                                                n=100))
    close(ours, theirs, 0.3, "noise mean")                        # 12.75 levels; the default mean 0
    close(ours.std(), theirs.std(), 0.3, "noise spread")          # 10.2 levels; the default sigma 25.5
    assert abs(ours.mean() - 12.25) < 0.5   # torch truncates toward zero: 12.75 - ~0.5


def test_uint8_noise_is_truncated_toward_zero():
    """sigma = 0.002 is half a level: truncated, |noise| >= 1 in ~5% of pixels (rounded: ~33%)."""
    ours, theirs = (noise(o, 100) for o in both(flat((100,) * 3, 16), C(v2.ToImage(), v2.GaussianNoise(0.0, 0.002)),
                                                n=100))
    close(ours != 0, theirs != 0, 0.01, "rate of changed pixels")
    assert (ours != 0).mean() < 0.08


def test_uint8_noise_is_clipped():
    ours, theirs = (noise(o, 250) for o in both(flat((250,) * 3, 16), C(v2.ToImage(), v2.GaussianNoise(0.1, 0.1)),
                                                n=50))
    for values in (ours, theirs):
        assert values.max() == 5 and values.min() >= -250
    close(ours == 5, theirs == 5, 0.02, "rate of clipped pixels")


def test_uint8_noise_unclipped_wraps_around_as_torch_casts():
    transform = C(v2.ToImage(), v2.GaussianNoise(0.1, 0.1, clip=False))
    ours, theirs = (noise(o, 250) for o in both(flat((250,) * 3, 16), transform, n=50))
    close(ours < -200, theirs < -200, 0.02, "rate of wrapped pixels")   # 250 + 25.5 + noise past 255
    assert (ours < -200).mean() > 0.5 and ours.max() <= 5


@pytest.mark.parametrize("clip", [True, False])
def test_float_noise_mean_spread_and_clip(clip):
    transform = C(v2.ToImage(), FLOAT, v2.GaussianNoise(0.2, 0.3, clip=clip))
    ours, theirs = (noise(o, 200 / 255) for o in both(flat((200,) * 3, 16), transform, n=100))
    close(ours, theirs, 0.01, "noise mean")
    close(ours.std(), theirs.std(), 0.01, "noise spread")
    if clip:
        assert ours.max() <= 55 / 255 + 1e-6 and (ours >= 55 / 255 - 1e-6).mean() > 0.4
    else:
        assert ours.max() > 0.5 and abs(ours.mean() - 0.2) < 0.01


def test_noise_after_normalize_is_added_to_the_normalized_pixels():
    transform = C(v2.ToImage(), FLOAT, v2.Normalize((0.5,) * 3, (0.25,) * 3), v2.GaussianNoise(0.0, 0.1, clip=False))
    ours, theirs = (noise(o, (100 / 255 - 0.5) / 0.25) for o in both(flat((100,) * 3, 16), transform, n=50))
    close(ours, theirs, 0.005, "noise mean")
    close(ours.std(), theirs.std(), 0.005, "noise spread")
    assert abs(ours.std() - 0.1) < 0.005


def test_on_pil_images_it_is_refused_by_name():
    """torchvision's GaussianNoise refuses PIL images too."""
    loader = dali_loader(many(flat(size=8), 4), C(v2.GaussianNoise()), train=True, batch_size=2, num_threads=1)
    with pytest.raises(ValueError, match="GaussianNoise takes tensors.*put ToImage before it"):
        list(loader)


def test_a_negative_sigma_is_refused_by_name():
    step = v2.GaussianNoise()
    step.sigma = -1.0
    with pytest.raises(ValueError, match="GaussianNoise: sigma=-1.0"):
        transforms.plan(step, python_fallback=False)
