"""torchvision's AugMix translated (transforms/aug_mix.py): each chain's operations and depth
drawn as torchvision draws them (chi-square against its own forward, on the fused operator
and on the GPU chain's draws), the Dirichlet weights against torch's sampler (KS), and the
whole transform on photographs replayed through torchvision's own kernels and mixing, pixel
for pixel."""
from collections import Counter

import numpy as np
import pytest
import torch
from augment_rows import rows_of, rows_recorded
from photos import load, photo_paths
from resume_check import assert_resume_gives_the_rest
from scipy import stats
from torchvision.transforms import autoaugment as v1_autoaugment
from torchvision.transforms import v2
import torchvision.transforms as v1

from dali_loaders import transforms
from dali_loaders.loader import dali_loader
from dali_loaders.ops import plugin
from dali_loaders.sources.arrays import ArraySource
from dali_loaders.transforms import TRANSLATORS, Images, aug_mix, fused
from dali_loaders.transforms import augment_space

P_MIN = 1e-3   # a statistical test fails below this p-value
SAMPLES = 2048
BATCH = 512
# the defaults, and every parameter away from its default (a translation ignoring one fails)
SETTINGS = {"default": {}, "changed": dict(severity=6, mixture_width=2, chain_depth=2, all_ops=False)}

needs_plugin = pytest.mark.skipif(not plugin.augment_available(), reason="the augmentation plugin is not built here")


def make(version, settings):
    return (v2 if version == "v2" else v1).AugMix(**SETTINGS[settings])


def same_distribution(a, b) -> float:
    """Chi-square p-value that two samples of categories come from one distribution (the
    categories too rare for the test pooled)."""
    counts_a, counts_b = Counter(a), Counter(b)
    common = [c for c in set(counts_a) | set(counts_b) if counts_a[c] + counts_b[c] >= 20]
    rare = [sum(counts.values()) - sum(counts[c] for c in common) for counts in (counts_a, counts_b)]
    table = np.array([[counts_a[c] for c in common] + [rare[0]], [counts_b[c] for c in common] + [rare[1]]])
    return stats.chi2_contingency(table[:, table.sum(axis=0) > 0])[1]


def label(name, magnitude):
    return name, round(float(np.float32(magnitude)), 4) + 0.0


# -- the draws -----------------------------------------------------------------------------------------


def torchvision_chains(step, samples: int = SAMPLES):
    """Per image, its chains as torchvision's forward draws them: each a tuple of (operation,
    signed magnitude). Its operation kernel is replaced by a recorder that hands back a copy:
    every chain starts from the batch the forward makes of the image, the object the first
    call of the forward is handed."""
    torch.manual_seed(0)
    chains, first = [], {}

    def recorder(image, name, magnitude, *args, **kwargs):
        if not chains[-1]:
            first["batch"] = image
        if image is first["batch"]:
            chains[-1].append([])
        chains[-1][-1].append(label(name, magnitude))
        return image.clone()

    saved = v1_autoaugment._apply_op
    if isinstance(step, v2.AugMix):
        step._apply_image_or_video_transform = recorder
    else:
        v1_autoaugment._apply_op = recorder
    try:
        image = torch.zeros(3, 32, 32, dtype=torch.uint8)
        for _ in range(samples):
            chains.append([])
            step(image)
    finally:
        v1_autoaugment._apply_op = saved
    return [[tuple(chain) for chain in sample] for sample in chains]


def fused_chains(step, samples: int = SAMPLES):
    """The same from the translation on a CPU graph: the rows each chain's DaliLoadersAugment
    call draws (one call a chain)."""
    from nvidia.dali import fn, pipeline_def, types

    made = {}

    @pipeline_def(batch_size=BATCH, num_threads=2, device_id=None, seed=7)
    def pipe():
        images = Images(fn.constant(idata=0, shape=[32, 32, 3], dtype=types.UINT8, layout="HWC"), 32, 32, 3, "cpu")
        made["table"], slots = aug_mix.chain_slots(step, images)
        made["slots"] = len(slots)
        TRANSLATORS[type(step)](step, images)
        return tuple(recorded)

    with rows_recorded() as recorded:
        pipeline = pipe()
        pipeline.build()
    labels = made["table"].labels
    return per_sample(pipeline, samples, lambda outputs, i: [
        tuple(label(*labels[r]) for r in rows_of(out[i], made["slots"]) if r >= 0) for out in outputs])


