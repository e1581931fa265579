"""The PIL-exact resize plugin: its output against PIL's Image.resize on real photographs
(bound: 0 grey levels, it is exact; BILINEAR, BICUBIC and NEAREST), the loaders with and without it, its fallback to DALI's
fn.resize when it cannot be built, and the GPU graph, which never uses it."""
import os
import warnings

import numpy as np
import pytest
import torch
from photos import load, photo_paths, write_photo_folder
from PIL import Image
from torchvision.transforms import v2

from dali_loaders import get_imagefolder_iter_dali, get_imagefolder_iter_torch
from dali_loaders.ops import plugin, resample

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

FILTERS = {"bilinear": Image.BILINEAR, "bicubic": Image.BICUBIC, "nearest": Image.NEAREST}


@pytest.fixture(scope="module")
def photos():
    return [np.asarray(load(path, max_side=700)) for path in photo_paths()]


def in_ci() -> bool:
    """CI services set CI (GitHub Actions, GitLab, ... set CI=true)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def require_plugin() -> None:
    """The exactness tests need the plugin. Where it cannot be built they skip, except in
    CI: CI has a compiler, so there the plugin must build, and a failure to is a failure."""
    if not plugin.available():
        why = f"the plugin cannot be built here: {plugin._state.get('why') or 'turned off'}"
        if in_ci():
            pytest.fail(f"{why}; CI is set, and CI has a compiler: the plugin must build there")
        pytest.skip(why)


@pytest.fixture(scope="module")
def built():
    require_plugin()


def run_op(images, **arguments):
    """DaliLoadersResize on `images` (a list of HWC uint8 arrays); per-sample arguments are
    given as lists with one value per image, fed as argument inputs."""
    from nvidia.dali import fn, pipeline_def

    per_sample = {k: v for k, v in arguments.items() if isinstance(v, list)}
    fixed = {k: v for k, v in arguments.items() if not isinstance(v, list)}

    @pipeline_def(batch_size=len(images), num_threads=2, device_id=None)
    def pipe():
        data = fn.external_source(lambda: images, batch=True, layout="HWC")
        fed = {k: fn.external_source(_batch_of(v), batch=True) for k, v in per_sample.items()}
        return fn.dali_loaders_resize(data, **fed, **fixed)

    p = pipe()
    p.build()
    (out,) = p.run()
    return [np.asarray(out[i]) for i in range(len(images))]


def _batch_of(values):
    """A callback without parameters (DALI passes an index to one that takes any)."""
    batch = [np.float32(v) for v in values]
    return lambda: batch


def pil(image, size, filter, box=None):
    height, width = size
    return np.asarray(Image.fromarray(image).resize((width, height), FILTERS[filter], box=box))


def sizes_for(image):
    """Output sizes: the ImageNet ones, deep and slight shrinks, enlargements, and shapes where
    Pillow 13 runs the vertical pass first (the height shrinks by > 2x the width's pixels)."""
    h, w = image.shape[:2]
    return [(224, 224), (232, round(232 * w / h)), (h // 5, w // 3), (h - 1, w), (h, w - 1), (h // 4, w - 10),
            (2 * h + 1, w + 3), (37, 2 * w), (1, 1), (3, 17)]


@pytest.mark.parametrize("portable", [False, True], ids=["simd", "portable"])
@pytest.mark.parametrize("filter", ["bilinear", "bicubic", "nearest"])
def test_equals_pil_on_photographs(built, photos, filter, portable):
    """Per-sample sizes as argument inputs; every pixel equal to PIL's."""
    for k in range(len(sizes_for(photos[0]))):
        sizes = [sizes_for(image)[k] for image in photos]
        out = run_op(photos, size=[list(s) for s in sizes], filter=filter, _portable=portable)
        for image, size, got in zip(photos, sizes, out):
            assert np.array_equal(got, pil(image, size, filter)), (image.shape, size, filter)


@pytest.mark.parametrize("filter", ["bilinear", "bicubic", "nearest"])
def test_a_box_equals_pils_box(built, photos, filter):
    """roi_start/roi_end: Image.resize's box (float32 corners), shrinking and enlarging."""
    rng = np.random.default_rng(0)
    for _ in range(3):
        boxes, sizes = [], []
        for image in photos:
            h, w = image.shape[:2]
            y0, x0 = rng.uniform(0, h / 2), rng.uniform(0, w / 2)
            boxes.append(np.float32([y0, x0, rng.uniform(y0 + 2, h), rng.uniform(x0 + 2, w)]))
            sizes.append([int(rng.integers(8, 300)), int(rng.integers(8, 300))])
        out = run_op(photos, size=sizes, roi_start=[b[:2] for b in boxes], roi_end=[b[2:] for b in boxes],
                     filter=filter)
        for image, box, size, got in zip(photos, boxes, sizes, out):
            y0, x0, y1, x1 = box.tolist()
            assert np.array_equal(got, pil(image, size, filter, box=(x0, y0, x1, y1)))


@pytest.mark.parametrize("filter", ["bilinear", "bicubic", "nearest"])
def test_a_window_equals_the_crop_of_the_whole_resize(built, photos, filter):
    """resized_size + window_start: Resize then CenterCrop (or any crop) in one pass."""
    for short, crop in [(232, 224), (256, 224), (120, 33)]:
        resized = [(short, short * img.shape[1] // img.shape[0]) if img.shape[0] <= img.shape[1]
                   else (short * img.shape[0] // img.shape[1], short) for img in photos]
        starts = [((h - crop) // 2, (w - crop) // 3) for h, w in resized]
        out = run_op(photos, size=[[crop, crop]] * len(photos), resized_size=[list(r) for r in resized],
                     window_start=[list(s) for s in starts], filter=filter)
        for image, r, (top, left), got in zip(photos, resized, starts, out):
            assert np.array_equal(got, pil(image, r, filter)[top:top + crop, left:left + crop])


def region_resize(paths, short, crop, filter, region=None):
    """Resize(short) + CenterCrop(crop) of JPEG files through a region decode (the loaders'
    val path): the outputs, and each image's (start, shape) region. `region`: a (start, shape)
    per image to decode instead of the one the plugin gives."""
    from nvidia.dali import fn, pipeline_def, types

    from dali_loaders.sources.files import decode_args

    @pipeline_def(batch_size=len(paths), num_threads=2, device_id=None)
    def pipe():
        encoded = fn.external_source(lambda: [np.fromfile(p, np.uint8) for p in paths], batch=True)
        sizes = fn.peek_image_shape(encoded, dtype=types.INT32, adjust_orientation=False)[0:2]
        interp = getattr(types, INTERP[filter])
        if region is None:
            start, shape = resample.centre_crop_region(sizes, short, crop, interp)
        else:
            start = fn.external_source(lambda: [np.int32(r[0]) for r in region], batch=True)
            shape = fn.external_source(lambda: [np.int32(r[1]) for r in region], batch=True)
        held = fn.decoders.image_slice(encoded, start, shape, axis_names="HW", **decode_args("cpu"))
        return resample.resize_centre_crop(held, short, crop, interp, (sizes, start)), start, shape

    p = pipe()
    p.build()
    return [[np.asarray(t[i]) for i in range(len(paths))] for t in p.run()]


INTERP = {"bilinear": "INTERP_LINEAR", "bicubic": "INTERP_CUBIC", "nearest": "INTERP_NN"}


@pytest.fixture(scope="module")
def jpeg_sizes(tmp_path_factory):
    """The photographs as JPEGs (quality 90, 4:2:0) at sizes that shrink, barely shrink and
    enlarge to a 224-256 short side, in both orientations."""
    root = tmp_path_factory.mktemp("jpeg-sizes")
    paths = []
    for k, (source, (w, h)) in enumerate(zip(photo_paths() * 2, [(500, 375), (375, 500), (261, 300), (640, 257),
                                                                  (200, 150), (120, 333), (1023, 769), (257, 257),
                                                                  (300, 900), (451, 449), (233, 240), (999, 260),
                                                                  (160, 160), (700, 300)])):
        path = str(root / f"{k}.jpg")
        load(source).resize((w, h), Image.BICUBIC).save(path, quality=90)
        paths.append(path)
    return paths


@pytest.mark.parametrize("filter", ["bilinear", "bicubic", "nearest"])
def test_a_region_decode_equals_pils_resize_then_crop(built, jpeg_sizes, filter):
    """The val path: only the region the resize reads is decoded, yet every pixel equals PIL's
    decode, Resize(short) and CenterCrop (torchvision's twin); the region is smaller than the
    image wherever the crop leaves some of it out."""
    for short, crop in [(256, (224, 224)), (232, (224, 224)), (240, (200, 131))]:
        out, start, shape = region_resize(jpeg_sizes, short, crop, filter)
        for path, got, s, n in zip(jpeg_sizes, out, start, shape):
            twin = v2.Compose([v2.Resize(short, interpolation=getattr(v2.InterpolationMode, filter.upper())),
                               v2.CenterCrop(crop)])(Image.open(path).convert("RGB"))
            assert np.array_equal(got, np.asarray(twin)), (path, short, crop)
            width, height = Image.open(path).size
            assert (s >= 0).all() and s[0] + n[0] <= height and s[1] + n[1] <= width
            scale = min(height, width) / short   # source pixels per resized pixel
            reach = {"bilinear": 1, "bicubic": 2, "nearest": 0}[filter] * max(scale, 1) + 1
            assert (n <= np.ceil(np.array(crop) * scale + 2 * reach)).all(), (path, s, n)   # the window and taps


def test_a_region_without_the_taps_reach_is_refused(built, jpeg_sizes):
    """A region one pixel short of what the resize reads: a clear error, not other pixels."""
    paths = jpeg_sizes[:1]
    _, start, shape = region_resize(paths, 256, (224, 224), "bilinear")
    region_resize(paths, 256, (224, 224), "bilinear", region=[(start[0], shape[0])])   # exactly enough: fine
    short_of = [(start[0] + np.int32([0, 1]), shape[0] - np.int32([0, 1]))]
    with pytest.raises(RuntimeError, match="lacks pixels the resize reads"):
        region_resize(paths, 256, (224, 224), "bilinear", region=short_of)


def test_nearest_equals_pil_at_its_ties(built, photos):
    """NEAREST at scales whose source positions (x + 0.5) * in / out land on whole pixels,
    where fn.resize and PIL part (PIL sums the position in double, one step per pixel), and
    at odd sizes; also as windows of those resizes."""
    for image in photos:
        h, w = image.shape[:2]
        sizes = [(h // 2, w // 2), (h // 4, w // 6), (2 * h // 3, 2 * w // 5), (h * 2, w * 3), (h // 3 + 1, w // 7 + 2),
                 (101, 99), (h + 1, w - 1)]
        out = run_op([image] * len(sizes), size=[list(s) for s in sizes], filter="nearest")
        for size, got in zip(sizes, out):
            assert np.array_equal(got, pil(image, size, "nearest")), (image.shape, size)
        for (rh, rw) in sizes[:4]:
            top, left, ch, cw = rh // 3, rw // 5, max(rh // 2, 1), max(rw // 3, 1)
            (got,) = run_op([image], size=[[ch, cw]], resized_size=[[rh, rw]], window_start=[[top, left]],
                            filter="nearest")
            assert np.array_equal(got, pil(image, (rh, rw), "nearest")[top:top + ch, left:left + cw]), (rh, rw)


# (width, height) of images whose NEAREST resize to NEAREST_OUT meets exact ties that PIL breaks
# up and ties its running sum rounds down, in both directions
NEAREST_IN = [(14, 8), (72, 56), (8, 45), (2, 60), (107, 15), (46, 22), (44, 29)]
NEAREST_OUT = (30, 23)   # (height, width)


def test_pils_nearest_rounding_is_described_exactly():
    """pil_nearest_rounds_down(in, out): where PIL's NEAREST reads the pixel below an exact
    tie, against PIL itself on every size pair up to 160 x 160."""
    from dali_loaders.transforms.geometry import pil_nearest_rounds_down

    for size_in in range(1, 161):
        row = np.arange(size_in, dtype=np.uint8)[None]
        for size_out in range(1, 161):
            read = np.asarray(Image.fromarray(row).resize((size_out, 1), Image.NEAREST))[0]
            ties_up = (2 * np.arange(size_out) + 1) * size_in // (2 * size_out)   # floor((x + 0.5) in / out)
            assert list(np.nonzero(read != ties_up)[0]) == pil_nearest_rounds_down(size_in, size_out)
            assert all(read[x] == ties_up[x] - 1 for x in pil_nearest_rounds_down(size_in, size_out))


def test_nearest_without_the_plugin_reads_pils_pixels(tmp_path, monkeypatch):
    """A GPU graph's NEAREST on a PIL twin (DALI's fn.resize, here on the CPU with the plugins
    turned off): PIL's pixel everywhere, exact ties broken up; it differs only on the rows and
    columns where PIL's running sum rounds a tie down (one pixel below). Pixels name their own
    (column, row), so a pixel read from elsewhere shows."""
    from dali_loaders.transforms.geometry import pil_nearest_rounds_down

    monkeypatch.setenv(plugin.DISABLE_ENV, "1")
    folder = tmp_path / "images" / "one"
    folder.mkdir(parents=True)
    for k, (width, height) in enumerate(NEAREST_IN):
        columns, rows = np.meshgrid(np.arange(width), np.arange(height))
        Image.fromarray(np.stack([columns, rows, np.full_like(rows, k)], -1).astype(np.uint8)).save(
            folder / f"{k}.png")
    transform = v2.Compose([v2.Resize(NEAREST_OUT, interpolation=v2.InterpolationMode.NEAREST), v2.PILToTensor()])
    served = val_images(str(tmp_path / "images"), transform)
    (out_h, out_w), ties_up, rounded = NEAREST_OUT, 0, 0
    for k, (width, height) in enumerate(NEAREST_IN):
        got = served[k].permute(1, 2, 0).numpy().astype(int)
        expected = np.asarray(Image.open(folder / f"{k}.png").resize((out_w, out_h), Image.NEAREST)).astype(int)
        down_rows, down_columns = pil_nearest_rounds_down(height, out_h), pil_nearest_rounds_down(width, out_w)
        expected[down_rows, :, 1] += 1   # there the tie is broken up: the next row, the next column
        expected[:, down_columns, 0] += 1
        assert np.array_equal(got, expected), (width, height)
        rounded += len(down_rows) + len(down_columns)
        ties_up += sum((2 * x + 1) * size_in % (2 * size_out) == 0
                       for size_in, size_out in ((height, out_h), (width, out_w)) for x in range(size_out))
    assert rounded > 0 and ties_up > rounded   # both kinds of tie were met


# -- in the loaders --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def photo_dir(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("photos"))
    write_photo_folder(root, max_side=400)
    return root


RECIPES = {
    "resize + center crop": v2.Compose([v2.Resize(232), v2.CenterCrop(224), v2.PILToTensor()]),
    "resize to (h, w)": v2.Compose([v2.Resize((150, 190)), v2.PILToTensor()]),
    "bicubic": v2.Compose([v2.Resize(200, interpolation=v2.InterpolationMode.BICUBIC), v2.CenterCrop(180),
                           v2.PILToTensor()]),
    "nearest + center crop": v2.Compose([v2.Resize(150, interpolation=v2.InterpolationMode.NEAREST),
                                         v2.CenterCrop(128), v2.PILToTensor()]),
    "nearest to (h, w)": v2.Compose([v2.Resize((97, 133), interpolation=v2.InterpolationMode.NEAREST),
                                     v2.PILToTensor()]),
}


def val_images(root, transform, make=get_imagefolder_iter_dali):
    return torch.cat([images for images, _ in make(root, 4, False, 0 if make is get_imagefolder_iter_torch else 1,
                                                    transform=transform)])


@pytest.mark.parametrize("recipe", list(RECIPES))
def test_loader_with_the_plugin_equals_the_twin_and_without_it_stays_close(built, photo_dir, recipe, monkeypatch):
    """With the plugin the uint8 output equals the twin's (PIL) exactly: DALI decodes these
    JPEGs as PIL does. Without it (DALI_LOADERS_NO_PLUGIN=1) DALI's fn.resize runs, which is
    only close to PIL: up to several grey levels on a few pixels, within the parity tests' mean
    (for NEAREST, whose stock ties fall on the other pixel, only that it differs)."""
    transform = RECIPES[recipe]
    twin = val_images(photo_dir, transform, get_imagefolder_iter_torch)
    with_plugin = val_images(photo_dir, transform)
    assert torch.equal(with_plugin, twin)
    monkeypatch.setenv(plugin.DISABLE_ENV, "1")
    stock = val_images(photo_dir, transform)
    difference = (stock.float() - with_plugin.float()).abs()
    assert difference.max() > 0   # the stock operator really ran
    assert "nearest" in recipe or difference.mean() <= 0.3


@pytest.mark.parametrize("transform", [
    v2.Compose([v2.Resize(232), v2.CenterCrop(224), v2.PILToTensor()]),
    v2.Compose([v2.Resize(101), v2.CenterCrop((64, 99)), v2.PILToTensor()]),   # odd margins: halves to even
    v2.Compose([v2.Resize(90, interpolation=v2.InterpolationMode.BICUBIC), v2.CenterCrop(90), v2.PILToTensor()]),
    v2.Compose([v2.CenterCrop((61, 250)), v2.PILToTensor()]),                 # cut one way, padded the other
    v2.Compose([v2.Resize(101), v2.CenterCrop(300), v2.PILToTensor()]),       # not fused: both steps alone
], ids=["232-224", "101-64x99", "bicubic-90-90", "centre-crop", "resize-then-pad"])
def test_the_window_on_size_vectors_equals_the_scalar_arithmetic(photo_dir, transform, monkeypatch):
    """Resize and CenterCrop without the plugin (the GPU graphs' way): windows worked out on
    (height, width) vectors, a dozen operators, give the very pixels of the per-number
    arithmetic they replace (~80 operators for the pair), over photos of many sizes."""
    from dali_loaders.transforms import Images

    monkeypatch.setenv(plugin.DISABLE_ENV, "1")
    vectors = val_images(photo_dir, transform)
    monkeypatch.setattr(Images, "size_vector", lambda self: None)
    assert torch.equal(vectors, val_images(photo_dir, transform))


def test_random_resized_crop_uses_the_plugin(built, photo_dir, monkeypatch):
    """Train: the ROI decode, then the plugin; same crops with and without it (same seed), and
    pixels within the parity bound of the stock resize."""
    transform = v2.Compose([v2.RandomResizedCrop(96), v2.PILToTensor()])

    def train():
        loader = get_imagefolder_iter_dali(photo_dir, 4, True, 1, transform=transform, seed=3)
        return torch.cat([images for images, _ in loader])

    with_plugin = train()
    monkeypatch.setenv(plugin.DISABLE_ENV, "1")
    stock = train()
    assert with_plugin.shape == stock.shape
    assert (stock.float() - with_plugin.float()).abs().mean() <= 0.3


def serialized_graph(photo_dir, transform, device):
    from nvidia.dali import pipeline_def

    from dali_loaders import transforms
    from dali_loaders.loader import build as loaders
    from dali_loaders.sources.image_files import ImageFiles

    source = ImageFiles(photo_dir)
    recipe = transforms.plan(transform, False)
    pipe = pipeline_def(loaders.graph)(source, np.arange(4), 4, recipe, "CHW", device,
                                       batch_size=4, num_threads=1, device_id=None, seed=1)
    return pipe.serialize()


def test_the_gpu_graph_keeps_the_stock_resize(built, photo_dir):
    from dali_loaders import recipes
    from dali_loaders.loader.build import serialized_gpu_graph
    from dali_loaders.sources.image_files import ImageFiles

    for train in (True, False):
        gpu = serialized_gpu_graph(ImageFiles(photo_dir), recipes.imagenet(train))
        assert b"DaliLoadersResize" not in gpu and b"Resize" in gpu
        assert b"DaliLoadersResize" in serialized_graph(photo_dir, recipes.imagenet(train), "cpu")


def test_tensor_nearest_and_unantialiased_tensors_keep_the_stock_resize(built):
    from nvidia.dali import types

    assert resample.uses_plugin(types.INTERP_LINEAR, True, "cpu")
    assert resample.uses_plugin(types.INTERP_CUBIC, True, "cpu")
    assert resample.uses_plugin(types.INTERP_NN, True, "cpu", pil_image=True)
    assert not resample.uses_plugin(types.INTERP_NN, True, "cpu")   # a tensor twin: torch's grid
    assert not resample.uses_plugin(types.INTERP_NN, True, "gpu", pil_image=True)
    assert not resample.uses_plugin(types.INTERP_LINEAR, False, "cpu")
    assert not resample.uses_plugin(types.INTERP_LINEAR, True, "gpu")


# -- when it cannot be built -----------------------------------------------------------------


def test_without_a_compiler_the_loaders_warn_once_and_use_fn_resize(no_compiler, photo_dir):
    transform = RECIPES["resize to (h, w)"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = val_images(photo_dir, transform)
        second = val_images(photo_dir, transform)
    ours = [w for w in caught if "resize plugin is not available" in str(w.message)]
    assert len(ours) == 1 and "no-such-compiler" in str(ours[0].message)
    assert torch.equal(first, second)
    twin = val_images(photo_dir, transform, get_imagefolder_iter_torch)
    assert (first.float() - twin.float()).abs().mean() <= 0.3
    assert b"DaliLoadersResize" not in serialized_graph(photo_dir, transform, "cpu")


def test_a_failed_compilation_is_remembered(tmp_path, monkeypatch):
    """A compiler that fails: one attempt, a log, and the next process does not try again."""
    compiler = tmp_path / "failing-c++"
    compiler.write_text("#!/bin/sh\necho 'this compiler always fails' >&2\nexit 1\n")
    compiler.chmod(0o755)
    monkeypatch.setenv("CXX", str(compiler))
    monkeypatch.setenv(plugin.CACHE_ENV, str(tmp_path / "cache"))
    for attempt in range(2):
        with pytest.raises(plugin.Unavailable, match="failed before" if attempt else "compiling it failed"):
            plugin.build()
    (log,) = (tmp_path / "cache").glob("plugins/*/failed.log")
    assert "this compiler always fails" in log.read_text()


def test_the_env_var_turns_it_off(monkeypatch):
    monkeypatch.setenv(plugin.DISABLE_ENV, "1")
    assert not plugin.available()
    monkeypatch.setenv(plugin.DISABLE_ENV, "0")
    assert plugin.disabled() is False


def test_without_the_plugin_the_exactness_tests_skip_but_fail_in_ci(monkeypatch):
    monkeypatch.setattr(plugin, "available", lambda: False)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception):
        require_plugin()
    for value in ("true", "1"):
        monkeypatch.setenv("CI", value)
        with pytest.raises(pytest.fail.Exception, match="must build"):
            require_plugin()
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception):
        require_plugin()
