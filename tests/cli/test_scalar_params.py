"""Plain option values convert without pydantic, to exactly what typer's own (pydantic) conversion gives."""

from __future__ import annotations

import math
from typing import Any

import pytest
import typer
import typer.main
from hypothesis import given, settings
from hypothesis import strategies as st
from typer._click import Context
from typer._click.exceptions import BadParameter
from typer._coercion import build_runtime_param

from twinloop.cli.scalar_params import ScalarParam, install

_app = typer.Typer()


@_app.command()
def _cmd(
    i: int = typer.Option(0, "--i"),
    x: float = typer.Option(0.0, "--x"),
    s: str = typer.Option("", "--s"),
    b: bool = typer.Option(False, "--b/--no-b"),
    r: int = typer.Option(1, "--r", min=1),
) -> None:
    """A command with one option of each plain type."""


_COMMAND = typer.main.get_command(_app)
_PARAMS = {p.name: p for p in _COMMAND.params}
_CTX = Context(_COMMAND)


def _outcome(runtime: Any, name: str, value: Any) -> tuple[str, Any]:
    try:
        out = runtime.coerce(value, param=_PARAMS[name], ctx=_CTX)
    except BadParameter as exc:
        return ("error", exc.message)
    return ("ok", repr(out) if isinstance(out, float) and math.isnan(out) else (type(out), out))


_ODD = st.text(alphabet="0123456789+-._eE ianfINFxX\u0661\t\n\x0b\x0c\r", max_size=9)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["i", "x", "s"]), st.one_of(_ODD, st.integers(), st.floats()))
def test_fast_conversion_equals_typers(name: str, value: Any) -> None:
    param = _PARAMS[name]
    fast = ScalarParam(parameter_info=param.type_descriptor.parameter_info, annotation=param.type_descriptor.annotation)
    assert _outcome(fast, name, value) == _outcome(build_runtime_param(param.type_descriptor), name, value)


@pytest.mark.parametrize("name", ["i", "x"])
@pytest.mark.parametrize("value", ["0_0 ", " 0_0", "0_0\x0c", "1_000", "1_0.5"])
def test_underscored_numbers_convert_as_typer_does(name: str, value: str) -> None:
    param = _PARAMS[name]
    fast = ScalarParam(parameter_info=param.type_descriptor.parameter_info, annotation=param.type_descriptor.annotation)
    assert _outcome(fast, name, value) == _outcome(build_runtime_param(param.type_descriptor), name, value)


def test_install_covers_plain_options_only() -> None:
    command = install(typer.main.get_command(_app))
    kinds = {p.name: type(p._runtime_param).__name__ for p in command.params if "completion" not in p.name}
    # --r has a minimum: typer's pydantic adapter enforces it, so it keeps typer's conversion.
    assert kinds == {"i": "ScalarParam", "x": "ScalarParam", "s": "ScalarParam", "b": "ScalarParam", "r": "NoneType"}


_TRAIN_ARGS = [
    ["--model", "llama-3-8b", "--gpu", "h100-sxm", "--gpus", "8"],
    ["--model", "m", "--gpu", "g", "--gpus", "8.0", "--tp", " 2 ", "--pue", "1_3", "--price-kwh", "1e-1"],
    ["--model", "m", "--gpu", "g", "--gpus", "+64", "--no-sequence-parallel", "--power-limit", "inf", "--json"],
    ["--model", "m", "--gpu", "g", "--gpus", "abc"],
    ["--model", "m", "--gpu", "g", "--gpus", "8", "--pue", "x"],
    ["--model", "m", "--gpu", "g", "--gpus", "8", "--zero", "\u0661"],
]


def _parse(args: list[str], fast: bool) -> tuple[str, Any]:
    import twinloop.cli.plan_cmds  # noqa: F401  (registers `train` on plan_app)
    from twinloop.cli.app import _fast_options, plan_app

    command = typer.main.get_command_from_info(  # a fresh build: no converter installed yet
        next(i for i in plan_app.registered_commands if i.name == "train"), pretty_exceptions_short=True,
        rich_markup_mode=None)  # fmt: skip
    if fast:
        _fast_options(command, "train")
        assert any(isinstance(p._runtime_param, ScalarParam) for p in command.params)
    else:
        assert not any(isinstance(p._runtime_param, ScalarParam) for p in command.params)
    try:
        ctx = command.make_context("train", list(args))
    except BadParameter as exc:
        return ("error", exc.format_message())
    return ("ok", sorted((k, (type(v), v)) for k, v in ctx.params.items()))


def test_plan_train_parses_the_same_with_and_without_the_fast_converters() -> None:
    """The real command's options: every value (and every error) as typer itself gives it."""
    for args in _TRAIN_ARGS:
        assert _parse(args, fast=True) == _parse(args, fast=False), args


def test_a_typer_without_the_hook_leaves_commands_as_built(monkeypatch: Any) -> None:
    """Should typer move its private coercion hook, the CLI still works (through pydantic, only slower)."""
    import sys

    from twinloop.cli.app import _fast_options

    monkeypatch.setitem(sys.modules, "twinloop.cli.scalar_params", None)  # importing it raises ImportError
    command = typer.main.get_command(_app)
    assert _fast_options(command, "cmd") is command
    assert all(p._runtime_param is None for p in command.params)
    assert command.make_context("cmd", ["--i", "7", "--x", "2"]).params["i"] == 7
