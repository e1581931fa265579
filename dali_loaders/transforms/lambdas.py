"""Lambda (v1 and v2) read as the step it equals, for the one-line functions recipes write:

    Lambda(lambda t: (t * 2) - 1)            # diffusion and GAN recipes: [0, 1] -> [-1, 1]
    Lambda(lambda x: x.repeat(3, 1, 1))      # grey (MNIST) -> 3 channels
    Lambda(lambda img: img.convert("RGB"))   # PIL's convert, "RGB" or "L"

A plain function in a Compose is read the same way where its body is one `return` of such an
expression (CLIP's and open_clip's `def _convert_image_to_rgb(image): return image.convert("RGB")`).

As wrappers.py reads a class, the lambda's source is read, never run, and must compile to the
code Python runs: one argument, nothing from outside it but number literals. Arithmetic is
+, -, * and / of the image (once) and numbers, on a float image, or on a uint8 tensor where
torch's first operation makes floats (x / 255, x * 0.5): DALI folds it into the pending
normalization. Anything else takes the Python path, saying why.
"""
import ast
import inspect
import numbers
import re
import textwrap
import types
import weakref
from typing import Optional, Tuple

import torch

from ._core import Images, Untranslatable, describe, dtype_after, refuses, refuses_on, register, translates

_read = weakref.WeakKeyDictionary()   # function -> (what it equals, why not)


def lambda_node(function) -> Tuple[Optional[ast.Lambda], str]:
    """(the ast of `function`'s lambda, "") where its source holds a lambda that compiles to
    its code, else (None, why not)."""
    if not isinstance(function, types.FunctionType) or function.__name__ != "<lambda>":
        return None, "its function is not a lambda"
    try:
        text = "".join(inspect.getsourcelines(function)[0])
    except (OSError, TypeError):
        return None, "the lambda's source is not available"
    code = function.__code__
    for start in (match.start() for match in re.finditer(r"\blambda\b", text)):
        tail = text[start:]
        # the longest stretch that parses as a lambda: its body reaches that far
        for end in sorted({m.start() for m in re.finditer(r"[,)\]}\n]", tail)} | {len(tail)}, reverse=True):
            try:
                node = ast.parse(tail[:end].strip(), mode="eval").body
            except SyntaxError:
                continue
            if isinstance(node, ast.Lambda):
                if _compiles_to(node, code):
                    return node, ""
                break
    return None, "no lambda in its source compiles to the code Python runs"


def function_node(function) -> Tuple[Optional[ast.Lambda], str]:
    """A plain function whose body is one `return <expression>` (a docstring before it allowed),
    as the lambda it equals, where its source compiles to the code Python runs; else (None,
    why not)."""
    if not isinstance(function, types.FunctionType):
        return None, "it is not a function"
    if function.__name__ == "<lambda>":
        return lambda_node(function)
    try:
        text = textwrap.dedent(inspect.getsource(function))
        tree = ast.parse(text)
    except (OSError, TypeError, SyntaxError):
        return None, "the function's source is not available"
    definition = tree.body[0] if len(tree.body) == 1 else None
    if not isinstance(definition, ast.FunctionDef) or definition.decorator_list:
        return None, "its source is not one plain def"
    body = definition.body[1:] if definition.body and _is_docstring(definition.body[0]) else definition.body
    if len(body) != 1 or not isinstance(body[0], ast.Return) or body[0].value is None:
        return None, "its body is more than one return statement"
    compiled = compile(ast.fix_missing_locations(ast.Module([definition], type_ignores=[])), "<function>", "exec")
    inner = next((c for c in compiled.co_consts if isinstance(c, types.CodeType)), None)
    if inner is None or not _same_code(inner, function.__code__):
        return None, "its source does not compile to the code Python runs"
    return ast.Lambda(args=definition.args, body=body[0].value), ""


def _is_docstring(statement) -> bool:
    return isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant) \
        and isinstance(statement.value.value, str)


def _same_code(inner, code) -> bool:
    """The same code but for line numbers (nested code objects alike)."""
    if not all(getattr(inner, name) == getattr(code, name) for name in ("co_code", "co_names", "co_varnames",
                                                                         "co_freevars")):
        return False
    return len(inner.co_consts) == len(code.co_consts) and all(
        _same_code(a, b) if isinstance(a, types.CodeType) and isinstance(b, types.CodeType) else a == b
        for a, b in zip(inner.co_consts, code.co_consts))


