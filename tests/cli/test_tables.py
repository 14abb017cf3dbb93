"""cli/tables.py: no layout cuts a cell at any width; units read 1-999 with the right prefix."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.table import Table

from twinloop.cli.tables import Col, duration, energy, energy_wh, layout, power, print_table, si

WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-./:", min_size=1, max_size=14)


def _render(width: int, tables: list) -> str:  # type: ignore[type-arg]
    console = Console(width=width, record=True, file=open("/dev/null", "w"), emoji=False)  # noqa: SIM115
    for t in tables:
        console.print(t)
    return console.export_text()


@st.composite
def tables(draw: st.DrawFn) -> tuple[list[Col], list[list[str]]]:
    n_cols = draw(st.integers(1, 9))
    cols = [
        Col(
            draw(WORD) + ("\n" + draw(WORD) if draw(st.booleans()) else ""),
            draw(st.sampled_from(["left", "right"])),
            wrap=draw(st.booleans()),
        )
        for _ in range(n_cols)
    ]
    rows = [
        [" ".join(draw(st.lists(WORD, min_size=1, max_size=4))) if c.wrap else draw(WORD) for c in cols]
        for _ in range(draw(st.integers(0, 6)))
    ]
    return cols, rows


@settings(max_examples=150, deadline=None)
@given(tables(), st.integers(40, 220), st.integers(1, 2))
def test_no_layout_cuts_a_cell(table: tuple[list[Col], list[list[str]]], width: int, keys: int) -> None:
    cols, rows = table
    keys = min(keys, len(cols))
    text = _render(width, layout("title", cols, rows, width, keys))
    assert "…" not in text
    for line in text.splitlines():
        assert len(line) <= width
    flat = re.sub(r"[\s│┃┏┓┗┛┡┩└┘┌┐├┤┼╇╈━─┳┻┬┴╋]+", " ", text)
    for row in rows:
        for col, cell in zip(cols, row, strict=True):
            for word in cell.split() if col.wrap else [cell]:
                if len(word) <= 14:  # every value fits some layout at >= 40 columns; it must show in one piece
                    assert word in flat or word in text, (word, text)


def test_wide_enough_is_one_table_narrow_splits_and_repeats_the_key() -> None:
    cols = [Col("name", "left"), *(Col(f"metric {i}\nunit") for i in range(8))]
    rows = [["h100-sxm-with-long-name", *(f"{1000 + i}.25" for i in range(8))]]

    def n_tables(parts: list) -> int:  # type: ignore[type-arg]
        return sum(isinstance(p, Table) for p in parts)

    assert n_tables(layout("t", cols, rows, 200)) == 1
    parts = layout("t", cols, rows, 80)
    assert n_tables(parts) > 1
    text = _render(80, parts)
    assert text.count("h100-sxm-with-long-name") == n_tables(parts) and "…" not in text


def test_a_row_too_wide_for_any_table_is_stacked() -> None:
    cols = [Col("a-very-long-key-header", "left"), Col("value-header-that-is-long")]
    text = _render(40, layout("t", cols, [["key-cell-quite-long", "123456789.123456"]], 40))
    assert "123456789.123456" in text and "…" not in text


def test_print_table_uses_the_console_width() -> None:
    console = Console(width=60, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    print_table(console, None, [Col("x", "left"), Col("y")], [["a", "1"]])
    assert "a" in console.export_text()


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.0, "0 J"),
        (850.0, "850 J"),
        (999.4, "999 J"),
        (999.96, "1.00 kJ"),
        (12_345.0, "12.3 kJ"),
        (4.56e6, "4.56 MJ"),
        (1.2e9, "1.20 GJ"),
        (0.5, "500 mJ"),
        (-1234.0, "-1.23 kJ"),
    ],
)
def test_energy_units(value: float, text: str) -> None:
    assert energy(value) == text


def test_other_units() -> None:
    assert power(700.0) == "700 W" and power(5600.0) == "5.60 kW" and power(1.02e6) == "1.02 MW"
    assert energy_wh(20.9e3 * 3600) == "20.9 kWh" and energy_wh(619 * 3600) == "619 Wh"
    assert duration(0.0125) == "12.5 ms" and duration(3.4) == "3.40 s" and duration(720) == "12.0 min"
    assert duration(5.5 * 3600) == "5.50 h" and duration(3.2 * 86400) == "3.20 d" and duration(8.5e-4) == "850 µs"
    assert duration(math.inf) == "unbounded" and energy(math.nan) == "—"


_SCALE = {"T": 1e12, "G": 1e9, "M": 1e6, "k": 1e3, "": 1.0, "m": 1e-3, "µ": 1e-6}


@given(st.floats(min_value=1e-5, max_value=1e14, allow_nan=False) | st.floats(min_value=-1e14, max_value=-1e-5))
def test_si_reads_back_within_rounding_and_shows_1_to_999(value: float) -> None:
    number, unit = si(value, "J").split(" ")
    prefix = unit[:-1]
    mantissa = float(number)
    assert 1.0 <= abs(mantissa) < 1000.0 or (prefix == "µ" and abs(mantissa) < 1.0)
    assert math.isclose(mantissa * _SCALE[prefix], value, rel_tol=5e-3)
    assert len(number.lstrip("-").replace(".", "").lstrip("0")) <= 3
