"""timm's create_transform translated (issue 17): each class against timm itself. Random
steps: the op choice, the per-op probability and the magnitude noise, recorded on both sides
and compared as distributions; RandomErasing's boxes; the crop's random interpolation.
Deterministic ones: pixel against pixel, within the bounds in the README's recipe table."""
import random

import numpy as np
import pytest
import torch
from photos import photo_arrays
from scipy import stats
from test_autoaugment import same_distribution, tape_draws, tape_recorder
from test_transforms import dali_outputs, twin_outputs

from dali_loaders import transforms
from dali_loaders.loader import dali_loader, serialized_gpu_graph
from dali_loaders.sources.arrays import ArraySource
from dali_loaders.transforms import Images

timm = pytest.importorskip("timm")
from timm.data import auto_augment as timm_aa  # noqa: E402
from timm.data import create_transform, resolve_data_config  # noqa: E402
from timm.data.random_erasing import RandomErasing  # noqa: E402
from timm.data.transforms import RandomResizedCropAndInterpolation  # noqa: E402

from dali_loaders.transforms import timm as translators  # noqa: E402

P_MIN = 1e-3
RA = "rand-m9-mstd0.5-inc1"


def rand_augment(policy=RA, **hparams):
    return timm_aa.rand_augment_transform(policy, dict(dict(translate_const=100, img_mean=(124, 116, 104)),
                                                       **hparams))


def resnet50_config():
    return resolve_data_config({}, model=timm.create_model("resnet50", pretrained=False))


def arrays(size=48, n=None):
    images = photo_arrays(size, n)
    return ArraySource(images, np.arange(len(images)), "photos")


# -- the op choice, p and magnitudes: DALI's draws against timm's ------------------------------------

def dali_draws(step, monkeypatch, samples=2048, fused=True):
    """Per sample, the (name, argument) of each applied op: on the fused path (the CPU graphs'
    with the plugin) its slots' draws, else the conditionals' ops recording on a tape."""
    if fused:
        return fused_draws(step, samples)
    monkeypatch.setattr(translators.timm_fused, "translate", lambda *args: False)
    names = sorted(translators.KNOWN_OPS)
    monkeypatch.setattr(translators, "operations",
                        lambda images, fill: {name: tape_recorder(k) for k, name in enumerate(names)})
    return tape_draws(step, names, samples)


