"""A dataset's `loader=` function read as torchvision's pil_loader, which repos copy into their
own code (`with open(path, "rb") as f:` around `img = Image.open(f)` and `return
img.convert("RGB")`), or write in one line (`return Image.open(path).convert("RGB")`).

Such a function opens the file with PIL and converts it to RGB, which is what the file source
decodes, so the dataset is read as files. Its source is read, never run, and must compile to
the code Python runs; `Image` must be PIL's and `open` Python's own. Any other loader keeps the
dataset on the Python path, and the loader says why.
"""
import ast
import builtins
import inspect
import textwrap
import types
from typing import List, Optional

from ..transforms.wrappers import runs_this_source


def reads_as_pil_loader(loader) -> str:
    """"" when `loader` is a def that opens its argument as torchvision's pil_loader does,
    else why not."""
    name = getattr(loader, "__name__", repr(loader))
    if not isinstance(loader, types.FunctionType) or loader.__name__ == "<lambda>":
        return f"its loader {name!r} is not torchvision's default (PIL) loader, nor a def that reads as it"
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(loader)))
    except (OSError, TypeError, SyntaxError):
        return f"the source of its loader {name!r} is not available"
    node = tree.body[0] if len(tree.body) == 1 else None
    arguments = node.args if isinstance(node, ast.FunctionDef) else None
    if arguments is None or node.decorator_list or len(arguments.args) != 1 or arguments.posonlyargs \
            or arguments.vararg or arguments.kwonlyargs or arguments.kwarg or arguments.defaults:
        return f"its loader {name!r} is not a plain def of the path alone"
    if not _opens_as_pil_loader(_statements(node.body), arguments.args[0].arg, None, set()):
        return (f"its loader {name!r} does more than torchvision's pil_loader (open the path with PIL's "
                f"Image.open, return .convert('RGB'))")
    if not _names_are_pils_and_pythons(loader):
        return f"in its loader {name!r}, `Image` is not PIL's Image or `open` is not Python's"
    if not runs_this_source(node, loader):
        return f"its loader {name!r} does not run the source found for it"
    return ""


def _statements(body: List[ast.stmt]) -> List[ast.stmt]:
    """The body less a docstring."""
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        return body[1:]
    return body


def _opens_as_pil_loader(body: List[ast.stmt], path: str, handle: Optional[str], opened: set) -> bool:
    """Whether the statements are (a `with open(path, "rb") as f:` around) an optional
    `img = Image.open(path or f)` and `return <that image>.convert("RGB")`."""
    if len(body) == 1 and isinstance(body[0], ast.With) and handle is None:
        (item,) = body[0].items if len(body[0].items) == 1 else (None,)
        if item is None or not isinstance(item.optional_vars, ast.Name) or not _opens_file(item.context_expr, path):
            return False
        return _opens_as_pil_loader(body[0].body, path, item.optional_vars.id, opened)
    if len(body) == 2 and isinstance(body[0], ast.Assign) and len(body[0].targets) == 1 \
            and isinstance(body[0].targets[0], ast.Name) and _image_open(body[0].value, path, handle):
        return _opens_as_pil_loader(body[1:], path, handle, {body[0].targets[0].id})
    if len(body) != 1 or not isinstance(body[0], ast.Return):
        return False
    call = body[0].value
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "convert"
            and len(call.args) == 1 and not call.keywords and isinstance(call.args[0], ast.Constant)
            and call.args[0].value == "RGB"):
        return False
    image = call.func.value
    return (isinstance(image, ast.Name) and image.id in opened) or _image_open(image, path, handle)


def _opens_file(node, path: str) -> bool:
    """`open(path, "rb")`."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "open" \
        and not node.keywords and len(node.args) == 2 and _is_name(node.args[0], path) \
        and isinstance(node.args[1], ast.Constant) and node.args[1].value == "rb"


def _image_open(node, path: str, handle: Optional[str]) -> bool:
    """`Image.open(handle)` inside the with, `Image.open(path)` without one."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "open" \
        and _is_name(node.func.value, "Image") and not node.keywords and len(node.args) == 1 \
        and _is_name(node.args[0], handle if handle is not None else path)


def _is_name(node, name: Optional[str]) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _names_are_pils_and_pythons(loader) -> bool:
    from PIL import Image

    names = loader.__globals__
    return names.get("Image") is Image and names.get("open", builtins.open) is builtins.open \
        and not loader.__code__.co_freevars
