"""Lambda read as the step it equals, and plain functions in a Compose as one-line lambdas: what
is read from which functions (and why others are not), then the reads in DALI against
torchvision running the functions themselves on photographs."""
import pytest
import torch
from test_transforms import C, dali_loader, differences, many, coordinate_image
from torchvision import transforms as v1
from torchvision.transforms import v2

from dali_loaders import transforms
from dali_loaders.transforms import lambdas

pytest.importorskip("nvidia.dali")

OUTSIDE = 3.0


def helper(x):
    return x


def _convert_image_to_rgb(image):   # CLIP's
    return image.convert("RGB")


def documented(x):
    """To [-1, 1]."""
    return x * 2 - 1


def two_statements(x):
    y = x * 2
    return y - 1


def uses_a_global(x):
    return x * OUTSIDE


def decorate(function):
    return function


@decorate
def decorated(x):
    return x * 2


def halved(x):
    return x * 0.5


READ = [
    (lambda t: (t * 2) - 1, ("affine", (2.0, -1.0, False))),
    (lambda x: 2 * x - 1, ("affine", (2.0, -1.0, False))),
    (lambda x: (x - 0.5) / 0.25, ("affine", (4.0, -2.0, True))),   # torch: float first
    (lambda x: -x + 1, ("affine", (-1.0, 1.0, False))),
    (lambda x: x / 255.0, ("affine", (1 / 255.0, 0.0, True))),
    (lambda x: 3 + x * 2.0, ("affine", (2.0, 3.0, True))),
    (lambda x: (x - 1) / 2, ("affine", (0.5, -0.5, False))),   # x - 1 first: uint8 stays uint8
    (lambda x: x.repeat(3, 1, 1), ("repeat", None)),
    (lambda x: x.expand(3, -1, -1), ("repeat", None)),
    (lambda img: img.convert("RGB"), ("convert", "RGB")),
    (lambda img: img.convert('L'), ("convert", "L")),
    (lambda image: image, ("identity", None)),
    (helper, ("identity", None)),
    (_convert_image_to_rgb, ("convert", "RGB")),
    (documented, ("affine", (2.0, -1.0, False))),
    # torch's operator methods, and float() as `* 1.0`
    (lambda x: x.float() / 255, ("affine", (1 / 255, 0.0, True))),
    (lambda x: x.float().div(255).mul(2).sub(1), ("affine", (2 / 255, -1.0, True))),
    (lambda x: x.div(255), ("affine", (1 / 255, 0.0, True))),
    (lambda x: x.mul(2).add(-1), ("affine", (2.0, -1.0, False))),   # x.mul(2) first: uint8 stays uint8
    (lambda x: x.float(), ("affine", (1.0, 0.0, True))),
    (lambda x: x.half().mul(0.5), ("affine", (0.5, 0.0, True))),
]

NOT_READ = [
    (lambda x: x * OUTSIDE, "not arithmetic of the image and numbers"),
    (lambda x: helper(x), "not arithmetic of the image and numbers"),
    (lambda x: x * x, "not arithmetic of the image and numbers"),
    (lambda x: 0 * x + 1, "drops the image"),
    (lambda x: x.flip(0), "calls .flip"),
    (lambda x: x.mul(x), "not arithmetic of the image and numbers"),
    (lambda x: x.add(1, alpha=2), "not arithmetic of the image and numbers"),
    (lambda x: x.double(), "calls .double"),
    (lambda x: x.convert("CMYK"), "calls .convert"),
    (lambda x, y=1: x + y, "takes more than the image"),
    (two_statements, "more than one return statement"),
    (uses_a_global, "not arithmetic of the image and numbers"),
    (decorated, "not one plain def"),
]


@pytest.mark.parametrize("function,expected", READ, ids=[str(k) for k in range(len(READ))])
def test_what_is_read(function, expected):
    assert lambdas.read(function) == (expected, "")


