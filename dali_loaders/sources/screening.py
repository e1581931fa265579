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
import os
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .pil_images import PIL_RULE, ImageDecodeError, open_unchecked, pil_open
from . import storage, url_reads
from .screen_cache import STAMP_WIDTH, UNCHECKED, Table, cache_path

ON_ERROR = ("raise", "skip")
# PIL modes whose convert("RGB") clips values above 255, where DALI scales 16 bits down to 8.
CLIPPED_MODES = ("I", "I;16", "I;16B", "I;16L", "I;16N", "F")


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


def read_header(encoded) -> dict:
    """{"width", "height", "format", "mode"} from the header of `encoded` (a path or bytes),
    or {"unreadable": why}. PIL's own bomb check is kept out of the way (the limit is the
    loader's to apply)."""
    from PIL import Image

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            try:
                image = pil_open(encoded)
            except Image.DecompressionBombError:   # above twice PIL's limit: read it without the check
                image = open_unchecked(encoded)
        with image:
            return {"width": image.width, "height": image.height, "format": image.format, "mode": image.mode}
    except Exception as e:  # PIL raises UnidentifiedImageError, OSError, SyntaxError, ... on bad headers
        return {"unreadable": f"{type(e).__name__}: {e}"}


def decode_failure(encoded) -> Optional[str]:
    """Why PIL cannot decode `encoded` (a path or bytes) to RGB, or None."""
    from PIL import Image

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with pil_open(encoded) as image:
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


# -- screening a list -------------------------------------------------------------------


def file_stamps(files: Sequence[str]) -> np.ndarray:
    """(size, mtime_ns, 0, 0) of each file: what changes when a file does (objects: size, ETag)."""
    if files and storage.is_url(files[0]):
        return storage.stamps(files)
    stamps = np.zeros((len(files), STAMP_WIDTH), dtype=np.int64)
    for i, path in enumerate(files):
        stat = os.stat(path)
        stamps[i, :2] = stat.st_size, stat.st_mtime_ns
    return stamps


def screen(files: Sequence[str], max_image_pixels=PIL_RULE, on_error: str = "raise",
           num_threads: int = 4) -> Screened:
    """Screens `files` (see the module's doc). With on_error="raise", the first file refused
    by its header raises ImageDecodeError naming it (broken data past the header is left to
    the decoder, which names the file when it meets it); with "skip", refused and
    undecodable files are returned in `skipped`."""
    return screen_items(files, file_stamps(files), read_file, cache_path(files), max_image_pixels, on_error,
                        num_threads)


def read_file(path: str, whole: bool):
    """What PIL opens of a file: its path; of a URL, its first HEADER_BYTES (one ranged GET) or
    all of it, read as the images of an epoch are (url_reads.py: a tenth of boto3's CPU)."""
    if not storage.is_url(path):
        return path
    return (url_reads.get_object(path) if whole else url_reads.get_object(path, 0, HEADER_BYTES)).tobytes()


def screen_items(names: Sequence[str], stamps: np.ndarray, read: Callable, cache_file: str,
                 max_image_pixels=PIL_RULE, on_error: str = "raise", num_threads: int = 4) -> Screened:
    """screen() for any images: `names` (unique), their stamps ((n, 4): what changes when an
    image does), `read(name, whole)` giving what PIL opens (a path, or bytes: with
    whole=False, at least the header), and where the cache lives."""
    check_options(max_image_pixels, on_error)
    warn_above, refuse_above = pixel_limits(max_image_pixels)
    table = Table(names, stamps)
    table.adopt(cache_file)
    todo = np.flatnonzero(~table.known).tolist()

    def header_of(i):
        header = read_header(read(names[i], False))
        if "unreadable" in header:   # perhaps the header lies past the bytes read: all of them
            header = read_header(read(names[i], True))
        return header

    with ThreadPoolExecutor(max(1, num_threads)) as pool:   # objects in storage: requests in parallel
        for i, header in zip(todo, pool.map(header_of, todo)):
            table.set_header(i, header)
    refused = _refused_rows(table, refuse_above)
    if on_error == "skip":
        todo += _verify_decodes(table, set(refused), read, num_threads)
    if todo:
        table.save(cache_file)
    return _verdict(table, refused, warn_above, refuse_above, on_error)


