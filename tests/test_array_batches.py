"""The source-side batch steps of ArraySource (sources/array_batches.py): the pad-and-crop
against torchvision's own pad and crop, pixel for pixel; the draws as a function of the
batch's position; and the graph they leave to DALI."""
import numpy as np
import pytest
import torch
from torchvision.transforms import v2
from torchvision.transforms.v2 import functional as F

from dali_loaders import recipes, transforms
from dali_loaders.ops import plugin
from dali_loaders.sources.array_batches import BatchCrop, BatchSteps, batch_rng
from dali_loaders.sources.arrays import ArraySource


@pytest.mark.parametrize("channels,ltrb,fill,size", [
    (3, (4, 4, 4, 4), (0, 0, 0), (32, 32)),
    (3, (2, 5, 0, 1), (10, 200, 30), (30, 28)),
    (1, (3, 0, 6, 2), (77,), (20, 33)),
])
def test_batch_crop_equals_torchvisions_pad_then_crop(channels, ltrb, fill, size):
    images = np.random.default_rng(0).integers(0, 256, (64, 32, 32, channels), dtype=np.uint8)
    crop = BatchCrop(images.shape[1:], ltrb, fill, *size)
    ours = crop(images, np.random.default_rng(5))
    drawn = np.random.default_rng(5)                    # the same draws, in the same order
    tops, lefts = drawn.integers(0, crop.span[0] + 1, 64), drawn.integers(0, crop.span[1] + 1, 64)
    assert len(set(tops)) > 1 and len(set(lefts)) > 1
    for image, out, top, left in zip(images, ours, tops, lefts):
        padded = F.pad(torch.from_numpy(image).permute(2, 0, 1), list(ltrb), fill=list(fill))
        theirs = F.crop(padded, int(top), int(left), *size).permute(1, 2, 0).numpy()
        assert np.array_equal(out, theirs)


def test_batch_crop_offsets_cover_the_whole_span_uniformly():
    from scipy import stats

    rows, cols = np.meshgrid(np.arange(8), np.arange(8), indexing="ij")
    images = np.broadcast_to((rows * 8 + cols + 1).astype(np.uint8)[None, ..., None], (4000, 8, 8, 1))
    crop = BatchCrop(images.shape[1:], (3, 2, 1, 0), (0,), 8, 8)     # spans: y 0 .. 2, x 0 .. 4
    out = crop(np.ascontiguousarray(images), np.random.default_rng(1))[..., 0].astype(np.int64)
    # the window's origin in padded coordinates, from the image pixel every window shows at (4, 4)
    value = out[:, 4, 4] - 1
    top, left = value // 8 + 2 - 4, value % 8 + 3 - 4
    assert top.min() == 0 and top.max() == 2 and left.min() == 0 and left.max() == 4
    cells = np.bincount(top * 5 + left, minlength=15)
    assert stats.chisquare(cells).pvalue > 1e-3, cells


def test_a_batch_too_small_for_the_crop_is_refused_with_the_sizes():
    with pytest.raises(ValueError, match="40x40 crop .* 32x32 images padded by"):
        BatchCrop((32, 32, 3), (2, 2, 2, 2), (0, 0, 0), 40, 40)


def test_draws_are_a_function_of_the_batch_position_only():
    steps = BatchSteps((32, 32, 3))
    steps.add_crop((4, 4, 4, 4), (0, 0, 0), 32, 32)
    k = steps.add_coin(0.5)
    images = np.random.default_rng(2).integers(0, 256, (256, 32, 32, 3), dtype=np.uint8)
    indices = np.arange(256)
    first = steps.images(images, indices, 7, 0, 3), steps.coin(k, 256, 7, 0, 3)
    again = steps.images(images, indices, 7, 0, 3), steps.coin(k, 256, 7, 0, 3)
    assert np.array_equal(first[0], again[0]) and np.array_equal(first[1], again[1])
    for other in ((8, 0, 3), (7, 1, 3), (7, 0, 4)):     # another seed, epoch or batch: other draws
        assert not np.array_equal(first[0], steps.images(images, indices, *other))
        assert not np.array_equal(first[1], steps.coin(k, 256, *other))
    assert not np.array_equal(batch_rng(7, 0, 3, 0).random(8), batch_rng(7, 0, 3, 1).random(8))


