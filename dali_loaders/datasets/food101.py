"""Food-101: the JSON split files, and the factories of both backends.

The layout, once: `<root>/food-101/` holds images/<class>/<id>.jpg and meta/train.json,
meta/test.json, each {class: ["<class>/<id>", ...]}. As torchvision's Food101: classes
are the sorted keys, labels index them, and a split's images come in the JSON file's
order (class by class, as written).
"""
import json
import os

import torch

from .. import recipes
from ..sources.files import FileSource
from . import _common

FOLDER = "food-101"
SPLITS = ("train", "test")
ALIASES = {"val": "test"}


def _folder(root: str) -> str:
    return _common.find_folder(root, FOLDER, "meta", "Food-101",
                                "images/ and meta/train.json, meta/test.json")


def read_split(path: str) -> dict:
    _common.require_file(path, "Food-101 split file", "re-extract food-101.tar.gz")
    try:
        with open(path) as f:
            content = json.load(f)
    except (ValueError, UnicodeDecodeError) as e:
        raise ValueError(f"{path!r} is not valid JSON ({e}); re-extract food-101.tar.gz") from None
    if not isinstance(content, dict) or not all(isinstance(v, list) and all(isinstance(s, str) for s in v)
                                                for v in content.values()):
        raise ValueError(f"{path!r} must map each class to a list of \"<class>/<id>\" names; "
                         f"re-extract food-101.tar.gz")
    return content


def food_source(root: str, split: str) -> FileSource:
    folder = _folder(root)
    meta = os.path.join(folder, "meta", f"{split}.json")
    content = read_split(meta)
    classes = sorted(content)
    files, labels = [], []
    for name, entries in content.items():
        files += [os.path.join(folder, "images", *f"{entry}.jpg".split("/")) for entry in entries]
        labels += [classes.index(name)] * len(entries)
    if not files:
        raise ValueError(f"{meta!r} lists no images")
    _common.check_files_exist(files, meta)
    return FileSource(files, labels, f"food101/{split}", classes)


def food_twin(root: str, split: str, transform):
    """torchvision's Food101 (download=False), its loader the library's (PIL convert("RGB"),
    an undecodable file raising ImageDecodeError), after the DALI loader's checks."""
    from torchvision.datasets import Food101

    from ..sources.image_files import load_rgb

    food_source(root, split)   # the same checks and named errors as the DALI loader's
    return Food101(os.path.dirname(_folder(root)), split, download=False, loader=load_rgb,
                   transform=_common.TwinTransform(transform))


FOOD101 = _common.DatasetSpec(
    name="food101", splits=SPLITS, aliases=ALIASES, train_splits=("train",), source=food_source,
    recipe=recipes.imagenet, twin=food_twin)


# -- the factories: the library's positional arguments, the dataset's own keywords, then DaliLoader's


def get_food101_iter_dali(type, root, batch_size, num_threads=4, *, fallback=True, **options):
    """A DataLoader-like Food-101 iterator on DALI: `for images, labels in loader`.

    `root` holds food-101/; type is 'train' or 'test' ('val' is accepted for it). The
    transform and the rest as get_flowers102_iter_dali."""
    return _common.open_dali(FOOD101, type, root, batch_size, num_threads, fallback, options)


def get_food101_iter_torch(type, root, batch_size, num_threads=4, **options):
    """The twin of get_food101_iter_dali: torchvision's Food101 (download=False), its loader
    the library's (PIL convert("RGB"), an undecodable file raising ImageDecodeError)."""
    return _common.open_torch(FOOD101, type, root, batch_size, num_threads, options)
