"""Each package's ``__all__`` is its public API: every name resolves, lazily, to the object (never to a module)."""

from __future__ import annotations

import importlib
import subprocess
import sys
import types

import pytest

PACKAGES = (
    "twinloop.hardware",
    "twinloop.model",
    "twinloop.ops",
    "twinloop.plan",
    "twinloop.report",
    "twinloop.telemetry",
)


@pytest.mark.parametrize("package", PACKAGES)
def test_every_public_name_resolves(package: str) -> None:
    mod = importlib.import_module(package)
    for name in mod.__all__:
        obj = getattr(mod, name)
        assert not isinstance(obj, types.ModuleType), f"{package}.{name} is a module, not an API name"
        if isinstance(obj, (type, types.FunctionType)):  # defined in the package itself (type aliases are not)
            assert obj.__module__.startswith(package), (package, name, obj.__module__)
    assert not hasattr(mod, "no_such_name")


@pytest.mark.parametrize("package", ["twinloop.hardware", "twinloop.model", "twinloop.ops", "twinloop.plan"])
def test_importing_the_package_loads_none_of_its_modules(package: str) -> None:
    code = f"import sys, {package}; print(sorted(m for m in sys.modules if m.startswith('{package}.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_every_import_through_a_package_names_its_api() -> None:
    """mypy cannot see a misspelt name behind a PEP 562 ``__getattr__``; this walks ``src`` for it instead."""
    import ast
    from pathlib import Path

    src = Path(__file__).resolve().parents[1] / "src" / "twinloop"
    api = {p: set(importlib.import_module(p).__all__) for p in PACKAGES}

    def is_module(package: str, name: str) -> bool:
        home = src.parent.joinpath(*package.split("."), name)
        return home.with_suffix(".py").is_file() or home.is_dir()

    wrong = [
        (str(path.relative_to(src)), node.module, alias.name)
        for path in src.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ImportFrom) and node.module in api
        for alias in node.names
        if alias.name not in api[node.module] and not is_module(node.module, alias.name)
    ]
    assert not wrong
