"""The AutoAugment family on GPU graphs (augment_chain.py): every image through one chain of
operators, each with the image's own parameters. Run here on the CPU (the same graph, other
device names): each sample's pixels against the conditional graphs' own operation applied
with its magnitude, exactly; the GPU graphs have no conditionals and far fewer operators."""
import collections

import numpy as np
import pytest
import torch
from resume_check import assert_resume_gives_the_rest
from torchvision import transforms as v1
from torchvision.transforms import v2

from dali_loaders.dali_compat import graph_operators
from dali_loaders.loader import serialized_gpu_graph
from dali_loaders.sources.arrays import ArraySource
from dali_loaders.transforms import Images, augment_chain, fused
from dali_loaders.transforms import augment_ops

BATCH = 96
HEIGHT, WIDTH = 21, 26   # not square: Image.rotate's quarter-turn shortcut stays out of it

STEPS = {
    "trivial": (lambda: v2.TrivialAugmentWide(), fused.trivial_augment_slots),
    "trivial-bilinear-fill": (lambda: v2.TrivialAugmentWide(interpolation=v2.InterpolationMode.BILINEAR, fill=[90]),
                              fused.trivial_augment_slots),
    "rand": (lambda: v2.RandAugment(num_ops=2, magnitude=13), fused.rand_augment_slots),
    "auto": (lambda: v2.AutoAugment(v2.AutoAugmentPolicy.SVHN), fused.auto_augment_slots),
    "v1-trivial": (lambda: v1.TrivialAugmentWide(), fused.trivial_augment_slots),
    "v1-auto": (lambda: v1.AutoAugment(v1.AutoAugmentPolicy.IMAGENET), fused.auto_augment_slots),
}


def photos(seed: int, channels: int = 3) -> np.ndarray:
    """Smooth colour gradients with noise: every operation changes them visibly."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:HEIGHT, 0:WIDTH]
    base = np.stack([x * 9, y * 11, (x + y) * 5], axis=-1)[None] + rng.integers(0, 60, (BATCH, 1, 1, 3))
    pixels = np.clip(base + rng.integers(-20, 21, (BATCH, HEIGHT, WIDTH, 3)), 0, 255).astype(np.uint8)
    return np.ascontiguousarray(pixels[..., :channels])


def run_chain_and_reference(step, make_slots, kind: str, sized: bool, rows: np.ndarray, pixels: np.ndarray):
    """(chain output, per-row reference output, table labels): the chain with sample i on table
    row rows[i] (-1: none), and each operation of the conditional graphs applied to the whole
    batch with each sample's magnitude."""
    from nvidia.dali import fn, pipeline_def, types

    labels_seen = {}

    @pipeline_def(batch_size=BATCH, num_threads=2, device_id=None, seed=3)
    def pipe():
        data = fn.external_source(source=lambda: list(pixels), batch=True, layout="HWC")
        row = fn.external_source(source=lambda: [np.int32(r) for r in rows], batch=True)

        def images_of():
            if sized:
                return Images(data, HEIGHT, WIDTH, pixels.shape[-1], "cpu", kind=kind)
            shape = fn.cast(data.shape(), dtype=types.INT32)
            return Images(data, shape[0], shape[1], pixels.shape[-1], "cpu", kind=kind)

        images = images_of()
        table, _ = make_slots(step, images)
        labels_seen["labels"] = table.labels
        values = augment_chain.parameter_rows(step, images, table)
        present = {name for name, _ in table.labels}
        present |= {c for c in ("relative_x", "relative_y") if np.any(values[:, augment_chain.COLUMN[c]] != 0.0)}
        augment_chain.chain(images, augment_chain.gathered(augment_chain.constant_table(values), row), present,
                            augment_ops.warp(images, step, lambda matrix: matrix))
        relative = present & {"relative_x", "relative_y"} != set()
        with augment_ops.quiet_dali():
            ops = augment_ops.operations(step, images_of(), relative)
        outputs = [images.data]
        names = sorted(present - {"relative_x", "relative_y"})
        for name in names:
            function, to_param = ops[name]
            if to_param is None:
                outputs.append(function(data, None))
                continue
            params = []
            for r in rows:
                label_name, magnitude = table.labels[r] if r >= 0 else ("", 0.0)
                params.append(np.asarray(to_param(magnitude if label_name == name else 0.0)))
            outputs.append(function(data, fn.external_source(source=constant_batch(params), batch=True)))
        labels_seen["names"] = names
        return tuple(outputs)

    pipeline = pipe()
    pipeline.build()
    got, *refs = [np.stack([np.array(t) for t in out]) for out in pipeline.run()]
    return got, dict(zip(labels_seen["names"], refs)), labels_seen["labels"]


