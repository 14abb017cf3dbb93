"""The bounded loader: alias bombs, deep nesting, non-UTF-8 and non-regular files end in one InputError, fast;
every plain document within the bounds loads exactly as PyYAML's safe loader reads it."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from twinloop.errors import InputError
from twinloop.safeio import MAX_DEPTH, load_json, load_yaml, parse_yaml

BOMB = "\n".join(
    [
        'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
        *(f"{c}: &{c} [{','.join(['*' + p] * 9)}]" for p, c in zip("abcdefgh", "bcdefghi", strict=True)),
        "rows: *i",
    ]
)


def test_alias_bomb_is_refused_in_milliseconds() -> None:
    assert len(BOMB) < 400
    start = time.perf_counter()
    with pytest.raises(InputError, match="expands to more than"):
        parse_yaml(BOMB, "bomb.yaml")
    assert time.perf_counter() - start < 1.0


def test_shared_aliases_within_the_bound_still_load() -> None:
    assert parse_yaml("a: &x [1, 2]\nb: *x\n", "ok.yaml") == {"a": [1, 2], "b": [1, 2]}


def test_deep_nesting_is_refused() -> None:
    text = "a: " + "[" * 5000 + "]" * 5000
    with pytest.raises(InputError, match="nested"):
        parse_yaml(text, "deep.yaml")
    ok = "a: " + "[" * (MAX_DEPTH - 2) + "]" * (MAX_DEPTH - 2)
    assert parse_yaml(ok, "ok.yaml") is not None


def test_non_utf8_directory_and_device(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"name: \xff\xfe\n")
    with pytest.raises(InputError, match="byte 6: not valid UTF-8"):
        load_yaml(bad)
    with pytest.raises(InputError, match="is a directory"):
        load_yaml(tmp_path)
    if Path("/dev/zero").exists():
        with pytest.raises(InputError, match="not a regular file"):
            load_yaml("/dev/zero")
    with pytest.raises(InputError, match="file not found"):
        load_yaml(tmp_path / "missing.yaml")


def test_size_bound(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_text("a: " + "x" * 2000)
    with pytest.raises(InputError, match="allowed: <= 1000 bytes"):
        load_yaml(big, max_bytes=1000)


def test_json_bounds(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(InputError):
        load_json(deep)
    huge = tmp_path / "huge.json"
    huge.write_text('{"n": ' + "9" * 5000 + "}")
    with pytest.raises(InputError, match="bad JSON value"):
        load_json(huge)


plain = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda kids: st.lists(kids, max_size=5) | st.dictionaries(st.text(max_size=8), kids, max_size=5),
    max_leaves=30,
)


@settings(max_examples=150, deadline=None)
@given(plain)
def test_plain_documents_load_as_pyyaml_reads_them(doc: object) -> None:
    text = yaml.safe_dump(doc)
    assert parse_yaml(text, "doc.yaml") == yaml.safe_load(text)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_any_bytes_give_data_or_one_input_error(tmp_path_factory: pytest.TempPathFactory, data: bytes) -> None:
    path = tmp_path_factory.mktemp("y") / "f.yaml"
    path.write_bytes(data)
    try:
        load_yaml(path)
    except InputError as exc:
        assert "\n" not in str(exc)
