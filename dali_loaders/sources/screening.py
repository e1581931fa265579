"""Image files from strangers, screened before a loader reads them.

At construction every file's header is read (PIL's lazy open: no pixels are decoded), so
an image that claims more pixels than `max_image_pixels` allows is refused, or left out,
before any decoder sees it, and a format the two backends decode differently (GIF, which
DALI cannot decode; 16-bit greyscale, which PIL clips at 255 and DALI scales) is too. With
`on_error="skip"` each file is also decoded once by PIL, so broken files are left out of
the list itself: every rank keeps the same files, `len` is exact, and a resumed epoch
reads the same list. What was found is cached per file (path, size, mtime), so the next
construction reads nothing but the cache.
"""
import hashlib
import io
import json
import os
import tempfile
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Dict, List, Optional, Sequence, Tuple

ON_ERROR = ("raise", "skip")
CACHE_VERSION = 1
# The default of max_image_pixels: PIL's own rule, read from PIL.Image.MAX_IMAGE_PIXELS when
# the loader is built (warn above it, refuse above twice it).
PIL_RULE = "pil"
# PIL modes whose convert("RGB") clips values above 255, where DALI scales 16 bits down to 8.
CLIPPED_MODES = ("I", "I;16", "I;16B", "I;16L", "I;16N", "F")
_pil_limit_lock = threading.Lock()


class Screened:
    """What screening found: `kept` (indices into the files screened), `skipped` ({path:
    reason}, in file order) and `large` (paths above the warning level, kept)."""

    def __init__(self, kept: List[int], skipped: Dict[str, str], large: List[str]):
        self.kept, self.skipped, self.large = kept, skipped, large


def check_options(max_image_pixels, on_error) -> None:
    if on_error not in ON_ERROR:
        raise ValueError(f"on_error must be 'raise' (stop at the first broken file, naming it) or 'skip' "
                         f"(leave broken files out, listed in loader.skipped), got {on_error!r}")
    if max_image_pixels not in (None, PIL_RULE) and (isinstance(max_image_pixels, bool) or not isinstance(
            max_image_pixels, int) or max_image_pixels < 1):
        raise ValueError(f"max_image_pixels must be a positive integer (width x height), None (no limit) or "
                         f"left as PIL's rule, got {max_image_pixels!r}")


def pixel_limits(max_image_pixels) -> Tuple[Optional[int], Optional[int]]:
    """(warn above, refuse above) in pixels; PIL's rule is (MAX_IMAGE_PIXELS, twice it)."""
    from PIL import Image

    if max_image_pixels is None:
        return None, None
    if max_image_pixels == PIL_RULE:
        limit = Image.MAX_IMAGE_PIXELS
        return (None, None) if limit is None else (limit, 2 * limit)
    return max_image_pixels, max_image_pixels


# -- what one file is -------------------------------------------------------------------


def pil_open(image):
    """PIL's lazy open of a path or of encoded bytes."""
    from PIL import Image

    return Image.open(io.BytesIO(image) if isinstance(image, bytes) else image)


def read_header(image) -> dict:
    """{"width", "height", "format", "mode"} from the header of `image` (a path or bytes), or
    {"unreadable": why}. PIL's own bomb check is kept out of the way (the limit is the
    loader's to apply)."""
    from PIL import Image

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            try:
                image = pil_open(image)
            except Image.DecompressionBombError:   # above twice PIL's limit: read it without the check
                image = open_unchecked(image)
        with image:
            return {"width": image.width, "height": image.height, "format": image.format, "mode": image.mode}
    except Exception as e:  # PIL raises UnidentifiedImageError, OSError, SyntaxError, ... on bad headers
        return {"unreadable": f"{type(e).__name__}: {e}"}


def decode_failure(image) -> Optional[str]:
    """Why PIL cannot decode `image` (a path or bytes) to RGB, or None."""
    from PIL import Image

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with pil_open(image) as image:
                image.convert("RGB")
    except Exception as e:  # as read_header
        return f"{type(e).__name__}: {e}"
    return None