@pytest.mark.parametrize("function,why", NOT_READ, ids=[str(k) for k in range(len(NOT_READ))])
def test_what_is_not_read_says_why(function, why):
    found, reason = lambdas.read(function)
    assert found is None and why in reason
    with pytest.raises(ValueError, match=f"Lambda.*{why}"):
        transforms.plan(C(v1.Lambda(function)), python_fallback=False)
    if function.__name__ != "<lambda>":   # in a Compose as it is, named in the message
        with pytest.raises(ValueError, match=f"function {function.__name__}: .*{why}"):
            transforms.plan(C(function), python_fallback=False)


def test_clips_preprocess_with_its_plain_function_matches_torchvision(photo_files):
    """CLIP's (and open_clip's) eval transform: a plain function converting to RGB in the
    Compose, read as v2.RGB; pixel for pixel against torchvision running the function."""
    transform = v1.Compose([v1.Resize(64, interpolation=v1.InterpolationMode.BICUBIC), v1.CenterCrop(64),
                            _convert_image_to_rgb, v1.ToTensor(),
                            v1.Normalize((0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711))])
    assert not transforms.plan(transform, python_fallback=False).python
    mean, worst = differences(photo_files, transform, 1 / 0.2613)
    assert mean <= 0.01 and worst <= 1.0, (mean, worst)


def test_a_v2_lambda_for_some_types_only_is_not_read():
    from PIL import Image

    with pytest.raises(ValueError, match="Lambda: types=.*Image"):
        transforms.plan(C(v2.Lambda(lambda x: x.convert("L"), Image.Image)), python_fallback=False)


def test_a_lambda_among_others_on_its_line_is_itself():
    steps = [v1.Lambda(lambda x: x * 3 - 1), v1.Lambda(lambda x: x * 5 + 2)]
    assert [lambdas.read(step.lambd)[0] for step in steps] == [("affine", (3.0, -1.0, False)),
                                                                      ("affine", (5.0, 2.0, False))]


FLOAT = [v2.ToImage(), v2.ToDtype(torch.float32, scale=True)]
CASES = [
    ("to [-1, 1]", v1.Compose([v1.ToTensor(), v1.Lambda(lambda t: (t * 2) - 1)]), 1.0, (0.001, 0.001)),
    ("to [-1, 1], then Normalize", C(*FLOAT, v2.Lambda(lambda t: 2 * t - 1), v2.Normalize([0.1] * 3, [0.5] * 3)),
     1.0, (0.001, 0.001)),
    ("convert RGB", C(v1.Lambda(lambda img: img.convert("RGB")), v2.PILToTensor()), 255.0, (0.0, 0.0)),
    ("convert L", C(v1.Lambda(lambda img: img.convert("L")), v2.PILToTensor()), 255.0, (0.0, 0.0)),
    ("grey repeated, uint8", C(v2.Grayscale(1), v2.PILToTensor(), v1.Lambda(lambda x: x.repeat(3, 1, 1))), 255.0,
     (0.0, 0.0)),
    # torch's true division makes float32 of a uint8 tensor: the values as floats, then the arithmetic
    ("uint8 / 255, then to [-1, 1]", C(v2.PILToTensor(), v1.Lambda(lambda x: x / 255 * 2 - 1)), 1.0, (0.001, 0.001)),
    ("uint8 * 0.5, a plain function", C(v2.PILToTensor(), halved), 127.5, (0.001, 0.001)),
    ("uint8 float(), then methods", C(v2.PILToTensor(), v1.Lambda(lambda x: x.float().div(255).mul(2).sub(1))), 1.0,
     (0.001, 0.001)),
    ("grey repeated, float, normalized", C(v2.Grayscale(1), *FLOAT, v1.Lambda(lambda x: x.repeat(3, 1, 1)),
                                            v2.Normalize([0.2, 0.3, 0.4], [0.5, 0.6, 0.7])), 1.0, (0.001, 0.001)),
]


