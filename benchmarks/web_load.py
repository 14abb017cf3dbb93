"""Dashboard API under concurrent clients: a real uvicorn on 127.0.0.1, C clients, bounded requests and time.

Each client loops over the dashboard's read endpoints (overview, status, floor, a rack, a GPU, a series, jobs,
incidents) until its request budget or the duration runs out; the script prints one JSON document with the
p50/p99/max latency per endpoint and overall, the request rate, error counts and the machine's load average
(other work on a shared machine inflates every figure).

    PYTHONPATH=src python benchmarks/web_load.py --db twinloop-out/telemetry.duckdb --clients 16 --duration 30

Run it with ``PYTHONPATH`` pointing at another checkout's ``src`` to measure that version (before/after).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import duckdb
import httpx
import numpy as np

TOKEN = "bench-token-0123456789abcdef"
SERVER = """
import sys, uvicorn
from twinloop.web import create_app
app = create_app(sys.argv[1], sys.argv[2], sys.argv[3], open_read=False)
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[4]), log_level="warning")
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _targets(db: Path) -> list[str]:
    """The endpoints a dashboard page load asks for, with ids from the store itself."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        names = [r[0] for r in con.execute("SELECT entity FROM entities ORDER BY entity_id").fetchall()]
    finally:
        con.close()
    gpu = next(n for n in names if n.count("/") == 4 and "/jobs/" not in n)
    rack = "/".join(gpu.split("/")[:3])
    site = gpu.split("/")[0]
    return [
        "/api/overview",
        "/api/status",
        "/api/floor",
        f"/api/rack?id={rack}",
        f"/api/gpu?id={gpu}",
        f"/api/series?entity={site}&field=DCGM_FI_DEV_POWER_USAGE",
        "/api/jobs",
        "/api/incidents",
    ]


def run(db: Path, clients: int, duration_s: float, max_requests: int) -> dict[str, Any]:
    """Start the server, load it, stop it; the figures as a dict."""
    port = _free_port()
    env = {**os.environ}
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(db), str(db.parent), TOKEN, str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    headers = {"Authorization": f"Bearer {TOKEN}"}
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(base + "/api/status", headers=headers, timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                raise RuntimeError("server did not start: " + (server.stderr.read() if server.stderr else ""))
            time.sleep(0.2)
        targets = _targets(db)
        for t in targets:  # one warm-up pass (first-request costs are not the steady state)
            httpx.get(base + t, headers=headers, timeout=60)
        lat: dict[str, list[float]] = {t.split("?")[0]: [] for t in targets}
        errors: dict[str, int] = {}
        lock = threading.Lock()
        per_client = max(1, max_requests // clients)
        end = time.monotonic() + duration_s

        def client(k: int) -> None:
            with httpx.Client(base_url=base, headers=headers, timeout=30) as c:
                for i in range(per_client):
                    if time.monotonic() >= end:
                        return
                    t = targets[(i + k) % len(targets)]
                    t0 = time.perf_counter()
                    try:
                        code = c.get(t).status_code
                    except httpx.HTTPError as exc:
                        code = type(exc).__name__  # type: ignore[assignment]
                    dt = time.perf_counter() - t0
                    with lock:
                        if code == 200:
                            lat[t.split("?")[0]].append(dt)
                        else:
                            errors[f"{t.split('?')[0]} {code}"] = errors.get(f"{t.split('?')[0]} {code}", 0) + 1

        t0 = time.perf_counter()
        threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        wall = time.perf_counter() - t0
    finally:
        server.terminate()
        server.wait(timeout=10)
    every = np.array([x for v in lat.values() for x in v])

    def pct(a: np.ndarray, q: float) -> float | None:
        return round(float(np.percentile(a, q)) * 1000, 1) if len(a) else None

    return {
        "db": str(db),
        "samples": _count(db),
        "clients": clients,
        "requests": len(every),
        "wall_s": round(wall, 2),
        "req_per_s": round(len(every) / wall, 1) if wall else None,
        "p50_ms": pct(every, 50),
        "p99_ms": pct(every, 99),
        "max_ms": pct(every, 100),
        "by_endpoint": {
            k: {"n": len(v), "p50_ms": pct(np.array(v), 50), "p99_ms": pct(np.array(v), 99)} for k, v in lat.items()
        },
        "errors": errors,
        "loadavg_1m_5m_15m": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
    }


def _count(db: Path) -> int:
    con = duckdb.connect(str(db), read_only=True)
    try:
        row = con.execute("SELECT count(*) FROM samples").fetchone()
        return int(row[0]) if row else 0
    finally:
        con.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", type=Path, required=True, help="telemetry store (e.g. from `twinloop sim --out`)")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--duration", type=float, default=30.0, help="load phase at most this long, s")
    ap.add_argument("--requests", type=int, default=4000, help="at most this many requests in all")
    args = ap.parse_args()
    print(json.dumps(run(args.db, args.clients, args.duration, args.requests), indent=2))


if __name__ == "__main__":
    main()
