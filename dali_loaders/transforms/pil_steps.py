"""A user's class whose method is one of PIL's operations on the image, perhaps behind a coin,
as self-supervised recipes write their blur and solarization:

    class GaussianBlur:                      # MoCo v2, SimCLR
        def __call__(self, x):
            sigma = random.uniform(self.sigma[0], self.sigma[1])
            x = x.filter(ImageFilter.GaussianBlur(radius=sigma))
            return x

    class Solarization:                      # BYOL, DINO, Barlow Twins, VICReg
        def __call__(self, img):
            if random.random() < self.p:
                return ImageOps.solarize(img)
            return img

The method is read from its source (inspect + ast), never run, as wrappers are (wrappers.py),
and evaluated symbolically: numbers from the object's own attributes, uniform draws (Python's
`random`, NumPy's, `torch.rand`; the ends may be a list spread, `uniform(*self.sigma)`) and
their affine changes, coins compared with a draw, and the
image through PIL's `ImageFilter.GaussianBlur` and `ImageOps` functions. What it reads becomes
the steps it equals: the project's PILGaussianBlur, torchvision's RandomSolarize,
RandomEqualize, RandomAutocontrast, RandomInvert, RandomPosterize and the flips (on PIL images
torchvision's call these same PIL functions), a coin becoming their `p` (RandomApply for
several). Names resolve in the method's globals and are compared with the functions
themselves: `from PIL import ImageOps as ops` reads; a function of the same name from
elsewhere does not. Each draw and each coin may be used once: a value used twice ties two
draws together, which no step expresses.
"""
import ast
import inspect
import itertools
import textwrap
import weakref
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from .pil_blur import PILGaussianBlur
from .wrappers import calling_method, quote, runs_this_source


@dataclass(frozen=True)
class Draw:
    """A number drawn uniformly in [low, high] (low == high: a fixed number is a Number)."""
    low: float
    high: float
    ident: int


@dataclass(frozen=True)
class Coin:
    """True with probability p, false with q (1 - p, kept as drawn: `not` swaps them exactly)."""
    p: float
    q: float
    ident: int


@dataclass(frozen=True)
class Picture:
    """The method's argument after these operations (each a tuple: its name, then its values)."""
    operations: Tuple[tuple, ...] = ()


class Unread(Exception):
    """Why the method is not read as PIL operations."""


def pil_steps(obj) -> Tuple[Optional[List[Any]], str]:
    """(the steps `obj`'s call equals, "") for an object of a class whose method reads as PIL's
    operations; (None, why not) when it uses PIL's ImageOps or ImageFilter but does not read;
    (None, "") when it does not use them at all."""
    method_name, method = calling_method(obj)
    if method is None or not inspect.isfunction(method):
        return None, ""
    where = f"{type(obj).__qualname__}.{method_name}"
    known = _parsed.get(type(obj))
    if known is None or known[0] is not method:
        known = _parsed[type(obj)] = (method, *_parse(method, where))
    _, node, reason = known
    if node is None:
        return None, reason
    try:
        return _to_steps(Reader(obj, method, node, where).read()), ""
    except Unread as why:
        return None, f"{where} {why}"


_parsed = weakref.WeakKeyDictionary()   # class -> (its method, its def, or why not)


def _parse(method, where: str) -> Tuple[Optional[ast.FunctionDef], str]:
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(method)))
    except (OSError, TypeError, SyntaxError, IndentationError):
        return None, ""
    node = tree.body[0] if tree.body else None
    if not isinstance(node, ast.FunctionDef) or not _uses_pil(node, method.__globals__):
        return None, ""
    if node.decorator_list:
        return None, f"{where} is decorated (@{ast.unparse(node.decorator_list[0])}), which may do more"
    if not runs_this_source(node, method):
        return None, f"{where} does not run the source found for it (a wrapped function, or a file edited since)"
    return node, ""


