"""timm's AugMix (create_transform's `augmix-*`, AugMixAugment) translated
(transforms/timm_aug_mix.py): each chain's depth, operations and arguments against timm's own
__call__ (chi-square, KS), the mix against numpy and PIL's Image.blend, and the whole transform
on photographs replayed through timm's own AugmentOps and mixing, pixel for pixel."""
import random

import numpy as np
import pytest
import torch
from photos import photo_arrays
from scipy import stats
from test_timm import fused_draws, timm_aa
from test_autoaugment import same_distribution

from dali_loaders import transforms
from dali_loaders.loader import dali_loader
from dali_loaders.ops import plugin
from dali_loaders.sources.arrays import ArraySource
from dali_loaders.transforms import TRANSLATORS, Images, aug_mix, timm_aug_mix, timm_fused

timm = pytest.importorskip("timm")
from PIL import Image  # noqa: E402
from timm.data import create_transform  # noqa: E402

P_MIN = 1e-3
HPARAMS = dict(translate_const=100, img_mean=(124, 116, 104))
needs_plugin = pytest.mark.skipif(not plugin.augment_available(), reason="the augmentation plugin is not built here")


def augmix(config="augmix-m3-w3", **hparams):
    return timm_aa.augment_and_mix_transform(config, dict(HPARAMS, **hparams))


