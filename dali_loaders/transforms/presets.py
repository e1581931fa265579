"""torchvision's own preprocessing for its pretrained weights (`weights.transforms()`, an
ImageClassification object): read as the steps its forward runs, so that evaluating or
fine-tuning with the weights' transform runs in DALI."""
import torch
from torchvision import transforms as v1

from ._core import expands


def _image_classification_class() -> type:
    """The class behind every classification weights' transforms() (a partial of it), reached
    through the public weights enum rather than torchvision's private module."""
    from torchvision.models import ResNet18_Weights

    return ResNet18_Weights.IMAGENET1K_V1.transforms.func


@expands(_image_classification_class())
def image_classification_steps(step) -> list:
    """resize (short side, or the sizes given), centre crop, to a tensor, to float, normalize:
    what ImageClassification.forward does to a PIL image or a uint8 tensor."""
    return [v1.Resize(step.resize_size, interpolation=step.interpolation, antialias=step.antialias),
            v1.CenterCrop(step.crop_size), v1.PILToTensor(), v1.ConvertImageDtype(torch.float),
            v1.Normalize(step.mean, step.std)]
