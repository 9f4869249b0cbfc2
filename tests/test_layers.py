"""The layers of `src/gpufleet` point one way, and no modules import each other in a circle.

Read from the code's own imports (the AST, every `import` and `from ... import` of a
gpufleet module, at the top, inside functions and under `TYPE_CHECKING` alike): a package
may import only packages on a lower row of `LAYERS`, or itself. Packages on one row are
peers and do not import each other. Design 0019 explains the table and the data flow.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

# Bottom first. A name is a package of gpufleet, or a module at its top.
LAYERS: tuple[frozenset[str], ...] = tuple(
    frozenset(row.split())
    for row in (
        "__init__ errors quantities formatting",
        "outputs",
        "catalog telemetry",
        "specs",
        "cluster",
        "estimate",
        "sched",
        "sim",
        "plan",
        "report export validation",
        "control",
        "api",
        "portal",
        "server",
        "cli",
    )
)
LEVEL = {name: i for i, row in enumerate(LAYERS) for name in row}


@dataclass(frozen=True)
class Import:
    source: str  # importing module, e.g. gpufleet.plan.fleet
    target: str  # imported module (the longest prefix that is a module of ours)
    line: int


def modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for path in sorted((SRC / "gpufleet").rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports(known: dict[str, Path]) -> Iterator[Import]:
    for module, path in known.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text("utf-8"), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join([*up, *([node.module] if node.module else [])])
                targets = [f"{base}.{a.name}" for a in node.names] or [base]
            for name in targets:
                if not name.startswith("gpufleet"):
                    continue
                target = _resolve(name, known)
                if target is not None and target != module:
                    yield Import(module, target, node.lineno)


def layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


KNOWN = modules()
IMPORTS = list(imports(KNOWN))


def test_every_package_has_a_layer() -> None:
    missing = sorted({layer(m) for m in KNOWN} - set(LEVEL))
    assert not missing, f"add these to LAYERS in tests/test_layers.py: {missing}"


def _upward() -> list[str]:
    out = []
    for i in IMPORTS:
        a, b = layer(i.source), layer(i.target)
        if a != b and LEVEL[b] >= LEVEL[a]:
            how = "a peer" if LEVEL[b] == LEVEL[a] else "a higher layer"
            out.append(f"{KNOWN[i.source].relative_to(SRC)}:{i.line} imports {i.target} ({how})")
    return out


def test_no_import_points_up() -> None:
    assert _upward() == []


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_module_circles() -> None:
    edges: dict[str, set[str]] = defaultdict(set)
    for i in IMPORTS:
        edges[i.source].add(i.target)
        edges.setdefault(i.target, set())
    assert circles(edges) == []


@pytest.mark.parametrize(
    ("edges", "expected"),
    [
        ({"a": {"b"}, "b": {"a"}, "c": set()}, [["a", "b"]]),
        ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
    ],
)
def test_circles_finds_cycles(edges: dict[str, set[str]], expected: list[list[str]]) -> None:
    assert circles(defaultdict(set, edges)) == expected


def test_the_checks_see_an_upward_import(tmp_path: Path) -> None:
    """The checker itself: a fake module importing upward is caught (guards the walk)."""
    fake = {"gpufleet.catalog.x": tmp_path / "x.py", "gpufleet.plan.y": tmp_path / "y.py"}
    fake["gpufleet.catalog.x"].write_text("def f():\n    from gpufleet.plan.y import z\n")
    fake["gpufleet.plan.y"].write_text("z = 1\n")
    found = [(i.source, i.target) for i in imports(fake)]
    assert found == [("gpufleet.catalog.x", "gpufleet.plan.y")]


MAX_LINES = 700


def test_long_modules_say_why_they_stay_whole() -> None:
    """A module over `MAX_LINES` lines does several jobs unless its docstring says why not
    ("Why one file"): split it, or write down the reason (design 0015)."""
    long = []
    for path in KNOWN.values():
        text = path.read_text("utf-8")
        if text.count("\n") > MAX_LINES:
            doc = ast.get_docstring(ast.parse(text)) or ""
            if "Why one file" not in doc:
                long.append(f"{path.relative_to(SRC)} ({text.count(chr(10))} lines)")
    assert long == [], f"split these or say why they stay whole: {long}"
