"""`--model ORG/NAME` from the local Hugging Face cache, offline."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from twinloop.errors import InputError
from twinloop.model.arch import load_model
from twinloop.model.hf_cache import find_cached_config, hub_cache_dirs, looks_like_hub_id
from twinloop.model.params import param_counts

HF = Path(__file__).parents[1] / "fixtures" / "hf_configs"
CACHE_VARS = ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME")


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in CACHE_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def put(hub: Path, model_id: str, rev: str, config: str, ref: bool = True) -> Path:
    repo = hub / ("models--" + model_id.replace("/", "--"))
    snap = repo / "snapshots" / rev
    snap.mkdir(parents=True, exist_ok=True)
    (snap / "config.json").write_text((HF / f"{config}.json").read_text())
    if ref:
        (repo / "refs").mkdir(exist_ok=True)
        (repo / "refs" / "main").write_text(rev)
    return snap / "config.json"


def test_hf_hub_cache_and_refs_main_preferred(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    hub = tmp_path / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    put(hub, "google/gemma-2-9b", "old", "gemma-2-2b", ref=False)
    main = put(hub, "google/gemma-2-9b", "abc123", "gemma-2-9b")
    os.utime(main, (1, 1))  # main is older than the other snapshot: refs/main still wins
    assert find_cached_config("google/gemma-2-9b") == main
    arch = load_model("google/gemma-2-9b")
    assert arch.name == "google/gemma-2-9b" and param_counts(arch).total == 9_241_705_984


def test_newest_snapshot_without_refs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    hub = tmp_path / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    old = put(hub, "org/m", "r1", "gemma-2-2b", ref=False)
    new = put(hub, "org/m", "r2", "gemma-2-9b", ref=False)
    os.utime(old, (1, 1))
    assert find_cached_config("org/m") == new


def test_hf_home_and_default_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hfhome"))
    put(tmp_path / "hfhome" / "hub", "a/b", "r", "falcon-7b")
    assert load_model("a/b").model_type == "falcon"
    monkeypatch.delenv("HF_HOME")
    put(tmp_path / "home" / ".cache" / "huggingface" / "hub", "c/d", "r", "olmo-2-1124-7b")
    assert load_model("c/d").model_type == "olmo2"
    assert hub_cache_dirs() == [tmp_path / "home" / ".cache" / "huggingface" / "hub"]


def test_absent_model_says_where_it_looked(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    with pytest.raises(InputError) as exc:
        load_model("google/not-there")
    text = str(exc.value)
    assert "\n" not in text and "--model" in text
    assert str(tmp_path / "hub" / "models--google--not-there") in text and "huggingface-cli download" in text


def test_catalog_and_paths_still_win(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert load_model("llama-3-8b").name == "llama-3-8b"
    with pytest.raises(InputError, match="did you mean"):
        load_model("llama-3-80b")  # not ORG/NAME: the catalog suggestion, not a cache miss


@pytest.mark.parametrize("name", ["../etc/passwd", "a/b/c", "/abs/path", "a/..", "org/", "x"])
def test_not_hub_ids(name: str) -> None:
    assert not looks_like_hub_id(name)


def test_cli_resolves_from_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cli: Callable[..., Any]) -> None:
    hub = tmp_path / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    put(hub, "google/gemma-2-9b", "abc", "gemma-2-9b")
    result = cli("plan", "serve", "--model", "google/gemma-2-9b", "--gpu", "h100-sxm", "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)
    missing = cli("plan", "serve", "--model", "google/none", "--gpu", "h100-sxm")
    assert missing.exit_code == 2 and "models--google--none" in missing.stderr
