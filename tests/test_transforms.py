"""The torchvision -> DALI translator (transforms.py) against the twin, which applies the very
same transform object with torchvision.

Deterministic steps: pixel differences on real photographs (tests/photos.py), on the 0..1
scale, within the bounds stated in docs/transforms.md's "Your own recipe: transform=" table.
Random steps: statistics over many samples of images whose pixels say what was done to them
(coordinates, flat colours, an impulse), DALI's against torchvision's; each test fails if the
parameter it covers is ignored or replaced by its default.
"""
import math

import numpy as np
import pytest
import torch
from photos import photo_arrays, photo_paths
from PIL import Image
from torchvision import transforms as v1
from torchvision.transforms import InterpolationMode as IM
from torchvision.transforms import v2

from dali_loaders import transforms
from dali_loaders.loader import build as loaders
from dali_loaders.loader import dali_loader
from dali_loaders.sources.torch_dataset import SourceDataset
from dali_loaders.sources.arrays import ArraySource

pytest.importorskip("nvidia.dali")
if len(photo_paths()) < 3:
    pytest.skip("the photographs shipped in matplotlib / scikit-image are missing", allow_module_level=True)

SAMPLES = 400   # per backend, for the statistics
FLOAT = v2.ToDtype(torch.float32, scale=True)


# -- running a transform on both backends -------------------------------------------------


def dali_outputs(source, transform, seed=7, batch=None):
    """The DALI graph of `transform` over every sample of `source`, as numpy arrays (CHW)."""
    from nvidia.dali import pipeline_def

    recipe = transforms.plan(transform, python_fallback=False)
    batch = batch or len(source)
    pipe = pipeline_def(loaders.graph, enable_conditionals=transforms.needs_conditionals(recipe))(
        source, np.arange(len(source)), batch, recipe, "CHW", "cpu", batch_size=batch, num_threads=2,
        device_id=None, seed=seed)
    pipe.build()
    outputs = []
    while len(outputs) < len(source):
        images, _ = pipe.run()
        outputs += [np.array(images.at(i)) for i in range(len(images))]
    return outputs


def twin_outputs(source, transform, seed=7):
    torch.manual_seed(seed)
    dataset = SourceDataset(source, transform)
    return [dataset[i][0].float().numpy() for i in range(len(source))]


def differences(source, transform, scale=255.0):
    """(mean |DALI - twin|, worst |DALI - twin|) over all photographs, in 1/255 units of
    the 0..1 scale (`scale` is what 1.0 is in the outputs)."""
    means, worst = [], 0.0
    for ours, theirs in zip(dali_outputs(source, transform), twin_outputs(source, transform)):
        assert ours.shape == theirs.shape, transform
        # rounded: a float32 step of 1/255 reads 1.00002/255 unrounded
        gap = np.round(np.abs(ours.astype(np.float64) - theirs.astype(np.float64)) * (255.0 / scale), 3)
        means.append(gap.mean())
        worst = max(worst, gap.max())
    return float(np.mean(means)), worst


def C(*steps):
    return v2.Compose(list(steps))


def pil_then(*steps):
    """Steps on the PIL image, then the conversion to float (the twin holds a PIL image)."""
    return C(*steps, v2.ToImage(), FLOAT)


def tensor_then(*steps):
    """Steps on a uint8 tensor (the twin holds a tensor: torchvision's tensor kernels)."""
    return C(v2.ToImage(), *steps, FLOAT)


# -- deterministic steps on photographs ------------------------------------------------------

EXACT = (0.3, 1.0)   # the bound for bilinear and nearest: mean <= 0.3/255, worst <= 1/255

