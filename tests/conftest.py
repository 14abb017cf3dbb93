"""Shared test fixtures."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import settings
from typer.testing import CliRunner

from twinloop.cli.main import app

# Property tests draw the same examples on every run, so a pass here is a pass in CI; set
# TWINLOOP_HYPOTHESIS=explore to draw fresh ones (and keep any counterexample found as a regression test).
settings.register_profile("repeatable", derandomize=True, database=None)
settings.register_profile("explore")
settings.load_profile("explore" if os.environ.get("TWINLOOP_HYPOTHESIS") == "explore" else "repeatable")


@pytest.fixture
def cli() -> Callable[..., Any]:
    """Run the CLI in-process; returns the click Result (exit_code, stdout, stderr)."""
    runner = CliRunner()

    def run(*args: str) -> Any:
        return runner.invoke(app, list(args), catch_exceptions=False)

    return run


@pytest.fixture
def cli_json(cli: Callable[..., Any]) -> Callable[..., Any]:
    """Run a CLI command with --json and parse stdout (asserting exit code 0)."""

    def run(*args: str) -> Any:
        result = cli(*args, "--json")
        assert result.exit_code == 0, result.stderr
        return json.loads(result.stdout)

    return run