def fused_draws(step, samples):
    """The fused path's draws as the operator resolves them (its test-only `_record` writes
    each sample's steps, op code and p0 .. p3, into the output): (timm name, argument) of
    each applied op, translations back from pixels to timm's fraction or pixels."""
    from nvidia.dali import fn, pipeline_def, types

    from dali_loaders.ops import augment as augment_op
    from dali_loaders.transforms import timm_fused

    ops = [o for o in timm_fused.flat_ops(step) if o is not None]
    by_code = {augment_op.CODES[timm_fused.CODE_OF.get(o.name, o.name)]: o.name for o in ops}
    assert len(by_code) == len({o.name for o in ops}), "two of the step's ops share an op code"
    from dali_loaders.ops import plugin

    if not plugin.augment_available():
        pytest.skip("the augmentation plugin cannot be built here")
    augment = fn.dali_loaders_augment
    batch, side = 512, 32

    @pipeline_def(batch_size=batch, num_threads=2, device_id=None, seed=7)
    def pipe():
        data = fn.constant(idata=0, shape=[side, side, 3], dtype=types.UINT8)
        images = Images(fn.reshape(data, layout="HWC"), side, side, 3, "cpu")
        assert timm_fused.translate(step, images)
        images.flush_augment()
        return images.data

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fn, "dali_loaders_augment", lambda *args, **kwargs: augment(*args, **kwargs, _record=True))
        pipeline = pipe()
        pipeline.build()
    draws = []
    for _ in range(samples // batch):
        for out in pipeline.run()[0]:
            steps = np.frombuffer(np.array(out).tobytes()[:20 * 8], np.float32).reshape(-1, 5)
            drawn = []
            for code, p0, *_ in steps:
                if code < 0 or int(code) not in by_code:
                    continue
                name = by_code[int(code)]
                if name.startswith("Translate"):   # the operator's p0: the content moved, in pixels
                    p0 = -p0 / side if name.endswith("Rel") else -p0
                drawn.append((name, round(float(p0), 4) + 0.0))
            draws.append(tuple(drawn))
    return draws


def timm_draws(step, samples=4096):
    """timm's own __call__, each op's function replaced by a recorder of its argument."""
    random.seed(0), np.random.seed(0)
    record = []
    ops = step.ops if hasattr(step, "ops") else [op for sub in step.policy for op in sub]
    for op in ops:
        op.aug_fn = lambda image, *args, _name=op.name, **kwargs: record.append((_name, round(float(args[0]), 4) + 0.0 if args
                                                                                 else 0.0)) or image
    draws = []
    for _ in range(samples):
        record.clear()
        step(None)
        draws.append(tuple(record))
    return draws


def compare_draws(dali, reference):
    names = lambda draws: [name for draw in draws for name, _ in draw]   # noqa: E731
    assert same_distribution(names(dali), names(reference)) > P_MIN
    assert same_distribution([len(d) for d in dali], [len(d) for d in reference]) > P_MIN   # p per op
    for name in set(names(reference)):
        ours = [m for draw in dali for n, m in draw if n == name]
        theirs = [m for draw in reference for n, m in draw if n == name]
        assert stats.ks_2samp(ours, theirs).pvalue > P_MIN, name   # the magnitude noise and the signs


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "conditionals"])
@pytest.mark.parametrize("policy", [RA, "rand-m7-n3-mstd1.0", "rand-m9-mstd101", "rand-m5-inc0-p0.8",
                                    "rand-m9-mstd1-mmax9", "rand-m9-n2-inc1", "rand-m9-n2-tweights-mstd0.5",
                                    "rand-m7-n3-tweights"])
def test_rand_augment_draws_as_timm(policy, fused, monkeypatch):
    compare_draws(dali_draws(rand_augment(policy), monkeypatch, fused=fused), timm_draws(rand_augment(policy)))


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "conditionals"])
@pytest.mark.parametrize("policy", ["original", "v0", "originalr"])
def test_auto_augment_draws_as_timm(policy, fused, monkeypatch):
    make = lambda: timm_aa.auto_augment_transform(policy, dict(translate_const=100, img_mean=(124, 116, 104)))  # noqa: E731
    dali, reference = dali_draws(make(), monkeypatch, fused=fused), timm_draws(make())
    compare_draws(dali, reference)
    # whole sequences: only the policy's sub-policies produce them
    assert same_distribution([tuple(n for n, _ in d) for d in dali], [tuple(n for n, _ in d) for d in reference]) > P_MIN


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "conditionals"])
def test_a_parameter_ignored_would_show(fused, monkeypatch):
    """The comparison fails when the noise, p, the op list, the magnitude bound or the choice
    weights differ."""
    with pytest.raises(AssertionError):
        compare_draws(dali_draws(rand_augment("rand-m9-mstd0.5-inc1"), monkeypatch, fused=fused),
                      timm_draws(rand_augment("rand-m9-mstd0-inc1")))
    with pytest.raises(AssertionError):
        compare_draws(dali_draws(rand_augment("rand-m9-inc1-p0.9"), monkeypatch, fused=fused),
                      timm_draws(rand_augment("rand-m9-inc1")))
    with pytest.raises(AssertionError):
        compare_draws(dali_draws(rand_augment("rand-m9-mstd1-mmax9"), monkeypatch, fused=fused),
                      timm_draws(rand_augment("rand-m9-mstd1")))
    with pytest.raises(AssertionError):
        compare_draws(dali_draws(rand_augment("rand-m9-n2-tweights"), monkeypatch, fused=fused),
                      timm_draws(rand_augment("rand-m9-n2")))


