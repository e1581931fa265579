"""DaliLoadersNormalize (the CPU graphs' last step) against DALI's crop_mirror_normalize, bit
for bit, and against torchvision's flip + ToDtype + Normalize; the C gather of an array
source's windows against torchvision's pad and crop; the loader with and without the plugin."""
import numpy as np
import pytest
import torch
from torchvision.transforms import v2
from torchvision.transforms.v2 import functional as F

from dali_loaders.ops import gather, normalize, plugin

pytest.importorskip("nvidia.dali")
if not plugin.normalize_available():
    pytest.skip("the normalization plugin cannot be built here", allow_module_level=True)

CIFAR_MEAN = [0.4914 * 255, 0.4822 * 255, 0.4465 * 255]
CIFAR_STD = [0.2470 * 255, 0.2435 * 255, 0.2616 * 255]


def _both(images, flips, dtype, layout, mean=None, std=None, portable=False):
    """(crop_mirror_normalize's batch, ours) on the same images and flips."""
    from nvidia.dali import fn, pipeline_def

    norm = {} if mean is None else dict(mean=mean, std=std)

    @pipeline_def(batch_size=len(images), num_threads=2, device_id=None)
    def pipe():
        data = fn.external_source(source=lambda: images, layout="HWC")
        mirror = fn.external_source(source=lambda: [np.int32(f) for f in flips])
        theirs = fn.crop_mirror_normalize(data, mirror=mirror, dtype=dtype, output_layout=layout, **norm)
        ours = fn.dali_loaders_normalize(data, mirror=mirror, dtype=dtype, output_layout=layout, _portable=portable,
                                         **norm)
        return theirs, ours

    p = pipe()
    p.build()
    theirs, ours = p.run()
    return [np.array(t) for t in theirs], [np.array(t) for t in ours]


@pytest.mark.parametrize("portable", [False, True])
@pytest.mark.parametrize("shape", [(32, 32, 3), (7, 13, 3), (33, 21, 1), (5, 9, 4), (40, 17, 3)])
@pytest.mark.parametrize("layout", ["CHW", "HWC"])
def test_equals_crop_mirror_normalize_bit_for_bit(shape, layout, portable):
    from nvidia.dali import types

    rng = np.random.default_rng(sum(shape))
    images = [rng.integers(0, 256, shape, dtype=np.uint8) for _ in range(24)]
    flips = rng.integers(0, 2, 24)
    assert 0 < flips.sum() < 24
    c = shape[2]
    # the CIFAR numbers, and what the translator hands over for ToDtype(scale) + Normalize
    for mean, std in (((CIFAR_MEAN * 2)[:c], (CIFAR_STD * 2)[:c]),
                      ([-o / s for o, s in zip([-1.99, 0.3, -0.7, 2.1][:c], [0.0157, 0.016, 0.0175, 0.02][:c])],
                       [1 / s for s in [0.0157, 0.016, 0.0175, 0.02][:c]])):
        theirs, ours = _both(images, flips, types.FLOAT, layout, mean, std, portable)
        for a, b in zip(theirs, ours):
            assert a.dtype == b.dtype == np.float32 and a.shape == b.shape
            assert np.array_equal(a.view(np.uint32), b.view(np.uint32))
    theirs, ours = _both(images, flips, types.UINT8, layout, portable=portable)
    for a, b in zip(theirs, ours):
        assert a.dtype == b.dtype == np.uint8 and np.array_equal(a, b)


def test_equals_torchvisions_flip_and_normalize():
    """An independent reference: torchvision's own kernels on the same images."""
    from nvidia.dali import types

    rng = np.random.default_rng(3)
    images = [rng.integers(0, 256, (32, 32, 3), dtype=np.uint8) for _ in range(16)]
    flips = rng.integers(0, 2, 16)
    _, ours = _both(images, flips, types.FLOAT, "CHW", CIFAR_MEAN, CIFAR_STD)
    mean, std = [m / 255 for m in CIFAR_MEAN], [s / 255 for s in CIFAR_STD]
    for image, flip, out in zip(images, flips, ours):
        tensor = torch.from_numpy(image).permute(2, 0, 1)
        tensor = F.horizontal_flip(tensor) if flip else tensor
        expected = F.normalize(F.to_dtype(tensor, torch.float32, scale=True), mean, std)
        torch.testing.assert_close(torch.from_numpy(out), expected, rtol=0, atol=2e-6)


@pytest.mark.parametrize("layout", ["CHW", "HWC"])
@pytest.mark.parametrize("value,noise", [(None, "none"), ([0.5, -1.25, 2.0], "none"), (None, "pixel"),
                                         (None, "channel")])
