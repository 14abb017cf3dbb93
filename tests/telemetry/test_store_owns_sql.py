"""The store owns its schema: no SQL outside ``twinloop.telemetry.store`` (issue 18).

The source is read with ``ast``: every string constant (and every f-string, its literal parts joined) that
holds an SQL statement keyword (``SELECT``, ``INSERT INTO``, ``CREATE TABLE``, ``DELETE FROM``, ``UPDATE … SET``,
``COPY (``, ``DROP TABLE``) or reads the schema (``information_schema``) counts; docstrings are prose and are
not looked at. Front ends (web, report, cli) and the rest of the library call the store's named queries
(:mod:`twinloop.telemetry.store.queries`) instead, so another backend can implement the same interface.
``ALLOWED`` lists what must stay for now, with at most how many literals, so the list can only shrink.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

import twinloop

from .source_scan import docstring_ids

PACKAGE = Path(twinloop.__file__).resolve().parent
#: Where SQL belongs: the store and its backends.
STORE = "telemetry/store/"
SQL = re.compile(
    r"\bSELECT\b|\bINSERT\s+INTO\b|\bCREATE\s+(?:TABLE|VIEW|INDEX)\b|\bDELETE\s+FROM\b|\bUPDATE\s+\w+\s+SET\b"
    r"|\bCOPY\s*\(|\bDROP\s+TABLE\b|information_schema"
)
#: Files (relative to ``src/twinloop``) that may still hold SQL, and at most how many literals.
ALLOWED: dict[str, int] = {}


def sql_literals(source: str) -> list[str]:
    """String constants and f-strings of ``source`` (docstrings aside) that hold SQL."""
    tree = ast.parse(source)
    skip = docstring_ids(tree)
    texts = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            skip.update(id(v) for v in node.values)
            texts.append("".join(str(v.value) if isinstance(v, ast.Constant) else "{}" for v in node.values))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            texts.append(node.value)
    return [t for t in texts if SQL.search(t)]


def test_the_scan_finds_sql_and_skips_prose() -> None:
    source = (
        '"""Module doc: SELECT count(*) FROM samples."""\n'
        'a = "SELECT count(*) FROM samples"\n'
        'b = f"SELECT {x} FROM t WHERE y IN ({ids})"\n'
        'c = f"DELETE FROM {table} WHERE run = ?"\n'
        'd = "select the rows you want"\n'
        'def f():\n    """INSERT INTO x is prose here."""\n    return "CREATE TABLE IF NOT EXISTS t(a INT)"\n'
    )
    found = sql_literals(source)
    assert len(found) == 4 and found[0] == "SELECT count(*) FROM samples"
    assert "DELETE FROM {} WHERE run = ?" in found and "CREATE TABLE IF NOT EXISTS t(a INT)" in found


def test_no_sql_outside_the_store() -> None:
    counts: Counter[str] = Counter()
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith(STORE):
            continue
        n = len(sql_literals(path.read_text(encoding="utf-8")))
        if n:
            counts[rel] = n
    over = {rel: n for rel, n in counts.items() if n > ALLOWED.get(rel, 0)}
    assert not over, f"SQL outside telemetry/store/ (add a named query to telemetry/store/queries.py): {over}"
