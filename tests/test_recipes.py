"""transform=: output dtype and memory format on both backends, the named error for what cannot
be translated, and python_fallback=True (Albumentations included), seeded like the rest."""
import warnings

import numpy as np
import pytest
import torch
from photos import photo_arrays, write_photo_folder
from torchvision.transforms import v2

from dali_loaders import (
    get_cifar_iter_dali,
    get_cifar_iter_torch,
    get_imagefolder_iter_dali,
    get_imagefolder_iter_torch,
)
from dali_loaders.testing.synthetic import write_cifar


@pytest.fixture(scope="module")
def photo_dir(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("photos"))
    write_photo_folder(root, max_side=240)
    return root


@pytest.fixture(scope="module")
def cifar_photos(tmp_path_factory):
    """A CIFAR-10 set whose images are real photographs shrunk to 32x32."""
    photos = photo_arrays(32)
    root = str(tmp_path_factory.mktemp("cifar"))
    return write_cifar(root, "cifar10", 28, 14, images=lambda n, offset: photos[(np.arange(n) + offset) % len(photos)])


def both(root, transform, **kwargs):
    """(DALI batches, twin batches) over the whole val split, concatenated."""
    dali = get_imagefolder_iter_dali(root, 4, False, 1, transform=transform, **kwargs)
    twin = get_imagefolder_iter_torch(root, 4, False, 0, transform=transform, **kwargs)
    return [torch.cat([images for images, _ in loader]) for loader in (dali, twin)]


def resize_crop(*tail):
    return v2.Compose([v2.Resize(120), v2.CenterCrop(112), *tail])


# -- output dtype and layout ---------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("memory_format", [torch.contiguous_format, torch.channels_last])
def test_dtype_and_memory_format_follow_the_transform_on_both_backends(photo_dir, dtype, memory_format):
    transform = resize_crop(v2.ToImage(), v2.ToDtype(dtype, scale=True), v2.Normalize([0.5] * 3, [0.25] * 3))
    dali, twin = both(photo_dir, transform, memory_format=memory_format)
    for images in (dali, twin):
        assert images.dtype == dtype and images.shape[1:] == (3, 112, 112)
        assert images.is_contiguous(memory_format=memory_format)
    step = {torch.float32: 0, torch.float64: 0, torch.float16: 2 ** -9, torch.bfloat16: 2 ** -6}[dtype]  # its rounding at ~2
    difference = (dali.float() - twin.float()).abs() * 0.25   # back on the 0..1 scale
    assert difference.mean() <= 0.3 / 255 + step and difference.max() <= 1 / 255 + 2 * step + 1e-6


@pytest.mark.parametrize("memory_format", [torch.contiguous_format, torch.channels_last])
def test_a_transform_without_float_conversion_gives_uint8_pixels(photo_dir, memory_format):
    dali, twin = both(photo_dir, resize_crop(v2.PILToTensor()), memory_format=memory_format)
    assert dali.dtype == twin.dtype == torch.uint8
    assert dali.is_contiguous(memory_format=memory_format) and twin.is_contiguous(memory_format=memory_format)
    assert (dali.int() - twin.int()).abs().max() <= 1


def test_channels_last_comes_from_dali_without_a_copy(photo_dir):
    """The batch is a view of DALI's NHWC output: strides of channels_last, storage of NHWC size."""
    loader = get_imagefolder_iter_dali(photo_dir, 4, False, 1, transform=resize_crop(v2.PILToTensor()),
                                       memory_format=torch.channels_last)
    images, _ = next(iter(loader))
    assert images.stride() == (112 * 112 * 3, 1, 112 * 3, 3)
    assert images.untyped_storage().nbytes() == images.numel()


@pytest.mark.parametrize("make", [get_cifar_iter_dali, get_cifar_iter_torch])
def test_memory_format_is_checked(cifar_photos, make):
    with pytest.raises(ValueError, match="memory_format must be"):
        make("val", cifar_photos, 4, 1, memory_format=torch.preserve_format)


def test_default_recipe_is_a_compose_both_backends_share(cifar_photos):
    dali = torch.cat([x for x, _ in get_cifar_iter_dali("val", cifar_photos, 8, 1)])
    twin = torch.cat([x for x, _ in get_cifar_iter_torch("val", cifar_photos, 8, 0)])
    assert dali.dtype == torch.float32 and (dali - twin).abs().max() <= 1e-5


# -- what cannot be translated -------------------------------------------------------------


