"""Issue 17: the training planner takes a saved routing run (`plan train --routing FILE`) instead of a guess."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

MODEL = ("--model", "mixtral-8x7b", "--gpu", "h100-sxm", "--gpus", "64", "--ep", "8")


@pytest.fixture(scope="module")
def routing_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from typer.testing import CliRunner

    from twinloop.cli.main import app

    out = tmp_path_factory.mktemp("moe")
    args = ["plan", "moe", *MODEL, "--steps", "8", "--tokens", "1024", "--router", "topk", "--router", "adaptive",
            "--placement", "contiguous", "--out", str(out), "--json"]  # fmt: skip
    result = CliRunner().invoke(app, args, catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    return out / "moe_routing.json"


def test_the_plan_uses_the_mean_routed_load_and_a_hotter_router_is_slower(
    routing_file: Path, cli_json: Callable[..., Any]
) -> None:
    doc = json.loads(routing_file.read_text())
    factors = {r["router"]: r["per_step"]["load_factor"] for r in doc["rows"]}
    plans = {r: cli_json("plan", "train", *MODEL, "--routing", str(routing_file), "--router", r) for r in factors}
    for r, lf in factors.items():
        assert plans[r]["moe_routing"]["mean_load_factor"] == pytest.approx(sum(lf) / len(lf))
        assert plans[r]["moe_imbalance"] == pytest.approx(sum(lf) / len(lf))
        assert plans[r]["moe_routing"]["max_load_factor"] == pytest.approx(max(lf))
    # The same configuration with the static factor gives the same plan: the file only sets the factor.
    top = plans["topk"]
    static = cli_json("plan", "train", *MODEL, "--moe-imbalance", str(top["moe_imbalance"]))
    assert static["step_time_s"] == pytest.approx(top["step_time_s"])
    hot, cool = sorted(plans.values(), key=lambda p: -p["moe_imbalance"])
    if hot["config"] == cool["config"]:
        assert hot["step_time_s"] > cool["step_time_s"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--model", "mixtral-8x7b", "--gpu", "h100-sxm", "--gpus", "64"), "give --ep"),
        ((*MODEL[:-1], "16"), "ep"),
        ((*MODEL, "--moe-imbalance", "1.2"), "not both"),
        ((*MODEL, "--router", "bias"), "rows match"),
    ],
)
def test_bad_routing_requests_are_one_line_errors(
    routing_file: Path, cli: Callable[..., Any], extra: tuple[str, ...], message: str
) -> None:
    result = cli("plan", "train", *extra, "--routing", str(routing_file))
    assert result.exit_code == 2 and message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_a_routing_file_of_another_model_is_refused(routing_file: Path, cli: Callable[..., Any]) -> None:
    result = cli("plan", "train", "--model", "deepseek-v3", "--gpu", "h800", "--gpus", "2048", "--ep", "8",
                 "--routing", str(routing_file))  # fmt: skip
    assert result.exit_code == 2 and "model" in result.stderr
