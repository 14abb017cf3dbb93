"""Every usage error (bad flag, unknown option, missing argument, bad value) is one stderr line, exit code 2."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from twinloop.cli.app import COMMANDS, PLAN_COMMANDS

SRC = str(Path(__file__).resolve().parents[2] / "src")
# Every command present in this checkout (the registry may name one that another branch adds).
EVERY_COMMAND = [[n] for n, e in COMMANDS.items() if n != "plan" and importlib.util.find_spec(e.module)] + [
    ["plan", n] for n in PLAN_COMMANDS
]


def _one_error_line(result: Any) -> str:
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and "╭" not in lines[0] and "Usage:" not in lines[0]
    assert result.stdout == ""
    return str(lines[0])


@pytest.mark.parametrize("command", EVERY_COMMAND, ids=" ".join)
def test_unknown_option_is_one_line_exit_2(cli: Callable[..., Any], command: list[str]) -> None:
    line = _one_error_line(cli(*command, "--no-such-flag"))
    assert "--no-such-flag" in line and " ".join(command) in line


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["plan", "train", "--gpu", "h100-sxm", "--gpus", "8"], "--model"),  # missing required option
        (["plan", "train", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--gpus", "eight"], "--gpus"),  # bad int
        (["plan", "train", "--model"], "--model"),  # option without its value
        (["plan", "compare", "--train-gpus", "2"], "--train-gpus"),  # out of range
        (["plan", "serve", "--model", "llama-3-8b", "--rate", "fast"], "--rate"),  # bad float
        (["detect"], "'file'"),  # missing argument
        (["ingest"], "'source'"),
        (["query"], "--field"),
        (["sim", "a.yaml", "b.yaml"], "b.yaml"),  # extra argument
        (["plann"], "plan"),  # unknown command, with a suggestion
        (["plan", "trian"], "train"),
        (["--no-such-flag"], "--no-such-flag"),
    ],
)
def test_usage_errors_are_one_line_exit_2(cli: Callable[..., Any], args: list[str], needle: str) -> None:
    assert needle in _one_error_line(cli(*args))


def test_no_arguments_prints_help_and_exits_0(cli: Callable[..., Any]) -> None:
    for args in ([], ["plan"]):
        result = cli(*args)
        assert result.exit_code == 0 and "Usage:" in result.stdout and result.stderr == ""


def test_installed_entry_point_prints_one_line_too() -> None:
    """The real process (not the test runner): stderr is one line, exit code 2."""
    env = {**os.environ, "PYTHONPATH": SRC}
    proc = subprocess.run(
        [sys.executable, "-m", "twinloop.cli.main", "gpus", "--bogus"], capture_output=True, text=True, env=env
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines() == ["error: twinloop gpus: No such option: --bogus (see twinloop gpus --help)"]


def test_shell_completion_lists_commands_without_importing_them() -> None:
    env = {**os.environ, "PYTHONPATH": SRC, "_TWINLOOP_COMPLETE": "complete_bash", "COMP_WORDS": "twinloop pl",
           "COMP_CWORD": "1"}  # fmt: skip
    code = "import sys\nfrom twinloop.cli.main import main\ntry:\n    main()\nexcept SystemExit:\n    pass\n"
    code += "print('numpy' in sys.modules, file=sys.stderr)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert "plan" in proc.stdout.split()
    assert proc.stderr.strip().splitlines()[-1] == "False"


def _complete(words: str) -> list[str]:
    env = {**os.environ, "PYTHONPATH": SRC, "_TWINLOOP_COMPLETE": "complete_bash", "COMP_WORDS": words,
           "COMP_CWORD": str(len(words.split()) - (0 if words.endswith(" ") else 1))}  # fmt: skip
    code = "from twinloop.cli.main import main\ntry:\n    main()\nexcept SystemExit:\n    pass\n"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env).stdout.split()


def test_gpu_and_model_names_complete_from_the_catalog() -> None:
    from twinloop.cli.completion import gpu_names, model_names
    from twinloop.hardware.gpu import gpu_catalog
    from twinloop.model.arch import catalog_model_names

    assert gpu_names("") == list(gpu_catalog()) and model_names("") == catalog_model_names()
    assert _complete("twinloop plan train --gpu h1") == [n for n in gpu_catalog() if n.startswith("h1")]
    assert "llama-3-70b" in _complete("twinloop plan serve --model llama")