def refusal(facts: dict, refuse_above: Optional[int]) -> Optional[str]:
    """Why a file with these header facts is not served (without decoding it), or None."""
    if "unreadable" in facts:
        return f"not an image PIL can read ({facts['unreadable']})"
    pixels = facts["width"] * facts["height"]
    if refuse_above is not None and pixels > refuse_above:
        return (f"{facts['width']} x {facts['height']} = {pixels} pixels, above max_image_pixels={refuse_above} "
                f"(a decompression bomb?); pass a larger max_image_pixels= (or None) if it is genuine")
    if facts["format"] == "GIF":
        return "a GIF, which DALI cannot decode; convert it to PNG"
    if facts["mode"] in CLIPPED_MODES:
        return (f"a {facts['format']} of mode {facts['mode']} (16-bit or float greyscale), which PIL clips at "
                f"255 and DALI scales; convert it to 8 bits")
    return None


# -- the cache --------------------------------------------------------------------------


def cache_dir() -> str:
    return os.path.join(os.path.expanduser("~"), ".cache", "dali_loaders", "screening")


def cache_path(files: Sequence[str]) -> str:
    """One cache file per folder the files share (a dataset split)."""
    common = os.path.commonpath([os.path.abspath(f) for f in files]) if files else ""
    digest = hashlib.sha1(common.encode()).hexdigest()[:16]
    return os.path.join(cache_dir(), f"{os.path.basename(common) or 'root'}-{digest}.json")


def _stamp(path: str) -> list:
    stat = os.stat(path)
    return [stat.st_size, stat.st_mtime_ns]


def load_cache(path: str) -> dict:
    try:
        with open(path) as f:
            content = json.load(f)
        return content["files"] if content.get("version") == CACHE_VERSION else {}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):   # missing or damaged: start afresh
        return {}


def save_cache(path: str, entries: dict) -> None:
    """Atomically (ranks may write it at once); a folder we cannot write only costs the cache."""
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, partial = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".partial")
        with os.fdopen(fd, "w") as f:
            json.dump({"version": CACHE_VERSION, "files": entries}, f)
        os.replace(partial, path)
    except OSError:
        pass


# -- screening a list -------------------------------------------------------------------


def screen(files: Sequence[str], max_image_pixels=PIL_RULE, on_error: str = "raise",
           num_threads: int = 4) -> Screened:
    """Screens `files` (see the module's doc). With on_error="raise", the first file refused
    by its header raises ImageDecodeError naming it (broken data past the header is left to
    the decoder, which names the file when it meets it); with "skip", refused and
    undecodable files are returned in `skipped`."""
    return screen_items(files, [_stamp(p) for p in files], lambda path, whole: path, cache_path(files),
                        max_image_pixels, on_error, num_threads)


def screen_items(names: Sequence[str], stamps: Sequence[list], read: Callable, cache_file: str,
                 max_image_pixels=PIL_RULE, on_error: str = "raise", num_threads: int = 4) -> Screened:
    """screen() for any images: `names` (unique), a `stamp` each that changes when the image
    does, `read(name, whole)` giving what PIL opens (a path, or bytes: with whole=False, at
    least the header), and where the cache lives."""
    check_options(max_image_pixels, on_error)
    warn_above, refuse_above = pixel_limits(max_image_pixels)
    cached, entries, changed = load_cache(cache_file), {}, False
    for name, stamp in zip(names, stamps):
        entry = cached.get(name)
        if entry is None or entry["stamp"] != stamp:
            header = read_header(read(name, False))
            if "unreadable" in header:   # perhaps the header lies past the bytes read: all of them
                header = read_header(read(name, True))
            entry, changed = {"stamp": stamp, "header": header}, True
        entries[name] = entry
    if on_error == "skip":
        changed |= _verify_decodes(entries, refuse_above, read, num_threads)
    if changed:
        save_cache(cache_file, {**cached, **entries})
    return _verdict(names, entries, warn_above, refuse_above, on_error)