def _compiles_to(node: ast.Lambda, code) -> bool:
    compiled = compile(ast.fix_missing_locations(ast.Expression(node)), "<lambda>", "eval")
    inner = next((c for c in compiled.co_consts if isinstance(c, types.CodeType)), None)
    return inner is not None and all(getattr(inner, name) == getattr(code, name)
                                     for name in ("co_code", "co_consts", "co_names", "co_varnames", "co_freevars"))


def read(function) -> Tuple[Optional[tuple], str]:
    """((kind, value), "") for a lambda this module reads: ("affine", (scale, offset)),
    ("convert", mode), ("repeat", None) or ("identity", None); else (None, why not)."""
    known = _read.get(function)
    if known is None:
        known = _read[function] = _read_lambda(function)
    return known


def _read_lambda(function):
    node, why = function_node(function)
    if node is None:
        return None, why
    arguments = node.args
    if len(arguments.args) != 1 or arguments.posonlyargs or arguments.vararg or arguments.kwonlyargs \
            or arguments.kwarg or arguments.defaults:
        return None, "the function takes more than the image"
    name, body = arguments.args[0].arg, node.body
    if isinstance(body, ast.Call) and isinstance(body.func, ast.Attribute) and _is(body.func.value, name) \
            and not body.keywords:
        values = [_number(a) for a in body.args]
        if body.func.attr == "convert" and len(body.args) == 1 and isinstance(body.args[0], ast.Constant) \
                and body.args[0].value in ("RGB", "L"):
            return ("convert", body.args[0].value), ""
        if body.func.attr in ("repeat", "expand") and values in ([3, 1, 1], [3, -1, -1]):
            return ("repeat", None), ""
        return None, f"it calls .{body.func.attr}(...), which is not read (convert('RGB' or 'L'), repeat(3, 1, 1))"
    if _is(body, name):
        return ("identity", None), ""
    affine = _affine(body, name)
    if affine is None:
        return None, "its body is not arithmetic of the image and numbers, nor a call read here"
    if affine[0] == 0:
        return None, "its arithmetic drops the image"
    return ("affine", (*affine, _promotes(body, name))), ""


