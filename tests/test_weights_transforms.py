"""torchvision's weights' own preprocessing (`weights.transforms()`) read as its steps: the
loader's batches against the ImageClassification object applied by torchvision, on
photographs, for weights with bilinear and bicubic resizes."""
import pytest
from test_transforms import differences
from torchvision.models import EfficientNet_B0_Weights, ResNet50_Weights

from dali_loaders import transforms

pytest.importorskip("nvidia.dali")


def small(weights, crop=48, resize=56):
    """The weights' transform at a size the photographs (longest side 160) exercise."""
    return weights.transforms(crop_size=crop, resize_size=resize)


@pytest.mark.parametrize("weights", [ResNet50_Weights.IMAGENET1K_V2, EfficientNet_B0_Weights.IMAGENET1K_V1],
                         ids=["bilinear", "bicubic"])
def test_weights_transforms_run_in_dali_and_match_torchvision(photo_files, weights):
    transform = small(weights)
    recipe = transforms.plan(transform, python_fallback=False)
    assert not recipe.python
    assert [type(s).__name__ for s in recipe.translated] == ["Resize", "CenterCrop", "PILToTensor",
                                                            "ConvertImageDtype", "Normalize"]
    assert recipe.translated[0].interpolation == transform.interpolation
    mean, worst = differences(photo_files, transform, 1 / 0.225)
    assert mean <= 0.02 and worst <= 1.0, (mean, worst)


def test_the_default_sizes_are_read_from_the_object():
    transform = ResNet50_Weights.IMAGENET1K_V2.transforms()
    resize, crop = transforms.plan(transform, python_fallback=False).translated[:2]
    assert (resize.size, crop.size) == ([232], (224, 224))