# (name, transform, (mean bound, worst bound) in 1/255). Bounds other than EXACT are the
# measured figures of docs/transforms.md's table, rounded up a little: a regression fails them.
DETERMINISTIC = [
    ("Resize int bilinear", pil_then(v2.Resize(100)), (0.3, 5.0)),       # worst at the image border
    ("Resize (h, w) bilinear", pil_then(v2.Resize((90, 120))), (0.3, 5.0)),
    ("Resize max_size bilinear", pil_then(v2.Resize(100, max_size=120)), (0.3, 5.0)),
    ("Resize max_size alone", pil_then(v2.Resize(None, max_size=110)), (0.3, 5.0)),
    ("Resize max_size alone tensor, then CenterCrop", tensor_then(v2.Resize(None, max_size=150), v2.CenterCrop(90)),
     (0.3, 5.0)),
    ("Resize upscale bilinear", pil_then(v2.Resize(300)), EXACT),
    ("Resize bilinear tensor antialias", tensor_then(v2.Resize(100, antialias=True)), (0.3, 5.0)),
    ("Resize bilinear tensor no antialias", tensor_then(v2.Resize(100, antialias=False)), EXACT),
    ("Resize nearest", pil_then(v2.Resize(100, interpolation=IM.NEAREST)), (0.0, 0.0)),   # the plugin: PIL's ties
    ("Resize nearest tensor", tensor_then(v2.Resize(100, interpolation=IM.NEAREST)), (0.1, 100.0)),
    ("Resize nearest tensor (h, w)", tensor_then(v2.Resize((90, 131), interpolation=IM.NEAREST)), EXACT),
    ("Resize bicubic", pil_then(v2.Resize(100, interpolation=IM.BICUBIC)), (0.2, 6.0)),
    ("Resize bicubic upscale", pil_then(v2.Resize(300, interpolation=IM.BICUBIC)), (0.2, 7.0)),
    ("Resize bicubic tensor no antialias",
     tensor_then(v2.Resize(100, interpolation=IM.BICUBIC, antialias=False)), (0.7, 14.0)),
    ("Resize + CenterCrop bilinear", pil_then(v2.Resize(120), v2.CenterCrop(100)), EXACT),
    ("Resize + CenterCrop bicubic", pil_then(v2.Resize(120, interpolation=IM.BICUBIC), v2.CenterCrop(100)),
     (0.2, 6.0)),
    ("Resize + CenterCrop nearest", pil_then(v2.Resize(120, interpolation=IM.NEAREST), v2.CenterCrop(100)),
     (0.0, 0.0)),
    ("Resize + CenterCrop nearest tensor",
     tensor_then(v2.Resize(120, interpolation=IM.NEAREST), v2.CenterCrop(100)), EXACT),
    ("CenterCrop", pil_then(v2.CenterCrop(100)), (0.0, 0.0)),
    ("CenterCrop (h, w)", pil_then(v2.CenterCrop((91, 131))), (0.0, 0.0)),
    ("CenterCrop larger than the image", pil_then(v2.Resize((90, 120)), v2.CenterCrop((101, 131))), (0.3, 5.0)),
    ("Pad int fill", pil_then(v2.Pad(5, fill=7)), (0.0, 0.0)),
    ("Pad 2-tuple", pil_then(v2.Pad((3, 6))), (0.0, 0.0)),
    ("Pad 4-tuple fill per channel", pil_then(v2.Pad((1, 2, 3, 4), fill=(10, 20, 30))), (0.0, 0.0)),
    ("v1 Pad + ToTensor", v1.Compose([v1.Pad((1, 2, 3, 4), fill=9), v1.ToTensor()]), (0.0, 0.0)),
    ("Grayscale 1", pil_then(v2.Grayscale(1)), (0.0, 0.0)),
    ("Grayscale 3", pil_then(v2.Grayscale(3)), (0.0, 0.0)),
    ("Grayscale 3 tensor", tensor_then(v2.Grayscale(3)), EXACT),
    ("Grayscale on 1 channel", pil_then(v2.Grayscale(1), v2.Grayscale(3)), (0.0, 0.0)),
    ("RGB on 1 channel", pil_then(v2.Grayscale(1), v2.RGB()), (0.0, 0.0)),
    ("RGB on 1 channel tensor", C(v2.Grayscale(1), v2.ToImage(), v2.RGB(), FLOAT), (0.0, 0.0)),
    ("RGB on 3 channels after the conversion", C(v2.ToImage(), FLOAT, v2.RGB()), (0.0, 0.0)),
    ("RGB on 1 channel after the conversion and Normalize",
     C(v2.Grayscale(1), v2.ToImage(), FLOAT, v2.Normalize([0.4], [0.2]), v2.RGB()), (0.001, 0.001)),
    ("Identity", C(v2.ToImage(), v2.Identity(), FLOAT, v2.Identity()), (0.0, 0.0)),
    ("Normalize", C(v2.ToImage(), FLOAT, v2.Normalize((0.4, 0.5, 0.6), (0.2, 0.25, 0.3))), (0.0, 0.001)),
    ("v1 ToTensor + Normalize", v1.Compose([v1.ToTensor(), v1.Normalize((0.4, 0.5, 0.6), (0.2, 0.25, 0.3))]),
     (0.0, 0.001)),
    ("Normalize twice (after materialization)",
     C(v2.ToImage(), FLOAT, v2.Normalize((0.5,) * 3, (0.5,) * 3), v2.ToDtype(torch.float16),
       v2.Normalize((0.1,) * 3, (2.0,) * 3)), (0.01, 0.2)),
    ("ToDtype float16", C(v2.ToImage(), v2.ToDtype(torch.float16, scale=True)), (0.0, 0.0)),
    ("ToDtype float32 no scale", C(v2.ToImage(), v2.ToDtype(torch.float32, scale=False)), (0.0, 0.0)),
    ("ToDtype uint8", C(v2.ToImage(), v2.ToDtype(torch.uint8, scale=True)), (0.0, 0.0)),
    ("PILToTensor", v1.Compose([v1.PILToTensor()]), (0.0, 0.0)),
    ("ConvertImageDtype", v1.Compose([v1.PILToTensor(), v1.ConvertImageDtype(torch.float32)]), (0.0, 0.0)),
    # back to PIL: the steps after take PIL's arithmetic (its hue in uint8 HSV, where tensors keep floats)
    ("ToPILImage between tensor steps", C(v2.PILToTensor(), v2.CenterCrop(120), v2.ToPILImage(), v2.Resize(60),
                                          v2.ColorJitter(hue=(0.2, 0.2)), v2.PILToTensor()), (0.0, 0.0)),
    ("ToTensor", v1.ToTensor(), (0.0, 0.0)),
    ("GaussianBlur 5 sigma 1.5", pil_then(v2.GaussianBlur(5, sigma=(1.5, 1.5))), EXACT),
    ("GaussianBlur (3, 7) sigma 2", pil_then(v2.GaussianBlur((3, 7), sigma=(2.0, 2.0))), EXACT),
    ("GaussianBlur (7, 3) tensor", tensor_then(v2.GaussianBlur((7, 3), sigma=(0.8, 0.8))), EXACT),
    ("GaussianBlur 5 on a grey image", pil_then(v2.Grayscale(1), v2.GaussianBlur(5, sigma=(1.5, 1.5))), EXACT),
    ("GaussianBlur 61 x 9 on a 70 x 40 image", pil_then(v2.Resize((40, 70)), v2.GaussianBlur((61, 9), sigma=(5.0, 5.0))),
     EXACT),
    ("RandomRotation fixed nearest", pil_then(v2.RandomRotation((30, 30))), EXACT),
    ("RandomRotation fixed nearest, center and fill", pil_then(v2.RandomRotation((30, 30), center=(20, 30), fill=100)),
     EXACT),
    # bilinear: each twin's border (PIL clamps, torchvision's mask weighs twice) and rounding
    # (PIL truncates, torch rounds); 1 level where float32 coordinates cross the twin's
    ("RandomRotation fixed bilinear", pil_then(v2.RandomRotation((30, 30), interpolation=IM.BILINEAR)), (0.01, 1.0)),
    ("RandomRotation fixed bilinear, center and fill",
     pil_then(v2.RandomRotation((-40, -40), interpolation=IM.BILINEAR, center=(20, 30), fill=100)), (0.01, 1.0)),
    ("RandomRotation fixed bilinear tensor",
     tensor_then(v2.RandomRotation((-20, -20), interpolation=IM.BILINEAR)), (0.01, 1.0)),
    ("RandomRotation fixed bilinear tensor fill",
     tensor_then(v2.RandomRotation((25, 25), interpolation=IM.BILINEAR, fill=200)), (0.01, 1.0)),
    ("v1 RandomRotation fixed bilinear tensor fill",
     v1.Compose([v1.PILToTensor(), v1.RandomRotation((25, 25), interpolation=IM.BILINEAR, fill=200)]), (0.01, 1.0)),
    # expand=True: each twin's canvas (PIL's box, torchvision's truncated to 1e-4), then the warp
    ("RandomRotation expand fixed nearest", pil_then(v2.RandomRotation((30, 30), expand=True)), (0.01, 160.0)),
    ("RandomRotation expand fixed bilinear, fill",
     pil_then(v2.RandomRotation((-40, -40), interpolation=IM.BILINEAR, expand=True, fill=100)), (0.01, 1.0)),
    ("RandomRotation expand fixed bilinear tensor fill",
     tensor_then(v2.RandomRotation((115, 115), interpolation=IM.BILINEAR, expand=True, fill=200)), (0.01, 1.0)),
    ("v1 RandomRotation expand fixed nearest tensor",
     v1.Compose([v1.PILToTensor(), v1.RandomRotation((-65, -65), expand=True), v1.ConvertImageDtype(torch.float32)]),
     (0.01, 160.0)),
    ("RandomRotation expand, then CenterCrop of the canvas",
     pil_then(v2.RandomRotation((20, 20), interpolation=IM.BILINEAR, expand=True), v2.CenterCrop(150)), (0.01, 1.0)),
    ("RandomAffine fixed angle", pil_then(v2.RandomAffine((15, 15))), (0.01, 160.0)),
    ("RandomAffine fixed scale bilinear",
     pil_then(v2.RandomAffine((0, 0), scale=(1.3, 1.3), interpolation=IM.BILINEAR)), (0.01, 1.0)),
    ("RandomAffine fixed bilinear tensor",
     tensor_then(v2.RandomAffine((10, 10), scale=(0.7, 0.7), shear=(5, 5, -3, -3), interpolation=IM.BILINEAR)),
     (0.01, 1.0)),
    ("RandomAffine fixed shear x", pil_then(v2.RandomAffine((0, 0), shear=(10, 10))), EXACT),
    ("RandomAffine fixed shear x, y", pil_then(v2.RandomAffine((0, 0), shear=(10, 10, -5, -5))), (0.01, 170.0)),
    ("RandomAffine fixed, tensor", tensor_then(v2.RandomAffine((20, 20), scale=(0.8, 0.8), shear=(5, 5, 7, 7))),
     (0.01, 30.0)),
    ("ColorJitter brightness fixed", pil_then(v2.ColorJitter(brightness=(1.4, 1.4))), (0.0, 0.0)),
    ("ColorJitter contrast fixed down", pil_then(v2.ColorJitter(contrast=(0.6, 0.6))), (0.0, 0.0)),
    ("ColorJitter contrast fixed up", pil_then(v2.ColorJitter(contrast=(1.5, 1.5))), (0.0, 0.0)),
    ("ColorJitter saturation fixed down", pil_then(v2.ColorJitter(saturation=(0.5, 0.5))), (0.0, 0.0)),
    ("ColorJitter saturation fixed up", pil_then(v2.ColorJitter(saturation=(1.7, 1.7))), (0.0, 0.0)),
    ("ColorJitter hue fixed", pil_then(v2.ColorJitter(hue=(0.1, 0.1))), (0.0, 0.0)),
    ("ColorJitter hue fixed negative", pil_then(v2.ColorJitter(hue=(-0.3, -0.3))), (0.0, 0.0)),
    ("ColorJitter brightness fixed tensor", tensor_then(v2.ColorJitter(brightness=(1.4, 1.4))), (0.0, 0.0)),
    ("ColorJitter contrast fixed tensor", tensor_then(v2.ColorJitter(contrast=(0.6, 0.6))), (0.0, 0.0)),
    ("ColorJitter saturation fixed tensor", tensor_then(v2.ColorJitter(saturation=(1.7, 1.7))), EXACT),
    ("ColorJitter hue fixed tensor", tensor_then(v2.ColorJitter(hue=(0.1, 0.1))), (0.0, 0.0)),
    ("v1 ColorJitter hue fixed tensor",
     v1.Compose([v1.PILToTensor(), v1.ColorJitter(hue=(-0.45, -0.45)), v1.ConvertImageDtype(torch.float32)]),
     (0.0, 0.0)),
    ("v1 ColorJitter brightness + ToTensor",
     v1.Compose([v1.ColorJitter(brightness=(0.7, 0.7)), v1.ToTensor()]), (0.0, 0.0)),
    ("RandomSolarize", pil_then(v2.RandomSolarize(128, p=1.0)), (0.0, 0.0)),
    ("RandomSolarize fractional threshold", pil_then(v2.RandomSolarize(100.5, p=1.0)), (0.0, 0.0)),
    ("RandomSolarize tensor", tensor_then(v2.RandomSolarize(100.5, p=1.0)), (0.0, 0.0)),
    ("RandomPosterize", pil_then(v2.RandomPosterize(3, p=1.0)), (0.0, 0.0)),
    ("RandomPosterize tensor", tensor_then(v2.RandomPosterize(2, p=1.0)), (0.0, 0.0)),
    ("RandomAdjustSharpness", pil_then(v2.RandomAdjustSharpness(2.0, p=1.0)), (0.0, 0.0)),
    ("RandomAdjustSharpness 0.3 tensor", tensor_then(v2.RandomAdjustSharpness(0.3, p=1.0)), (0.0, 0.0)),
    ("v1 RandomAdjustSharpness tensor",
     v1.Compose([v1.PILToTensor(), v1.RandomAdjustSharpness(1.7, p=1.0), v1.ConvertImageDtype(torch.float32)]),
     (0.0, 0.0)),
    ("RandomAutocontrast", pil_then(v2.RandomAutocontrast(p=1.0)), (0.0, 0.0)),
    ("RandomAutocontrast tensor", tensor_then(v2.RandomAutocontrast(p=1.0)), (0.0, 0.0)),
    ("RandomEqualize", pil_then(v2.RandomEqualize(p=1.0)), (0.0, 0.0)),
    ("RandomEqualize tensor", tensor_then(v2.RandomEqualize(p=1.0)), (0.0, 0.0)),
    ("RandomInvert", pil_then(v2.RandomInvert(p=1.0)), (0.0, 0.0)),
    ("v1 RandomInvert + ToTensor", v1.Compose([v1.RandomInvert(p=1.0), v1.ToTensor()]), (0.0, 0.0)),
]