# -- each operation at a fixed magnitude, pixel against timm ---------------------------------------

# largest |DALI - timm| (levels) and mean over pixels (levels), the bounds of the conditionals'
# path (GPU graphs, no plugin): timm's PIL warps are bicubic, DALI's bilinear; the colour
# operations are PIL's arithmetic. The fused path (CPU graphs) is exact at float32 arguments
# (test_fused_rand_augment_equals_timm_replayed_pixel_for_pixel); at timm's double ones its
# shears differ by 1 level in a few pixels.
EXACT = (0, 0.0)
OP_BOUNDS = {"Invert": EXACT, "PosterizeIncreasing": EXACT, "SolarizeIncreasing": EXACT, "SolarizeAdd": EXACT,
             "BrightnessIncreasing": EXACT, "ContrastIncreasing": EXACT, "SharpnessIncreasing": EXACT,
             "ColorIncreasing": (1, 0.01), "AutoContrast": (1, 0.01), "Equalize": (60, 6.0),
             "Rotate": (80, 3.5), "ShearX": (70, 2.5), "ShearY": (70, 2.5), "TranslateXRel": (16, 1.0),
             "TranslateYRel": (16, 1.0)}


def single_op(name, magnitude=9):
    hparams = dict(translate_const=100, img_mean=(124, 116, 104), interpolation=3)   # bicubic, as create_transform
    return timm_aa.RandAugment([timm_aa.AugmentOp(name, prob=1.0, magnitude=magnitude, hparams=hparams)], num_layers=1)


@pytest.mark.parametrize("name", sorted(OP_BOUNDS))
def test_each_operation_matches_timm_at_a_fixed_magnitude(name, monkeypatch):
    """The sign fixed at + on both sides (timm: random.random() above 0.5 negates), so a
    rotation or shear the wrong way round shows."""
    from PIL import Image
    from torchvision.transforms import v2

    from dali_loaders.transforms.python_fallback import as_tensor

    images = photo_arrays(64)
    source = ArraySource(images, np.arange(len(images)), "photos")
    step = single_op(name)
    monkeypatch.setattr(translators.timm_chain, "sign_draw", lambda: 1.0)
    monkeypatch.setattr(translators.timm_fused, "FIXED_SIGN", 1.0)
    ours = dali_outputs(source, [step, v2.PILToTensor()])
    monkeypatch.setattr(random, "random", lambda: 0.1)
    gaps = [np.abs(got.astype(int) - as_tensor(step(Image.fromarray(image))).numpy().astype(int))
            for got, image in zip(ours, images)]
    worst, mean = max(int(g.max()) for g in gaps), float(np.mean([g.mean() for g in gaps]))
    print(f"{name}: mean {mean:.3f}, worst {worst}")
    assert worst <= OP_BOUNDS[name][0] and mean <= OP_BOUNDS[name][1], (name, worst, mean)


def timm_replays(ops, image):
    """Every output timm's own AugmentOps give for two layers: each op with each sign (timm's
    _randomly_negate reads random.random(): above 0.5 negates). The arguments rounded to
    float32, as the operator takes its parameters (tests/test_augment_op.py)."""
    from PIL import Image

    from dali_loaders.transforms.python_fallback import as_tensor

    def float32_args(function):
        return lambda img, *args, **kwargs: function(img, *(float(np.float32(a)) for a in args), **kwargs)

    variants = []
    for op in ops:
        signed = timm_aa.LEVEL_TO_ARG[op.name] is not None and op.name in translators.SIGNED
        variants += [(op, r) for r in ((0.1, 0.9) if signed else (0.1,))]
    outputs = {}
    with pytest.MonkeyPatch.context() as patch:
        for op in ops:
            patch.setattr(op, "aug_fn", float32_args(op.aug_fn))
        for (first, r1), (second, r2) in [(a, b) for a in variants for b in variants]:
            img = Image.fromarray(image)
            patch.setattr(random, "random", lambda: r1)
            img = first(img)
            patch.setattr(random, "random", lambda: r2)
            outputs[(first.name, r1, second.name, r2)] = as_tensor(second(img)).numpy()
    return outputs