def constant_batch(values):
    """An external_source callback returning `values` (it must take no argument: DALI passes
    one to a callback that has a parameter)."""
    return lambda: values


def rows_covering(labels, seed: int) -> np.ndarray:
    """A row for each sample: every operation at least once (at its extremes where it has a
    range), the rest random, and a few -1 (no operation)."""
    rng = np.random.default_rng(seed)
    by_name = collections.defaultdict(list)
    for k, (name, _) in enumerate(labels):
        by_name[name].append(k)
    chosen = [k for ks in by_name.values() for k in (ks[0], ks[-1], ks[len(ks) // 2])]
    chosen += [-1, -1]
    chosen += list(rng.integers(0, len(labels), BATCH - len(chosen)))
    return np.array(chosen[:BATCH], np.int32)


@pytest.fixture(params=["DaliLoadersChainTail", "DALI operators"])
def stages_in(request, monkeypatch):
    """The stages after the warp in our operator (chain_tail.h, asked for as users ask), or in
    DALI's operators (what GPU graphs run unasked): both must give the pixels."""
    from dali_loaders.ops import chain_tail, plugin

    calls = []
    monkeypatch.setenv(chain_tail.ENV, "1" if request.param == "DaliLoadersChainTail" else "0")
    if request.param == "DaliLoadersChainTail" and not plugin.chain_available():
        pytest.skip("the chain plugin cannot be built here")
    if request.param == "DaliLoadersChainTail":
        made = chain_tail.call
        monkeypatch.setattr(chain_tail, "call", lambda *args, **kwargs: calls.append(1) or made(*args, **kwargs))
    yield calls
    assert bool(calls) == (request.param == "DaliLoadersChainTail")


@pytest.mark.parametrize("sized", [True, False], ids=["size-known", "size-per-sample"])
@pytest.mark.parametrize("kind", ["tensor", "pil"])
@pytest.mark.parametrize("name", list(STEPS))
def test_each_sample_gets_exactly_its_drawn_operation(name, kind, sized, stages_in):
    make_step, make_slots = STEPS[name]
    step = make_step()
    pixels = photos(seed=len(name))
    # the labels first (a pipeline that draws nothing), then rows covering them
    _, _, labels = run_chain_and_reference(step, make_slots, kind, sized, np.full(BATCH, -1, np.int32), pixels)
    rows = rows_covering(labels, seed=7)
    got, refs, _ = run_chain_and_reference(step, make_slots, kind, sized, rows, pixels)
    changed, acting = 0, set()
    for i, r in enumerate(rows):
        op = labels[r][0] if r >= 0 else "Identity"
        want = pixels[i] if op == "Identity" else refs[op][i]
        assert np.array_equal(got[i], want), \
            f"sample {i}: {labels[r] if r >= 0 else 'no operation'}: {np.abs(got[i].astype(int) - want).max()} levels off"
        changed += not np.array_equal(got[i], pixels[i])
        if not np.array_equal(got[i], pixels[i]):
            acting.add(op)
    assert changed > BATCH // 2   # the operations did act: a chain that copied its input would fail above
    # each operation acts at its largest magnitude (a translation by a fraction of an unknown
    # size once became 0 pixels, here and in the reference alike)
    assert {name for name, _ in labels} - {"Identity"} <= acting


@pytest.mark.parametrize("kind", ["tensor", "pil"])
def test_grey_images_get_exactly_their_drawn_operation(kind, stages_in):
    step, make_slots = v2.TrivialAugmentWide(), fused.trivial_augment_slots
    pixels = photos(seed=2, channels=1)
    _, _, labels = run_chain_and_reference(step, make_slots, kind, True, np.full(BATCH, -1, np.int32), pixels)
    rows = rows_covering(labels, seed=3)
    got, refs, _ = run_chain_and_reference(step, make_slots, kind, True, rows, pixels)
    for i, r in enumerate(rows):
        op = labels[r][0] if r >= 0 else "Identity"
        assert np.array_equal(got[i], pixels[i] if op == "Identity" else refs[op][i]), (i, labels[r])


def test_a_no_op_row_leaves_every_image_as_it_is():
    step, make_slots = STEPS["trivial-bilinear-fill"][0](), fused.trivial_augment_slots
    pixels = photos(seed=1)
    got, _, _ = run_chain_and_reference(step, make_slots, "tensor", False, np.full(BATCH, -1, np.int32), pixels)
    assert np.array_equal(got, pixels)


def gpu_graph_counts(transform):
    source = ArraySource(np.zeros((8, 32, 32, 3), np.uint8), np.zeros(8, np.int64), "zeros")
    ops = graph_operators(serialized_gpu_graph(source, transform))
    return len(ops), collections.Counter(op[0] for op in ops)


@pytest.mark.parametrize("step", [v2.TrivialAugmentWide(), v2.RandAugment(), v2.AutoAugment()],
                         ids=lambda s: type(s).__name__)
def test_gpu_graphs_have_no_conditionals_and_a_chain_of_operators_per_slot(step):
    total, kinds = gpu_graph_counts(v2.Compose([v2.RandomHorizontalFlip(), step]))
    assert not any("conditional" in kind for kind in kinds), kinds
    slots = getattr(step, "num_ops", 2 if isinstance(step, v2.AutoAugment) else 1)
    assert kinds["WarpAffine"] == slots, kinds
    # DALI's auto_aug made 343 (TrivialAugmentWide), 654 (RandAugment) and 347 (AutoAugment),
    # a third to a half of them splitting and merging the batch per branch
    assert total <= 130 * slots + 20, (total, kinds)


def test_the_erased_box_is_the_first_try_that_fits_as_torchvision_loops_over_them():
    from nvidia.dali import fn, pipeline_def

    from dali_loaders.transforms import auto_augment as aa

    rng = np.random.default_rng(5)
    tries = aa.ERASE_ATTEMPTS
    heights = rng.integers(1, 40, (BATCH, tries)).astype(np.float32)
    widths = rng.integers(1, 40, (BATCH, tries)).astype(np.float32)
    heights[:8] = 50.0   # none fits
    heights[8:16, :-1] = 50.0   # only the last
    img_h, img_w = 30.0, 33.0

    @pipeline_def(batch_size=BATCH, num_threads=1, device_id=None)
    def pipe():
        h = fn.external_source(source=constant_batch(list(heights)), batch=True)
        w = fn.external_source(source=constant_batch(list(widths)), batch=True)
        return aa.first_fitting(h, w, img_h, img_w)

    pipeline = pipe()
    pipeline.build()
    got_h, got_w = (np.array([float(np.array(t)) for t in out]) for out in pipeline.run())
    for i in range(BATCH):
        want = (0.0, 0.0)
        for k in range(tries):   # torchvision's RandomErasing.get_params: the first that fits wins
            if heights[i, k] < img_h and widths[i, k] < img_w:
                want = (heights[i, k], widths[i, k])
                break
        assert (got_h[i], got_w[i]) == want, i
    assert np.count_nonzero(got_h) > BATCH // 2


@pytest.mark.parametrize("box", ["DaliLoadersEraseBox", "arithmetic"])
def test_a_gpu_graph_erases_with_a_few_operators(box, monkeypatch):
    """Each operator is a scheduling round over the batch: the box drawn by one operator of
    ours (an H200 spent 10 ms a batch of 128 on the fifty of DALI arithmetic), or, where the
    plugin is not built, in a few dozen whole-vector ones."""
    from dali_loaders.ops import augment, plugin

    if box == "arithmetic":
        monkeypatch.setattr(augment, "draws_usable", lambda: False)
    elif not plugin.augment_available():
        pytest.skip("the augmentation plugin cannot be built here")
    total, kinds = gpu_graph_counts(v2.Compose([v2.ToDtype(torch.float32, scale=True), v2.RandomErasing(p=0.5)]))
    plain, _ = gpu_graph_counts(v2.Compose([v2.ToDtype(torch.float32, scale=True)]))
    assert kinds["Erase"] == 1
    if box == "arithmetic":
        assert total - plain <= 70, (total - plain, kinds)   # 186 when each try was its own operators
    else:
        assert kinds["DaliLoadersEraseBox"] == 1
        assert total - plain <= 6, (total - plain, kinds)


def test_a_loader_on_the_chain_resumes_mid_epoch_exactly(tmp_path, monkeypatch):
    """The chain's draws are the graph's own random operators: a state saved mid-epoch gives
    the rest of the epoch bit for bit (the chain forced onto a CPU graph, the plugin off)."""
    from PIL import Image
    from torchvision import datasets

    from dali_loaders import DaliLoader
    from dali_loaders.ops import plugin

    monkeypatch.setenv(plugin.DISABLE_AUGMENT_ENV, "1")
    chained = []
    monkeypatch.setattr(augment_chain, "usable", lambda images: chained.append(images.device) or True)
    rng = np.random.default_rng(0)
    for i in range(40):
        folder = tmp_path / f"c{i % 2}"
        folder.mkdir(exist_ok=True)
        Image.fromarray(rng.integers(0, 255, (30, 34, 3), dtype=np.uint8)).save(folder / f"{i:02d}.png")
    recipe = v2.Compose([v2.RandomResizedCrop(24), v2.TrivialAugmentWide(), v2.PILToTensor()])

    def loader():
        return DaliLoader(datasets.ImageFolder(str(tmp_path), transform=recipe), batch_size=8, shuffle=True,
                          num_workers=2, seed=5)

    first, _ = assert_resume_gives_the_rest(loader, taken=2, epoch=0)
    images = [images for images, _ in first]   # its next epoch: each image augmented its own way
    assert not np.array_equal(images[0].numpy(), images[1].numpy())
    assert chained   # the graph was the chain's


def test_rand_augment_on_the_chain_matches_torchvision_by_distribution(tmp_path, monkeypatch):
    """RandAugment(2, 20) through a loader on the chain (forced onto a CPU graph, the plugin
    off) against torchvision's own class: the mean change per image, by KS (a translation
    that did nothing, or a magnitude left at the default 9, fails it)."""
    from dali_loaders.ops import plugin
    from dali_loaders.testing.distributions import compare_distribution, distribution_checks, write_gradient_images

    monkeypatch.setenv(plugin.DISABLE_AUGMENT_ENV, "1")
    chained = []
    monkeypatch.setattr(augment_chain, "usable", lambda images: chained.append(images.device) or True)
    check = next(c for c in distribution_checks() if c.name == "RandAugment")
    folder = write_gradient_images(str(tmp_path))
    found = compare_distribution(check, "cpu", folder)
    assert chained
    assert found["distance"] <= found["bound"], found
    ignored = compare_distribution(check, "cpu", folder, transform=check.ignored)
    assert ignored["distance"] > ignored["bound"], ignored


def test_the_chain_operator_check_passes_on_the_cpu():
    """`python -m dali_loaders.testing.chain_tail_check`, the check the GPU operator must pass
    on a GPU, run on the CPU operator: every case the same pixels as DALI's operators."""
    from dali_loaders.ops import plugin
    from dali_loaders.testing import chain_tail_check

    if not plugin.chain_available():
        pytest.skip("the chain plugin cannot be built here")
    results = chain_tail_check.compare("cpu")
    assert len(results) >= 6 and {kind for _, kind, _, _ in results} == {"pil", "tensor"}
    assert all(largest == 0 for _, _, largest, _ in results), results
