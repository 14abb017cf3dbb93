"""One spelling of every telemetry field: the constants of ``twinloop.telemetry.fields``, nowhere a string.

The source is read with ``ast`` (docstrings, comments and help texts that *mention* a field are prose, not
spellings, and are not looked at): any other string constant that is a field name, or looks like one
(``DCGM_FI_*``, ``TWINLOOP_FI_*``), fails the test. ``ALLOWED`` would list a file that may still hold some, with
how many; it is empty.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

from twinloop.telemetry import fields
from twinloop.telemetry.fields import ALIASES, FIELD_BY_NAME, FIELDS

from .source_scan import docstring_ids

PACKAGE = Path(fields.__file__).resolve().parents[1]
LOOKS_LIKE_A_FIELD = re.compile(r"(?:DCGM|TWINLOOP)_FI_[A-Z0-9_]+")
#: dcgm-exporter *label* names in the DCGM style, not fields.
NOT_FIELDS = frozenset({"DCGM_FI_DRIVER_VERSION"})
#: Files (relative to ``src/twinloop``) that may still spell field names as strings, and at most how many (none).
ALLOWED: dict[str, int] = {}


def field_literals(source: str) -> list[str]:
    """String constants of ``source`` (docstrings aside) that are, or look like, a field name."""
    tree = ast.parse(source)
    docs = docstring_ids(tree)
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)) or id(node) in docs:
            continue
        if LOOKS_LIKE_A_FIELD.fullmatch(node.value) and node.value not in NOT_FIELDS:
            found.append(node.value)
    return found


def test_the_scan_finds_literals_and_skips_prose() -> None:
    source = (
        '"""Module doc naming DCGM_FI_DEV_POWER_USAGE."""\n'
        "from twinloop.telemetry.fields import DCGM_FI_DEV_GPU_TEMP\n"
        'x = {"DCGM_FI_DEV_POWER_USAGE": 1, DCGM_FI_DEV_GPU_TEMP: 2}\n'
        'def f(name="TWINLOOP_FI_PUE"):\n    """Reads DCGM_FI_DEV_SM_CLOCK."""\n    return "DCGM_FI_DEV_POWR_USAGE"\n'
        'help_text = "Field name, e.g. DCGM_FI_DEV_POWER_USAGE."\n'
        'label = "DCGM_FI_DRIVER_VERSION"\n'
    )
    assert field_literals(source) == ["DCGM_FI_DEV_POWER_USAGE", "TWINLOOP_FI_PUE", "DCGM_FI_DEV_POWR_USAGE"]


def test_no_field_name_literal_outside_the_field_table() -> None:
    counts: Counter[str] = Counter()
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel == "telemetry/fields.py":
            continue
        counts[rel] = len(field_literals(path.read_text(encoding="utf-8")))
    over = {rel: n for rel, n in counts.items() if n > ALLOWED.get(rel, 0)}
    assert not over, (
        f"field names spelled as strings (import the constants of twinloop.telemetry.fields instead): {over}"
    )


def test_every_field_has_its_constant() -> None:
    constants = {name: value for name, value in vars(fields).items() if LOOKS_LIKE_A_FIELD.fullmatch(name)}
    assert all(name == value for name, value in constants.items())
    assert set(constants) == set(FIELD_BY_NAME) | set(ALIASES)
    assert [f.name for f in FIELDS] == [getattr(fields, f.name) for f in FIELDS]
