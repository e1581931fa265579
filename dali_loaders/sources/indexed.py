"""Subclasses of torchvision's dataset classes whose `__getitem__` adds the sample's index, as
memory-bank, noisy-label and per-sample-loss code writes them:

    class IndexedImageFolder(ImageFolder):
        def __getitem__(self, index):
            image, target = super().__getitem__(index)
            return image, target, index

Such a dataset is read as its base class is (sources/torchvision.py), and the loader adds the
batch's dataset indices as the third item, as DataLoader's default_collate would. The method
is read from its source (inspect + ast), never run, and must be exactly that: `super()` (or
`super(Class, self)`) called with the index, the two names it gives returned in that order
with the index last. The subclasses between the instance's class and the torchvision class
may define nothing else that changes how a sample is read.
"""
import ast
import inspect
import textwrap
import types
from typing import Optional

from ..transforms.subclasses import INERT
from ..transforms.wrappers import runs_this_source

# what only builds the object: the readers read what it built (its samples, data, targets, loader)
INIT_ONLY = {"__init__", "find_classes", "make_dataset"}


def index_adding_base(dataset, known) -> "tuple[Optional[type], str]":
    """(the class of `known` (an iterable of classes) that type(dataset) subclasses, "") when the
    subclasses in between change nothing but what builds the object and, at most, add the
    index (see the module); (None, why not) for a subclass of a known class that does more;
    (None, "") for a class unrelated to them."""
    cls = type(dataset)
    mro = cls.__mro__
    base = next((k for k in mro[1:] if k in known), None)
    if base is None:
        return None, ""
    between = mro[:mro.index(base)]
    name = cls.__qualname__
    getitem = [k for k in between if "__getitem__" in vars(k)]
    others = sorted({attr for k in between for attr in vars(k)} - INERT - INIT_ONLY - {"__getitem__"})
    if others:
        return None, f"{name} subclasses {base.__name__} and defines {', '.join(others)}: what it reads is its own"
    if not getitem:   # it reads its samples as the known class does
        return base, ""
    if len(getitem) > 1:
        return None, f"{name} overrides __getitem__ in more than one class"
    reason = read_getitem(getitem[0])
    return (base, "") if not reason else (None, reason)


def read_getitem(cls) -> str:
    """"" when cls.__getitem__ is the module's two statements, else why not."""
    method = vars(cls)["__getitem__"]
    where = f"{cls.__qualname__}.__getitem__"
    if not isinstance(method, types.FunctionType):
        return f"{where} is not Python code"
    try:
        node = ast.parse(textwrap.dedent(inspect.getsource(method))).body[0]
    except (OSError, TypeError, SyntaxError, IndentationError, IndexError):
        return f"the source of {where} is not available"
    expected = f"{where} is not `image, target = super().__getitem__(index)` then `return image, target, index`"
    if not isinstance(node, ast.FunctionDef) or node.decorator_list:
        return expected
    arguments = node.args
    positional = arguments.posonlyargs + arguments.args
    if len(positional) != 2 or arguments.vararg or arguments.kwonlyargs or arguments.kwarg or arguments.defaults:
        return expected
    this, index = positional[0].arg, positional[1].arg
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]   # the docstring
    if len(body) != 2 or not isinstance(body[0], ast.Assign) or not isinstance(body[1], ast.Return):
        return expected
    assign, returned = body
    names = _two_names(assign.targets[0]) if len(assign.targets) == 1 else None
    if names is None or len(set(names) | {this, index}) != 4 or not _super_getitem(assign.value, this, index, cls):
        return expected
    value = returned.value
    if not (isinstance(value, ast.Tuple) and [getattr(e, "id", None) for e in value.elts] == [*names, index]
            and all(isinstance(e, ast.Name) for e in value.elts)):
        return expected
    if not runs_this_source(node, method):
        return f"{where} does not run the source found for it (a wrapped function, or a file edited since)"
    return ""


def _two_names(target) -> Optional[tuple]:
    if isinstance(target, (ast.Tuple, ast.List)) and len(target.elts) == 2 \
            and all(isinstance(e, ast.Name) for e in target.elts):
        return target.elts[0].id, target.elts[1].id
    return None


def _super_getitem(call, this: str, index: str, cls) -> bool:
    """`super().__getitem__(index)`, or `super(<cls's name>, this).__getitem__(index)`."""
    if not (isinstance(call, ast.Call) and len(call.args) == 1 and not call.keywords
            and isinstance(call.args[0], ast.Name) and call.args[0].id == index
            and isinstance(call.func, ast.Attribute) and call.func.attr == "__getitem__"):
        return False
    inner = call.func.value
    if not (isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name) and inner.func.id == "super"
            and not inner.keywords):
        return False
    if not inner.args:
        return True
    return len(inner.args) == 2 and isinstance(inner.args[0], ast.Name) and inner.args[0].id == cls.__name__ \
        and isinstance(inner.args[1], ast.Name) and inner.args[1].id == this

