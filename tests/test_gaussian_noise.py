"""v2's GaussianNoise translated into DALI, against torchvision applying the same object: the
noise's mean, spread, shape, truncation and clipping over many samples of flat images, on
uint8 and float tensors, each by our operator (CPU graphs) and by DALI's normals (GPU graphs,
no plugin); each test fails if the parameter it covers is ignored."""
import numpy as np
import pytest
import torch
from image_data import write_image_folder
from resume_check import assert_resume_gives_the_rest
from test_transforms import FLOAT, C, both, close, flat, many
from torchvision.transforms import v2

from dali_loaders import transforms
from dali_loaders.dali_compat import graph_operators
from dali_loaders.loader import dali_loader
from dali_loaders.loader.build import serialized_gpu_graph
from dali_loaders.ops import plugin
from dali_loaders.sources.image_files import ImageFiles

pytest.importorskip("nvidia.dali")

OUR_OPERATOR = "DaliLoadersGaussianNoise"


@pytest.fixture(params=["our operator", "DALI's normals"])
def path(request, monkeypatch):
    """A test twice: by our operator (CPU graphs), and without the plugin by DALI's normals and
    arithmetic (what GPU graphs run)."""
    if request.param == "DALI's normals":
        monkeypatch.setenv(plugin.DISABLE_AUGMENT_ENV, "1")
    else:
        assert plugin.augment_available()
    return request.param


def noise(outputs, level):
    return np.concatenate([o.astype(np.float64).ravel() - level for o in outputs])


def test_uint8_noise_mean_and_spread(path):
    ours, theirs = (noise(o, 100) for o in both(flat((100,) * 3, 16), C(v2.ToImage(), v2.GaussianNoise(0.05, 0.04)),
                                                n=100))
    close(ours, theirs, 0.3, "noise mean")                        # 12.75 levels; the default mean 0
    close(ours.std(), theirs.std(), 0.3, "noise spread")          # 10.2 levels; the default sigma 25.5
    assert abs(ours.mean() - 12.25) < 0.5   # torch truncates toward zero: 12.75 - ~0.5


def test_uint8_noise_is_truncated_toward_zero(path):
    """sigma = 0.002 is half a level: truncated, |noise| >= 1 in ~5% of pixels (rounded: ~33%)."""
    ours, theirs = (noise(o, 100) for o in both(flat((100,) * 3, 16), C(v2.ToImage(), v2.GaussianNoise(0.0, 0.002)),
                                                n=100))
    close(ours != 0, theirs != 0, 0.01, "rate of changed pixels")
    assert (ours != 0).mean() < 0.08


def test_uint8_noise_is_clipped(path):
    ours, theirs = (noise(o, 250) for o in both(flat((250,) * 3, 16), C(v2.ToImage(), v2.GaussianNoise(0.1, 0.1)),
                                                n=50))
    for values in (ours, theirs):
        assert values.max() == 5 and values.min() >= -250
    close(ours == 5, theirs == 5, 0.02, "rate of clipped pixels")


def test_uint8_noise_unclipped_wraps_around_as_torch_casts(path):
    transform = C(v2.ToImage(), v2.GaussianNoise(0.1, 0.1, clip=False))
    ours, theirs = (noise(o, 250) for o in both(flat((250,) * 3, 16), transform, n=50))
    close(ours < -200, theirs < -200, 0.02, "rate of wrapped pixels")   # 250 + 25.5 + noise past 255
    assert (ours < -200).mean() > 0.5 and ours.max() <= 5


@pytest.mark.parametrize("clip", [True, False])
def test_float_noise_mean_spread_and_clip(clip, path):
    transform = C(v2.ToImage(), FLOAT, v2.GaussianNoise(0.2, 0.3, clip=clip))
    ours, theirs = (noise(o, 200 / 255) for o in both(flat((200,) * 3, 16), transform, n=100))
    close(ours, theirs, 0.01, "noise mean")
    close(ours.std(), theirs.std(), 0.01, "noise spread")
    if clip:
        assert ours.max() <= 55 / 255 + 1e-6 and (ours >= 55 / 255 - 1e-6).mean() > 0.4
    else:
        assert ours.max() > 0.5 and abs(ours.mean() - 0.2) < 0.01


def test_noise_after_normalize_is_added_to_the_normalized_pixels(path):
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


def test_the_noise_is_normal_in_its_tails_as_torchs():
    """The noise's distribution, not only its first two moments: its quantiles and how often it
    lies beyond 1, 2 and 3 deviations, against torch's randn (a ziggurat whose tail or wedges
    were wrong keeps its mean and spread within these tests' reach)."""
    transform = C(v2.ToImage(), FLOAT, v2.GaussianNoise(0.0, 0.1, clip=False))
    ours, theirs = (noise(o, 128 / 255) / 0.1 for o in both(flat((128,) * 3, 32), transform, n=40))
    assert ours.size == theirs.size == 40 * 32 * 32 * 3
    quantiles = [0.001, 0.01, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99, 0.999]
    np.testing.assert_allclose(np.quantile(ours, quantiles), np.quantile(theirs, quantiles), atol=0.08)
    for k, rate in ((1, 0.3173), (2, 0.0455), (3, 0.0027)):
        close(np.abs(ours) > k, np.abs(theirs) > k, 4 * np.sqrt(2 * rate / ours.size) + 1e-4, f"beyond {k} sigma")


