"""The catalogs' YAML is parsed once per content; the JSON copy is never stale and never required."""

from __future__ import annotations

from pathlib import Path

import pytest

from twinloop.errors import InputError
from twinloop.hardware import yaml_cache
from twinloop.hardware.gpu import load_gpu_catalog


def test_second_load_comes_from_the_cache_and_edits_are_seen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TWINLOOP_CACHE_DIR", str(tmp_path / "cache"))
    src = tmp_path / "gpus.yaml"
    src.write_text("a: {x: 1.5e3, y: [1, 2]}\n")
    assert yaml_cache.load_yaml(src) == {"a": {"x": "1.5e3", "y": [1, 2]}}  # YAML 1.1: no dot, a string
    assert len(list((tmp_path / "cache").glob("gpus-*.json"))) == 1

    def no_parse(*_: object) -> None:
        raise AssertionError("parsed again")

    monkeypatch.setattr(yaml_cache, "_parse", no_parse)
    assert yaml_cache.load_yaml(src) == {"a": {"x": "1.5e3", "y": [1, 2]}}
    src.write_text("a: {x: 2.0}\n")
    with pytest.raises(AssertionError, match="parsed again"):
        yaml_cache.load_yaml(src)


def test_no_writable_cache_and_non_json_data_still_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("TWINLOOP_CACHE_DIR", str(blocker / "sub"))  # a directory under a file: cannot exist
    src = tmp_path / "c.yaml"
    src.write_text("1: 2001-01-01\n")
    import datetime

    assert yaml_cache.load_yaml(src) == {1: datetime.date(2001, 1, 1)}
    monkeypatch.setenv("TWINLOOP_CACHE_DIR", str(tmp_path / "c2"))
    assert yaml_cache.load_yaml(src) == {1: datetime.date(2001, 1, 1)}
    assert not list((tmp_path / "c2").glob("*"))  # int keys and dates do not survive JSON: not cached


def test_packaged_catalog_is_the_same_from_yaml_and_from_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TWINLOOP_CACHE_DIR", str(tmp_path))
    fresh = load_gpu_catalog()
    assert load_gpu_catalog() == fresh and list(tmp_path.glob("gpus-*.json"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("gpus: [unclosed")
    with pytest.raises(InputError, match="malformed YAML"):
        load_gpu_catalog(bad)
