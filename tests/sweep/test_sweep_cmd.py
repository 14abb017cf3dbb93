"""`twinloop sweep`: one JSON document, rows on disk, an HTML report with inlined charts; bad specs exit 2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml


def test_sweep_json_rows_and_report(cli: Any, tmp_path: Path, ray_local: None) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump({"name": "cli", "scenarios": ["default"], "seeds": [0, 1], "loops": ["off"]}))
    out = tmp_path / "out"
    r = cli("sweep", str(spec), "--duration", "30s", "--workers", "2", "--out", str(out), "--json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["runs"] == 2 and doc["failed"] == [] and doc["workers"] == 2
    pue = [s for s in doc["summary"] if s["metric"] == "pue"]
    assert len(pue) == 1 and pue[0]["n"] == 2 and pue[0]["ci95_low"] <= pue[0]["mean"] <= pue[0]["ci95_high"]
    assert (out / "runs.parquet").exists() and (out / "sweep.duckdb").exists()
    html = (out / "report.html").read_text()
    assert 'data-chart="' in html and "echarts" in html.lower() and "<svg" not in html
    assert "http://" not in html.split("<script")[0]


@pytest.mark.parametrize(
    ("doc", "needle"),
    [({"scenarios": ["default"], "seeds": [0, 0]}, "seeds"), ({"scenarios": ["nope"]}, "scenarios.0.file")],
)
def test_bad_spec_is_one_line_exit_2(cli: Any, tmp_path: Path, doc: dict, needle: str) -> None:
    spec = tmp_path / "bad.yaml"
    spec.write_text(yaml.safe_dump(doc))
    r = cli("sweep", str(spec), "--out", str(tmp_path / "o"))
    assert r.exit_code == 2
    assert r.stderr.count("\n") == 1 and str(spec) in r.stderr and needle in r.stderr


def test_bad_seeds_flag(cli: Any, tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump({"scenarios": ["default"]}))
    r = cli("sweep", str(spec), "--seeds", "a,b")
    assert r.exit_code == 2 and "--seeds" in r.stderr


def test_failed_runs_are_reported_and_exit_1(cli: Any, tmp_path: Path, ray_local: None, monkeypatch: Any) -> None:
    from twinloop.sweep import runner
    from twinloop.sweep.cell import row

    def kernel(cell: Any, sweep: str, attempt: int) -> dict[str, Any]:
        if cell.seed == 1:
            raise ValueError("no such luck")
        return row(cell, sweep, "ok", attempt, None, 0.1, "w", {"pue": 1.2}, {})

    real = runner.run_cells
    monkeypatch.setattr(runner, "run_cells", lambda *a, **k: real(*a, **k, kernel=kernel))
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump({"scenarios": ["default"], "seeds": [0, 1], "loops": ["off"]}))
    r = cli("sweep", str(spec), "--out", str(tmp_path / "o"), "--json")
    assert r.exit_code == 1
    doc = json.loads(r.stdout)
    assert doc["runs"] == 2 and [(f["seed"], f["attempts"]) for f in doc["failed"]] == [(1, 2)]
    assert "ValueError: no such luck" in doc["failed"][0]["error"]
    assert "no such luck" in (tmp_path / "o" / "report.html").read_text()


def test_address_runs_on_an_existing_cluster(tmp_path: Path, ray_local: None) -> None:
    """A second process joins the fixture's running Ray by its address (as it would a remote cluster's head)."""
    import os
    import subprocess
    import sys

    import ray

    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump({"plans": [{"model": "llama-3-8b", "gpu": "h100-sxm", "gpus": 64}], "seeds": [0]}))
    address = ray.get_runtime_context().gcs_address
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    out = subprocess.run(
        [sys.executable, "-m", "twinloop.cli.main", "sweep", str(spec), "--address", address, "--out",
         str(tmp_path / "o"), "--json"],
        capture_output=True, text=True, env=env, timeout=240, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["runs"] == 1 and doc["failed"] == [] and doc["cluster_cpus"] == 2.0
    tps = [s for s in doc["summary"] if s["metric"] == "tokens_per_s"]
    assert len(tps) == 1 and tps[0]["mean"] > 0
