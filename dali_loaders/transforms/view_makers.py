"""View makers: objects of a user's class that hand each image to several transforms it holds
and return the list of what they make, as self-supervised recipes do (MoCo's
`TwoCropsTransform`, SimCLR's view generator, DINO's global and local crops):

    def __call__(self, x):
        return [self.base_transform(x) for _ in range(self.n_views)]

DataLoader's default_collate turns such samples into a list of batches, one per view; the
loader makes the same list, each view its own branch of one DALI graph.

As with wrappers (wrappers.py), what the method does is read from its source (inspect + ast),
never by calling it, and the compiled source must be the code Python runs. The body may be:
- `return [self.a(x), self.b(x), ...]` (or a tuple);
- `v = self.a(x)` assignments, then `return [v, w, ...]` naming each once;
- `return [self.a(x) for _ in range(N)]`, N a literal int or an int attribute `self.n`;
- `return [t(x) for t in self.transforms]`, a list or tuple of transforms the object holds;
- `views = []`, then `views.append(self.a(x))` lines and `for _ in range(N): views.append(self.a(x))`
  loops, then `return views`.
"""
import ast
import inspect
import textwrap
import types
import weakref
from typing import Any, List, Optional, Tuple, Union

from .wrappers import calling_method, checked_transform, held_transform, mangled, runs_this_source

MAX_VIEWS = 64   # a count attribute above this is not read as a number of views
EACH = "*"   # the count of a list attribute: a view by each of its transforms (no attribute is named so)
Count = Union[int, str]   # a literal number of views, the attribute holding it, or EACH


def views_of(obj) -> Tuple[Optional[List[Any]], str]:
    """(the transforms that make each view of an image, in the order of the list `obj`
    returns, "") when its class is a view maker (see the module), else (None, why not)."""
    cls = type(obj)
    name = cls.__qualname__
    method_name, method = calling_method(obj)
    if not isinstance(method, types.FunctionType):
        return None, f"{name}.{method_name} is not Python code"
    known = _read.get(cls)
    if known is None or known[0] is not method:
        known = _read[cls] = (method, *read_views(method, f"{name}.{method_name}"))
    _, parts, reason = known
    if reason:
        return None, reason
    views = []
    for attr, count in parts:
        if count == EACH:
            held, why = held_list(obj, mangled(attr, method), name)
            if why:
                return None, why
            views += held
            continue
        transform, why = held_transform(obj, mangled(attr, method), name)
        if transform is None:
            return None, why
        number, why = view_count(obj, count, method, name)
        if why:
            return None, why
        views += [transform] * number
    return (views, "") if views else (None, f"{name} makes no views")


_read = weakref.WeakKeyDictionary()   # class -> (its method, [(attribute, count)], why not)


def read_views(method, where: str) -> Tuple[List[Tuple[str, Count]], str]:
    """([(the attribute a view is made by, how many views it makes)], "") or ([], why not)."""
    try:
        node = ast.parse(textwrap.dedent(inspect.getsource(method))).body[0]
    except (OSError, TypeError, SyntaxError, IndentationError, IndexError):
        return [], f"the source of {where} is not available"
    if not isinstance(node, ast.FunctionDef) or node.decorator_list:
        return [], f"{where} is not a plain, undecorated def"
    arguments = node.args
    positional = arguments.posonlyargs + arguments.args
    if len(positional) != 2 or arguments.vararg or arguments.kwonlyargs or arguments.kwarg or arguments.defaults:
        return [], f"{where} takes ({ast.unparse(arguments)}), not the image alone"
    this, image = positional[0].arg, positional[1].arg
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]   # the docstring
    reader = _BodyReader(this, image)
    parts = reader.listed(body) or reader.appended(body)
    if not parts:
        return [], f"{where} does not return a list of `{this}.<attribute>({image})` views"
    if not runs_this_source(node, method):
        return [], f"{where} does not run the source found for it (a wrapped function, or a file edited since)"
    return parts, ""


