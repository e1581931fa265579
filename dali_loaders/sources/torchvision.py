"""torchvision's (and timm's) own dataset objects as this library's sources.

`adapt(dataset)` reads a dataset object the user built (ImageFolder, ImageNet, CIFAR10, MNIST, ...)
into an ArraySource or a FileSource holding exactly what its __getitem__ hands its transform,
in its order: the pixels (or the files its loader opens) and the labels. The dataset's own
transform and target_transform come along, for the loader to translate.

Classes are recognised by exact type, or as a subclass that changes nothing of how a sample
is read but to add the sample's index to each item (sources/indexed.py: `adds_index`); any
other subclass may read its samples its own way, so it is not ours to read (the loader calls
its __getitem__). A known class this
cannot read as a source (a custom loader, a joint `transforms=`, segmentation targets, ...)
gives an Adapted with no source and `why`, so the loader can say why it takes the Python path.
torch's `Subset` (what `random_split` gives) and `ConcatDataset` of such datasets, or of this
library's array or file sources, are read by sources/containers.py. Hugging Face's
`datasets.Dataset` is read by sources/hf.py.

The attributes read are the objects' own, read when adapt is called: a dataset whose
`samples`, `data` or `targets` the user replaced or cut is read as it now stands. Private
attributes (Flowers102's `_image_files`, ...) are torchvision's and may change: each read
is guarded, and a missing one is a `why`, never an AttributeError.
"""
import functools
import os
from typing import Callable, Dict, Optional, Tuple

import numpy as np

from .adapted import Adapted, CannotRead
from .arrays import ArraySource, ViewedArrays
from .containers import concat, subset
from .files import FileSource, TabledFiles
from .indexed import index_adding_base


def adapt(dataset) -> Optional[Adapted]:
    """`dataset` as a source with its transforms; None for a class this does not know
    (nothing is read or imported then)."""
    from torch.utils.data import ConcatDataset, Subset

    if type(dataset) is Subset:
        return subset(dataset, adapt)
    if type(dataset) is ConcatDataset:
        return concat(dataset, adapt)
    package = type(dataset).__module__.split(".")[0]
    if package == "datasets":   # Hugging Face's: its own reader (sources/hf.py)
        from .hf import reading

        found = reading(dataset)
        if found is None:
            return None
        source, transform, why = found
        return Adapted(source, transform, None, why, only_as_source=source is not None)
    transform, target_transform = getattr(dataset, "transform", None), getattr(dataset, "target_transform", None)
    reader = _registry(package).get(type(dataset)) if package in ("torchvision", "timm") else None
    adds_index = False
    if reader is None:   # a user's subclass of a known class?
        packages = sorted({k.__module__.split(".")[0] for k in type(dataset).__mro__[1:]} & {"torchvision", "timm"})
        known = {cls: read for name in packages for cls, read in _registry(name).items()}
        base, why = index_adding_base(dataset, known)
        if base is None:
            return Adapted(None, transform, target_transform, why) if why else None
        reader, adds_index = known[base], base is not type(dataset) and _overrides_getitem(dataset, base)
    try:
        source, transform, target_transform = reader(dataset)
    except CannotRead as reason:
        return Adapted(None, transform, target_transform, f"{type(dataset).__name__}: {reason}")
    return Adapted(source, transform, target_transform, adds_index=adds_index)


def _overrides_getitem(dataset, base) -> bool:
    return type(dataset).__getitem__ is not base.__getitem__