def test_fused_rand_augment_equals_timm_replayed_pixel_for_pixel():
    """Two layers of five ops (warps bicubic, timm's fill): each output is exactly one of
    timm's own two-op sequences, and the images together use several sequences."""
    from torchvision.transforms import v2

    from dali_loaders.ops import plugin

    if not plugin.augment_available():
        pytest.skip("the augmentation plugin cannot be built here")
    hparams = dict(translate_const=100, img_mean=(124, 116, 104), interpolation=3)
    ops = [timm_aa.AugmentOp(name, prob=1.0, magnitude=7, hparams=hparams)
           for name in ("Rotate", "ShearY", "TranslateYRel", "ColorIncreasing", "SolarizeAdd")]
    step = timm_aa.RandAugment(ops, num_layers=2)
    images = photo_arrays(64, 16)
    ours = dali_outputs(ArraySource(images, np.arange(len(images)), "photos"), [step, v2.PILToTensor()])
    used = set()
    for got, image in zip(ours, images):
        matches = [key for key, out in timm_replays(ops, image).items() if np.array_equal(got, out)]
        assert matches, "no sequence of timm's ops gives this image"
        used.add(matches[0])
    assert len(used) >= 4, used


def test_posterize_to_zero_bits_is_black_as_timm_meant_it():
    """PosterizeIncreasing at magnitude 10 keeps 4 - 4 = 0 bits. Pillow 13 refuses that (timm
    1.0.31's own op then raises); older Pillow, and this translation, give a black image."""
    from torchvision.transforms import v2

    outputs = dali_outputs(arrays(32), [single_op("PosterizeIncreasing", magnitude=10), v2.PILToTensor()])
    assert all(not out.any() for out in outputs)


# -- RandomErasing --------------------------------------------------------------------------------------


def erased_boxes(outputs, erased):
    """(top, left, height, width) of each image's erased box, or None."""
    boxes = []
    for out in outputs:
        rows, cols = np.nonzero(erased(out))
        boxes.append(None if len(rows) == 0 else (rows.min(), cols.min(), rows.max() - rows.min() + 1,
                                                  cols.max() - cols.min() + 1))
    return boxes


def erasing_on_ones(mode, p=0.7, n=1536, backend="dali", **counts):
    from torchvision.transforms import v2

    images = np.full((n, 24, 40, 3), 255, np.uint8)
    source = ArraySource(images, np.arange(n), "ones")
    recipe = [v2.ToImage(), v2.ToDtype(torch.float32, scale=True), RandomErasing(p, mode=mode, device="cpu", **counts)]
    if backend == "dali":
        return dali_outputs(source, recipe, batch=512)
    random.seed(0), torch.manual_seed(0)
    return twin_outputs(source, recipe)


@pytest.mark.parametrize("mode", ["const", "rand", "pixel"])
def test_random_erasing_boxes_and_fills_as_timm(mode, erase_path):
    ours, theirs = erasing_on_ones(mode), erasing_on_ones(mode, backend="twin")
    erased = lambda out: (out != 1.0).any(axis=0)   # noqa: E731
    a, b = erased_boxes(ours, erased), erased_boxes(theirs, erased)
    assert stats.binomtest(sum(x is not None for x in a), len(a), 0.7).pvalue > P_MIN
    for k in range(4):
        assert stats.ks_2samp([x[k] for x in a if x], [x[k] for x in b if x]).pvalue > P_MIN, k
    values = np.concatenate([out[:, erased(out)].ravel() for out in ours[:200]])
    if mode == "rand":   # one normal value per channel and image
        assert all(len(np.unique(out[c][erased(out)])) <= 1 for out in ours for c in range(3))
        values = np.array([out[c][erased(out)][0] for out in ours if erased(out).any() for c in range(3)])
    if mode == "const":
        assert (values == 0).all()
    else:
        assert stats.kstest(values[:5000], "norm").pvalue > P_MIN


