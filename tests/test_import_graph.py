"""The package's own layering: no import circle among vlgap's modules (function-level imports count:
they are circles that only run later), and no module of the package longer than 600 lines (a module is one idea; issue 31)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "vlgap"
MAX_LINES = 600


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def import_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    """module -> vlgap modules it imports anywhere in its body (`import a.b`, `from a import b` where b
    may be a submodule, relative imports resolved)."""
    files = {_module_name(p): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in files}
    for mod, path in files.items():
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    full = ".".join(base + ([node.module] if node.module else []))
                else:
                    full = node.module or ""
                targets = [full] + [f"{full}.{a.name}" for a in node.names]
            for t in targets:
                # the longest prefix that is one of our modules
                while t and t not in files:
                    t = t.rpartition(".")[0]
                if t and t != mod and t != "vlgap":
                    graph[mod].add(t)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_cycle_finder_finds_a_known_circle():
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(g) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_graph_sees_function_level_and_relative_imports(tmp_path):
    pkg = tmp_path / "vlgap"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "a.py").write_text("def f():\n    from vlgap.sub import b\n")
    (pkg / "sub" / "b.py").write_text("from . import a\n")
    global SRC
    old, SRC = SRC, tmp_path
    try:
        g = import_graph(pkg)
    finally:
        SRC = old
    assert g["vlgap.sub.a"] == {"vlgap.sub", "vlgap.sub.b"} and g["vlgap.sub.b"] == {"vlgap.sub", "vlgap.sub.a"}
    assert cycles(g) == [["vlgap.sub.a", "vlgap.sub.b"]]


def test_package_has_no_import_circle():
    found = cycles(import_graph())
    assert not found, "import circles: " + "; ".join(" <-> ".join(c) for c in found)


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_modules_stay_readable(path):
    n = len(path.read_text(encoding="utf-8").splitlines())
    assert n <= MAX_LINES, f"{path.relative_to(PACKAGE)} has {n} lines; split it by idea (limit {MAX_LINES})"


def test_every_module_imports():
    """The fast suite imports every module of the package (Ray's only on use: vlgap.distributed imports it
    lazily), so a module that no fast test reaches still cannot break at import time."""
    import importlib

    failed = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = _module_name(path)
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - every failure is reported by module
            failed.append(f"{name}: {type(exc).__name__}: {exc}")
    assert not failed, "modules that do not import: " + "; ".join(failed)