@pytest.mark.parametrize("name,transform,bounds", DETERMINISTIC, ids=[d[0] for d in DETERMINISTIC])
def test_deterministic_step_matches_the_twin_on_photographs(photo_files, name, transform, bounds):
    scale = 1.0 if transforms.plan(transform, False).output_dtype != torch.uint8 else 255.0
    mean, worst = differences(photo_files, transform, scale)
    print(f"{name}: mean {mean:.3f}/255, worst {worst:.2f}/255")
    assert mean <= bounds[0] and worst <= bounds[1], (name, mean, worst)


# The one-operation steps without the augmentation plugin: a chain of one slot, in DALI's
# operators (as on GPU graphs), whose autocontrast rounds a level apart here and there and whose
# equalize is DALI's (docs/augmentations.md).
CHAINED = [d for d in DETERMINISTIC if d[0].split()[-1] != "tensor" and "Random" in d[0] and
           any(name in d[0] for name in ("Solarize", "Posterize", "Sharpness", "Autocontrast", "Equalize", "Invert"))]
CHAIN_BOUNDS = {"RandomAutocontrast": (0.01, 1.0), "RandomEqualize": (4.5, 50.0)}


@pytest.mark.parametrize("name,transform,bounds", CHAINED, ids=[d[0] for d in CHAINED])
def test_one_operation_steps_without_the_plugin_match_the_twin(photo_files, monkeypatch, name, transform, bounds):
    from dali_loaders.ops import plugin

    monkeypatch.setenv(plugin.DISABLE_AUGMENT_ENV, "1")
    assert not transforms.needs_conditionals(transforms.plan(transform, False), "cpu")
    mean, worst = differences(photo_files, transform, 1.0)
    bounds = CHAIN_BOUNDS.get(name.split()[0], bounds)
    assert mean <= bounds[0] and worst <= bounds[1], (name, mean, worst)


def test_bfloat16_through_the_loader_equals_the_twin(photo_files):
    """DALI has no bfloat16: the loader casts its float32 batches, as the twin's ToDtype does."""
    transform = C(v2.CenterCrop(64), v2.ToImage(), v2.ToDtype(torch.bfloat16, scale=True))
    loader = dali_loader(photo_files, transform, train=False, batch_size=len(photo_files), num_threads=1)
    images, _ = next(iter(loader))
    twin = torch.stack([SourceDataset(photo_files, transform)[i][0] for i in range(len(photo_files))])
    assert images.dtype == torch.bfloat16 and torch.equal(images.cpu(), twin)


# -- random steps by statistics ---------------------------------------------------------------


