"""PIL's reading of image files, which every file source shares: the error naming a file
that cannot be decoded, the loader's default pixel rule, opening without PIL's own bomb
check, and the torchvision twin's load_rgb. It imports only storage.py (for s3:// paths), so
that files.py, image_files.py and screening.py can all build on it."""
import io
import threading
from typing import Optional

from . import storage   # s3:// paths

# The default of max_image_pixels: PIL's own rule, read from PIL.Image.MAX_IMAGE_PIXELS when
# the loader is built (warn above it, refuse above twice it).
PIL_RULE = "pil"
_pil_limit_lock = threading.Lock()


class ImageDecodeError(RuntimeError):
    """An image file that cannot be decoded; `path` names it."""

    def __init__(self, message: str, path: Optional[str] = None):
        super().__init__(message)
        self.path = path


def pil_open(image):
    """PIL's lazy open of a path or of encoded bytes."""
    from PIL import Image

    return Image.open(io.BytesIO(image) if isinstance(image, bytes) else image)


def open_unchecked(image):
    """PIL's lazy open of a path or bytes without PIL's own bomb check, for an image screening
    let through under a limit the caller chose (above PIL's, or none)."""
    from PIL import Image

    with _pil_limit_lock:
        saved, Image.MAX_IMAGE_PIXELS = Image.MAX_IMAGE_PIXELS, None
        try:
            return pil_open(image)
        finally:
            Image.MAX_IMAGE_PIXELS = saved


def load_rgb(path: str, pil_bomb_check: bool = True):
    """The image at `path` as a PIL RGB image, as ImageFolder's loader reads it.
    `pil_bomb_check=False`: the file passed a pixel limit the user chose instead of PIL's."""
    from PIL import Image

    try:
        if not pil_bomb_check:
            with open_unchecked(storage.openable(path)) as image:
                return image.convert("RGB")
        with storage.openable(path) if storage.is_url(path) else open(path, "rb") as f:
            return Image.open(f).convert("RGB")
    except storage.StorageError:   # the store failed, not the image
        raise
    except Exception as e:  # PIL raises OSError, SyntaxError, ValueError, ... for bad files
        raise ImageDecodeError(f"cannot decode image file {path!r} ({type(e).__name__}: {e}); remove or "
                               f"replace it (dali_loaders.verify_images(root) lists every such file)",
                               path=path) from e