@functools.lru_cache(maxsize=None)
def _registry(package: str) -> Dict[type, Callable]:
    """{exact class: reader} of one package; each reader gives (source, transform,
    target_transform) or raises CannotRead."""
    if package == "timm":
        try:
            from timm.data import AugMixDataset, ImageDataset
        except ImportError:   # a timm without them: nothing of timm's is known
            return {}
        return {ImageDataset: _timm_image_dataset, AugMixDataset: _timm_split_dataset}
    from torchvision import datasets

    known = {datasets.ImageFolder: _folder, datasets.DatasetFolder: _folder, datasets.ImageNet: _folder,
             datasets.CIFAR10: _cifar, datasets.CIFAR100: _cifar,
             datasets.MNIST: _mnist, datasets.FashionMNIST: _mnist, datasets.KMNIST: _mnist,
             datasets.EMNIST: _mnist, datasets.SVHN: _channels_first, datasets.STL10: _stl10,
             datasets.OxfordIIITPet: _pet, datasets.Places365: _places365, datasets.CelebA: _celeba,
             datasets.INaturalist: _inaturalist, datasets.Caltech101: _caltech101,
             datasets.Caltech256: _caltech256}
    # the file lists of the fine-grained and linear-probe sets; the later ones where this torchvision has them
    for name, reader in (("Flowers102", _listed_files), ("Food101", _listed_files), ("DTD", _listed_files),
                         ("FGVCAircraft", _listed_files), ("SUN397", _listed_files),
                         ("StanfordCars", _listed_samples), ("Imagenette", _listed_samples),
                         ("RenderedSST2", functools.partial(_listed_samples, truthy=True)),
                         ("GTSRB", functools.partial(_listed_samples, loader=False)),
                         ("Country211", _folder), ("EuroSAT", _folder)):   # ImageFolders with a download of their own
        if hasattr(datasets, name):
            known[getattr(datasets, name)] = reader
    return known


# -- what several readers share ------------------------------------------------------------


def _attribute(dataset, name: str):
    """dataset.<name>, or CannotRead naming it (a torchvision that no longer has it)."""
    try:
        return getattr(dataset, name)
    except AttributeError:
        raise CannotRead(f"it has no attribute {name!r} (another torchvision version?)") from None


def _plain_transforms(dataset) -> Tuple[Optional[Callable], Optional[Callable]]:
    """What a __getitem__ that calls `self.transform` / `self.target_transform` when they
    are not None applies."""
    return getattr(dataset, "transform", None), getattr(dataset, "target_transform", None)


def _truthy_transforms(dataset) -> Tuple[Optional[Callable], Optional[Callable]]:
    """Flowers102's and Food101's __getitem__ test `if self.transform:`: a falsy transform
    (an empty nn.Sequential) is not called."""
    transform, target_transform = _plain_transforms(dataset)
    return transform or None, target_transform or None


def _labels(values, count: int) -> np.ndarray:
    """One integer label per sample, as int64 (a view where they are already); CannotRead
    otherwise (the loader's batches hold integer labels)."""
    if hasattr(values, "numpy") and hasattr(values, "detach"):   # a torch tensor
        values = values.detach().cpu().numpy()
    try:
        labels = np.asarray(values)
    except (TypeError, ValueError):
        labels = None
    if labels is None or labels.ndim != 1 or labels.dtype.kind not in "iu" or len(labels) != count:
        raise CannotRead(f"its labels are not one integer per sample ({count} samples)")
    return labels.astype(np.int64, copy=False)


def _uint8_pixels(values, ndim: int, what: str) -> np.ndarray:
    """A uint8 array (a view of a torch tensor or numpy array) of `ndim` dimensions."""
    if hasattr(values, "numpy") and hasattr(values, "detach"):
        if values.device.type != "cpu":
            raise CannotRead(f"its {what} are on {values.device}, not in host memory")
        values = values.detach().numpy()
    if not isinstance(values, np.ndarray) or values.dtype != np.uint8 or values.ndim != ndim:
        raise CannotRead(f"its {what} are not a {ndim}-dimensional uint8 array")
    return values


def _name(dataset, split: str) -> str:
    """What tells one dataset object from another in a fingerprint: class, split and root
    (the source adds the length and a crc of the labels, or of the files and labels)."""
    return f"{type(dataset).__name__}/{split}/{os.fspath(getattr(dataset, 'root', '') or '')}"


def _array_source(dataset, images: np.ndarray, labels: np.ndarray, split: str) -> ArraySource:
    source = ViewedArrays(images, labels, _name(dataset, split))
    source.classes = getattr(dataset, "classes", None)
    return source


