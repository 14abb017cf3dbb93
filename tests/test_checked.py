"""Checked dataclasses: bounds, literals, lax number coercion and errors that name the source and the field."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from twinloop.checked import FieldError, Range, build, check_fields
from twinloop.errors import InputError
from twinloop.plan.train_request import make_request


@dataclass(frozen=True)
class _Rec:
    name: str
    power_w: Annotated[float, Range(gt=0, le=3000)]
    count: Annotated[int, Range(ge=1)]
    kind: Literal["a", "b"]
    table: dict[Literal["x", "y"], Annotated[float, Range(ge=0)]]
    flag: bool = False
    limit_w: Annotated[float, Range(gt=0)] | None = None

    def __post_init__(self) -> None:
        check_fields(self)


_GOOD: dict[str, Any] = {"name": "n", "power_w": 700, "count": 8, "kind": "a", "table": {"x": 1}}


def _expect_number(value: Any) -> float | None:
    """What a float field with (0, 3000] must make of ``value`` (None: refused)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        x = float(value)
    except (ValueError, OverflowError):
        return None
    return x if 0 < x <= 3000 else None  # NaN fails both comparisons


@given(st.one_of(st.floats(), st.integers(-10, 10_000), st.booleans(), st.none(), st.text(max_size=6),
                 st.floats(-10, 4000).map(str), st.lists(st.integers(), max_size=1)))  # fmt: skip
def test_float_field_takes_exactly_the_numbers_in_range(value: Any) -> None:
    expected = _expect_number(value)
    if expected is None:
        with pytest.raises(FieldError) as exc:
            _Rec(**{**_GOOD, "power_w": value})
        assert exc.value.field == "power_w" and (
            "> 0 and <= 3000" in exc.value.message or "number" in exc.value.message
        )
    else:
        rec = _Rec(**{**_GOOD, "power_w": value})
        assert isinstance(rec.power_w, float) and rec.power_w == expected


@given(st.one_of(st.integers(-5, 10**30), st.floats(-5, 1e6), st.text(alphabet="0123456789.-e", max_size=5)))
def test_int_field_takes_whole_numbers_only(value: Any) -> None:
    try:
        x = float(value)
        ok = math.isfinite(x) and x.is_integer() and x >= 1
    except ValueError:
        ok = False
    if ok:
        rec = _Rec(**{**_GOOD, "count": value})
        assert type(rec.count) is int and rec.count == (value if isinstance(value, int) else int(x))
    else:
        with pytest.raises(FieldError, match="count"):
            _Rec(**{**_GOOD, "count": value})


def test_literals_dicts_bools_and_optionals() -> None:
    rec = _Rec(**{**_GOOD, "table": {"x": "80e9", "y": 0}, "limit_w": None})
    assert rec.table == {"x": 80e9, "y": 0.0} and rec.limit_w is None and rec.flag is False
    with pytest.raises(FieldError, match="one of a, b"):
        _Rec(**{**_GOOD, "kind": "c"})
    with pytest.raises(FieldError) as exc:
        _Rec(**{**_GOOD, "table": {"z": 1.0}})
    assert exc.value.field == "table.z"
    with pytest.raises(FieldError, match="true or false"):
        _Rec(**{**_GOOD, "flag": "yes"})
    with pytest.raises(FieldError, match="must be > 0"):
        _Rec(**{**_GOOD, "limit_w": 0})


def test_build_names_source_and_dotted_field() -> None:
    with pytest.raises(InputError) as exc:
        build(_Rec, {**_GOOD, "power_w": -1}, "cat.yaml", "items.x.")
    assert (exc.value.source, exc.value.field) == ("cat.yaml", "items.x.power_w") and "> 0 and <= 3000" in str(
        exc.value
    )
    with pytest.raises(InputError, match=r"cat.yaml: items.x.colour: unknown field"):
        build(_Rec, {**_GOOD, "colour": 1}, "cat.yaml", "items.x.")
    with pytest.raises(InputError, match=r"cat.yaml: items.x.count: required field is missing"):
        build(_Rec, {k: v for k, v in _GOOD.items() if k != "count"}, "cat.yaml", "items.x.")


def test_train_request_errors_name_the_field() -> None:
    with pytest.raises(InputError, match=r"plan train: gpus: must be >= 1 and <= 1e\+06, got 0"):
        make_request(model="m", gpu="g", gpus=0)
    with pytest.raises(InputError, match="recompute: must be one of none, selective, full"):
        make_request(model="m", gpu="g", gpus=8, recompute="some")
    with pytest.raises(InputError, match="pue"):
        make_request(model="m", gpu="g", gpus=8, pue=float("nan"))
    assert make_request(model="m", gpu="g", gpus=8, pue=1).pue == 1.0
