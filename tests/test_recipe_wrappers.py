"""Transform wrappers as users write them: torchvision's reference presets (a class holding
`self.transforms = T.Compose([...])` whose __call__ only hands the image on) translate whole;
a wrapper that does anything else, or whose source cannot be read, is refused by name."""
import functools

import numpy as np
import pytest
import torch
from photos import photo_arrays
from reference_presets import ClassificationPresetEval, ClassificationPresetTrain
from test_transforms import dali_outputs
from torchvision import transforms as v1
from torchvision.transforms import InterpolationMode as IM

from dali_loaders import transforms
from dali_loaders.loader import dali_loader
from dali_loaders.sources.arrays import ArraySource

pytestmark = pytest.mark.filterwarnings("ignore:.*python_fallback=True:RuntimeWarning")


def preset_outputs(source, preset):
    """The preset called on each image as torchvision's dataset hands it over (PIL, RGB)."""
    return [transforms.as_tensor(preset(source.pil_image(i))).float().numpy() for i in range(len(source))]


@pytest.mark.parametrize("interpolation", [IM.BILINEAR, IM.BICUBIC])
@pytest.mark.parametrize("resize_size,crop_size", [(112, 96), (72, 64)])
def test_v1_pil_eval_presets_give_the_presets_own_images(photo_files, interpolation, resize_size,  # noqa: F811
                                                         crop_size):
    preset = ClassificationPresetEval(crop_size=crop_size, resize_size=resize_size, interpolation=interpolation)
    assert transforms.untranslatable_reason(preset) is None
    assert not transforms.plan(preset, python_fallback=False).python
    ours, theirs = dali_outputs(photo_files, preset), preset_outputs(photo_files, preset)
    assert len(ours) == len(theirs) == len(photo_files)
    for k, (a, b) in enumerate(zip(ours, theirs)):
        assert a.shape == b.shape == (3, crop_size, crop_size)
        assert np.abs(a - b).max() <= 1e-6, f"image {k}"   # float32 rounding of Normalize only


@pytest.mark.parametrize("use_v2", [False, True])
def test_tensor_backend_eval_preset_is_the_compose_it_holds(photo_files, use_v2):  # noqa: F811
    preset = ClassificationPresetEval(crop_size=64, resize_size=72, backend="tensor", use_v2=use_v2)
    assert transforms.flatten(preset) == list(preset.transforms.transforms)
    for a, b in zip(dali_outputs(photo_files, preset), dali_outputs(photo_files, preset.transforms)):
        assert np.array_equal(a, b)


TRAIN_OPTIONS = [dict(), dict(auto_augment_policy="ra"), dict(auto_augment_policy="ta_wide", random_erase_prob=0.25),
                 dict(auto_augment_policy="imagenet", use_v2=True), dict(backend="tensor", use_v2=True)]


def arrays(size=40):
    images = photo_arrays(size)
    return ArraySource(images, np.arange(len(images)), "photos")


def one_epoch(transform, **kwargs):
    loader = dali_loader(arrays(), transform, train=True, batch_size=4, num_threads=1, seed=3, **kwargs)
    return [batch for batch in loader]


@pytest.mark.parametrize("options", TRAIN_OPTIONS, ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()) or "plain")
def test_train_presets_translate_whole_and_draw_as_the_compose_they_hold(options):
    preset = ClassificationPresetTrain(crop_size=32, **options)
    recipe = transforms.plan(preset, python_fallback=False)
    assert not recipe.python and recipe.translated == list(preset.transforms.transforms)
    wrapped, plain = one_epoch(preset), one_epoch(preset.transforms)
    assert len(wrapped) == len(plain) > 1
    for (x, y), (x2, y2) in zip(wrapped, plain):
        assert x.shape[1:] == (3, 32, 32) and x.dtype == torch.float32
        assert torch.equal(x, x2) and torch.equal(y, y2)


def test_a_wrapper_of_a_wrapper_and_a_torch_module_wrapper_unwrap():
    class Outer:
        def __init__(self, inner):
            self.inner = inner

        def __call__(self, image):
            """Docstrings are allowed."""
            return self.inner(image)

    class ModuleWrapper(torch.nn.Module):
        def __init__(self, steps):
            super().__init__()
            self.steps = steps

        def forward(self, *inputs):
            return self.steps(*inputs)

    class Slotted:
        __slots__ = ("steps",)

        def __init__(self, steps):
            self.steps = steps

        def __call__(self, image):
            return self.steps(image)

    preset = ClassificationPresetEval(crop_size=32, resize_size=40)
    steps = list(preset.transforms.transforms)
    assert transforms.flatten(Outer(preset)) == steps
    assert transforms.flatten(Slotted(preset)) == steps
    assert transforms.flatten(ModuleWrapper(v1.Compose(steps))) == steps
    hooked = ModuleWrapper(v1.Compose(steps))
    hooked.register_forward_hook(lambda module, inputs, output: output * 2)
    assert "has forward hooks" in transforms.untranslatable_reason(hooked)


# -- refused, by name -------------------------------------------------------------------------------


class PrintingPreset(ClassificationPresetEval):
    def __call__(self, img):
        print(img.size)
        return self.transforms(img)


class TwicePreset(ClassificationPresetEval):
    def __call__(self, img):
        return self.transforms(self.transforms(img))


class LabelPreset(ClassificationPresetEval):
    def __call__(self, img, target):
        return self.transforms(img), int(target)


