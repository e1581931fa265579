"""torchvision's classification references as a new user runs them (issue 17): each preset of
references/classification/presets.py in the v1 and v2 API translated, and the crashes and
refusals the issue lists, each against torchvision's own output."""
import random

import numpy as np
import pytest
import torch
from photos import photo_arrays
from PIL import Image
from reference_presets import classification_eval, classification_train
from test_autoaugment import dali_draws, same_distribution, torchvision_draws
from test_transforms import FLOAT, C, dali_outputs, twin_outputs
from torchvision import transforms as v1
from torchvision.transforms import InterpolationMode as IM
from torchvision.transforms import v2
from torchvision.transforms.v2 import functional as F

from dali_loaders import transforms
from dali_loaders.loader import dali_loader
from dali_loaders.sources.arrays import ArraySource
from dali_loaders.transforms import Images
from dali_loaders.transforms import augment_ops
from dali_loaders.transforms import auto_augment as aa
from dali_loaders.transforms.mixing import parse

P_MIN = 1e-3
pytestmark = pytest.mark.filterwarnings("ignore:.*python_fallback=True:RuntimeWarning")


def arrays(size=40):
    images = photo_arrays(size)
    return ArraySource(images, np.arange(len(images)), "photos")


def one_epoch(source, transform, **kwargs):
    loader = dali_loader(source, transform, train=True, batch_size=4, num_threads=1, seed=0, **kwargs)
    return [batch for batch in loader]


# -- v1's automatic augmentations --------------------------------------------------------------

V1_AND_V2 = [(v1.TrivialAugmentWide, v2.TrivialAugmentWide), (v1.RandAugment, v2.RandAugment),
             (lambda: v1.AutoAugment(v1.AutoAugmentPolicy.IMAGENET), lambda: v2.AutoAugment(v2.AutoAugmentPolicy.IMAGENET))]


@pytest.mark.parametrize("make_v1,make_v2", V1_AND_V2)
def test_v1_automatic_augmentations_read_the_same_magnitudes_as_v2(make_v1, make_v2):
    bins = getattr(make_v2(), "num_magnitude_bins", aa.AUTOAUGMENT_BINS)
    ours, theirs = aa.space(make_v1(), bins, 40.0, 30.0), aa.space(make_v2(), bins, 40.0, 30.0)
    assert ours.keys() == theirs.keys()
    for name, (mags, signed) in ours.items():
        mags = mags / 255.0 if name == "Solarize" else mags   # v1's in pixel levels, v2's in 0 .. 1
        assert signed == theirs[name][1] and (mags is None) == (theirs[name][0] is None), name
        assert mags is None or np.allclose(mags, theirs[name][0]), name


def test_v1_trivial_augment_wide_draws_as_torchvision(monkeypatch):
    dali = dali_draws(v1.TrivialAugmentWide(), monkeypatch)
    reference = torchvision_draws(v2.TrivialAugmentWide())   # v1's forward draws the same way
    assert same_distribution([d for draw in dali for d in draw], [d for draw in reference for d in draw]) > P_MIN


@pytest.mark.parametrize("make", [v1.RandAugment, v2.RandAugment])
@pytest.mark.parametrize("kind", ["pil", "tensor"])
def test_solarize_thresholds_in_either_api_are_torchvisions(make, kind):
    """v1's table holds thresholds in pixel levels, v2's fractions of 255: each solarizes at
    its own. Checked at every bin against torchvision's functional solarize."""
    step = make(num_magnitude_bins=31)
    levels = np.arange(256, dtype=np.uint8)
    mags = aa.space(step, 31, 1.0, 1.0)["Solarize"][0]
    images = Images(None, 1, 1, 3, "cpu", kind=kind)
    threshold = augment_ops.solarize_threshold(images, step)
    for magnitude in mags:
        torch_threshold = float(np.float32(magnitude)) * (255.0 if make is v2.RandAugment else 1.0)
        image = Image.fromarray(levels[None]) if kind == "pil" else torch.from_numpy(levels)[None]
        want = np.asarray(F.solarize(image, torch_threshold)).reshape(-1)
        got = np.where(levels < threshold(magnitude), levels, 255 - levels)
        assert np.array_equal(got, want), magnitude


@pytest.mark.parametrize("make_v1", [pair[0] for pair in V1_AND_V2])
def test_v1_automatic_augmentations_run_in_a_loader(make_v1):
    transform = v1.Compose([make_v1(), v1.PILToTensor(), v1.ConvertImageDtype(torch.float32)])
    shapes = {tuple(x.shape[1:]) for x, _ in one_epoch(arrays(), transform)}
    assert shapes == {(3, 40, 40)}


