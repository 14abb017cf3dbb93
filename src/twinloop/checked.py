"""Frozen dataclasses checked against their annotations at construction, for the planner's hot path.

Why not pydantic here: importing pydantic costs ~0.1 s, a quarter of the 0.4 s that ``twinloop plan train`` may
take to answer (issue 15). The records the planner reads on every run (the GPU and link catalogs, the training
request) are flat: numbers with bounds, names, a choice among literals, small ``dict[str, float]`` tables. This
module checks exactly that, from the class's type hints; everything richer (scenarios, policies, sweeps, the web
API) keeps pydantic.

A checked class is a frozen dataclass whose ``__post_init__`` calls :func:`check_fields`::

    @dataclass(frozen=True)
    class LinkSpec:
        bandwidth_per_direction_bytes_per_s: Annotated[float, Range(gt=0)]

        def __post_init__(self) -> None:
            check_fields(self)

Coercion follows pydantic's lax mode where the inputs need it: an ``int`` or a numeric string (PyYAML reads
``80e9`` as a string) becomes a ``float``; a float with no fraction or an integer string becomes an ``int``;
``bool`` is never a number. NaN is refused everywhere. A bad value raises :class:`FieldError` (an
:class:`~twinloop.errors.InputError`) naming the field and what is allowed; :func:`build` checks unknown and
missing fields first and names the source (file or flag) and the dotted path.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

from twinloop.errors import InputError

T = TypeVar("T")


@dataclass(frozen=True)
class Range:
    """Bounds of a number (any subset of ``gt``, ``ge``, ``lt``, ``le``)."""

    gt: float | None = None
    ge: float | None = None
    lt: float | None = None
    le: float | None = None

    def holds(self, x: float) -> bool:
        """Whether ``x`` is inside (NaN never is)."""
        return not (
            (self.gt is not None and not x > self.gt)
            or (self.ge is not None and not x >= self.ge)
            or (self.lt is not None and not x < self.lt)
            or (self.le is not None and not x <= self.le)
        )

    def text(self) -> str:
        """The bounds as a user reads them, e.g. ``> 0 and <= 3000``."""
        ops = [(">", self.gt), (">=", self.ge), ("<", self.lt), ("<=", self.le)]
        return " and ".join(f"{op} {v:g}" for op, v in ops if v is not None)


class FieldError(InputError):
    """A field of a checked record is bad; ``source`` is the class name until :func:`build` names the file."""


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = typing.get_type_hints(cls, include_extras=True)
    return hints


def _fail(field: str, message: str) -> FieldError:
    return FieldError("", field, message)


def _coerce(hint: Any, value: Any, field: str) -> Any:
    """``value`` checked against ``hint`` (and converted as the module doc says); raises FieldError."""
    origin = get_origin(hint)
    if origin is Annotated:
        base, *meta = get_args(hint)
        out = _coerce(base, value, field)
        for m in meta:
            if isinstance(m, Range) and out is not None and not m.holds(out):
                raise _fail(field, f"must be {m.text()}, got {value!r}")
        return out
    if origin in (Union, types.UnionType):
        args = get_args(hint)
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]  # only Optional[X] is used
        return _coerce(inner, value, field)
    if origin is Literal:
        allowed = get_args(hint)
        if isinstance(value, str) and value in allowed:
            return value
        raise _fail(field, f"must be one of {', '.join(map(str, allowed))}, got {value!r}")
    if origin is dict:
        k_hint, v_hint = get_args(hint)
        if not isinstance(value, Mapping):
            raise _fail(field, f"must be a mapping, got {value!r}")
        return {_coerce(k_hint, k, f"{field}.{k}"): _coerce(v_hint, v, f"{field}.{k}") for k, v in value.items()}
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise _fail(field, f"must be true or false, got {value!r}")
    if hint is float:
        return _number(value, field)
    if hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value  # exact: no float rounding of big integers
        x = _number(value, field, integer=True)
        if not x.is_integer():
            raise _fail(field, f"must be an integer, got {value!r}")
        return int(x)
    if hint is str:
        if isinstance(value, str):
            return value
        raise _fail(field, f"must be a string, got {value!r}")
    if hint is Any:
        return value
    raise TypeError(f"checked: unsupported annotation {hint!r} of field {field}")  # a programming error


def _number(value: Any, field: str, integer: bool = False) -> float:
    kind = "an integer" if integer else "a number"
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise _fail(field, f"must be {kind}, got {value!r}")
    try:
        x = float(value)
    except (ValueError, OverflowError):
        raise _fail(field, f"must be {kind}, got {value!r}") from None
    if math.isnan(x):
        raise _fail(field, f"must be {kind}, got NaN")
    return x


def check_fields(obj: Any) -> None:
    """Check and convert every field of the frozen dataclass ``obj`` in place (call from ``__post_init__``)."""
    hints = _hints(type(obj))
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        out = _coerce(hints[f.name], value, f.name)
        if out is not value:
            object.__setattr__(obj, f.name, out)


def build(cls: type[T], data: Mapping[str, Any], source: str, prefix: str = "") -> T:
    """``cls(**data)`` with every problem as one :class:`~twinloop.errors.InputError` naming ``source`` and the
    dotted field (``prefix`` + name): unknown fields, missing required ones, bad values.
    """
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    for key in data:
        if key not in fields:
            raise InputError(source, f"{prefix}{key}", f"unknown field (allowed: {', '.join(fields)})")
    for name, f in fields.items():
        if name not in data and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise InputError(source, f"{prefix}{name}", "required field is missing")
    try:
        return cls(**data)
    except FieldError as exc:
        raise InputError(source, f"{prefix}{exc.field}".rstrip("."), exc.message) from None
