"""DaliLoadersAugment (issue 17): each op in each arithmetic against torchvision's or PIL's own
function on photographs, pixel for pixel (all exact: 0 levels apart); whole drawn sequences
of the fused translators replayed through torchvision; bad arguments refused by name."""
import math

import numpy as np
import pytest
import torch
from augment_rows import rows_of, rows_recorded
from photos import load, photo_paths
from resume_check import assert_resume_gives_the_rest
from PIL import Image
from torchvision.transforms import InterpolationMode as IM
from torchvision.transforms import autoaugment as v1_autoaugment
from torchvision.transforms import functional as F1
from torchvision.transforms import v2
from torchvision.transforms.v2 import functional as F2

from dali_loaders.ops import augment as op
from dali_loaders.ops import plugin
from dali_loaders.transforms import Images, fused
from dali_loaders.transforms import auto_augment as aa

RESAMPLE = {0: IM.NEAREST, 2: IM.BILINEAR, 3: IM.BICUBIC}
PIL_RESAMPLE = {0: Image.NEAREST, 2: Image.BILINEAR, 3: Image.BICUBIC}
P_MIN = 1e-3   # a statistical test fails below this p-value


@pytest.fixture(scope="module", autouse=True)
def built():
    if not plugin.augment_available():
        pytest.skip(f"the augmentation plugin cannot be built here: {plugin._states[plugin.AUGMENT.file].get('why')}")


@pytest.fixture(scope="module")
def photos():
    return [np.asarray(load(path, 160)) for path in photo_paths()]


def run_op(images, steps, kernels, fill=None, erase_value=None):
    """The operator on `images`, every image with the same steps [(name, params), ...]."""
    from nvidia.dali import fn, pipeline_def

    codes = np.array([op.CODES[name] for name, _ in steps], np.int32)
    params = np.zeros((len(steps), op.NUM_PARAMS), np.float32)
    for k, (_, p) in enumerate(steps):
        params[k, :len(p)] = p

    @pipeline_def(batch_size=len(images), num_threads=2, device_id=None, seed=1)
    def pipe():
        data = fn.external_source(source=lambda: images, batch=True, layout="HWC")
        ops = fn.external_source(source=lambda: [codes] * len(images), batch=True)
        rows = fn.external_source(source=lambda: [params] * len(images), batch=True)
        return op.call(data, ops, rows, kernels, fill, erase_value)

    pipeline = pipe()
    pipeline.build()
    return [np.array(image) for image in pipeline.run()[0]]


def torchvision_op(image, name, p, kernels, fill):
    """torchvision's functional op as the AutoAugment family calls it: v2's on a PIL image or
    a uint8 tensor, v1's for tensor_v1 (and for PIL shears in v1's matrix form, p2 = 2)."""
    F = F1 if kernels == "tensor_v1" or (name.startswith("Shear") and p[2] == 2) else F2
    x = Image.fromarray(image) if kernels == "pil" else torch.from_numpy(image.copy()).permute(2, 0, 1)
    m = float(np.float32(p[0])) if p else 0.0
    interpolation = RESAMPLE[int(p[1])] if name in op.WARPS else IM.NEAREST
    warp = dict(interpolation=interpolation, fill=fill)
    calls = {
        "ShearX": lambda: F.affine(x, 0.0, [0, 0], 1.0, [math.degrees(math.atan(m)), 0.0], center=[0, 0], **warp),
        "ShearY": lambda: F.affine(x, 0.0, [0, 0], 1.0, [0.0, math.degrees(math.atan(m))], center=[0, 0], **warp),
        "TranslateX": lambda: F.affine(x, 0.0, [int(m), 0], 1.0, [0.0, 0.0], **warp),
        "TranslateY": lambda: F.affine(x, 0.0, [0, int(m)], 1.0, [0.0, 0.0], **warp),
        "Rotate": lambda: F.rotate(x, m, **warp),
        "Brightness": lambda: F.adjust_brightness(x, float(p[1]) + m),
        "Color": lambda: F.adjust_saturation(x, float(p[1]) + m),
        "Contrast": lambda: F.adjust_contrast(x, float(p[1]) + m),
        "Sharpness": lambda: F.adjust_sharpness(x, float(p[1]) + m),
        "Hue": lambda: F.adjust_hue(x, m), "Posterize": lambda: F.posterize(x, int(m)),
        "Solarize": lambda: F.solarize(x, m), "AutoContrast": lambda: F.autocontrast(x),
        "Equalize": lambda: F.equalize(x), "Invert": lambda: F.invert(x),
        "Grayscale": lambda: F.rgb_to_grayscale(x, 3), "FlipH": lambda: F.hflip(x), "FlipV": lambda: F.vflip(x),
        "Identity": lambda: x,
    }
    out = calls[name]()
    return np.asarray(out) if kernels == "pil" else out.permute(1, 2, 0).numpy()