class _BodyReader:
    """The patterns of the module's docstring, on the statements of a method's body."""

    def __init__(self, this: str, image: str):
        self.this, self.image = this, image

    def view(self, node) -> Optional[str]:
        """The attribute of `self.<attribute>(image)`, or None."""
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and isinstance(node.func.value, ast.Name) and node.func.value.id == self.this \
                and len(node.args) == 1 and not node.keywords \
                and isinstance(node.args[0], ast.Name) and node.args[0].id == self.image:
            return node.func.attr
        return None

    def count(self, loop_iter, target) -> Optional[Count]:
        """N of `for <target> in range(N)`: a literal int, or the attribute of `self.<n>`; the
        loop variable must be a plain name the views do not read (checked by the caller)."""
        if not (isinstance(target, ast.Name) and isinstance(loop_iter, ast.Call)
                and isinstance(loop_iter.func, ast.Name) and loop_iter.func.id == "range"
                and len(loop_iter.args) == 1 and not loop_iter.keywords):
            return None
        bound = loop_iter.args[0]
        if isinstance(bound, ast.Constant) and type(bound.value) is int:
            return bound.value
        if isinstance(bound, ast.Attribute) and isinstance(bound.value, ast.Name) and bound.value.id == self.this:
            return bound.attr
        return None

    def each(self, element, loop) -> Optional[str]:
        """The attribute of `[t(image) for t in self.<attribute>]`, or None."""
        if isinstance(loop.target, ast.Name) and loop.target.id not in (self.this, self.image) \
                and not loop.ifs and not loop.is_async \
                and isinstance(loop.iter, ast.Attribute) and isinstance(loop.iter.value, ast.Name) \
                and loop.iter.value.id == self.this and isinstance(element, ast.Call) \
                and isinstance(element.func, ast.Name) and element.func.id == loop.target.id \
                and len(element.args) == 1 and not element.keywords \
                and isinstance(element.args[0], ast.Name) and element.args[0].id == self.image:
            return loop.iter.attr
        return None

    def listed(self, body) -> List[Tuple[str, Count]]:
        """`v = self.a(x)` ..., then `return [...]` of views and those names; or a comprehension."""
        named = {}
        for statement in body[:-1]:
            if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1
                    and isinstance(statement.targets[0], ast.Name) and statement.targets[0].id not in named
                    and statement.targets[0].id not in (self.this, self.image)):
                return []
            attr = self.view(statement.value)
            if attr is None:
                return []
            named[statement.targets[0].id] = attr
        last = body[-1] if body else None
        if not isinstance(last, ast.Return):
            return []
        value = last.value
        if isinstance(value, ast.ListComp) and not named and len(value.generators) == 1:
            loop = value.generators[0]
            each = self.each(value.elt, loop)
            if each is not None:
                return [(each, EACH)]
            attr, count = self.view(value.elt), self.count(loop.iter, loop.target)
            if attr is None or count is None or loop.ifs or loop.is_async \
                    or loop.target.id in (self.this, self.image):
                return []
            return [(attr, count)]
        if not isinstance(value, (ast.List, ast.Tuple)) or not value.elts:
            return []
        parts, used = [], set()
        for element in value.elts:
            if isinstance(element, ast.Name) and element.id in named and element.id not in used:
                used.add(element.id)
                parts.append((named[element.id], 1))
            elif self.view(element) is not None:
                parts.append((self.view(element), 1))
            else:
                return []
        return parts if used == set(named) else []

    def appended(self, body) -> List[Tuple[str, Count]]:
        """`views = []`, `views.append(self.a(x))` lines and loops of one such line, `return views`."""
        if len(body) < 3 or not (isinstance(body[0], ast.Assign) and len(body[0].targets) == 1
                                 and isinstance(body[0].targets[0], ast.Name)
                                 and isinstance(body[0].value, ast.List) and not body[0].value.elts):
            return []
        views = body[0].targets[0].id
        last = body[-1]
        if views in (self.this, self.image) or not (isinstance(last, ast.Return) and isinstance(last.value, ast.Name)
                                                    and last.value.id == views):
            return []
        parts = []
        for statement in body[1:-1]:
            if isinstance(statement, ast.For) and len(statement.body) == 1 and not statement.orelse:
                count = self.count(statement.iter, statement.target)
                attr = self.appended_view(statement.body[0], views)
                if count is None or attr is None or statement.target.id in (views, self.this, self.image):
                    return []
                parts.append((attr, count))
            else:
                attr = self.appended_view(statement, views)
                if attr is None:
                    return []
                parts.append((attr, 1))
        return parts

    def appended_view(self, statement, views: str) -> Optional[str]:
        """The attribute of `views.append(self.<attribute>(image))`, or None."""
        if not isinstance(statement, ast.Expr):
            return None
        call = statement.value
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "append" \
                and isinstance(call.func.value, ast.Name) and call.func.value.id == views \
                and len(call.args) == 1 and not call.keywords:
            return self.view(call.args[0])
        return None


def held_list(obj, attr: str, name: str) -> Tuple[List[Any], str]:
    """(the transforms of a list or tuple the object holds in its own __dict__, "") or ([], why not)."""
    value = getattr(obj, "__dict__", {}).get(attr)
    if type(value) not in (list, tuple) or not 1 <= len(value) <= MAX_VIEWS:
        return [], f"self.{attr} of {name} is not a list of 1 to {MAX_VIEWS} transforms"
    held = []
    for k, item in enumerate(value):
        transform, why = checked_transform(obj, f"{attr}[{k}]", item, name)
        if transform is None:
            return [], why
        held.append(transform)
    return held, ""


def view_count(obj, count: Count, method, name: str) -> Tuple[int, str]:
    """(the number of views `count` says, "") or (0, why not): a literal, or an int the object
    holds in its own __dict__ (no property: nothing of the class runs)."""
    if isinstance(count, int):
        return (count, "") if 1 <= count <= MAX_VIEWS else (0, f"{name} makes range({count}) views")
    attr = mangled(count, method)
    value = getattr(obj, "__dict__", {}).get(attr)
    if type(value) is not int or not 1 <= value <= MAX_VIEWS:
        return 0, f"self.{attr} of {name} is {value!r}, not a number of views from 1 to {MAX_VIEWS}"
    return value, ""