def _file_source(dataset, paths, targets, split: str) -> FileSource:
    """The files, labelled; named by the dataset's class, split and root."""
    if not len(paths):
        raise CannotRead("it holds no samples")
    labels = _labels(targets, len(paths))
    try:
        files = [os.fspath(path) for path in paths]
    except TypeError:
        raise CannotRead("its samples are not file paths") from None
    return FileSource(files, labels, _name(dataset, split), getattr(dataset, "classes", None))


def _pairs(samples, what: str):
    """(paths, classes) of a list of (path, class) pairs, unpacked as __getitem__ does (one
    pass: ImageNet's 1.28M pairs take ~0.2 s, where zip(*samples) takes seconds)."""
    paths, targets = [], []
    try:
        for path, target in samples:
            paths.append(path)
            targets.append(target)
    except (TypeError, ValueError):
        raise CannotRead(f"its {what} are not (path, class) pairs") from None
    return paths, targets


def _pil_loading(loader) -> None:
    """CannotRead unless `loader` opens a file as PIL's convert("RGB") (the file source's
    decode): torchvision's default loader (while its backend is PIL), its pil_loader, this
    library's own, or a def that reads as pil_loader (pil_loaders.py)."""
    import torchvision
    from torchvision.datasets import folder

    from .image_files import load_rgb
    from .pil_loaders import reads_as_pil_loader

    if loader is folder.default_loader:
        if torchvision.get_image_backend() != "PIL":
            raise CannotRead(f"torchvision's image backend is {torchvision.get_image_backend()!r}: its "
                              f"default loader gives no PIL image")
    elif loader is not folder.pil_loader and loader is not load_rgb:
        why = reads_as_pil_loader(loader)
        if why:
            raise CannotRead(why)


# -- the readers ---------------------------------------------------------------------------


def _folder(dataset):
    """ImageFolder, DatasetFolder, ImageNet, Country211 and EuroSAT (ImageFolders of their
    split's folder): `samples` ((path, class) pairs), opened by `loader`."""
    _pil_loading(_attribute(dataset, "loader"))
    paths, targets = _pairs(_attribute(dataset, "samples"), "samples")
    split = str(getattr(dataset, "split", "folder"))
    return _file_source(dataset, paths, targets, split), *_plain_transforms(dataset)


def _cifar(dataset):
    """CIFAR10 / CIFAR100: `data` (N, 32, 32, 3) uint8, `targets` a list."""
    images = _uint8_pixels(_attribute(dataset, "data"), 4, "images")
    if images.shape[-1] != 3:
        raise CannotRead("its images are not (N, H, W, 3)")
    split = "train" if _attribute(dataset, "train") else "test"
    return (_array_source(dataset, images, _labels(_attribute(dataset, "targets"), len(images)), split),
            *_plain_transforms(dataset))


def _mnist(dataset):
    """MNIST and kin: `data` (N, 28, 28) uint8 tensor, handed over as mode "L"."""
    images = _uint8_pixels(_attribute(dataset, "data"), 3, "images")
    split = getattr(dataset, "split", None)   # EMNIST's
    split = ("train" if _attribute(dataset, "train") else "test") + (f"-{split}" if split else "")
    return (_array_source(dataset, images, _labels(_attribute(dataset, "targets"), len(images)), split),
            *_plain_transforms(dataset))


def _hwc_view(dataset) -> np.ndarray:
    """SVHN's and STL10's `data`, (N, 3, H, W), seen as the (N, H, W, 3) its __getitem__
    transposes each image to: a view, no copy."""
    images = _uint8_pixels(_attribute(dataset, "data"), 4, "images")
    if images.shape[1] != 3:
        raise CannotRead("its images are not (N, 3, H, W)")
    return images.transpose(0, 2, 3, 1)


def _channels_first(dataset):
    """SVHN: `data` (N, 3, 32, 32), `labels` int64 (10 already made 0)."""
    images = _hwc_view(dataset)
    labels = _labels(_attribute(dataset, "labels"), len(images))
    return _array_source(dataset, images, labels, str(_attribute(dataset, "split"))), *_plain_transforms(dataset)