# -- ToPureTensor, tensor Normalize ----------------------------------------------------------------


def test_to_pure_tensor_changes_nothing(photo_files):
    recipe = C(v2.Resize(64), v2.CenterCrop(56), v2.ToImage(), FLOAT)
    plain = dali_outputs(photo_files, recipe)
    pure = dali_outputs(photo_files, C(*recipe.transforms, v2.ToPureTensor()))
    assert all(np.array_equal(a, b) for a, b in zip(plain, pure))
    assert all(np.array_equal(a, b) for a, b in zip(pure, twin_outputs(photo_files, C(*recipe.transforms,
                                                                                        v2.ToPureTensor()))))


@pytest.mark.parametrize("T", [v1, v2])
def test_normalize_with_tensors_is_torchvisions(photo_files, T):
    mean, std = torch.tensor([0.4, 0.5, 0.6]), torch.tensor([0.2, 0.25, 0.3])
    to_float = T.ToDtype(torch.float32, scale=True) if T is v2 else T.ConvertImageDtype(torch.float32)
    recipe = T.Compose([T.CenterCrop(64), T.PILToTensor(), to_float, T.Normalize(mean, std)])
    for ours, theirs in zip(dali_outputs(photo_files, recipe), twin_outputs(photo_files, recipe)):
        assert np.abs(ours - theirs).max() < 1e-5


def test_v2_normalize_of_three_channels_broadcasts_a_grey_image_as_torchvision_does(photo_files):
    recipe = C(v2.Grayscale(1), v2.CenterCrop(48), v2.ToImage(), FLOAT, v2.Normalize([0.4, 0.5, 0.6], [0.2, 0.25, 0.3]))
    ours, theirs = dali_outputs(photo_files, recipe), twin_outputs(photo_files, recipe)
    assert {a.shape for a in ours} == {t.shape for t in theirs} == {(3, 48, 48)}
    for a, t in zip(ours, theirs):
        assert np.abs(a - t).max() < 1e-5
        assert not np.allclose(a[0], a[2])   # each channel its own mean and std


@pytest.mark.parametrize("recipe", [
    v1.Compose([v1.Grayscale(1), v1.ToTensor(), v1.Normalize([0.4, 0.5, 0.6], [0.2, 0.25, 0.3])]),
    C(v2.Grayscale(1), v2.ToImage(), FLOAT, v2.Normalize([0.4, 0.5, 0.6], [0.2, 0.25, 0.3], inplace=True)),
    C(v2.ToImage(), FLOAT, v2.Normalize([0.4, 0.5], [0.2, 0.25])),
    C(v2.ToImage(), FLOAT, v2.Normalize([0.4, 0.5, 0.6], [0.2, 0.25])),
], ids=["v1-grey", "v2-inplace-grey", "two-on-rgb", "three-means-two-stds"])
def test_normalize_with_values_that_do_not_fit_the_channels_is_refused_by_name(photo_files, recipe):
    """torchvision raises on each; the graph would otherwise normalize some channels with the
    wrong values, or drop the extra ones."""
    with pytest.raises(RuntimeError):   # torchvision's own error
        twin_outputs(photo_files, recipe)
    with pytest.raises(ValueError, match=r"Normalize.* means and .* stds for a \d-channel image"):
        dali_outputs(photo_files, recipe)


@pytest.mark.parametrize("T", [v1, v2])
def test_a_color_jitter_of_no_adjustment_among_drawn_steps_changes_nothing(photo_files, T):
    """ColorJitter() beside steps queued in the same augmentation call, as torchvision runs it."""
    recipe = T.Compose([T.ColorJitter(), T.RandomInvert(1.0), T.ColorJitter(brightness=(1.3, 1.3)), T.PILToTensor()])
    ours, theirs = dali_outputs(photo_files, recipe), twin_outputs(photo_files, recipe)
    assert all(np.array_equal(a, t) for a, t in zip(ours, theirs))


@pytest.mark.parametrize("recipe", [
    C(v2.ToImage(), FLOAT, v2.ToDtype(torch.uint8, scale=True)),
    v1.Compose([v1.ToTensor(), v1.ConvertImageDtype(torch.uint8)]),
], ids=["v2", "v1"])
def test_float_back_to_uint8_takes_the_python_path_when_planned(photo_files, recipe):
    """Refused where the plan sees it, so that the loader serves torchvision's batches (not an
    error at its first batch)."""
    why = transforms.untranslatable_reason(recipe)
    assert why and "converting float back to uint8" in why, why
    from dali_loaders.loader import PythonPathNote

    with pytest.warns(PythonPathNote, match="converting float back to uint8"):
        loader = dali_loader(photo_files, recipe, train=False, batch_size=1, num_threads=1)
    assert loader.route.startswith("python")
    theirs = twin_outputs(photo_files, recipe)
    for (image, _), expected in zip(loader, theirs):
        assert image.dtype == torch.uint8 and np.array_equal(image[0].numpy(), expected)