@pytest.mark.parametrize("mode,counts", [("const", dict(max_count=3)), ("pixel", dict(min_count=2, max_count=3)),
                                         ("rand", dict(max_count=2))])
def test_random_erasing_of_several_boxes_as_timm(mode, counts):
    """timm's re_count: one coin for all the boxes, a count uniform in min .. max, each box of
    area / count. The boxes an image shows (overlapping ones merge, in both) and the area they
    erase, against timm's; the counts' mix fails if the count, or its division, is ignored."""
    from scipy import ndimage

    ours, theirs = (erasing_on_ones(mode, n=1024, backend=b, **counts) for b in ("dali", "twin"))
    erased = lambda out: (out != 1.0).any(axis=0)   # noqa: E731
    shown = [[ndimage.label(erased(out))[1] for out in outputs] for outputs in (ours, theirs)]
    areas = [[erased(out).mean() for out in outputs if erased(out).any()] for outputs in (ours, theirs)]
    assert stats.binomtest(sum(n > 0 for n in shown[0]), len(ours), 0.7).pvalue > P_MIN
    assert max(shown[0]) == counts["max_count"] and max(shown[1]) == counts["max_count"]
    table = [[sum(n == k for n in boxes) for k in range(counts["max_count"] + 1)] for boxes in shown]
    assert stats.chi2_contingency(table).pvalue > P_MIN, table
    assert stats.ks_2samp(*areas).pvalue > P_MIN


def test_random_erasing_of_too_many_boxes_is_refused_by_name():
    with pytest.raises(ValueError, match="timm.RandomErasing: min_count=1, max_count=5"):
        transforms.plan(RandomErasing(0.5, max_count=5), python_fallback=False)


def test_cpu_graphs_of_timm_augments_need_no_conditionals_unless_the_operator_cannot_resample():
    from dali_loaders.ops import plugin

    if not plugin.augment_available():
        pytest.skip("the augmentation plugin cannot be built here")
    fused = transforms.plan([rand_augment(interpolation=3), timm_aa.auto_augment_transform("v0", {})], False)
    assert not transforms.needs_conditionals(fused, "cpu")
    assert not transforms.needs_conditionals(fused, "gpu")   # GPU graphs: timm_chain.py
    lanczos = transforms.plan([rand_augment(interpolation=1), timm_aa.auto_augment_transform("v0", {})], False)
    assert transforms.needs_conditionals(lanczos, "cpu")


def test_create_transform_train_needs_conditionals_only_for_random_interpolation():
    """A fixed interpolation draws no `if` (a graph traced with conditionals takes seconds to
    build, and AutoGraph converts what the graph calls); 'random' does."""
    from dali_loaders.ops import plugin

    if not plugin.augment_available():
        pytest.skip("the augmentation plugin cannot be built here")
    make = lambda mode: create_transform(224, is_training=True, auto_augment="rand-m9-mstd0.5-inc1",  # noqa: E731
                                         re_prob=0.25, re_mode="pixel", interpolation=mode)
    assert not transforms.needs_conditionals(transforms.plan(make("bicubic"), False), "cpu")
    assert transforms.needs_conditionals(transforms.plan(make("random"), False), "cpu")


def test_weighted_choice_with_too_many_sequences_is_refused_by_name():
    with pytest.raises(ValueError, match="timm.RandAugment: 32760 op sequences"):
        transforms.plan(rand_augment("rand-m9-n4-tweights"), python_fallback=False)
    transforms.plan(rand_augment("rand-m9-n3-tweights"), python_fallback=False)