# (name, params): the parameters read by each op; enhancement factors are p1 + p0
CASES = [
    ("ShearX", (0.3, 0, 1)), ("ShearX", (-0.17, 2, 1)), ("ShearX", (0.23, 2, 2)), ("ShearY", (0.21, 0, 1)),
    ("ShearY", (-0.3, 2, 1)), ("TranslateX", (13, 0)), ("TranslateX", (-9, 2)), ("TranslateY", (-7, 2)),
    ("Rotate", (30.0, 0)), ("Rotate", (-17.3, 2)), ("Rotate", (90.0, 0)), ("Rotate", (180.0, 2)),
    ("Brightness", (0.3, 1)), ("Brightness", (0.4, 0)), ("Color", (0.7, 1)), ("Color", (0.2, 0)),
    ("Contrast", (0.5, 1)), ("Contrast", (-0.7, 1)), ("Sharpness", (0.8, 1)), ("Sharpness", (-0.9, 1)),
    ("Sharpness", (0.1, 0)), ("Hue", (0.2,)), ("Hue", (-0.37,)), ("Posterize", (3,)), ("Posterize", (6,)),
    ("Solarize", (100.0,)), ("Solarize", (200.0,)), ("AutoContrast", ()), ("Equalize", ()), ("Invert", ()),
    ("Grayscale", ()), ("FlipH", ()), ("FlipV", ()), ("Identity", ()),
]
FILLS = [None, (10.0, 20.0, 30.0)]


def case_id(case):
    return f"{case[0]}{list(case[1])}"


@pytest.mark.parametrize("kernels", op.KERNELS)
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_each_op_equals_torchvision_pixel_for_pixel(photos, kernels, case):
    name, p = case
    for fill in FILLS if name in op.WARPS else FILLS[:1]:
        got = run_op(photos, [(name, p)], kernels, fill)
        for image, ours in zip(photos, got):
            want = torchvision_op(image, name, p, kernels, None if fill is None else list(fill))
            assert np.array_equal(ours, want), (name, p, kernels, fill, np.abs(ours.astype(int) - want).max())


def test_pil_hue_equals_pillow_on_a_grid_of_every_kind_of_pixel():
    # the PIL hue runs through tables indexed by which channel is largest and smallest: a grid
    # of levels holds every tie between channels (r == g > b, g == b < r, grey, ...) and the
    # extremes, which photos rarely do
    levels = np.array(sorted(set(range(0, 256, 5)) | {1, 2, 254, 255}), np.uint8)
    r, g, b = np.meshgrid(levels, levels, levels, indexing="ij")
    image = np.ascontiguousarray(np.stack([r, g, b], -1).reshape(len(levels) ** 2, len(levels), 3))
    for factor in (0.2, -0.37, 0.5, 0.003):
        ours = run_op([image], [("Hue", (factor,))], "pil")[0]
        want = torchvision_op(image, "Hue", (factor,), "pil", None)
        assert np.array_equal(ours, want), (factor, int(np.count_nonzero((ours != want).any(-1))))


def test_a_sequence_is_the_ops_in_order(photos):
    steps = [("Rotate", (20.0, 2)), ("Color", (0.5, 1)), ("Posterize", (4,)), ("FlipH", ())]
    for kernels in op.KERNELS:
        got = run_op(photos, steps, kernels)
        for image, ours in zip(photos, got):
            want = image
            for name, p in steps:
                want = torchvision_op(want, name, p, kernels, None)
            assert np.array_equal(ours, want), kernels


# -- timm's ops on PIL images: its own matrices, BICUBIC, SolarizeAdd ---------------------------