def test_erasing_as_it_normalizes_equals_the_erase_operator_after_it(layout, value, noise):
    """RandomErasing folded into the normalize operator (erase_*) writes the very box, fill and
    noise DaliLoadersErase writes after it from the same draws, bit for bit; images not erased
    (the coin, or no box fitting) are the normalized ones."""
    from nvidia.dali import fn, pipeline_def, types

    from dali_loaders.ops import augment

    if not plugin.augment_available():
        pytest.skip("the augmentation plugin cannot be built here")
    rng = np.random.default_rng(7)
    images = [rng.integers(0, 256, (int(h), int(w), 3), dtype=np.uint8)
              for h, w in rng.integers(5, 40, (32, 2))]
    flips = rng.integers(0, 2, len(images))

    @pipeline_def(batch_size=len(images), num_threads=2, device_id=None, seed=11)
    def pipe():
        data = fn.external_source(source=lambda: images, layout="HWC")
        mirror = fn.external_source(source=lambda: [np.int32(f) for f in flips])
        arguments = augment.erase_arguments(0.7, (0.05, 0.5), (0.3, 3.3), value, noise)
        plain = normalize.call(data, mirror, types.FLOAT, layout, CIFAR_MEAN, CIFAR_STD)
        separate = augment.erase(plain, arguments)
        folded = normalize.call(data, mirror, types.FLOAT, layout, CIFAR_MEAN, CIFAR_STD, erase=arguments)
        return plain, separate, folded

    p = pipe()
    p.build()
    erased = 0
    for _ in range(3):
        plain, separate, folded = (list(map(np.array, out)) for out in p.run())
        for a, b, c in zip(plain, separate, folded):
            assert np.array_equal(b.view(np.uint32), c.view(np.uint32))
            erased += not np.array_equal(a, c)
    assert 0.4 * 96 < erased < 96   # p = 0.7, less the images no box fitted


def test_refuses_other_than_uint8_and_names_itself():
    from nvidia.dali import fn, pipeline_def, types

    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        data = fn.external_source(source=lambda: [np.zeros((4, 4, 3), np.float32)] * 2, layout="HWC")
        return fn.dali_loaders_normalize(data, dtype=types.FLOAT, mean=[0.0] * 3, std=[1.0] * 3)

    p = pipe()
    p.build()
    with pytest.raises(RuntimeError, match="DaliLoadersNormalize takes uint8"):
        p.run()


def test_usable_only_on_cpu_graphs_for_float32_and_uint8():
    assert normalize.usable("cpu", "FLOAT", "CHW") and normalize.usable("cpu", "UINT8", "HWC")
    assert not normalize.usable("gpu", "FLOAT", "CHW")
    assert not normalize.usable("cpu", "FLOAT16", "CHW")


@pytest.mark.parametrize("shape,ltrb,fill,size", [
    ((32, 32, 3), (4, 4, 4, 4), (0, 0, 0), (32, 32)),
    ((9, 7, 1), (3, 0, 6, 2), (77,), (6, 12)),
    ((10, 10, 4), (0, 0, 0, 0), (1, 2, 3, 4), (10, 10)),
    ((5, 5, 3), (9, 9, 9, 9), (10, 200, 30), (20, 20)),     # windows wholly in the padding too
    ((8, 13, 3), (2, 1, 2, 1), (5, 6, 7), (8, 13)),          # an odd width, as wide as the image
    ((8, 13, 3), (0, 0, 0, 0), (0, 0, 0), (3, 4)),           # narrower than the SIMD flip's 5 pixels
])
def test_gather_windows_equals_torchvisions_pad_crop_and_flip(shape, ltrb, fill, size):
    rng = np.random.default_rng(7)
    images = rng.integers(0, 256, (50, *shape), dtype=np.uint8)
    indices = rng.permutation(50)[:40]
    left, top, right, bottom = ltrb
    tops = rng.integers(0, shape[0] + top + bottom - size[0] + 1, 40)
    lefts = rng.integers(0, shape[1] + left + right - size[1] + 1, 40)
    flips = rng.integers(0, 2, 40)
    ours = gather.gather_windows(images, indices, tops - top, lefts - left, size, np.array(fill))
    flipped = gather.gather_windows(images, indices, tops - top, lefts - left, size, np.array(fill), flips)
    for i, index in enumerate(indices):
        padded = F.pad(torch.from_numpy(images[index]).permute(2, 0, 1), list(ltrb), fill=list(fill))
        theirs = F.crop(padded, int(tops[i]), int(lefts[i]), *size)
        assert np.array_equal(ours[i], theirs.permute(1, 2, 0).numpy())
        theirs = F.horizontal_flip(theirs) if flips[i] else theirs
        assert np.array_equal(flipped[i], theirs.permute(1, 2, 0).numpy())


