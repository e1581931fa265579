"""docs/architecture.md's rules, checked on the code: which package imports which, no private
name across packages, no module much over 500 lines, a static __all__."""
import ast
import os

import pytest

import dali_loaders

ROOT = os.path.dirname(dali_loaders.__file__)
# package -> the packages it may import (docs/architecture.md)
ALLOWED = {
    "seeds": set(), "ops": set(), "version": set(), "distributed": {"seeds"},
    "transforms": {"seeds", "ops"},
    "recipes": {"transforms"},
    "sources": {"ops", "transforms", "recipes", "seeds", "distributed"},
    "loader": {"seeds", "transforms", "sources", "distributed", "recipes", "version"},
    "datasets": {"sources", "loader", "transforms", "recipes", "seeds", "distributed"},
}
TOP = {"integrations", "bench", "cli", "demo", "testing", "lightning", "__init__", "__main__"}  # may import anything
MAX_LINES = 550


def modules():
    for folder, _, files in os.walk(ROOT):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                yield os.path.relpath(path, ROOT)[:-3].split(os.sep), path


def imported(parts, path):
    """(package, names) for each import of one of ours in the module."""
    tree = ast.parse(open(path).read())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = parts[:-1][:len(parts) - node.level]
                target = base + (node.module.split(".") if node.module else [])
            elif node.module and node.module.split(".")[0] == "dali_loaders":
                target = node.module.split(".")[1:]
            else:
                continue
            names = [alias.name for alias in node.names]
            if not target:   # from . import x  /  from dali_loaders import x
                for name in names:
                    yield [name], []
            else:
                yield target, names


def test_packages_import_only_the_layers_below_them():
    wrong = []
    for parts, path in modules():
        package = parts[0]
        if package in TOP:
            continue
        for target, _ in imported(parts, path):
            other = target[0]
            if other != package and other not in ALLOWED[package]:
                wrong.append(f"{'/'.join(parts)} imports {'.'.join(target)}")
    assert not wrong, "\n".join(wrong)


def test_no_private_name_crosses_a_package():
    wrong = []
    for parts, path in modules():
        for target, names in imported(parts, path):
            if target[0] == parts[0]:
                continue
            private = [n for n in names if n.startswith("_") and not n.startswith("__")] + [t for t in target[1:] if t.startswith("_")]
            if private:
                wrong.append(f"{'/'.join(parts)} imports {private} from {'.'.join(target)}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("parts,path", list(modules()), ids=lambda v: "/".join(v) if isinstance(v, list) else "")
def test_no_module_is_much_over_500_lines(parts, path):
    assert sum(1 for _ in open(path)) <= MAX_LINES


def test_all_is_static_and_complete():
    tree = ast.parse(open(os.path.join(ROOT, "__init__.py")).read())
    assigned = [node for node in tree.body if isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)]
    assert len(assigned) == 1 and isinstance(assigned[0].value, ast.List)   # a literal: IDEs can read it
    names = [element.value for element in assigned[0].value.elts]
    assert all(hasattr(dali_loaders, name) for name in names)
    factories = {name for name in dir(dali_loaders) if name.startswith("get_") and name.endswith(("_dali", "_torch"))}
    assert factories <= set(names)
    for name in ("DaliLoader", "ImageDecodeError", "verify_images", "register", "Untranslatable"):
        assert name in names
