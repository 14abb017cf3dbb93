"""`twinloop plan train` CLI: JSON contract, search, power sweep, human output, bad input."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

BASE = ("plan", "train", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--gpus", "16", "--seq-len", "4096",
        "--global-batch", "64")  # fmt: skip


def test_json_contract(cli_json: Callable[..., Any]) -> None:
    d = cli_json(*BASE)
    for key in ("params_total", "params_active", "fits", "step_time_s", "tflops_per_gpu", "mfu", "tokens_per_s",
                "power_per_gpu_w", "energy_per_token_j"):  # fmt: skip
        assert key in d, key
    assert {"weights", "gradients", "optimizer", "activations", "total"} <= set(d["memory_per_gpu_bytes"])
    assert {"tp", "pp", "dp", "ep", "cp", "micro_batch", "zero", "recompute"} <= set(d["config"])
    assert d["fits"] is True and d["chosen_by"] == "search"
    assert [p["name"] for p in d["phases"]["phases"]] == ["compute", "communication", "bubble"]


def test_explicit_config(cli_json: Callable[..., Any]) -> None:
    d = cli_json(*BASE, "--tp", "2", "--pp", "2", "--dp", "4", "--cp", "1", "--zero", "1", "--recompute", "full",
                 "--no-sequence-parallel", "--micro-batch", "2", "--interleave", "1")  # fmt: skip
    assert d["chosen_by"] == "user"
    assert d["config"]["recompute"] == "full" and d["config"]["micro_batch"] == 2


def test_search_and_power_sweep(cli_json: Callable[..., Any]) -> None:
    d = cli_json(*BASE, "--search", "energy", "--top", "4", "--power-sweep")
    rows = d["search"]["results"]
    assert len(rows) == 4 and d["search"]["objective"] == "energy"
    energies = [r["energy_per_token_j"] for r in rows]
    assert energies == sorted(energies)
    assert d["energy_per_token_j"] == rows[0]["energy_per_token_j"]
    knees = [p for p in d["power_sweep"]["points"] if p["knee"]]
    assert len(knees) == 1 and knees[0]["power_limit_w"] == d["power_sweep"]["knee_power_limit_w"]


def test_human_output(cli: Callable[..., Any]) -> None:
    r = cli(*BASE, "--search", "throughput", "--top", "2")
    assert r.exit_code == 0, r.stderr
    for text in ("Memory per GPU", "Step time", "tokens/s", "fitting configurations"):
        assert text in r.stdout


def test_json_is_one_document(cli: Callable[..., Any]) -> None:
    r = cli(*BASE, "--json")
    assert r.exit_code == 0
    json.loads(r.stdout)


def _fails(cli: Callable[..., Any], *args: str) -> str:
    r = cli(*args)
    assert r.exit_code == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert r.stdout == ""
    return lines[0]


def test_unknown_model_lists_close_names(cli: Callable[..., Any]) -> None:
    line = _fails(cli, "plan", "train", "--model", "lama-3-8b", "--gpu", "h100-sxm", "--gpus", "8")
    assert "unknown model 'lama-3-8b'" in line and "llama-3-8b" in line


def test_unknown_gpu_lists_close_names(cli: Callable[..., Any]) -> None:
    line = _fails(cli, "plan", "train", "--model", "llama-3-8b", "--gpu", "h100-sx", "--gpus", "8")
    assert "unknown GPU" in line and "h100-sxm" in line


def test_impossible_parallelism_names_why(cli: Callable[..., Any]) -> None:
    line = _fails(cli, "plan", "train", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--gpus", "16", "--tp", "16")
    assert "tp=16 exceeds gpus_per_node 8" in line
    line = _fails(cli, "plan", "train", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--gpus", "6", "--tp", "3")
    assert "heads 32 not divisible by tp 3" in line


def test_bad_flags(cli: Callable[..., Any]) -> None:
    assert "unknown objective" in _fails(cli, *BASE, "--search", "speed")
    assert "recompute" in _fails(cli, *BASE, "--recompute", "some")
    assert "--power-limit" in _fails(cli, *BASE, "--power-limit", "5000")