def _uses_pil(node: ast.FunctionDef, names: Dict[str, Any]) -> bool:
    """Whether the def refers to PIL's ImageOps or ImageFilter, or to one of their functions or
    classes by a name of its own."""
    modules = _pil_modules()
    module_names = {m.__name__ for m in modules}
    for inner in ast.walk(node):
        if isinstance(inner, (ast.Name, ast.Attribute)):
            found = _resolve(inner, names)
            if any(found is m for m in modules) or \
                    ((inspect.isfunction(found) or inspect.isclass(found)) and found.__module__ in module_names):
                return True
    return False


def _pil_modules():
    from PIL import ImageFilter, ImageOps

    return (ImageFilter, ImageOps)


_MISSING = object()


def _resolve(node: ast.AST, names: Dict[str, Any]):
    """The object a dotted global name stands for, found without running code; _MISSING if none."""
    if isinstance(node, ast.Name):
        import builtins

        return names.get(node.id, inspect.getattr_static(builtins, node.id, _MISSING))
    if isinstance(node, ast.Attribute):
        owner = _resolve(node.value, names)
        if owner is _MISSING or not inspect.ismodule(owner) and not inspect.isclass(owner):
            return _MISSING
        return inspect.getattr_static(owner, node.attr, _MISSING)
    return _MISSING


