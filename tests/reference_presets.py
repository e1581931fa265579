"""torchvision's classification reference presets (references/classification/presets.py is not
installed with torchvision), rebuilt as the reference script builds them: the same steps, in
the same order, for the same arguments, in the v1 (use_v2=False) or v2 API."""
import torch
from torchvision.transforms import InterpolationMode

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def api(use_v2: bool):
    if use_v2:
        from torchvision.transforms import v2
        return v2
    from torchvision import transforms
    return transforms


def to_float(T, use_v2: bool):
    return T.ToDtype(torch.float, scale=True) if use_v2 else T.ConvertImageDtype(torch.float)


def auto_augment(T, policy: str, interpolation, ra_magnitude: int = 9, augmix_severity: int = 3):
    """The reference script's --auto-augment: ra, ta_wide, augmix, or an AutoAugmentPolicy value."""
    if policy == "ra":
        return T.RandAugment(interpolation=interpolation, magnitude=ra_magnitude)
    if policy == "ta_wide":
        return T.TrivialAugmentWide(interpolation=interpolation)
    if policy == "augmix":
        return T.AugMix(interpolation=interpolation, severity=augmix_severity)
    return T.AutoAugment(policy=T.AutoAugmentPolicy(policy), interpolation=interpolation)


def classification_train(*, crop_size, interpolation=InterpolationMode.BILINEAR, hflip_prob=0.5,
                         auto_augment_policy=None, random_erase_prob=0.0, backend="pil", use_v2=False,
                         aa_interpolation=None):
    """ClassificationPresetTrain. `aa_interpolation`: the auto-augment's own, when a test wants
    it apart from the crop's (the script passes one interpolation to both)."""
    T = api(use_v2)
    steps = [T.PILToTensor()] if backend == "tensor" else []
    steps.append(T.RandomResizedCrop(crop_size, interpolation=interpolation, antialias=True))
    if hflip_prob > 0:
        steps.append(T.RandomHorizontalFlip(hflip_prob))
    if auto_augment_policy is not None:
        steps.append(auto_augment(T, auto_augment_policy, aa_interpolation or interpolation))
    if backend == "pil":
        steps.append(T.PILToTensor())
    steps += [to_float(T, use_v2), T.Normalize(mean=MEAN, std=STD)]
    if random_erase_prob > 0:
        steps.append(T.RandomErasing(p=random_erase_prob))
    if use_v2:
        steps.append(T.ToPureTensor())
    return T.Compose(steps)


def classification_eval(*, crop_size, resize_size=256, interpolation=InterpolationMode.BILINEAR, backend="pil",
                        use_v2=False):
    """ClassificationPresetEval."""
    T = api(use_v2)
    steps = [T.PILToTensor()] if backend == "tensor" else []
    steps += [T.Resize(resize_size, interpolation=interpolation, antialias=True), T.CenterCrop(crop_size)]
    if backend == "pil":
        steps.append(T.PILToTensor())
    steps += [to_float(T, use_v2), T.Normalize(mean=MEAN, std=STD)]
    if use_v2:
        steps.append(T.ToPureTensor())
    return T.Compose(steps)


class ClassificationPresetTrain:
    """The reference's class as users hold it: the steps in `self.transforms`, and a __call__
    that only hands the image to them."""

    def __init__(self, **options):
        self.transforms = classification_train(**options)

    def __call__(self, img):
        return self.transforms(img)


class ClassificationPresetEval:
    def __init__(self, **options):
        self.transforms = classification_eval(**options)

    def __call__(self, img):
        return self.transforms(img)