def timm_reference(image, name, p, fill):
    """What timm's auto_augment ops do: Image.transform / rotate with resample and fillcolor."""
    pil = Image.fromarray(image)
    kwargs = dict(resample=PIL_RESAMPLE[int(p[1])] if name in op.WARPS else Image.NEAREST, fillcolor=fill)
    if name == "ShearX":
        return np.asarray(pil.transform(pil.size, Image.AFFINE, (1, p[0], 0, 0, 1, 0), **kwargs))
    if name == "ShearY":
        return np.asarray(pil.transform(pil.size, Image.AFFINE, (1, 0, 0, p[0], 1, 0), **kwargs))
    if name == "TranslateX":   # timm moves by `pixels` with the matrix entry +pixels: our shift is -pixels
        return np.asarray(pil.transform(pil.size, Image.AFFINE, (1, 0, -p[0], 0, 1, 0), **kwargs))
    if name == "Rotate":
        return np.asarray(pil.rotate(p[0], **kwargs))
    add, threshold = int(p[0]), p[1]
    lut = [min(255, i + add) if i < threshold else i for i in range(256)]
    return np.asarray(pil.point(lut * 3))


@pytest.mark.parametrize("case", [("ShearX", (0.25, 3, 0)), ("ShearY", (-0.19, 2, 0)), ("ShearX", (0.3, 0, 0)),
                                  ("TranslateX", (-14.6, 3)), ("Rotate", (23.5, 3)), ("Rotate", (-11.0, 2)),
                                  ("SolarizeAdd", (60, 128)), ("SolarizeAdd", (110, 200))], ids=case_id)
def test_timm_ops_equal_pil(photos, case):
    name, p = case
    fill = (124, 116, 104)   # timm's per-channel mean fill
    got = run_op(photos, [(name, p)], "pil", fill)
    for image, ours in zip(photos, got):
        p32 = tuple(float(np.float32(v)) for v in p)
        assert np.array_equal(ours, timm_reference(image, name, p32, fill)), (name, p)


@pytest.mark.parametrize("channels", [1, 3, 4])
def test_horizontal_flip_mirrors_every_width(channels):
    """The flip reverses 16 bytes at a time where it can and a pixel at a time elsewhere: every
    width from 1 to 40 (each split between the two) gives numpy's mirror."""
    rng = np.random.default_rng(channels)
    images = [rng.integers(0, 256, (3, w, channels), np.uint8) for w in range(1, 41)]
    for image, got in zip(images, run_op(images, [("FlipH", ())], "pil")):
        assert np.array_equal(got, image[:, ::-1]), image.shape


def test_erase_sets_the_box_to_the_value(photos):
    got = run_op(photos, [("Erase", (10, 20, 30, 40))], "tensor", erase_value=(7.0, 300.0, -5.0))
    for image, ours in zip(photos, got):
        want = image.copy()
        want[10:40, 20:60] = (7, 255, 0)   # clamped to uint8
        assert np.array_equal(ours, want)


@pytest.mark.parametrize("layout", ["CHW", "HWC"])
def test_the_box_operator_draws_the_box_the_erase_operator_erases(layout):
    """DaliLoadersEraseBox (GPU graphs: its box goes to DALI's fn.erase) and DaliLoadersErase,
    fed the same draws, erase the same pixels, images of different sizes in one batch; no try
    fitting, or the coin, gives an empty box."""
    from nvidia.dali import fn, pipeline_def, types

    rng = np.random.default_rng(3)
    sizes = [(int(h), int(w)) for h, w in rng.integers(2, 40, (64, 2))]
    images = [rng.normal(size=(3, h, w) if layout == "CHW" else (h, w, 3)).astype(np.float32) for h, w in sizes]
    value = [0.5, -1.0, 2.0]

    @pipeline_def(batch_size=len(images), num_threads=2, device_id=None, seed=9)
    def pipe():
        data = fn.external_source(source=lambda: images, batch=True, layout=layout)
        draws, seed = op.erase_draws()
        whole = fn.dali_loaders_erase(data, draws=draws, noise_seed=seed, probability=0.7, scale=[0.1, 0.6],
                                      log_ratio=[math.log(0.3), math.log(3.3)], value=value)
        shape = fn.cast(data.shape(), dtype=types.INT32)
        height, width = (shape[1], shape[2]) if layout == "CHW" else (shape[0], shape[1])
        anchor, box = fn.dali_loaders_erase_box(draws, height=height, width=width, probability=0.7,
                                                scale=[0.1, 0.6], log_ratio=[math.log(0.3), math.log(3.3)])
        return whole, fn.erase(data, anchor=anchor, shape=box, axis_names="HW", fill_value=value), box

    pipeline = pipe()
    pipeline.build()
    whole, boxed, boxes = ([np.array(t) for t in out] for out in pipeline.run())
    for i, (a, b) in enumerate(zip(whole, boxed)):
        assert np.array_equal(a, b), i
    erased = [bool(np.any(b)) for b in boxes]
    assert 0 < sum(erased) < len(erased)   # some boxes, some images left as they were
    for (h, w), b in zip(sizes, boxes):
        assert (b[0] < h and b[1] < w) or not np.any(b)


