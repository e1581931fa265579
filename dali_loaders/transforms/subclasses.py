"""Subclasses of a library's transform that change only how it is made, as repos write them
to fix their own defaults (DINOv2's `class GaussianBlur(v2.RandomApply)` with an `__init__`
of its own and no other method): such an object runs its library class's code alone, so it
is read as an object of that class.

A class between the object's and the library's that defines anything besides `__init__` and
its repr (a method, a property, a class attribute the library reads) may change what runs:
the object is then not read as the library's, and the loader says why it takes the Python path.
"""
from typing import Any, Callable, Optional, Tuple

# class attributes every class has, or that change nothing of what runs
INERT = frozenset({"__module__", "__qualname__", "__doc__", "__dict__", "__weakref__", "__annotations__",
                   "__firstlineno__", "__static_attributes__", "__orig_bases__", "__parameters__"})
# what a transform's class body may hold besides them and still run its base's code alone
HOW_MADE = INERT | {"__init__", "__repr__", "extra_repr"}


def library_base(obj, is_library_class: Callable[[type], bool]) -> Tuple[Optional[type], str]:
    """(the nearest base class of `obj`'s class that is a library's transform, "") when the
    classes below it change only how it is made; (None, why not) when they change more;
    (None, "") for an object of a library class or of a class unrelated to them."""
    cls = type(obj)
    if is_library_class(cls):
        return None, ""
    mro = cls.__mro__
    base = next((klass for klass in mro[1:-1] if is_library_class(klass)), None)
    if base is None:
        return None, ""
    more = sorted({attr for klass in mro[:mro.index(base)] for attr in vars(klass)} - HOW_MADE)
    if more:
        return None, f"{cls.__qualname__} subclasses {base.__name__} and defines {', '.join(more)}: what it runs is its own"
    return base, ""


def as_base(obj, base: type) -> Any:
    """A shallow copy of `obj` as an object of `base`: the same attributes, the base's methods."""
    copy = object.__new__(base)
    copy.__dict__.update(vars(obj))
    return copy
