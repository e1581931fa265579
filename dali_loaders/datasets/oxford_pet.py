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
    recipe=recipes.imagenet, twin=pet_twin)


# -- the factories: the library's positional arguments, the dataset's own keywords, then DaliLoader's


def get_oxford_pet_iter_dali(type, root, batch_size, num_threads=4, *, fallback=True, **options):
    """A DataLoader-like Oxford-IIIT Pet iterator on DALI (the 37 breeds as labels).

    `root` holds oxford-iiit-pet/; type is 'trainval' ('train' is accepted for it) or
    'test' ('val' is accepted for it). The transform and the rest as
    get_flowers102_iter_dali."""
    return _common.open_dali(OXFORD_PET, type, root, batch_size, num_threads, fallback, options)


def get_oxford_pet_iter_torch(type, root, batch_size, num_threads=4, **options):
    """The twin of get_oxford_pet_iter_dali: torchvision's OxfordIIITPet (download=False,
    target_types="category")."""
    return _common.open_torch(OXFORD_PET, type, root, batch_size, num_threads, options)