def _stl10(dataset):
    """STL10: as SVHN, 96x96; the unlabeled images' label is -1 and its __getitem__ hands
    it over, which the loader's labels do not."""
    split = str(_attribute(dataset, "split"))
    if "unlabeled" in split:
        raise CannotRead(f"split {split!r} holds unlabeled images (label -1)")
    if _attribute(dataset, "labels") is None:
        raise CannotRead("it has no labels")
    images = _hwc_view(dataset)
    labels = _labels(dataset.labels, len(images))
    folds = getattr(dataset, "folds", None)
    split += f"-fold{folds}" if folds is not None else ""
    return _array_source(dataset, images, labels, split), *_plain_transforms(dataset)


def _listed_files(dataset):
    """Flowers102, Food101, DTD, FGVCAircraft and SUN397: `_image_files` and `_labels`, opened
    by `loader`; their __getitem__ tests `if self.transform:`."""
    _pil_loading(_attribute(dataset, "loader"))
    files, labels = _attribute(dataset, "_image_files"), _attribute(dataset, "_labels")
    return _file_source(dataset, files, labels, _split_of(dataset)), *_truthy_transforms(dataset)


def _listed_samples(dataset, loader: bool = True, truthy: bool = False):
    """StanfordCars, Imagenette, RenderedSST2 (`truthy`: `if self.transform:`) and GTSRB (no
    `loader`: PIL's convert("RGB")): `_samples`, (path, class) pairs, opened by `loader`."""
    if loader:
        _pil_loading(_attribute(dataset, "loader"))
    paths, targets = _pairs(_attribute(dataset, "_samples"), "_samples")
    source = _file_source(dataset, paths, targets, _split_of(dataset))
    return source, *(_truthy_transforms(dataset) if truthy else _plain_transforms(dataset))


def _split_of(dataset) -> str:
    """The split a dataset object holds, for its source's name (SUN397 has none: all of it)."""
    return str(getattr(dataset, "_split", "all"))


def _pet(dataset):
    """OxfordIIITPet: `_images` and `_labels` (its "category" target), opened as PIL's
    convert("RGB"); its __getitem__ calls the joint `transforms`, which is the plain pair
    (a StandardTransform) unless the user built it with `transforms=`."""
    target_types = list(_attribute(dataset, "_target_types"))
    if target_types != ["category"]:
        raise CannotRead(f"its target_types {target_types} are not ['category']")
    files, labels = _attribute(dataset, "_images"), _attribute(dataset, "_labels")
    source = _file_source(dataset, files, labels, str(_attribute(dataset, "_split")))
    return source, *_joint_transforms(dataset)


def _places365(dataset):
    """Places365: `imgs`, (path, class) pairs, opened by `loader`, through the joint
    `transforms` as its __getitem__ calls them."""
    _pil_loading(_attribute(dataset, "loader"))
    paths, targets = _pairs(_attribute(dataset, "imgs"), "imgs")
    if any(target is None for target in targets):
        raise CannotRead("its split has no labels")
    return _file_source(dataset, paths, targets, str(_attribute(dataset, "split"))), *_joint_transforms(dataset)


CELEBA_TARGETS = {"attr": "attr", "identity": "identity", "bbox": "bbox", "landmarks": "landmarks_align"}


def _celeba(dataset):
    """CelebA with one target type: `filename` in its image folder, opened by PIL (its JPEGs are
    RGB); the target, a tensor per sample (a row of 0/1 attributes, the identity, the box or
    the landmarks), looked up in a table by the loader."""
    from .label_table import LabelTable

    target_types = list(_attribute(dataset, "target_type"))
    if len(target_types) != 1 or target_types[0] not in CELEBA_TARGETS:
        raise CannotRead(f"its target_type {target_types} is not one of {sorted(CELEBA_TARGETS)} alone")
    values = np.asarray(_attribute(dataset, CELEBA_TARGETS[target_types[0]]))
    if target_types[0] == "identity":
        values = values[:, 0]   # as its __getitem__ indexes it: a 0-d tensor per sample
    folder = os.path.join(os.fspath(_attribute(dataset, "root")), _attribute(dataset, "base_folder"), "img_align_celeba")
    files = [os.path.join(folder, name) for name in _attribute(dataset, "filename")]
    if not files or len(files) != len(values):
        raise CannotRead(f"its {len(files)} files and {len(values)} targets do not pair up")
    split = f"{_attribute(dataset, 'split')}-{target_types[0]}"
    return TabledFiles(files, LabelTable(values, tensors=True), _name(dataset, split)), *_plain_transforms(dataset)