@pytest.mark.parametrize("layout", ["CHW", "HWC"])
def test_pixel_noise_is_standard_normal_in_its_tails_and_independent(layout):
    """timm's pixel RandomErasing fills its box with torch's normal_(): about a million of the
    operator's values match N(0, 1) as a whole (KS), in the tails beyond 3 and 4 (where the
    generator leaves its fast path) and in their order (neighbours uncorrelated, images unlike)."""
    from nvidia.dali import fn, pipeline_def
    from scipy import stats

    side, count = 256, 16
    zeros = [np.zeros((3, side, side) if layout == "CHW" else (side, side, 3), np.float32)] * count
    ln = math.log(1.0)

    @pipeline_def(batch_size=count, num_threads=2, device_id=None, seed=5)
    def pipe():
        data = fn.external_source(source=lambda: zeros, batch=True, layout=layout)
        draws, seed = op.erase_draws()
        return fn.dali_loaders_erase(data, draws=draws, noise_seed=seed, probability=1.0, scale=[0.4, 0.4],
                                     log_ratio=[ln, ln], noise="pixel")

    pipeline = pipe()
    pipeline.build()
    images = [np.array(t) for _ in range(2) for t in pipeline.run()[0]]
    boxes = [image[image != 0] for image in images]
    assert all(len(box) == 3 * round(math.sqrt(0.4 * side * side)) ** 2 for box in boxes)
    values = np.concatenate(boxes).astype(np.float64)
    assert stats.kstest(values, "norm").pvalue > P_MIN
    for beyond in (3.0, 4.0):
        expected = 2 * stats.norm.sf(beyond)
        assert stats.binomtest(int((np.abs(values) > beyond).sum()), len(values), expected).pvalue > P_MIN, beyond
    assert abs(stats.pearsonr(values[:-1], values[1:])[0]) < 5 / math.sqrt(len(values))
    assert not np.array_equal(boxes[0][:100], boxes[1][:100])


def test_pixel_noise_is_the_same_by_the_simd_path_and_the_plain_one():
    """The noise's fast path runs eight draws at a time in AVX2 where the CPU has it; the plain
    C++ path computes the same values from the same seed, in boxes whose rows are not a whole
    number of eight draws."""
    from nvidia.dali import fn, pipeline_def

    rng = np.random.default_rng(4)
    images = [np.zeros((3, int(h), int(w)), np.float32) for h, w in rng.integers(9, 60, (32, 2))]

    @pipeline_def(batch_size=len(images), num_threads=2, device_id=None, seed=5)
    def pipe():
        data = fn.external_source(source=lambda: images, batch=True, layout="CHW")
        draws, seed = op.erase_draws()
        erase = dict(draws=draws, noise_seed=seed, probability=1.0, scale=[0.2, 0.7],
                     log_ratio=[math.log(0.3), math.log(3.3)], noise="pixel")
        return fn.dali_loaders_erase(data, **erase), fn.dali_loaders_erase(data, **erase, _portable=True)

    pipeline = pipe()
    pipeline.build()
    simd, plain = ([np.array(t) for t in out] for out in pipeline.run())
    assert sum(int((image != 0).sum()) for image in simd) > 10000
    for i, (a, b) in enumerate(zip(simd, plain)):
        assert np.array_equal(a, b), i


