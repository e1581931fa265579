"""Steps translated on uint8 pixels placed after the conversion to float (ToTensor, ToDtype,
Normalize), as torchvision allows: refused when the recipe is planned, not when the first batch
is made, so that the loader takes the Python path for the recipe (python_fallback=False) or
for the steps from there (python_fallback=True), and serves what DataLoader serves."""
import numpy as np
import pytest
import torch
from test_transforms import C
from torchvision import transforms as v1
from torchvision.transforms import v2

from dali_loaders import DaliLoader, dali_compat, transforms
from dali_loaders.loader import PythonPathNote

pytest.importorskip("nvidia.dali")

FLOAT = [v2.ToImage(), v2.ToDtype(torch.float32, scale=True)]
ON_UINT8 = [v2.RandomApply([v2.RandomAutocontrast()]), v2.AutoAugment(),
            v2.RandAugment(), v2.TrivialAugmentWide(), v2.AugMix(), v2.ElasticTransform(), v2.JPEG(50),
            v2.RandomEqualize(), v2.RandomOrder([v2.RandomInvert(), v2.RandomSolarize(9)])]
try:   # timm's crop, which resizes as RandomResizedCrop does
    from timm.data.transforms import RandomResizedCropAndInterpolation

    ON_UINT8 += [RandomResizedCropAndInterpolation(32), RandomResizedCropAndInterpolation(32, interpolation="random")]
except ImportError:
    pass
ON_FLOAT = [v2.CenterCrop(24), v2.RandomCrop(24), v2.Pad(2), v2.RandomHorizontalFlip(), v2.RandomErasing(),
            v2.Normalize([0.5] * 3, [0.2] * 3), v2.GaussianNoise(),
            # resampled as torch resamples the float tensor
            v2.Resize((40, 40)), v1.Resize(30), v2.RandomResizedCrop(32), v1.RandomResizedCrop(32),
            v2.RandomShortestSize([30]), v2.RandomResize(30, 40), v2.ScaleJitter((40, 40)),
            # colour steps in torch's float arithmetic (tests/test_color_after_float.py)
            v2.GaussianBlur(3), v2.ColorJitter(0.2), v2.Grayscale(3), v2.RandomGrayscale(),
            v2.RandomApply([v2.ColorJitter(0.2), v2.GaussianBlur(3)]),
            # warps of the float tensor (tests/test_warps_after_float.py)
            v2.RandomRotation(10), v2.RandomAffine(5), v2.RandomRotation(10, expand=True)]
if dali_compat.warp_perspective_on_cpu():   # (tests/test_perspective.py)
    ON_FLOAT += [v2.RandomPerspective(), v1.RandomPerspective(), v2.RandomApply([v2.RandomPerspective(0.3)])]


@pytest.mark.parametrize("step", ON_UINT8, ids=[type(s).__name__ for s in ON_UINT8])
def test_a_uint8_step_after_the_float_conversion_is_refused_when_planned(step):
    transform = C(*FLOAT, step)
    why = transforms.untranslatable_reason(transform)
    assert why and why.startswith(f"{transforms.describe(step)} comes after the conversion to float"), why
    assert transforms.plan(transform, python_fallback=True).python == [step]
    with pytest.raises(ValueError, match="comes after the conversion to float"):
        transforms.plan(transform, python_fallback=False)
    assert transforms.untranslatable_reason(C(step, *FLOAT)) is None   # before it: translated


@pytest.mark.parametrize("step", ON_FLOAT, ids=[type(s).__name__ for s in ON_FLOAT])
def test_steps_that_take_floats_stay_translated_after_it(step):
    assert transforms.untranslatable_reason(C(*FLOAT, step)) is None


def folder(tmp_path):
    from PIL import Image

    rng = np.random.default_rng(0)
    for k in range(10):
        (tmp_path / f"c{k % 2}").mkdir(exist_ok=True)
        pixels = rng.integers(0, 256, (30 + 3 * k, 50 - 2 * k, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(tmp_path / f"c{k % 2}" / f"{k}.png")
    return str(tmp_path)


@pytest.mark.parametrize("fallback", [False, True], ids=["python path", "python steps in DALI"])
def test_the_loader_serves_what_dataloader_serves(tmp_path, fallback):
    """A sharpness step after ToTensor: the Python path serves DataLoader's batches exactly;
    python_fallback=True runs it in Python after the conversion DALI made."""
    from torchvision.datasets import ImageFolder

    transform = v1.Compose([v1.ToTensor(), v1.RandomAdjustSharpness(2.0, p=1.0), v1.CenterCrop(20)])
    dataset = ImageFolder(folder(tmp_path), transform=transform)
    if fallback:
        with pytest.warns(RuntimeWarning, match="RandomAdjustSharpness comes after the conversion to float"):
            loader = DaliLoader(dataset, batch_size=4, python_fallback=True)
        assert loader.route == "dali"
    else:
        with pytest.warns(PythonPathNote, match="RandomAdjustSharpness comes after the conversion to float"):
            loader = DaliLoader(dataset, batch_size=4)
    theirs = list(torch.utils.data.DataLoader(dataset, batch_size=4))
    ours = list(loader)
    assert len(ours) == len(theirs) == 3
    for (a, la), (b, lb) in zip(ours, theirs):
        assert torch.equal(la, lb) and a.dtype == b.dtype == torch.float32
        assert (a - b).abs().max().item() <= (1e-6 if fallback else 0.0)
