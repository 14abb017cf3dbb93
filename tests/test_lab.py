"""``twinloop.lab`` holds studies, not product: no module outside it imports it (``ast``, every import counted)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "twinloop"


def _imported(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_the_product_never_imports_the_lab() -> None:
    offenders = {
        str(path.relative_to(SRC)): sorted(m for m in _imported(path) if m.startswith("twinloop.lab"))
        for path in SRC.rglob("*.py")
        if path.parent.name != "lab" or path.parent.parent != SRC
    }
    assert not {k: v for k, v in offenders.items() if v}


def test_the_lab_is_where_the_studies_are() -> None:
    names = {p.stem for p in (SRC / "lab").glob("*.py")}
    assert {"classifier_dataset", "fault_scenarios", "feedback_eval", "fp8_anchors"} <= names
