"""timm's RandAugment and AutoAugment on GPU graphs (timm_chain.py), run here on the CPU (the
same graph, other device names): each sample's pixels against the conditional graphs' own
timm operation at the sample's argument, exactly; the drawn arguments against timm's own
sampling, as distributions; the GPU graphs have no conditionals."""
import collections
import random

import numpy as np
import pytest
import torch
from scipy import stats
from test_augment_chain import BATCH, HEIGHT, WIDTH, constant_batch, gpu_graph_counts, photos, stages_in  # noqa: F401

from dali_loaders.transforms import Images, augment_chain, timm_chain, timm_fused

timm = pytest.importorskip("timm")
from timm.data import auto_augment as timm_aa  # noqa: E402

from dali_loaders.transforms import timm as translators  # noqa: E402

P_MIN = 1e-3
HPARAMS = dict(translate_const=9, img_mean=(124, 116, 104))
STEPS = {
    "rand-inc1": lambda: timm_aa.rand_augment_transform("rand-m9-mstd0.5-inc1", dict(HPARAMS)),
    "rand-inc0": lambda: timm_aa.rand_augment_transform("rand-m7-n3", dict(HPARAMS)),
    "auto-v0": lambda: timm_aa.auto_augment_transform("v0", dict(HPARAMS)),
    "auto-original": lambda: timm_aa.auto_augment_transform("original", dict(HPARAMS)),
}


def arguments_for(o, rng) -> float:
    """An argument timm could give op `o`: its level at a random magnitude and sign."""
    level = timm_fused.level_of(o.name, o.hparams)
    if level is None:
        return 0.0
    return timm_fused.argument(level, float(rng.uniform(0, 10)), float(rng.choice([-1.0, 1.0])))


def run_chain_and_reference(step, sized: bool, rows: np.ndarray, args: np.ndarray, pixels: np.ndarray):
    """(chain output, {op name: that op on every sample with the sample's argument})."""
    from nvidia.dali import fn, pipeline_def, types

    ops = timm_fused.flat_ops(step)
    names = sorted({o.name for o in ops if o is not None})
    fill = translators.fill_of([o for o in ops if o is not None])

    @pipeline_def(batch_size=BATCH, num_threads=2, device_id=None, seed=3)
    def pipe():
        data = fn.external_source(source=constant_batch(list(pixels)), batch=True, layout="HWC")
        row = fn.external_source(source=constant_batch([np.int32(r) for r in rows]), batch=True)
        arg = fn.external_source(source=constant_batch([np.float32(a) for a in args]), batch=True)

        def images_of():
            if sized:
                return Images(data, HEIGHT, WIDTH, 3, "cpu", kind="pil")
            shape = fn.cast(data.shape(), dtype=types.INT32)
            return Images(data, shape[0], shape[1], 3, "cpu", kind="pil")

        images = images_of()
        timm_chain.apply(step, images, [(row, arg)], translators.warp(fill))
        table = translators.operations(images_of(), fill)
        return (images.data, *[table[name](data, arg) for name in names])

    pipeline = pipe()
    pipeline.build()
    got, *refs = [np.stack([np.array(t) for t in out]) for out in pipeline.run()]
    return got, dict(zip(names, refs))


@pytest.mark.parametrize("sized", [True, False], ids=["size-known", "size-per-sample"])
@pytest.mark.parametrize("name", list(STEPS))
def test_each_sample_gets_exactly_its_operation_at_its_argument(name, sized, stages_in):
    step = STEPS[name]()
    ops = timm_fused.flat_ops(step)
    rng = np.random.default_rng(len(name))
    real = [k for k, o in enumerate(ops) if o is not None]
    rows = np.array(([k for k in real] * BATCH)[:BATCH - 4] + [-1] * 4, np.int32)
    rng.shuffle(rows)
    args = np.array([arguments_for(ops[r], rng) if r >= 0 else 0.0 for r in rows], np.float32)
    pixels = photos(seed=len(name) + 1)
    got, refs = run_chain_and_reference(step, sized, rows, args, pixels)
    changed = 0
    for i, r in enumerate(rows):
        want = pixels[i] if r < 0 else refs[ops[r].name][i]
        assert np.array_equal(got[i], want), \
            f"sample {i}: {ops[r].name if r >= 0 else 'none'}({args[i]}): {np.abs(got[i].astype(int) - want).max()} off"
        changed += not np.array_equal(got[i], pixels[i])
    assert changed > BATCH // 2


