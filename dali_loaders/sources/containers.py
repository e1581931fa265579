"""torch's dataset containers, `Subset` (what `random_split` gives) and `ConcatDataset`, read as
the sources of the datasets they hold: the samples at a Subset's indices; a ConcatDataset's
datasets one after the other, as its indices run.

Each takes `adapt` (sources/torchvision.py's) to read the datasets inside, so that this module
imports nothing that imports it.
"""
import zlib
from typing import Callable, List, Optional

import numpy as np

from .adapted import Adapted, CannotRead
from .arrays import ArraySource, ViewedArrays
from .files import FileSource
from .protocol import is_source


def _inner(dataset, adapt: Callable) -> Optional[Adapted]:
    """A dataset inside a container: one of this library's sources as it is, else adapted."""
    return Adapted(dataset, None, None, only_as_source=True) if is_source(dataset) else adapt(dataset)


def subset(dataset, adapt: Callable) -> Optional[Adapted]:
    """torch's Subset: its dataset read as a source (or a source itself), cut to its indices;
    the transforms its dataset's __getitem__ applies (a Subset has none of its own)."""
    inner = _inner(dataset.dataset, adapt)
    if inner is None:
        return None
    if inner.source is None:
        return Adapted(None, inner.transform, inner.target_transform, f"a Subset of {inner.why}")
    try:
        source = take(inner.source, dataset.indices)
    except CannotRead as reason:
        if inner.only_as_source:   # no __getitem__ to fall back on
            raise TypeError(f"a Subset of a {type(inner.source).__name__}: {reason}") from None
        return Adapted(None, inner.transform, inner.target_transform, f"a Subset: {reason}")
    return Adapted(source, inner.transform, inner.target_transform, only_as_source=inner.only_as_source,
                   adds_index=inner.adds_index)


def take(source, indices):
    """The samples of an array or file source at `indices` (as Python indexes them), a
    source of their own whose name says which."""
    total = len(source)
    picked = np.asarray(indices)   # a list, a range, a tensor or an array
    if picked.ndim != 1 or (len(picked) and picked.dtype.kind not in "iu"):
        raise CannotRead("its indices are not a sequence of integers")
    picked = picked.astype(np.int64)
    given = picked.copy()   # as the Subset hands them to the dataset (an index-adding one returns them)
    if not len(picked):
        raise CannotRead("it holds no samples")
    if picked.min() < -total or picked.max() >= total:
        raise CannotRead(f"its indices reach past the dataset's {total} samples")
    picked %= total
    if hasattr(source, "subset"):   # a source that cuts itself (sources/hf.py)
        return source.subset(picked)
    tag = f"[{len(picked)} of {total}, {zlib.crc32(picked.tobytes()):08x}]"
    classes = getattr(source, "classes", None)
    before = getattr(source, "kept_positions", None)
    positions = given if before is None else before[picked]
    if isinstance(source, FileSource) and getattr(source, "label_table", None) is not None:
        cut = source.cut(picked)   # its labels are rows of its table: the rows cut, the table kept
        cut.name, cut.kept_positions = source.name + tag, positions
        return cut
    if isinstance(source, FileSource):
        return FileSource([source.files[i] for i in picked], source.labels[picked], source.name + tag, classes,
                          kept_positions=positions)
    if isinstance(source, ArraySource):
        taken = ViewedArrays(source.images[picked], source.labels[picked], source.name + tag, kept_positions=positions)
        taken.classes = classes
        return taken
    raise CannotRead(f"its dataset is a {type(source).__name__}, which is not cut by indices")


def _refuse_label_table(source) -> None:
    """A source whose labels are row numbers into its `label_table` (labels that are not one
    integer) is not joined here: each has a table of its own."""
    if getattr(source, "label_table", None) is not None:
        raise CannotRead(f"its {type(source).__name__}'s labels are looked up in a table of its own, which is "
                         f"not joined to another")


def concat(dataset, adapt: Callable) -> Optional[Adapted]:
    """torch's ConcatDataset: its datasets read as sources of one kind (image files, or pixel
    arrays of one shape), joined in its order. One loader runs one recipe, so its datasets must
    apply the same transform and target_transform (the same objects), as the recipe of all."""
    parts = [_inner(part, adapt) for part in dataset.datasets]
    transforms = _shared([part.transform for part in parts if part is not None])
    target_transforms = _shared([part.target_transform for part in parts if part is not None])

    def refused(why: str) -> Adapted:
        return Adapted(None, transforms[0] if len(transforms) == 1 else None,
                       target_transforms[0] if len(target_transforms) == 1 else None, f"a ConcatDataset: {why}")

    for k, (part, inner) in enumerate(zip(dataset.datasets, parts)):
        if inner is None:
            return refused(f"its dataset {k}, a {type(part).__name__}, is not read as files or arrays")
        if inner.source is None:
            return refused(f"its dataset {k}: {inner.why}")
    if len(transforms) > 1 or len(target_transforms) > 1:
        return refused("its datasets apply different transforms (a loader runs one recipe): give them the same "
                       "transform object")
    if len({part.only_as_source for part in parts}) > 1:
        return refused("it joins this library's sources and dataset objects")
    if any(part.adds_index for part in parts):
        return refused("its datasets' items carry their index, which ConcatDataset does not offset")
    try:
        source = _joined([part.source for part in parts])
    except CannotRead as reason:
        if parts[0].only_as_source:   # no __getitem__ to fall back on
            raise TypeError(f"a ConcatDataset of this library's sources: {reason}") from None
        return refused(str(reason))
    return Adapted(source, transforms[0] if transforms else None, target_transforms[0] if target_transforms else None,
                   only_as_source=parts[0].only_as_source)


def _shared(callables: List) -> List:
    """The distinct objects among `callables` (by identity), in order."""
    distinct = []
    for one in callables:
        if not any(one is seen for seen in distinct):
            distinct.append(one)
    return distinct


def _joined(sources: List):
    """One source of file sources, or of array sources of one image shape, one after another."""
    for source in sources:
        _refuse_label_table(source)
    name = "+".join(source.name for source in sources)
    labels = np.concatenate([source.labels for source in sources])
    classes = [getattr(source, "classes", None) for source in sources]
    common = classes[0] if all(c == classes[0] for c in classes) else None
    if all(isinstance(source, FileSource) for source in sources):
        return FileSource([path for source in sources for path in source.files], labels, name, common)
    if all(isinstance(source, ArraySource) for source in sources):
        shapes = {source.images.shape[1:] for source in sources}
        if len(shapes) > 1:
            raise CannotRead(f"its datasets' images differ in shape {sorted(shapes)}, and a batch of arrays is one")
        joined = ViewedArrays(np.concatenate([source.images for source in sources]), labels, name)
        joined.classes = common
        return joined
    kinds = sorted({type(source).__name__ for source in sources})
    raise CannotRead(f"its datasets are read as different kinds of source ({', '.join(kinds)}), or as a kind "
                     f"that is not joined")
