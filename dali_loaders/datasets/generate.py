"""Writes each standard dataset's get_<name>_iter_dali / _iter_torch from its DatasetSpec.

`python -m dali_loaders.datasets.generate` rewrites, in each module of MODULES, everything
after MARKER: for each spec in the module's SPECS, two functions with explicit signatures
(datasets/_common.py's ARGUMENTS plus the spec's own keywords) whose bodies hand their
arguments, by name, to _common.open_dali / open_torch. `--check` only reports the modules
whose committed factories differ from what the specs make (exit status 1), as the tests do.

A new dataset: its module with a reader, a spec named as its name in capitals, SPECS and the
MARKER line; its name in MODULES; generate; then export the two factories in __init__.py
(not before: the package imports its factories, so they must exist to generate).
"""
import importlib
import inspect
import os
import sys
from typing import Iterable, List

from . import _common

MODULES = ("mnist", "svhn", "stl10", "flowers102", "food101", "oxford_pet", "tiny_imagenet")
MARKER = "# -- generated from the specs above by `python -m dali_loaders.datasets.generate`; do not edit below\n"
WIDTH = 110


def wrap(head: str, items: Iterable[str], tail: str, indent: int) -> List[str]:
    """`head` + the items joined by ', ' + `tail`, filled into lines of at most WIDTH, the
    continuation lines indented by `indent` spaces."""
    lines, line = [], head
    items = list(items)
    for i, item in enumerate(items):
        piece = item + (", " if i < len(items) - 1 else tail)
        if len(line) + len(piece.rstrip()) > WIDTH and line.strip():
            lines.append(line.rstrip())
            line = " " * indent
        line += piece
    return lines + [line]


def parameter(argument: _common.Argument) -> str:
    return argument.name if argument.default is None else f"{argument.name}={argument.default}"


def factory(spec: _common.DatasetSpec, backend: str) -> str:
    """The source of get_<spec.name>_iter_<backend>."""
    arguments = spec.arguments(backend)
    params = [parameter(a) for a in arguments]
    params.insert(next(i for i, a in enumerate(arguments) if not a.positional), "*")
    name = f"get_{spec.name}_iter_{backend}"
    lines = wrap(f"def {name}(", params, "):", len(name) + 5)
    doc = inspect.cleandoc(spec.dali_doc if backend == "dali" else spec.torch_doc).splitlines()
    lines += [f'    """{doc[0]}'] + [f"    {line}".rstrip() for line in doc[1:]]
    lines[-1] += '"""'
    lines += wrap("    args = dict(", [f"{a.name}={a.name}" for a in arguments], ")", 16)
    call = (f"_common.open_dali({spec.name.upper()}, get_{spec.name}_iter_torch, args)" if backend == "dali"
            else f"_common.open_torch({spec.name.upper()}, args)")
    return "\n".join(lines + [f"    return {call}"]) + "\n"


def generated(module) -> str:
    """The module's text with its factories made afresh from its SPECS."""
    text = open(module.__file__).read()
    if MARKER not in text:
        raise ValueError(f"{module.__file__} has no line {MARKER.strip()!r} to generate the factories after")
    for spec in module.SPECS:
        if getattr(module, spec.name.upper(), None) is not spec:
            raise ValueError(f"{module.__file__}: spec {spec.name!r} must be the module's {spec.name.upper()}")
    functions = [factory(spec, backend) for spec in module.SPECS for backend in ("dali", "torch")]
    return text[:text.index(MARKER) + len(MARKER)] + "\n\n" + "\n\n".join(functions)


def main(argv=None) -> int:
    check = "--check" in (sys.argv[1:] if argv is None else argv)
    stale = []
    for name in MODULES:
        module = importlib.import_module(f"{__package__}.{name}")
        text = generated(module)
        if open(module.__file__).read() != text:
            stale.append(os.path.relpath(module.__file__))
            if not check:
                with open(module.__file__, "w") as f:
                    f.write(text)
    verb = "differ from their specs" if check else "rewritten"
    print(f"{len(stale)} module(s) {verb}" + "".join(f"\n  {path}" for path in stale))
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