class Reader:
    """Evaluates the method's body symbolically (see the module's docstring)."""

    def __init__(self, obj, method, node: ast.FunctionDef, where: str):
        arguments = node.args
        positional = arguments.posonlyargs + arguments.args
        if len(positional) != 2 or arguments.vararg or arguments.kwonlyargs or arguments.kwarg or arguments.defaults:
            raise Unread(f"takes ({ast.unparse(arguments)}), not the image alone")
        self.obj, self.names, self.node = obj, method.__globals__, node
        self.this, self.argument = positional[0].arg, positional[1].arg
        self.used = set()
        self.idents = itertools.count()
        self.functions = _functions()

    def read(self) -> Picture:
        body = self.node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            body = body[1:]   # the docstring
        return self.block(body, {self.argument: Picture()})

    # -- statements ------------------------------------------------------------------------

    def block(self, statements: List[ast.stmt], names: Dict[str, Any]) -> Picture:
        names = dict(names)
        for k, statement in enumerate(statements):
            if isinstance(statement, ast.Assign) and len(statement.targets) == 1 \
                    and isinstance(statement.targets[0], ast.Name) and statement.targets[0].id != self.this:
                names[statement.targets[0].id] = self.value(statement.value, names)
            elif isinstance(statement, ast.If):
                return self.branch(statement, statements[k + 1:], names)
            elif isinstance(statement, ast.Return) and statement.value is not None:
                return self.picture(statement.value, names)
            else:
                raise Unread(f"does more than PIL's operations behind a coin: `{quote(statement)}`")
        raise Unread("returns nothing")

    def branch(self, statement: ast.If, rest: List[ast.stmt], names: Dict[str, Any]) -> Picture:
        """`if coin:` the two ways on, each to its return; one must leave the image as the other
        does but for operations the coin then gates."""
        coin = self.value(statement.test, names)
        if not isinstance(coin, Coin):
            raise Unread(f"branches on `{quote(statement.test)}`, not on a coin (a draw compared with a number)")
        self.use(coin, statement.test)
        before = set(self.used)
        taken = self.block(statement.body if _returns(statement.body) else statement.body + rest, names)
        after_taken, self.used = self.used, before
        skipped = self.block(statement.orelse if _returns(statement.orelse) else statement.orelse + rest, names)
        self.used |= after_taken
        return _gated(coin, taken, skipped, statement)

    # -- values ----------------------------------------------------------------------------

    def value(self, node: ast.expr, names: Dict[str, Any]):
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return float(node.value)
        if isinstance(node, ast.Name) and node.id in names:
            return names[node.id]
        if isinstance(node, ast.Name) and _is_number(_resolve(node, self.names)):   # a module's constant
            return float(_resolve(node, self.names))
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == self.this:
            return self.attribute(node.attr, node)
        if isinstance(node, ast.Subscript):
            held = self.value(node.value, names)
            index = node.slice
            if isinstance(held, tuple) and isinstance(index, ast.Constant) and type(index.value) is int \
                    and -len(held) <= index.value < len(held):
                return held[index.value]
            raise Unread(f"reads `{quote(node)}`, not a number of its own")
        if isinstance(node, ast.BinOp):
            return self.arithmetic(node, self.value(node.left, names), self.value(node.right, names))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return self.arithmetic(node, -1.0, self.value(node.operand, names), ast.Mult())
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            coin = self.value(node.operand, names)
            if isinstance(coin, Coin):
                return Coin(coin.q, coin.p, coin.ident)
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            return self.compare(node, self.value(node.left, names), node.ops[0], self.value(node.comparators[0], names))
        if isinstance(node, ast.Call):
            drawn = self.draw(node, names)
            if drawn is not None:
                return drawn
        return self.picture(node, names)

    def attribute(self, name: str, node: ast.AST):
        """A number, or a list or tuple of numbers, the object holds (its own, or its class's
        plain value): nothing that runs code."""
        found = self.obj.__dict__.get(name, _MISSING) if hasattr(self.obj, "__dict__") else _MISSING
        if found is _MISSING:
            found = inspect.getattr_static(type(self.obj), name, _MISSING)
        if _is_number(found):
            return float(found)
        if isinstance(found, (list, tuple)) and all(_is_number(v) for v in found):
            return tuple(float(v) for v in found)
        raise Unread(f"reads `{quote(node)}`, which is {'missing' if found is _MISSING else type(found).__name__}, "
                     f"not a number or a list of numbers")

    def arithmetic(self, node: ast.AST, left, right, operator: Optional[ast.operator] = None):
        operator = operator or node.op
        if isinstance(left, float) and isinstance(right, float):
            if isinstance(operator, ast.Div) and right == 0.0:
                raise Unread(f"divides by 0 in `{quote(node)}`")
            return _OPERATIONS[type(operator)](left, right) if type(operator) in _OPERATIONS else self.fail(node)
        draw, number = (left, right) if isinstance(left, Draw) else (right, left)
        if not (isinstance(draw, Draw) and isinstance(number, float)) or type(operator) not in _OPERATIONS \
                or (isinstance(operator, ast.Div) and (number is left or number == 0.0)):
            raise Unread(f"computes `{quote(node)}`: only a draw scaled or shifted by a number reads")
        self.use(draw, node)
        apply = _OPERATIONS[type(operator)]
        ends = (apply(draw.low, number), apply(draw.high, number)) if draw is left else \
            (apply(number, draw.low), apply(number, draw.high))
        return Draw(min(ends), max(ends), next(self.idents))

    def compare(self, node: ast.Compare, left, operator: ast.cmpop, right) -> Coin:
        below = (ast.Lt, ast.LtE)
        if isinstance(left, Draw) and isinstance(right, float) and isinstance(operator, below + (ast.Gt, ast.GtE)):
            draw, limit, under = left, right, isinstance(operator, below)
        elif isinstance(right, Draw) and isinstance(left, float) and isinstance(operator, below + (ast.Gt, ast.GtE)):
            draw, limit, under = right, left, not isinstance(operator, below)
        else:
            raise Unread(f"compares `{quote(node)}`: only a draw against a number makes a coin")
        self.use(draw, node)
        span = draw.high - draw.low
        p = float(draw.low < limit) if span == 0.0 else min(max((limit - draw.low) / span, 0.0), 1.0)
        return Coin(p, 1.0 - p, next(self.idents)) if under else Coin(1.0 - p, p, next(self.idents))

    def draw(self, node: ast.Call, names: Dict[str, Any]) -> Optional[Draw]:
        """Python's, NumPy's or torch's uniform draw; `.item()` of a torch one."""
        if isinstance(node.func, ast.Attribute) and node.func.attr == "item" and not node.args and not node.keywords:
            inner = self.value(node.func.value, names)
            if isinstance(inner, Draw):
                return inner
        function = _resolve(node.func, self.names)
        kind = next((k for k, fs in self.functions["draws"].items() if any(function is f for f in fs)), None)
        if kind is None:
            return None
        if kind == "unit":
            shape = [self.value(a, names) for a in node.args]
            if node.keywords or (function is self.functions["torch_rand"] and shape not in ([], [1.0])) \
                    or (function is not self.functions["torch_rand"] and shape):
                raise Unread(f"draws `{quote(node)}`: one number at a time reads")
            return Draw(0.0, 1.0, next(self.idents))
        keys = ("a", "b") if kind == "python" else ("low", "high")
        positional = self.positional(node, names)
        values = dict(zip(keys, positional))
        values.update({k.arg: k.value for k in node.keywords})
        if set(values) - set(keys) or (kind == "python" and len(values) != 2) or len(positional) > len(keys):
            raise Unread(f"draws `{quote(node)}`: uniform(low, high) reads")
        ends = [self.value(values[k], names) if k in values else float(k == "high") for k in keys]
        if not all(isinstance(e, float) for e in ends):
            raise Unread(f"draws `{quote(node)}` between values that are not numbers")
        return Draw(min(ends), max(ends), next(self.idents))

    def positional(self, node: ast.Call, names: Dict[str, Any]) -> List[ast.expr]:
        """The call's positional arguments, a starred list of the object's numbers
        (`uniform(*self.sigma)`) spread into one constant each."""
        spread = []
        for argument in node.args:
            if not isinstance(argument, ast.Starred):
                spread.append(argument)
                continue
            held = self.value(argument.value, names)
            if not isinstance(held, tuple):
                raise Unread(f"spreads `{quote(argument)}`, not a list of numbers of its own")
            spread.extend(ast.Constant(value) for value in held)
        return spread

    # -- the image -------------------------------------------------------------------------

    def picture(self, node: ast.expr, names: Dict[str, Any]) -> Picture:
        if isinstance(node, ast.Name) and isinstance(names.get(node.id), Picture):
            return names[node.id]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "filter" \
                and len(node.args) == 1 and not node.keywords:
            image = self.picture(node.func.value, names)
            return Picture(image.operations + (self.blur(node.args[0], names),))
        function = _resolve(node.func, self.names) if isinstance(node, ast.Call) else _MISSING
        operation = next((spec for f, spec in self.functions["image_ops"] if f is function), None)
        if operation is None:
            raise Unread(f"computes `{quote(node)}`: not one of PIL's operations that read "
                         f"({', '.join(self.functions['names'])})")
        name, parameters = operation
        if not node.args or len(node.args) > 1 + len(parameters):
            raise Unread(f"calls `{quote(node)}` with other arguments than the image and {parameters or 'nothing'}")
        image = self.picture(node.args[0], names)
        given = dict(zip([p for p, _ in parameters], node.args[1:]))
        given.update({k.arg: k.value for k in node.keywords})
        if set(given) - {p for p, _ in parameters}:
            raise Unread(f"calls `{quote(node)}` with other arguments than the image and {parameters or 'nothing'}")
        values = []
        for parameter, default in parameters:
            value = self.value(given[parameter], names) if parameter in given else default
            if not isinstance(value, float):
                raise Unread(f"calls `{quote(node)}` with {parameter} not a number")
            values.append(value)
        return Picture(image.operations + ((name, *values),))

    def blur(self, node: ast.expr, names: Dict[str, Any]) -> tuple:
        """`ImageFilter.GaussianBlur(radius)`: the radius a number or a draw."""
        from PIL import ImageFilter

        if not (isinstance(node, ast.Call) and _resolve(node.func, self.names) is ImageFilter.GaussianBlur):
            raise Unread(f"filters with `{quote(node)}`: of PIL's filters, GaussianBlur reads")
        given = dict(zip(["radius"], node.args))
        given.update({k.arg: k.value for k in node.keywords})
        if len(node.args) > 1 or set(given) - {"radius"}:
            raise Unread(f"filters with `{quote(node)}`: GaussianBlur(radius) reads")
        radius = self.value(given["radius"], names) if "radius" in given else 2.0
        if isinstance(radius, Draw) and radius.low >= 0:
            self.use(radius, node)
            return ("blur", radius.low, radius.high)
        if isinstance(radius, float) and radius >= 0:
            return ("blur", radius, radius)
        raise Unread(f"filters with `{quote(node)}`: a radius >= 0 (a number, or a uniform draw that cannot be "
                     f"negative) reads")

    def use(self, value, node: ast.AST) -> None:
        if value.ident in self.used:
            raise Unread(f"uses one draw twice (`{quote(node)}`): the two uses would be tied together")
        self.used.add(value.ident)

    def fail(self, node: ast.AST):
        raise Unread(f"computes `{quote(node)}`")