def drawn_arguments(step, batches: int = 8):
    """(row, argument) of the first slot, for batches x BATCH samples, as the GPU graph draws them."""
    from nvidia.dali import fn, pipeline_def, types

    @pipeline_def(batch_size=BATCH, num_threads=2, device_id=None, seed=11)
    def pipe():
        data = fn.cast(fn.random.uniform(range=[0, 255], shape=[HEIGHT, WIDTH, 3]), dtype=types.UINT8)
        index, arg = timm_chain.draws(step, Images(data, HEIGHT, WIDTH, 3, "cpu", kind="pil"))[0]
        return fn.cast(index, dtype=types.INT32) if not isinstance(index, int) else data[0, 0, 0] * 0 + index, arg

    pipeline = pipe()
    pipeline.build()
    rows, args = [], []
    for _ in range(batches):
        r, a = pipeline.run()
        rows += [int(np.array(t)) for t in r]
        args += [float(np.array(t)) for t in a]
    return np.array(rows), np.array(args)


def timm_arguments(o, count: int, seed: int) -> np.ndarray:
    """timm's AugmentOp: its magnitude noise and clip, then its level function (sign included)."""
    random.seed(seed)
    out = []
    for _ in range(count):
        magnitude = o.magnitude
        if o.magnitude_std > 0:
            magnitude = random.uniform(0, magnitude) if o.magnitude_std == float("inf") else \
                random.gauss(magnitude, o.magnitude_std)
        magnitude = max(0.0, min(magnitude, o.magnitude_max or 10.0))
        level = o.level_fn(magnitude, o.hparams) if o.level_fn is not None else ()
        out.append(float(level[0]) if level else 0.0)
    return np.array(out)


@pytest.mark.parametrize("policy", ["rand-m9-mstd0.5-inc1", "rand-m9-mstd101-inc0", "rand-m5-mstd0-inc1"])
def test_drawn_ops_probabilities_and_arguments_follow_timms_sampling(policy):
    step = timm_aa.rand_augment_transform(policy, dict(HPARAMS))
    rows, args = drawn_arguments(step)
    ops = step.ops
    applied = rows >= 0
    # each op applied with its p (0.5): the skipped slots are row -1
    assert stats.binomtest(int(applied.sum()), len(rows), 0.5).pvalue > P_MIN
    counts = collections.Counter(rows[applied].tolist())
    assert stats.chisquare([counts.get(k, 0) for k in range(len(ops))]).pvalue > P_MIN
    for k, o in enumerate(ops):
        # float32 here, double in timm: equal values must compare equal
        mine, theirs = np.round(args[rows == k], 4), np.round(timm_arguments(o, 4000, seed=k), 4)
        if np.ptp(theirs) == 0:
            assert np.allclose(mine, theirs[0], rtol=1e-5, atol=1e-5), o.name
        else:
            assert stats.ks_2samp(mine, theirs).pvalue > P_MIN, (o.name, mine[:8], theirs[:8])


@pytest.mark.parametrize("sized", [True, False], ids=["size-known", "size-per-sample"])
@pytest.mark.parametrize("policy", ["rand-m9-mstd0.5-inc1", "rand-m9-mstd101-inc0", "rand-m7-n3-mstd0",
                                    "rand-m9-mstd0.5-inc1-p0.5", "v0", "original"])
def test_the_rows_operator_gives_the_graphs_rows_bit_for_bit(policy, sized):
    """DaliLoadersTimmRows against the same rows in DALI arithmetic (the graph that the tests
    above compare with timm), from the same draws: every slot of every sample, exactly, over
    batches whose draws skip slots, flip signs and add noise."""
    from nvidia.dali import fn, pipeline_def, types

    from dali_loaders.ops import plugin

    if not plugin.augment_available():
        pytest.skip("the augmentation plugin cannot be built here")
    make = timm_aa.auto_augment_transform if policy in ("v0", "original") else timm_aa.rand_augment_transform
    step = make(policy, dict(HPARAMS))

    @pipeline_def(batch_size=BATCH, num_threads=2, device_id=None, seed=5)
    def pipe():
        data = fn.cast(fn.random.uniform(range=[0, 255], shape=[HEIGHT, WIDTH, 3]), dtype=types.UINT8)
        shape = fn.cast(data.shape(), dtype=types.INT32)
        images = Images(data, *((HEIGHT, WIDTH) if sized else (shape[0], shape[1])), 3, "cpu", kind="pil")
        draws = timm_chain.slot_draws(step)
        graph = timm_chain.graph_rows(step, images, timm_chain.graph_draws(step, images, *draws))
        stages = timm_chain.rows(timm_fused.flat_ops(step), images)[3] - {"Rotate"}   # the map before it
        graph_maps = [augment_chain.warp_matrix(images, row, stages) for row in graph]
        mine = [value for pair in timm_chain.operator_rows(step, images, *draws) for value in pair]
        return (*mine, *[value for pair in zip(graph, graph_maps) for value in pair])

    pipeline = pipe()
    pipeline.build()
    changed = moved = 0
    for _ in range(4):
        outputs = [np.stack([np.array(t) for t in out]) for out in pipeline.run()]
        half = len(outputs) // 2
        for k, (mine, theirs) in enumerate(zip(outputs[:half], outputs[half:])):
            assert mine.shape == theirs.shape
            if k % 2 == 0:   # the rows: bit for bit
                assert np.array_equal(mine.view(np.uint32), theirs.view(np.uint32)), np.argwhere(mine != theirs)[:4]
                changed += int((mine != np.array(list(augment_chain.NO_OP.values()), np.float32)).any(-1).sum())
            else:            # the maps: equal values (a zero's sign aside)
                assert np.array_equal(mine, theirs), np.argwhere(mine != theirs)[:4]
                moved += int((mine[:, :, 2] != 0).any(-1).sum())
    assert changed > BATCH   # most slots drew an op that changes its row
    assert moved > 0 or not policy.startswith("rand")   # and some a translation (RandAugment's are fractions)


