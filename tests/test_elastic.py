"""ElasticTransform (v1 and v2) translated into DALI: the sample at torchvision's own field
against torchvision's ElasticTransform drawing that field (photographs; nearest and bilinear;
v1's and v2's fill blends), the displacements drawn per sample against the twin's by their
distribution, and the refusals."""
import numpy as np
import pytest
import torch
from photos import photo_paths
from PIL import Image
from test_transforms import C, both, close, coordinate_image, differences, pil_then, tensor_then
from torchvision import transforms as v1
from torchvision.transforms import InterpolationMode as IM
from torchvision.transforms import v2

from dali_loaders import transforms
from dali_loaders.ops import elastic

pytest.importorskip("nvidia.dali")
if not elastic.usable():
    pytest.skip("ElasticTransform is translated where the augmentation plugin is built", allow_module_level=True)


def torch_fields(seed, height, width):
    """The two fields of uniforms in [-1, 1) torchvision's get_params draws after manual_seed(seed)."""
    torch.manual_seed(seed)
    dx = torch.rand(1, 1, height, width) * 2 - 1
    dy = torch.rand(1, 1, height, width) * 2 - 1
    return np.concatenate([dx[0].numpy(), dy[0].numpy()])


def sampled_by_dali(images, fields, step, v1_blend):
    """Our operators on `fields`: the maps, then the CPU's sample, as the translator calls them."""
    from nvidia.dali import fn, pipeline_def

    from dali_loaders.transforms._args import fill_values

    nearest = step.interpolation == IM.NEAREST

    @pipeline_def(batch_size=len(images), num_threads=2, device_id=None)
    def graph():
        field = fn.external_source(source=lambda: fields, batch=True)
        data = fn.external_source(source=lambda: images, batch=True, layout="HWC")
        xs, ys = elastic.source_maps(field, step.alpha, step.sigma)
        return elastic.grid_sample(data, xs, ys, nearest, v1_blend, fill_values(step, 3))
    pipe = graph()
    pipe.build()
    out, = pipe.run()
    return [np.array(out.at(i)) for i in range(len(images))]


CASES = [("v2 bilinear", v2.ElasticTransform(alpha=50.0, sigma=5.0)),
         ("v1 bilinear", v1.ElasticTransform(alpha=50.0, sigma=5.0)),
         ("v2 nearest, strong", v2.ElasticTransform(alpha=150.0, sigma=3.0, interpolation=IM.NEAREST)),
         ("v1 bilinear, fill per channel", v1.ElasticTransform(alpha=120.0, sigma=2.0, fill=[10.0, 20.0, 200.0])),
         ("v2 bilinear, fill 127.5", v2.ElasticTransform(alpha=120.0, sigma=2.0, fill=127.5)),
         ("v1 nearest, fill 77", v1.ElasticTransform(alpha=120.0, sigma=2.0, interpolation=IM.NEAREST, fill=77.0)),
         ("v2 alpha and sigma per axis", v2.ElasticTransform(alpha=[90.0, 20.0], sigma=[2.0, 4.0])),
         ("v2 no blur", v2.ElasticTransform(alpha=3.0, sigma=0.0))]


@pytest.mark.parametrize("name,step", CASES, ids=[name for name, _ in CASES])
def test_the_sample_at_torchvisions_field_is_torchvisions(name, step):
    images = [np.asarray(Image.open(path).convert("RGB").resize((90, 70))) for path in photo_paths()[:4]]
    seeds = list(range(11, 11 + len(images)))
    fields = [torch_fields(seed, 70, 90) for seed in seeds]
    ours = sampled_by_dali(images, fields, step, v1_blend=name.startswith("v1"))
    for image, seed, mine in zip(images, seeds, ours):
        torch.manual_seed(seed)
        theirs = step(torch.from_numpy(image.copy()).permute(2, 0, 1)).permute(1, 2, 0).numpy()
        gap = np.abs(mine.astype(int) - theirs.astype(int))
        # the blur's sums in another order (separable taps, where torch convolves 2-D): a hair's
        # difference in a coordinate, a level at a rounding tie
        assert gap.max() <= 1 and (gap > 0).mean() <= 0.002, (name, (gap > 0).mean())
        assert (mine != image).mean() > 0.3   # it did move the pixels


@pytest.mark.parametrize("transform", [pil_then(v2.ElasticTransform(alpha=0.0)),
                                       tensor_then(v1.ElasticTransform(alpha=0.0, interpolation=IM.NEAREST))],
                         ids=["v2 PIL bilinear", "v1 tensor nearest"])
def test_no_displacement_keeps_photographs_of_every_size(photo_files, transform):
    """Decoded files of their own sizes (the field's shape comes from each image's)."""
    assert differences(photo_files, transform) == (0.0, 0.0)


