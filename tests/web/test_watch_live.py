"""Issue 12: `twinloop serve --db` shows a running `twinloop watch --db` live, in another process.

A real watcher process replays the H100 fixture into a store at 10x; the dashboard app (this process) reads the
same file while it runs, sees the incident appear before the watcher ends, approves the pending action from the
web, and the watcher applies it. At the end the store holds every sample of a reference run: nothing was lost
while the two processes took turns on the file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import duckdb
from fastapi.testclient import TestClient

from twinloop.ops.live.control import control_path
from twinloop.web.app import create_app
from twinloop.web.controller import DbController

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures" / "h100" / "nvml_1hz_idle_to_caps.csv"
TOKEN = "t" * 32
HEADERS = {"Authorization": f"Bearer {TOKEN}"}
POLICY = (
    "name: t\nmode: approve\nrules:\n  - name: drain-throttled\n    when: [power_throttle]\n"
    "    actions: [{kind: drain, target: node}]\n"
)


def _watch(db: Path, policy: Path, speed: float) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    cmd = [sys.executable, "-m", "twinloop.cli.main", "watch", f"replay:{FIX}", "--db", str(db), "--mode",
           "approve", "--policy", str(policy), "--speed", str(speed), "--json"]  # fmt: skip
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _count(db: Path) -> int:
    con = duckdb.connect(str(db), read_only=True)
    try:
        row = con.execute("SELECT count(*) FROM samples").fetchone()
        return int(row[0]) if row else 0
    finally:
        con.close()


def test_serve_sees_a_running_watcher_live_and_its_approval_reaches_it(tmp_path: Path) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text(POLICY)
    db = tmp_path / "live.duckdb"
    proc = _watch(db, policy, speed=8.0)  # ~20 s of wall time for 165 s of readings
    app = create_app(db, tmp_path, TOKEN, controller=DbController(control_path(db)))
    seen_live: list[dict[str, Any]] = []
    approved: int | None = None
    statuses: list[int] = []
    try:
        with TestClient(app) as client:
            deadline = time.monotonic() + 90
            while proc.poll() is None and time.monotonic() < deadline:
                r = client.get("/api/incidents", headers=HEADERS)
                statuses.append(r.status_code)
                if r.status_code == 200:
                    groups = r.json()["groups"]
                    if groups and not seen_live:
                        seen_live = groups
                pend = client.get("/api/actions/pending", headers=HEADERS).json()
                if pend and approved is None:
                    approved = int(pend[0]["action_id"])
                    d = client.post(f"/api/actions/{approved}/approve", headers=HEADERS)
                    assert d.status_code == 200, d.text
                time.sleep(0.2)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err[-2000:]
    # the incident appeared in the dashboard while the watcher was still running
    assert seen_live, f"no incident seen live; statuses {sorted(set(statuses))}"
    # reads never got an empty 200 from a store they could not open: 200 or an honest 503, nothing else
    assert set(statuses) <= {200, 503}
    assert statuses.count(200) > len(statuses) // 2
    doc = json.loads(out)
    assert approved is not None, "no action waited for approval"
    asked = next(a for a in doc["actions"] if a["action_id"] == approved)
    assert asked["status"] == "pending" and asked["kind"] == "drain"
    # the web's approval reached the watcher, which applied it (actuator none: a dry run) as a new record
    done = [a for a in doc["actions"] if a["action_id"] != approved and a["incident_id"] == asked["incident_id"]]
    assert [a["status"] for a in done] == ["dry_run"], doc["actions"]
    assert DbController(control_path(db)).pending_actions() == []
    assert any(i["class"] == "power_throttle" for i in doc["incidents"])

    # nothing lost: the same replay without a reader stores exactly as many samples
    ref = tmp_path / "ref.duckdb"
    alone = _watch(ref, policy, speed=0.0)
    alone.communicate(timeout=120)
    assert alone.returncode == 0
    assert _count(db) == _count(ref) > 0