@pytest.mark.parametrize("name,transform,scale,bounds", CASES, ids=[case[0] for case in CASES])
def test_the_read_step_matches_the_lambda_on_photographs(photo_files, name, transform, scale, bounds):
    assert transforms.plan(transform, python_fallback=False).python == []
    mean, worst = differences(photo_files, transform, scale)
    assert mean <= bounds[0] and worst <= bounds[1], (name, mean, worst)


def test_a_division_of_uint8_gives_float32_batches_as_torch_does():
    transform = C(v2.PILToTensor(), v1.Lambda(lambda x: x / 255))
    plan = transforms.plan(transform, python_fallback=False)
    assert plan.python == [] and plan.output_dtype == torch.float32
    wraps = v1.Lambda(lambda x: x + 1)   # uint8 + 1 stays uint8 in torch, and wraps at 255: the Python path
    plan = transforms.plan(C(v2.PILToTensor(), wraps), python_fallback=True)
    assert plan.python == [wraps] and "integer arithmetic" in transforms.untranslatable_reason(C(v2.PILToTensor(), wraps))


CASTS = [(lambda x: x.float() * 2, torch.float32), (lambda x: x.half() * 2, torch.float16),
         (lambda x: x.float().bfloat16(), torch.bfloat16), (lambda x: (x.half() / 255).float(), torch.float32)]


@pytest.mark.parametrize("cast,dtype", CASTS, ids=["float", "half", "bfloat16", "half then float"])
@pytest.mark.parametrize("before", [torch.uint8, torch.float16, torch.bfloat16, torch.float32])
def test_a_cast_of_any_image_gives_its_dtype_as_torch_does(before, cast, dtype):
    image = coordinate_image(16, 12)
    transform = C(v2.PILToTensor(), v2.ToDtype(before, scale=True), v1.Lambda(cast))
    assert transforms.plan(transform, python_fallback=False).output_dtype == dtype
    loader = dali_loader(many(image, 4), transform, train=False, batch_size=2, num_threads=1)
    expected = transform(v2.ToImage()(image))
    scale = 255.0 if before == torch.uint8 else 1.0
    for images, _ in loader:
        assert images.dtype == expected.dtype == dtype
        # the arithmetic in float32 here, in torch in the narrower dtype: float16's and bfloat16's rounding
        assert all(((got.float() - expected.float()) / scale).abs().max() <= 2 * 2 ** -8 for got in images)


def test_integer_arithmetic_takes_the_python_path_and_wraps_as_torch():
    from dali_loaders.loader import PythonPathNote

    image = coordinate_image(16, 12)
    transform = C(v2.PILToTensor(), v1.Lambda(lambda x: x * 2 - 1))
    with pytest.warns(PythonPathNote, match="integer arithmetic"):
        loader = dali_loader(many(image, 4), transform, train=False, batch_size=2, num_threads=0)
    expected = torch.from_numpy(image).permute(2, 0, 1) * 2 - 1   # uint8: 200 * 2 - 1 = 143
    batches = [images for images, _ in loader]
    assert len(batches) == 2 and all(torch.equal(image, expected) for batch in batches for image in batch)


@pytest.mark.parametrize("transform,why", [
    (C(v1.Lambda(lambda x: x / 255)), "takes a tensor, and here the image is a PIL image"),
    (C(v2.PILToTensor(), v1.Lambda(lambda img: img.convert("RGB"))), "PIL's convert"),
    (C(v1.Lambda(lambda x: x.repeat(3, 1, 1))), "a PIL image"),
], ids=["division of PIL", "convert on a tensor", "repeat on PIL"])
def test_a_read_lambda_where_it_cannot_run_is_refused_by_name(transform, why):
    loader = dali_loader(many(coordinate_image(16, 12), 4), transform, train=True, batch_size=2, num_threads=1)
    with pytest.raises(ValueError, match=f"Lambda.*{why}"):
        list(loader)
