"""``twinloop.ops`` knows no twin: it sees every cluster through its port (``ops/ports.py``)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import twinloop.ops

OPS = Path(twinloop.ops.__file__).parent
FORBIDDEN = ("twinloop.twin", "twinloop.closedloop")


def imports(source: str, package: str) -> list[str]:
    """Every module ``source`` imports, absolute or relative (resolved against ``package``), at any depth:
    inside functions and ``TYPE_CHECKING`` blocks too."""
    out: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            out += [base] + [f"{base}.{a.name}" for a in node.names]
    return out


def forbidden(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == f or m.startswith(f + ".") for f in FORBIDDEN)]


def test_nothing_under_ops_imports_the_twin_or_the_closed_loop() -> None:
    files = sorted(OPS.rglob("*.py"))
    assert len(files) > 30  # the walk found the package
    found = {}
    for path in files:
        package = ".".join(("twinloop", *path.relative_to(OPS.parent).parts[:-1]))
        bad = forbidden(imports(path.read_text(), package))
        if bad:
            found[str(path.relative_to(OPS.parent))] = bad
    assert found == {}


@pytest.mark.parametrize(
    ("source", "caught"),
    [
        ("import twinloop.twin.engine", True),
        ("from twinloop.twin import Twin", True),
        ("from twinloop import twin", True),
        ("def f():\n    from twinloop.twin.engine import Twin", True),
        ("if TYPE_CHECKING:\n    from twinloop.twin.engine import Twin", True),
        ("from ...twin.engine import Twin", True),
        ("from ... import closedloop", True),
        ("from twinloop.closedloop.cluster import TwinCluster", True),
        ("from twinloop.ops.ports import Cluster", False),
        ("from .. import events", False),
        ("from twinloop.twinkle import x", False),
    ],
)
def test_the_check_catches_every_spelling(source: str, caught: bool) -> None:
    assert bool(forbidden(imports(source, "twinloop.ops.detect"))) == caught
