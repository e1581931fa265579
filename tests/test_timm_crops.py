"""timm's ResizeKeepRatio, CenterCropOrPad and RandomCropOrPad (create_transform's
crop_mode="border", train_crop_mode="rkrc" / "rkrr") translated into DALI, against timm's own
classes: the deterministic ones pixel for pixel on photographs of several shapes, the random
ones by the distribution of what they draw, each test failing if a parameter is ignored."""
import numpy as np
import pytest
from test_transforms import coordinate_image, dali_outputs, differences, twin_outputs
from torchvision.transforms import v2

from dali_loaders import transforms
from dali_loaders.loader import serialized_gpu_graph
from dali_loaders.sources.arrays import ArraySource

timm = pytest.importorskip("timm")
from timm.data import create_transform  # noqa: E402
from timm.data import transforms as timm_transforms  # noqa: E402

RKR = dict(random_scale_prob=0.5, random_scale_range=(0.8, 1.0), random_scale_area=True, random_aspect_prob=0.5,
           random_aspect_range=(0.9, 1 / 0.9))


def copies(image: np.ndarray, n: int):
    return ArraySource(np.repeat(image[None], n, axis=0), np.zeros(n, dtype=np.int64), "copies")


@pytest.mark.parametrize("steps", [
    [timm_transforms.ResizeKeepRatio(64, longest=1.0), timm_transforms.CenterCropOrPad(56, fill=(124, 116, 104))],
    [timm_transforms.ResizeKeepRatio(64, longest=0.0), timm_transforms.CenterCropOrPad(56, padding_mode="reflect")],
    [timm_transforms.ResizeKeepRatio(64, longest=1.0), timm_transforms.CenterCropOrPad(70, padding_mode="symmetric")],
    [timm_transforms.ResizeKeepRatio(64, longest=1.0), timm_transforms.CenterCropOrPad(70, padding_mode="edge")],
    [timm_transforms.ResizeKeepRatio((64, 50), longest=0.5, interpolation="bicubic")],
    [timm_transforms.TrimBorder(3), timm_transforms.ResizeKeepRatio(64, longest=1.0)],
], ids=["border fill", "shortest, reflect", "padded symmetric", "padded edge", "half-longest bicubic", "trimmed"])
def test_deterministic_steps_equal_timms_on_photographs(photo_files, steps):
    """Photographs of several shapes: the keep-ratio size (each output's shape) and the pixels."""
    transform = v2.Compose([*steps, v2.PILToTensor()])
    assert not transforms.plan(transform, python_fallback=False).python
    ours, theirs = dali_outputs(photo_files, transform), twin_outputs(photo_files, transform)
    assert [o.shape for o in ours] == [t.shape for t in theirs]
    assert len({t.shape for t in theirs}) > 1 or steps[-1].__class__ is not timm_transforms.ResizeKeepRatio
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(a, b)


def test_timms_border_evaluation_recipe_matches_timm(photo_files):
    transform = create_transform(56, is_training=False, crop_mode="border", crop_pct=0.875)
    assert [type(s).__name__ for s in transform.transforms[:2]] == ["ResizeKeepRatio", "CenterCropOrPad"]
    assert not transforms.plan(transform, python_fallback=False).python
    mean, worst = differences(photo_files, transform, 1 / 0.225)
    assert mean <= 0.01 and worst <= 1.0, (mean, worst)


def drawn_sizes(step, n=400):
    """(heights, widths) of n outputs of `step` on one 90 x 120 image, ours and timm's."""
    import random

    image = np.zeros((90, 120, 3), dtype=np.uint8)
    transform = v2.Compose([step, v2.PILToTensor()])
    random.seed(0)   # timm draws from Python's generator: the same twin every run (the extremes vary)
    ours, theirs = (np.array([o.shape[1:] for o in outputs]) for outputs in
                    (dali_outputs(copies(image, n), transform, batch=n), twin_outputs(copies(image, n), transform)))
    return ours, theirs


@pytest.mark.parametrize("options", [RKR, dict(RKR, random_scale_area=False), dict(RKR, random_aspect_prob=0.0),
                                     dict(RKR, random_scale_prob=0.9, random_aspect_prob=0.1)],
                         ids=["rkr", "scale not by area", "no aspect", "other rates"])
def test_random_scale_and_aspect_are_drawn_as_timm_draws_them(options):
    """The share of images left at the fitted size, the mean height and width, and the spread
    of the aspect: each moves when a parameter is ignored (area: a zoom in becomes a zoom out;
    the aspect's rate and range; the rates)."""
    ours, theirs = drawn_sizes(timm_transforms.ResizeKeepRatio(64, **options))
    fitted = np.array([64, 85])   # 90 x 120 with its short side at 64: round(85.33)
    for name, a, b, bound in [
        ("left at the fitted size", (ours == fitted).all(1), (theirs == fitted).all(1), 0.1),
        ("mean height", ours[:, 0], theirs[:, 0], 1.0),
        ("mean width", ours[:, 1], theirs[:, 1], 1.2),
        ("aspect spread", np.std(ours[:, 1] / ours[:, 0]), np.std(theirs[:, 1] / theirs[:, 0]), 0.01),
    ]:
        assert abs(np.mean(a) - np.mean(b)) <= bound, (name, np.mean(a), np.mean(b))
    assert np.abs(ours.min(0) - theirs.min(0)).max() <= 2 and np.abs(ours.max(0) - theirs.max(0)).max() <= 2


