"""Option values of plain types (``str``, ``int``, ``float``, ``bool``) converted without building pydantic adapters.

Typer (>= 0.29) converts every option value through a pydantic ``TypeAdapter`` built on first use. For
``twinloop plan train`` (30 options) importing pydantic and building the adapters costs ~0.1 s of the 0.4 s
start-up budget (issue 15), and the planner itself no longer needs pydantic (:mod:`twinloop.checked`).

:func:`install` gives each plain ``str``/``int``/``float``/``bool`` option of a built command a converter that answers
the common case itself (a value already of the type; a string that Python's ``int()``/``float()`` reads) and hands
everything else (``--gpus 8.0``, ``--gpus abc``) to typer's own pydantic conversion, built on demand, so odd input
gets exactly typer's result or error message. ``tests/cli/test_scalar_params.py`` checks on random strings that
whatever the fast path accepts, typer's conversion accepts with the same value.

This leans on typer's private ``_TyperParameter._runtime_param`` hook and ``typer._coercion`` (present since
0.29): where an installed typer lacks them, ``twinloop.cli.app._fast_options`` leaves the command as typer built
it (correct, only slower), and ``tests/cli/test_scalar_params.py`` and the start-up guard in
``tests/cli/test_lazy.py`` fail, so the loss is seen.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from typer._coercion import RuntimeParam, build_runtime_param

_PLAIN = (str, int, float, bool)


@dataclass(frozen=True)
class ScalarParam(RuntimeParam):
    """Converts a ``str``/``int``/``float``/``bool`` option value; anything unusual goes to typer's own conversion."""

    def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
        kind = self.annotation
        if isinstance(value, kind) and (kind is bool or not isinstance(value, bool)):
            return value
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        # int("١") is 1, and float("0_0 ") is 0.0, but pydantic refuses both: such strings take typer's path
        if isinstance(value, str) and kind in (int, float) and value.isascii() and "_" not in value:
            try:
                return kind(value)
            except ValueError:
                pass
        # The exact conversion (and error message) typer would have given, through pydantic.
        return build_runtime_param(param.type_descriptor)._coerce_value(value, param=param, ctx=ctx)


def _eligible(param: Any) -> bool:
    desc = getattr(param, "type_descriptor", None)
    if desc is None or not hasattr(param, "_runtime_param") or desc.annotation not in _PLAIN:
        return False
    info = desc.parameter_info
    plain = info.parser is None and info.min is None and info.max is None and not info.clamp
    return plain and not (desc.is_choice or desc.is_path or desc.is_file) and param.nargs == 1 and not param.multiple


def install(command: Any, ctx: Any = None) -> Any:
    """Give every plain ``str``/``int``/``float``/``bool`` option of ``command`` (and of its subcommands) a
    :class:`ScalarParam`; return ``command``.

    With ``ctx`` (a context for ``command``, whose parent gives the help option's names) the ``--help`` option,
    which click creates on first use, is created now and converted the same way.
    """
    params = list(getattr(command, "params", []))
    if ctx is not None and hasattr(command, "get_help_option"):
        params.append(command.get_help_option(ctx))
    for param in params:
        if param is not None and _eligible(param) and param._runtime_param is None:
            param._runtime_param = ScalarParam(parameter_info=param.type_descriptor.parameter_info,
                                               annotation=param.type_descriptor.annotation)  # fmt: skip
    for sub in (getattr(command, "commands", None) or {}).values():
        install(sub)
    return command


def context_for(command: Any, name: str, parent: Any = None) -> Any:
    """A context for ``command`` as click's ``make_context`` would create it (without parsing anything)."""
    return command.context_class(command, info_name=name, parent=parent, **command.context_settings)