class Brighter(torch.nn.Module):
    """A user's own step: +10 grey levels on a uint8 CHW tensor (what follows PILToTensor)."""

    def forward(self, image):
        return (image.int() + 10).clamp(0, 255).to(torch.uint8)


def test_an_unknown_step_is_named_with_the_supported_list(photo_dir):
    from dali_loaders import transforms
    from dali_loaders.loader import PythonPathNote

    recipe = resize_crop(v2.PILToTensor(), Brighter())
    with pytest.raises(ValueError, match=r"test_recipes.Brighter has no DALI translation.*Supported: .*Resize"):
        transforms.plan(recipe, python_fallback=False)
    with pytest.warns(PythonPathNote, match=r"test_recipes.Brighter has no DALI translation"):
        loader = get_imagefolder_iter_dali(photo_dir, 4, False, 1, transform=recipe, device="cpu")
    assert loader.route.startswith("python")


def test_an_unsupported_parameter_takes_the_python_path_by_name(cifar_photos):
    from dali_loaders.loader import PythonPathNote

    with pytest.warns(PythonPathNote, match="RandomRotation: expand=True with a center"):
        get_cifar_iter_dali("train", cifar_photos, 4, 1, transform=v2.RandomRotation(10, expand=True, center=(3, 4)))


def test_python_fallback_runs_the_rest_in_python_after_the_translated_steps(photo_dir):
    transform = resize_crop(v2.PILToTensor(), Brighter(), v2.ToDtype(torch.float32, scale=True))
    with pytest.warns(RuntimeWarning, match="Brighter has no DALI translation.*1 step"):
        dali, twin = both(photo_dir, transform, python_fallback=True)
    assert dali.dtype == twin.dtype == torch.float32
    difference = (dali - twin).abs()
    assert difference.mean() <= 0.3 / 255 and difference.max() <= 1 / 255 + 1e-6


def test_python_fallback_hands_a_pil_image_where_the_twin_has_one(photo_dir):
    """Before any conversion the twin holds a PIL image: so does the step run in Python."""
    seen = []

    def record(image):
        seen.append(type(image).__name__)
        return image

    transform = v2.Compose([v2.Resize(120), v2.CenterCrop(112), v2.Lambda(record), v2.PILToTensor()])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        dali, twin = both(photo_dir, transform, python_fallback=True)
    assert set(seen) == {"Image"} and (dali.int() - twin.int()).abs().max() <= 1


def test_albumentations_pipeline_runs_in_python_and_equals_the_twin(photo_dir):
    """One Albumentations definition for both backends: it gets HWC uint8 arrays in both."""
    A = pytest.importorskip("albumentations")
    from albumentations.pytorch import ToTensorV2

    transform = A.Compose([A.Resize(128, 160), A.CenterCrop(96, 96), A.Normalize(), ToTensorV2()])
    from dali_loaders.loader import PythonPathNote

    with pytest.warns(PythonPathNote, match="albumentations.Compose has no DALI translation"):
        get_imagefolder_iter_dali(photo_dir, 4, False, 1, transform=transform)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        dali, twin = both(photo_dir, transform, python_fallback=True)
    assert dali.shape[1:] == (3, 96, 96) and torch.equal(dali, twin)


class Jitter(torch.nn.Module):
    """Random per call from all three generators the fallback seeds."""

    def forward(self, image):
        import random

        shift = random.randint(0, 9) + int(np.random.randint(0, 9)) + int(torch.randint(0, 9, ()))
        return (image.int() + shift).clamp(0, 255).to(torch.uint8)


def epoch_images(loader):
    return torch.cat([images for images, _ in loader])


def test_python_steps_are_seeded_from_seed_epoch_and_rank(cifar_photos):
    """Same seed and epoch: the same draws, also after a resume; another epoch: others."""
    def make():
        return get_cifar_iter_dali("train", cifar_photos, 8, 1, seed=5, python_fallback=True,
                                   transform=v2.Compose([v2.PILToTensor(), Jitter()]))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        first, second = make(), make()
        epoch0, epoch1 = epoch_images(first), epoch_images(first)
        assert torch.equal(epoch0, epoch_images(second))
        assert not torch.equal(epoch0[:8], epoch1[:8])
        resumed = make()
        batches = iter(resumed)
        next(batches)
        state = resumed.state_dict()
        fresh = make()
        fresh.load_state_dict(state)
        assert torch.equal(epoch_images(fresh), epoch0[8:])
