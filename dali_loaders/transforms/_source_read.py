"""A function's source read as the code Python runs: the ast of a lambda, or of a plain function
whose body is one `return`, found in its source and compiled again to check that it is that
code (lambdas.py reads image arithmetic from it, _stack_lambda.py the stacking of crops).
Nothing is run.
"""
import ast
import inspect
import numbers
import re
import textwrap
import types
from typing import Optional, Tuple


def lambda_node(function) -> Tuple[Optional[ast.Lambda], str]:
    """(the ast of `function`'s lambda, "") where its source holds a lambda that compiles to
    its code, else (None, why not)."""
    if not isinstance(function, types.FunctionType) or function.__name__ != "<lambda>":
        return None, "its function is not a lambda"
    try:
        text = "".join(inspect.getsourcelines(function)[0])
    except (OSError, TypeError):
        return None, "the lambda's source is not available"
    for start in (match.start() for match in re.finditer(r"\blambda\b", text)):
        tail = text[start:]
        # the longest stretch that parses as a lambda: its body reaches that far
        for end in sorted({m.start() for m in re.finditer(r"[,)\]}\n]", tail)} | {len(tail)}, reverse=True):
            try:
                node = ast.parse(tail[:end].strip(), mode="eval").body
            except SyntaxError:
                continue
            if isinstance(node, ast.Lambda):
                if _compiles_to(node, function):
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


def _compiles_to(node: ast.Lambda, function) -> bool:
    """Whether the lambda `node` compiles to `function`'s code: alone, or after imports of the
    modules its names are in its globals (Python 3.11 compiles `module.f(x)` otherwise where
    `module` was imported: a method call on an imported name is compiled as an attribute load)."""
    statement = ast.Expr(node)
    free = function.__code__.co_freevars
    if free:   # names of the function it was made in: compiled inside one that binds them
        statement = ast.FunctionDef(name="_enclosing", args=ast.arguments([], [], None, [], [], None, []),
                                    body=[*(ast.Assign([ast.Name(name, ast.Store())], ast.Constant(None)) for name in free),
                                          ast.Return(node)], decorator_list=[], returns=None, type_params=[])
    for prefix in ([], _module_imports(function)):
        compiled = compile(ast.fix_missing_locations(ast.Module([*prefix, statement], type_ignores=[])),
                           "<lambda>", "exec")
        inner = _code_named(compiled, "<lambda>")
        if inner is not None and _same_code(inner, function.__code__):   # a comprehension's code alike
            return True
    return False


def _code_named(code, name: str):
    """The first code object called `name` nested in `code`."""
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found = const if const.co_name == name else _code_named(const, name)
            if found is not None:
                return found
    return None


def _module_imports(function) -> list:
    """`import _ as name` for each global name the function's code (nested code too) loads
    that is a module in its globals; nothing is imported, the statements are only compiled."""
    names, codes = set(), [function.__code__]
    while codes:
        code = codes.pop()
        names.update(code.co_names)
        codes += [c for c in code.co_consts if isinstance(c, types.CodeType)]
    modules = sorted(name for name in names if isinstance(function.__globals__.get(name), types.ModuleType))
    return [ast.Import(names=[ast.alias(name="_", asname=name)]) for name in modules]


def is_name(node, name: str) -> bool:
    """Whether `node` is the variable `name`."""
    return isinstance(node, ast.Name) and node.id == name


def number_of(node) -> Optional[float]:
    """The number literal `node` is (a sign allowed), else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, numbers.Real) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = number_of(node.operand)
        return None if inner is None else (-inner if isinstance(node.op, ast.USub) else inner)
    return None