def coordinate_image(width=64, height=48):
    """R = x, G = y, B = 255 at pixel (x, y): any geometric step can be read back from the
    pixels (padding and warp fill are B = 0)."""
    x, y = np.meshgrid(np.arange(width), np.arange(height))
    return np.stack([x, y, np.full_like(x, 255)], axis=-1).astype(np.uint8)


def many(image: np.ndarray, n=SAMPLES):
    return ArraySource(np.repeat(image[None], n, axis=0), np.zeros(n, dtype=np.int64), "copies")


def both(image: np.ndarray, transform, n=SAMPLES):
    """`transform` applied n times to `image` by DALI and by torchvision: two lists of HWC arrays."""
    source = many(image, n)
    return ([o.transpose(1, 2, 0) for o in dali_outputs(source, transform, batch=n)],
            [o.transpose(1, 2, 0) for o in twin_outputs(source, transform)])


def close(ours, theirs, tolerance, what):
    """Two sample means within `tolerance` (about 4 standard errors of their difference)."""
    a, b = float(np.mean(ours)), float(np.mean(theirs))
    assert abs(a - b) <= tolerance, f"{what}: DALI {a:.4f}, torchvision {b:.4f}"


def window(output: np.ndarray):
    """(left, top, width, height) of the source window a NEAREST resize of a coordinate
    image shows, in source pixels."""
    x, y = output[..., 0].astype(int), output[..., 1].astype(int)
    return x.min(), y.min(), x.max() - x.min() + 1, y.max() - y.min() + 1


@pytest.mark.parametrize("first", [v2.ToImage(), v2.PILToTensor(), v2.ToDtype(torch.uint8)],
                         ids=["ToImage", "PILToTensor", "ToDtype uint8"])
def test_a_conversion_to_uint8_tensors_first_keeps_the_crop_decode(photo_files, first):
    """`ToImage()` (or another conversion that leaves uint8 pixels) before RandomResizedCrop:
    the window is drawn and decoded as without it (the same seed, the same pixels), not the
    whole file decoded and cropped after, which costs twice as much."""
    crop = v2.RandomResizedCrop(48, scale=(0.2, 1.0), antialias=True)
    ours = dali_outputs(photo_files, C(first, crop, v2.ToDtype(torch.float32, scale=True)))
    plain = dali_outputs(photo_files, C(crop, v2.ToImage(), v2.ToDtype(torch.float32, scale=True)))
    assert all(np.array_equal(a, b) for a, b in zip(ours, plain))


def test_random_resized_crop_area_and_aspect():
    image = coordinate_image(200, 160)
    transform = C(v2.RandomResizedCrop(100, scale=(0.2, 0.45), ratio=(0.5, 0.9), interpolation=IM.NEAREST),
                  v2.PILToTensor())
    stats = []
    for outputs in both(image, transform):
        boxes = np.array([window(o) for o in outputs])
        stats.append((boxes[:, 2] * boxes[:, 3] / (200 * 160), np.log(boxes[:, 2] / boxes[:, 3])))
    (area, aspect), (area_tv, aspect_tv) = stats
    close(area, area_tv, 0.015, "area fraction")               # default scale: mean 0.54
    close(aspect, aspect_tv, 0.04, "log aspect")                # default ratio: mean 0
    assert area.min() >= 0.18 and area.max() <= 0.47 and aspect.max() <= np.log(0.9) + 0.05


@pytest.mark.parametrize("interpolation", [IM.BILINEAR, IM.BICUBIC,
                                           IM.NEAREST])
@pytest.mark.parametrize("twin", ["PIL", "tensor"])
def test_random_resized_crop_of_arrays_resizes_the_window_as_torchvision(twin, interpolation):
    """Images already decoded (arrays, or after other steps): the window is cut, then resized
    as the twin resizes the crop, PIL's or torch's uint8 arithmetic and torch's nearest grid.
    DALI's random_resized_crop was up to 5 levels off (bilinear), 208 and 248 (nearest)."""
    from dali_loaders.ops import plugin

    if not plugin.available():
        pytest.skip("the resize operator is not built here")
    images = photo_arrays(32)
    source = ArraySource(np.ascontiguousarray(images), np.zeros(len(images), np.int64), "photos")
    crop = v2.RandomResizedCrop(24, scale=(1, 1), ratio=(1, 1), interpolation=interpolation)   # the whole image
    transform = v2.Compose([crop, v2.PILToTensor()] if twin == "PIL" else [v2.PILToTensor(), crop])
    worst = max(np.abs(a.astype(np.float64) - b).max() for a, b in zip(dali_outputs(source, transform),
                                                                        twin_outputs(source, transform)))
    # torch's uint8 bicubic rounds its taps otherwise than PIL: a level at a few pixels
    assert worst <= (1.0 if (twin, interpolation) == ("tensor", IM.BICUBIC) else 0.0)

def test_random_crop_offsets_with_padding():
    image = coordinate_image(32, 32)
    transform = C(v2.RandomCrop(24, padding=(2, 5), fill=0), v2.PILToTensor())
    lefts = []
    for outputs in both(image, transform):
        # column j shows source x = left + j; padding (B == 0) has no x: read a valid column
        lefts.append(np.array([_first_offset(o, axis=1) for o in outputs]))
        assert all(o.shape[:2] == (24, 24) for o in outputs)
    ours, theirs = lefts
    assert ours.min() == theirs.min() == -2 and ours.max() == theirs.max() == 10   # 32 + 2 * 2 - 24
    close(ours, theirs, 0.6, "left offset")


def _first_offset(output, axis):
    """Where the crop starts in source coordinates along `axis` (1: x from R, 0: y from G)."""
    valid = output[..., 2] == 255
    rows, cols = np.nonzero(valid)
    k = np.argmin(cols) if axis == 1 else np.argmin(rows)
    return int(output[rows[k], cols[k], 0]) - cols[k] if axis == 1 else int(output[rows[k], cols[k], 1]) - rows[k]


def test_random_crop_pad_if_needed():
    """torchvision pads both sides of a short side by the whole shortfall: offsets -8 .. 0."""
    image = coordinate_image(32, 40)
    transform = C(v2.RandomCrop((40, 40), pad_if_needed=True), v2.PILToTensor())
    for outputs in both(image, transform, n=200):
        lefts = np.array([_first_offset(o, axis=1) for o in outputs])
        tops = np.array([_first_offset(o, axis=0) for o in outputs])
        assert lefts.min() == -8 and lefts.max() == 0 and (tops == 0).all()


@pytest.mark.parametrize("flip,axis", [(v2.RandomHorizontalFlip, 1), (v2.RandomVerticalFlip, 0)])
def test_flip_rate(flip, axis):
    image = coordinate_image(16, 16)
    rates = []
    for outputs in both(image, C(flip(p=0.3), v2.PILToTensor())):
        channel = 0 if axis == 1 else 1
        rates.append([o[0, 0, channel] > o[-1, -1, channel] for o in outputs])
    close(*rates, 0.09, "flip rate")            # p=0.5 (the default) is ~4.4 standard errors away
    assert abs(np.mean(rates[0]) - 0.3) < 0.08


def flat(value=(128, 128, 128), size=8):
    return np.full((size, size, 3), value, dtype=np.uint8)


