"""DINO's training samples as its repository builds them: its multi-crop view maker, its own blur
and solarization classes on PIL images (PIL's ImageFilter and ImageOps behind Python's
`random`) and torchvision's v1 steps. The loaders read the classes from their source
(transforms/view_makers.py, transforms/pil_steps.py); nothing here is special-cased."""
import random

from PIL import ImageFilter, ImageOps

from .. import recipes


class MultiCrop:
    """DINO's view maker: two global crops, then small local ones."""

    def __init__(self, global_transfo1, global_transfo2, local_transfo, local_crops_number):
        self.global_transfo1, self.global_transfo2 = global_transfo1, global_transfo2
        self.local_transfo, self.local_crops_number = local_transfo, local_crops_number

    def __call__(self, image):
        crops = []
        crops.append(self.global_transfo1(image))
        crops.append(self.global_transfo2(image))
        for _ in range(self.local_crops_number):
            crops.append(self.local_transfo(image))
        return crops


class GaussianBlur(object):
    """PIL's Gaussian blur of a random radius, applied with probability p."""

    def __init__(self, p=0.5, radius_min=0.1, radius_max=2.0):
        self.prob = p
        self.radius_min = radius_min
        self.radius_max = radius_max

    def __call__(self, img):
        do_it = random.random() <= self.prob
        if not do_it:
            return img
        return img.filter(ImageFilter.GaussianBlur(radius=random.uniform(self.radius_min, self.radius_max)))


class Solarization(object):
    """PIL's solarization, applied with probability p."""

    def __init__(self, p):
        self.p = p

    def __call__(self, img):
        if random.random() < self.p:
            return ImageOps.solarize(img)
        else:
            return img


def dino(train: bool, local_crops: int = 8):
    """Two 224 px global crops (40-100% of the image; one always blurred, the other blurred a
    tenth of the time and solarized a fifth) and `local_crops` 96 px crops (5-40%, blurred half
    the time), each flipped, colour-jittered and greyed at random, bicubic, normalized."""
    from torchvision import transforms as v1

    jitter = v1.Compose([v1.RandomHorizontalFlip(p=0.5),
                         v1.RandomApply([v1.ColorJitter(brightness=0.4, contrast=0.4, saturation=0.2, hue=0.1)], p=0.8),
                         v1.RandomGrayscale(p=0.2)])
    normalize = v1.Compose([v1.ToTensor(), v1.Normalize(recipes.IMAGENET_MEAN, recipes.IMAGENET_STD)])
    bicubic = v1.InterpolationMode.BICUBIC

    def crop(size, scale):
        return v1.RandomResizedCrop(size, scale=scale, interpolation=bicubic)

    first = v1.Compose([crop(224, (0.4, 1.0)), jitter, GaussianBlur(1.0), normalize])
    second = v1.Compose([crop(224, (0.4, 1.0)), jitter, GaussianBlur(0.1), Solarization(0.2), normalize])
    local = v1.Compose([crop(96, (0.05, 0.4)), jitter, GaussianBlur(p=0.5), normalize])
    return MultiCrop(first, second, local, local_crops)