# -- reflect, edge and symmetric padding, pixel against torchvision ---------------------------------

MODES = ["reflect", "edge", "symmetric"]
LTRB = (1, 2, 3, 4)   # every side different: a swapped side shows


@pytest.fixture(params=["warp", "slices"])
def pad_path(request, monkeypatch):
    """Both ways the graph pads: one warp whose border is numpy's mode (CPU, DALI >= 2.4), and
    the cut, flipped and joined borders (GPU graphs, older DALI)."""
    from dali_loaders import dali_compat

    if request.param == "warp" and not dali_compat.warp_perspective_on_cpu():
        pytest.skip("this DALI has no perspective warp on the CPU")
    if request.param == "slices":
        monkeypatch.setattr(dali_compat, "warp_perspective_on_cpu", lambda: False)
    return request.param


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("T", [v1, v2])
def test_random_crop_padding_modes_on_arrays_and_files(photo_files, mode, T, pad_path):
    """A window the size of the padded image: the whole padding, deterministic. On arrays the
    source pads (numpy); after a Resize the graph does (flipped slices)."""
    size = (30 + LTRB[1] + LTRB[3], 40 + LTRB[0] + LTRB[2])
    crop = T.RandomCrop(size, padding=list(LTRB), padding_mode=mode)
    source = arrays()
    on_arrays = T.Compose([T.Resize((30, 40)), crop, T.PILToTensor()])   # Resize: not the source's data
    first = T.Compose([T.RandomCrop((40 + LTRB[1] + LTRB[3], 40 + LTRB[0] + LTRB[2]), padding=list(LTRB),
                                    padding_mode=mode), T.PILToTensor()])
    for source_, recipe in ((source, first), (source, on_arrays), (photo_files, on_arrays)):
        ours, theirs = dali_outputs(source_, recipe), twin_outputs(source_, recipe)
        assert all(np.array_equal(a, b) for a, b in zip(ours, theirs)), (mode, recipe)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("T", [v1, v2])
def test_pad_if_needed_with_a_padding_mode_on_images_of_varying_size(photo_files, mode, T, pad_path):
    """Each image's own shortfall padded in the graph: every output is a window of
    torchvision's own padding of that image (the padding, then the shortfall on both sides),
    and the windows move (a random crop, not a fixed one)."""
    crop = T.RandomCrop((52, 64), padding=list(LTRB), pad_if_needed=True, padding_mode=mode)
    resized = twin_outputs(photo_files, T.Compose([T.Resize(40), T.PILToTensor()]))
    assert len({r.shape for r in resized}) > 1, "the test needs images of varying size"
    runs = [dali_outputs(photo_files, T.Compose([T.Resize(40), crop, T.PILToTensor()]), seed=seed) for seed in (1, 2)]
    offsets = set()
    for k, image in enumerate(resized):
        padded = F.pad(torch.from_numpy(image).to(torch.uint8), list(LTRB), padding_mode=mode)
        grow_h, grow_w = max(52 - padded.shape[1], 0), max(64 - padded.shape[2], 0)
        padded = F.pad(padded, [grow_w, grow_h], padding_mode=mode).numpy()
        for outputs in runs:
            out = outputs[k]
            assert out.shape == (3, 52, 64)
            found = [(y, x) for y in range(padded.shape[1] - 51) for x in range(padded.shape[2] - 63)
                     if np.array_equal(padded[:, y:y + 52, x:x + 64], out)]
            assert found, (k, mode)
            offsets.add((k, found[0]))
    assert len(offsets) > len(resized)


@pytest.mark.parametrize("mode", MODES)
def test_pad_modes_on_files_of_every_size(photo_files, mode, pad_path):
    recipe = C(v2.Pad(list(LTRB), padding_mode=mode), v2.PILToTensor())
    for ours, theirs in zip(dali_outputs(photo_files, recipe), twin_outputs(photo_files, recipe)):
        assert ours.shape == theirs.shape and np.array_equal(ours, theirs)


