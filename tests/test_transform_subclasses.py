"""Subclasses of torchvision's transforms as repos write them to fix their own defaults
(DINOv2's `class GaussianBlur(v2.RandomApply)`, with an `__init__` and nothing else) run in
DALI as the class they subclass; a subclass that changes what runs takes the Python path.
torch's nn.Sequential (torchvision's scriptable Compose) and nn.Identity are read as they run."""
import numpy as np
import pytest
import torch
from test_recipe_wrappers import arrays
from test_transforms import dali_outputs
from torchvision import transforms as v1
from torchvision.transforms import v2

from dali_loaders import DaliLoader, transforms
from dali_loaders.loader import PythonPathNote

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


class ImageNetNormalize(v1.Normalize):
    def __init__(self):
        super().__init__(MEAN, STD)


class ShortSide(v2.Resize):
    """A docstring and a repr of its own change nothing that runs."""

    def __init__(self, side):
        super().__init__(side, antialias=True)

    def __repr__(self):
        return f"ShortSide({self.size})"


class EvalRecipe(v1.Compose):
    def __init__(self, side, crop):
        super().__init__([v1.Resize(side), v1.CenterCrop(crop), v1.ToTensor(), ImageNetNormalize()])


class BlurSometimes(v2.RandomApply):
    """DINOv2's GaussianBlur: `p` is the chance to keep the image as it is."""

    def __init__(self, *, p=0.5, radius_min=0.1, radius_max=2.0):
        keep_p = 1 - p
        transform = v2.GaussianBlur(kernel_size=9, sigma=(radius_min, radius_max))
        super().__init__(transforms=[transform], p=keep_p)


class Negated(v1.Normalize):   # a forward of its own: it is not Normalize
    def forward(self, tensor):
        return -super().forward(tensor)


class Zeroed(v1.Compose):   # a __call__ of its own: its steps are not the recipe
    def __call__(self, image):
        return super().__call__(image) * 0


class ExtraMethod(v1.CenterCrop):   # a method besides __init__ may be called by anything
    def describe(self):
        return "crop"


def test_a_subclass_that_only_sets_arguments_gives_its_library_classes_pixels(photo_files):  # noqa: F811
    recipe = EvalRecipe(40, 32)
    assert [type(step) for step in transforms.flatten(recipe)] == [v1.Resize, v1.CenterCrop, v1.ToTensor,
                                                                   v1.Normalize]
    assert transforms.flatten(recipe)[-1].mean == MEAN   # the subclass's arguments, read
    ours = dali_outputs(photo_files, recipe)
    theirs = [recipe(photo_files.pil_image(i)).numpy() for i in range(len(photo_files))]
    for k, (a, b) in enumerate(zip(ours, theirs)):
        assert a.shape == b.shape == (3, 32, 32)
        assert np.abs(a - b).max() <= 1e-6, f"image {k}"


def test_a_v2_subclass_with_a_repr_of_its_own_is_its_library_class(photo_files):  # noqa: F811
    recipe = v2.Compose([v2.PILToTensor(), ShortSide(36), v2.CenterCrop(32)])
    assert [type(step) for step in transforms.flatten(recipe)][1] is v2.Resize
    plain = v2.Compose([v2.PILToTensor(), v2.Resize(36, antialias=True), v2.CenterCrop(32)])
    ours, base = dali_outputs(photo_files, recipe), dali_outputs(photo_files, plain)
    for k, (a, b) in enumerate(zip(ours, base)):
        assert a.shape == b.shape == (3, 32, 32)
        assert np.array_equal(a, b), f"image {k}"


