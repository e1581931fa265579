"""AutoAugment, RandAugment, TrivialAugmentWide and RandomErasing in DALI (issue 10): each
operation against torchvision's at fixed magnitudes on real photographs, the op choice and
magnitudes against torchvision's own sampling, RandomErasing's boxes and fills."""
import warnings
from collections import Counter

import numpy as np
import pytest
import torch
from augment_rows import rows_of, rows_recorded
from photos import load, photo_paths
from scipy import stats
from torchvision.transforms import v2
from torchvision.transforms.v2 import functional as F

from dali_loaders.loader import dali_loader, serialized_gpu_graph
from dali_loaders.ops import plugin
from dali_loaders.sources.arrays import ArraySource
from dali_loaders import transforms
from dali_loaders.transforms import TRANSLATORS, Images, fused
from dali_loaders.transforms import auto_augment as aa

POLICIES = {"imagenet": v2.AutoAugmentPolicy.IMAGENET, "cifar10": v2.AutoAugmentPolicy.CIFAR10,
            "svhn": v2.AutoAugmentPolicy.SVHN}
P_MIN = 1e-3   # a statistical test fails below this p-value


def automatic(kind: str):
    if kind == "trivial":
        return v2.TrivialAugmentWide()
    if kind == "rand":
        return v2.RandAugment()
    return v2.AutoAugment(POLICIES[kind])


def bins_of(step) -> int:
    return getattr(step, "num_magnitude_bins", aa.AUTOAUGMENT_BINS)


# -- 1. every operation at fixed magnitudes, against torchvision's functional op --------------

# the largest |DALI - torchvision| in uint8 levels, and the fraction of pixels that may differ
EXACT = (0, 0.0)
BOUNDS = {
    "Identity": EXACT, "TranslateX": EXACT, "TranslateY": EXACT, "Brightness": EXACT, "Contrast": EXACT,
    "Sharpness": EXACT, "Posterize": EXACT, "Solarize": EXACT, "Invert": EXACT,
    "Color": (1, 0.01),          # DALI's RGB->grey and PIL's convert("L") round a few pixels apart
    "AutoContrast": (1, 0.005),  # float32 (x - lo) * scale vs PIL's x * scale + offset in double: ties
}
# Nearest-neighbour warps: where a sampling point falls exactly on a pixel boundary (every 5th
# row of a 0.2 shear), PIL (double, accumulated along the row) and DALI (float32) take the
# pixels either side: up to 17% of a sheared image's pixels come from the neighbouring pixel.
# So each DALI pixel must equal torchvision's at the same place or at one of its 8 neighbours,
# for all but this fraction of pixels (at the edge of the rotated image, against the fill).
NEIGHBOUR_BOUNDS = {"ShearX": 0.001, "ShearY": 0.001, "Rotate": 0.005}
EQUALIZE_MEAN_LEVELS = 15.0      # DALI's equalize is OpenCV's formula, PIL's differs: see the docs


