"""Issue 19, hostile web requests: an oversize body, a body without a token, a rebinding Host header, path
traversal, NaN in JSON, and a store a writer holds or that is corrupt (503 with the reason, never an empty 200)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from twinloop.telemetry.frame import Frame
from twinloop.telemetry.store.duckdb_store import DuckDBStore
from twinloop.web.app import create_app
from twinloop.web.guard import MAX_BODY_BYTES

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "s" * 32
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _store(db: Path) -> Path:
    ts = np.arange(120, dtype=float) + 1.7e9
    with DuckDBStore(db) as store:
        store.append(Frame.from_long(ts, ["dc/r1/k1/n1/g0"] * 120, ["DCGM_FI_DEV_POWER_USAGE"] * 120, ts * 0 + 300))
    return db


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    app = create_app(_store(tmp_path / "t.duckdb"), tmp_path, TOKEN, allowed_hosts=("10.0.0.5",))
    with TestClient(app) as c:
        yield c


def test_a_big_body_without_a_token_is_refused_before_it_is_read(client: TestClient) -> None:
    consumed = 0

    def body() -> Iterator[bytes]:  # chunked, no length: the guard must answer without draining it
        nonlocal consumed
        for _ in range(200):  # would be 200 MB
            consumed += 1
            yield b"[" + b"1," * (1 << 19) + b"1]"

    t0 = time.perf_counter()
    r = client.post("/api/runs", content=body(), headers={"Content-Type": "application/json"})
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    assert time.perf_counter() - t0 < 5.0
    assert consumed <= 2, f"{consumed} MB read before the 401"


def test_an_oversize_body_with_the_token_gets_413(client: TestClient) -> None:
    big = b" " * (MAX_BODY_BYTES + 1)
    r = client.post("/api/runs", content=big, headers={**AUTH, "Content-Type": "application/json"})
    assert r.status_code == 413

    def chunks() -> Iterator[bytes]:  # no Content-Length: cut off as it passes the cap
        for _ in range(8):
            yield b" " * (MAX_BODY_BYTES // 4)

    r = client.post("/api/runs", content=chunks(), headers={**AUTH, "Content-Type": "application/json"})
    assert r.status_code == 413


@pytest.mark.parametrize("token", ["", "Bearer ", "Basic abc", f"Bearer {'x' * 32}"])
def test_writes_without_the_right_token_never_reach_the_endpoint(client: TestClient, token: str) -> None:
    r = client.post("/api/runs", json={"duration_s": 5}, headers={"Authorization": token} if token else {})
    assert r.status_code in (401, 403)


@pytest.mark.parametrize(
    ("host", "status"),
    [("evil.example", 400), ("evil.example:8000", 400), ("127.0.0.1.evil.example", 400), ("", 400),
     ("localhost:8000", 200), ("127.0.0.1", 200), ("[::1]:8000", 200), ("10.0.0.5:8000", 200)],
)  # fmt: skip
def test_host_header_guards_against_dns_rebinding(client: TestClient, host: str, status: int) -> None:
    r = client.get("/api/overview", headers={**AUTH, "Host": host})
    assert r.status_code == status, r.text


@pytest.mark.parametrize(
    "path", ["/reports/..%2f..%2fetc%2fpasswd", "/reports/%2e%2e/%2e%2e/etc/passwd", "/reports/../t.duckdb",
             "/static/..%2f..%2f__init__.py", "/vendor/%2e%2e%2f%2e%2e%2fpyproject.toml"]
)  # fmt: skip
def test_path_traversal_reads_nothing_outside(client: TestClient, path: str) -> None:
    r = client.get(path, headers=AUTH)
    assert r.status_code in (400, 404, 422)
    assert "root:" not in r.text and "[project]" not in r.text and "DUCK" not in r.text


@pytest.mark.parametrize("body", ['{"duration_s": NaN}', '{"duration_s": Infinity}', '{"duration_s": -Infinity}',
                                  '{"mode": "auto", "seed": NaN}', "[NaN]"])  # fmt: skip
def test_nan_in_json_is_a_clean_4xx(client: TestClient, body: str) -> None:
    r = client.post("/api/runs", content=body, headers={**AUTH, "Content-Type": "application/json"})
    assert r.status_code in (409, 422), r.text  # 409: this server has no run factory; never a 500


def test_a_store_a_writer_holds_answers_503_not_an_empty_200(tmp_path: Path) -> None:
    db = _store(tmp_path / "t.duckdb")
    hold = (
        "import sys, time\nfrom twinloop.telemetry.store.duckdb_store import DuckDBStore\n"
        "s = DuckDBStore(sys.argv[1]); s.con; print('held', flush=True); time.sleep(60)\n"
    )
    env = {"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}
    proc = subprocess.Popen([sys.executable, "-c", hold, str(db)], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        app = create_app(db, tmp_path, TOKEN)
        app.state.web.db.busy_wait_s = 0.3
        with TestClient(app) as c:
            r = c.get("/api/overview", headers=AUTH)
            assert r.status_code == 503 and "writer holds" in r.json()["detail"]
            assert r.headers["retry-after"]
    finally:
        proc.kill()
        proc.wait(timeout=10)
    with TestClient(create_app(db, tmp_path, TOKEN)) as c:  # writer gone: served again
        assert c.get("/api/overview", headers=AUTH).status_code == 200


def test_a_corrupt_store_answers_503(tmp_path: Path) -> None:
    db = tmp_path / "t.duckdb"
    db.write_bytes(b"\x00garbage, not a DuckDB file" * 1000)
    with TestClient(create_app(db, tmp_path, TOKEN)) as c:
        r = c.get("/api/overview", headers=AUTH)
        assert r.status_code == 503 and "unreadable" in r.json()["detail"]
