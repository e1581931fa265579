"""Writes small image datasets of real files (JPEG, PNG, ...) with PIL for the tests."""
import os

import numpy as np
from PIL import Image, ImageDraw

# (width, height): both orientations, odd and even sides, smaller and larger than 256.
SIZES = [(320, 240), (240, 320), (300, 300), (257, 193), (181, 263), (500, 375), (375, 500),
         (270, 256), (256, 270), (351, 299), (96, 128), (611, 405)]


def photo(width, height, seed):
    """An RGB image with smooth shading, edges and a little grain, like a photo."""
    rng = np.random.default_rng(seed)
    coarse = Image.fromarray(rng.integers(0, 256, (6, 6, 3), dtype=np.uint8))
    image = coarse.resize((width, height), Image.BICUBIC)
    draw = ImageDraw.Draw(image)
    for _ in range(4):
        x0, x1 = sorted(rng.integers(0, width, 2))
        y0, y1 = sorted(rng.integers(0, height, 2))
        fill = tuple(int(c) for c in rng.integers(0, 256, 3))
        (draw.ellipse if rng.random() < 0.5 else draw.rectangle)([x0, y0, x1, y1], fill=fill)
    pixels = np.asarray(image, dtype=np.int16) + rng.integers(-6, 7, (height, width, 3))
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))


def write_jpeg(path, width, height, seed, quality=None, mode="RGB", **save_args):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    quality = quality or int(np.random.default_rng(seed).integers(75, 96))
    photo(width, height, seed).convert(mode).save(path, "JPEG", quality=quality, **save_args)
    return path


def write_image_folder(root, counts, seed=0, extension=".JPEG"):
    """root/<class>/<class>_<i><extension> for each class in `counts` (class -> images);
    returns the paths written, in ImageFolder's order."""
    paths = []
    for c, name in enumerate(sorted(counts)):
        for i in range(counts[name]):
            width, height = SIZES[(i + 3 * c) % len(SIZES)]
            path = os.path.join(root, name, f"{name}_{i:03d}{extension}")
            paths.append(write_jpeg(path, width, height, seed=seed * 100003 + c * 1009 + i))
    return paths


def write_odd_formats(folder, seed=0):
    """The files real datasets hold besides plain RGB JPEGs; returns {kind: path}."""
    os.makedirs(folder, exist_ok=True)
    paths = {
        "cmyk": write_jpeg(os.path.join(folder, "cmyk.JPEG"), 300, 200, seed, mode="CMYK"),
        "gray": write_jpeg(os.path.join(folder, "gray.jpg"), 200, 300, seed + 1, mode="L"),
        "progressive": write_jpeg(os.path.join(folder, "progressive.jpeg"), 280, 260, seed + 2,
                                  progressive=True),
        "png_named_jpeg": os.path.join(folder, "png_inside.JPEG"),
    }
    photo(260, 280, seed + 3).save(paths["png_named_jpeg"], "PNG")
    paths["exif_rotated"] = os.path.join(folder, "exif_rotated.jpg")
    exif = Image.Exif()
    exif[0x0112] = 6  # orientation: rotate 90 degrees; ImageFolder (PIL) does not apply it
    photo(320, 240, seed + 4).save(paths["exif_rotated"], "JPEG", quality=90, exif=exif)
    other = photo(230, 250, seed + 5)   # ImageFolder's other extensions
    for kind, name, image in [("bmp", "other.BMP", other), ("webp", "other.webp", other),
                              ("tiff", "other.tif", other), ("pgm", "gray.pgm", other.convert("L")),
                              ("palette_png", "palette.png", other.convert("P")),
                              ("rgba_png", "rgba.png", other.convert("RGBA"))]:
        paths[kind] = os.path.join(folder, name)
        image.save(paths[kind])
    return paths


def write_truncated(path, seed=0):
    """A JPEG cut off after 60% of its bytes."""
    data = open(write_jpeg(path, 300, 300, seed), "rb").read()
    with open(path, "wb") as f:
        f.write(data[:int(len(data) * 0.6)])
    return path


def write_garbage(path, seed=0):
    """Random bytes under an image's name."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(np.random.default_rng(seed).integers(0, 256, 5000, dtype=np.uint8).tobytes())
    return path


def write_coordinate_png(path, width, height):
    """Red = x, green = y, blue = 0 at pixel (x, y) (so width, height <= 256): any crop
    window can be read back from the pixels, even after a resize (linear maps stay linear)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    x, y = np.meshgrid(np.arange(width), np.arange(height))
    pixels = np.stack([x, y, np.zeros_like(x)], axis=-1).astype(np.uint8)
    Image.fromarray(pixels).save(path, "PNG")
    return path


def write_coordinate_folder(root, count, width, height):
    """`count` coordinate PNGs (write_coordinate_png) in one class folder; returns the root."""
    for i in range(count):
        write_coordinate_png(os.path.join(root, "only", f"{i:03d}.png"), width, height)
    return root


SOLID_STEP = 48  # colour levels between image ids: far above JPEG's error on a flat colour


def solid_colour(image_id):
    """Image `image_id` (< 125) is one flat colour, its base-5 digits, so any crop,
    flip or resize of it still says which image it was."""
    digits = [(image_id // 5 ** k) % 5 for k in range(3)]
    return tuple(SOLID_STEP // 2 + SOLID_STEP * d for d in digits)


def image_id(rgb_means):
    """The image_id of a flat colour (R, G, B means on the 0..255 scale)."""
    digits = [int(round((c - SOLID_STEP // 2) / SOLID_STEP)) for c in rgb_means]
    return sum(d * 5 ** k for k, d in enumerate(digits))


def write_solid_folder(root, counts):
    """Like write_image_folder, but image i (in ImageFolder's order) is solid_colour(i);
    returns the paths."""
    paths = []
    for c, name in enumerate(sorted(counts)):
        for i in range(counts[name]):
            width, height = SIZES[len(paths) % len(SIZES)]
            path = os.path.join(root, name, f"{i:03d}.jpg")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            Image.new("RGB", (width, height), solid_colour(len(paths))).save(path, "JPEG", quality=90)
            paths.append(path)
    return paths