# -- RandomResizedCropAndInterpolation ---------------------------------------------------------------------


def test_random_interpolation_picks_bilinear_or_bicubic_half_the_time():
    """A whole-image crop (scale and ratio fixed at 1) resized: each output is timm's bilinear
    or its bicubic result; each about half of the time."""
    from PIL import Image

    image = photo_arrays(64)[0]
    source = ArraySource(np.repeat(image[None], 256, 0), np.arange(256), "one")
    from torchvision.transforms import v2
    step = RandomResizedCropAndInterpolation(40, scale=(1.0, 1.0), ratio=(1.0, 1.0), interpolation="random")
    outputs = dali_outputs(source, [step, v2.PILToTensor()], batch=256)
    references = [np.asarray(Image.fromarray(image).resize((40, 40), mode)).transpose(2, 0, 1).astype(int)
                  for mode in (Image.BILINEAR, Image.BICUBIC)]
    picks = [int(np.argmin([np.abs(out.astype(int) - r).mean() for r in references])) for out in outputs]
    means = [sorted(np.abs(out.astype(int) - r).mean() for r in references) for out in outputs]
    assert all(near < 0.3 and far > 2.0 for near, far in means)   # each output is one of the two
    assert stats.binomtest(sum(picks), len(picks), 0.5).pvalue > P_MIN


def test_random_resized_crop_and_interpolation_areas_as_timm():
    """Crop areas (the output of a coordinate image tells its window): timm's and DALI's alike."""
    from torchvision.transforms import v2

    n = 512
    ramp = np.tile(np.arange(64, dtype=np.uint8)[None, :, None] * 4, (64, 1, 3))
    source = ArraySource(np.repeat(ramp[None], n, 0), np.arange(n), "ramp")
    step = [RandomResizedCropAndInterpolation(32, interpolation="bilinear"), v2.PILToTensor()]
    span = lambda outs: [float(o[0, 16, -1]) - float(o[0, 16, 0]) for o in outs]   # noqa: E731
    random.seed(0)
    assert stats.ks_2samp(span(dali_outputs(source, step, batch=n)), span(twin_outputs(source, step))).pvalue > P_MIN


# -- the whole recipes ----------------------------------------------------------------------------------------


def test_resnet50_eval_transform_matches_timm(photo_files):
    recipe = create_transform(**resnet50_config())
    gaps = [np.abs(a - b) * 0.229 * 255 for a, b in zip(dali_outputs(photo_files, recipe),
                                                        twin_outputs(photo_files, recipe))]
    print(f"timm resnet50 eval: mean {np.mean([g.mean() for g in gaps]):.3f}/255, worst {max(g.max() for g in gaps):.2f}")
    assert max(g.max() for g in gaps) <= 0.05   # PIL's bicubic resize and crop: the plugin is PIL's


@pytest.mark.parametrize("kwargs", [
    dict(resnet50=True),
    dict(input_size=64, auto_augment=RA, re_prob=0.25, re_mode="pixel", interpolation="bicubic"),
    dict(input_size=64, auto_augment="original", re_prob=0.5, re_mode="rand", interpolation="random"),
], ids=["resnet50", "rand-m9", "original"])
def test_train_transforms_are_translated_whole_and_run(kwargs):
    config = dict(resnet50_config(), input_size=(3, 64, 64)) if kwargs.pop("resnet50", False) else kwargs
    recipe = create_transform(**config, is_training=True)
    assert not transforms.plan(recipe, python_fallback=False).python
    loader = dali_loader(arrays(80), recipe, train=True, batch_size=4, num_threads=1, seed=0)
    assert {(tuple(x.shape[1:]), x.dtype) for x, _ in loader} == {((3, 64, 64), torch.float32)}
    assert serialized_gpu_graph(arrays(80), recipe)


class MyRandAugment(timm_aa.RandAugment):
    """A subclass with a method of its own may change anything: not translated as its parent."""

    def __call__(self, img):
        return super().__call__(img)


