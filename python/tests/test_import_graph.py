"""The package's shape: its modules import each other without a cycle, read from their source
(ast), and none grows past one job's length."""

import ast
from pathlib import Path

import newrllama4

PACKAGE = Path(newrllama4.__file__).parent


def module_name(path):
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(tree, name, is_package, modules):
    """The package's modules that a module's source imports, wherever the import stands:
    inside functions, and under `if TYPE_CHECKING:` too (two modules that need each other
    only for their types are still one job in two files): `from X import a` imports X.a
    where that is a module, else X."""
    here = name if is_package else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = here.rsplit(".", node.level - 1)[0]
                base = f"{anchor}.{base}" if base else anchor
            found.update(f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names)
    return {m for m in found if m in modules and m != name}


def import_graph():
    """Each module of the package, compiled ones included (which import nothing of it), and
    the package's modules it imports."""
    sources = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    compiled = {module_name(p.with_name(p.name.split(".")[0] + ".py"))
                for pattern in ("*.so", "*.pyd", "*.c") for p in PACKAGE.rglob(pattern)}
    modules = set(sources) | compiled
    graph = {name: set() for name in compiled}
    graph.update({
        name: imported(ast.parse(path.read_text()), name, path.name == "__init__.py", modules)
        for name, path in sources.items()
    })
    return graph


def find_cycle(graph):
    """One cycle as a list of modules, or None."""
    state, trail = {}, []

    def visit(node):
        state[node] = "open"
        trail.append(node)
        for neighbour in sorted(graph[node]):
            if state.get(neighbour) == "open":
                return trail[trail.index(neighbour):] + [neighbour]
            if neighbour not in state and (cycle := visit(neighbour)):
                return cycle
        state[node] = "done"
        trail.pop()
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_package_s_import_graph_has_no_cycle():
    graph = import_graph()
    assert len(graph) > 20 and "newrllama4.context" in graph["newrllama4.worker_process"]
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph))


def test_imports_for_type_checkers_only_count_too():
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import A\nelse:\n"
                     "    from .b import B\ndef f():\n    from .c import C\n")
    assert imported(tree, "p.m", False, {"p.a", "p.b", "p.c"}) == {"p.a", "p.b", "p.c"}


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_module_grows_past_one_job():
    # a module past ~400 lines has been doing two jobs (issue 31); the test fixtures are one
    # job of many small parts
    long = {path.relative_to(PACKAGE).as_posix(): n for path in PACKAGE.rglob("*.py")
            if path.name != "testing.py" and (n := len(path.read_text().splitlines())) > 420}
    assert not long
