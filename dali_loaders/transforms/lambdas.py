"""Lambda (v1 and v2) read as the step it equals, for the one-line functions recipes write:

    Lambda(lambda t: (t * 2) - 1)            # diffusion and GAN recipes: [0, 1] -> [-1, 1]
    Lambda(lambda x: x.repeat(3, 1, 1))      # grey (MNIST) -> 3 channels
    Lambda(lambda img: img.convert("RGB"))   # PIL's convert, "RGB" or "L"
    Lambda(lambda x: x.float().div(255))     # torch's methods for its operators, and float()
    Lambda(lambda x: x.half())               # the casts to a float dtype

A plain function in a Compose is read the same way where its body is one `return` of such an
expression (CLIP's and open_clip's `def _convert_image_to_rgb(image): return image.convert("RGB")`).

As wrappers.py reads a class, the lambda's source is read, never run, and must compile to the
code Python runs: one argument, nothing from outside it but number literals. Arithmetic is
+, -, * and / of the image (once) and numbers, on a float image, or on a uint8 tensor where
torch's first operation makes floats (x / 255, x * 0.5): DALI folds it into the pending
normalization. torch's methods mul, div, add and sub of a number are its operators, and the
casts float(), half() and bfloat16() are `* 1.0` (the values kept) giving the batch that dtype.
Anything else takes the Python path, saying why.
"""
import ast
import copy
import types
import weakref
from typing import Optional, Tuple

import torch

from ._core import Images, Untranslatable, describe, dtype_after, refuses, refuses_on, register, translates
from ._source_read import function_node, is_name, number_of

_read = weakref.WeakKeyDictionary()   # function -> (what it equals, why not, the dtype it casts to)
# torch's methods that are its operators: x.mul(2) is x * 2
OPERATOR_METHODS = {"mul": ast.Mult, "div": ast.Div, "add": ast.Add, "sub": ast.Sub}
CASTS = {"float": torch.float32, "half": torch.float16, "bfloat16": torch.bfloat16}   # x.half(): float16


def read(function) -> Tuple[Optional[tuple], str]:
    """((kind, value), "") for a lambda this module reads: ("affine", (scale, offset, promotes)),
    ("convert", mode), ("repeat", None) or ("identity", None); else (None, why not)."""
    return _known(function)[:2]


def cast_of(function) -> Optional[torch.dtype]:
    """The dtype the lambda read casts to (its last cast: float(), half(), bfloat16()), or None."""
    return _known(function)[2]


def _known(function) -> tuple:
    known = _read.get(function)
    if known is None:
        node, why = function_node(function)
        operators = _Operators()
        if node is not None:
            node = operators.visit(copy.deepcopy(node))
        known = _read[function] = (*_read_lambda(node, why), operators.cast)
    return known


class _Operators(ast.NodeTransformer):
    """Rewrites torch's operator methods as the operators (x.div(255) as x / 255) and the casts
    as `* 1.0`, which makes floats of a uint8 tensor and keeps its values, as they do; `cast`
    is the outermost cast's dtype, the last applied (the children are rewritten first)."""

    cast = None

    def visit_Call(self, node):
        self.generic_visit(node)
        method = node.func
        if not isinstance(method, ast.Attribute) or node.keywords:
            return node
        if method.attr in OPERATOR_METHODS and len(node.args) == 1:
            return ast.BinOp(left=method.value, op=OPERATOR_METHODS[method.attr](), right=node.args[0])
        if method.attr in CASTS and not node.args:
            self.cast = CASTS[method.attr]
            return ast.BinOp(left=method.value, op=ast.Mult(), right=ast.Constant(1.0))
        return node


def _read_lambda(node, why):
    if node is None:
        return None, why
    arguments = node.args
    if len(arguments.args) != 1 or arguments.posonlyargs or arguments.vararg or arguments.kwonlyargs \
            or arguments.kwarg or arguments.defaults:
        return None, "the function takes more than the image"
    name, body = arguments.args[0].arg, node.body
    if isinstance(body, ast.Call) and isinstance(body.func, ast.Attribute) and is_name(body.func.value, name) \
            and not body.keywords:
        values = [number_of(a) for a in body.args]
        if body.func.attr == "convert" and len(body.args) == 1 and isinstance(body.args[0], ast.Constant) \
                and body.args[0].value in ("RGB", "L"):
            return ("convert", body.args[0].value), ""
        if body.func.attr in ("repeat", "expand") and values in ([3, 1, 1], [3, -1, -1]):
            return ("repeat", None), ""
        return None, (f"it calls .{body.func.attr}(...), which is not read (convert('RGB' or 'L'), repeat(3, 1, 1), "
                      f"float(), half(), bfloat16(), and mul, div, add or sub of a number)")
    if is_name(body, name):
        return ("identity", None), ""
    affine = _affine(body, name)
    if affine is None:
        return None, "its body is not arithmetic of the image and numbers, nor a call read here"
    if affine[0] == 0:
        return None, "its arithmetic drops the image"
    return ("affine", (*affine, _promotes(body, name))), ""


def _first_operation(node, name: str):
    """The operation torch applies to the image first: the innermost one it is an operand of."""
    operands = [node.operand] if isinstance(node, ast.UnaryOp) else \
        [node.left, node.right] if isinstance(node, ast.BinOp) else []
    if any(is_name(operand, name) for operand in operands):
        return node
    return next((found for found in (_first_operation(operand, name) for operand in operands) if found), None)


def _promotes(body, name: str) -> bool:
    """Whether the first operation on a uint8 tensor gives floats in torch: a true division, or
    a float number (x / 255, x * 0.5; not x * 2, x - 1, -x, which stay uint8 and wrap)."""
    first = _first_operation(body, name)
    if not isinstance(first, ast.BinOp):
        return False
    other = first.right if is_name(first.left, name) else first.left
    return isinstance(first.op, ast.Div) or isinstance(number_of(other), float)


def _affine(node, name: str) -> Optional[Tuple[float, float]]:
    """(a, b) where `node` computes a * image + b from the image, once, and numbers."""
    if is_name(node, name):
        return 1.0, 0.0
    number = number_of(node)
    if number is not None:
        return None   # no image in it: not a step
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _affine(node.operand, name)
        return None if inner is None else ((-inner[0], -inner[1]) if isinstance(node.op, ast.USub) else inner)
    if not isinstance(node, ast.BinOp):
        return None
    left, right = _affine(node.left, name), _affine(node.right, name)
    left_number, right_number = number_of(node.left), number_of(node.right)
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
    """float32 after arithmetic that torch promotes on a uint8 image (see _promotes); a cast's
    dtype after it on any image."""
    known, _ = read(function)
    if not known or known[0] != "affine":
        return dtype
    if cast_of(function) is not None:
        return cast_of(function)
    return torch.float32 if known[1][2] and dtype == torch.uint8 else dtype


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
        _affine_step(step, images, *value, cast=cast_of(function))


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


def _affine_step(step, images: Images, scale: float, offset: float, promotes: bool,
                 cast: Optional[torch.dtype]) -> None:
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
    if cast is not None:   # the batch's dtype from here on (a float32 image cast to float16, ...)
        images.dtype = cast
    normalize(v2.Normalize([-offset / scale], [1.0 / scale]), images)