_OPERATIONS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
               ast.Div: lambda a, b: a / b}


def _plain(number: float):
    """A whole number as an int (as users write a threshold)."""
    return int(number) if number == int(number) else number


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _returns(statements: List[ast.stmt]) -> bool:
    """Whether the block always returns (so the statements after the `if` are not its)."""
    if not statements:
        return False
    last = statements[-1]
    return isinstance(last, ast.Return) or (isinstance(last, ast.If) and _returns(last.body) and _returns(last.orelse))


def _gated(coin: Coin, taken: Picture, skipped: Picture, statement: ast.If) -> Picture:
    """The picture both ways share, the operations only one way has gated by its probability."""
    a, b = taken.operations, skipped.operations
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    only_taken, only_skipped = a[head:len(a) - tail], b[head:len(b) - tail]
    if only_taken and only_skipped:
        raise Unread(f"changes the image both ways of `if {quote(statement.test)}`: one way must leave it as it is")
    gated = (("gate", coin.p, only_taken),) if only_taken else \
        (("gate", coin.q, only_skipped),) if only_skipped else ()
    return Picture(a[:head] + gated + a[len(a) - tail:])


def _functions() -> Dict[str, Any]:
    import random

    import numpy
    import torch
    from PIL import ImageOps

    image_ops = [(ImageOps.solarize, ("solarize", [("threshold", 128.0)])), (ImageOps.equalize, ("equalize", [])),
                 (ImageOps.autocontrast, ("autocontrast", [])), (ImageOps.invert, ("invert", [])),
                 (ImageOps.posterize, ("posterize", [("bits", None)])), (ImageOps.mirror, ("mirror", [])),
                 (ImageOps.flip, ("flip", []))]
    return {"draws": {"unit": [random.random, numpy.random.rand, numpy.random.random, numpy.random.random_sample,
                               torch.rand],
                      "python": [random.uniform], "numpy": [numpy.random.uniform]},
            "torch_rand": torch.rand, "image_ops": image_ops,
            "names": ["ImageFilter.GaussianBlur"] + [f"ImageOps.{f.__name__}" for f, _ in image_ops]}