def test_coin_rate_follows_p():
    steps = BatchSteps((4, 4, 3))
    k = steps.add_coin(0.2)
    coins = np.concatenate([steps.coin(k, 1000, 0, 0, i) for i in range(10)])
    assert coins.dtype == np.int32 and set(np.unique(coins)) == {0, 1}
    assert abs(coins.mean() - 0.2) < 0.02               # ~5 standard errors


def _graph_ops(transform, source) -> bytes:
    from nvidia.dali import pipeline_def

    from dali_loaders.loader import build

    recipe = transforms.plan(transform, False)
    pipe = pipeline_def(build.graph, batch_size=8, num_threads=1, device_id=None, seed=1,
                        enable_conditionals=transforms.needs_conditionals(recipe))(
        source, np.arange(len(source)), 8, recipe, "CHW", "cpu")
    return pipe.serialize()


def test_cifar_train_graph_leaves_no_per_sample_draw_or_crop_to_dali():
    """The speed of issue 20: crop and coins come from the source, DALI runs one operator."""
    pytest.importorskip("nvidia.dali")
    source = ArraySource(np.zeros((16, 32, 32, 3), np.uint8), np.zeros(16, np.int64), "zeros")
    graph = _graph_ops(recipes.cifar(True), source)
    for op in (b"random__Uniform", b"random__CoinFlip", b"Slice", b"Crop\x12"):
        assert op not in graph, op
    assert (b"DaliLoadersNormalize" if plugin.normalize_available() else b"CropMirrorNormalize") in graph
    # after another step the crop is DALI's again, and so are its draws
    later = _graph_ops(v2.Compose([v2.RandomGrayscale(0.5), v2.RandomCrop(32, padding=4)]), source)
    assert b"Slice" in later and b"random__Uniform" in later