def test_the_box_operators_graph_erases_the_boxes_the_erase_operators_graph_erases(monkeypatch):
    """A GPU graph's erasing (DaliLoadersEraseBox and fn.erase, here forced onto a CPU graph)
    and a CPU graph's (DaliLoadersErase), seeded alike, erase the same boxes: what lets
    check-gpu compare them pixel for pixel."""
    from dali_loaders.loader import dali_loader
    from dali_loaders.sources.arrays import ArraySource

    pixels = np.random.default_rng(0).integers(0, 256, (32, 48, 64, 3), dtype=np.uint8)
    recipe = v2.Compose([v2.ToImage(), v2.ToDtype(torch.float32, scale=True), v2.RandomErasing(p=0.7, value=0.5)])

    def epoch():
        loader = dali_loader(ArraySource(pixels, np.zeros(32), "noise"), recipe, train=True, batch_size=8,
                             num_threads=2, seed=7)
        return torch.cat([x for x, _ in loader])

    fused_erasing = epoch()
    monkeypatch.setattr(fused, "erase_float", lambda *args, **kwargs: False)
    boxed = epoch()
    assert torch.equal(fused_erasing, boxed)
    erased = (boxed == 0.5).all(dim=1).flatten(1).sum(1)
    assert 10 < int((erased > 0).sum()) < 32


def test_self_supervised_views_resume_mid_epoch_exactly():
    """MoCo v2's and BYOL's steps in the operator (RandomApply's coin drawn with ColorJitter's
    order, the blur's sigma, solarization's coin): a state saved mid-epoch gives the rest of
    the epoch bit for bit, and the augmentations vary from image to image."""
    from dali_loaders.loader import dali_loader
    from dali_loaders.sources.arrays import ArraySource

    pixels = np.random.default_rng(3).integers(0, 256, (48, 20, 24, 3), dtype=np.uint8)
    recipe = v2.Compose([v2.RandomApply([v2.ColorJitter(0.4, 0.4, 0.4, 0.1)], p=0.8), v2.RandomGrayscale(0.2),
                         v2.RandomApply([v2.GaussianBlur(5, sigma=(0.1, 2.0))], p=0.5),
                         v2.RandomSolarize(128, p=0.2), v2.ToImage(), v2.ToDtype(torch.float32, scale=True)])

    def loader():
        return dali_loader(ArraySource(pixels, np.arange(48), "indexed"), recipe, train=True, batch_size=8,
                           num_threads=2, seed=5)

    assert_resume_gives_the_rest(loader, taken=2, epoch=1)
    images, labels = (torch.cat(parts) for parts in zip(*loader()))
    originals = torch.from_numpy(pixels[labels.numpy()]).permute(0, 3, 1, 2).float() / 255
    changed = (images - originals).abs().flatten(1).amax(1) > 1e-6
    assert 0 < int(changed.sum()) < len(changed)   # p=0.8 * ... : some images left as they are


def test_a_loader_erasing_with_the_box_operator_resumes_mid_epoch_exactly(monkeypatch):
    """The box operator's draws are the graph's own random operator: a state saved mid-epoch
    gives the rest of the epoch bit for bit (GPU graphs' erasing, forced onto a CPU graph)."""
    from dali_loaders.loader import dali_loader
    from dali_loaders.sources.arrays import ArraySource

    boxes = []
    drawn = op.erase_box
    monkeypatch.setattr(fused, "erase_float", lambda *args, **kwargs: False)
    monkeypatch.setattr(op, "erase_box", lambda *args, **kwargs: boxes.append(1) or drawn(*args, **kwargs))
    pixels = np.random.default_rng(2).integers(0, 256, (48, 20, 24, 3), dtype=np.uint8)
    recipe = v2.Compose([v2.ToImage(), v2.RandomCrop(16), v2.ToDtype(torch.float32, scale=True),
                         v2.RandomErasing(p=0.7, value="random")])

    def loader():
        return dali_loader(ArraySource(pixels, np.arange(48), "indexed"), recipe, train=True, batch_size=8,
                           num_threads=2, seed=5)

    assert_resume_gives_the_rest(loader, taken=2, epoch=1)
    assert boxes
    images = torch.cat([x for x, _ in loader()])   # noise leaves 0 .. 1 where a box was erased
    erased = ((images < 0) | (images > 1)).flatten(1).any(1).float().mean()
    assert 0.4 < erased < 0.95, erased


# -- bad arguments, refused by name -------------------------------------------------------------