def displacements(outputs, width, height):
    """Per output of a coordinate image sampled NEAREST: the mean |dx| and |dy| of the pixels
    that show the image, the mean |change of dx| between horizontal neighbours (the field's
    smoothness), and the share that shows the fill (B == 0)."""
    x, y = np.meshgrid(np.arange(width), np.arange(height))
    rows = []
    for o in outputs:
        inside = o[..., 2] > 0
        dx, dy = o[..., 0].astype(int) - x, o[..., 1].astype(int) - y
        both_inside = inside[:, 1:] & inside[:, :-1]
        rows.append((np.abs(dx[inside]).mean(), np.abs(dy[inside]).mean(),
                     np.abs(np.diff(dx, axis=1)[both_inside]).mean(), 1.0 - inside.mean()))
    return np.array(rows)


@pytest.mark.parametrize("make", [v2.ElasticTransform, v1.ElasticTransform], ids=["v2", "v1"])
@pytest.mark.parametrize("alpha,sigma", [([160.0, 40.0], [3.0, 3.0]), ([100.0, 100.0], [1.5, 6.0])],
                         ids=["alpha per axis", "sigma per axis"])
def test_the_displacements_are_torchvisions(make, alpha, sigma):
    """By distribution over many samples: an alpha or a sigma ignored, or the axes swapped,
    moves these means far outside the tolerances (about 4 standard errors)."""
    width, height = 48, 40
    transform = C(make(alpha=alpha, sigma=sigma, interpolation=IM.NEAREST), v2.PILToTensor())
    ours, theirs = (displacements(outputs, width, height) for outputs in both(coordinate_image(width, height),
                                                                                 transform))
    for column, what in enumerate(["mean |dx|", "mean |dy|", "roughness", "fill share"]):
        tolerance = 0.06 * max(float(np.mean(theirs[:, column])), 0.02)
        close(ours[:, column], theirs[:, column], tolerance, what)


@pytest.mark.parametrize("step,argument", [
    (v2.ElasticTransform(interpolation=IM.BICUBIC), "interpolation"),
    (v2.ElasticTransform(sigma=[0.0, 3.0]), "sigma"),
    (v1.ElasticTransform(fill=300.0), "fill"),
])
def test_unsupported_parameters_are_refused_by_name(step, argument):
    with pytest.raises(ValueError) as error:
        transforms.plan(step, python_fallback=False)
    assert "ElasticTransform" in str(error.value) and argument in str(error.value)


def test_a_fill_for_other_channels_is_refused_by_name():
    with pytest.raises(ValueError, match="ElasticTransform.*fill"):
        both(coordinate_image(16, 12), C(v1.ElasticTransform(fill=[1.0, 2.0]), v2.PILToTensor()), n=2)


def test_without_the_plugin_the_step_takes_the_python_path_saying_why(monkeypatch):
    monkeypatch.setenv("DALI_LOADERS_NO_AUGMENT_PLUGIN", "1")
    with pytest.raises(ValueError, match="ElasticTransform.*plugin"):
        transforms.plan(v2.ElasticTransform(), python_fallback=False)
    recipe = transforms.plan(C(v2.RandomCrop(8), v2.ElasticTransform()), python_fallback=True)
    assert [type(step).__name__ for step in recipe.python] == ["ElasticTransform"]


def test_the_field_drawn_from_a_seed_is_torchvisions_uniform():
    """The operator's own draw (what the translator uses): with no blur and alpha 2, each map
    less the identity is the field itself; uniform in [-1, 1) as torch.rand(...) * 2 - 1,
    the same for the same seed, another for another, x and y apart."""
    from nvidia.dali import fn, pipeline_def, types

    seeds = [5, 5, 6]

    @pipeline_def(batch_size=len(seeds), num_threads=2, device_id=None)
    def graph():
        drawn = fn.external_source(source=lambda: [np.array([s, 60, 80], dtype=np.int32) for s in seeds], batch=True)
        return tuple(elastic.source_maps(fn.cast(drawn, dtype=types.INT32), [2.0, 2.0], [0.0, 0.0]))
    pipe = graph()
    pipe.build()
    xs, ys = pipe.run()
    columns, rows = np.meshgrid(np.arange(80), np.arange(60))
    fields = [(np.array(xs.at(i)) - columns, np.array(ys.at(i)) - rows) for i in range(len(seeds))]
    values = np.concatenate([fields[0][0].ravel(), fields[0][1].ravel(), fields[2][0].ravel()])
    assert values.min() >= -1.0 - 1e-5 and values.max() < 1.0 + 1e-5
    assert abs(values.mean()) < 0.02 and abs(values.var() - 1 / 3) < 0.01
    counts, _ = np.histogram(values, bins=10, range=(-1, 1))
    assert counts.min() > 0.9 * len(values) / 10   # flat
    assert np.array_equal(fields[0][0], fields[1][0]) and not np.allclose(fields[0][0], fields[2][0])
    assert abs(np.corrcoef(fields[0][0].ravel(), fields[0][1].ravel())[0, 1]) < 0.05
