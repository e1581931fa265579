"""docs/architecture.md's rules, checked on the code: which package imports which, no private
name across packages, no import cycle between modules, no module much over 500 lines, a
static __all__."""
import ast
import os
from collections import deque

import pytest

import dali_loaders

ROOT = os.path.dirname(dali_loaders.__file__)
# package -> the packages it may import (docs/architecture.md)
ALLOWED = {
    "seeds": set(), "switches": set(), "ops": set(), "version": set(), "dali_compat": {"version"}, "distributed": {"seeds"},
    "transforms": {"seeds", "ops", "dali_compat"},
    "recipes": {"transforms"},
    "sources": {"ops", "transforms", "recipes", "seeds", "distributed"},
    "loader": {"seeds", "switches", "ops", "transforms", "sources", "distributed", "recipes", "version", "dali_compat"},
    "datasets": {"sources", "loader", "transforms", "recipes", "seeds", "distributed"},
}
TOP = {"integrations", "bench", "cli", "demo", "testing", "lightning", "timm", "__init__", "__main__"}  # may import anything
MAX_LINES = 550


def modules(root=ROOT):
    for folder, _, files in os.walk(root):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                yield os.path.relpath(path, root)[:-3].split(os.sep), path


def resolved(parts, node):
    """The module path (a list, relative to the package) a `from ... import` names, or None
    when it is not one of ours."""
    if node.level:
        return parts[:len(parts) - node.level] + (node.module.split(".") if node.module else [])
    if node.module and node.module.split(".")[0] == "dali_loaders":
        return node.module.split(".")[1:]
    return None


def imported(parts, path):
    """(package, names) for each import of one of ours in the module."""
    tree = ast.parse(open(path).read())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):   # import dali_loaders.x.y
            for alias in node.names:
                if alias.name.split(".")[0] == "dali_loaders" and "." in alias.name:
                    yield alias.name.split(".")[1:], []
        if not isinstance(node, ast.ImportFrom) or resolved(parts, node) is None:
            continue
        target, names = resolved(parts, node), [alias.name for alias in node.names]
        if not target:   # from . import x  /  from dali_loaders import x
            for name in names:
                yield [name], []
        else:
            yield target, names


def import_graph(root=ROOT):
    """module -> the modules of ours it imports, at module level or inside a function (both
    are cycles: the inner one only waits for its first call). `from package import name`
    imports the submodule `name` where there is one, else the package's __init__; importing a
    submodule is not counted as importing its package's __init__ (Python runs that first, but
    a package's modules may import each other without that being a cycle)."""
    known = {tuple(parts): path for parts, path in modules(root)}

    def module_of(target):
        for candidate in (tuple(target), tuple(target) + ("__init__",)):
            if candidate in known:
                return candidate
        return None

    graph = {}
    for parts, path in known.items():
        edges = set()
        for node in ast.walk(ast.parse(open(path).read())):
            targets = []
            if isinstance(node, ast.ImportFrom):
                base = resolved(list(parts), node)
                if base is None:
                    continue
                targets = [module_of(base + [alias.name]) or module_of(base) for alias in node.names]
            elif isinstance(node, ast.Import):
                targets = [module_of(alias.name.split(".")[1:]) for alias in node.names
                           if alias.name.split(".")[0] == "dali_loaders"]
            edges.update(t for t in targets if t is not None and t != parts)
        graph[parts] = edges
    return graph


def strongly_connected(graph):
    """The groups of two or more modules that import each other, directly or not (Tarjan's)."""
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def visit(v):   # recursion as deep as the longest import chain: a few dozen modules
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return groups


def cycles(graph):
    """One cycle through each group of strongly_connected: the shortest from its first module
    back to it, a list of modules with the first repeated at the end."""
    found = []
    for group in strongly_connected(graph):
        start = min(group)
        came_from, queue = {start: None}, deque([start])
        while queue and (not found or found[-1][0] != start):
            v = queue.popleft()
            for w in sorted(graph[v] & group):
                if w == start:
                    path = [v]
                    while came_from[path[-1]] is not None:
                        path.append(came_from[path[-1]])
                    found.append(path[::-1] + [start])
                    break
                if w not in came_from:
                    came_from[w] = v
                    queue.append(w)
    return found


def test_cycle_finder_names_a_cycle():
    graph = {("a",): {("b",)}, ("b",): {("c",)}, ("c",): {("a",), ("d",)}, ("d",): {("e",)}, ("e",): {("d",)}}
    assert sorted(cycles(graph)) == [[("a",), ("b",), ("c",), ("a",)], [("d",), ("e",), ("d",)]]
    assert cycles({("a",): {("b",)}, ("b",): set()}) == []


def test_graph_sees_function_level_and_package_imports(tmp_path):
    """A cycle closed by an import inside a function is found; `from package import name`
    leads to the package's __init__, `import package.module` to the module."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("from .a import A\n")
    (package / "a.py").write_text("from .b import B\nA = 1\n")
    (package / "b.py").write_text("B = 2\n\ndef late():\n    from dali_loaders.pkg.c import C\n    return C\n")
    (package / "c.py").write_text("from . import a\nC = 3\n")
    (package / "d.py").write_text("from dali_loaders.pkg import A\n")
    (package / "e.py").write_text("import dali_loaders.pkg.d\n")
    graph = import_graph(str(tmp_path))
    assert graph[("pkg", "d")] == {("pkg", "__init__")} and graph[("pkg", "e")] == {("pkg", "d")}
    assert cycles(graph) == [[("pkg", "a"), ("pkg", "b"), ("pkg", "c"), ("pkg", "a")]]


def test_no_import_cycles():
    found = cycles(import_graph())
    assert not found, "import cycles:\n" + "\n".join(" -> ".join("/".join(m) for m in c) for c in found)


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