def _to_steps(picture: Picture, p: float = 1.0) -> List[Any]:
    return [step for operation in picture.operations for step in _steps_of(operation, p)]


def _steps_of(operation: tuple, p: float) -> List[Any]:
    from torchvision import transforms as v1

    name, *values = operation
    if name == "gate":
        gate, inner = values
        steps = _to_steps(Picture(inner), p * gate)
        return steps if len(inner) == 1 else [v1.RandomApply(_to_steps(Picture(inner)), p=p * gate)]
    if name == "posterize" and not (values[0] == int(values[0]) and 0 <= values[0] <= 8):
        raise Unread(f"posterizes to {values[0]:g} bits: 0-8 reads")
    made = {"blur": lambda: PILGaussianBlur(values, p=p),
            "solarize": lambda: v1.RandomSolarize(threshold=_plain(values[0]), p=p),
            "equalize": lambda: v1.RandomEqualize(p=p), "autocontrast": lambda: v1.RandomAutocontrast(p=p),
            "invert": lambda: v1.RandomInvert(p=p), "posterize": lambda: v1.RandomPosterize(int(values[0]), p=p),
            "mirror": lambda: v1.RandomHorizontalFlip(p=p), "flip": lambda: v1.RandomVerticalFlip(p=p)}
    return [made[name]()]