def test_color_jitter_brightness_factor():
    transform = C(v2.ColorJitter(brightness=(0.3, 0.9)), v2.PILToTensor())
    ours, theirs = [[o.mean() / 128.0 for o in outputs] for outputs in both(flat(), transform)]
    close(ours, theirs, 0.03, "brightness ratio")   # default (none): 1.0
    assert 0.29 <= min(ours) and max(ours) <= 0.91


def test_color_jitter_contrast_factor():
    """Two grey levels: the contrast factor is the ratio of their differences."""
    image = flat((100, 100, 100))
    image[:, 4:] = 160
    transform = C(v2.ColorJitter(contrast=(1.2, 1.6)), v2.PILToTensor())
    factors = [[(float(o[0, 5, 0]) - float(o[0, 0, 0])) / 60.0 for o in outputs]
               for outputs in both(image, transform)]
    close(*factors, 0.03, "contrast factor")
    assert 1.15 <= min(factors[0]) and max(factors[0]) <= 1.65


def test_color_jitter_saturation_factor():
    """A colour pixel's distance from its grey scales with the saturation factor."""
    image = flat((150, 110, 90))
    grey = (150 * 19595 + 110 * 38470 + 90 * 7471 + 32768) >> 16
    transform = C(v2.ColorJitter(saturation=(0.2, 0.6)), v2.PILToTensor())
    factors = [[(float(o[0, 0, 0]) - grey) / (150 - grey) for o in outputs] for outputs in both(image, transform)]
    close(*factors, 0.04, "saturation factor")
    assert 0.15 <= min(factors[0]) and max(factors[0]) <= 0.65


def colour_sweep(offset=101):
    """256 x 256 pixels, every 256th of the 2**24 RGB colours (from `offset`)."""
    v = np.arange(offset, 1 << 24, 256, dtype=np.uint32)
    return np.stack([(v >> 16) & 255, (v >> 8) & 255, v & 255], axis=-1).astype(np.uint8).reshape(256, 256, 3)


HUE_TWINS = {
    "PIL": lambda hue: C(v2.ColorJitter(hue=hue), v2.PILToTensor()),
    "tensor v2": lambda hue: C(v2.PILToTensor(), v2.ColorJitter(hue=hue)),
    "tensor v1": lambda hue: v1.Compose([v1.PILToTensor(), v1.ColorJitter(hue=hue)]),
}


HUE_CASES = [(twin, (f, f)) for twin in HUE_TWINS for f in (0.1, -0.3, 0.5, -0.0123)]
# drawn per sample: different factors, but one shift int(factor * 255) in PIL's levels
HUE_CASES += [("PIL", (0.1, 0.1001)), ("PIL", (-0.3001, -0.3))]


@pytest.mark.parametrize("twin,hue", HUE_CASES, ids=[f"{t} {h[0]}..{h[1]}" for t, h in HUE_CASES])
def test_hue_shift_equals_the_twin_on_every_kind_of_colour(twin, hue):
    """Each twin's HSV arithmetic: PIL's 8-bit HSV (float ratios, double scaling, truncation),
    v1's and v2's float32 kernels (which differ in a few roundings: 15 of these colours at 0.1)."""
    source = ArraySource(colour_sweep()[None], np.zeros(1, dtype=np.int64), "colours")
    transform = HUE_TWINS[twin](hue)
    (ours,), (theirs,) = dali_outputs(source, transform), twin_outputs(source, transform)
    assert np.array_equal(ours, theirs), (twin, hue, int((ours != theirs).any(axis=0).sum()))


def hue_of(rgb):
    import colorsys

    return colorsys.rgb_to_hsv(*(np.asarray(rgb, dtype=float) / 255.0))[0]


def test_color_jitter_hue_shift():
    """The hue shift of a saturated colour: the factor's distribution (the arithmetic is
    checked colour by colour above)."""
    image = flat((200, 60, 60))
    base = hue_of((200, 60, 60))
    transform = C(v2.ColorJitter(hue=(0.05, 0.15)), v2.PILToTensor())
    shifts = [[(hue_of(o[0, 0]) - base + 0.5) % 1.0 - 0.5 for o in outputs] for outputs in both(image, transform)]
    close(*shifts, 0.01, "hue shift")            # default (none): 0; spread 0.029, 4 standard errors 0.008
    assert min(shifts[0]) >= 0.0 and max(shifts[0]) <= 0.2


def rotation_of(output, centre):
    """The angle (degrees, counter-clockwise on screen, as torchvision's `degrees`) a NEAREST
    warp turned a coordinate image by, read from the source coordinates at the centre and 10
    pixels to its right (y grows downwards)."""
    cy, cx = centre
    x0, y0 = output[cy, cx, :2].astype(float)
    x1, y1 = output[cy, cx + 10, :2].astype(float)
    return math.degrees(math.atan2(y1 - y0, x1 - x0))


def test_random_rotation_angle():
    image = coordinate_image(64, 64)
    transform = C(v2.RandomRotation((10, 40)), v2.PILToTensor())
    ours, theirs = [[rotation_of(o, (32, 27)) for o in outputs] for outputs in both(image, transform)]
    close(ours, theirs, 1.5, "rotation angle")    # the sign convention too: -25 if mirrored
    assert 5 <= min(theirs) and max(theirs) <= 45 and 5 <= min(ours) and max(ours) <= 45


