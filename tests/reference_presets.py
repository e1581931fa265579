"""torchvision's classification reference presets (references/classification/presets.py is not
installed with torchvision), rebuilt as the reference script builds them: the same steps, in
the same order, for the same arguments, in the v1 (use_v2=False) or v2 API; and its batch
mixing (transforms.py's get_mixup_cutmix): v2's MixUp and CutMix, or, in v1, the reference's
own RandomMixUp and RandomCutMix, rebuilt here from what they compute."""
import math

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


# -- references/classification/transforms.py: the batch mixing train.py's collate_fn applies ----------


class _ReferenceMixing(torch.nn.Module):
    """What the v1 reference's RandomMixUp and RandomCutMix share: on a float (B, C, H, W)
    batch and int64 (B,) labels, the labels one-hot; with probability p (torch's global
    generator), lambda ~ Beta(alpha, alpha) and `mix`, else the batch as it was."""

    def __init__(self, num_classes: int, p: float = 0.5, alpha: float = 1.0):
        super().__init__()
        self.num_classes, self.p, self.alpha = num_classes, p, alpha

    def forward(self, batch, target):
        if batch.ndim != 4 or target.ndim != 1 or not batch.is_floating_point() or target.dtype != torch.int64:
            raise ValueError("the reference's mixing takes a float (B, C, H, W) batch and int64 (B,) labels")
        batch, target = batch.clone(), torch.nn.functional.one_hot(target, self.num_classes).to(batch.dtype)
        if torch.rand(1).item() >= self.p:
            return batch, target
        return self.mix(batch, target, float(torch._sample_dirichlet(torch.tensor([self.alpha, self.alpha]))[0]))


class RandomMixUp(_ReferenceMixing):
    """Every image and label blended with the one before it (the batch rolled by one)."""

    def mix(self, batch, target, lam: float):
        return batch * lam + batch.roll(1, 0) * (1.0 - lam), target * lam + target.roll(1, 0) * (1.0 - lam)


class RandomCutMix(_ReferenceMixing):
    """A box around a uniform centre, its half sides sqrt(1 - lambda) / 2 of the image's,
    clipped, filled from the image before; lambda then the unboxed fraction, the labels
    blended with it."""

    def mix(self, batch, target, lam: float):
        height, width = batch.shape[-2:]
        centre_x, centre_y = int(torch.randint(width, (1,))), int(torch.randint(height, (1,)))
        half = 0.5 * math.sqrt(1.0 - lam)
        x1, x2 = max(centre_x - int(half * width), 0), min(centre_x + int(half * width), width)
        y1, y2 = max(centre_y - int(half * height), 0), min(centre_y + int(half * height), height)
        batch[..., y1:y2, x1:x2] = batch.roll(1, 0)[..., y1:y2, x1:x2]
        lam = 1.0 - (x2 - x1) * (y2 - y1) / (width * height)
        return batch, target * lam + target.roll(1, 0) * (1.0 - lam)


def get_mixup_cutmix(*, mixup_alpha: float, cutmix_alpha: float, num_classes: int, use_v2: bool):
    """What train.py's collate_fn applies after default_collate: a RandomChoice of MixUp (if
    mixup_alpha > 0) and CutMix (if cutmix_alpha > 0), v2's or the v1 reference's (p=1.0);
    None if neither."""
    T = api(use_v2)
    chosen = []
    if mixup_alpha > 0:
        chosen.append(T.MixUp(alpha=mixup_alpha, num_classes=num_classes) if use_v2 else
                      RandomMixUp(num_classes, p=1.0, alpha=mixup_alpha))
    if cutmix_alpha > 0:
        chosen.append(T.CutMix(alpha=cutmix_alpha, num_classes=num_classes) if use_v2 else
                      RandomCutMix(num_classes, p=1.0, alpha=cutmix_alpha))
    return T.RandomChoice(chosen) if chosen else None