@pytest.mark.parametrize("blur_chance", [0.0, 1.0])
def test_dinov2s_blur_runs_in_dali_with_its_own_probability(blur_chance):
    """BlurSometimes(p=1.0) never blurs (its RandomApply keeps p=0); p=0.0 always does."""
    sharp = v2.Compose([v2.ToImage(), v2.CenterCrop(32)])
    recipe = v2.Compose([BlurSometimes(p=1.0 - blur_chance), v2.ToImage(), v2.CenterCrop(32)])
    loader = DaliLoader(arrays(), batch_size=8, transform=recipe, device="cpu", seed=0)
    assert loader.route == "dali"
    blurred = torch.cat([x for x, _ in loader])
    plain = torch.cat([x for x, _ in DaliLoader(arrays(), batch_size=8, transform=sharp, device="cpu", seed=0)])
    changed = (blurred.float() - plain.float()).abs().flatten(1).amax(1) > 0
    assert changed.tolist() == [bool(blur_chance)] * len(plain)


def tensor(image):
    return v1.ToTensor()(image)


@pytest.mark.parametrize("make,twin", [
    (lambda: v1.Compose([v1.ToTensor(), Negated(MEAN, STD)]), lambda im: -v1.Normalize(MEAN, STD)(tensor(im))),
    (lambda: Zeroed([v1.ToTensor(), v1.CenterCrop(32)]), lambda im: v1.CenterCrop(32)(tensor(im)) * 0),
    (lambda: v1.Compose([v1.ToTensor(), ExtraMethod(32)]), lambda im: v1.CenterCrop(32)(tensor(im))),
], ids=["forward", "compose-call", "method"])
def test_a_subclass_that_changes_what_runs_takes_the_python_path_and_runs(make, twin):
    recipe, source = make(), arrays()
    assert transforms.untranslatable_reason(recipe) is not None
    with pytest.warns(PythonPathNote):
        loader = DaliLoader(source, batch_size=8, transform=recipe, device="cpu", seed=0)
    assert loader.route.startswith("python")
    ours = torch.cat([x for x, _ in loader])
    expected = torch.stack([twin(source.pil_image(i)) for i in range(len(source))])
    assert ours.shape == expected.shape and torch.equal(ours, expected)


def test_nn_sequential_and_identity_run_as_the_compose_of_their_steps(photo_files):  # noqa: F811
    """torchvision documents nn.Sequential of its transforms as the scriptable Compose."""
    resize, crop = v2.Resize(36, antialias=False), v2.CenterCrop(32)
    recipe = v1.Compose([v1.PILToTensor(), torch.nn.Sequential(resize, crop, torch.nn.Identity()),
                         v1.ConvertImageDtype(torch.float32), torch.nn.Sequential()])
    assert [type(step) for step in transforms.flatten(recipe)] == [v1.PILToTensor, v2.Resize, v2.CenterCrop,
                                                                   torch.nn.Identity, v1.ConvertImageDtype]
    ours = dali_outputs(photo_files, recipe)
    composed = dali_outputs(photo_files, v1.Compose([v1.PILToTensor(), resize, crop, v1.ConvertImageDtype(torch.float32)]))
    theirs = [recipe(photo_files.pil_image(i)).numpy() for i in range(len(photo_files))]
    for k, (a, b, c) in enumerate(zip(ours, composed, theirs)):
        assert a.shape == c.shape == (3, 32, 32) and np.array_equal(a, b), f"image {k}"
        assert np.abs(a - c).max() <= 1 / 255 + 1e-6, f"image {k}"   # the tensor resize's rounding


def test_a_hooked_nn_sequential_runs_its_hook_on_the_python_path():
    calls = []
    steps = torch.nn.Sequential(v2.PILToTensor(), v2.CenterCrop(32))
    steps.register_forward_hook(lambda module, args, out: calls.append(tuple(out.shape)) or out.flip(-1))
    assert transforms.untranslatable_reason(steps) is not None
    source = arrays()
    with pytest.warns(PythonPathNote):
        loader = DaliLoader(source, batch_size=8, transform=steps, device="cpu", seed=0)
    ours = torch.cat([x for x, _ in loader])
    expected = torch.stack([v1.CenterCrop(32)(v1.PILToTensor()(source.pil_image(i))).flip(-1)
                            for i in range(len(source))])
    assert calls and torch.equal(ours, expected)
