"""`twinloop report DB` on a live watcher's store: beside the GPU and loop charts, per job its step time and
throughput over time with the incidents on the job shaded and the actions on it marked (a real H200 job's heartbeats,
``tests/fixtures/h200_job_progress``: a co-tenant's slowdown, a hang, a flipped bit).
"""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from twinloop.cli.main import app
from twinloop.telemetry.fields import (
    DCGM_FI_DEV_POWER_USAGE,
    DCGM_FI_DEV_SM_CLOCK,
    TWINLOOP_FI_JOB_STEP_TIME,
    TWINLOOP_FI_JOB_TOKENS_PER_S,
)
from twinloop.telemetry.store.duckdb_store import DuckDBStore

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "h200_job_progress"
JOB = "site0/jobs/h200train"
GPU = "site0/row0/rack0/vm/gpu0"
runner = CliRunner()


@pytest.fixture(scope="module")
def watched(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The 5 s watcher's recording watched again with the job's heartbeats into a store; its --json."""
    db = tmp_path_factory.mktemp("watch") / "watch.duckdb"
    res = runner.invoke(app, ["watch", f"replay:{FIX / 'watch_5s.parquet'}", "--jobs", str(FIX / "jobs.yaml"),
                              "--job-heartbeats", str(FIX), "--db", str(db), "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    return db, json.loads(res.stdout)


def _specs(text: str) -> list[dict[str, Any]]:
    return [json.loads(html.unescape(m)) for m in re.findall(r'data-chart="([^"]*)"', text)]


def test_the_report_charts_the_jobs_step_time_with_its_incidents_and_actions(
    watched: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    db, watch = watched
    out = tmp_path / "r.html"
    res = runner.invoke(app, ["report", str(db), "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    text = out.read_text()
    assert doc["out"] == str(out) and f"<h2>Job {JOB}</h2>" in text
    # beside the charts a watch store had already: the GPU heat map, the incident timeline, the action log
    assert doc["sections"] == ["GPU temperature by rack", f"Job {JOB}", "Incident timeline", "Action log"]
    with DuckDBStore(db, read_only=True) as store:
        stored = store.query(TWINLOOP_FI_JOB_STEP_TIME, JOB)
        n_tps = store.query(TWINLOOP_FI_JOB_TOKENS_PER_S, JOB).num_rows
    (job,) = doc["jobs"]
    assert job["job"] == JOB and job["points"] == {TWINLOOP_FI_JOB_STEP_TIME: stored.num_rows,
                                                   TWINLOOP_FI_JOB_TOKENS_PER_S: n_tps}  # fmt: skip
    charts = {s["title"]: s for s in _specs(text) if s["kind"] == "line"}
    step, tps = charts[f"{JOB}: step time"], charts[f"{JOB}: tokens/s"]
    assert step["y"]["unit"] == "s" and tps["y"]["unit"] == "tokens/s"
    # one point per sample (the buckets are finer than the 5 s samples), the stored values
    ys = [y for y in step["series"][0]["y"] if y is not None]
    assert ys == pytest.approx(stored.column("value").to_pylist())
    # the incidents on the job shaded from when they opened; the actions on it marked when taken
    incidents = [i for i in watch["incidents"] if i["root"] == JOB]
    assert {"straggler", "job_hang", "suspected_sdc"} <= {i["class"] for i in incidents}
    assert [b["x0"] for b in step["bands"]] == pytest.approx([i["opened_ts"] for i in incidents])
    assert all(f"#{i['incident_id']} {i['class']}" in [b["label"] for b in step["bands"]] for i in incidents)
    actions = [a for a in watch["actions"] if a["target"] == JOB]
    assert actions and sorted(m["x"] for m in step["marks"]) == pytest.approx(sorted(a["ts"] for a in actions))
    assert tps["bands"] == step["bands"] and tps["marks"] == step["marks"]
    # the straggler (a co-tenant's GEMMs) shows as the job's step time up under its band
    (slow,) = [b for b in step["bands"] if "straggler" in b["label"]]
    inside = [y for x, y in zip(step["series"][0]["x"], step["series"][0]["y"], strict=True)
              if y is not None and slow["x0"] <= x <= slow["x1"]]  # fmt: skip
    assert min(inside) > 1.5 * min(ys)


def test_a_run_filter_and_the_text_output(watched: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    db, _ = watched
    res = runner.invoke(app, ["report", str(db), "--out", str(tmp_path / "a.html"), "--run", "other", "--json"])
    assert res.exit_code == 0, res.output
    (job,) = json.loads(res.stdout)["jobs"]
    assert job["incidents"] == 0 and job["actions"] == 0  # no run of that name: the chart stays, unmarked
    res = runner.invoke(app, ["report", str(db), "--out", str(tmp_path / "b.html")])
    assert res.exit_code == 0 and res.stdout.strip() == str(tmp_path / "b.html")


def test_a_missing_or_foreign_store_is_one_line_and_exit_2(tmp_path: Path) -> None:
    res = runner.invoke(app, ["report", str(tmp_path / "none.duckdb"), "--json"])
    assert res.exit_code == 2 and "file not found" in res.stderr and res.stderr.count("\n") == 1
    bad = tmp_path / "t.csv"
    bad.write_text("ts,entity\n1,a\n")
    res = runner.invoke(app, ["report", str(bad)])
    assert res.exit_code == 2 and "not a DuckDB store" in res.stderr and res.stdout == ""


def test_beside_the_step_time_the_jobs_gpus_clock_and_power_as_stored(
    watched: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    db, _ = watched
    out = tmp_path / "g.html"
    res = runner.invoke(app, ["report", str(db), "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    (job,) = json.loads(res.stdout)["jobs"]
    assert job["gpus"] == [GPU]  # the job's stored placement: the H200 it ran on
    charts = {s["title"]: s for s in _specs(out.read_text()) if s["kind"] == "line"}
    step = charts[f"{JOB}: step time"]
    with DuckDBStore(db, read_only=True) as store:
        for field, name, unit in ((DCGM_FI_DEV_SM_CLOCK, "GPU SM clock", "MHz"),
                                  (DCGM_FI_DEV_POWER_USAGE, "GPU power", "W")):  # fmt: skip
            stored = store.query(field, GPU)
            chart = charts[f"{JOB}: {name}"]
            assert chart["y"]["unit"] == unit and [s["name"] for s in chart["series"]] == ["mean", "min"]
            # one GPU, one sample per bucket: the mean and the minimum are its stored values, at their times
            for series in chart["series"]:
                got = [(x, y) for x, y in zip(series["x"], series["y"], strict=True) if y is not None]
                assert [y for _, y in got] == pytest.approx(stored.column("value").to_pylist())
            assert job["gpu_points"][field] == stored.num_rows
            assert chart["bands"] == step["bands"] and chart["marks"] == step["marks"]


def test_a_store_without_placement_charts_the_jobs_own_fields_only(
    watched: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    db, _ = watched
    old = tmp_path / "old.duckdb"
    shutil.copy(db, old)
    with DuckDBStore(old) as store:
        store.con.execute("DROP TABLE loop_job_gpus")  # an older watcher's store
    out = tmp_path / "o.html"
    res = runner.invoke(app, ["report", str(old), "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    (job,) = json.loads(res.stdout)["jobs"]
    assert job["gpus"] == [] and job["gpu_points"] == {}
    titles = {s["title"] for s in _specs(out.read_text())}
    assert f"{JOB}: step time" in titles and f"{JOB}: GPU SM clock" not in titles
