"""Serve a real (short) twin run: the API's numbers are the twin's telemetry, and the report builds from it."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from fastapi.testclient import TestClient

from twinloop.report import sim_report
from twinloop.web import create_app

from .conftest import AUTH, TOKEN

SCENARIO = {
    "name": "web-small",
    "site": "dcw",
    "duration_s": 240,
    "rows": [
        {
            "count": 2,
            "racks": 2,
            "nodes_per_rack": 2,
            "cdu": {
                "capacity_w": 60000,
                "flow_kg_per_s": 2.0,
                "loop_heat_capacity_j_per_c": 2.0e5,
                "pump_power_w": 300,
            },
        }
    ],
    "power_chain": {"facility_power_budget_w": 2.0e5},
    "jobs": [{"name": "train", "kind": "training", "gpus": 32, "profile": {"load_bytes_per_gpu": 4e9}}],
    "telemetry": {"gpu_every_s": 10, "facility_every_s": 5},
}


@pytest.fixture(scope="module")
def sim_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from twinloop.twin.engine import Twin
    from twinloop.twin.scenario import scenario_from_dict
    from twinloop.twin.telemetry_writer import TelemetryWriter

    out = tmp_path_factory.mktemp("sim")
    twin = Twin(scenario_from_dict(SCENARIO, "web-small.yaml"), source="web-small.yaml")
    writer = TelemetryWriter(twin, out)
    twin.run(callback=writer.add)
    writer.close()
    return out


def test_overview_of_a_twin_run(sim_dir: Path) -> None:
    db = sim_dir / "telemetry.duckdb"
    c = TestClient(create_app(db, sim_dir, TOKEN))
    o = c.get("/api/overview", headers=AUTH).json()
    assert o["site"] == "dcw" and o["counts"]["gpus"] == 64 and o["counts"]["racks"] == 4 and o["counts"]["jobs"] == 1
    con = duckdb.connect(str(db), read_only=True)
    facility = con.execute(
        "SELECT arg_max(s.value, s.ts) FROM samples s JOIN fields f USING (field_id) "
        "WHERE f.name = 'TWINLOOP_FI_FACILITY_POWER'"
    ).fetchone()
    con.close()
    assert facility is not None and o["power"]["facility_power_w"] == pytest.approx(facility[0])
    p = o["power"]
    assert p["facility_power_w"] == pytest.approx(p["it_power_w"] + p["cooling_power_w"] + p["losses_w"], rel=0.02)
    floor = c.get("/api/floor", headers=AUTH).json()
    assert [len(r["racks"]) for r in floor["rows"]] == [2, 2]
    rack = floor["rows"][0]["racks"][0]["rack"]
    detail = c.get("/api/rack", params={"id": rack}, headers=AUTH).json()
    assert sum(len(n["gpus"]) for n in detail["nodes"]) == 16
    gpu = detail["nodes"][0]["gpus"][0]["gpu"]
    hist = c.get("/api/gpu", params={"id": gpu}, headers=AUTH).json()
    assert len(hist["ts"]) >= 20 and all(v is None or 0 < v < 1500 for v in hist["power_w"])
    jobs = c.get("/api/jobs", headers=AUTH).json()
    assert jobs[0]["name"] == "train" and jobs[0]["phase"] == "sustained" and jobs[0]["gpus"] == 32


def test_report_of_a_twin_run(sim_dir: Path, tmp_path: Path) -> None:
    out = sim_report(sim_dir / "telemetry.duckdb", tmp_path / "report.html")
    text = out.read_text()
    assert "<h2>Facility power</h2>" in text and "<h2>GPU temperature by rack</h2>" in text
    assert "dcw/r01/k01" in text and "<script src" not in text and text.count("<script>") == 2


def test_job_power_profile_of_a_twin_run(sim_dir: Path) -> None:
    """The twin labels each GPU with its job, so the Jobs page can sum the job's GPU power."""
    c = TestClient(create_app(sim_dir / "telemetry.duckdb", sim_dir, TOKEN))
    detail = c.get("/api/job", params={"id": "dcw/jobs/train"}, headers=AUTH).json()
    assert detail["power_gpus"] == 32
    watts = [w for w in detail["power_w"] if w is not None]
    assert watts and max(watts) <= 32 * 700.0 * 1.1 and max(watts) > 32 * 100.0