@pytest.mark.parametrize("first", [True, False])
def test_reflect_padded_random_crops_are_windows_of_torchvisions_padding(first, pad_path):
    """CIFAR's RandomCrop(32, 4, 'reflect'): each output is a window of the reflect-padded
    image, and the windows move."""
    images = photo_arrays(32)[:1].repeat(64, axis=0)
    source = ArraySource(images, np.arange(64), "one photo")
    steps = [v2.RandomCrop(32, padding=4, padding_mode="reflect"), v2.PILToTensor()]
    recipe = C(*steps) if first else C(v2.Resize((32, 32)), *steps)   # the source pads, or the graph
    padded = F.pad(torch.from_numpy(images[0]).permute(2, 0, 1), [4], padding_mode="reflect").numpy()
    windows = {(y, x): padded[:, y:y + 32, x:x + 32] for y in range(9) for x in range(9)}
    seen = set()
    for output in dali_outputs(source, recipe):
        found = [offset for offset, window in windows.items() if np.array_equal(window, output)]
        assert found, "not a window of the reflect-padded image"
        seen.add(found[0])
    assert len(seen) > 20


@pytest.mark.parametrize("mode,padding", [("reflect", 40), ("symmetric", 41)])
def test_a_reflection_wider_than_a_tensor_image_is_refused_by_name(mode, padding):
    """torch refuses it on a tensor: the step is refused by name (the Python path then runs
    torchvision, which raises its own error)."""
    with pytest.raises(ValueError, match=f"RandomCrop: padding {padding} with padding_mode='{mode}' on tensor images 40 x 40"):
        dali_outputs(arrays(), C(v2.PILToTensor(), v2.RandomCrop(40, padding=padding, padding_mode=mode)))


@pytest.mark.parametrize("mode", ["reflect", "symmetric"])
@pytest.mark.parametrize("T", [v1, v2])
def test_a_reflection_wider_than_a_pil_image_repeats_as_numpys(photo_files, mode, T, pad_path):
    """On a PIL image torchvision pads with numpy, which reflects again and again: Pad and the
    whole padded window of RandomCrop, wider than the image (and than twice the image) on one
    side, pixel for pixel, on files of every size (sizes per sample) and on arrays (known)."""
    wide = (170, 3, 45, 330)   # left, top, right, bottom; the photographs' longest side is 160
    pad = T.Compose([T.Pad(list(wide), padding_mode=mode), T.PILToTensor()])
    assert transforms.untranslatable_reason(pad) is None
    for ours, theirs in zip(dali_outputs(photo_files, pad), twin_outputs(photo_files, pad)):
        assert ours.shape == theirs.shape and np.array_equal(ours, theirs), mode
    def cropped(height, width):   # a window the size of the padded image: deterministic
        return [T.RandomCrop((height + 100, width + 180), padding=[90, 50], padding_mode=mode), T.PILToTensor()]

    for source, recipe in ((arrays(), T.Compose(cropped(40, 40))),   # the source's arrays
                           (arrays(), T.Compose([T.Resize((20, 40)), *cropped(20, 40)]))):
        ours, theirs = dali_outputs(source, recipe), twin_outputs(source, recipe)
        assert all(a.shape == b.shape and np.array_equal(a, b) for a, b in zip(ours, theirs)), mode


@pytest.mark.parametrize("mode", ["reflect", "symmetric"])
def test_pad_if_needed_far_beyond_a_small_image_is_a_window_of_numpys_padding(photo_files, mode, pad_path):
    """pad_if_needed's shortfall per image, several times the image's side: each output is a
    window of numpy's padding of that image (as torchvision pads a PIL image)."""
    crop = v2.RandomCrop((150, 170), pad_if_needed=True, padding_mode=mode)
    resized = twin_outputs(photo_files, C(v2.Resize(30), v2.PILToTensor()))
    assert len({r.shape for r in resized}) > 1, "the test needs images of varying size"
    outputs = dali_outputs(photo_files, C(v2.Resize(30), crop, v2.PILToTensor()))
    for k, image in enumerate(resized):
        grow_h, grow_w = max(150 - image.shape[1], 0), max(170 - image.shape[2], 0)
        assert grow_h > 2 * image.shape[1]
        padded = np.pad(image, ((0, 0), (grow_h, grow_h), (grow_w, grow_w)), mode=mode)
        assert outputs[k].shape == (3, 150, 170)
        assert any(np.array_equal(padded[:, y:y + 150, x:x + 170], outputs[k])
                   for y in range(padded.shape[1] - 149) for x in range(padded.shape[2] - 169)), (k, mode)


# -- python_fallback and the process's random generators ---------------------------------------------


