"""Hugging Face datasets in the hub's own parquet schemas, written with pyarrow (not with `datasets`,
whose reading is what the tests check): an `Image()` column is a struct {bytes, path}, a
`ClassLabel` an int64 column, and the features are the JSON under the schema's "huggingface" key."""
import io
import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from cifar_data import index_images
from image_data import SIZES, solid_colour
from PIL import Image

IMAGE_TYPE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
CIFAR10_NAMES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
WNIDS = ["n01440764", "n01443537", "n01484850"]
BEAN_NAMES = ["angular_leaf_spot", "bean_rust", "healthy"]
PNG_MODES = ("RGB", "RGBA", "P", "L")


def encoded(image: Image.Image, fmt: str, **save_args) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, fmt, **save_args)
    return buffer.getvalue()


def image_feature():
    return {"_type": "Image"}


def class_label(names):
    return {"names": list(names), "_type": "ClassLabel"}


def write_hub_parquet(path, columns: dict, features: dict, row_group_size: int = 16) -> str:
    """A parquet file as the hub serves one: `columns` {name: values} (an image column's
    values are {"bytes", "path"} dicts), `features` the hub's JSON of each column's feature.
    Small row groups: the table is read back in several chunks, as a large one is."""
    types = {"Image": IMAGE_TYPE, "ClassLabel": pa.int64(), "string": pa.string(), "int64": pa.int64()}
    fields = [(name, types[feature.get("_type") if feature.get("_type") != "Value" else feature["dtype"]])
              for name, feature in features.items()]
    schema = pa.schema(fields, metadata={"huggingface": json.dumps({"info": {"features": features}})})
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(pa.Table.from_pydict(columns, schema=schema), path, row_group_size=row_group_size)
    return path


def cifar10_parquet(folder, n: int = 40) -> str:
    """CIFAR-10's hub layout (`img`, `label`): 32x32 PNGs, image i every pixel (i >> 16, i >> 8,
    i) (tests/cifar_data.py), label i % 10."""
    images = [{"bytes": encoded(Image.fromarray(pixels), "PNG"), "path": None} for pixels in index_images(n, 0)]
    return write_hub_parquet(os.path.join(folder, "plain_text", "train-00000-of-00001.parquet"),
                             {"img": images, "label": [i % 10 for i in range(n)]},
                             {"img": image_feature(), "label": class_label(CIFAR10_NAMES)})


def imagenet_parquet(folder, n: int = 30) -> str:
    """ImageNet-1k's hub layout (`image`, `label`): JPEGs of the usual sizes with their file
    names as paths, image i a flat colour that names it (image_data.solid_colour), label i % 3."""
    images = []
    for i in range(n):
        image = Image.new("RGB", SIZES[i % len(SIZES)], solid_colour(i))
        images.append({"bytes": encoded(image, "JPEG", quality=90), "path": f"{WNIDS[i % 3]}_{i}.JPEG"})
    return write_hub_parquet(os.path.join(folder, "data", "validation-00000-of-00001.parquet"),
                             {"image": images, "label": [i % 3 for i in range(n)]},
                             {"image": image_feature(), "label": class_label(WNIDS)})


def png_parquet(folder, n: int = 24) -> str:
    """A PNG dataset in the hub's `beans` layout (`image_file_path`, `image`, `labels`): photo-like
    PNGs in modes RGB, RGBA, palette and grey, label i % 3."""
    from image_data import photo

    images, paths = [], []
    for i in range(n):
        mode = PNG_MODES[i % len(PNG_MODES)]
        image = photo(*SIZES[i % len(SIZES)], seed=i)
        image = image.convert("P", palette=Image.Palette.ADAPTIVE) if mode == "P" else image.convert(mode)
        images.append({"bytes": encoded(image, "PNG"), "path": None})
        paths.append(f"/train/{BEAN_NAMES[i % 3]}/bean_{i}.png")
    return write_hub_parquet(os.path.join(folder, "data", "train-00000-of-00001.parquet"),
                             {"image_file_path": paths, "image": images, "labels": [i % 3 for i in range(n)]},
                             {"image_file_path": {"dtype": "string", "_type": "Value"}, "image": image_feature(),
                              "labels": class_label(BEAN_NAMES)})


def coordinate_parquet(folder, sizes, per_size: int) -> str:
    """PNGs whose pixel (x, y) is (x, y, 0) (image_data.write_coordinate_png's), `per_size` of
    each size, label = the size's number: any crop window reads back from the output."""
    images, labels = [], []
    for k, (width, height) in enumerate(sizes):
        x, y = np.meshgrid(np.arange(width), np.arange(height))
        pixels = np.stack([x, y, np.zeros_like(x)], axis=-1).astype(np.uint8)
        for _ in range(per_size):
            images.append({"bytes": encoded(Image.fromarray(pixels), "PNG"), "path": None})
            labels.append(k)
    return write_hub_parquet(os.path.join(folder, "train.parquet"), {"image": images, "label": labels},
                             {"image": image_feature(), "label": class_label([f"{w}x{h}" for w, h in sizes])})