class RandAugmentM9(timm_aa.RandAugment):
    def __init__(self, ops):
        super().__init__(ops, num_layers=3)


def test_a_subclass_of_a_timm_class_is_translated_only_if_it_only_sets_arguments():
    step = MyRandAugment(rand_augment().ops)
    with pytest.raises(ValueError, match="MyRandAugment has no DALI translation .*defines __call__"):
        transforms.plan(step, python_fallback=False)
    translated = transforms.plan(RandAugmentM9(rand_augment().ops), python_fallback=False).translated
    assert [type(s) for s in translated] == [timm_aa.RandAugment] and translated[0].num_layers == 3


# -- timm's Mixup as batch_transform ------------------------------------------------------------------------


def timm_mixer(mixup, seed=0, in_place=False):
    from dali_loaders.distributed import EpochSampler, Shard
    from dali_loaders.transforms.mixing import batch_mixer

    return batch_mixer(mixup, EpochSampler(100, shuffle=True, seed=seed, shard=Shard(0, 1, 0)), in_place)


def ramp_batch(n=8, dtype=torch.float32):
    images = torch.arange(n * 3 * 12 * 16, dtype=torch.float32).reshape(n, 3, 12, 16) % 251
    return images.to(dtype), torch.arange(n) % 5


@pytest.mark.parametrize("in_place", [False, True])
@pytest.mark.parametrize("kind,lam,cutmix,minmax", [("Mixup", 0.3, False, None), ("Mixup", 0.6, True, None),
                                                     ("Mixup", 0.6, True, (0.2, 0.8)),
                                                     ("FastCollateMixup", 0.3, False, None),
                                                     ("FastCollateMixup", 0.6, True, None)])
def test_mixup_mixes_as_timm_given_the_same_draws(kind, lam, cutmix, minmax, in_place, monkeypatch):
    """The draws fixed on both sides (lambda, CutMix or not, the box's random integers): the
    images and the smoothed labels equal timm's own, CutMix pasted into the loader's own batch
    (in place) or into a copy."""
    from timm.data import mixup as timm_mixup

    from dali_loaders.transforms import mixing

    make = lambda: getattr(timm_mixup, kind)(mixup_alpha=0.8, cutmix_alpha=1.0, cutmix_minmax=minmax,  # noqa: E731
                                             label_smoothing=0.1, num_classes=5)
    third = lambda low, high, size=None: (high - low) // 3 + low   # noqa: E731
    monkeypatch.setattr(mixing.TimmBatchMixer, "draw", lambda self, g: (lam, cutmix))
    monkeypatch.setattr(mixing, "_randint", lambda low, high, g: third(low, high))
    dtype = torch.uint8 if kind == "FastCollateMixup" else torch.float32
    images, labels = ramp_batch(dtype=dtype)
    batch = images.clone()
    ours, soft = timm_mixer(make(), in_place=in_place)(batch, labels, 0, 0)
    if cutmix:
        assert (ours.data_ptr() == batch.data_ptr()) == in_place
        assert torch.equal(batch, ours if in_place else images)
    reference = make()
    monkeypatch.setattr(reference, "_params_per_batch", lambda: (lam, cutmix))
    monkeypatch.setattr(timm_mixup.np.random, "randint", third)
    if kind == "FastCollateMixup" and cutmix:   # its collate, on the samples as numpy uint8 images
        theirs, their_soft = reference([(image.numpy(), int(label)) for image, label in zip(images, labels)])
    elif kind == "FastCollateMixup":   # its collate mixes numpy uint8 images, rounded
        theirs = images.float() * lam + images.flip(0).float() * (1 - lam)
        theirs, their_lam = np.rint(theirs.numpy()).astype(np.uint8), lam
        theirs = torch.from_numpy(theirs)
        their_soft = timm_mixup.mixup_target(labels, 5, their_lam, 0.1)
    else:
        theirs, their_soft = reference(images.clone(), labels)
    assert torch.equal(ours, theirs) and torch.allclose(soft, their_soft, atol=1e-6)