def _refused_rows(table: Table, refuse_above: Optional[int]) -> Dict[int, str]:
    """{row: why} of the images refused by their headers, in order."""
    pixels = table.width * table.height
    suspect = np.array([bool(u) or m in CLIPPED_MODES or f == "GIF"
                        for u, m, f in zip(table.unreadable, table.mode, table.format)], dtype=bool)
    if refuse_above is not None:
        suspect |= pixels > refuse_above
    rows = {}
    for i in np.flatnonzero(suspect).tolist():
        facts = ({"unreadable": table.unreadable[i]} if table.unreadable[i] else
                 {"width": int(table.width[i]), "height": int(table.height[i]), "format": table.format[i],
                  "mode": table.mode[i]})
        rows[i] = refusal(facts, refuse_above)
    return rows


def _verify_decodes(table: Table, refused: set, read: Callable, num_threads: int) -> List[int]:
    """Decodes (with PIL, in threads: it lets go of the GIL) the images not refused and not
    decoded before; notes the outcome in the table; returns their rows."""
    todo = [i for i, state in enumerate(table.decode) if state == UNCHECKED and i not in refused]
    with ThreadPoolExecutor(max(1, num_threads)) as pool:
        for i, failure in zip(todo, pool.map(lambda i: decode_failure(read(table.names[i], True)), todo)):
            table.decode[i] = failure or ""
    return todo


def _verdict(table: Table, refused: Dict[int, str], warn_above, refuse_above, on_error) -> Screened:
    names, left_out = table.names, {}
    if on_error == "raise":
        first = next((i for i in refused if not table.unreadable[i]), None)
        if first is not None:
            raise ImageDecodeError(f"image {names[first]!r} is refused: {refused[first]}. Or pass "
                                   f"on_error='skip' to leave such files out", path=names[first])
    else:
        failed = {i: f"cannot be decoded ({state})" for i, state in enumerate(table.decode)
                  if state not in ("", UNCHECKED)}
        left_out = dict(sorted({**failed, **refused}.items()))
    skipped = {names[i]: reason for i, reason in left_out.items()}
    keep = np.ones(len(names), dtype=bool)
    keep[list(left_out)] = False
    if len(names) and not keep.any():
        first = next(iter(skipped))
        raise ValueError(f"all {len(names)} image files were left out (on_error='skip'), the first {first!r}: "
                         f"{skipped[first]}")
    large = [] if warn_above is None else [names[i] for i in np.flatnonzero(
        keep & (table.width * table.height > warn_above)).tolist()]
    if large:
        warnings.warn(f"{len(large)} image(s) hold more than {warn_above} pixels (PIL's MAX_IMAGE_PIXELS), the "
                      f"first {large[0]!r}; they are served, but a bomb would be refused above {refuse_above}",
                      stacklevel=3)
    return Screened(np.flatnonzero(keep).tolist(), skipped, large)


# -- sources and datasets ---------------------------------------------------------------


class KeptSubset:
    """A dataset less the files screening left out, with `skipped` ({path: why}) and the
    dataset's `classes`: torch's Subset, made here so that nothing is added to it from outside."""

    def __init__(self, dataset, kept: Sequence[int], skipped: Dict[str, str], classes=None):
        self.dataset, self.indices = dataset, list(kept)
        self.skipped, self.classes = dict(skipped), classes

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, i):
        return self.dataset[self.indices[i]]


def kept_subset(dataset, files: Sequence[str], max_image_pixels=PIL_RULE, on_error: str = "raise"):
    """A torchvision dataset whose samples are `files` (in that order), less the files
    screening leaves out: the dataset itself if none, else a KeptSubset."""
    found = screen(files, max_image_pixels, on_error)
    if not found.skipped:
        return dataset
    return KeptSubset(dataset, found.kept, found.skipped, getattr(dataset, "classes", None))


HEADER_BYTES = 1 << 16   # read of each object or tar member for its header (more only if PIL needs more)


def screen_webdataset(source, max_image_pixels=PIL_RULE, on_error: str = "raise"):
    """Screening for a WebDatasetSource (a copy of one: WebDatasetSource.screened): its samples' images, named `shard:member`, left
    out of the source (shard_of, members, labels) before any epoch is read."""
    names = [source.describe(i) for i in range(len(source))]
    number = {name: i for i, name in enumerate(names)}
    stamps = file_stamps(source.shards)[source.shard_of]
    stamps[:, 2:] = [member[1:3] for member in source.members]   # (offset, size) in the shard

    def read(name: str, whole: bool) -> bytes:
        return source.image_bytes(number[name], None if whole else HEADER_BYTES)

    found = screen_items(names, stamps, read, cache_path(source.shards), max_image_pixels, on_error)
    if found.skipped:
        keep = np.asarray(found.kept, dtype=np.int64)
        source.shard_of, source.labels = source.shard_of[keep], source.labels[keep]
        source.members = [source.members[i] for i in keep]
    source.skipped, source.max_image_pixels = found.skipped, max_image_pixels
    return source
