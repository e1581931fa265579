"""torchvision's documented way to batch FiveCrop's and TenCrop's crops, read from the lambda's
source (never run): `Lambda(lambda crops: torch.stack([f(g(crop)) for crop in crops]))`.
"""
import ast
import enum
import types
import weakref
from typing import Optional, Tuple

import torch

from ._source_read import function_node, is_name, number_of

_stacks = weakref.WeakKeyDictionary()   # function -> (its per-crop steps, why not)
_UNBOUND = object()


def stacked_steps(function) -> Tuple[Optional[list], str]:
    """For `lambda crops: torch.stack([f(g(crop)) for crop in crops])`, as torchvision's docs
    stack FiveCrop's and TenCrop's crops: ([g, f], "") , the steps each crop goes through in
    order. Each is a transform the lambda names (a global, or a variable of the function that
    made it), or a torchvision transform class called there with literal arguments, built
    here with them; else (None, why not). The source is read, never run."""
    known = _stacks.get(function)
    if known is None:
        known = _stacks[function] = _read_stack(function)
    return known


def _read_stack(function):
    node, why = function_node(function)
    if node is None:
        return None, why
    if len(node.args.args) != 1 or node.args.posonlyargs or node.args.vararg or node.args.kwonlyargs:
        return None, "the function takes more than the crops"
    crops, body = node.args.args[0].arg, node.body
    if not (isinstance(body, ast.Call) and _resolved(body.func, function) is torch.stack and len(body.args) == 1
            and all(k.arg == "dim" and number_of(k.value) == 0 for k in body.keywords)):
        return None, "its body is not torch.stack([... for crop in crops])"
    listed = body.args[0]
    if not (isinstance(listed, ast.ListComp) and len(listed.generators) == 1):
        return None, "torch.stack is not given one list comprehension over the crops"
    loop = listed.generators[0]
    if loop.ifs or loop.is_async or not isinstance(loop.target, ast.Name) or not is_name(loop.iter, crops):
        return None, "its list comprehension is not `for crop in crops`"
    steps, expression = [], listed.elt
    while not is_name(expression, loop.target.id):
        if not isinstance(expression, ast.Call) or len(expression.args) != 1 or expression.keywords:
            return None, "each crop is not passed through calls of one argument"
        step, why = _callee(expression.func, function)
        if step is None:
            return None, why
        steps.append(step)
        expression = expression.args[0]
    return steps[::-1], ""


def _callee(node, function):
    """(the transform `node` names, "") or (None, why not)."""
    if isinstance(node, ast.Call):   # T.ToTensor(), T.Normalize(mean=[...], std=[...])
        cls = _resolved(node.func, function)
        if not (isinstance(cls, type) and cls.__module__.startswith("torchvision.transforms")):
            return None, f"{ast.unparse(node.func)} is not a torchvision transform class"
        args = [_argument(a, function) for a in node.args]
        kwargs = {k.arg: _argument(k.value, function) for k in node.keywords if k.arg is not None}
        if _UNBOUND in args or _UNBOUND in kwargs.values() or len(kwargs) != len(node.keywords):
            return None, f"{ast.unparse(node)}: its arguments are not literals, dtypes or enums"
        try:
            return cls(*args, **kwargs), ""
        except Exception as error:   # torchvision refuses them: the Python path raises it as it runs
            return None, f"{ast.unparse(node)} raises {type(error).__name__}"
    step = _resolved(node, function)
    if step is _UNBOUND or isinstance(step, (type, types.ModuleType)) or not callable(step):
        return None, f"{ast.unparse(node)} is not a transform the lambda holds"
    return step, ""


def _argument(node, function):
    """A literal, or a dotted name of a module's dtype or enum member (torch.float32,
    InterpolationMode.BICUBIC); _UNBOUND otherwise."""
    try:
        return ast.literal_eval(node)
    except ValueError:
        pass
    if isinstance(node, ast.Attribute):
        owner = _resolved(node.value, function)
        if isinstance(owner, type) and issubclass(owner, enum.Enum) and node.attr in owner.__members__:
            return owner[node.attr]
    value = _resolved(node, function)
    return value if isinstance(value, torch.dtype) else _UNBOUND


def _resolved(node, function):
    """What a name or a dotted name of modules (torch.stack, T.ToTensor) is bound to where
    `function` runs: a variable of the function that made it, a global, a builtin; _UNBOUND
    otherwise. Only modules' attributes are read (no object's property runs)."""
    if isinstance(node, ast.Attribute):
        base = _resolved(node.value, function)
        return getattr(base, node.attr, _UNBOUND) if isinstance(base, types.ModuleType) else _UNBOUND
    if not isinstance(node, ast.Name):
        return _UNBOUND
    code = function.__code__
    if node.id in code.co_freevars:
        try:
            return function.__closure__[code.co_freevars.index(node.id)].cell_contents
        except ValueError:   # a variable not yet assigned
            return _UNBOUND
    if node.id in function.__globals__:
        return function.__globals__[node.id]
    builtins = function.__globals__.get("__builtins__", {})
    builtins = builtins if isinstance(builtins, dict) else vars(builtins)
    return builtins.get(node.id, _UNBOUND)