def chain_draws(step, samples: int = SAMPLES):
    """The same as a GPU graph's chain draws them (fused.gated_rows), run on the CPU."""
    from nvidia.dali import fn, pipeline_def, types

    made = {}

    @pipeline_def(batch_size=BATCH, num_threads=2, device_id=None, seed=7)
    def pipe():
        outputs = []
        for _ in range(step.mixture_width):
            images = Images(None, 32, 32, 3, "cpu", kind="tensor")
            made["table"], slots = aug_mix.chain_slots(step, images)
            outputs.append(fn.stack(*[fn.cast(row, dtype=types.INT32) for row in fused.gated_rows(made["table"], slots)]))
        return tuple(outputs)

    pipeline = pipe()
    pipeline.build()
    labels = made["table"].labels
    return per_sample(pipeline, samples, lambda outputs, i: [
        tuple(label(*labels[r]) for r in np.array(out[i]).tolist() if r >= 0) for out in outputs])


def per_sample(pipeline, samples: int, read):
    """read(outputs, i) for every sample i of the batches that make up `samples`."""
    found = []
    for _ in range(samples // BATCH):
        outputs = pipeline.run()
        found += [read(outputs, i) for i in range(BATCH)]
    return found


@pytest.mark.parametrize("draws", [pytest.param(fused_chains, marks=needs_plugin), chain_draws],
                         ids=["fused", "chain"])
@pytest.mark.parametrize("settings", list(SETTINGS))
@pytest.mark.parametrize("version", ["v1", "v2"])
def test_chains_are_drawn_as_torchvision_draws_them(version, settings, draws):
    ours, theirs = draws(make(version, settings)), torchvision_chains(make(version, settings))
    assert {len(sample) for sample in ours} == {len(sample) for sample in theirs} == {make(version, settings).mixture_width}
    depths = lambda samples: [len(chain) for sample in samples for chain in sample]                  # noqa: E731
    ops = lambda samples: [name for sample in samples for chain in sample for name, _ in chain]       # noqa: E731
    entries = lambda samples: [entry for sample in samples for chain in sample for entry in chain]    # noqa: E731
    assert same_distribution(depths(ours), depths(theirs)) > P_MIN
    assert same_distribution(ops(ours), ops(theirs)) > P_MIN
    assert same_distribution(entries(ours), entries(theirs)) > P_MIN
    # every (operation, magnitude) one torchvision draws, with a sign only where it has one
    assert set(entries(ours)) <= set(entries(theirs)) | {(n, -m + 0.0) for n, m in entries(theirs) if m}
    # the chains of one image are drawn apart: not all alike
    assert sum(len(set(sample)) > 1 for sample in ours) > len(ours) // 2


def our_weights(alpha: float, width: int, samples: int = 4096) -> np.ndarray:
    """(samples, 1 + width): m0 and the chains' weights, as the graph draws them."""
    from nvidia.dali import fn, pipeline_def

    @pipeline_def(batch_size=BATCH, num_threads=2, device_id=None, seed=3)
    def pipe():
        m0, weights = aug_mix.mixing_weights(alpha, width)
        return fn.stack(m0, *weights)

    pipeline = pipe()
    pipeline.build()
    return np.concatenate([np.array(pipeline.run()[0].as_tensor()) for _ in range(samples // BATCH)])


def torch_weights(alpha: float, width: int, samples: int = 4096) -> np.ndarray:
    """The same from torch's sampler, as AugMix combines its draws."""
    torch.manual_seed(0)
    m = torch._sample_dirichlet(torch.tensor([alpha, alpha]).expand(samples, -1))
    combined = torch._sample_dirichlet(torch.tensor([alpha] * width).expand(samples, -1)) * m[:, 1:2]
    return torch.cat([m[:, :1], combined], 1).numpy()


@pytest.mark.parametrize("alpha,width", [(1.0, 3), (0.3, 3), (2.5, 4), (1.0, 1)])
def test_mixing_weights_follow_torchs_dirichlet(alpha, width):
    ours, theirs = our_weights(alpha, width), torch_weights(alpha, width)
    assert np.allclose(ours.sum(1), 1.0, atol=1e-5) and (ours >= 0).all()
    for column in range(1 + width):
        assert stats.ks_2samp(ours[:, column], theirs[:, column]).pvalue > P_MIN, f"column {column}"
    if alpha != 1.0:   # the draws with alpha ignored are told apart
        assert stats.ks_2samp(ours[:, 0], torch_weights(1.0, width)[:, 0]).pvalue < P_MIN


def feed(batch):
    """A batch source (a lambda with a default argument would be handed DALI's iteration number)."""
    return lambda: batch


@needs_plugin
def test_the_mix_operator_computes_torchvisions_float32_mix():
    """DaliLoadersMix against torch's `m0 * batch`, `mix.add_(w * aug)`, `.to(uint8)`: equal, on
    noise with weights from the Dirichlet and at its corners (0 and 1), every chain count; and
    DALI's arithmetic (GPU graphs, no plugin) gives the same bytes."""
    from nvidia.dali import fn, pipeline_def, types
    from nvidia.dali import math as dmath

    rng = np.random.default_rng(4)
    for chains in (1, 3, 5):
        images = [[rng.integers(0, 256, (37, 29, 3), dtype=np.uint8) for _ in range(8)] for _ in range(1 + chains)]
        weights = [torch._sample_dirichlet(torch.ones(1 + chains)).numpy() for _ in range(6)]
        weights += [np.eye(1 + chains, dtype=np.float32)[0], np.eye(1 + chains, dtype=np.float32)[-1]]

        @pipeline_def(batch_size=8, num_threads=2, device_id=None, seed=1)
        def pipe():
            inputs = [fn.external_source(source=feed(images[k]), batch=True, layout="HWC") for k in range(1 + chains)]
            w = fn.external_source(source=lambda: weights, batch=True)
            ours = aug_mix.op.mix(inputs[0], inputs[1:], w)
            total = w[0] * inputs[0]
            for k in range(chains):
                total = total + w[k + 1] * inputs[k + 1]
            return ours, fn.cast(dmath.floor(total), dtype=types.UINT8)

        pipeline = pipe()
        pipeline.build()
        ours, arithmetic = pipeline.run()
        for i in range(8):
            mix = torch.tensor(weights[i][0]) * torch.from_numpy(images[0][i])
            for k in range(chains):
                mix.add_(torch.tensor(weights[i][k + 1]) * torch.from_numpy(images[k + 1][i]))
            want = mix.to(torch.uint8).numpy()
            assert np.array_equal(np.array(ours[i]), want) and np.array_equal(np.array(arithmetic[i]), want)


def test_the_mix_operator_names_a_wrong_number_of_weights():
    from nvidia.dali import fn, pipeline_def, types

    if not plugin.augment_available():
        pytest.skip("the augmentation plugin is not built here")

    @pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=1)
    def pipe():
        image = fn.constant(idata=7, shape=[4, 4, 3], dtype=types.UINT8)
        return aug_mix.op.mix(image, [image, image], fn.constant(fdata=[0.5, 0.5], shape=[2]))

    pipeline = pipe()
    pipeline.build()
    with pytest.raises(RuntimeError, match="DaliLoadersMix: 3 weights a sample"):
        pipeline.run()


# -- the pixels, replayed ---------------------------------------------------------------------------------


def photos():
    return [np.asarray(load(path, 96)) for path in photo_paths()]


def replayed(step, photo: np.ndarray, chains, weights) -> np.ndarray:
    """torchvision's AugMix of the photograph given its draws: each chain's operations through
    its own kernel (v1's or v2's, on the uint8 tensor), mixed as its forward mixes them."""
    image = torch.from_numpy(photo.copy()).permute(2, 0, 1).contiguous().unsqueeze(0)
    height, width = photo.shape[:2]
    unit = augment_space.space(step, aug_mix.PARAMETER_MAX, 1.0, 1.0)
    sized = augment_space.space(step, aug_mix.PARAMETER_MAX, height, width)
    mix = torch.tensor(weights[0], dtype=torch.float32) * image
    for chain, weight in zip(chains, weights[1:]):
        aug = image
        for name, magnitude in chain:
            levels, _ = unit[name]
            if levels is not None:   # the bin the (size 1) magnitude is, at this size, signed
                k = int(np.argmin(np.abs(levels - abs(magnitude))))
                magnitude = float(sized[name][0][k]) * (-1.0 if magnitude < 0 else 1.0)
            if isinstance(step, v2.AugMix):
                aug = step._apply_image_or_video_transform(aug, name, magnitude, interpolation=step.interpolation,
                                                           fill=step._fill)
            else:
                aug = v1_autoaugment._apply_op(aug, name, magnitude, interpolation=step.interpolation,
                                               fill=step.fill)
        mix.add_(torch.tensor(weight, dtype=torch.float32) * aug)
    return mix.to(torch.uint8)[0].permute(1, 2, 0).numpy()


@needs_plugin
@pytest.mark.parametrize("kind", ["pil", "tensor"])
@pytest.mark.parametrize("version", ["v1", "v2"])
def test_photographs_equal_torchvisions_augmix_replayed(version, kind, monkeypatch):
    """Every chain's drawn operations and the weights replayed through torchvision: equal pixel
    for pixel (the photographs differ in size: translations are fractions of each one's)."""
    from nvidia.dali import fn, pipeline_def, types

    step = make(version, "default")
    pictures = photos()
    torch.manual_seed(5)
    m = torch._sample_dirichlet(torch.tensor([1.0, 1.0]).expand(len(pictures), -1))
    combined = torch._sample_dirichlet(torch.tensor([1.0] * 3).expand(len(pictures), -1)) * m[:, 1:2]
    weights = [row.numpy() for row in torch.cat([m[:, :1], combined], 1)]
    fed = {}
    monkeypatch.setattr(aug_mix, "mixing_weights",
                        lambda alpha, width: (fed["w"][0], [fed["w"][i + 1] for i in range(width)]))
    made = {}

    @pipeline_def(batch_size=len(pictures), num_threads=2, device_id=None, seed=11)
    def pipe():
        data = fn.external_source(source=lambda: pictures, batch=True, layout="HWC")
        fed["w"] = fn.external_source(source=lambda: weights, batch=True)
        shape = data.shape(dtype=types.INT32)
        images = Images(data, shape[0], shape[1], 3, "cpu", kind=kind)
        made["table"], slots = aug_mix.chain_slots(step, images)
        made["slots"] = len(slots)
        TRANSLATORS[type(step)](step, images)
        return (images.data, *recorded)

    with rows_recorded() as recorded:
        pipeline = pipe()
        pipeline.build()
    labels, applied = made["table"].labels, Counter()
    for _ in range(3):
        out, *chains = pipeline.run()
        for i, photo in enumerate(pictures):
            drawn = [[labels[r] for r in rows_of(chain[i], made["slots"]) if r >= 0] for chain in chains]
            applied.update(name for chain in drawn for name, _ in chain)
            want = replayed(step, photo, drawn, weights[i])
            got = np.array(out[i])
            assert got.shape == want.shape
            assert np.array_equal(got, want), f"{drawn}: {np.abs(got.astype(int) - want).max()} levels apart"
    assert len(applied) >= 8   # most of the 13 operations were replayed


# -- the loader --------------------------------------------------------------------------------------------


def test_the_loader_runs_augmix_translated_and_a_refused_setting_names_itself():
    recipe = v2.Compose([v2.RandomResizedCrop(24), v2.AugMix(), v2.ToImage(), v2.ToDtype(torch.float32, scale=True)])
    assert not transforms.plan(recipe, python_fallback=False).python
    pixels = np.random.default_rng(0).integers(0, 256, (16, 32, 32, 3), dtype=np.uint8)
    loader = dali_loader(ArraySource(pixels, np.arange(16) % 3, "noise"), recipe, train=True, batch_size=8,
                         num_threads=2)
    assert loader.route == "dali"
    batches = [x for x, _ in loader]
    assert [tuple(x.shape) for x in batches] == [(8, 3, 24, 24)] * 2 and all(x.dtype == torch.float32 for x in batches)
    for step, named in ((v2.AugMix(alpha=0.0), "alpha=0.0"), (v2.AugMix(mixture_width=0), "mixture_width=0"),
                        (v2.AugMix(interpolation=v2.InterpolationMode.BICUBIC), "interpolation")):
        with pytest.raises(ValueError, match=named):
            transforms.plan(v2.Compose([step]), python_fallback=False)


@pytest.mark.parametrize("plugins", ["on", "off"])
def test_a_resumed_loader_gives_the_same_augmix_batches(plugins, monkeypatch):
    """The chains' draws and the Beta draws of the weights resume from the loader's state (the
    operator's path, and DALI's operators' without the plugins)."""
    if plugins == "off":
        monkeypatch.setenv(plugin.DISABLE_ENV, "1")
    pixels = np.random.default_rng(3).integers(0, 256, (48, 20, 24, 3), dtype=np.uint8)
    recipe = v2.Compose([v2.AugMix(), v2.ToImage(), v2.ToDtype(torch.float32, scale=True)])

    def loader():
        return dali_loader(ArraySource(pixels, np.arange(48), "indexed"), recipe, train=True, batch_size=8,
                           num_threads=2, seed=5)

    first, _ = assert_resume_gives_the_rest(loader, taken=2, epoch=1)
    assert not torch.equal(next(iter(first))[0], next(iter(first))[0])   # each epoch draws afresh
