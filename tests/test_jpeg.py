"""v2's JPEG translated into DALI, against torchvision applying the same object: pixel for
pixel on photographs at fixed qualities (PIL and tensor twins); a range's draws named by
matching each output with torchvision's own kernel at every quality of the range."""
import numpy as np
import pytest
import torch
from test_transforms import C, close, coordinate_image, dali_outputs, differences, many, pil_then, tensor_then, twin_outputs
from torchvision.transforms import v2
from torchvision.transforms.v2 import functional as F

from dali_loaders.loader import dali_loader

pytest.importorskip("nvidia.dali")


@pytest.mark.parametrize("name,transform", [
    ("PIL quality 50", pil_then(v2.JPEG(50))),
    ("PIL quality 1", pil_then(v2.JPEG(1))),
    ("tensor quality 90", tensor_then(v2.JPEG(90))),
    ("after a flip", pil_then(v2.RandomHorizontalFlip(1.0), v2.JPEG(20))),
    ("after a crop", tensor_then(v2.CenterCrop((37, 53)), v2.JPEG(70))),
])
def test_a_fixed_quality_gives_the_twins_pixels_on_photographs(photo_files, name, transform):
    assert differences(photo_files, transform) == (0.0, 0.0), name


def qualities(outputs, image, low, high):
    """The quality each output was compressed at: the one torchvision's kernel matches."""
    tensor = torch.from_numpy(image).permute(2, 0, 1).contiguous()
    by_bytes = {}
    for q in range(low, high + 1):
        by_bytes.setdefault(F.jpeg(tensor, q).numpy().tobytes(), []).append(q)
    found = []
    for output in outputs:
        key = np.ascontiguousarray(output.astype(np.uint8)).tobytes()
        assert key in by_bytes, "an output no quality of the range makes"
        found.append(by_bytes[key][0] if len(by_bytes[key]) == 1 else None)
    return np.array([q for q in found if q is not None], dtype=float)


def test_a_quality_range_draws_each_quality_at_its_rate():
    image = np.random.default_rng(3).integers(0, 256, (24, 32, 3), dtype=np.uint8)
    transform = C(v2.ToImage(), v2.JPEG((20, 60)))
    source = many(image, 300)
    ours = qualities(dali_outputs(source, transform), image, 20, 60)
    theirs = qualities(twin_outputs(source, transform), image, 20, 60)
    assert len(ours) > 250 and ours.min() == 20 and ours.max() == 60
    close(ours, theirs, 2.5, "quality")   # sd ~11.8: the default of one quality would be far off


def test_grey_images_are_refused_by_name():
    loader = dali_loader(many(coordinate_image(8, 8), 4), C(v2.Grayscale(1), v2.ToImage(), v2.JPEG(50)), train=True,
                         batch_size=2, num_threads=1)
    with pytest.raises(ValueError, match="JPEG on 1-channel images"):
        list(loader)
