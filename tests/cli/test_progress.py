"""Long commands show progress on stderr when it is a terminal, and never on stdout or with --json."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _run_with_tty_stderr(*args: str) -> tuple[str, str]:
    """Run the CLI with stderr on a pseudo-terminal (as in a shell) and stdout on a pipe; return both."""
    master, slave = pty.openpty()
    env = {**os.environ, "PYTHONPATH": SRC, "COLUMNS": "100", "TERM": "xterm"}
    proc = subprocess.Popen([sys.executable, "-m", "twinloop.cli.main", *args], stdout=subprocess.PIPE,
                            stderr=slave, env=env)  # fmt: skip
    os.close(slave)
    err = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        err += chunk
    out = proc.stdout.read() if proc.stdout else b""
    assert proc.wait(timeout=600) == 0, err.decode(errors="replace")
    os.close(master)
    return out.decode(), err.decode(errors="replace")


def test_plan_train_search_shows_a_spinner_on_stderr_only() -> None:
    args = ("plan", "train", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--gpus", "64", "--search", "cost")
    out, err = _run_with_tty_stderr(*args)
    assert "planning (search by cost)" in err
    assert "planning" not in out and "Top " in out
    out, err = _run_with_tty_stderr(*args, "--json")
    assert "planning" not in err
    json.loads(out)  # stdout is one JSON document


@pytest.mark.slow
def test_plan_compare_shows_a_progress_bar_on_stderr_only() -> None:
    out, err = _run_with_tty_stderr("plan", "compare", "--train-gpus", "256")
    assert "planning" in err and "100%" in err
    assert "planning" not in out and "deepseek-v3" in out
    out, err = _run_with_tty_stderr("plan", "compare", "--train-gpus", "256", "--json")
    assert "planning" not in err and json.loads(out)["cases"]
