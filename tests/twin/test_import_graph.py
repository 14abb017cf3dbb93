"""The twin's modules import each other without a cycle (built from the source with ``ast``, no import run).

Every import counts: module level, inside functions (lazy) and under ``TYPE_CHECKING`` — a cycle that only the
type checker sees is still two modules that cannot be read, tested or replaced apart. The engine imports its
parts; the parts see the engine's state through :class:`twinloop.twin.site.SiteState` and
:class:`twinloop.twin.operations.ClusterOps`, never through the engine.
"""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, module: str, known: set[str]) -> set[str]:
    """Modules of ``known`` that ``path`` imports (``from pkg import mod`` counts as importing ``pkg.mod``)."""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return (found & known) - {module}


def import_graph(package: str) -> dict[str, set[str]]:
    """Module → the modules of ``package`` it imports, for every module under ``src/<package>``."""
    root = SRC.joinpath(*package.split("."))
    paths = {_module_name(p): p for p in sorted(root.rglob("*.py"))}
    known = set(paths)
    return {mod: _imports(path, mod, known) for mod, path in paths.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (its modules in order, the first repeated at the end), or ``None``."""
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        return list(exc.args[1])
    return None


def test_the_graph_sees_every_kind_of_import() -> None:
    graph = import_graph("twinloop.twin")
    assert "twinloop.twin.engine" in graph
    # module level, ``from package import module`` and a lazy import inside a method
    assert {"twinloop.twin.actions", "twinloop.twin.site", "twinloop.twin.summary"} <= graph["twinloop.twin.engine"]
    assert "twinloop.twin.engine" in graph["twinloop.twin"]


def test_find_cycle_finds_one() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) is not None
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


@pytest.mark.parametrize("package", ["twinloop.twin"])
def test_no_import_cycle(package: str) -> None:
    graph = import_graph(package)
    # the package's __init__ re-exports its modules; a module importing its own package is no design cycle
    graph = {mod: deps - {package} for mod, deps in graph.items()}
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])
