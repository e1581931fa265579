"""Transform wrappers: objects of a user's class that hold the real transform and only hand
each image to it, as torchvision's reference presets do (`self.transforms = T.Compose([...])`
and `def __call__(self, img): return self.transforms(img)`).

Whether a class only hands its argument on is read from the method's source (inspect + ast),
never by calling it: the body must be (a docstring and) `return self.<attr>(<arg>)`, nothing
else, and the compiled source must be the code Python runs (a decorator, or a file edited
since it was imported, would otherwise hide what runs). Anything else is named, so that the
loader can take the Python path and say why.
"""
import ast
import inspect
import symtable
import textwrap
import types
import weakref
from typing import Any, Optional, Tuple

QUOTE_CHARS = 80   # how much of a statement a reason quotes


def delegate(obj) -> Tuple[Optional[Any], str]:
    """(the transform `obj` hands each image to, "") when its class only does that, else
    (None, why not): the reason names the class and what its method does beyond that."""
    cls = type(obj)
    name = cls.__qualname__
    method_name, method = calling_method(obj)
    if method is None:
        return None, f"{name} is not callable"
    where = f"{name}.{method_name}"
    if method_name == "forward" and (getattr(obj, "_forward_hooks", None) or getattr(obj, "_forward_pre_hooks", None)):
        return None, f"{name} has forward hooks, which run besides {where}"
    if not isinstance(method, types.FunctionType):
        return None, (f"{where} is not Python code ({type(method).__name__}): what it does cannot be read; "
                      f"give the transform it wraps instead")
    known = _read.get(cls)
    if known is None or known[0] is not method:   # read once per class (the twin flattens per sample)
        known = _read[cls] = (method, *read_method(method, where))
    _, attr, reason = known
    if reason:
        return None, reason
    return held_transform(obj, mangled(attr, method), name)


_read = weakref.WeakKeyDictionary()   # class -> (its method, the attribute it hands on, or why not)


def read_method(method, where: str) -> Tuple[str, str]:
    """(the attribute the method hands its argument to, "") or ("", why not), from its source."""
    try:
        source = textwrap.dedent(inspect.getsource(method))
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError, IndentationError):
        return "", (f"the source of {where} is not available (defined by exec, or compiled): what it does "
                    f"cannot be read; give the transform it wraps instead")
    node = tree.body[0] if tree.body else None
    if not isinstance(node, ast.FunctionDef):
        return "", f"{where} is not a plain def (a lambda, or an assignment): what it does cannot be read"
    if node.decorator_list:
        return "", f"{where} is decorated (@{ast.unparse(node.decorator_list[0])}), which may do more than call it"
    attr, reason = delegated_attribute(node, where)
    if reason:
        return "", reason
    if not runs_this_source(node, method):
        return "", f"{where} does not run the source found for it (a wrapped function, or a file edited since)"
    return attr, ""


def calling_method(obj) -> Tuple[str, Any]:
    """("__call__", the class's __call__), or ("forward", its forward) for a torch Module that
    leaves __call__ to torch; (name, None) when the object is not callable."""
    cls = type(obj)
    call = getattr(cls, "__call__", None)
    module_type = _torch_module_type()
    if module_type is not None and isinstance(obj, module_type) and call is module_type.__call__:
        return "forward", getattr(cls, "forward", None)
    return "__call__", call


def _torch_module_type():
    try:
        import torch
    except ImportError:
        return None
    return torch.nn.Module


def delegated_attribute(node: ast.FunctionDef, where: str) -> Tuple[str, str]:
    """(attr, "") when the def's body is (a docstring and) `return self.<attr>(<arg>)`, where
    <arg> is its one argument (or `*args` handed on whole); else ("", why not)."""
    arguments = node.args
    positional = arguments.posonlyargs + arguments.args
    single = len(positional) == 2 and arguments.vararg is None
    starred = len(positional) == 1 and arguments.vararg is not None
    if not (single or starred) or arguments.kwonlyargs or arguments.kwarg or arguments.defaults:
        return "", f"{where} takes ({ast.unparse(arguments)}), not the image alone"
    this = positional[0].arg
    argument = positional[1].arg if single else arguments.vararg.arg
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]   # the docstring
    expected = f"return {this}.<attribute>({'' if single else '*'}{argument})"
    for statement in body:
        if not isinstance(statement, ast.Return):
            return "", f"{where} does more than `{expected}`: `{quote(statement)}`"
        call = statement.value
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                and isinstance(call.func.value, ast.Name) and call.func.value.id == this and not call.keywords
                and len(call.args) == 1 and hands_on(call.args[0], argument, starred=not single)):
            return "", f"{where} returns `{quote(call) if call else 'None'}`, not `{expected}` alone"
        return call.func.attr, ""
    return "", f"{where} returns nothing"


