import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb

SCENARIO = """
name: run-test
site: dc1
duration_s: 5m
rows: [{racks: 2, nodes_per_rack: 2, cdu: {capacity_w: 60000, flow_kg_per_s: 2.0, pump_power_w: 300}}]
power_chain: {facility_power_budget_w: 1.0e5}
jobs: [{name: train, kind: training, gpus: 16, profile: {load_bytes_per_gpu: 4.0e9}}]
faults: [{kind: psu_loss, target: dc1/r01/k01/n01, start_s: 100, duration_s: 60, magnitude: 5}]
"""


def test_run_compares_loop_off_and_on_and_writes_db_and_report(cli: Callable[..., Any], tmp_path: Path) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(SCENARIO)
    result = cli("run", str(scenario), "--out", str(tmp_path / "out"), "--json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    off, on = doc["loop_off"], doc["loop_on"]
    assert off["actions"] == [] and on["actions"]
    # Audit trail (issue 14): every action says who asked for it, why, and what it expects.
    assert all({"source", "reason", "expected", "incident_id", "judges_action"} <= set(a) for a in on["actions"])
    assert {a["source"] for a in on["actions"]} <= {"incident", "optimizer", "rollback", "restore", "loop"}
    assert set(off["outcome"]) == set(on["outcome"]) >= {"thermal_throttled_gpu_s", "pue", "psu_trips"}
    (psu,) = [d for d in on["detection"] if d["fault"] == "psu_loss"]
    assert psu["recall"] == 1.0
    report = Path(doc["report"]).read_text()
    assert "data-chart=" in report and "twinloopCharts.renderAll" in report and "loop" in report.lower()
    con = duckdb.connect(str(tmp_path / "out" / "telemetry.duckdb"), read_only=True)
    runs = {r[0] for r in con.execute("SELECT DISTINCT run FROM loop_ground_truth").fetchall()}
    assert runs == {"loop-off", "loop-on"}
    assert con.execute("SELECT count(*) FROM samples").fetchone()[0] > 0  # type: ignore[index]
    details = [r[0] for r in con.execute("SELECT detail FROM loop_actions WHERE run = 'loop-on'").fetchall()]
    assert details and all("why" in d or "judges action" in d for d in details)


def test_run_rejects_bad_mode_and_bad_scenario(cli: Callable[..., Any], tmp_path: Path) -> None:
    result = cli("run", "--mode", "yolo", "--out", str(tmp_path))
    assert result.exit_code == 2 and "--mode" in result.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text(SCENARIO.replace("capacity_w: 60000", "capacity_w: -5"))
    result = cli("run", str(bad), "--out", str(tmp_path / "o"))
    assert result.exit_code == 2 and "bad.yaml" in result.stderr and "capacity_w" in result.stderr