def test_random_interpolation_picks_both():
    """interpolation="random": bilinear and bicubic per image; on a sharp edge their pixels
    differ, and both appear."""
    image = np.zeros((40, 60, 3), dtype=np.uint8)
    image[:, 30:] = 255
    transform = v2.Compose([timm_transforms.ResizeKeepRatio(25, interpolation="random"), v2.PILToTensor()])
    ours = dali_outputs(copies(image, 64), transform, batch=64)
    kinds = {o.tobytes() for o in ours}
    assert len(kinds) == 2


def window_reads(step, image, n=300):
    """(top padding, left offset) of n outputs of RandomCropOrPad on a coordinate image
    (R = x, G = y, B = 255; constant padding has B = 0): ours and timm's."""
    transform = v2.Compose([step, v2.PILToTensor()])

    def reads(outputs):
        found = []
        for o in outputs:
            inside = o[2] == 255
            rows = np.flatnonzero(inside.any(1))
            first = rows[0]
            found.append((int(first), int(o[0, first][inside[first]][0])))
        return np.array(found)
    return (reads(dali_outputs(copies(image, n), transform, batch=n)),
            reads(twin_outputs(copies(image, n), transform)))


def test_random_crop_or_pad_places_the_window_as_timm():
    """Width 40 cropped to 36 (a start uniform in 0 .. 4), height 30 padded to 36 (a top
    padding uniform in 0 .. 6): every value at its rate, as timm's."""
    ours, theirs = window_reads(timm_transforms.RandomCropOrPad(36), coordinate_image(40, 30))
    for axis, values in ((0, range(7)), (1, range(5))):
        assert set(ours[:, axis]) == set(theirs[:, axis]) == set(values)
        for v in values:
            rate = 1 / len(values)
            assert abs(np.mean(ours[:, axis] == v) - rate) < 0.08, (axis, v)


def test_random_crop_or_pad_with_reflect_gives_one_of_timms_windows():
    """Each output is exactly timm's crop_or_pad at one of the offsets it draws from."""
    from PIL import Image

    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (30, 40, 3), dtype=np.uint8)
    step = timm_transforms.RandomCropOrPad(36, padding_mode="reflect")
    candidates = {np.asarray(timm_transforms.crop_or_pad(Image.fromarray(image), -top, left, 36, 36,
                                                         padding_mode="reflect")).tobytes(): (top, left)
                  for top in range(7) for left in range(5)}
    ours = dali_outputs(copies(image, 200), v2.Compose([step, v2.PILToTensor()]), batch=200)
    drawn = [candidates.get(o.transpose(1, 2, 0).tobytes()) for o in ours]
    assert None not in drawn
    assert len(set(drawn)) > 20   # 35 windows, 200 draws


@pytest.mark.parametrize("mode", ["edge", "reflect"])
def test_random_crop_or_pad_on_images_of_varying_size_gives_one_of_timms_windows(photo_files, mode):
    """Each image's own padding in the graph: every output is timm's crop_or_pad of that image
    at one of the offsets timm draws from."""
    from PIL import Image

    resize = timm_transforms.ResizeKeepRatio(40, longest=1.0)
    resized = [o.transpose(1, 2, 0).astype(np.uint8)
               for o in twin_outputs(photo_files, v2.Compose([resize, v2.PILToTensor()]))]
    assert len({r.shape for r in resized}) > 1, "the test needs images of varying size"
    transform = v2.Compose([resize, timm_transforms.RandomCropOrPad(44, padding_mode=mode), v2.PILToTensor()])
    for k, image in enumerate(resized):
        extra_h, extra_w = image.shape[0] - 44, image.shape[1] - 44
        tops = range(0, extra_h + 1) if extra_h >= 0 else range(extra_h, 1)
        lefts = range(0, extra_w + 1) if extra_w >= 0 else range(extra_w, 1)
        candidates = {np.asarray(timm_transforms.crop_or_pad(Image.fromarray(image), top, left, 44, 44,
                                                             padding_mode=mode)).tobytes()
                      for top in tops for left in lefts}
        for seed in (1, 2, 3):
            out = dali_outputs(photo_files, transform, seed=seed)[k]
            assert out.transpose(1, 2, 0).astype(np.uint8).tobytes() in candidates, (k, mode, seed)


@pytest.mark.parametrize("kind", ["rkrr", "rkrc", "border", "trimmed"])
def test_timms_keep_ratio_recipes_run_in_dali_on_both_devices(photo_files, kind):
    transform = {"border": lambda: create_transform(56, is_training=False, crop_mode="border"),
                 "trimmed": lambda: create_transform(56, is_training=False, crop_border_pixels=2)}.get(
        kind, lambda: create_transform(56, is_training=True, train_crop_mode=kind))()
    assert not transforms.plan(transform, python_fallback=False).python
    outputs = dali_outputs(photo_files, transform)
    assert {o.shape for o in outputs} == {(3, 56, 56)}
    from dali_loaders import dali_compat

    for variant in ("gpu", "cpu-decode"):
        graph = serialized_gpu_graph(photo_files, transform, variant=variant)
        edges = [kind for kind, _, device, inputs in dali_compat.graph_operators(graph) if device == "cpu"
                 for _, d in inputs if d == "gpu"]
        assert edges == []
