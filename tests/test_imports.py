"""The import graph of the Python package has no cycle.

Built statically from every ``import`` and ``from ... import`` statement in
``python/tierlab`` (at module level, inside functions and under ``TYPE_CHECKING`` alike):
a module depends on each tierlab module it names. ``from PKG import NAME`` names the
submodule ``PKG.NAME`` when there is one, else ``PKG`` itself; importing a submodule is not
counted as a use of its parent package's ``__init__``.
"""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "python" / "tierlab"

#: An edge of the graph: (importing module, imported module) -> where (``file:line``).
Edges = dict[tuple[str, str], str]


def modules(root: Path = PACKAGE) -> dict[str, tuple[Path, bool]]:
    """Module name -> (source file, is a package) for every module of the package, the
    native extension (its stub) included."""
    out: dict[str, tuple[Path, bool]] = {}
    for path in sorted(root.rglob("*.py*")):
        if path.suffix not in (".py", ".pyi") or "__pycache__" in path.parts:
            continue
        parts = [root.name, *path.relative_to(root).with_suffix("").parts]
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts = parts[:-1]
        out.setdefault(".".join(parts), (path, is_pkg))
    return out


def import_edges(mods: dict[str, tuple[Path, bool]], root: Path = PACKAGE) -> Edges:
    """Every (importer, imported) pair among ``mods`` with the first place it is written."""
    edges: Edges = {}

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    for mod, (path, is_pkg) in mods.items():
        if path.suffix == ".pyi":
            continue
        package = mod if is_pkg else mod.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            targets: list[str | None] = []
            if isinstance(node, ast.Import):
                targets = [resolve(a.name) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    source = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    source = node.module or ""
                for a in node.names:
                    sub = f"{source}.{a.name}"
                    targets.append(sub if sub in mods else resolve(source))
            else:
                continue
            where = f"{path.relative_to(root.parent)}:{node.lineno}"
            for target in targets:
                if target is not None and target != mod:
                    edges.setdefault((mod, target), where)
    return edges


def cycles(edges: Edges) -> list[list[str]]:
    """One cycle (``[a, b, ..., a]``) through every strongly connected component of more
    than one module, found by Tarjan's algorithm (iterative)."""
    graph: dict[str, list[str]] = {}
    for a, b in sorted(edges):
        graph.setdefault(a, []).append(b)
        graph.setdefault(b, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = len(index)
                stack.append(v)
                on_stack.add(v)
            if i < len(graph[v]):
                work.append((v, i + 1))
                w = graph[v][i]
                if w not in index:
                    work.append((w, 0))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    components.append(sorted(comp))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
    out = []
    for comp in components:
        members = set(comp)
        # A shortest path back to the first module, through the component only.
        first = comp[0]
        prev: dict[str, str] = {}
        frontier = [first]
        while frontier and first not in prev:
            nxt = []
            for v in frontier:
                for w in graph[v]:
                    if w in members and w not in prev:
                        prev[w] = v
                        nxt.append(w)
            frontier = nxt
        path = [first]
        while True:
            v = prev[path[-1]]
            if v == first:
                break
            path.append(v)
        out.append([first, *reversed(path[1:]), first])
    return out


def describe(cycle: list[str], edges: Edges) -> str:
    return (
        " -> ".join(cycle)
        + "\n"
        + "\n".join(f"    {a} imports {b} at {edges[(a, b)]}" for a, b in itertools.pairwise(cycle))
    )


def test_the_package_has_no_import_cycle() -> None:
    mods = modules()
    assert "tierlab.api" in mods and "tierlab._native" in mods
    edges = import_edges(mods)
    found = cycles(edges)
    assert not found, "import cycles among tierlab modules:\n" + "\n".join(
        describe(c, edges) for c in found
    )


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        # a function-level import closes the cycle
        (
            {"a.py": "from tierlab import b\n", "b.py": "def f():\n    import tierlab.a\n"},
            [["tierlab.a", "tierlab.b", "tierlab.a"]],
        ),
        # an import under TYPE_CHECKING counts too; a relative one is resolved
        (
            {
                "p/__init__.py": "",
                "p/x.py": "from .y import Y\n",
                "p/y.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                "    from tierlab.p.x import X\n",
            },
            [["tierlab.p.x", "tierlab.p.y", "tierlab.p.x"]],
        ),
        # a package whose __init__ imports its submodule, which imports a sibling: no cycle
        (
            {
                "q/__init__.py": "from tierlab.q import r\n",
                "q/r.py": "from tierlab.q import s\n",
                "q/s.py": "",
            },
            [],
        ),
        # importing a name of the package's __init__ is a use of the package
        (
            {
                "q/__init__.py": "def f():\n    from tierlab.q import r\n",
                "q/r.py": "from tierlab.q import f\n",
            },
            [["tierlab.q", "tierlab.q.r", "tierlab.q"]],
        ),
    ],
)
def test_cycle_finder(tmp_path: Path, files: dict[str, str], expected: list[list[str]]) -> None:
    root = tmp_path / "tierlab"
    for name, text in {"__init__.py": "", **files}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    mods = modules(root)
    assert cycles(import_edges(mods, root)) == expected