@pytest.mark.parametrize("steps,kernels,match", [
    ([("Rotate", (10.0, 3))], "tensor", "bicubic"),
    ([("ShearX", (0.1, 0, 0))], "tensor", "timm's shear"),
    ([("Hue", (0.7,))], "pil", "hue factor"),
    ([("Posterize", (9,))], "pil", "posterize"),
    ([("GaussianBlur", (1.0, 4, 3))], "tensor", "kernel sizes must be odd"),
    ([("GaussianBlur", (0.0, 3, 3))], "pil", "sigma must be > 0"),
])
def test_bad_parameters_are_refused_by_name(photos, steps, kernels, match):
    with pytest.raises(RuntimeError, match=match):
        run_op(photos[:1], steps, kernels)


def test_bad_kernels_and_fill_are_refused_by_name(photos):
    with pytest.raises(ValueError, match="kernels='float'"):
        run_op(photos[:1], [("Invert", ())], "float")
    with pytest.raises(RuntimeError, match="fill must have one value per channel"):
        run_op(photos[:1], [("Rotate", (10.0, 0))], "pil", fill=(1.0, 2.0))


# -- the fused translators: drawn sequences replayed through torchvision -------------------------

SLOTS = {"TrivialAugmentWide": fused.trivial_augment_slots, "RandAugment": fused.rand_augment_slots,
         "AutoAugment": fused.auto_augment_slots}


def drawn_and_augmented(step, kind, photos, flip: bool = False):
    """The fused graph on the photographs (sizes known per sample only): the rows its operator
    drew per slot (-1: not applied) and its output; with `flip`, a horizontal flip pending
    before the step (p=0.5), and the coins."""
    from nvidia.dali import fn, pipeline_def, types

    made = {}

    @pipeline_def(batch_size=len(photos), num_threads=2, device_id=None, seed=5)
    def pipe():
        data = fn.external_source(source=lambda: photos, batch=True, layout="HWC")
        shape = data.shape(dtype=types.INT32)
        images = Images(data, shape[0], shape[1], 3, "cpu", kind=kind)
        coins = fn.random.coin_flip(probability=0.5 if flip else 0.0)
        images.mirror = coins if flip else None
        made["table"], slots = SLOTS[type(step).__name__](step, images)
        made["slots"] = len(slots)
        fused.queue(images, step, made["table"], slots, warps=True)
        images.flush_augment()
        return images.data, recorded[0], coins

    with rows_recorded() as recorded:
        pipeline = pipe()
        pipeline.build()
    runs = [pipeline.run() for _ in range(3)]
    samples = [(np.array(img), np.array(rows_of(rows, made["slots"])), int(np.array(coin)))
               for out, drawn, coins in runs for img, rows, coin in zip(out, drawn, coins)]
    return made["table"], samples if flip else [sample[:2] for sample in samples]


def at_size(step, name, magnitude, relative, image):
    """A translation drawn as a fraction of the size: torchvision's magnitude of that bin at
    this image's size (its table, float32, in pixels)."""
    if not relative:
        return magnitude
    bins = getattr(step, "num_magnitude_bins", aa.AUTOAUGMENT_BINS)
    unit = aa.space(step, bins, 1.0, 1.0)[name][0].astype(np.float32)
    k = int(np.argmin(np.abs(unit - np.float32(abs(magnitude)))))
    return float(aa.space(step, bins, *image.shape[:2])[name][0][k]) * (1.0 if magnitude >= 0 else -1.0)


def replay(step, kind, image, drawn):
    """torchvision's own op calls for the drawn [(operation, magnitude, relative), ...]."""
    x = Image.fromarray(image) if kind == "pil" else torch.from_numpy(image.copy()).permute(2, 0, 1)
    for name, magnitude, relative in drawn:
        magnitude = at_size(step, name, magnitude, relative, image)
        if hasattr(step, "_apply_image_or_video_transform"):
            x = step._apply_image_or_video_transform(x, name, float(np.float32(magnitude)), step.interpolation,
                                                     step._fill)
        else:
            x = v1_autoaugment._apply_op(x, name, float(np.float32(magnitude)), step.interpolation, step.fill)
    return np.asarray(x) if kind == "pil" else x.permute(1, 2, 0).numpy()


