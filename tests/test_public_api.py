"""Each package's ``__all__`` is its public API: every name resolves, lazily, to the object (never to a module)."""

from __future__ import annotations

import importlib
import subprocess
import sys
import types

import pytest

PACKAGES = ("twinloop.hardware", "twinloop.model", "twinloop.plan", "twinloop.report", "twinloop.telemetry")


@pytest.mark.parametrize("package", PACKAGES)
def test_every_public_name_resolves(package: str) -> None:
    mod = importlib.import_module(package)
    for name in mod.__all__:
        obj = getattr(mod, name)
        assert not isinstance(obj, types.ModuleType), f"{package}.{name} is a module, not an API name"
        home = getattr(obj, "__module__", None)  # classes and functions: defined in the package itself
        assert home is None or home.startswith(package), (package, name, home)
    assert not hasattr(mod, "no_such_name")


@pytest.mark.parametrize("package", ["twinloop.hardware", "twinloop.model", "twinloop.plan"])
def test_importing_the_package_loads_none_of_its_modules(package: str) -> None:
    code = f"import sys, {package}; print(sorted(m for m in sys.modules if m.startswith('{package}.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