def _inaturalist(dataset):
    """INaturalist with one target type: `index`, (category, file name) pairs under the
    category's folder; opened by `loader`, or, where it has none, by PIL (its JPEGs are RGB)."""
    loader = _attribute(dataset, "loader")
    if loader is not None:
        _pil_loading(loader)
    target_types = list(_attribute(dataset, "target_type"))
    if len(target_types) != 1:
        raise CannotRead(f"its target_type {target_types} gives a tuple per sample, not one class index")
    kind, folders, ranks = target_types[0], _attribute(dataset, "all_categories"), _attribute(dataset, "categories_map")
    root = os.fspath(_attribute(dataset, "root"))
    paths, targets = [], []
    for category, name in _attribute(dataset, "index"):
        paths.append(os.path.join(root, folders[category], name))
        targets.append(category if kind == "full" else ranks[category][kind])
    split = f"{_attribute(dataset, 'version')}-{kind}"
    return _file_source(dataset, paths, targets, split), *_plain_transforms(dataset)


def _caltech101(dataset):
    """Caltech101 with target_type "category": category `y[i]`'s file image_<index[i]>.jpg,
    named by its numbering as its __getitem__ names it. Opened by PIL without a convert: a
    grey JPEG (a few in the download) is handed over as "L", which RGB recipes cannot
    normalize; the source decodes it as RGB, as the convert("RGB") such recipes add does."""
    target_types = list(_attribute(dataset, "target_type"))
    if target_types != ["category"]:
        raise CannotRead(f"its target_type {target_types} is not ['category'] (annotations are read per sample)")
    return _caltech(dataset, "101_ObjectCategories", lambda label, number: f"image_{number:04d}.jpg")


def _caltech256(dataset):
    """Caltech256: category `y[i]`'s file <y[i] + 1>_<index[i]>.jpg, opened as Caltech101's."""
    return _caltech(dataset, "256_ObjectCategories", lambda label, number: f"{label + 1:03d}_{number:04d}.jpg")


def _caltech(dataset, folder: str, file_name: Callable[[int, int], str]):
    root = os.path.join(os.fspath(_attribute(dataset, "root")), folder)
    categories, labels, numbers = (_attribute(dataset, name) for name in ("categories", "y", "index"))
    if len(labels) != len(numbers):
        raise CannotRead(f"its {len(labels)} classes and {len(numbers)} file numbers do not pair up")
    paths = [os.path.join(root, categories[label], file_name(label, number)) for label, number in zip(labels, numbers)]
    source = _file_source(dataset, paths, labels, "category")
    source.classes = list(categories)
    return source, *_plain_transforms(dataset)


def _joint_transforms(dataset) -> Tuple[Optional[Callable], Optional[Callable]]:
    """(transform, target_transform) of a __getitem__ that calls the joint `transforms` (made
    from them when the object was built) where it is set: the plain pair unless the user built
    it with `transforms=`, image and target together."""
    from torchvision.datasets.vision import StandardTransform

    joint = _attribute(dataset, "transforms")
    if joint is None:
        return None, None
    if type(joint) is not StandardTransform:
        raise CannotRead("it was built with a joint transforms= (image and target together)")
    return joint.transform, joint.target_transform