def test_a_noise_that_is_ignored_fails_the_comparison():
    """The comparison above tells the noise from its absence."""
    noisy = timm_aa.rand_augment_transform("rand-m9-mstd0.5-inc1", dict(HPARAMS)).ops
    quiet = timm_aa.rand_augment_transform("rand-m9-mstd0-inc1", dict(HPARAMS)).ops
    rotate = [k for k, o in enumerate(noisy) if o.name == "Rotate"][0]
    assert stats.ks_2samp(timm_arguments(noisy[rotate], 2000, 1),
                          timm_arguments(quiet[rotate], 2000, 2)).pvalue < P_MIN


@pytest.mark.parametrize("name", ["rand-inc1", "auto-v0"])
def test_gpu_graphs_have_no_conditionals(name):
    total, kinds = gpu_graph_counts(STEPS[name]())
    assert not any("conditional" in kind for kind in kinds), kinds
    assert kinds["WarpAffine"] == 2, kinds   # two slots, one warp each (the fill added back, no coverage warp)


@pytest.mark.parametrize("box", ["arithmetic", "DaliLoadersEraseBox"])
@pytest.mark.parametrize("recipe", ["resnet50", "timm-ra"])
def test_the_heavy_recipes_run_whole_on_the_chain(recipe, box, tmp_path, monkeypatch):
    """torchvision's ResNet-50 recipe and timm's RandAugment recipe, through a loader with the
    chain forced onto a CPU graph, RandomErasing's box drawn as GPU graphs draw it (in DALI
    arithmetic with the plugins off, or by DaliLoadersEraseBox with the fused operator kept
    out): normalized batches of the recipe's size, two epochs, each image its own."""
    from PIL import Image
    from torchvision import datasets

    from dali_loaders import DaliLoader
    from dali_loaders.bench.catalog import RECIPES
    from dali_loaders.ops import augment, plugin
    from dali_loaders.transforms import augment_chain

    if box == "arithmetic":
        monkeypatch.setenv(plugin.DISABLE_ENV, "1")   # DALI's own operators only, as on a GPU graph
    elif not plugin.augment_available():
        pytest.skip("the augmentation plugin cannot be built here")
    else:
        monkeypatch.setattr(augment, "usable", lambda device: False)   # the fused operator: a CPU graph's
        boxes = []
        drawn = augment.erase_box
        monkeypatch.setattr(augment, "erase_box", lambda *args, **kwargs: boxes.append(1) or drawn(*args, **kwargs))
    chained = []
    monkeypatch.setattr(augment_chain, "usable", lambda images: chained.append(1) or True)
    rng = np.random.default_rng(1)
    for i in range(12):
        folder = tmp_path / f"c{i % 3}"
        folder.mkdir(exist_ok=True)
        Image.fromarray(rng.integers(0, 255, (260, 300, 3), dtype=np.uint8)).save(folder / f"{i:02d}.jpg")
    transform = RECIPES["imagenet"][recipe].make(True)
    loader = DaliLoader(datasets.ImageFolder(str(tmp_path), transform=transform), batch_size=4, shuffle=True,
                        num_workers=2, seed=3)
    for _ in range(2):
        batches = [images for images, _ in loader]
        assert len(batches) == 3
        for images in batches:
            assert images.dtype.is_floating_point and images.shape[1] == 3 and images.shape[2] == images.shape[3]
            assert torch.isfinite(images).all() and images.std() > 0.1
    assert chained
    assert box == "arithmetic" or boxes