def timm_chains(step, samples: int = 3000):
    """Each chain timm's __call__ draws, as (name, argument) tuples: the ops' functions replaced
    by recorders that hand back a copy, so a chain starts where a function is handed the image
    itself."""
    random.seed(0), np.random.seed(0)
    chains, image = [], Image.new("RGB", (4, 4))

    def recorder(img, *args, _name, **kwargs):
        if img is image:
            chains.append([])
        chains[-1].append((_name, round(float(args[0]), 4) + 0.0 if args else 0.0))
        return img.copy()

    saved = {id(o): o.aug_fn for o in step.ops}
    try:
        for o in step.ops:
            o.aug_fn = lambda img, *args, _name=o.name, **kwargs: recorder(img, *args, _name=_name, **kwargs)
        for _ in range(samples // step.width):
            step(image)
    finally:
        for o in step.ops:
            o.aug_fn = saved[id(o)]
    return [tuple(chain) for chain in chains]


@needs_plugin
@pytest.mark.parametrize("config", ["augmix-m3-w3", "augmix-m7-w2-d2-mstd0.5"])
def test_chains_are_drawn_as_timm_draws_them(config):
    step = augmix(config)
    ours = fused_draws(timm_aug_mix.chain_of(step), 3072)
    theirs = timm_chains(augmix(config))
    names = lambda chains: [name for chain in chains for name, _ in chain]   # noqa: E731
    assert same_distribution([len(c) for c in ours], [len(c) for c in theirs]) > P_MIN   # the depth
    assert same_distribution(names(ours), names(theirs)) > P_MIN
    for name in set(names(theirs)):   # the magnitude draws and the signs
        mine = [m for chain in ours for n, m in chain if n == name]
        others = [m for chain in theirs for n, m in chain if n == name]
        assert stats.ks_2samp(mine, others).pvalue > P_MIN, name
    if "d2" in config:
        assert {len(c) for c in ours} == {2}


@needs_plugin
def test_the_mix_operator_mixes_and_blends_as_timm():
    """DaliLoadersMix with blend=True against numpy's float32 sum, its clip and truncation, then
    PIL's Image.blend; DALI's arithmetic (GPU graphs, no plugin) the same bytes."""
    from nvidia.dali import fn, pipeline_def

    rng = np.random.default_rng(2)
    for width in (1, 3, 4):
        images = [[rng.integers(0, 256, (33, 21, 3), dtype=np.uint8) for _ in range(8)] for _ in range(1 + width)]
        weights = [np.concatenate([[rng.beta(1, 1)], rng.dirichlet([1.0] * width)]).astype(np.float32)
                   for _ in range(6)]
        weights += [np.eye(1 + width, dtype=np.float32)[0], np.eye(1 + width, dtype=np.float32)[-1]]

        @pipeline_def(batch_size=8, num_threads=2, device_id=None, seed=1)
        def pipe():
            inputs = [fn.external_source(source=feed(images[k]), batch=True, layout="HWC") for k in range(1 + width)]
            w = fn.external_source(source=feed(weights), batch=True)
            ours = aug_mix.op.mix(inputs[0], inputs[1:], w, blend=True)
            m, shares = w[0], [w[k + 1] for k in range(width)]
            return ours, mixed_without_the_operator(inputs[0], inputs[1:], m, shares)

        pipeline = pipe()
        pipeline.build()
        ours, arithmetic = pipeline.run()
        for i in range(8):
            mixed = np.zeros(images[0][i].shape, np.float32)
            for k in range(width):
                mixed += weights[i][k + 1] * np.asarray(images[k + 1][i], dtype=np.float32)
            np.clip(mixed, 0, 255.0, out=mixed)
            want = np.asarray(Image.blend(Image.fromarray(images[0][i]), Image.fromarray(mixed.astype(np.uint8)),
                                          float(weights[i][0])))
            assert np.array_equal(np.array(ours[i]), want) and np.array_equal(np.array(arithmetic[i]), want)


def mixed_without_the_operator(image, chains, m, shares):
    """aug_mix.mixed as a graph without the plugin computes it (DALI's arithmetic)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(aug_mix.op, "usable", lambda device: False)
        return aug_mix.mixed(image, chains, m, shares, "cpu", blend=True)


def feed(batch):
    return lambda: batch


@needs_plugin
def test_photographs_equal_timms_augmix_replayed(monkeypatch):
    """Fixed magnitudes (mstd0) and signs, the weights fed in: every image equals timm's own ops
    replayed in the order each chain drew them, mixed and blended as timm does."""
    from nvidia.dali import fn, pipeline_def, types

    step = augmix("augmix-m5-w3-mstd0", interpolation=Image.BILINEAR)
    monkeypatch.setattr(timm_fused, "FIXED_SIGN", 1.0)
    pictures = photo_arrays(48, 12)
    rng = np.random.default_rng(8)
    weights = [np.concatenate([[rng.beta(1, 1)], rng.dirichlet([1.0] * 3)]).astype(np.float32) for _ in pictures]
    fed = {}
    monkeypatch.setattr(aug_mix, "beta", lambda alpha: fed["w"][0])
    monkeypatch.setattr(aug_mix, "dirichlet", lambda alpha, width: [fed["w"][k + 1] for k in range(width)])
    by_code = {aug_mix.op.CODES[timm_fused.CODE_OF.get(o.name, o.name)]: o for o in step.ops}
    augment = fn.dali_loaders_augment

    @pipeline_def(batch_size=len(pictures), num_threads=2, device_id=None, seed=11)
    def pipe():
        data = fn.external_source(source=feed(pictures), batch=True, layout="HWC")
        fed["w"] = fn.external_source(source=feed(weights), batch=True)
        shape = data.shape(dtype=types.INT32)
        images = Images(data, shape[0], shape[1], 3, "cpu")
        TRANSLATORS[type(step)](step, images)
        return (images.data, *recorded)

    recorded = []

    def both(data, **arguments):
        recorded.append(augment(data, _record=True, **arguments))
        return augment(data, **arguments)

    monkeypatch.setattr(fn, "dali_loaders_augment", both)
    pipeline = pipe()
    pipeline.build()
    monkeypatch.setattr(random, "random", lambda: 0.1)   # timm's _randomly_negate: no sign flip
    used = set()
    for _ in range(2):
        out, *chains = pipeline.run()
        for i, photo in enumerate(pictures):
            mixed = np.zeros(photo.shape, np.float32)
            for chain, weight in zip(chains, weights[i][1:]):
                steps = np.frombuffer(np.array(chain[i]).tobytes()[:20 * 8], np.float32).reshape(-1, 5)
                image = Image.fromarray(photo)
                for code in steps[:, 0]:
                    if code >= 0 and int(code) in by_code:
                        image = float32_arguments(by_code[int(code)])(image)
                        used.add(int(code))
                mixed += weight * np.asarray(image, dtype=np.float32)
            np.clip(mixed, 0, 255.0, out=mixed)
            want = np.asarray(Image.blend(Image.fromarray(photo), Image.fromarray(mixed.astype(np.uint8)),
                                          float(weights[i][0])))
            got = np.array(out[i])
            assert np.array_equal(got, want), f"image {i}: {np.abs(got.astype(int) - want).max()} levels apart"
    assert len(used) >= 10   # most of the 13 operations were replayed


def float32_arguments(augment_op):
    """timm's op with its arguments rounded to float32, as the operator takes them."""
    def call(image):
        function = augment_op.aug_fn
        augment_op.aug_fn = lambda img, *args, **kwargs: function(img, *(a if isinstance(a, int) else float(np.float32(a)) for a in args), **kwargs)
        try:
            return augment_op(image)
        finally:
            augment_op.aug_fn = function
    return call


def test_create_transform_with_augmix_runs_translated_and_refusals_name_themselves(monkeypatch):
    recipe = create_transform(32, is_training=True, auto_augment="augmix-m3-w3")
    assert not transforms.plan(recipe, python_fallback=False).python
    pixels = np.random.default_rng(0).integers(0, 256, (16, 40, 40, 3), dtype=np.uint8)
    for plugins in ("on", "off"):
        if plugins == "off":
            monkeypatch.setenv(plugin.DISABLE_ENV, "1")
        loader = dali_loader(ArraySource(pixels, np.arange(16) % 3, "noise"), recipe, train=True, batch_size=8,
                             num_threads=2)
        assert loader.route == "dali"
        assert [(tuple(x.shape), x.dtype) for x, _ in loader] == [((8, 3, 32, 32), torch.float32)] * 2
    for config, named in (("augmix-m3-w3-b1", "blended=True"), ("augmix-m3-w0", "width=0"),
                          ("augmix-m3-a0", "alpha=0.0")):
        with pytest.raises(ValueError, match=named):
            transforms.plan(augmix(config), python_fallback=False)


@pytest.mark.parametrize("variant", ["gpu", "cpu-decode"])
def test_the_gpu_graph_has_no_gpu_to_cpu_edge_and_no_conditionals(tmp_path, variant):
    """On GPU pixels the chains are the GPU chain's operators and the mix DALI's arithmetic, the
    weights copied over once; device="gpu" keeps the steps on the CPU where the operator is built."""
    from image_data import write_image_folder
    from test_gpu_graphs import gpu_to_cpu_edges

    from dali_loaders.loader.build import graph_variant, serialized_gpu_graph
    from dali_loaders.sources.image_files import ImageFiles

    write_image_folder(str(tmp_path), {"a": 2, "b": 2})
    source = ImageFiles(str(tmp_path))
    recipe = create_transform(32, is_training=True, auto_augment="augmix-m3-w3")
    plan = transforms.plan(recipe, python_fallback=False)
    assert not transforms.needs_conditionals(plan, variant)
    assert gpu_to_cpu_edges(serialized_gpu_graph(source, recipe, variant=variant)) == []
    assert graph_variant("gpu", source, plan) == ("cpu-steps" if plugin.augment_available() else "gpu")
