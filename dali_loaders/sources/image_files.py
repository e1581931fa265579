"""Image files on disk: the class-per-folder index, PIL's loading, and naming the file DALI
could not decode."""
import functools
import io
import os
import zlib
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, List, Optional, Sequence

import numpy as np

from ..recipes import IMG_EXTENSIONS
from . import storage
from .files import FileSource
from .pil_images import ImageDecodeError, load_rgb  # noqa: F401  load_rgb: its home before pil_images.py
from .screening import PIL_RULE, screen

# A decode error surfaces while DALI may already be working on the next batches (prefetch).



SUSPECT_BATCHES = 4


def is_image(name: str) -> bool:
    return name.lower().endswith(IMG_EXTENSIONS)


def find_classes(root: str):
    """ImageFolder's classes: the sorted names of root's sub-folders, and their indices."""
    classes = storage.subfolders(root)
    if not classes:
        raise FileNotFoundError(f"no class folders in {root!r}: expected {root}/<class>/<image> "
                                f"(or pass label_file= for a flat folder of images)")
    return classes, {name: i for i, name in enumerate(classes)}


def _class_images(folder: str) -> List[str]:
    """The images under `folder`, recursively, in ImageFolder's order."""
    found = []
    walk = storage.walk_files(folder) if storage.is_url(folder) else \
        ((here, names) for here, _, names in sorted(os.walk(folder, followlinks=True)))
    for here, names in walk:
        found += [os.path.join(here, name) for name in sorted(names) if is_image(name)]
    return found


def _read_label_file(root: str, label_file: str):
    if not storage.isfile(label_file):
        raise FileNotFoundError(f"label file {label_file!r} does not exist; expected lines of "
                                f"`relative/path label` for the images in {root!r}")
    files, labels, line_of = [], [], {}
    with io.StringIO(storage.read_text(label_file)) as f:   # a local file or a URL, read whole (it is small)
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            parts = line.strip().rsplit(maxsplit=1)
            if len(parts) != 2 or not parts[1].isdigit():
                raise ValueError(f"{label_file}:{number}: expected `relative/path label` with an "
                                 f"integer label >= 0, got {line.strip()!r} (text labels: "
                                 f"get_files_iter_dali(label_file=..., alphabet=...))")
            path = storage.normpath(storage.join(root, parts[0]))
            first = storage.join(root, line.split()[0])
            if not storage.isfile(path) and storage.isfile(first):
                raise ValueError(f"{label_file}:{number}: {line.split()[0]!r} has several labels; one integer "
                                 f"per image here (sequences: get_files_iter_dali(label_file=...))")
            if not storage.isfile(path):
                raise FileNotFoundError(f"{label_file}:{number}: image {path!r} does not exist")
            if path in line_of:   # it would be read twice per epoch
                raise ValueError(f"{label_file}:{number}: {parts[0]!r} is listed again (first on line "
                                 f"{line_of[path]}); list each image once")
            line_of[path] = number
            files.append(path)
            labels.append(int(parts[1]))
    if not files:
        raise ValueError(f"label file {label_file!r} lists no images")
    return files, labels


class ImageFiles(FileSource):
    """One split as a list of files: `files` (paths), `labels` (int64), `classes`,
    `class_to_idx`, `samples` ((path, label) pairs), as ImageFolder names them."""

    def __init__(self, root: str, label_file: Optional[str] = None,
                 classes: Optional[Sequence[str]] = None, max_image_pixels=PIL_RULE, on_error: str = "raise"):
        if not storage.isdir(root):
            raise FileNotFoundError(f"image folder {root!r} does not exist")
        if storage.is_url(root):   # listed once, now: the index, the label file's checks and the stamps read it
            storage.list_tree(root)
        self.root = root
        if label_file is None:
            self.classes, self.class_to_idx = find_classes(root)
            self.files, labels = self._scan_class_folders()
        else:
            self.files, labels = _read_label_file(root, label_file)
            self.classes = list(classes) if classes else [str(c) for c in range(max(labels) + 1)]
            self.class_to_idx = {name: i for i, name in enumerate(self.classes)}
            if max(labels) >= len(self.classes):
                raise ValueError(f"label file {label_file!r} has label {max(labels)} but there are "
                                 f"only {len(self.classes)} classes")
        # screened before it becomes a FileSource: len, sharding and resume count only the kept files
        found = screen(self.files, max_image_pixels, on_error)
        self.files, labels = [self.files[i] for i in found.kept], [labels[i] for i in found.kept]
        super().__init__(self.files, labels, os.path.basename(os.path.normpath(root)), self.classes)
        self.skipped, self.max_image_pixels = found.skipped, max_image_pixels
        self.screened_with = (max_image_pixels, on_error)

    def _scan_class_folders(self):
        files, labels, empty = [], [], []
        for name in self.classes:
            found = _class_images(os.path.join(self.root, name))
            if not found:
                empty.append(name)
            files += found
            labels += [self.class_to_idx[name]] * len(found)
        if empty:
            raise FileNotFoundError(f"no images in class folder(s) {', '.join(empty)} of {self.root!r} "
                                    f"(images end with one of {', '.join(IMG_EXTENSIONS)}, any case); "
                                    f"add images or remove the folder(s)")
        return files, labels

    @property
    def samples(self):
        return list(zip(self.files, self.labels.tolist()))

    @functools.cached_property
    def fingerprint(self) -> str:
        names = "\n".join(os.path.relpath(f, self.root) for f in self.files).encode()
        return f"{os.path.basename(os.path.normpath(self.root))}/{len(self)}/" \
               f"{zlib.crc32(names):08x}/{zlib.crc32(self.labels.tobytes()):08x}"


