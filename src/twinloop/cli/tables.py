r"""Terminal tables that never cut a value, and numbers with units chosen by magnitude.

rich shrinks a table that is wider than the terminal by cutting cells (``h100-s…``, ``671…``). A name the
user must type back or a number they act on must never be cut, so :func:`print_table` lays a table out in
the first of these that fits the console width:

1. one table, free-text columns (``Col(wrap=True)``) wrapped at spaces;
2. several tables, each repeating the key columns (the first ``keys``) with as many others as fit;
3. one small two-column block per row (``header  value``), the key cells as its title.

Headers may be written on two lines (``"HBM\nTB/s"``) to keep numeric columns narrow. Commands owned by
other branches may use these helpers too; they import only rich.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

Cell = str | Text

_BORDER = 3  # per column: one padding space each side and one vertical rule; plus one rule at the table's edge


@dataclass(frozen=True)
class Col:
    r"""A table column.

    Args:
        header: header text; ``\n`` splits it over two lines.
        justify: ``right`` for numbers, ``left`` for names and text.
        wrap: free text that may wrap at spaces (never inside a word); other columns are never wrapped.
    """

    header: str
    justify: Literal["left", "right"] = "right"
    wrap: bool = False


def _text(cell: Cell) -> Text:
    # emoji=False: rich would turn ":ab:" in a PCI address (0000:ab:00.0) into an emoji
    return cell if isinstance(cell, Text) else Text.from_markup(cell, emoji=False)


def _natural(col: Col, cells: Sequence[Text]) -> int:
    lines = [*col.header.split("\n"), *(line for c in cells for line in c.plain.split("\n"))]
    return max((Text(line).cell_len for line in lines), default=1)


def _minimum(col: Col, cells: Sequence[Text]) -> int:
    if not col.wrap:
        return _natural(col, cells)
    words = [w for c in [Text(col.header), *cells] for w in c.plain.split()]
    return max((Text(w).cell_len for w in words), default=1)


def _need(widths: Sequence[int]) -> int:
    return sum(widths) + _BORDER * len(widths) + 1


def _fit(nat: Sequence[int], mins: Sequence[int], width: int) -> list[int] | None:
    """Column widths that fit ``width``, shrinking only wrappable columns (``mins < nat``); None if none do."""
    widths = list(nat)
    excess = _need(widths) - width
    if excess <= 0:
        return widths
    if _need(mins) > width:
        return None
    for i in sorted(range(len(widths)), key=lambda j: widths[j] - mins[j], reverse=True):
        cut = min(excess, widths[i] - mins[i])
        widths[i] -= cut
        excess -= cut
        if excess <= 0:
            break
    return widths


def _titled(title: str | None, table: Table) -> list[RenderableType]:
    # The title is its own line, not the table's: rich wraps a table title to the table's width and would
    # break a long word (a model or entity name) in a narrow table.
    return [Text(title, style="bold"), table] if title else [table]


def _table(cols: Sequence[Col], rows: Sequence[Sequence[Text]], widths: Sequence[int], header: bool) -> Table:
    table = Table(show_header=header)
    for col, w in zip(cols, widths, strict=True):
        table.add_column(col.header, justify=col.justify, width=w, no_wrap=not col.wrap, overflow="fold")
    for row in rows:
        table.add_row(*row)
    return table


def layout(
    title: str | None,
    cols: Sequence[Col],
    rows: Sequence[Sequence[Cell]],
    width: int,
    keys: int = 1,
    header: bool = True,
) -> list[RenderableType]:
    """The titles and tables that show ``rows`` within ``width`` columns without cutting a cell (see the module doc)."""
    cells = [[_text(c) for c in row] for row in rows]
    by_col = [[row[i] for row in cells] for i in range(len(cols))]
    nat = [_natural(c, v) for c, v in zip(cols, by_col, strict=True)]
    mins = [_minimum(c, v) for c, v in zip(cols, by_col, strict=True)]

    def sub(idx: list[int]) -> list[int] | None:
        return _fit([nat[i] for i in idx], [mins[i] for i in idx], width)

    def make(t: str | None, idx: list[int], widths: list[int]) -> list[RenderableType]:
        return _titled(t, _table([cols[i] for i in idx], [[row[i] for i in idx] for row in cells], widths, header))

    everything = list(range(len(cols)))
    widths = sub(everything)
    if widths is not None:
        return make(title, everything, widths)
    key_idx = everything[:keys]
    chunks: list[list[int]] = []
    current: list[int] = []
    for i in everything[keys:]:
        if sub([*key_idx, *current, i]) is not None:
            current.append(i)
            continue
        if not current or sub([*key_idx, i]) is None:
            return _stacked(title, cols, cells, width, keys)
        chunks.append(current)
        current = [i]
    chunks.append(current)
    out: list[RenderableType] = []
    for n, chunk in enumerate(chunks):
        idx = key_idx + chunk
        part = title if n == 0 else (f"{title} (continued)" if title else None)
        out += make(part, idx, sub(idx) or [])
    return out


def _stacked(
    title: str | None, cols: Sequence[Col], cells: Sequence[Sequence[Text]], width: int, keys: int
) -> list[RenderableType]:
    """One block per row: the last resort when even one value column does not fit beside the keys.

    A block is ``header | value`` when that fits, else a single column with each header above its value.
    """
    heads = [c.header.replace("\n", " ") for c in cols]
    head_w = max((Text(h).cell_len for h in heads[keys:]), default=1)
    out: list[RenderableType] = []
    for n, row in enumerate(cells):
        name = " ".join(c.plain for c in row[:keys])
        block_title = f"{title}: {name}" if title and n == 0 else name
        value_w = max((_minimum(cols[i], [row[i]]) for i in range(keys, len(cols))), default=1)
        if _need([head_w, value_w]) <= width:
            block = Table(show_header=False)
            block.add_column(no_wrap=True, width=head_w)
            block.add_column(overflow="fold", max_width=width - head_w - 2 * _BORDER - 1)
            for h, c in zip(heads[keys:], row[keys:], strict=True):
                block.add_row(h, c)
        else:
            block = Table(show_header=False, show_lines=True)
            block.add_column(overflow="fold", max_width=width - _BORDER - 1)
            for h, c in zip(heads[keys:], row[keys:], strict=True):
                block.add_row(Text.assemble((h, "bold"), "\n", c))
        out += _titled(block_title, block)
    return out


def print_table(
    console: Console,
    title: str | None,
    cols: Sequence[Col],
    rows: Sequence[Sequence[Cell]],
    keys: int = 1,
    header: bool = True,
) -> None:
    """Print ``rows`` on ``console`` within its width without cutting any cell (see the module doc).

    Args:
        console: where to print (its ``width`` decides the layout).
        title: the table's title (wraps at spaces when long).
        cols: the columns; the first ``keys`` identify a row and repeat when the table is split.
        rows: one sequence of cells per row (strings are rich markup; escape user text).
        keys: how many leading columns identify a row.
        header: show the header row.
    """
    for table in layout(title, cols, rows, console.width, keys, header):
        console.print(table)


def print_pairs(
    console: Console, title: str | None, pairs: Sequence[tuple[str, Cell]], header: tuple[str, str] | None = None
) -> None:
    """A two-column ``name | value`` table (no header unless given); values wrap at spaces when narrow."""
    what, value = header or ("", "")
    cols = [Col(what, "left"), Col(value, "left", wrap=True)]
    print_table(console, title, cols, [list(p) for p in pairs], header=header is not None)


# --- numbers with units chosen by magnitude -------------------------------------------------------------

_PREFIXES = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""), (1e-3, "m"), (1e-6, "µ"))


def _digits(value: float, significant: int) -> str:
    if value == 0:
        return "0"
    decimals = max(0, significant - 1 - math.floor(math.log10(abs(value))))
    text = f"{value:.{decimals}f}"
    if decimals and len(text.lstrip("-").replace(".", "").lstrip("0")) > significant:
        text = f"{value:.{decimals - 1}f}"  # 0.99996 rounds to 1.000: one digit fewer
    return text


def si(value: float, unit: str, significant: int = 3) -> str:
    """``value`` in ``unit`` with an SI prefix chosen so the number reads 1–999 (``1.23 MJ``, ``456 kW``)."""
    if not math.isfinite(value):
        return "—"
    if value == 0:
        return f"0 {unit}"
    for scale, prefix in _PREFIXES:
        if abs(value) >= scale * 0.9995 or scale == _PREFIXES[-1][0]:
            text = _digits(value / scale, significant)
            if abs(float(text)) >= 1000 and scale < _PREFIXES[0][0]:
                continue  # 999.96 k rounds to 1000 k: show it as 1.00 M instead
            return f"{text} {prefix}{unit}"
    return f"{value:g} {unit}"  # pragma: no cover - the loop always returns


def energy(joules: float) -> str:
    """Energy with a unit by magnitude: ``850 J``, ``12.3 kJ``, ``4.56 MJ``, ``1.20 GJ``."""
    return si(joules, "J")


def energy_wh(joules: float) -> str:
    """Energy in watt-hours by magnitude, as facilities meter it: ``850 Wh``, ``20.9 kWh``, ``1.23 MWh``."""
    return si(joules / 3600.0, "Wh")


def power(watts: float) -> str:
    """Power with a unit by magnitude: ``700 W``, ``5.60 kW``, ``1.02 MW``."""
    return si(watts, "W")


def duration(seconds: float) -> str:
    """A duration with a unit by magnitude: ``850 µs``, ``12.5 ms``, ``3.40 s``, ``12.0 min``, ``5.50 h``, ``3.2 d``."""
    if not math.isfinite(seconds):
        return "unbounded" if seconds > 0 else "—"
    s = abs(seconds)
    if s < 60:
        return si(seconds, "s")
    for scale, unit in ((86400.0, "d"), (3600.0, "h"), (60.0, "min")):
        if s >= scale:
            return f"{_digits(seconds / scale, 3)} {unit}"
    return si(seconds, "s")  # pragma: no cover
