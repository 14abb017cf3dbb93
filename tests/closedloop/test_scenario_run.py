"""`run_scenario`: `twinloop run`'s passes, telemetry, loop records and report as one library call."""

from __future__ import annotations

from pathlib import Path

from twinloop.closedloop.scenario_run import run_scenario
from twinloop.telemetry.store import DuckDBStore
from twinloop.telemetry.store.loop_records import read_loop_table
from twinloop.twin import load_scenario
from twinloop.twin.engine import StepResult, Twin

SCENARIO = """
name: run-lib
site: dc1
duration_s: 3m
rows: [{racks: 2, nodes_per_rack: 2, cdu: {capacity_w: 60000, flow_kg_per_s: 2.0, pump_power_w: 300}}]
power_chain: {facility_power_budget_w: 1.0e5}
jobs: [{name: train, kind: training, gpus: 16, profile: {load_bytes_per_gpu: 4.0e9}}]
faults: [{kind: psu_loss, target: dc1/r01/k01/n01, start_s: 60, duration_s: 60, magnitude: 5}]
"""


def test_run_scenario_writes_store_records_and_report(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO)
    spec = load_scenario(path)
    steps: list[int] = []

    def on_step(twin: Twin, result: StepResult) -> None:
        steps.append(twin.step_index)

    r = run_scenario(spec, tmp_path / "out", source=str(path), on_step=on_step)
    assert len(steps) == 2 * round(spec.duration_s / spec.step_s)  # both passes report progress
    assert r.store == tmp_path / "out" / "telemetry.duckdb" and r.report.is_file()
    assert (r.off.name, r.on.name) == ("loop-off", "loop-on")
    with DuckDBStore(r.store, read_only=True) as store:
        assert store.count() > 0
        truth = read_loop_table(store.con, "loop_ground_truth")
        actions = read_loop_table(store.con, "loop_actions", "loop-on")
    assert {row["run"] for row in truth} == {"loop-off", "loop-on"}
    assert len(actions) == len(r.on.actions)