def neighbour_difference(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Per pixel, the smallest largest-channel |difference| to `want` at the same place or a neighbour."""
    height, width = got.shape[:2]
    padded = np.pad(want.astype(int), ((1, 1), (1, 1), (0, 0)), mode="edge")
    return np.min([np.abs(got.astype(int) - padded[1 + dy:1 + dy + height, 1 + dx:1 + dx + width]).max(-1)
                   for dy in (-1, 0, 1) for dx in (-1, 0, 1)], axis=0)


def is_monotone_map(before: np.ndarray, after: np.ndarray) -> bool:
    """Whether each channel of `after` is a non-decreasing function of `before` (a LUT)."""
    for c in range(before.shape[-1]):
        order = np.argsort(before[..., c].ravel(), kind="stable")
        x, y = before[..., c].ravel()[order], after[..., c].ravel()[order].astype(int)
        if (np.diff(y) < 0).any() or len(set(zip(x.tolist(), y.tolist()))) != len(set(x.tolist())):
            return False
    return True


@pytest.fixture(scope="module")
def photos():
    return [np.asarray(load(path, 128)) for path in photo_paths()]


def operations_at_fixed_magnitudes():
    """(policy kind, operation, bin): each policy's operations at the bins it uses
    (AutoAugment: its sub-policies' bins; RandAugment: its magnitude; TrivialAugment: the
    largest and a middle bin)."""
    cases, seen = set(), set()   # each (operation, magnitude) once: the policies share many
    for kind in ("trivial", "rand", *POLICIES):
        step = automatic(kind)
        table = aa.space(step, bins_of(step), 32, 32)
        if kind == "trivial":
            used = [(name, k) for name in table for k in (bins_of(step) - 1, bins_of(step) // 2)]
        elif kind == "rand":
            used = [(name, step.magnitude) for name in table]
        else:
            used = [(name, level or 0) for sub in aa.policies(step) for name, _, level in sub]
        for name, k in used:
            k = k if table[name][0] is not None else 0
            magnitude = (name, None if table[name][0] is None else round(float(table[name][0][k]), 6))
            if magnitude not in seen:
                seen.add(magnitude)
                cases.add((kind, name, k))
    return sorted(cases)


def dali_operation(step, name: str, k: int, sign: int, photos):
    """DALI's `name` of the step's suite at bin k, with the sign forced, on the photographs
    (of different sizes: the sizes are DataNodes, as for decoded files)."""
    from nvidia.dali import fn, pipeline_def, types
    from nvidia.dali.auto_aug.core import signed_bin

    @pipeline_def(batch_size=len(photos), num_threads=2, device_id=None, seed=1, enable_conditionals=True)
    def pipe():
        data = fn.external_source(source=lambda: photos, batch=True, layout="HWC")
        shape = data.shape(dtype=types.INT32)
        images = Images(data, shape[0], shape[1], 3, "cpu")
        with aa.quiet_dali():
            op = aa.suite(step, images, bins_of(step))[name]
            signs = fn.random.uniform(values=[sign], dtype=types.INT32)
            return op(data, magnitude_bin=signed_bin(k, random_sign=signs) if op.randomly_negate else k,
                      num_magnitude_bins=bins_of(step))

    pipeline = pipe()
    pipeline.build()
    return [np.array(image) for image in pipeline.run()[0]]


def torchvision_operation(step, name: str, k: int, sign: int, photo):
    """torchvision's functional op, as the transform calls it on the PIL image the twin holds."""
    magnitudes, signed = aa.space(step, bins_of(step), *photo.shape[:2])[name]
    magnitude = 0.0 if magnitudes is None else float(np.float32(magnitudes[k])) * (-1 if signed and sign else 1)
    image = F.to_pil_image(photo)
    return np.asarray(step._apply_image_or_video_transform(image, name, magnitude, step.interpolation, step._fill))


@pytest.mark.parametrize("kind,name,k", operations_at_fixed_magnitudes())
def test_each_operation_matches_torchvision_at_fixed_magnitudes(kind, name, k, photos):
    step = automatic(kind)
    signed = aa.space(step, bins_of(step), 32, 32)[name][1]
    for sign in ((0, 1) if signed else (0,)):
        got = dali_operation(step, name, k, sign, photos)
        want = [torchvision_operation(step, name, k, sign, photo) for photo in photos]
        diffs = [np.abs(g.astype(int) - w.astype(int)) for g, w in zip(got, want)]
        if name == "Equalize":
            assert max(d.mean() for d in diffs) <= EQUALIZE_MEAN_LEVELS
            assert all(is_monotone_map(photo, g) for photo, g in zip(photos, got))
            continue
        if name in NEIGHBOUR_BOUNDS:
            worst = max((neighbour_difference(g, w) > 0).mean() for g, w in zip(got, want))
            assert worst <= NEIGHBOUR_BOUNDS[name], f"{name} bin {k} sign {sign}"
            continue
        largest, fraction = BOUNDS[name]
        assert max(d.max() for d in diffs) <= largest, f"{name} bin {k} sign {sign}"
        assert max((d > 0).mean() for d in diffs) <= fraction, f"{name} bin {k} sign {sign}"


def test_translations_follow_the_image_size_when_it_is_known_at_build_time():
    """AutoAugment/RandAugment translate by a fraction of the size (150/331); CIFAR's 32x32
    arrays give pixels at build time: int(0.453 * 32 * k / 30) truncated as torchvision does."""
    step = v2.RandAugment(magnitude=30)
    table = aa.space(step, 31, 32, 32)["TranslateX"][0]
    assert table[-1] == pytest.approx(150 / 331 * 32, rel=1e-6)
    assert not aa.depends_on_size(v2.TrivialAugmentWide(), 31) and aa.depends_on_size(step, 31)


def test_autocontrast_leaves_a_flat_channel_as_it_is_and_stretches_the_others():
    """A channel of one value has nothing to stretch: torchvision (and PIL) leave it; the
    others still span 0 .. 255. Whole images of one value too."""
    from nvidia.dali import fn, pipeline_def

    from dali_loaders.transforms import augment_ops

    rng = np.random.default_rng(5)
    varied = rng.integers(40, 200, (12, 9, 3), dtype=np.uint8)
    one_flat = varied.copy()
    one_flat[..., 1] = 77
    all_flat = np.full((12, 9, 3), 201, np.uint8)
    batch = [varied, one_flat, all_flat, np.zeros((12, 9, 3), np.uint8)]

    @pipeline_def(batch_size=len(batch), num_threads=1, device_id=None)
    def pipe():
        data = fn.external_source(source=lambda: batch, batch=True, layout="HWC")
        return augment_ops.auto_contrast(data, None)

    pipeline = pipe()
    pipeline.build()
    got = [np.array(image) for image in pipeline.run()[0]]
    for image, out in zip(batch, got):
        want = np.asarray(F.autocontrast(F.to_pil_image(image)))
        assert np.abs(out.astype(int) - want.astype(int)).max() <= BOUNDS["AutoContrast"][0]
    assert np.array_equal(got[1][..., 1], one_flat[..., 1]) and got[1][..., 0].max() == 255
    assert np.array_equal(got[2], all_flat)


# -- 2. which operation, at which magnitude: DALI's draws against torchvision's ----------------

TAPE = 4   # the probe records up to this many operations per image


def tape_recorder(index: int):
    """An operation that appends (index, its argument) to the tape its image is."""
    from nvidia.dali import fn, types

    def record(tape, argument):
        zero = tape[0, 0, 0] * 0.0
        value = zero if argument is None else fn.cast(argument, dtype=types.FLOAT)
        return fn.cat(tape[:, 1:, :], fn.reshape(fn.stack(zero + float(index), value), shape=[1, 1, 2]), axis=1)
    return record


def tape_draws(step, names, samples: int, batch: int = 512):
    """Per sample, the (name, argument) of each operation the translation of `step` applies to
    a tape whose operations record themselves (names[i] records index i), on DALI's conditionals."""
    from nvidia.dali import fn, pipeline_def, types

    @pipeline_def(batch_size=batch, num_threads=2, device_id=None, seed=7, enable_conditionals=True)
    def pipe():
        tape = fn.cast(fn.constant(fdata=-1.0, shape=[1, TAPE, 2]), dtype=types.FLOAT)
        images = Images(tape, 32, 32, 3, "cpu")
        TRANSLATORS[type(step)](step, images)
        return images.data

    pipeline = pipe()
    pipeline.build()
    draws = []
    for _ in range(samples // batch):
        for tape in pipeline.run()[0]:
            draws.append(tuple((names[int(i)], round(float(m), 4) + 0.0) for i, m in np.array(tape)[0] if i >= 0))
    return draws


def probe_operations(step, images):
    """Each operation replaced by one that appends (its index, its signed magnitude) to a tape."""
    names = list(aa.space(step, bins_of(step), 32, 32))
    return {name: (tape_recorder(i), np.float32) for i, name in enumerate(names)}


def dali_draws(step, monkeypatch, samples: int = 2048):
    """The (operation, signed magnitude) sequences DALI's translation applies to `samples` images,
    on the conditional path (DALI's auto_aug; GPU graphs, or no augmentation plugin)."""
    monkeypatch.setenv(plugin.DISABLE_AUGMENT_ENV, "1")
    monkeypatch.setattr(aa, "operations", lambda step, images, relative: probe_operations(step, images))
    return tape_draws(step, list(aa.space(step, bins_of(step), 32, 32)), samples)


SLOTS = {"TrivialAugmentWide": fused.trivial_augment_slots, "RandAugment": fused.rand_augment_slots,
         "AutoAugment": fused.auto_augment_slots}


def fused_draws(step, monkeypatch=None, samples: int = 2048):
    """The same on the fused path (CPU graphs with the augmentation plugin): the table rows its
    operator draws per sample, as (operation, signed magnitude)."""
    from nvidia.dali import fn, pipeline_def, types

    made, batch = {}, 512

    @pipeline_def(batch_size=batch, num_threads=2, device_id=None, seed=7)
    def pipe():
        images = Images(fn.constant(idata=0, shape=[32, 32, 3], dtype=types.UINT8, layout="HWC"), 32, 32, 3, "cpu")
        made["table"], slots = SLOTS[type(step).__name__](step, images)
        made["slots"] = len(slots)
        if not slots:
            return fn.constant(idata=0, shape=[32, 32, 3], dtype=types.UINT8)
        fused.queue(images, step, made["table"], slots, warps=True)
        images.flush_augment()
        return recorded[0]

    with rows_recorded() as recorded:
        pipeline = pipe()
        pipeline.build()
    return drawn_labels(pipeline, made, samples // batch)


def chain_draws(step, monkeypatch=None, samples: int = 2048):
    """The same as a GPU graph's chain draws them (fused.gated_rows), run on the CPU."""
    from nvidia.dali import fn, pipeline_def, types

    made, batch = {}, 512

    @pipeline_def(batch_size=batch, num_threads=2, device_id=None, seed=7)
    def pipe():
        images = Images(None, 32, 32, 3, "cpu")
        made["table"], slots = SLOTS[type(step).__name__](step, images)
        made["slots"] = len(slots)
        rows = [fn.cast(row, dtype=types.INT32) for row in fused.gated_rows(made["table"], slots)]
        return fn.stack(*rows) if rows else fn.constant(idata=[-1], shape=[1])

    pipeline = pipe()
    pipeline.build()
    return drawn_labels(pipeline, made, samples // batch, recorded=False)


def drawn_labels(pipeline, made, runs: int, recorded: bool = True):
    """Each sample's drawn rows as (operation, signed magnitude) labels."""
    labels = made["table"].labels
    draws = []
    for _ in range(runs):
        for rows in pipeline.run()[0]:
            drawn = rows_of(rows, made["slots"]) if recorded else np.array(rows).tolist()
            draws.append(tuple((labels[r][0], round(float(np.float32(labels[r][1])), 4) + 0.0)
                               for r in drawn if r >= 0))
    return draws


def torchvision_draws(step, samples: int = 4096):
    """The same, from torchvision's own forward, its ops replaced by a recorder."""
    torch.manual_seed(0)
    draws, record = [], []

    def recorder(image, name, magnitude, interpolation, fill):
        record.append((name, round(float(np.float32(magnitude)), 4) + 0.0))
        return image

    step._apply_image_or_video_transform = recorder
    image = torch.zeros(3, 32, 32, dtype=torch.uint8)
    for _ in range(samples):
        record.clear()
        step(image)
        draws.append(tuple(record))
    return draws


def same_distribution(a, b) -> float:
    """Chi-square p-value that two samples of categories come from one distribution (the
    categories too rare for the test pooled into one)."""
    counts_a, counts_b = Counter(a), Counter(b)
    common = [c for c in set(counts_a) | set(counts_b) if counts_a[c] + counts_b[c] >= 20]
    rare = (sum(counts_a.values()) - sum(counts_a[c] for c in common),
            sum(counts_b.values()) - sum(counts_b[c] for c in common))
    table = np.array([[counts_a[c] for c in common] + [rare[0]], [counts_b[c] for c in common] + [rare[1]]])
    table = table[:, table.sum(axis=0) > 0]
    return stats.chi2_contingency(table)[1]


@pytest.mark.parametrize("draws", [dali_draws, fused_draws, chain_draws], ids=["conditionals", "fused", "chain"])
@pytest.mark.parametrize("kind", ["trivial", "rand", "imagenet", "cifar10", "svhn"])
def test_op_choice_and_magnitudes_match_torchvision(kind, draws, monkeypatch):
    step = automatic(kind)
    dali, reference = draws(step, monkeypatch), torchvision_draws(automatic(kind))
    ops = lambda draws: [name for draw in draws for name, _ in draw]             # noqa: E731
    magnitudes = lambda draws: [entry for draw in draws for entry in draw]       # noqa: E731
    assert same_distribution(ops(dali), ops(reference)) > P_MIN
    assert same_distribution(magnitudes(dali), magnitudes(reference)) > P_MIN
    # each magnitude is one torchvision's table holds, with a sign only where it has one
    allowed = set(magnitudes(reference)) | {(n, round(-m, 4)) for n, m in magnitudes(reference)}
    assert set(magnitudes(dali)) <= allowed
    if kind == "rand":
        assert {len(draw) for draw in dali} == {step.num_ops}
    elif kind == "trivial":
        assert {len(draw) for draw in dali} == {1}
    else:   # AutoAugment: whole applied sequences, which only its policy's sub-policies produce
        assert same_distribution([str(d) for d in dali], [str(d) for d in reference]) > P_MIN


@pytest.mark.parametrize("draws", [dali_draws, fused_draws, chain_draws], ids=["conditionals", "fused", "chain"])
def test_rand_augment_num_ops_and_magnitude_are_used(draws, monkeypatch):
    step = v2.RandAugment(num_ops=3, magnitude=20, num_magnitude_bins=21)
    dali = draws(step, monkeypatch, samples=512)
    assert {len(draw) for draw in dali} == {3}
    table = aa.space(step, 21, 32, 32)
    for name, magnitude in (entry for draw in dali for entry in draw):
        top = table[name][0]
        assert top is None or abs(magnitude) == pytest.approx(float(np.float32(top[20])), abs=1e-4)


@pytest.mark.parametrize("draws", [dali_draws, fused_draws, chain_draws], ids=["conditionals", "fused", "chain"])
def test_rand_augment_without_operations_leaves_the_images(draws, monkeypatch):
    assert draws(v2.RandAugment(num_ops=0), monkeypatch, samples=512) == [()] * 512


# -- 3. in a loader: no warnings, CPU and GPU graphs, refusals -----------------------------------


def recipe(augment, erasing=None):
    steps = [v2.RandomHorizontalFlip(), augment, v2.ToImage(), v2.ToDtype(torch.float32, scale=True),
             v2.Normalize([0.5] * 3, [0.25] * 3)]
    return v2.Compose(steps + ([erasing] if erasing else []))


@pytest.mark.parametrize("kind", ["trivial", "rand", "cifar10"])
def test_loader_runs_without_warnings_and_the_gpu_graph_is_valid(kind):
    source = ArraySource(np.stack([np.asarray(load(p).resize((40, 32))) for p in photo_paths()]),
                         np.arange(len(photo_paths())), "photos")
    transform = recipe(automatic(kind), v2.RandomErasing(0.5, value="random"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # DALI's deprecation warnings from auto_aug must not reach the user
        loader = dali_loader(source, transform, train=True, batch_size=4, num_threads=1, seed=0)
        shapes = {tuple(x.shape) for x, _ in loader}
    assert shapes <= {(4, 3, 32, 40), (len(source) % 4, 3, 32, 40)}
    assert serialized_gpu_graph(source, transform)


@pytest.mark.parametrize("step,named", [
    (v2.TrivialAugmentWide(interpolation=v2.InterpolationMode.BICUBIC), "interpolation"),
    (v2.RandAugment(fill=[0, 128, 255]), "fill"),
    (v2.RandAugment(magnitude=31), "magnitude=31"),
    (v2.AugMix(fill=[0, 128, 255]), "fill"),
])
def test_untranslatable_settings_take_the_python_path_by_name(step, named):
    from dali_loaders.loader import PythonPathNote

    source = ArraySource(np.zeros((4, 8, 8, 3), np.uint8), np.zeros(4), "zeros")
    with pytest.raises(ValueError, match=named) as refused:
        transforms.plan(v2.Compose([step]), python_fallback=False)
    assert "python_fallback=True" in str(refused.value)
    with pytest.warns(PythonPathNote, match=named):
        loader = dali_loader(source, v2.Compose([step, v2.ToImage()]), train=True, batch_size=2, num_threads=1)
    assert loader.route.startswith("python")
    if "magnitude" in named:   # torchvision itself fails on it: so does the Python path, as DataLoader would
        with pytest.raises(IndexError):
            list(loader)
    else:
        assert [tuple(x.shape) for x, _ in loader] == [(2, 3, 8, 8)] * 2


# -- 4. RandomErasing ---------------------------------------------------------------------------

ERASE_SIZE = (48, 64)


def erased_boxes(images: torch.Tensor):
    """(erased?, height, width, top, left) of the non-zero box in each all-zero image."""
    found = []
    for image in images:
        rows, cols = torch.nonzero(image.abs().sum(0), as_tuple=True)
        if len(rows) == 0:
            found.append((False, 0, 0, 0, 0))
            continue
        top, left = int(rows.min()), int(cols.min())
        found.append((True, int(rows.max()) - top + 1, int(cols.max()) - left + 1, top, left))
    return found


def erasing_on_zeros(erasing, backend: str, n: int = 1536):
    images = np.zeros((n, *ERASE_SIZE, 3), np.uint8)
    transform = v2.Compose([v2.ToImage(), v2.ToDtype(torch.float32, scale=True), erasing])
    if backend == "dali":
        loader = dali_loader(ArraySource(images, np.zeros(n), "zeros"), transform, train=True, batch_size=256,
                             num_threads=2, seed=4)
        return torch.cat([x for x, _ in loader])
    torch.manual_seed(4)
    return torch.stack([transform(torch.zeros(3, *ERASE_SIZE, dtype=torch.uint8)) for _ in range(n)])


def test_random_erasing_boxes_match_torchvision(erase_path):
    erasing = v2.RandomErasing(p=0.6, scale=(0.02, 0.33), ratio=(0.3, 3.3), value="random")
    dali = erased_boxes(erasing_on_zeros(erasing, "dali"))
    twin = erased_boxes(erasing_on_zeros(erasing, "torchvision"))
    rate = lambda boxes: np.mean([b[0] for b in boxes])   # noqa: E731
    assert abs(rate(dali) - rate(twin)) < 4 * np.sqrt(0.25 / len(dali) * 2)
    kept = lambda boxes, f: [f(*b[1:]) for b in boxes if b[0]]   # noqa: E731
    for measure in (lambda h, w, t, l: h * w, lambda h, w, t, l: h / w, lambda h, w, t, l: t / (ERASE_SIZE[0] - h + 1),
                    lambda h, w, t, l: l / (ERASE_SIZE[1] - w + 1)):
        assert stats.ks_2samp(kept(dali, measure), kept(twin, measure)).pvalue > P_MIN
    assert all(h < ERASE_SIZE[0] and w < ERASE_SIZE[1] for _, h, w, _, _ in (b for b in dali if b[0]))


def test_random_erasing_random_fill_is_standard_normal_noise(erase_path):
    images = erasing_on_zeros(v2.RandomErasing(p=1.0, value="random"), "dali", n=256)
    noise = images[images != 0].numpy()
    assert len(noise) > 10000 and stats.kstest(noise, "norm").pvalue > P_MIN


@pytest.mark.parametrize("value,want", [(0.5, [0.5] * 3), ((1.0, -2.0, 3.0), [1.0, -2.0, 3.0])])
def test_random_erasing_fills_with_its_value(value, want, erase_path):
    images = erasing_on_zeros(v2.RandomErasing(p=1.0, value=value), "dali", n=256)
    for image in images:
        for channel, fill in zip(image, want):
            assert set(channel.unique().tolist()) <= {0.0, fill}
    assert (images != 0).any(dim=(1, 2, 3)).float().mean() > 0.9


def test_random_erasing_on_uint8_pixels_is_refused_by_name():
    source = ArraySource(np.zeros((4, 8, 8, 3), np.uint8), np.zeros(4), "zeros")
    loader = dali_loader(source, v2.Compose([v2.ToImage(), v2.RandomErasing(value="random")]), train=True,
                         batch_size=2, num_threads=1)
    with pytest.raises(ValueError, match="RandomErasing on uint8 pixels"):
        list(loader)