def test_a_second_random_crop_is_dalis_and_both_are_applied():
    from dali_loaders.loader import dali_loader

    rows, cols = np.meshgrid(np.arange(32), np.arange(32), indexing="ij")
    image = np.stack([rows * 8, cols * 8, np.full_like(rows, 255)], axis=-1).astype(np.uint8)
    source = ArraySource(np.repeat(image[None], 64, axis=0), np.zeros(64, np.int64), "coords")
    transform = v2.Compose([v2.RandomCrop(32, padding=4), v2.RandomCrop(24), v2.PILToTensor()])
    loader = dali_loader(source, transform, train=True, batch_size=64, num_threads=1, seed=3)
    images, _ = next(iter(loader))
    assert images.shape == (64, 3, 24, 24)
    pixels = images.permute(0, 2, 3, 1).numpy().astype(np.int64)
    inside = pixels[..., 2] == 255                                    # not the first crop's padding
    tops = np.array([(p[..., 0][m] // 8 - np.nonzero(m)[0]).min() for p, m in zip(pixels, inside)])
    # offset = (0 .. 8 of the padded crop) - 4 + (0 .. 8 of the second): beyond 4 only if both cropped
    assert tops.min() >= -4 and tops.max() <= 12 and tops.min() < 0 and tops.max() > 4


def test_a_flip_is_the_feeders_only_while_nothing_else_touched_the_images():
    """Right after the source's crop (or first) the feeder flips; after another step the
    graph flips, by coins the feeder draws; a crop after the feeder's flip is DALI's."""
    pytest.importorskip("nvidia.dali")
    source = ArraySource(np.zeros((16, 32, 32, 3), np.uint8), np.zeros(16, np.int64), "zeros")
    default = _graph_ops(recipes.cifar(True), source)
    later = _graph_ops(v2.Compose([v2.RandomGrayscale(0.5), v2.RandomHorizontalFlip()]), source)
    assert later.count(b"ExternalSource") > default.count(b"ExternalSource")   # the coins' own source
    first = _graph_ops(v2.Compose([v2.RandomHorizontalFlip(), v2.RandomCrop(32, padding=4)]), source)
    assert b"Slice" in first and b"Slice" not in default


def test_the_feeders_flip_follows_the_crop_pixel_for_pixel():
    """Images that encode their pixel positions: each output is a window of its padded image,
    mirrored or not, and both happen."""
    from dali_loaders.loader import dali_loader

    rows, cols = np.meshgrid(np.arange(32), np.arange(32), indexing="ij")
    image = np.stack([rows * 8, cols * 8, np.full_like(rows, 255)], axis=-1).astype(np.uint8)
    source = ArraySource(np.repeat(image[None], 64, axis=0), np.zeros(64, np.int64), "coords")
    transform = v2.Compose([v2.RandomCrop(32, padding=4), v2.RandomHorizontalFlip(), v2.PILToTensor()])
    images, _ = next(iter(dali_loader(source, transform, train=True, batch_size=64, num_threads=1, seed=5)))
    padded = F.pad(torch.from_numpy(image).permute(2, 0, 1), [4, 4, 4, 4])
    windows = {(t, l, f): (F.horizontal_flip(w) if f else w)
               for t in range(9) for l in range(9) for f in (0, 1)
               for w in [F.crop(padded, t, l, 32, 32)]}
    found = [next((key for key, w in windows.items() if torch.equal(w, out)), None) for out in images]
    assert None not in found
    assert {f for _, _, f in found} == {0, 1} and len({(t, l) for t, l, _ in found}) > 10


def _indexed_source(n: int) -> ArraySource:
    """Image i: every pixel (i % 256, i // 256, 7); its label i."""
    index = np.arange(n)
    pixels = np.stack([index % 256, index // 256, np.full(n, 7)], axis=-1).astype(np.uint8)
    return ArraySource(np.ascontiguousarray(np.broadcast_to(pixels[:, None, None], (n, 8, 8, 3))), index, "indexed")


def _served(loader, batches=None):
    out = []
    for images, labels in loader:
        shown = images[:, 0, 4, 4].long() + 256 * images[:, 1, 4, 4].long()   # inside every window
        out.append((shown, labels))
        if len(out) == batches:
            break
    return out


def test_labels_read_on_the_host_stay_with_their_images_through_a_resume():
    """An array source's labels leave the graph (the loader reads them by index): each image
    still comes with its own label, each sample once an epoch, and a resumed epoch serves
    exactly what the uninterrupted one did."""
    from dali_loaders.loader import dali_loader

    source = _indexed_source(600)
    transform = v2.Compose([v2.RandomCrop(8, padding=2), v2.RandomHorizontalFlip(), v2.PILToTensor()])

    def make():
        return dali_loader(source, transform, train=True, batch_size=64, num_threads=1, seed=3)

    loader = make()
    whole = _served(loader)
    assert loader.pipeline.num_outputs == 1   # the images alone
    shown = torch.cat([s for s, _ in whole])
    assert torch.equal(shown, torch.cat([labels for _, labels in whole]))
    assert sorted(shown.tolist()) == list(range(600))

    interrupted = make()
    interrupted.set_epoch(1)
    first = _served(interrupted, batches=3)
    state = interrupted.state_dict()
    resumed = make()
    resumed.load_state_dict(state)
    rest = _served(resumed)
    uninterrupted = make()
    uninterrupted.set_epoch(1)
    expected = _served(uninterrupted)
    assert len(first) + len(rest) == len(expected) == 10
    for (s, l), (es, el) in zip(first + rest, expected):
        assert torch.equal(s, es) and torch.equal(l, el) and torch.equal(s, l)
