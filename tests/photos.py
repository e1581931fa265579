"""Real photographs for the pixel and statistics tests: shipped inside packages the tests
install (matplotlib's sample data, scikit-image's data), copied as JPEG files into a folder."""
import os

import numpy as np
from PIL import Image

# (package, file inside its data folder): colour photographs of different sizes and content
SHIPPED = [("matplotlib", "mpl-data/sample_data/grace_hopper.jpg"), ("skimage", "data/astronaut.png"),
           ("skimage", "data/coffee.png"), ("skimage", "data/chelsea.png"), ("skimage", "data/rocket.jpg"),
           ("skimage", "data/motorcycle_left.png"), ("skimage", "data/retina.jpg")]


def photo_paths():
    """The shipped photographs, as paths; those whose package is missing are left out."""
    import importlib

    found = []
    for package, relative in SHIPPED:
        try:
            module = importlib.import_module(package)
        except ImportError:
            continue
        path = os.path.join(os.path.dirname(module.__file__), relative)
        if os.path.isfile(path):
            found.append(path)
    return found


def load(path, max_side=None) -> Image.Image:
    image = Image.open(path).convert("RGB")
    if max_side and max(image.size) > max_side:   # keeps the tests fast on 2 cores
        scale = max_side / max(image.size)
        image = image.resize((round(image.width * scale), round(image.height * scale)), Image.BILINEAR)
    return image


def write_photo_folder(root, copies=1, max_side=400, classes=2):
    """root/<class>/<name>.jpg: every photograph `copies` times (quality 95); returns the paths
    in ImageFolder's order."""
    paths = []
    for k, source in enumerate(photo_paths() * copies):
        folder = os.path.join(root, f"class_{k % classes}")
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, f"{k:03d}_{os.path.splitext(os.path.basename(source))[0]}.jpg")
        load(source, max_side).save(path, "JPEG", quality=95)
        paths.append(path)
    return sorted(paths)


def photo_arrays(size=32, n=None):
    """The photographs resized to size x size, (N, size, size, 3) uint8: CIFAR-like real images."""
    images = [np.asarray(load(p).resize((size, size), Image.BICUBIC)) for p in photo_paths()]
    return np.stack(images[:n] if n else images)