def hands_on(node: ast.AST, argument: str, starred: bool) -> bool:
    """`argument` itself (`*argument` for a def taking *args)."""
    if starred:
        if not isinstance(node, ast.Starred):
            return False
        node = node.value
    return isinstance(node, ast.Name) and node.id == argument


def quote(node: ast.AST) -> str:
    text = " ".join(ast.unparse(node).split())
    return text if len(text) <= QUOTE_CHARS else text[:QUOTE_CHARS - 3] + "..."


def mangled(attr: str, method) -> str:
    """`self.__name` inside a class body means `self._Class__name`."""
    if not attr.startswith("__") or attr.endswith("__"):
        return attr
    owner = method.__qualname__.split(".")[-2] if "." in method.__qualname__ else ""
    return f"_{owner.lstrip('_')}{attr}" if owner.lstrip("_") else attr


def runs_this_source(node: ast.FunctionDef, method) -> bool:
    """Whether the def, compiled as its class compiled it (inside a class of the owner's name:
    `self.__name` is mangled, and a zero-argument super() reads the class from there; after its
    module's imports of the names it uses, which Python compiles `name.method()` differently
    for), is the code Python runs for `method`."""
    parts = method.__qualname__.split(".")
    body = [node] if len(parts) < 2 or parts[-2] == "<locals>" else \
        [ast.ClassDef(name=parts[-2], bases=[], keywords=[], body=[node], decorator_list=[], type_params=[])]
    used = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    imports = [ast.Import(names=[ast.alias(name=name)]) for name in sorted(used & imported_names(method))]
    module = compile(ast.fix_missing_locations(ast.Module(body=imports + body, type_ignores=[])), "<source>", "exec")
    compiled = next((c for c in module.co_consts if isinstance(c, types.CodeType)), None)
    if compiled is not None and compiled.co_name != node.name:   # the class body's code: the def's is inside it
        compiled = next((c for c in compiled.co_consts if isinstance(c, types.CodeType)), None)
    code = method.__code__
    return compiled is not None and compiled.co_code == code.co_code and compiled.co_names == code.co_names \
        and compiled.co_varnames == code.co_varnames and compiled.co_freevars == code.co_freevars


def imported_names(method) -> frozenset:
    """The names the method's module binds by an import at its top level (from its source)."""
    module = inspect.getmodule(method)
    if module is None:
        return frozenset()
    known = _imports.get(module)
    if known is None:
        try:
            table = symtable.symtable(inspect.getsource(module), "<module>", "exec")
            known = frozenset(s.get_name() for s in table.get_symbols() if s.is_imported())
        except (OSError, TypeError, SyntaxError):
            known = frozenset()
        _imports[module] = known
    return known


_imports = weakref.WeakKeyDictionary()   # module -> the names its top level imports


def held_transform(obj, attr: str, name: str) -> Tuple[Optional[Any], str]:
    """(obj's attribute `attr`, "") when it is a transform the object holds: found without
    running code (no property, no method), and itself a callable object, not a function."""
    missing = object()
    value = inspect.getattr_static(obj, attr, missing)
    if value is missing:
        modules = getattr(obj, "_modules", None)   # a torch Module's submodules
        value = modules.get(attr, missing) if isinstance(modules, dict) else missing
    if value is missing:
        return None, f"{name} has no attribute {attr!r} to hand the image to"
    if isinstance(value, types.MemberDescriptorType):   # a __slots__ entry: read in C, no code of the class
        value = getattr(obj, attr, missing)
        if value is missing:
            return None, f"{name} has no attribute {attr!r} to hand the image to"
        return checked_transform(obj, attr, value, name)
    in_instance = attr in getattr(obj, "__dict__", {}) and getattr(obj, "__dict__")[attr] is value
    if not in_instance and hasattr(type(value), "__get__"):
        return None, (f"self.{attr} is a {type(value).__name__} of {name} (it runs code of the class), not a "
                      f"transform it holds")
    return checked_transform(obj, attr, value, name)


def checked_transform(obj, attr: str, value, name: str) -> Tuple[Optional[Any], str]:
    if value is obj:
        return None, f"{name} hands the image to itself"
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType, types.MethodType, type)) \
            or not callable(value):
        return None, f"self.{attr} of {name} is a {type(value).__name__}, not a transform object"
    return value, ""