@pytest.mark.parametrize("kind", ["pil", "tensor"])
@pytest.mark.parametrize("step", [v2.TrivialAugmentWide(), v2.RandAugment(num_ops=3, magnitude=13),
                                  v2.AutoAugment(v2.AutoAugmentPolicy.IMAGENET),
                                  v2.TrivialAugmentWide(interpolation=IM.BILINEAR, fill=[40, 40, 40]),
                                  v1_autoaugment.TrivialAugmentWide(interpolation=IM.BILINEAR)],
                         ids=["trivial", "rand", "auto", "trivial-bilinear-fill", "v1-trivial-bilinear"])
def test_fused_draws_replayed_through_torchvision_are_pixel_exact(photos, step, kind):
    """Translations here scale with sizes known only per sample: the graph truncates them in
    float32 where torchvision's table is float32 already, the one place they may differ."""
    table, samples = drawn_and_augmented(step, kind, photos)
    for k, (ours, rows) in enumerate(samples):
        relative = [op.ROW["RelativeX"], op.ROW["RelativeY"]]
        drawn = [(*table.labels[r], table.rows[r, relative].any()) for r in rows.tolist() if r >= 0]
        want = replay(step, kind, photos[k % len(photos)], drawn)
        assert np.array_equal(ours, want), drawn


@pytest.mark.parametrize("kind", ["pil", "tensor"])
def test_a_pending_flip_goes_before_the_fused_steps(photos, kind):
    """A horizontal flip drawn before a step that warps (here TrivialAugmentWide) is applied
    first, by the operator, where it flips: the same pixels as torchvision's flip, then the op."""
    step = v2.TrivialAugmentWide()
    table, samples = drawn_and_augmented(step, kind, photos, flip=True)
    relative = [op.ROW["RelativeX"], op.ROW["RelativeY"]]
    for k, (ours, rows, flipped) in enumerate(samples):
        image = photos[k % len(photos)]
        drawn = [(*table.labels[r], table.rows[r, relative].any()) for r in rows.tolist() if r >= 0]
        want = replay(step, kind, np.ascontiguousarray(image[:, ::-1]) if flipped else image, drawn)
        assert np.array_equal(ours, want), (flipped, drawn)
    assert 0 < sum(flipped for _, _, flipped in samples) < len(samples)


def test_params_must_be_a_row_per_op(photos):
    from nvidia.dali import fn, pipeline_def

    @pipeline_def(batch_size=1, num_threads=1, device_id=None, seed=1)
    def pipe():
        data = fn.external_source(source=lambda: photos[:1], batch=True, layout="HWC")
        ops = fn.external_source(source=lambda: [np.array([op.CODES["Invert"]] * 2, np.int32)], batch=True)
        rows = fn.external_source(source=lambda: [np.zeros((1, op.NUM_PARAMS), np.float32)], batch=True)
        return op.call(data, ops, rows, "pil")

    pipeline = pipe()
    pipeline.build()
    with pytest.raises(RuntimeError, match=r"params must be \(len\(ops\), 4\)"):
        pipeline.run()


# -- in the loaders: no conditionals on CPU graphs, DALI's operators elsewhere --------------------

HEAVY = [v2.RandomHorizontalFlip(), v2.TrivialAugmentWide(), v2.RandAugment(), v2.AutoAugment(),
         v2.ColorJitter(0.4, 0.4, 0.4, 0.1), v2.RandomGrayscale(0.2),
         v2.RandomApply([v2.ColorJitter(0.4, 0.4, 0.4, 0.1), v2.RandomGrayscale(0.5)], p=0.8),
         v2.RandomSolarize(128, p=0.2), v2.RandomEqualize(0.1), v2.GaussianBlur(3, sigma=(0.1, 2.0)),
         v2.RandomApply([v2.GaussianBlur(5)], p=0.5), v2.ToImage(),
         v2.ToDtype(torch.float32, scale=True)]


def test_cpu_graphs_of_the_augmenting_recipes_need_no_conditionals(monkeypatch):
    from dali_loaders import transforms

    recipe = transforms.plan(v2.Compose(HEAVY), False)
    assert not transforms.needs_conditionals(recipe, "cpu")
    assert transforms.needs_conditionals(recipe, "gpu")   # the GPU graph keeps DALI's operators
    monkeypatch.setenv(plugin.DISABLE_AUGMENT_ENV, "1")
    assert transforms.needs_conditionals(recipe, "cpu")


