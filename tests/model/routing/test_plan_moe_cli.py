"""`twinloop plan moe`: one JSON document, the HTML plot, and a one-line error on bad input."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from twinloop.cli.main import app


def test_plan_moe_json_and_plot(tmp_path: Path) -> None:
    args = ["plan", "moe", "--model", "mixtral-8x7b", "--gpus", "8", "--ep", "8", "--gpu", "h200-sxm", "--steps", "4",
            "--tokens", "256", "--router", "topk", "--router", "adaptive", "--placement", "contiguous",
            "--out", str(tmp_path), "--json"]  # fmt: skip
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert [r["router"] for r in doc["rows"]] == ["topk", "adaptive"]
    assert len(doc["rows"][0]["per_step"]["step_s"]) == 4
    html = (tmp_path / "moe_routing.html").read_text()
    assert "echarts" in html.lower() and "Step time" in html


def test_plan_moe_bad_router_is_one_line_exit_2() -> None:
    args = ["plan", "moe", "--model", "mixtral-8x7b", "--gpus", "8", "--ep", "8", "--router", "nope", "--steps", "1"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2
    assert "unknown router 'nope'" in res.output


def test_plan_moe_dense_model_is_rejected() -> None:
    res = CliRunner().invoke(app, ["plan", "moe", "--model", "llama-3-8b", "--gpus", "8", "--ep", "1", "--steps", "1"])
    assert res.exit_code == 2 and "no MoE layers" in res.output
