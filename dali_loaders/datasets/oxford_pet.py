"""Oxford-IIIT Pet (breed classification): the annotation files, and the factories of both backends.

The layout, once: `<root>/oxford-iiit-pet/` holds images/<name>.jpg and
annotations/trainval.txt, annotations/test.txt, one `name class species breed_id` line per
image, class 1..37. As torchvision's OxfordIIITPet with target_types="category": labels
are class - 1, in the file's order.
"""
import os

import torch

from .. import recipes
from ..sources.files import FileSource
from . import _common

FOLDER = "oxford-iiit-pet"
SPLITS = ("trainval", "test")
ALIASES = {"train": "trainval", "val": "test"}


def _folder(root: str) -> str:
    return _common.find_folder(root, FOLDER, "annotations", "Oxford-IIIT Pet",
                                "images/ and annotations/")


def read_annotations(path: str):
    """(image names, labels 0..36) of a split file; ValueError naming the line that is not
    `name class species breed_id`."""
    _common.require_file(path, "Oxford-IIIT Pet annotation file", "re-extract annotations.tar.gz")
    names, labels = [], []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            parts = line.split()
            if len(parts) != 4 or not parts[1].isdigit() or int(parts[1]) < 1:
                raise ValueError(f"{path}:{number}: expected `name class species breed_id` with class >= 1, "
                                 f"got {line.strip()!r}; re-extract annotations.tar.gz")
            names.append(parts[0])
            labels.append(int(parts[1]) - 1)
    if not names:
        raise ValueError(f"{path!r} lists no images; re-extract annotations.tar.gz")
    return names, labels


def pet_source(root: str, split: str) -> FileSource:
    folder = _folder(root)
    path = os.path.join(folder, "annotations", f"{split}.txt")
    names, labels = read_annotations(path)
    files = [os.path.join(folder, "images", f"{name}.jpg") for name in names]
    _common.check_files_exist(files, path)
    breeds = dict(sorted({(label, name.rsplit("_", 1)[0]) for name, label in zip(names, labels)}))
    classes = [" ".join(part.title() for part in breeds[c].split("_")) for c in sorted(breeds)]
    return FileSource(files, labels, f"oxford-iiit-pet/{split}", classes)


def pet_twin(root: str, split: str, transform):
    """torchvision's OxfordIIITPet (download=False, target_types="category"), after the
    DALI loader's checks."""
    from torchvision.datasets import OxfordIIITPet

    pet_source(root, split)   # the same checks and named errors as the DALI loader's
    return OxfordIIITPet(os.path.dirname(_folder(root)), split, target_types="category", download=False,
                         transform=_common.TwinTransform(transform))


OXFORD_PET = _common.DatasetSpec(
    name="oxford_pet", splits=SPLITS, aliases=ALIASES, train_splits=("trainval",), source=pet_source,
    recipe=recipes.imagenet, twin=pet_twin, own=_common.IMAGE_FILE_ARGUMENTS,
    dali_doc="""A DataLoader-like Oxford-IIIT Pet iterator on DALI (the 37 breeds as labels).

    `root` holds oxford-iiit-pet/; type is 'trainval' ('train' is accepted for it) or
    'test' ('val' is accepted for it). The transform and the rest as
    get_flowers102_iter_dali.""",
    torch_doc="""The twin of get_oxford_pet_iter_dali: torchvision's OxfordIIITPet (download=False,
    target_types="category").""")
SPECS = (OXFORD_PET,)


# -- generated from the specs above by `python -m dali_loaders.datasets.generate`; do not edit below


def get_oxford_pet_iter_dali(type, root, batch_size, num_threads=4, *, max_image_pixels="pil",
                             on_error="raise", seed=None, drop_last=False, rank=None, world_size=None,
                             local_rank=None, device_id=None, transform=None, python_fallback=False,
                             batch_transform=None, memory_format=torch.contiguous_format, device=None,
                             dali_cpu=None, output="tuple", target_transform=None, even_batches=False,
                             fallback=True):
    """A DataLoader-like Oxford-IIIT Pet iterator on DALI (the 37 breeds as labels).

    `root` holds oxford-iiit-pet/; type is 'trainval' ('train' is accepted for it) or
    'test' ('val' is accepted for it). The transform and the rest as
    get_flowers102_iter_dali."""
    args = dict(type=type, root=root, batch_size=batch_size, num_threads=num_threads,
                max_image_pixels=max_image_pixels, on_error=on_error, seed=seed, drop_last=drop_last,
                rank=rank, world_size=world_size, local_rank=local_rank, device_id=device_id,
                transform=transform, python_fallback=python_fallback, batch_transform=batch_transform,
                memory_format=memory_format, device=device, dali_cpu=dali_cpu, output=output,
                target_transform=target_transform, even_batches=even_batches, fallback=fallback)
    return _common.open_dali(OXFORD_PET, get_oxford_pet_iter_torch, args)


def get_oxford_pet_iter_torch(type, root, batch_size, num_threads=4, *, max_image_pixels="pil",
                              on_error="raise", seed=None, drop_last=False, rank=None, world_size=None,
                              local_rank=None, device_id=None, transform=None, python_fallback=False,
                              batch_transform=None, memory_format=torch.contiguous_format, device=None,
                              dali_cpu=None, output="tuple", target_transform=None, even_batches=False):
    """The twin of get_oxford_pet_iter_dali: torchvision's OxfordIIITPet (download=False,
    target_types="category")."""
    args = dict(type=type, root=root, batch_size=batch_size, num_threads=num_threads,
                max_image_pixels=max_image_pixels, on_error=on_error, seed=seed, drop_last=drop_last,
                rank=rank, world_size=world_size, local_rank=local_rank, device_id=device_id,
                transform=transform, python_fallback=python_fallback, batch_transform=batch_transform,
                memory_format=memory_format, device=device, dali_cpu=dali_cpu, output=output,
                target_transform=target_transform, even_batches=even_batches)
    return _common.open_torch(OXFORD_PET, args)
