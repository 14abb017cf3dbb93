"""Users' own YAML (scenarios, policies, sites, sweeps), round 3: errors that say where, and keys given twice."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from twinloop.errors import InputError
from twinloop.safeio import parse_yaml

SCENARIO = Path(__file__).parents[2] / "src" / "twinloop" / "scenarios" / "hot-afternoon.yaml"


def test_a_tab_is_named_with_its_line(tmp_path: Path, cli: Callable[..., Any]) -> None:
    text = SCENARIO.read_text().replace("\n  - count: 2", "\n\t- count: 2")
    path = tmp_path / "tab.yaml"
    path.write_text(text)
    res = cli("sim", str(path), "--duration", "60s")
    line = text.splitlines().index("\t- count: 2") + 1
    # Before: "tab.yaml: malformed YAML: while scanning for the next token" (no line, no cause).
    assert res.exit_code == 2 and res.stderr.strip() == (
        f"error: {path}: line {line}, column 1: malformed YAML: found character that cannot start any token "
        "(a tab: YAML indents with spaces only)"
    )


def test_a_key_given_twice_is_refused(tmp_path: Path, cli: Callable[..., Any]) -> None:
    text = SCENARIO.read_text() + "jobs: []\n"  # a second `jobs:` used to replace the first, silently
    path = tmp_path / "twice.yaml"
    path.write_text(text)
    res = cli("sim", str(path), "--duration", "60s")
    assert res.exit_code == 2
    assert res.stderr.strip() == f"error: {path}: line {len(text.splitlines())}: key 'jobs' appears twice in " \
        "one mapping (allowed: once)"  # fmt: skip


def test_merge_keys_and_the_same_key_in_two_mappings_are_fine() -> None:
    doc = parse_yaml("base: &b {x: 1}\na: {<<: *b, y: 2}\nb: {x: 3, y: 4}\n", "t")
    assert doc == {"base": {"x": 1}, "a": {"x": 1, "y": 2}, "b": {"x": 3, "y": 4}}


_KEYS = st.text(st.characters(min_codepoint=97, max_codepoint=122), min_size=1, max_size=6)


@settings(max_examples=100, deadline=None)
@given(
    doc=st.dictionaries(_KEYS, st.one_of(st.integers(), st.dictionaries(_KEYS, st.integers(), max_size=4)), max_size=8),
    twice=st.booleans(),
)
def test_unique_keys_load_as_pyyaml_does_and_a_repeat_is_an_error(doc: dict[str, Any], twice: bool) -> None:
    text = yaml.safe_dump(doc, default_flow_style=False)
    if not (twice and doc):
        assert parse_yaml(text, "t") == yaml.safe_load(text)
        return
    key = next(iter(doc))
    with pytest.raises(InputError, match=rf"line {len(text.splitlines()) + 1}: key '{key}' appears twice"):
        parse_yaml(text + f"{key}: 0\n", "t")