def photo_source():
    from dali_loaders.sources.arrays import ArraySource

    return ArraySource(np.stack([np.asarray(load(p).resize((40, 32))) for p in photo_paths()]),
                       np.arange(len(photo_paths())), "photos")


def test_one_call_runs_every_augmenting_step_of_a_cpu_graph(monkeypatch):
    """The graph of the whole heavy recipe, built with conditionals off (an `if` on a DataNode
    would raise), calls DaliLoadersAugment once."""
    from nvidia.dali import pipeline_def

    from dali_loaders.loader.build import graph

    calls, call = [], op.call
    monkeypatch.setattr(op, "call", lambda *args, **kwargs: calls.append(args[3]) or call(*args, **kwargs))
    source = photo_source()
    pipe = pipeline_def(graph, enable_conditionals=False)(source, np.arange(4), 4, plan_of(HEAVY), "CHW", "cpu",
                                                         batch_size=4, num_threads=1, device_id=None, seed=1)
    pipe.build()
    assert calls == ["pil"]
    assert len(pipe.run()[0]) == 4


def plan_of(steps):
    from dali_loaders import transforms

    return transforms.plan(v2.Compose(steps), False)


def test_without_a_compiler_the_loaders_warn_once_and_branch_instead(no_compiler):
    from dali_loaders.loader import dali_loader

    with pytest.warns(RuntimeWarning, match="augmentation plugin is not available") as caught:
        for _ in range(2):
            loader = dali_loader(photo_source(), v2.Compose(HEAVY), train=True, batch_size=4, num_threads=1,
                                 seed=0)
            assert {tuple(x.shape[1:]) for x, _ in loader} == {(3, 32, 40)}
    assert sum("augmentation plugin" in str(w.message) for w in caught) == 1


def test_random_erasing_of_uint8_pixels_draws_torchvision_boxes_and_sets_the_value():
    """A twin that erases its uint8 tensor: the fused operator's Erase, the box drawn as for
    floats (tests/test_autoaugment.py), the value truncated into uint8 as torch copies it."""
    from scipy import stats

    from dali_loaders.loader import dali_loader
    from dali_loaders.sources.arrays import ArraySource

    n, size, value = 1024, (48, 64), (10.7, 20.0, 255.0)
    transform = v2.Compose([v2.ToImage(), v2.RandomErasing(p=0.5, scale=(0.02, 0.33), value=value)])
    loader = dali_loader(ArraySource(np.zeros((n, *size, 3), np.uint8), np.zeros(n), "zeros"), transform,
                         train=True, batch_size=256, num_threads=2, seed=3)
    ours = torch.cat([x for x, _ in loader])
    torch.manual_seed(3)
    twin = torch.stack([transform(torch.zeros(3, *size, dtype=torch.uint8)) for _ in range(n)])
    for images in (ours, twin):
        assert images.dtype == torch.uint8
        erased = images.amax(dim=(1, 2, 3)) > 0
        for image in images[erased]:
            assert [set(c.unique().tolist()) for c in image] == [{0, 10}, {0, 20}, {0, 255}]
    areas = [[int((image[0] > 0).sum()) for image in images if image.any()] for images in (ours, twin)]
    assert abs(len(areas[0]) - len(areas[1])) < 4 * np.sqrt(0.25 * n * 2)
    assert stats.ks_2samp(*areas).pvalue > 1e-3


@pytest.mark.parametrize("name", ["Color", "Grayscale", "Contrast"])
def test_grey_of_two_channel_images_is_refused_by_name(name):
    """Their grey reads three channels: a 2-channel image is refused, not read past its end."""
    from nvidia.dali import fn, pipeline_def

    @pipeline_def(batch_size=1, num_threads=1, device_id=None, seed=1)
    def pipe():
        data = fn.external_source(source=lambda: [np.zeros((4, 4, 2), np.uint8)], batch=True, layout="HWC")
        ops = fn.external_source(source=lambda: [np.array([op.CODES[name]], np.int32)], batch=True)
        rows = fn.external_source(source=lambda: [np.zeros((1, op.NUM_PARAMS), np.float32)], batch=True)
        return op.call(data, ops, rows, "pil")

    pipeline = pipe()
    pipeline.build()
    with pytest.raises(RuntimeError, match="needs 1, 3 or 4 channels, not 2"):
        pipeline.run()