def test_random_rotation_expand_puts_each_image_on_the_canvas_of_its_angle():
    """expand=True: the canvas grows with the angle drawn (48 x 64 turned by 10-40 degrees:
    58-78 x 71-80), at torchvision's sizes; the angle read at the canvas's centre is
    torchvision's (ignoring expand leaves 48 x 64, ignoring the angle one size)."""
    image = coordinate_image(64, 48)
    transform = C(v2.RandomRotation((10, 40), expand=True), v2.PILToTensor())
    ours, theirs = both(image, transform)
    for axis, what in ((0, "canvas height"), (1, "canvas width")):
        close([o.shape[axis] for o in ours], [o.shape[axis] for o in theirs], 3.5, what)
    assert min(o.shape[0] for o in ours) >= 57 and max(o.shape[0] for o in ours) <= 79
    angles = [[rotation_of(o, (o.shape[0] // 2, o.shape[1] // 2 - 5)) for o in outputs] for outputs in (ours, theirs)]
    close(*angles, 1.5, "rotation angle")
    assert 5 <= min(angles[0]) and max(angles[0]) <= 45


def affine_of(output, centre=(32, 32)):
    """The output->source map of a NEAREST warp of a coordinate image, from the centre and
    points 12 pixels right and down: (x0, y0, dx/dX, dy/dX, dx/dY, dy/dY)."""
    cy, cx = centre
    p0, px, py = (output[y, x, :2].astype(float) for y, x in ((cy, cx), (cy, cx + 12), (cy + 12, cx)))
    return np.concatenate([p0, (px - p0) / 12, (py - p0) / 12])


@pytest.mark.parametrize("name,transform", [
    ("translate", v2.RandomAffine(0, translate=(0.2, 0.1))),
    ("scale", v2.RandomAffine(0, scale=(0.6, 0.8))),
    ("shear x", v2.RandomAffine(0, shear=(10, 30))),
    ("shear x and y", v2.RandomAffine(0, shear=(-5, 5, 15, 25))),
])
def test_random_affine_parameters(name, transform):
    image = coordinate_image(64, 64)
    maps = [np.array([affine_of(o) for o in outputs]) for outputs in both(image, C(transform, v2.PILToTensor()))]
    for k, what in enumerate(["x0", "y0", "dx/dX", "dy/dX", "dx/dY", "dy/dY"]):
        tolerance = 0.8 if k < 2 else 0.03
        close(maps[0][:, k], maps[1][:, k], tolerance, f"{name}: {what}")
        assert abs(maps[0][:, k].std() - maps[1][:, k].std()) <= (0.8 if k < 2 else 0.03), (name, what)


def test_random_grayscale_rate():
    image = flat((200, 60, 30))
    rates = [[o[0, 0, 0] == o[0, 0, 1] for o in outputs]
             for outputs in both(image, C(v2.RandomGrayscale(p=0.3), v2.PILToTensor()))]
    close(*rates, 0.09, "grayscale rate")       # default p=0.1
    assert abs(np.mean(rates[0]) - 0.3) < 0.08


def test_random_apply_rate():
    transform = C(v2.RandomApply([v2.ColorJitter(brightness=(0.5, 0.5))], p=0.3), v2.PILToTensor())
    rates = [[o[0, 0, 0] < 100 for o in outputs] for outputs in both(flat(), transform)]
    close(*rates, 0.09, "RandomApply rate")     # default p=0.5
    assert abs(np.mean(rates[0]) - 0.3) < 0.08


def outcomes(outputs, kinds):
    """Per output, the index of the one of `kinds` (distinct images) it equals exactly."""
    found = [[k for k, kind in enumerate(kinds) if np.array_equal(o, kind)] for o in outputs]
    assert all(len(f) == 1 for f in found), "an output that is none of the reference's images"
    return np.array([f[0] for f in found])


def distinct(outputs):
    return [np.frombuffer(b, outputs[0].dtype).reshape(outputs[0].shape)
            for b in sorted({np.ascontiguousarray(o).tobytes() for o in outputs})]


def test_random_apply_applies_its_steps_together_or_not_at_all():
    """One coin for every step inside: each image is untouched or both darkened and grey, as
    torchvision's own are, at its rate (p=0.4; the default 0.5, or a coin per step, fails)."""
    transform = C(v2.RandomApply([v2.ColorJitter(brightness=(0.5, 0.5)), v2.RandomGrayscale(p=1.0)], p=0.4),
                  v2.PILToTensor())
    ours, theirs = both(flat((200, 60, 30)), transform)
    kinds = distinct(theirs)
    assert len(kinds) == 2   # untouched, or both steps
    applied = [outcomes(outputs, kinds) == [k for k, kind in enumerate(kinds) if kind[0, 0, 0] != 200][0]
               for outputs in (ours, theirs)]
    close(*applied, 0.09, "RandomApply rate")
    assert abs(np.mean(applied[0]) - 0.4) < 0.08


def test_random_apply_of_a_random_step_multiplies_their_rates():
    """RandomApply(p=0.6) around RandomInvert(p=0.5): inverted 0.3 of the time, as torchvision."""
    transform = C(v2.RandomApply([v2.RandomInvert(p=0.5)], p=0.6), v2.PILToTensor())
    rates = [[o[0, 0, 0] > 128 for o in outputs] for outputs in both(flat((30, 60, 90)), transform)]
    close(*rates, 0.09, "RandomApply(RandomInvert) rate")
    assert abs(np.mean(rates[0]) - 0.3) < 0.08


@pytest.mark.parametrize("plugin_built", [True, False], ids=["fused", "conditionals"])
@pytest.mark.parametrize("version", ["v1", "v2"])
def test_random_choice_picks_each_transform_at_its_weight(monkeypatch, plugin_built, version):
    """RandomChoice of three colour steps, weights 1:3:6: each image is exactly one of
    torchvision's three images, at torchvision's rates (equal weights, the default, fail)."""
    from dali_loaders.ops import plugin

    if not plugin_built:
        monkeypatch.setenv(plugin.DISABLE_AUGMENT_ENV, "1")
    api = v1 if version == "v1" else v2
    transform = api.Compose([api.RandomChoice([api.RandomInvert(1.0), api.RandomGrayscale(1.0),
                                               api.Compose([api.RandomSolarize(100, 1.0), api.RandomPosterize(2, 1.0)])],
                                              p=[1, 3, 6]), api.PILToTensor()])
    recipe = transforms.plan(transform, False)
    assert transforms.needs_conditionals(recipe, "cpu") == (not plugin_built)
    ours, theirs = both(flat((200, 60, 30)), transform)
    kinds = distinct(theirs)
    assert len(kinds) == 3
    drawn = [outcomes(outputs, kinds) for outputs in (ours, theirs)]
    for k in range(3):
        close(drawn[0] == k, drawn[1] == k, 0.11, f"RandomChoice outcome {k}")
    assert sorted(np.bincount(drawn[0], minlength=3) / len(ours)) == pytest.approx([0.1, 0.3, 0.6], abs=0.08)


def test_random_choice_whose_first_transform_queues_nothing_on_grey_images():
    """A grey image: RandomGrayscale queues no slot, so the second transform's step begins the
    operator's call after a pending one in other (v1 tensor) arithmetic; each image is one of
    torchvision's images at its rate."""
    image = np.full((8, 8, 1), 90, np.uint8)
    transform = v2.Compose([v2.ToImage(), v1.RandomInvert(1.0),
                            v2.RandomChoice([v2.RandomGrayscale(1.0), v2.RandomInvert(1.0)], p=[3, 7]),
                            v2.ToDtype(torch.uint8)])
    ours, theirs = both(image, transform)
    kinds = distinct(theirs)
    assert len(kinds) == 2
    drawn = [outcomes(outputs, kinds) for outputs in (ours, theirs)]
    close(drawn[0] == 0, drawn[1] == 0, 0.11, "RandomChoice outcome on grey images")


def test_random_apply_draws_color_jitter_orders_uniformly_when_applied():
    """Brightness then contrast, contrast then brightness, or neither: each exactly one of
    torchvision's images, at torchvision's rates (p=0.7, each order 0.35; the brighter image
    clips, so the orders differ)."""
    image = np.zeros((8, 8, 3), np.uint8)
    image[:, :4] = (220, 180, 90)
    image[:, 4:] = (40, 60, 100)
    transform = C(v2.RandomApply([v2.ColorJitter(brightness=(2.0, 2.0), contrast=(0.3, 0.3))], p=0.7),
                  v2.PILToTensor())
    ours, theirs = both(image, transform)
    kinds = distinct(theirs)
    assert len(kinds) == 3
    drawn = [outcomes(outputs, kinds) for outputs in (ours, theirs)]
    for k in range(3):
        close(drawn[0] == k, drawn[1] == k, 0.11, f"RandomApply(ColorJitter) outcome {k}")
    rates = np.bincount(drawn[0], minlength=3) / len(ours)
    untouched = [k for k, kind in enumerate(kinds) if np.array_equal(kind, image)][0]
    for k in range(3):
        assert abs(rates[k] - (0.3 if k == untouched else 0.35)) < 0.08, (k, rates)


@pytest.mark.parametrize("plugin_built", [True, False], ids=["fused", "chain"])
def test_one_operation_steps_apply_at_their_rate(monkeypatch, plugin_built):
    """RandomInvert(p=0.3) inverts as often as torchvision's (the default 0.5 would fail)."""
    from dali_loaders.ops import plugin

    if not plugin_built:
        monkeypatch.setenv(plugin.DISABLE_AUGMENT_ENV, "1")
    rates = [[o[0, 0, 0] > 128 for o in outputs]
             for outputs in both(flat((30, 60, 90)), C(v2.RandomInvert(p=0.3), v2.PILToTensor()))]
    close(*rates, 0.09, "RandomInvert rate")
    assert abs(np.mean(rates[0]) - 0.3) < 0.08


@pytest.mark.parametrize("plugin_built", [True, False], ids=["fused", "window"])
def test_random_apply_of_a_blur_needs_no_conditional_and_blurs_at_its_rate(monkeypatch, plugin_built):
    """RandomApply([GaussianBlur], p=0.3), as self-supervised recipes write it: each image is
    the image itself or within a level of torchvision's blur, at torchvision's rate (the
    default 0.5 fails), in a graph without conditionals (an `if` on a DataNode would raise):
    in the augmentation operator, or without it as a window of 1 x 1 where the coin says no."""
    from dali_loaders.ops import plugin

    if not plugin_built:
        monkeypatch.setenv(plugin.DISABLE_AUGMENT_ENV, "1")
    image = coordinate_image(32, 24)
    transform = C(v2.RandomApply([v2.GaussianBlur(5, sigma=(1.5, 1.5))], p=0.3), v2.PILToTensor())
    recipe = transforms.plan(transform, False)
    assert not transforms.needs_conditionals(recipe, "cpu") and not transforms.needs_conditionals(recipe, "gpu")
    ours, theirs = both(image, transform)
    blurred = [t for t in theirs if not np.array_equal(t, image)][0]
    for o in ours:
        assert np.array_equal(o, image) or np.abs(o - blurred).max() <= 1
    rates = [[not np.array_equal(o, image) for o in outputs] for outputs in (ours, theirs)]
    close(*rates, 0.09, "RandomApply(GaussianBlur) rate")
    assert abs(np.mean(rates[0]) - 0.3) < 0.08


def test_gaussian_blur_sigma_range():
    """An impulse blurred with a 15 x 15 kernel: its spread (second moment) gives sigma."""
    image = np.zeros((15, 15, 3), dtype=np.uint8)
    image[7, 7] = 255
    transform = C(v2.GaussianBlur(15, sigma=(1.0, 2.5)), v2.ToImage(), v2.ToDtype(torch.float32, scale=False))
    sigmas = []
    for outputs in both(image, transform):
        offsets = (np.arange(15) - 7.0) ** 2
        sigmas.append([math.sqrt((o[..., 0].sum(axis=0) * offsets).sum() / o[..., 0].sum()) for o in outputs])
    close(*sigmas, 0.06, "sigma")               # a kernel truncated at 7: sigma 2.5 reads ~2.4
    assert min(sigmas[0]) >= 0.9 and max(sigmas[0]) <= 2.6


# -- refusals and errors ---------------------------------------------------------------------


class MyStep(torch.nn.Module):
    def forward(self, image):
        return image


@pytest.mark.parametrize("step,named", [
    (MyStep(), "test_transforms.MyStep"),
    (v2.Lambda(lambda image: image.flip(-1)), "Lambda"),
])
def test_unknown_transform_is_named_with_the_supported_list(step, named):
    with pytest.raises(ValueError) as error:
        transforms.plan(C(v2.CenterCrop(8), step), python_fallback=False)
    message = str(error.value)
    assert named in message and "Supported: " in message
    for supported in ("ColorJitter", "RandomResizedCrop", "Normalize", "GaussianBlur"):
        assert supported in message


@pytest.mark.parametrize("step,argument", [
    (v2.Resize(8, interpolation=IM.LANCZOS), "interpolation"),
    (v2.RandomResizedCrop(8, interpolation=IM.BOX), "interpolation"),
    (v2.RandomRotation(10, expand=True, center=(3, 4)), "expand=True with a center"),
    (v2.RandomRotation((90, 90), expand=True), "expand=True at the fixed angle 90"),
    (v2.RandomRotation(10, interpolation=IM.BICUBIC), "interpolation"),
    (v2.AutoAugment(fill=[1, 2, 3]), "fill"),
    (v1.Grayscale(2), "num_output_channels=2"),
    (v2.RandomApply([v2.ToDtype(torch.float32, scale=True)], p=0.5), "ToDtype inside it"),
    (v2.RandomApply([v2.ToImage()]), "ToImage inside it"),
    (v2.RandomApply([v2.RandomRotation((90, 90), expand=True)]), "expand=True at the fixed angle 90"),
    (v2.RandomChoice([v2.RandomInvert(), v2.Normalize([0.5], [0.5])]), "Normalize inside it"),
    (v1.RandomChoice([v1.RandomInvert(), v1.RandomGrayscale()], p=[0, 0]), "p=[0, 0]"),
    (v2.ToDtype(torch.int32), "dtype torch.int32"),
])
def test_unsupported_parameter_is_refused_by_name(step, argument):
    with pytest.raises(ValueError) as error:
        transforms.plan(step, python_fallback=False)
    assert type(step).__name__ in str(error.value) and argument in str(error.value)


# -- GPU variants ----------------------------------------------------------------------------

def dali_fn():
    from nvidia.dali import fn

    return fn


GPU_TRANSFORMS = [
    C(v2.RandomResizedCrop(64, scale=(0.3, 1.0), interpolation=IM.BICUBIC), v2.RandomHorizontalFlip(0.3)),
    C(v2.Resize(72, max_size=100), v2.CenterCrop(64)),
    C(v2.Resize(None, max_size=90), v2.CenterCrop(64)),
    C(v2.ToImage(), v2.Resize((40, 50), interpolation=IM.NEAREST)),
    C(v2.CenterCrop(300)),
    C(v2.RandomCrop(48, padding=(1, 2, 3, 4), pad_if_needed=True, fill=9)),
    C(v2.Pad((1, 2), fill=(1, 2, 3)), v2.RandomVerticalFlip(0.2)),
    C(v2.RandomRotation(20, interpolation=IM.BILINEAR), v2.RandomAffine(10, translate=(0.1, 0.1),
                                                                        scale=(0.8, 1.2), shear=(1, 2, 3, 4))),
    C(v2.ColorJitter(0.4, 0.4, 0.4, 0.1), v2.RandomGrayscale(0.2), v2.Grayscale(3)),
    C(v2.ToImage(), v2.ColorJitter(brightness=0.2, saturation=0.3), v2.Grayscale(1)),
    C(v2.GaussianBlur((3, 5), sigma=(0.1, 2.0)), v2.RandomApply([v2.ColorJitter(0.2), v2.GaussianBlur(3)], p=0.4)),
    v1.Compose([v1.ToTensor(), v1.Normalize((0.5,) * 3, (0.2,) * 3)]),
    C(v2.PILToTensor(), v2.ConvertImageDtype(torch.float16)),
    C(v2.ToImage(), v2.ToDtype(torch.bfloat16, scale=True), v2.Normalize((0.5,) * 3, (0.2,) * 3)),
    C(v2.ToImage(), v2.ToDtype(torch.uint8)),
    C(v2.TrivialAugmentWide(), v2.ToImage(), v2.ToDtype(torch.float32, scale=True), v2.RandomErasing(0.5)),
    C(v2.RandAugment(2, 9), v2.AutoAugment(v2.AutoAugmentPolicy.SVHN)),
    C(v2.ToImage(), v2.ColorJitter(hue=0.2), v2.RandomAffine(10, scale=(0.9, 1.1), interpolation=IM.BILINEAR,
                                                             fill=3)),
    v1.Compose([v1.PILToTensor(), v1.ColorJitter(hue=(-0.1, 0.3)), v1.RandomRotation(15, interpolation=IM.BILINEAR)]),
    C(v2.CenterCrop(40), transforms.DaliFunction(lambda images: dali_fn().resize(images, size=[20, 20]))),
    C(v2.RandomCrop(40, padding=(1, 2, 3, 4), padding_mode="reflect"), v2.Pad(3, padding_mode="edge"),
      v2.Pad(2, padding_mode="symmetric"), v2.ToImage(), v2.ToDtype(torch.float32, scale=True), v2.ToPureTensor()),
    C(v2.RandomSolarize(128, p=0.2), v2.RandomPosterize(4, p=0.3), v2.RandomAdjustSharpness(2.0),
      v2.RandomAutocontrast(), v2.RandomEqualize(0.4), v2.RandomApply([v2.RandomInvert(1.0)], p=0.3),
      v2.RandomApply([v2.GaussianBlur(5, sigma=(0.1, 2.0))], p=0.5),
      v2.RandomChoice([v2.RandomInvert(1.0), v2.Compose([v2.RandomSolarize(9, 1.0), v2.GaussianBlur(3)])], p=[2, 1])),
    C(v2.AugMix(), v2.ToImage(), v2.ToDtype(torch.float32, scale=True)),
    v1.Compose([v1.AugMix(chain_depth=2, all_ops=False), v1.PILToTensor()]),
    C(v2.Grayscale(1), v2.RGB(), v2.Identity()),
    C(v2.RandomShortestSize([40, 50], max_size=70), v2.ScaleJitter((60, 50), (0.5, 1.5)), v2.RandomResize(30, 40),
      v2.RandomZoomOut(fill=3, p=0.5), v2.RandomPhotometricDistort(), v2.RandomChannelPermutation(), v2.ToImage(),
      v2.GaussianNoise(0.0, 0.05), v2.ToDtype(torch.float32, scale=True), v2.GaussianNoise()),
    C(v2.JPEG((30, 90)), v2.ToImage(), v2.JPEG(75)),
    C(v2.RandomPerspective(0.4, p=0.7), v2.ToImage(), v2.RandomPerspective(interpolation=IM.NEAREST, fill=9)),
    C(v2.RandomOrder([v2.ColorJitter(0.3), v2.RandomInvert(0.5), v2.RandomRotation(10)])),
    C(v2.ElasticTransform(30.0, fill=[1.0, 2.0, 3.0]), v2.ToImage(), v1.ElasticTransform(interpolation=IM.NEAREST)),
    C(v2.Resize(72), v2.TenCrop(64, vertical_flip=True), v2.ToImage(), v2.ToDtype(torch.float32, scale=True)),
    C(v1.FiveCrop(32), v2.PILToTensor()),
    C(v2.PILToTensor(), v2.ToPILImage(), v2.ColorJitter(hue=0.1), v2.PILToTensor()),
    C(v1.Lambda(lambda img: img.convert("L")), v2.ToImage(), v2.ToDtype(torch.float32, scale=True),
      v1.Lambda(lambda x: x.repeat(3, 1, 1)), v1.Lambda(lambda t: t * 2 - 1)),
]


@pytest.mark.parametrize("transform", GPU_TRANSFORMS, ids=[str(k) for k in range(len(GPU_TRANSFORMS))])
def test_gpu_graph_serializes(photo_files, transform):
    """DALI checks each operator and argument against its GPU schema while serializing."""
    for source in (photo_files, many(coordinate_image(64, 64), 4)):
        assert loaders.serialized_gpu_graph(source, transform)


def test_every_translated_transform_is_in_a_gpu_graph():
    used = {type(step).__name__ for t in GPU_TRANSFORMS for step in transforms.flatten(t)}
    used |= {type(inner).__name__ for t in GPU_TRANSFORMS for step in transforms.flatten(t)
             if hasattr(step, "transforms") for inner in step.transforms}
    torchvision_names = {cls.__name__ for cls in transforms.TRANSLATORS if cls.__module__.startswith("torchvision")}
    # steps with no GPU operator: their recipes run the steps on the CPU in GPU loaders
    # (tests/test_linear_transformation.py serializes that graph)
    on_cpu = {cls.__name__ for cls, translator in transforms.TRANSLATORS.items()
              if cls.__module__.startswith("torchvision") and hasattr(translator, "on_cpu")}
    assert on_cpu == {"LinearTransformation"}   # timm's with its blurs: tests/test_timm_three_augment.py
    assert torchvision_names - used - on_cpu == set()   # timm's: tests/test_timm.py


@pytest.mark.gpu
@pytest.mark.parametrize("transform", GPU_TRANSFORMS[1:3] + GPU_TRANSFORMS[5:6] + GPU_TRANSFORMS[10:12],
                         ids=["resize-crop", "nearest", "pad", "normalize", "half"])
def test_gpu_matches_cpu(photo_files, transform):
    """Deterministic graphs: the GPU's output within the CPU bounds of the twin."""
    cpu = dali_loader(photo_files, C(transform, v2.CenterCrop(32)), train=False, batch_size=2, num_threads=1)
    gpu = dali_loader(photo_files, C(transform, v2.CenterCrop(32)), train=False, batch_size=2, num_threads=1,
                              device_id=0)
    for (a, _), (b, _) in zip(cpu, gpu):
        assert (a.float() - b.float().cpu()).abs().max() <= 2 / 255 * (255 if a.dtype == torch.uint8 else 1)


def test_image_helpers_agree_with_pil():
    """The test's own reading of images: the coordinate image survives PIL and DALI unchanged."""
    image = coordinate_image(20, 10)
    (ours,), (theirs,) = both(image, v2.PILToTensor(), n=1)
    assert np.array_equal(ours, image) and np.array_equal(theirs, np.asarray(Image.fromarray(image)))


def test_to_pil_image_on_a_pil_image_is_refused_by_name():
    """torchvision's ToPILImage refuses PIL images too."""
    loader = dali_loader(many(coordinate_image(16, 12), 4), C(v2.ToPILImage(), v2.PILToTensor()), train=True,
                         batch_size=2, num_threads=1)
    with pytest.raises(ValueError, match="ToPILImage takes a tensor or an array.*PIL image"):
        list(loader)