def _timm_image_dataset(dataset):
    """timm's ImageDataset over its folder reader (the reader's `samples`) or its Hugging Face
    datasets reader (the Dataset's image and label columns), each image opened as PIL's
    convert("RGB")."""
    from timm.data.readers.reader_image_folder import ReaderImageFolder

    reader = _attribute(dataset, "reader")
    hub = _timm_hub_reader(reader)
    if type(reader) is not ReaderImageFolder and hub is None:
        raise CannotRead(f"its reader {type(reader).__name__} is neither timm's plain folder reader nor its "
                          f"Hugging Face datasets reader (hfds/)")
    if _attribute(dataset, "load_bytes"):
        raise CannotRead("load_bytes=True hands the transform bytes, not an image")
    mode = _attribute(dataset, "input_img_mode")
    if mode != "RGB":
        raise CannotRead(f"input_img_mode={mode!r}: only 'RGB' images are read as files")
    if getattr(dataset, "additional_features", None) is not None:
        raise CannotRead("it hands over additional_features")
    if hub is not None:
        return _timm_hub_source(reader), *_plain_transforms(dataset)
    paths, targets = _pairs(_attribute(reader, "samples"), "reader's samples")
    if any(target is None for target in targets):
        raise CannotRead("some samples have no class")
    source = _file_source(dataset, paths, targets, "folder")
    source.name += os.fspath(getattr(reader, "root", "") or "")
    class_to_idx = getattr(reader, "class_to_idx", None) or {}
    source.classes = sorted(class_to_idx, key=class_to_idx.get) or None
    return source, *_plain_transforms(dataset)


def _timm_hub_reader(reader):
    """`reader` if it is timm's ReaderHfds (`create_dataset("hfds/...")`: a datasets.Dataset
    indexed row by row), else None; None too where timm or `datasets` lacks it."""
    try:
        from timm.data.readers.reader_hfds import ReaderHfds
    except ImportError:   # `datasets` not installed: no such reader can exist
        return None
    return reader if type(reader) is ReaderHfds else None


def _timm_hub_source(reader):
    """ReaderHfds's rows as sources/hf.py reads a Dataset: its `input_key` column's bytes, its
    `target_key` column as the label (what `reader[i]` hands ImageDataset)."""
    from .hf import HuggingFaceSource

    if getattr(reader, "target_keys", None):
        raise CannotRead("its targets are several fields (a multi-hot vector), not one class index")
    if getattr(reader, "dense_target", False) or _attribute(reader, "remap_class"):
        raise CannotRead("its targets are remapped (class_map or target_format), which its reader does per item")
    table, label = _attribute(reader, "dataset"), _attribute(reader, "label_key")
    if label not in table.column_names:
        raise CannotRead(f"its target_key {label!r} is not one of the Dataset's columns {table.column_names}")
    try:
        source = HuggingFaceSource(table, image_column=_attribute(reader, "image_key"), label_column=label)
    except ValueError as why:   # NotReadable, or a Dataset with a transform of its own
        raise CannotRead(f"its Dataset: {why}") from None
    class_to_idx = getattr(reader, "class_to_idx", None) or {}
    source.classes = sorted(class_to_idx, key=class_to_idx.get) or source.classes
    return source


def _timm_split_dataset(dataset):
    """timm's AugMixDataset (split augmentation for the Jensen-Shannon loss): its dataset read
    as a source; each item a tuple of `num_splits` images from one transformed image (the
    dataset's transform): the first only normalized, the others augmented, then normalized."""
    from ..transforms import SplitViews

    inner = adapt(_attribute(dataset, "dataset"))
    if inner is None or inner.source is None:
        why = inner.why if inner is not None else f"{type(dataset.dataset).__name__} is not read as a source"
        raise CannotRead(f"its dataset: {why}")
    if inner.adds_index:
        raise CannotRead("its dataset's items carry their index, which it does not unpack")
    augmentation, normalize = _attribute(dataset, "augmentation"), _attribute(dataset, "normalize")
    if augmentation is None:
        raise CannotRead("no augmentation is set (set its transform to timm's three transforms: "
                          "create_transform(..., separate=True))")
    splits = int(_attribute(dataset, "num_splits"))
    views = [normalize] + [[augmentation, normalize]] * (splits - 1)
    return inner.source, SplitViews(inner.transform, views), inner.target_transform
