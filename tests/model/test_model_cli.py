"""`twinloop models`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twinloop.model.arch import catalog_model_names


def test_models_json(cli_json: Callable[..., Any]) -> None:
    doc = cli_json("models")
    rows = {r["name"]: r for r in doc["models"]}
    assert set(rows) == set(catalog_model_names())
    assert rows["llama-3-70b"]["kv_cache_bytes_per_token"] == 327_680
    assert rows["deepseek-v3"]["kv_cache_bytes_per_token"] == 61 * 576 * 2
    assert rows["deepseek-v3"]["params_mtp"] > 0 and rows["llama-3-8b"]["params_mtp"] == 0
    mix = rows["mixtral-8x7b"]
    assert mix["model_type"] == "mixtral" and mix["params_active"] < mix["params_total"]


def test_models_table(cli: Callable[..., Any]) -> None:
    result = cli("models")
    assert result.exit_code == 0
    assert "Model catalog" in result.stdout and "llama-3-8b" in result.stdout


def test_models_rejects_unknown_flag(cli: Callable[..., Any]) -> None:
    result = cli("models", "--bogus")
    assert result.exit_code == 2