def _is(node, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _number(node) -> Optional[float]:
    if isinstance(node, ast.Constant) and isinstance(node.value, numbers.Real) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _number(node.operand)
        return None if inner is None else (-inner if isinstance(node.op, ast.USub) else inner)
    return None


def _first_operation(node, name: str):
    """The operation torch applies to the image first: the innermost one it is an operand of."""
    operands = [node.operand] if isinstance(node, ast.UnaryOp) else \
        [node.left, node.right] if isinstance(node, ast.BinOp) else []
    if any(_is(operand, name) for operand in operands):
        return node
    return next((found for found in (_first_operation(operand, name) for operand in operands) if found), None)


def _promotes(body, name: str) -> bool:
    """Whether the first operation on a uint8 tensor gives floats in torch: a true division, or
    a float number (x / 255, x * 0.5; not x * 2, x - 1, -x, which stay uint8 and wrap)."""
    first = _first_operation(body, name)
    if not isinstance(first, ast.BinOp):
        return False
    other = first.right if _is(first.left, name) else first.left
    return isinstance(first.op, ast.Div) or isinstance(_number(other), float)


def _affine(node, name: str) -> Optional[Tuple[float, float]]:
    """(a, b) where `node` computes a * image + b from the image, once, and numbers."""
    if _is(node, name):
        return 1.0, 0.0
    number = _number(node)
    if number is not None:
        return None   # no image in it: not a step
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _affine(node.operand, name)
        return None if inner is None else ((-inner[0], -inner[1]) if isinstance(node.op, ast.USub) else inner)
    if not isinstance(node, ast.BinOp):
        return None
    left, right = _affine(node.left, name), _affine(node.right, name)
    left_number, right_number = _number(node.left), _number(node.right)
    if isinstance(node.op, (ast.Add, ast.Sub)):
        sign = 1.0 if isinstance(node.op, ast.Add) else -1.0
        if left is not None and right_number is not None:
            return left[0], left[1] + sign * right_number
        if left_number is not None and right is not None:
            return sign * right[0], left_number + sign * right[1]
    elif isinstance(node.op, ast.Mult):
        if left is not None and right_number is not None:
            return left[0] * right_number, left[1] * right_number
        if left_number is not None and right is not None:
            return left_number * right[0], left_number * right[1]
    elif isinstance(node.op, ast.Div) and left is not None and right_number:
        return left[0] / right_number, left[1] / right_number
    return None


def lambda_refusal(step) -> str:
    if tuple(getattr(step, "types", (object,))) != (object,):   # v2's: the lambda skips the other types
        return f"types={[t.__name__ for t in step.types]}: read only where the lambda takes every input"
    _, why = read(step.lambd)
    return why


def _dtype_after(function, dtype):
    """float32 after arithmetic that torch promotes on a uint8 image (see _promotes)."""
    known, _ = read(function)
    return torch.float32 if known and known[0] == "affine" and known[1][2] and dtype == torch.uint8 else dtype


def _integer_arithmetic(function, step, dtype) -> str:
    """Arithmetic that torch runs on uint8 (x * 2 - 1 wraps around): refused where it stands."""
    known, _ = read(function)
    return _integer_message(step) if known and known[0] == "affine" and not known[1][2] and dtype == torch.uint8 \
        else ""


def _integer_message(step) -> str:
    return (f"{describe(step)}: the lambda's arithmetic on a uint8 image is torch's integer arithmetic; put "
            f"ToTensor or ToDtype(torch.float32, scale=True) before it")


@translates("Lambda")
@refuses(lambda_refusal)
@refuses_on(lambda step, dtype: _integer_arithmetic(step.lambd, step, dtype))
@dtype_after(lambda step, dtype: _dtype_after(step.lambd, dtype))
def lambda_step(step, images: Images) -> None:
    _apply_read(step, images, step.lambd)


def function_refusal(step) -> str:
    _, why = read(step)
    return why


@register(types.FunctionType)
@refuses(function_refusal)
@refuses_on(lambda step, dtype: _integer_arithmetic(step, step, dtype))
@dtype_after(_dtype_after)
def function_step(step, images: Images) -> None:
    """A plain function in a Compose, read as a one-line lambda."""
    _apply_read(step, images, step)


def _apply_read(step, images: Images, function) -> None:
    (kind, value), _ = read(function)
    if kind == "identity":
        return
    if kind == "convert":
        _convert(step, images, value)
    elif kind == "repeat":
        _repeat(step, images)
    else:
        _affine_step(step, images, *value)


def _convert(step, images: Images, mode: str) -> None:
    from .color import grayscale, rgb

    if images.kind != "pil":
        raise Untranslatable(f"{describe(step)}: the lambda calls PIL's convert, and here the image is a tensor "
                             f"(torchvision would fail too)")
    from torchvision.transforms import v2

    if mode == "RGB":
        rgb(v2.RGB(), images)
    else:
        grayscale(v2.Grayscale(1), images)


def _repeat(step, images: Images) -> None:
    """A grey tensor's one channel three times, uint8 or float (its pending scale with it)."""
    from .color import repeat_channel

    if images.kind == "pil" or images.channels != 1:
        raise Untranslatable(f"{describe(step)}: the lambda repeats a 1-channel tensor, and here the image is "
                             f"{'a PIL image' if images.kind == 'pil' else f'{images.channels}-channel'}")
    repeat_channel(images)


def _affine_step(step, images: Images, scale: float, offset: float, promotes: bool) -> None:
    """Folded into the pending normalization, as Normalize is: out = x * scale + offset. On a
    uint8 tensor, where torch's first operation gives float32 (x / 255), the values as floats
    first, unscaled."""
    from torchvision.transforms import v2

    from .conversion import _to_float, normalize

    if not images.is_float:
        if images.kind == "pil":
            raise Untranslatable(f"{describe(step)}: the lambda's arithmetic takes a tensor, and here the image is "
                                 f"a PIL image (torch would fail too); put ToTensor or PILToTensor before it")
        if not promotes:
            raise Untranslatable(_integer_message(step))
        images.decode()
        _to_float(images, torch.float32, 1.0)
    normalize(v2.Normalize([-offset / scale], [1.0 / scale]), images)

