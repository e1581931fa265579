"""Which path a loader's dataset takes, and why.

- A source of this library (sources/protocol.py) is read by DALI, with `transform` as its recipe.
- A torchvision (or timm) dataset object the library can read as a source
  (sources/torchvision.py) is read by DALI too, its own `transform` and `target_transform` the
  recipe, so the batches are the ones DataLoader would give.
- Anything else, or a recipe with no DALI translation, takes the Python path: the dataset's
  own `__getitem__` in worker processes (python_path.py), with a one-line note saying why.
"""
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Optional

from .. import transforms
from ..sources.protocol import is_source
from ..sources.torch_dataset import SourceDataset
from .python_path import TransformedDataset


class PythonPathNote(UserWarning):
    """Says that a loader takes the Python path, and why (filter it to silence it)."""


@dataclass
class Route:
    source: Any = None                       # the DALI path's source, or None on the Python path
    recipe: Optional[transforms.Plan] = None
    transform: Any = None                    # the recipe as the user gave it (the twin calls it)
    target_transform: Optional[Callable] = None
    dataset: Any = None                      # the Python path's dataset, or the twin's
    why: str = ""                            # why the Python path
    adds_index: bool = False                 # the dataset's items end with the sample's index (sources/indexed.py)

    @property
    def name(self) -> str:
        return "dali" if self.source is not None else f"python: {self.why}"


def default_transform():
    """A dataset with no transform: its images as uint8 tensors, as v2.ToImage makes them."""
    from torchvision.transforms import v2

    return v2.ToImage()


def own_transform(dataset, transform, what: str):
    """The recipe: the dataset's own transform, or `transform=`; a ValueError if both are set."""
    if transform is not None and getattr(dataset, what, None) is not None:
        raise ValueError(f"the dataset has a {what} of its own and {what}= was passed too; pass one of them "
                         f"(the dataset's is what DataLoader would apply)")
    return transform if transform is not None else getattr(dataset, what, None)


def route(dataset, transform, target_transform, python_fallback: bool) -> Route:
    """The path `dataset` takes (see the module)."""
    from ..sources.torchvision import adapt

    given = (transform, target_transform)   # what the loader was handed, not the dataset's own
    adds_index = False
    if is_source(dataset):
        source = dataset
    else:
        adapted = adapt(dataset)
        if adapted is None or adapted.source is None:
            refuse_iterable(dataset)
        if adapted is None:
            own_transform(dataset, transform, "transform")   # one recipe per dataset, whatever its class
            own_transform(dataset, target_transform, "target_transform")
            return python_route(dataset, *given, f"{type(dataset).__name__} is not a dataset this library "
                                                  f"reads as files or arrays")
        transform = own_transform(adapted, transform, "transform")   # what its __getitem__ applies
        target_transform = own_transform(adapted, target_transform, "target_transform")
        if adapted.source is None:
            return python_route(dataset, *given, adapted.why)
        source, adds_index = adapted.source, adapted.adds_index
    recipe_transform = transform if transform is not None else default_transform()
    why = untranslatable(recipe_transform)
    if why and not python_fallback:
        if dataset is source:
            return python_route(SourceDataset(source, recipe_transform), None, target_transform, why)
        return python_route(dataset, *given, why)
    plan = transforms.plan(recipe_transform, python_fallback)
    return Route(source=source, recipe=plan, transform=recipe_transform, target_transform=target_transform,
                 dataset=dataset, adds_index=adds_index)


def refuse_iterable(dataset) -> None:
    """A TypeError for a torch IterableDataset this library does not read itself: the loader's
    order (shuffling, shards across ranks, resume) picks samples by index, which such a dataset
    does not offer."""
    import torch

    if isinstance(dataset, torch.utils.data.IterableDataset):
        raise TypeError(f"{type(dataset).__name__} is an IterableDataset: it yields its samples in an order of its "
                        f"own, and this loader picks samples by index (to shuffle, shard across ranks and resume). "
                        f"Pass a map-style dataset (one with __len__ and __getitem__; for WebDataset tar shards, "
                        f"get_webdataset_iter_dali), or keep torch's DataLoader for this one")


def untranslatable(transform) -> str:
    """Why `transform` has no DALI translation, or ""."""
    return transforms.untranslatable_reason(transform) or ""


def python_route(dataset, transform, target_transform, why: str) -> Route:
    """The Python path over `dataset`, with the loader's own transform= / target_transform= (not
    the dataset's: its __getitem__ applies those) on each item."""
    if transform is not None or target_transform is not None:
        dataset = TransformedDataset(dataset, transform, target_transform)
    return Route(dataset=dataset, transform=transform, why=why)


def note(route: Route, num_workers: int) -> None:
    """The one-line note of a loader on the Python path."""
    if route.source is None:
        workers = f"{num_workers} worker process(es)" if num_workers else "this process (num_workers=0)"
        warnings.warn(f"DaliLoader takes the Python path ({route.why}): __getitem__ runs in {workers}, as in "
                      f"DataLoader", PythonPathNote, stacklevel=4)
