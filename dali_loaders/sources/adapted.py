"""What sources/torchvision.py and sources/containers.py make of a dataset object: an Adapted
(its source, or why it has none, and the transforms its __getitem__ applies)."""
from dataclasses import dataclass
from typing import Any, Callable, Optional


@dataclass(frozen=True)
class Adapted:
    """A dataset object read as a source (None if it cannot be: `why` says why), and the
    transform and target_transform its __getitem__ applies."""
    source: Any
    transform: Optional[Callable]
    target_transform: Optional[Callable]
    why: str = ""
    only_as_source: bool = False   # a Subset of a library source: no __getitem__ reads it, only `source`
    adds_index: bool = False       # each item is (image, target, the sample's index): see sources/indexed.py


class CannotRead(Exception):
    """Why a known dataset class cannot be read as a source (a short reason)."""