class MethodPreset(ClassificationPresetEval):
    def __call__(self, img):
        return self.run(img)

    def run(self, img):
        return self.transforms(img)


class PropertyPreset(ClassificationPresetEval):
    @property
    def steps(self):
        return self.transforms

    def __call__(self, img):
        return self.steps(img)


def logged(method):
    @functools.wraps(method)
    def logging(self, img):
        print("called")
        return method(self, img)
    return logging


class DecoratedPreset(ClassificationPresetEval):
    @logged
    def __call__(self, img):
        return self.transforms(img)


class PartialPreset(functools.partial):   # a C callable: functools.partial's __call__
    pass


def exec_preset():
    namespace = {}
    exec("class ExecPreset:\n"
         "    def __init__(self, steps):\n        self.transforms = steps\n"
         "    def __call__(self, img):\n        return self.transforms(img)\n", namespace)
    return namespace["ExecPreset"](ClassificationPresetEval(crop_size=32).transforms)


OPTIONS = dict(crop_size=32, resize_size=40)
REFUSED = [
    (lambda: PrintingPreset(**OPTIONS), r"PrintingPreset\.__call__ does more than .*: `print\(img\.size\)`"),
    (lambda: TwicePreset(**OPTIONS), r"TwicePreset\.__call__ returns `self\.transforms\(self\.transforms\(img\)\)`"),
    (lambda: LabelPreset(**OPTIONS), r"LabelPreset\.__call__ takes \(self, img, target\), not the image alone"),
    (lambda: MethodPreset(**OPTIONS), r"self\.run is a function of MethodPreset"),
    (lambda: PropertyPreset(**OPTIONS), r"self\.steps is a property of PropertyPreset"),
    (lambda: DecoratedPreset(**OPTIONS), r"DecoratedPreset\.__call__ is decorated \(@logged\)"),
    (lambda: PartialPreset(ClassificationPresetEval(**OPTIONS).transforms),
     r"PartialPreset\.__call__ is not Python code"),
    (exec_preset, r"the source of ExecPreset\.__call__ is not available"),
]


@pytest.mark.parametrize("make,why", REFUSED, ids=[w.split("\\")[0].split(" ")[0] for _, w in REFUSED])
def test_a_wrapper_that_does_more_is_refused_naming_its_class_and_what(make, why):
    wrapper = make()
    reason = transforms.untranslatable_reason(wrapper)
    assert reason is not None and type(wrapper).__name__ in reason
    assert pytest.importorskip("re").search(why, reason), reason
    assert transforms.flatten(wrapper) == [wrapper]
    with pytest.raises(ValueError, match=why):
        transforms.plan(wrapper, python_fallback=False)


def test_a_refused_wrapper_runs_whole_on_the_python_path(capfd):
    preset = PrintingPreset(crop_size=24, resize_size=28)
    recipe = transforms.plan(preset, python_fallback=True)
    assert recipe.translated == [] and recipe.python == [preset] and "PrintingPreset" in recipe.why
    source = arrays()
    loader = dali_loader(source, preset, train=False, batch_size=4, num_threads=1, seed=3, python_fallback=True)
    ours = torch.cat([x for x, _ in loader])
    assert "(40, 40)" in capfd.readouterr().out   # the wrapper itself ran, print and all
    expected = torch.stack([preset(source.pil_image(i)) for i in range(len(source))])
    assert ours.shape == expected.shape == (len(source), 3, 24, 24)
    assert torch.allclose(ours, expected, atol=1e-6)


def test_a_plain_function_is_named_without_a_wrapper_reading():
    """A function is read as a one-line lambda (transforms/lambdas.py) or named with why not."""
    def brighter(image):
        return image.point(lambda v: v * 2)

    reason = transforms.untranslatable_reason(brighter)
    assert reason.startswith("function test_a_plain_function_is_named_without_a_wrapper_reading.<locals>.brighter: ")
    assert "calls .point(...)" in reason and "mere wrapper" not in reason


def test_untranslatable_reason_names_the_step_inside_a_wrapper():
    preset = ClassificationPresetTrain(crop_size=32, auto_augment_policy="ta_wide", interpolation=IM.BICUBIC)
    assert transforms.untranslatable_reason(preset).startswith("TrivialAugmentWide: interpolation")
    assert transforms.untranslatable_reason(ClassificationPresetTrain(crop_size=32, auto_augment_policy="augmix")) is None
    assert transforms.untranslatable_reason(None) is None


def test_daliloader_reads_a_preset_in_dali_and_names_a_refused_wrapper_on_the_python_path(photo_files):  # noqa: F811
    from dali_loaders import DaliLoader
    from dali_loaders.loader import PythonPathNote

    preset = ClassificationPresetEval(crop_size=32, resize_size=40)
    loader = DaliLoader(photo_files, batch_size=4, transform=preset)
    assert loader.route == "dali"
    ours = torch.cat([x for x, _ in loader])
    expected = torch.stack([preset(photo_files.pil_image(i)) for i in range(len(photo_files))])
    assert (ours - expected).abs().max() <= 1e-6   # float32 rounding of Normalize only
    with pytest.warns(PythonPathNote, match=r"PrintingPreset\.__call__ does more than"):
        loader = DaliLoader(photo_files, batch_size=4, transform=PrintingPreset(crop_size=32, resize_size=40))
    assert loader.route.startswith("python") and "PrintingPreset" in loader.route
