"""Shared fixtures for probe tests."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "probe"


@pytest.fixture
def tree(tmp_path: Path) -> Callable[[str], Path]:
    """Copy a fixture tree into a temp dir so a test can break files in it."""

    def copy(name: str) -> Path:
        dst = tmp_path / name
        shutil.copytree(FIXTURES / name, dst, symlinks=True)
        return dst

    return copy
