"""The API's numbers against the store, computed independently with plain SQL/NumPy."""

from __future__ import annotations

import itertools
from pathlib import Path

import duckdb
import numpy as np
import pytest
from fastapi.testclient import TestClient
from hypothesis import given
from hypothesis import strategies as st

from twinloop.web.db import build_topology, natural_key
from twinloop.web.job_queries import PHASE_NAMES

from .conftest import AUTH
from .webdata import DT_S, HOT_RACK, JOB, STEPS, T0, gpu_ids


@pytest.fixture
def client(app) -> TestClient:  # type: ignore[no-untyped-def]
    return TestClient(app)


def last_values(db: Path, field: str) -> dict[str, float]:
    """Newest value per entity of ``field``, straight from the samples table."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute(
            "SELECT e.entity, arg_max(s.value, s.ts) FROM samples s JOIN entities e USING (entity_id) "
            "JOIN fields f USING (field_id) WHERE f.name = ? GROUP BY e.entity",
            [field],
        ).fetchall()
    finally:
        con.close()
    return {e: float(v) for e, v in rows}


def test_overview_matches_the_store(client: TestClient, site_db: Path) -> None:
    o = client.get("/api/overview", headers=AUTH).json()
    fac = last_values(site_db, "TWINLOOP_FI_FACILITY_POWER")["dc9"]
    it = last_values(site_db, "TWINLOOP_FI_IT_POWER")["dc9"]
    assert o["power"]["facility_power_w"] == pytest.approx(fac)
    assert o["power"]["it_power_w"] == pytest.approx(it)
    assert o["power"]["pue"] == pytest.approx(fac / it)
    assert o["counts"] == {"sites": 1, "rows": 2, "racks": 6, "nodes": 12, "gpus": 48, "jobs": 1}
    temps = last_values(site_db, "DCGM_FI_DEV_GPU_TEMP")
    per_rack: dict[str, float] = {}
    for gpu, t in temps.items():
        rack = gpu.rsplit("/", 2)[0]
        per_rack[rack] = max(per_rack.get(rack, -1e9), t)
    hottest = max(per_rack, key=lambda r: per_rack[r])
    assert o["hottest_racks"][0]["rack"] == hottest == HOT_RACK
    assert o["hottest_racks"][0]["max_gpu_temp_c"] == pytest.approx(per_rack[hottest])
    reasons = last_values(site_db, "DCGM_FI_DEV_CLOCKS_EVENT_REASONS")
    assert o["throttling"]["gpus_throttled"] == sum(int(v) & 0xEC != 0 for v in reasons.values()) == 8
    assert o["throttling"]["by_reason"] == {"sw_thermal": 8}
    assert o["open_incident_count"] == 2 and o["pending_actions"] == 2 and o["live"] is True


def test_floor_rack_power_is_the_rack_field(client: TestClient, site_db: Path) -> None:
    f = client.get("/api/floor", headers=AUTH).json()
    rack_power = last_values(site_db, "TWINLOOP_FI_RACK_POWER")
    racks = [r for row in f["rows"] for r in row["racks"]]
    assert [r["rack"] for r in racks] == sorted(rack_power, key=natural_key)
    for r in racks:
        assert r["power_w"] == pytest.approx(rack_power[r["rack"]])
    lo, hi = f["temp_range_c"]
    assert lo == min(r["max_gpu_temp_c"] for r in racks) and hi == max(r["max_gpu_temp_c"] for r in racks)


def test_rack_detail_lists_its_nodes_and_gpus_with_sparklines(client: TestClient, site_db: Path) -> None:
    r = client.get("/api/rack", params={"id": HOT_RACK, "points": 20}, headers=AUTH).json()
    gpus = [g for n in r["nodes"] for g in n["gpus"]]
    assert [g["gpu"] for g in gpus] == [g for g in gpu_ids() if g.startswith(HOT_RACK + "/")]
    power = last_values(site_db, "DCGM_FI_DEV_POWER_USAGE")
    for g in gpus:
        assert g["power_w"] == pytest.approx(power[g["gpu"]])
        assert g["reasons"] == ["sw_thermal"]
        spark = g["spark"]
        assert 2 <= len(spark["ts"]) <= 20 and len(spark["temp_c"]) == len(spark["ts"])
        assert spark["clock_mhz"][0] == pytest.approx(1980.0) and spark["clock_mhz"][-1] == pytest.approx(1500.0)


def test_gpu_history_bucket_means_and_reason_spans(client: TestClient, site_db: Path) -> None:
    gpu = f"{HOT_RACK}/n01/g0"
    h = client.get("/api/gpu", params={"id": gpu, "points": 600}, headers=AUTH).json()
    assert len(h["ts"]) == STEPS  # one sample per bucket at this resolution
    con = duckdb.connect(str(site_db), read_only=True)
    raw = con.execute(
        "SELECT s.value FROM samples s JOIN entities e USING (entity_id) JOIN fields f USING (field_id) "
        "WHERE e.entity = ? AND f.name = 'DCGM_FI_DEV_GPU_TEMP' ORDER BY s.ts",
        [gpu],
    ).fetchall()
    con.close()
    assert h["temp_c"] == pytest.approx([v for (v,) in raw])
    assert len(h["reason_spans"]) == 1
    span = h["reason_spans"][0]
    assert span["reasons"] == ["sw_thermal"]
    assert span["start_ts"] == pytest.approx(T0 + STEPS // 2 * DT_S, abs=DT_S)
    assert span["end_ts"] >= T0 + (STEPS - 1) * DT_S


def test_series_mean_min_max(client: TestClient) -> None:
    s = client.get(
        "/api/series", params={"entity": "dc9", "field": "TWINLOOP_FI_PUE", "points": 6}, headers=AUTH
    ).json()
    assert s["unit"] == "ratio" and 1 <= len(s["ts"]) <= 6
    for lo, mean, hi in zip(s["min"], s["mean"], s["max"], strict=True):
        assert lo <= mean <= hi
    assert client.get("/api/series", params={"entity": "dc9", "field": "NOPE_FIELD"}, headers=AUTH).status_code == 404


def test_jobs_lifecycle_checkpoints_restarts(client: TestClient) -> None:
    jobs = client.get("/api/jobs", headers=AUTH).json()
    assert [j["job"] for j in jobs] == [JOB]
    j = jobs[0]
    assert j["checkpoints"] == 1 and j["restarts"] == 1 and j["phase"] == "sustained" and j["gpus"] == 48
    spans = j["phases"]
    assert all(a["end_ts"] == b["start_ts"] for a, b in itertools.pairwise(spans))
    sustained = sum(s["end_ts"] - s["start_ts"] for s in spans if s["phase"] == "sustained")
    started = next(s["start_ts"] for s in spans if s["phase"] != "queued")
    assert j["sustained_fraction"] == pytest.approx(sustained / (spans[-1]["end_ts"] - started))
    detail = client.get("/api/job", params={"id": JOB}, headers=AUTH).json()
    assert detail["power_gpus"] == 48 and len(detail["power_w"]) == len(detail["ts"])
    assert detail["power_w"][0] == pytest.approx(48 * 600.0, rel=0.05)


def test_incidents_grouped_with_effect(client: TestClient) -> None:
    d = client.get("/api/incidents", headers=AUTH).json()
    assert d["runs"] == ["loop-off", "loop-on"] and d["mode"] == "approve"
    groups = {g["event_class"]: g for g in d["groups"]}
    assert groups["thermal_throttle"]["count"] == 2 and groups["thermal_throttle"]["worst_severity"] == "major"
    on = next(i for i in groups["thermal_throttle"]["incidents"] if i["run"] == "loop-on")
    assert on["effect"].startswith("verified") and len(on["actions"]) == 2
    assert [a["status"] for a in d["pending"]] == ["pending", "pending"]
    only_on = client.get("/api/incidents", params={"run": "loop-on"}, headers=AUTH).json()
    assert {i["run"] for g in only_on["groups"] for i in g["incidents"]} == {"loop-on"}


def test_empty_or_missing_store_answers_without_errors(tmp_path: Path) -> None:
    from twinloop.web import create_app

    c = TestClient(create_app(tmp_path / "none.duckdb", tmp_path, "t" * 20, open_read=True))
    assert c.get("/api/overview").json()["counts"]["gpus"] == 0
    assert c.get("/api/floor").json()["rows"] == []
    assert c.get("/api/jobs").json() == []
    assert c.get("/api/rack", params={"id": "a/b/c"}).status_code == 404


def test_phase_names_match_the_twin() -> None:
    from twinloop.twin.jobs import Phase

    assert {int(p): p.name.lower() for p in Phase} == PHASE_NAMES


names = st.lists(
    st.tuples(
        st.sampled_from(["s1", "s2"]), st.integers(1, 3), st.integers(1, 12), st.integers(1, 2), st.integers(0, 9)
    ),
    min_size=1,
    max_size=40,
    unique=True,
)


@given(names, st.randoms())
def test_topology_is_invariant_to_entity_order(parts: list[tuple[str, int, int, int, int]], rnd) -> None:  # type: ignore[no-untyped-def]
    ents = [f"{s}/r{r}/k{k}/n{n}/g{g}" for s, r, k, n, g in parts]
    rows = [(i, e, None) for i, e in enumerate(ents)]
    shuffled = list(rows)
    rnd.shuffle(shuffled)
    a, b = build_topology(rows), build_topology(shuffled)
    assert a.racks == b.racks and a.rows == b.rows
    assert [a.racks[a.rack[i]] for i in range(len(ents))] == [e.rsplit("/", 2)[0] for e in ents]
    assert a.racks == sorted(set(a.racks), key=natural_key)
    assert np.all(a.level == 5)


def test_twin_run_records_go_on_the_telemetry_axis_with_the_injected_fault(tmp_path: Path) -> None:
    """A twin run's loop records count simulated seconds; the API shows them on the telemetry's absolute axis,
    and a job-level straggler names the GPU the twin really slowed (its ground truth)."""
    from twinloop.ops.events import EventClass, Incident, Severity
    from twinloop.ops.records import GroundTruthLabel, write_run
    from twinloop.twin.telemetry_out import EPOCH_START_S
    from twinloop.web import create_app

    from .conftest import TOKEN
    from .webdata import build_store

    db = build_store(tmp_path / "t.duckdb", steps=12)
    gpu = gpu_ids()[5]
    inc = Incident(1, EventClass.STRAGGLER, JOB, (JOB,), 40.0, 60.0, Severity.MAJOR, n_detections=3)
    con = duckdb.connect(str(db))
    write_run(
        con, "sim", [inc], [], [GroundTruthLabel("straggler", gpu, 30.0, 90.0), GroundTruthLabel("x", gpu, 99, 120)]
    )
    con.close()
    c = TestClient(create_app(db, tmp_path, TOKEN))
    groups = c.get("/api/incidents", params={"run": "sim"}, headers=AUTH).json()["groups"]
    (i,) = [i for g in groups for i in g["incidents"]]
    assert i["start_ts"] == EPOCH_START_S + 40.0 and EPOCH_START_S == T0
    assert [(f["fault"], f["entity"], f["start_ts"]) for f in i["injected"]] == [("straggler", gpu, T0 + 30.0)]
