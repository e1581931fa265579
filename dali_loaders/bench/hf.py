"""The `hf` workload: a Hugging Face `datasets.Dataset` of the image folder's JPEGs (the bytes in
its Arrow files, as the hub's ImageNet-1k holds them), and its contenders:
  dali         DaliLoader(ds, transform=recipe): the encoded bytes fed from Arrow to DALI
  torchvision  DataLoader(ds.with_transform(...)), as the datasets docs write it: each batch of
               rows decoded by PIL and the recipe run per image, in num_workers processes
  folder       DaliLoader(ImageFolder(the same files, transform=recipe)): the DALI path over files
  limit        DALI decoding the same files and nothing else (contenders.DecodeOnly)

The data folder holds `train/` and `val/` (each `save_to_disk`'s, read back memory-mapped with
`load_from_disk`) and `images`, a link to the image folder they were made from.
"""
import os
import shutil

from tqdm import tqdm

from .catalog import transform_for
from .data import DONE


def make_hf(cache_dir: str, image_root: str, splits=("train", "val")) -> str:
    """The saved datasets of an image folder (root/<split>/<class>/*), made once: the hub's
    ImageNet-1k schema, `image` (bytes and file name) and `label` (a ClassLabel of the folders)."""
    import zlib

    import datasets
    from torchvision.datasets import ImageFolder

    number = zlib.crc32(os.path.abspath(image_root).encode())   # in decimal: no hex that reads as a commit
    root = os.path.join(cache_dir, f"hf-{os.path.basename(os.path.normpath(image_root))}-{number}")
    if os.path.isfile(os.path.join(root, DONE)):
        return root
    os.makedirs(root, exist_ok=True)
    datasets.disable_progress_bars()
    for split in splits:
        folder = ImageFolder(os.path.join(image_root, split))
        features = datasets.Features({"image": datasets.Image(), "label": datasets.ClassLabel(names=folder.classes)})

        def rows(samples=folder.samples):
            for path, label in tqdm(samples, desc=f"hf {split}", unit="image", leave=False):
                with open(path, "rb") as f:
                    yield {"image": {"bytes": f.read(), "path": os.path.basename(path)}, "label": label}

        ds = datasets.Dataset.from_generator(rows, features=features, cache_dir=os.path.join(root, "build"))
        ds.save_to_disk(os.path.join(root, split))
    shutil.rmtree(os.path.join(root, "build"), ignore_errors=True)
    link = os.path.join(root, "images")
    if not os.path.islink(link):
        os.symlink(os.path.abspath(image_root), link)
    open(os.path.join(root, DONE), "w").close()
    return root


def _dataset(spec):
    from datasets import load_from_disk

    return load_from_disk(os.path.join(spec["data"], spec["split"]))


def hf_dali(spec, workers):
    from .. import DaliLoader

    return DaliLoader(_dataset(spec), spec["batch_size"], shuffle=spec["split"] == "train",
                      num_workers=spec["threads"], seed=0, transform=transform_for(spec), device=spec.get("device"))


def hf_folder(spec, workers):
    from torchvision.datasets import ImageFolder

    from .. import DaliLoader

    folder = ImageFolder(os.path.join(spec["data"], "images", spec["split"]), transform=transform_for(spec))
    return DaliLoader(folder, spec["batch_size"], shuffle=spec["split"] == "train", num_workers=spec["threads"],
                      seed=0, device=spec.get("device"))


class RecipeOnRows:
    """The transform a datasets user sets (with_transform): each row's image as RGB through the recipe."""

    def __init__(self, recipe):
        self.recipe = recipe

    def __call__(self, rows: dict) -> dict:
        return {"image": [self.recipe(image.convert("RGB")) for image in rows["image"]], "label": rows["label"]}


class HFDataLoader:
    """DataLoader(ds.with_transform(...)), built once (its workers kept between epochs), its
    dict batches handed on as (images, labels)."""

    def __init__(self, spec, workers):
        from torch.utils.data import DataLoader

        self.loader = DataLoader(_dataset(spec).with_transform(RecipeOnRows(transform_for(spec))),
                                 batch_size=spec["batch_size"], shuffle=spec["split"] == "train",
                                 num_workers=workers, persistent_workers=workers > 0)

    def __iter__(self):
        for batch in self.loader:
            yield batch["image"], batch["label"]
