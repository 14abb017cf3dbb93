"""Hypothesis strategies for hostile files: a valid template with a few leaves replaced by hostile values
(NaN, ±inf, negative, huge, wrong type), or raw bytes (non-UTF-8, garbage)."""

from __future__ import annotations

import contextlib
import copy
import json
from typing import Any

import yaml
from hypothesis import strategies as st

HOSTILE: list[Any] = [
    float("nan"), float("inf"), float("-inf"), -5, -1, 0, 10**30, -(10**12), 1e300, -1e300,
    "abc", "", "nan", [], {}, None, True, False, "x" * 500, [1, 2, 3], {"a": 1},
]  # fmt: skip
HOSTILE_CELLS = ["nan", "inf", "-inf", "1e300", "-1e300", "abc", "", "-5", "1e23", "0", "\xff", '"', "1,2"]


def leaf_paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a leaf, and to every container (so whole subtrees get replaced too)."""
    out: list[tuple[Any, ...]] = [prefix] if prefix else []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += leaf_paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += leaf_paths(v, (*prefix, i))
    return out


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> None:
    for key in path[:-1]:
        doc = doc[key]
    doc[path[-1]] = value


@st.composite
def mutated(draw: st.DrawFn, template: dict[str, Any]) -> dict[str, Any]:
    doc = copy.deepcopy(template)
    paths = leaf_paths(template)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(paths))
        value = draw(st.sampled_from(HOSTILE))
        with contextlib.suppress(KeyError, IndexError, TypeError):  # an earlier mutation replaced a parent
            _set(doc, path, value)
    return doc


def yaml_files(template: dict[str, Any]) -> st.SearchStrategy[bytes]:
    dumped = mutated(template).map(lambda d: yaml.safe_dump(d, allow_unicode=True).encode())
    return st.one_of(dumped, dumped, st.binary(max_size=200))


def json_files(template: dict[str, Any]) -> st.SearchStrategy[bytes]:
    dumped = mutated(template).map(lambda d: json.dumps(d).encode())
    return st.one_of(dumped, dumped, st.binary(max_size=200))


@st.composite
def csv_rows(draw: st.DrawFn, header: str, good_rows: list[str]) -> bytes:
    """The header and a few good rows, some cells replaced by hostile ones; sometimes garbage bytes."""
    width = header.count(",") + 1
    lines = [header]
    for row in good_rows:
        cells = row.split(",")
        for _ in range(draw(st.integers(0, 2))):
            cells[draw(st.integers(0, width - 1))] = draw(st.sampled_from(HOSTILE_CELLS))
        lines.append(",".join(cells))
    text = "\n".join(lines) + "\n"
    if draw(st.integers(0, 9)) == 0:
        return draw(st.binary(max_size=200))
    return text.encode("utf-8", errors="surrogateescape")
