"""`twinloop plan serve`: JSON contract, human output, bad input → exit code 2."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

CONTRACT = (
    "params_total",
    "kv_cache_bytes_per_token",
    "max_concurrent_sequences",
    "ttft_s",
    "tpot_s",
    "throughput_tokens_per_s",
    "power_per_gpu_w",
    "energy_per_token_j",
    "cost_per_million_tokens_usd",
)
PHASE_KEYS = ("tensor_active", "sm_active", "dram_active", "clock_mhz", "power_w", "time_fraction", "bound")


def test_json_contract(cli_json: Callable[..., Any]) -> None:
    out = cli_json("plan", "serve", "--model", "llama-3-70b", "--gpu", "h100-sxm", "--gpus", "8", "--tp", "8")
    for key in CONTRACT:
        assert isinstance(out[key], int | float), key
    assert out["params_total"] == 70_553_706_496
    assert out["kv_cache_bytes_per_token"] == 327_680
    for phase in ("prefill", "decode"):
        assert set(PHASE_KEYS) <= set(out[phase])
    assert out["warmup"]["warmup_s_with_gds"] <= out["warmup"]["warmup_s_without_gds"]


def test_json_with_trace_rate_and_options(cli_json: Callable[..., Any], tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    rows = "".join(f"2023-11-16 18:15:{s:02d}.0,{200 + 10 * s},{20 + s}\n" for s in range(30))
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + rows)
    out = cli_json(
        "plan", "serve", "--model", "llama-3-8b", "--gpus", "2", "--tp", "1", "--trace", str(trace),
        "--rate", "3", "--batching", "chunked", "--kv-offload", "dram", "--kv-offload-gb", "100",
        "--draft-model", "llama-3-8b", "--spec-tokens", "2", "--acceptance", "0.5", "--gds",
    )  # fmt: skip
    assert out["rate_req_per_s"] == pytest.approx(3.0)
    assert out["throughput_req_per_s"] == pytest.approx(3.0)
    assert out["workload"]["n_requests"] == 30
    assert out["kv_offload"]["tier"] == "dram"
    assert out["speculative"]["spec_tokens"] == 2
    assert out["warmup_s"] == out["warmup"]["warmup_s_with_gds"]


def test_saturated_rate_gives_null_ttft(cli_json: Callable[..., Any]) -> None:
    out = cli_json("plan", "serve", "--model", "llama-3-8b", "--gpus", "1", "--tp", "1", "--rate", "100000")
    assert out["saturated"] is True and out["ttft_s"] is None
    assert out["warnings"]


def test_human_output(cli: Callable[..., Any]) -> None:
    result = cli("plan", "serve", "--model", "llama-3-8b", "--gpus", "1", "--tp", "1")
    assert result.exit_code == 0
    assert "TTFT" in result.stdout and "prefill" in result.stdout and "decode" in result.stdout


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("--model", "llama-3-70b", "--gpus", "1", "--tp", "1"), "weights need"),
        (("--model", "llama-9000"), "unknown model"),
        (("--model", "llama-3-70b", "--gpu", "h1000"), "unknown GPU"),
        (("--model", "llama-3-70b", "--tp", "6", "--gpus", "6"), "attention heads"),
        (("--model", "llama-3-70b", "--rate", "-1"), "--rate"),
        (("--model", "llama-3-70b", "--batching", "psychic"), "unknown strategy"),
        (("--model", "llama-3-70b", "--trace", "/nonexistent/trace.csv"), "file not found"),
    ],
)
def test_bad_input_exit_2(cli: Callable[..., Any], args: tuple[str, ...], fragment: str) -> None:
    result = cli("plan", "serve", *args, "--json")
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and fragment in lines[0], result.stderr


def test_bad_trace_line_exit_2(cli: Callable[..., Any], tmp_path: Path) -> None:
    trace = tmp_path / "bad.csv"
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:00.0,12,3\n2023-11-16 18:15:01.0,x,3\n")
    result = cli("plan", "serve", "--model", "llama-3-8b", "--trace", str(trace), "--json")
    assert result.exit_code == 2
    assert str(trace) in result.stderr and "line 3" in result.stderr
    json.dumps(result.stderr)  # one plain line, nothing structured on stdout