class DrawsFromGlobals(torch.nn.Module):
    """A user's step that draws from all three global generators, as AugMix and many others do."""

    def forward(self, image):
        random.random(), np.random.rand(), torch.rand(1)
        return image


def global_draws():
    return random.random(), float(np.random.rand()), float(torch.rand(1))


def test_python_fallback_leaves_the_global_generators_as_it_found_them():
    random.seed(1), np.random.seed(1), torch.manual_seed(1)
    expected = global_draws()
    random.seed(1), np.random.seed(1), torch.manual_seed(1)
    one_epoch(arrays(16), C(DrawsFromGlobals(), v2.PILToTensor()), python_fallback=True)
    assert global_draws() == expected


class BrightensAtRandom(torch.nn.Module):
    """A user's random step with no translation: it draws from torch's global generator."""

    def forward(self, image):
        return image // 2 + torch.randint(0, 128, ()).to(torch.uint8)


def test_python_fallback_still_seeds_each_sample_from_the_loader():
    transform = C(v2.PILToTensor(), BrightensAtRandom())
    first, again = one_epoch(arrays(16), transform, python_fallback=True), \
        one_epoch(arrays(16), transform, python_fallback=True)
    assert all(torch.equal(a[0], b[0]) for a, b in zip(first, again))


# -- batch_transform -------------------------------------------------------------------------------


def test_a_v1_random_choice_batch_transform_names_the_v2_one():
    mixings = [v2.MixUp(alpha=1.0, num_classes=10), v2.CutMix(alpha=1.0, num_classes=10)]
    with pytest.raises(ValueError, match=r"RandomChoice \(v1\) is not supported: use torchvision.transforms.v2"):
        parse(v1.RandomChoice(mixings))
    assert len(parse(v2.RandomChoice(mixings))[0]) == 2


# -- the presets, whole ---------------------------------------------------------------------------------

# (mean, worst) |DALI - torchvision| in 1/255 of the 0..1 scale, measured, rounded up a little
EVAL_BOUNDS = {("pil", IM.BILINEAR): (0.01, 0.0), ("pil", IM.BICUBIC): (0.01, 0.0),
               ("tensor", IM.BILINEAR): (0.2, 1.0), ("tensor", IM.BICUBIC): (0.2, 6.0)}   # v1 rounds as torch
STD = np.array([0.229, 0.224, 0.225])[:, None, None]


@pytest.mark.parametrize("use_v2", [False, True])
@pytest.mark.parametrize("backend", ["pil", "tensor"])
@pytest.mark.parametrize("interpolation", [IM.BILINEAR, IM.BICUBIC])
def test_eval_preset_matches_torchvision(photo_files, use_v2, backend, interpolation):
    recipe = classification_eval(crop_size=96, resize_size=112, interpolation=interpolation, backend=backend,
                                 use_v2=use_v2)
    gaps = [np.abs(ours - theirs) * STD * 255 for ours, theirs in zip(dali_outputs(photo_files, recipe),
                                                                      twin_outputs(photo_files, recipe))]
    mean, worst = float(np.mean([g.mean() for g in gaps])), float(max(g.max() for g in gaps))
    print(f"eval preset v2={use_v2} {backend} {interpolation.value}: mean {mean:.3f}/255, worst {worst:.2f}/255")
    bound = EVAL_BOUNDS[backend, interpolation]
    assert mean <= bound[0] and worst <= bound[1] + 0.01


TRAIN_PRESETS = [dict(auto_augment_policy=None), dict(auto_augment_policy="ra"),
                 dict(auto_augment_policy="ta_wide", random_erase_prob=0.1),
                 dict(auto_augment_policy="imagenet"), dict(interpolation=IM.BICUBIC, aa_interpolation=IM.BILINEAR,
                                                            auto_augment_policy="ta_wide"),
                 dict(auto_augment_policy="augmix")]


@pytest.mark.parametrize("use_v2", [False, True])
@pytest.mark.parametrize("backend", ["pil", "tensor"])
@pytest.mark.parametrize("options", TRAIN_PRESETS, ids=lambda o: "-".join(str(v) for v in o.values()))
def test_train_preset_is_translated_whole(use_v2, backend, options):
    recipe = classification_train(crop_size=32, backend=backend, use_v2=use_v2, **options)
    assert not transforms.plan(recipe, python_fallback=False).python
    batches = one_epoch(arrays(48), recipe)
    assert {(tuple(x.shape[1:]), x.dtype) for x, _ in batches} == {((3, 32, 32), torch.float32)}