def test_gather_windows_refuses_an_index_outside_the_images_and_a_wrong_fill():
    images = np.zeros((10, 4, 4, 3), np.uint8)
    with pytest.raises(IndexError, match="index 10 of sample 1 is outside the 10 images"):
        gather.gather_windows(images, np.array([0, 10]), None, None, (4, 4), np.zeros(3))
    with pytest.raises(IndexError, match="index -1"):
        gather.gather_windows(images, np.array([-1]), None, None, (4, 4), np.zeros(3))
    with pytest.raises(ValueError, match="one value per channel"):
        gather.gather_windows(images, np.array([0]), None, None, (4, 4), np.zeros(1))


def test_batch_crop_draws_and_windows_are_the_same_with_the_c_gather():
    from dali_loaders.sources.array_batches import BatchCrop

    images = np.random.default_rng(1).integers(0, 256, (300, 32, 32, 3), dtype=np.uint8)
    indices = np.random.default_rng(2).permutation(300)[:256]
    crop = BatchCrop(images.shape[1:], (4, 4, 4, 4), (3, 2, 1), 32, 32)
    numpy_way = crop(images[indices], np.random.default_rng(9))
    assert np.array_equal(crop.gathered(images, indices, np.random.default_rng(9)), numpy_way)


def test_cifar_loader_is_the_same_without_the_plugin(monkeypatch):
    """The loader's batches with our operator and gather equal those of DALI's
    crop_mirror_normalize and numpy's crop (DALI_LOADERS_NO_NORMALIZE_PLUGIN=1), bit for bit."""
    from dali_loaders import recipes
    from dali_loaders.loader import dali_loader
    from dali_loaders.sources.arrays import ArraySource

    rng = np.random.default_rng(4)
    source = ArraySource(rng.integers(0, 256, (300, 32, 32, 3), dtype=np.uint8), rng.integers(0, 10, 300), "random")

    def batches():
        loader = dali_loader(source, recipes.cifar(True), train=True, batch_size=64, num_threads=2, seed=11)
        return [(images.clone(), labels.clone()) for images, labels in loader]

    fast = batches()
    monkeypatch.setenv(plugin.DISABLE_NORMALIZE_ENV, "1")
    assert not gather.usable() and not normalize.usable("cpu", "FLOAT", "CHW")
    slow = batches()
    assert len(fast) == len(slow) == 5
    for (a, la), (b, lb) in zip(fast, slow):
        assert torch.equal(la, lb) and torch.equal(a.view(torch.int32), b.view(torch.int32))


def test_random_erasing_right_after_the_normalization_is_written_by_the_normalize_operator():
    """A loader's RandomErasing on the normalized output is drawn and written by the normalize
    operator (no DaliLoadersErase, no copy of the images); a second RandomErasing, whose input
    is the first's output, gets an operator of its own. Both erase (p=1: every image changed)."""
    import collections

    from dali_loaders.dali_compat import graph_operators
    from dali_loaders.loader import dali_loader
    from dali_loaders.sources.arrays import ArraySource

    if not plugin.augment_available():
        pytest.skip("the augmentation plugin cannot be built here")
    rng = np.random.default_rng(5)
    source = ArraySource(rng.integers(0, 256, (64, 32, 32, 3), dtype=np.uint8), rng.integers(0, 10, 64), "random")
    plain = [v2.ToImage(), v2.ToDtype(torch.float32, scale=True), v2.Normalize([0.5] * 3, [0.25] * 3)]
    images = None
    for erasings, separate in ((0, 0), (1, 0), (2, 1)):
        recipe = v2.Compose(plain + [v2.RandomErasing(p=1.0, value=9.0) for _ in range(erasings)])
        loader = dali_loader(source, recipe, train=False, batch_size=64, num_threads=2, seed=3)
        batch = next(iter(loader))[0]
        kinds = collections.Counter(kind for kind, *_ in graph_operators(loader.pipeline.serialize()))
        assert kinds["DaliLoadersNormalize"] == 1 and kinds["DaliLoadersErase"] == separate, kinds
        if erasings == 0:
            images = batch
        else:
            erased = (batch != images).flatten(1)
            assert erased.any(1).all() and torch.all(batch[batch != images] == 9.0)
