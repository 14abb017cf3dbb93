"""Report test fixtures: the web tests' synthetic site store (one builder for both test areas)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest


def _webdata() -> ModuleType:
    path = Path(__file__).resolve().parents[1] / "web" / "webdata.py"
    spec = importlib.util.spec_from_file_location("twinloop_tests_webdata", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


WEBDATA = _webdata()


@pytest.fixture(scope="session")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The synthetic 48-GPU site with loop records."""
    path: Path = WEBDATA.build_store(tmp_path_factory.mktemp("report") / "telemetry.duckdb")
    return path


@pytest.fixture
def hot_rack() -> str:
    """The rack that runs hot in the second half."""
    return str(WEBDATA.HOT_RACK)
