"""Every third-party package imported anywhere under ``src/`` is declared in ``pyproject.toml`` (a missing one
works on a developer's machine and fails on a fresh install)."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Imported only behind a guard that skips the feature when absent (named in the module that imports it).
OPTIONAL = {"liburing"}


def _imported_top_level() -> set[str]:
    names: set[str] = set()
    for path in (ROOT / "src").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
    return names


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_every_imported_package_is_declared() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {_norm(re.split(r"[<>=!~\[; ]", d, maxsplit=1)[0]) for d in project["dependencies"]}
    dists = importlib.metadata.packages_distributions()
    third_party = _imported_top_level() - set(sys.stdlib_module_names) - {"twinloop", "__future__"} - OPTIONAL
    missing = {}
    for module in sorted(third_party):
        candidates = {_norm(d) for d in dists.get(module, [module])}
        if not candidates & declared:
            missing[module] = sorted(candidates)
    assert missing == {}, f"imported but not declared in pyproject.toml dependencies: {missing}"
