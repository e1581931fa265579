"""Files a loader did not write: broken, hostile and unusual images, for the fuzz test, the
README's cost figures and anyone checking a loader against them. Each writer returns the
path it wrote; `write_corpus` writes them all and says which ones PIL can decode."""
import io
import os
import struct
import zlib
from typing import Dict

import numpy as np
from PIL import Image


def picture(width: int, height: int, seed: int) -> Image.Image:
    """An RGB image with gradients and noise: compresses like a photo, not like a flat colour."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    base = np.stack([x * 255 // max(width - 1, 1), y * 255 // max(height - 1, 1), (x + y) % 256], axis=-1)
    noise = rng.integers(-20, 21, (height, width, 3))
    return Image.fromarray(np.clip(base + noise, 0, 255).astype(np.uint8))


def encoded(image: Image.Image, fmt: str, **save_args) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, fmt, **save_args)
    return buffer.getvalue()


def write_bytes(path: str, data: bytes) -> str:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    return path


def png_chunks(data: bytes):
    """(offset, type, length) of each chunk of a PNG file."""
    offset, chunks = 8, []
    while offset + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[offset:offset + 8])
        chunks.append((offset, kind, length))
        offset += 12 + length
    return chunks


def corrupt_idat(data: bytes) -> bytes:
    """The PNG with the middle of its first IDAT's compressed bytes flipped and its CRC made
    right again: the chunk is well-formed, its zlib stream is not."""
    offset, _, length = next(c for c in png_chunks(data) if c[1] == b"IDAT")
    body = bytearray(data[offset + 8:offset + 8 + length])
    for k in range(length // 3, length // 3 + 16):
        body[k] ^= 0xA5
    crc = struct.pack(">I", zlib.crc32(b"IDAT" + bytes(body)) & 0xFFFFFFFF)
    return data[:offset + 8] + bytes(body) + crc + data[offset + 12 + length:]


def bad_crc(data: bytes) -> bytes:
    """The PNG with its IHDR's CRC wrong (PIL checks CRCs of the chunks it reads)."""
    offset, _, length = next(c for c in png_chunks(data) if c[1] == b"IHDR")
    crc_at = offset + 8 + length
    return data[:crc_at] + bytes(b ^ 0xFF for b in data[crc_at:crc_at + 4]) + data[crc_at + 4:]


def huge_png(width: int, height: int) -> bytes:
    """A valid greyscale PNG of width x height zero pixels, written row by row through zlib
    (about 1 MB for 20000 x 20000): a decompression bomb."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    packer, row, parts = zlib.compressobj(9), b"\0" * (width + 1), []
    for _ in range(height):
        parts.append(packer.compress(row))
    parts.append(packer.flush())
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", b"".join(parts)) + chunk(b"IEND", b"")


def huge_header_jpeg(width: int, height: int, seed: int = 0) -> bytes:
    """A small JPEG whose SOF header claims width x height (the data holds far less)."""
    data = bytearray(encoded(picture(64, 64, seed), "JPEG", quality=90))
    sof = next(k for k in range(2, len(data) - 1) if data[k] == 0xFF and data[k + 1] in (0xC0, 0xC2))
    data[sof + 5:sof + 9] = struct.pack(">HH", height, width)
    return bytes(data)


def animated(fmt: str, seed: int) -> bytes:
    frames = [picture(96, 80, seed + k) for k in range(3)]
    if fmt == "GIF":
        frames = [f.convert("P", palette=Image.Palette.ADAPTIVE) for f in frames]
    return encoded(frames[0], fmt, save_all=True, append_images=frames[1:], duration=100, loop=0,
                   **({"lossless": True} if fmt == "WEBP" else {}))


def unusual_images(seed: int) -> Dict[str, bytes]:
    """Files that are valid but not plain 8-bit RGB: {name: bytes}."""
    rgb = picture(120, 90, seed)
    y, x = np.mgrid[0:90, 0:120]
    deep = Image.fromarray((x * 500 + y * 40).astype(np.uint16))          # 16-bit grey, values > 255
    palette = rgb.convert("P", palette=Image.Palette.ADAPTIVE, colors=64)
    palette.info["transparency"] = 3
    grey_alpha = Image.merge("LA", (rgb.convert("L"), Image.fromarray((x * 2 % 256).astype(np.uint8))))
    return {
        "png16.png": encoded(deep, "PNG"),
        "palette_transparency.png": encoded(palette, "PNG", transparency=3),
        "grey_alpha.png": encoded(grey_alpha, "PNG"),
        "cmyk.jpg": encoded(rgb.convert("CMYK"), "JPEG", quality=92),
        "animated_gif_named.png": animated("GIF", seed),   # ImageFolder lists no .gif
        "animated.webp": animated("WEBP", seed),
        "picture.tiff": encoded(rgb, "TIFF"),
    }


def broken_images(seed: int) -> Dict[str, bytes]:
    """Files no decoder should serve: {name: bytes}."""
    jpeg = encoded(picture(160, 120, seed), "JPEG", quality=90)
    png = encoded(picture(160, 120, seed + 1), "PNG")
    rng = np.random.default_rng(seed)
    files = {f"truncated_{int(f * 100)}.jpg": jpeg[:int(len(jpeg) * f)] for f in (0.02, 0.3, 0.7, 0.97)}
    files.update({f"truncated_{int(f * 100)}.png": png[:int(len(png) * f)] for f in (0.05, 0.5, 0.95)})
    files.update({
        "zero_bytes.jpg": b"",
        "random_bytes.jpg": rng.integers(0, 256, 4000, dtype=np.uint8).tobytes(),
        "random_bytes.png": b"\x89PNG\r\n\x1a\n" + rng.integers(0, 256, 4000, dtype=np.uint8).tobytes(),
        "corrupt_idat.png": corrupt_idat(png),
        "bad_crc.png": bad_crc(png),
        "text.JPEG": b"this is not an image, it is a note someone saved with the wrong name\n" * 20,
    })
    return files


def bomb_images() -> Dict[str, bytes]:
    """Headers that claim more pixels than PIL allows: {name: bytes}."""
    return {"bomb_20000x20000.png": huge_png(20000, 20000),
            "huge_header_60000x60000.jpg": huge_header_jpeg(60000, 60000)}


def write_corpus(folder: str, seed: int = 0, bombs: bool = True) -> Dict[str, str]:
    """Writes every file above into `folder`; returns {name: path}."""
    files = {**unusual_images(seed), **broken_images(seed), **(bomb_images() if bombs else {})}
    return {name: write_bytes(os.path.join(folder, name), data) for name, data in files.items()}
