"""Start-up: commands are imported only when used, and `--help` imports nothing heavy."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from twinloop.cli.app import COMMANDS, PLAN_COMMANDS, app, plan_app

SRC = str(Path(__file__).resolve().parents[2] / "src")

# Packages that no part of `twinloop --help` may import (each costs 50-500 ms at start-up).
HEAVY = ["numpy", "pandas", "duckdb", "pyarrow", "fastapi", "starlette", "uvicorn", "httpx", "river", "scipy",
         "sklearn", "pydantic", "yaml", "pynvml", "prometheus_client", "rich.progress", "importlib.metadata",
         "twinloop.plan", "twinloop.twin", "twinloop.ops", "twinloop.telemetry", "twinloop.web", "twinloop.report",
         "twinloop.model", "twinloop.hardware"]  # fmt: skip
# What `plan train` itself may not need: the twin, the store, the web app, the loop, and (issue 15: answer in
# 0.4 s) pydantic (~0.1 s; typer's option adapters included), PyYAML (the catalogs come from the JSON cache once
# parsed), importlib.metadata, pandas, ray.
NOT_FOR_PLANNING = ["duckdb", "pyarrow", "fastapi", "starlette", "uvicorn", "httpx", "river", "scipy", "sklearn",
                    "pynvml", "prometheus_client", "twinloop.twin", "twinloop.ops", "twinloop.telemetry",
                    "twinloop.web", "twinloop.report", "pydantic", "pydantic_core", "typer._adapters",
                    "annotated_types", "importlib.metadata", "pandas", "ray", "twinloop.sweep"]  # fmt: skip
FIRST_RUN_ONLY = ["yaml"]  # parses the catalogs once, then reads them from the cache


def _start(args: list[str], names: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run the CLI in a fresh interpreter; which of ``names`` it imported, its dataclass code cache, its env."""
    code = f"""
import json, os, sys
from twinloop.cli.main import app
try:
    app({args!r})
except SystemExit:
    pass
from twinloop import codecache
cache = codecache.installed()
sys.stderr.write(json.dumps({{"loaded": [m for m in {names!r} if m in sys.modules],
                              "compiled": cache.compiled, "reused": cache.reused,
                              "openblas": os.environ.get("OPENBLAS_NUM_THREADS")}}))
"""
    env = {**os.environ, "PYTHONPATH": SRC, "COLUMNS": "80", **(env or {})}
    if env.get("OPENBLAS_NUM_THREADS") == "":  # "" stands for unset
        del env["OPENBLAS_NUM_THREADS"]
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    return json.loads(proc.stderr.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _loaded_after(args: list[str], names: list[str], env: dict[str, str] | None = None) -> list[str]:
    """Run the CLI in a fresh interpreter; return which of ``names`` it imported."""
    return _start(args, names, env)["loaded"]  # type: ignore[no-any-return]


def test_help_imports_nothing_heavy() -> None:
    assert _loaded_after(["--help"], HEAVY) == []


@pytest.mark.parametrize("args", [["plan", "--help"], ["plan", "train", "--help"], ["-h"], ["--version"]])
def test_group_help_and_version_import_nothing_heavy(args: list[str]) -> None:
    # --version looks the version up in the installed metadata.
    own = {"importlib.metadata"} if args == ["--version"] else set()
    assert _loaded_after(args, [m for m in HEAVY if m not in own]) == []


def test_plan_train_imports_only_the_planner(tmp_path: Path) -> None:
    args = ["plan", "train", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--gpus", "8"]
    env = {"TWINLOOP_CACHE_DIR": str(tmp_path), "OPENBLAS_NUM_THREADS": ""}
    first = _start(args, NOT_FOR_PLANNING + FIRST_RUN_ONLY, env)  # an empty cache
    assert first["loaded"] == FIRST_RUN_ONLY and first["compiled"] > 100
    again = _start(args, NOT_FOR_PLANNING + FIRST_RUN_ONLY, env)
    # The catalogs and every dataclass method come from the cache; OpenBLAS starts no worker threads.
    methods = first["compiled"] + first["reused"]  # classes with the same fields share a method's text
    assert again == {"loaded": [], "compiled": 0, "reused": methods, "openblas": "1"}
    assert _start(args, [], {**env, "OPENBLAS_NUM_THREADS": "4"})["openblas"] == "4"  # the user's setting wins
    # The MoE routing simulator behind `plan serve` and `plan moe` multiplies large matrices: BLAS as it was.
    assert _start(["plan", "moe", "--help"], [], {**env, "OPENBLAS_NUM_THREADS": ""})["openblas"] is None
    # A value that needs typer's own conversion still gets it (pydantic, on demand): 8.0 reads as 8.
    code = f"""
from twinloop.cli.main import app
app({[*args[:-1], "8.0", "--json"]!r})
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": SRC})  # fmt: skip
    assert out.returncode == 0 and json.loads(out.stdout)["gpus"] == 8


def test_version_prints_the_package_version() -> None:
    env = {**os.environ, "PYTHONPATH": SRC}
    out = subprocess.run([sys.executable, "-m", "twinloop.cli.main", "--version"], capture_output=True, text=True,
                         env=env, timeout=60)  # fmt: skip
    assert out.returncode == 0 and out.stdout.startswith("twinloop ") and len(out.stdout.split()) == 2


@pytest.mark.parametrize(("group", "registry"), [(app, COMMANDS), (plan_app, PLAN_COMMANDS)])
def test_registry_names_the_module_and_help_of_every_command(group: object, registry: dict) -> None:  # type: ignore[type-arg]
    import typer.main

    registry = {n: e for n, e in registry.items() if importlib.util.find_spec(e.module) is not None}
    assert {"run", "plan", "train"} & set(registry)  # the core commands are always present
    for entry in registry.values():
        importlib.import_module(entry.module)
    click_group = typer.main.get_command(group)  # type: ignore[arg-type]
    import click

    ctx = click.Context(click_group)  # type: ignore[arg-type]
    for name, entry in registry.items():
        cmd = click_group.get_command(ctx, name)  # type: ignore[attr-defined]
        assert cmd is not None, f"{entry.module} does not register command {name!r}"
        first = (cmd.help or "").strip().split("\n\n")[0].replace("\n", " ")
        assert first == entry.help, f"{name}: help in cli/app.py differs from the command's docstring"
    # Every registered command is listed (a command missing from the registry would not be lazy).
    registered = {c.name or c.callback.__name__.replace("_", "-") for c in group.registered_commands}  # type: ignore[attr-defined, union-attr]
    registered |= {g.name for g in group.registered_groups}  # type: ignore[attr-defined]
    assert registered <= set(registry), f"commands missing from the registry: {registered - set(registry)}"


def test_objectives_listed_in_the_cli_match_the_planner() -> None:
    from twinloop.cli.plan_cmds import OBJECTIVES
    from twinloop.plan.search import OBJECTIVES as PLANNER

    assert tuple(OBJECTIVES) == tuple(PLANNER)


def test_framework_profiles_listed_in_the_cli_match_the_planner() -> None:
    from twinloop.cli.plan_cmds import FRAMEWORKS
    from twinloop.plan.frameworks import DEFAULT_FRAMEWORK
    from twinloop.plan.frameworks import FRAMEWORKS as PLANNER

    assert sorted(FRAMEWORKS) == sorted(PLANNER)
    assert FRAMEWORKS[0] == DEFAULT_FRAMEWORK


def test_every_command_module_is_in_the_registry() -> None:
    """A new ``cli/*_cmd.py`` must be listed in cli/app.py, or its command would silently not exist."""
    listed = {e.module for e in [*COMMANDS.values(), *PLAN_COMMANDS.values()]}
    cli_dir = Path(SRC) / "twinloop" / "cli"
    modules = {f"twinloop.cli.{p.stem}" for p in cli_dir.glob("*_cmd*.py")}
    assert modules <= listed, f"add to COMMANDS in cli/app.py: {sorted(modules - listed)}"
