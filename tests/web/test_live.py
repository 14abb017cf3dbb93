"""The live stream: server-sent events that change when the data or the pending actions change."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from fastapi.testclient import TestClient

from .conftest import AUTH, Loop


def read_updates(client: TestClient, n: int) -> list[dict]:  # type: ignore[type-arg]
    events = []
    with client.stream("GET", f"/api/live?max_events={n}", headers=AUTH) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        block: list[str] = []
        for line in r.iter_lines():
            if line:
                block.append(line)
                continue
            if block and block[0] == "event: update":
                events.append(json.loads(block[1].removeprefix("data: ")))
            block = []
    return events


def test_live_update_reports_newest_data_and_pending(app, loop: Loop) -> None:  # type: ignore[no-untyped-def]
    client = TestClient(app)
    (first,) = read_updates(client, 1)
    status = client.get("/api/status", headers=AUTH).json()
    assert first["newest_ts"] == status["newest_ts"] and first["samples"] == status["samples"]
    assert first["pending"] == 2 and first["controller"]["mode"] == "approve"
    loop.controller.reject(sorted(loop.responder.pending)[0])
    (second,) = read_updates(client, 1)
    assert second["pending"] == 1


def test_live_needs_the_token(app) -> None:  # type: ignore[no-untyped-def]
    assert TestClient(app).get("/api/live?max_events=1").status_code == 401


def test_live_sees_an_in_process_writer(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import numpy as np

    from twinloop.telemetry.frame import Frame
    from twinloop.telemetry.store.duckdb_store import DuckDBStore
    from twinloop.web import create_app

    from .conftest import TOKEN

    store = DuckDBStore(tmp_path / "live.duckdb")
    site = {"TWINLOOP_FI_FACILITY_POWER": np.array([1.0e6]), "TWINLOOP_FI_IT_POWER": np.array([8.0e5])}
    store.append(Frame.from_dense(100.0, ["s1"], site))
    client = TestClient(create_app(None, tmp_path, TOKEN, connect=lambda: store.con, live_interval_s=0.05))
    (first,) = read_updates(client, 1)
    assert first["newest_ts"] == 100.0
    store.append(Frame.from_dense(101.0, ["s1"], {k: v * 1.1 for k, v in site.items()}))
    (second,) = read_updates(client, 1)
    assert second["newest_ts"] == 101.0 and second["samples"] == 4
    power = client.get("/api/overview", headers=AUTH).json()["power"]
    assert power["facility_power_w"] == pytest.approx(1.1e6) and power["pue"] == pytest.approx(1.25)
    store.close()


WRITE = """
import sys, numpy as np
from pathlib import Path
from twinloop.telemetry.frame import Frame
from twinloop.telemetry.store.duckdb_store import DuckDBStore
path, ts = Path(sys.argv[1]), float(sys.argv[2])
path.unlink(missing_ok=True)  # as `twinloop sim --out` does before a new run
with DuckDBStore(path) as store:
    store.append(Frame.from_dense(ts, ["s1"], {"TWINLOOP_FI_IT_POWER": np.array([ts])}))
"""


def test_a_replaced_store_file_is_reopened(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from twinloop.web import create_app

    from .conftest import TOKEN

    path = tmp_path / "telemetry.duckdb"
    client = TestClient(create_app(path, tmp_path, TOKEN, open_read=True))
    assert client.get("/api/status").json()["newest_ts"] is None  # no store yet
    for ts in (10.0, 20.0):  # another process (a new run) writes, then replaces, the file
        subprocess.run([sys.executable, "-c", WRITE, str(path), str(ts)], check=True, timeout=60)
        assert client.get("/api/status").json()["newest_ts"] == ts