def _verify_decodes(entries: dict, refuse_above: Optional[int], read: Callable, num_threads: int) -> bool:
    """Decodes (with PIL, in threads: it lets go of the GIL) the images whose headers pass and
    that were not decoded before; notes the outcome in their entries."""
    todo = [p for p, e in entries.items() if "decode" not in e and refusal(e["header"], refuse_above) is None]
    with ThreadPoolExecutor(max(1, num_threads)) as pool:
        for name, failure in zip(todo, pool.map(lambda name: decode_failure(read(name, True)), todo)):
            entries[name]["decode"] = failure
    return bool(todo)


def _verdict(files, entries, warn_above, refuse_above, on_error) -> Screened:
    from .image_files import ImageDecodeError

    kept, skipped, large = [], {}, []
    for i, path in enumerate(files):
        entry = entries[path]
        reason = refusal(entry["header"], refuse_above)
        if reason and on_error == "raise" and "unreadable" not in entry["header"]:
            raise ImageDecodeError(f"image {path!r} is refused: {reason}. Or pass on_error='skip' to "
                                   f"leave such files out", path=path)
        reason = reason or (entry.get("decode") and f"cannot be decoded ({entry['decode']})")
        if reason and on_error == "skip":
            skipped[path] = reason
            continue
        kept.append(i)
        header = entry["header"]
        if warn_above is not None and "width" in header and header["width"] * header["height"] > warn_above:
            large.append(path)
    if files and not kept:
        first = next(iter(skipped))
        raise ValueError(f"all {len(files)} image files were left out (on_error='skip'), the first {first!r}: "
                         f"{skipped[first]}")
    if large:
        warnings.warn(f"{len(large)} image(s) hold more than {warn_above} pixels (PIL's MAX_IMAGE_PIXELS), the "
                      f"first {large[0]!r}; they are served, but a bomb would be refused above {refuse_above}",
                      stacklevel=3)
    return Screened(kept, skipped, large)


# -- sources and datasets ---------------------------------------------------------------


def screen_source(source, max_image_pixels=PIL_RULE, on_error: str = "raise"):
    """Screens a FileSource's files and leaves it holding only those kept (before any epoch
    is read: len, sharding and resume then all count the kept list). Returns the source,
    with `skipped` ({path: why}) and the limit its PIL loading must honour."""
    found = screen(source.files, max_image_pixels, on_error)
    if len(found.kept) < len(source.files):
        source.files = [source.files[i] for i in found.kept]
        source.labels = source.labels[found.kept]
    source.skipped, source.max_image_pixels = found.skipped, max_image_pixels
    return source


def kept_subset(dataset, files: Sequence[str], max_image_pixels=PIL_RULE, on_error: str = "raise"):
    """A torchvision dataset whose samples are `files` (in that order), less the files
    screening leaves out: the dataset itself if none, else a Subset with `skipped`."""
    from torch.utils.data import Subset

    found = screen(files, max_image_pixels, on_error)
    if not found.skipped:
        return dataset
    subset = Subset(dataset, found.kept)
    subset.skipped, subset.classes = found.skipped, getattr(dataset, "classes", None)
    return subset


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


HEADER_BYTES = 1 << 16   # read of each tar member for its header (more only if PIL needs more)


def screen_webdataset(source, max_image_pixels=PIL_RULE, on_error: str = "raise"):
    """screen_source for a WebDatasetSource: its samples' images, named `shard:member`, left
    out of the source (shard_of, members, labels) before any epoch is read."""
    import numpy as np

    names = [source.describe(i) for i in range(len(source))]
    number = {name: i for i, name in enumerate(names)}
    shard_stamps = [_stamp(s) for s in source.shards]
    stamps = [shard_stamps[source.shard_of[i]] + list(source.members[i][1:3]) for i in range(len(source))]

    def read(name: str, whole: bool) -> bytes:
        return source.image_bytes(number[name], None if whole else HEADER_BYTES)

    found = screen_items(names, stamps, read, cache_path(source.shards), max_image_pixels, on_error)
    if found.skipped:
        keep = np.asarray(found.kept, dtype=np.int64)
        source.shard_of, source.labels = source.shard_of[keep], source.labels[keep]
        source.members = [source.members[i] for i in keep]
    source.skipped, source.max_image_pixels = found.skipped, max_image_pixels
    return source