# -- decode checks ----------------------------------------------------------------------


def undecodable_reason(path: str) -> Optional[str]:
    """Why PIL cannot decode the image at `path`, or None if it can."""
    from PIL import Image

    try:
        with Image.open(storage.openable(path)) as image:
            image.convert("RGB")
    except storage.StorageError:   # the store failed, not the image
        raise
    except Exception as e:  # PIL raises OSError, SyntaxError, ValueError, ... for bad files
        return f"{type(e).__name__}: {e}"
    return None


def verify_images(root: str, num_threads: int = 4, progress: bool = True) -> Dict[str, str]:
    """Decodes every image file under `root` (recursively, ImageFolder's extensions) and
    returns {path: reason} for the files that cannot be decoded."""
    from tqdm import tqdm

    if not storage.isdir(root):
        raise FileNotFoundError(f"image folder {root!r} does not exist")
    if storage.is_url(root):
        storage.list_tree(root)
    paths = _class_images(root)
    if not paths:   # "0 undecodable files" would read as a clean bill of health
        raise FileNotFoundError(f"no image files under {root!r} (looked for {', '.join(IMG_EXTENSIONS)}, any "
                                f"case); verify checks image folders: CIFAR, MNIST and other array formats "
                                f"hold no image files to decode")
    bad = {}
    with ThreadPoolExecutor(max(1, num_threads)) as pool:
        reasons = pool.map(undecodable_reason, paths)
        for path, reason in tqdm(zip(paths, reasons), total=len(paths), desc="verify_images",
                                 unit="img", disable=not progress):
            if reason:
                bad[path] = reason
    return bad


def dali_undecodable(paths: Sequence[str]) -> Optional[str]:
    """The first of `paths` DALI's decoder rejects, one image per synchronous run."""
    from nvidia.dali import fn, pipeline_def, types

    @pipeline_def(batch_size=1, num_threads=1, device_id=None, prefetch_queue_depth=1)
    def decode_one():
        encoded, _ = fn.readers.file(files=list(paths), random_shuffle=False)
        return fn.decoders.image(encoded, device="cpu", output_type=types.RGB)

    pipe = decode_one()
    pipe.build()
    for path in paths:
        try:
            pipe.run()
        except RuntimeError:
            return path
    return None


def dali_reason(message: str) -> str:
    """The line of a DALI error that says what went wrong (it follows "encountered:")."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if "encountered:" in lines[:-1]:
        return lines[lines.index("encountered:") + 1]
    return lines[0] if lines else "no message"


def _first_undecodable(paths: Sequence[str]) -> Optional[str]:
    """PIL first (fast, and it says why), then DALI's own decoder, one file at a time."""
    culprit = next((p for p in paths if undecodable_reason(p)), None)
    if culprit is None and paths:
        try:
            culprit = dali_undecodable(paths)
        except Exception:  # the check itself failed: keep DALI's original error
            culprit = None
    return culprit


def name_the_file(index: ImageFiles, batch_size: int):
    """DaliLoader's explain_failure hook: the image file behind a failed batch, by name."""

    def explain(failure: Exception, remaining: np.ndarray) -> Optional[Exception]:
        message = str(failure)
        unreadable = storage.dali_failure(message)   # the object store failed, not the image
        if unreadable is not None:
            return unreadable
        suspects = [index.files[i] for i in remaining[:SUSPECT_BATCHES * batch_size]]
        named = [p for p in suspects if p in message]   # DALI names truncated files itself
        culprit = named[0] if named else _first_undecodable(suspects)
        if culprit is None:
            return None
        reason = undecodable_reason(culprit) or dali_reason(message)
        return ImageDecodeError(f"cannot decode image file {culprit!r} ({reason}); remove or replace it "
                                f"(dali_loaders.verify_images(root) lists every such file), or pass "
                                f"on_error='skip' to leave broken files out", path=culprit)

    return explain