def test_mixup_draws_as_timm():
    """prob, switch_prob and the Beta lambdas: ours against timm's _params_per_batch."""
    from timm.data.mixup import Mixup

    make = lambda: Mixup(mixup_alpha=0.8, cutmix_alpha=1.0, prob=0.7, switch_prob=0.3, num_classes=5)  # noqa: E731
    mixer = timm_mixer(make())
    ours = [mixer.draw(mixer.generator(0, k)) for k in range(3000)]
    np.random.seed(0)
    reference = make()
    theirs = [reference._params_per_batch() for _ in range(3000)]
    kind = lambda draws: [("none" if lam == 1.0 else "cutmix" if cut else "mixup") for lam, cut in draws]  # noqa: E731
    assert same_distribution(kind(ours), kind(theirs)) > P_MIN
    for cut in (False, True):
        a = [lam for lam, c in ours if c == cut and lam != 1.0]
        b = [lam for lam, c in theirs if c == cut and lam != 1.0]
        assert stats.ks_2samp(a, b).pvalue > P_MIN


def test_mixup_switched_off_by_the_trainer_only_smooths_the_labels():
    from timm.data.mixup import Mixup

    mixup = Mixup(mixup_alpha=1.0, prob=1.0, label_smoothing=0.2, num_classes=5)
    mixer = timm_mixer(mixup)
    images, labels = ramp_batch()
    mixup.mixup_enabled = False   # as timm's train.py does at mixup_off_epoch, on the same object
    out, soft = mixer(images.clone(), labels, 0, 0)
    assert torch.equal(out, images)
    assert torch.allclose(soft, torch.nn.functional.one_hot(labels, 5) * 0.8 + 0.04)


def test_mixup_elem_mode_and_subclasses_run_timms_own_code_and_fast_collate_elem_is_refused():
    from timm.data.mixup import FastCollateMixup, Mixup

    from dali_loaders.transforms.mixing import CallableBatchTransform

    with pytest.raises(ValueError, match="timm.FastCollateMixup: mode='elem' is not supported"):
        timm_mixer(FastCollateMixup(mode="elem", num_classes=5))

    class MyMixup(Mixup):
        pass

    images, labels = ramp_batch()
    for mixup in (Mixup(mode="elem", num_classes=5), MyMixup(num_classes=5)):
        hook = timm_mixer(mixup)
        assert isinstance(hook, CallableBatchTransform)   # called as it is, its draws seeded per batch
        out, soft = hook(images.clone(), labels, 0, 0)
        again, soft_again = hook(images.clone(), labels, 0, 0)
        assert torch.equal(out, again) and torch.equal(soft, soft_again) and not torch.equal(out, images)
        assert soft.shape == (8, 5) and torch.allclose(soft.sum(1), torch.ones(8))


def test_mixup_in_both_loaders(tmp_path):
    from timm.data.mixup import Mixup

    from dali_loaders import get_cifar_iter_dali, get_cifar_iter_torch
    from dali_loaders.testing.synthetic import write_cifar

    root = write_cifar(str(tmp_path), "cifar10", 40, 10)
    mixup = Mixup(mixup_alpha=0.8, cutmix_alpha=1.0, label_smoothing=0.1, num_classes=10)
    dali = list(get_cifar_iter_dali("val", root, 8, 1, seed=3, batch_transform=mixup))
    twin = list(get_cifar_iter_torch("val", root, 8, 0, seed=3, batch_transform=mixup))
    for (x, y), (u, v) in zip(dali, twin, strict=True):
        assert y.shape == (len(x), 10) and torch.allclose(y.sum(1), torch.ones(len(x)))
        assert torch.equal(y, v) and (x - u).abs().max() < 1e-5