def test_each_image_and_each_epoch_draws_its_own_noise():
    """Our operator's normals come from a seed per sample that the graph draws: the images of a
    batch, and an image across epochs, get unrelated noise, and neighbouring values too."""
    transform = C(v2.ToImage(), FLOAT, v2.GaussianNoise(0.0, 0.1, clip=False))
    loader = dali_loader(many(flat((128,) * 3, 64), 8), transform, train=True, batch_size=8, num_threads=2, seed=3)
    epochs = [next(iter(loader))[0].numpy() - 128 / 255 for _ in range(2)]
    first = epochs[0].reshape(8, -1)
    correlations = np.corrcoef(np.concatenate([first, epochs[1].reshape(8, -1)]))
    off_diagonal = correlations[~np.eye(16, dtype=bool)]
    assert np.abs(off_diagonal).max() < 0.05          # 12,288 values each: ~0.009 per pair (0.03 at most of 120)
    neighbours = np.corrcoef(first[:, :-1].ravel(), first[:, 1:].ravel())[0, 1]
    assert abs(neighbours) < 0.03


@pytest.mark.parametrize("dtype", ["uint8", "float32"])
def test_the_plain_cpu_path_gives_the_simd_paths_values(dtype):
    from nvidia.dali import fn, pipeline_def

    from dali_loaders.ops.noise import sample_seeds

    rng = np.random.default_rng(5)
    images = [rng.integers(0, 256, (17 + i, 23, 3), dtype=np.uint8) for i in range(4)]
    if dtype == "float32":
        images = [image.astype(np.float32) / 255 for image in images]

    @pipeline_def(batch_size=4, num_threads=2, device_id=None, seed=3)
    def pipe():
        data = fn.external_source(source=lambda: images, batch=True, layout="HWC")
        seeds = sample_seeds()
        args = dict(noise_seed=seeds, mean=3.0 if dtype == "uint8" else 0.01, sigma=20.0 if dtype == "uint8" else 0.1)
        return (fn.dali_loaders_gaussian_noise(data, **args), fn.dali_loaders_gaussian_noise(data, **args, _portable=True),
                fn.dali_loaders_gaussian_noise(data, **args, clip=False))

    assert plugin.augment_available()
    p = pipe()
    p.build()
    fast, portable, unclipped = ([np.array(t) for t in out] for out in p.run())
    for a, b, image in zip(fast, portable, images):
        np.testing.assert_array_equal(a, b)
        assert a.shape == image.shape and a.dtype == image.dtype and not np.array_equal(a, image)
    if dtype == "float32":   # the same normals, with and without the clamp
        for a, b in zip(fast, unclipped):
            np.testing.assert_array_equal(a, np.clip(b, 0.0, 1.0))


def test_cpu_graphs_add_the_noise_in_our_operator_gpu_graphs_with_dalis(tmp_path):
    write_image_folder(str(tmp_path), {"a": 2})
    images = ImageFiles(str(tmp_path))
    for transform in (C(v2.ToImage(), v2.GaussianNoise()), C(v2.ToImage(), FLOAT, v2.GaussianNoise()),
                      C(v2.ToImage(), v2.ToDtype(torch.float64, scale=True), v2.GaussianNoise())):
        for variant, ours in (("cpu", True), ("gpu", False), ("cpu-decode", False)):
            operators = [kind for kind, *_ in graph_operators(serialized_gpu_graph(images, transform, variant=variant))]
            assert (OUR_OPERATOR in operators) == ours, (transform, variant)
            assert ("random__Normal" in operators) != ours, (transform, variant)


def test_a_loader_adding_noise_resumes_mid_epoch_exactly():
    """The seeds are the graph's random operator: a state saved mid-epoch gives the rest of the
    epoch bit for bit, noise on uint8 and on floats included."""
    from dali_loaders.sources.arrays import ArraySource

    pixels = np.random.default_rng(4).integers(0, 256, (48, 20, 24, 3), dtype=np.uint8)
    recipe = C(v2.ToImage(), v2.GaussianNoise(0.0, 0.05), FLOAT, v2.GaussianNoise(0.0, 0.05, clip=False))

    def loader():
        return dali_loader(ArraySource(pixels, np.arange(48), "indexed"), recipe, train=True, batch_size=8,
                           num_threads=2, seed=5)

    assert plugin.augment_available()
    assert_resume_gives_the_rest(loader, taken=2, epoch=1)
