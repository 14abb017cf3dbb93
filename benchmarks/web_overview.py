"""Benchmark: GET /api/overview on a 16,384-GPU site.

Builds a synthetic store (16 rows x 16 racks x 8 nodes x 8 GPUs; GPU power, temperature, SM clock and
clock-event reasons every second for ``--seconds``, rack power and the site's facility fields every second),
then times the overview endpoint: the first (cold: topology built) request and the median / p95 of
``--requests`` warm ones, in-process (TestClient) and over HTTP against uvicorn on loopback.

    python benchmarks/web_overview.py [--gpus 16384] [--seconds 180] [--requests 30]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

import httpx
import numpy as np
import uvicorn

from twinloop.telemetry.frame import Frame
from twinloop.telemetry.store.duckdb_store import DuckDBStore
from twinloop.web import create_app

warnings.filterwarnings("ignore", category=DeprecationWarning)

TOKEN = "benchmark-token-0123456789"
T0 = 1_767_225_600.0


def build(path: Path, n_gpus: int, seconds: int, seed: int = 0) -> int:
    """Write the synthetic site; returns the number of samples."""
    rng = np.random.default_rng(seed)
    gpus_per_rack = 64
    n_racks = n_gpus // gpus_per_rack
    racks = [f"dc/r{r // 16 + 1:02d}/k{r % 16 + 1:02d}" for r in range(n_racks)]
    gpus = [f"{rk}/n{n + 1:02d}/g{g}" for rk in racks for n in range(8) for g in range(8)]
    rows = sorted({r.rsplit("/", 1)[0] for r in racks})
    base_temp = rng.uniform(55, 75, n_gpus)
    total = 0
    with DuckDBStore(path) as store:
        chunk = 30
        for start in range(0, seconds, chunk):
            t = T0 + np.arange(start, min(seconds, start + chunk), dtype=np.float64)
            k = t.size
            power = rng.normal(620, 40, (k, n_gpus))
            temp = base_temp + rng.normal(0, 1.0, (k, n_gpus))
            clock = np.where(temp > 74, 1600.0, 1980.0)
            reasons = np.where(temp > 74, 0x20, 0).astype(np.float64)
            frames = [
                Frame.from_dense(
                    t,
                    gpus,
                    {
                        "DCGM_FI_DEV_POWER_USAGE": power,
                        "DCGM_FI_DEV_GPU_TEMP": temp,
                        "DCGM_FI_DEV_SM_CLOCK": clock,
                        "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": reasons,
                    },
                )
            ]
            rack_power = power.reshape(k, n_racks, gpus_per_rack).sum(axis=2) * 1.15
            frames.append(Frame.from_dense(t, racks, {"TWINLOOP_FI_RACK_POWER": rack_power}))
            frames.append(
                Frame.from_dense(t, rows, {"TWINLOOP_FI_ROW_POWER": rack_power.reshape(k, len(rows), -1).sum(2)})
            )
            it = rack_power.sum(axis=1)
            frames.append(
                Frame.from_dense(
                    t,
                    ["dc"],
                    {
                        "TWINLOOP_FI_IT_POWER": it,
                        "TWINLOOP_FI_COOLING_POWER": 0.1 * it,
                        "TWINLOOP_FI_CONVERSION_LOSS": 0.05 * it,
                        "TWINLOOP_FI_FACILITY_POWER": 1.15 * it,
                        "TWINLOOP_FI_PUE": np.full(k, 1.15),
                    },
                )
            )
            total += store.append(Frame.concat(frames))
    return total


def timed(get: object, n: int) -> tuple[float, list[float]]:
    """(cold seconds, warm seconds per request)."""
    fn = get  # a callable returning a response
    t = time.perf_counter()
    r = fn()  # type: ignore[operator]
    cold = time.perf_counter() - t
    assert r.status_code == 200, r.text
    warm = []
    for _ in range(n):
        t = time.perf_counter()
        r = fn()  # type: ignore[operator]
        warm.append(time.perf_counter() - t)
        assert r.status_code == 200
    return cold, warm


def report(label: str, cold: float, warm: list[float]) -> None:
    warm_sorted = sorted(warm)
    p95 = warm_sorted[min(len(warm) - 1, round(0.95 * (len(warm) - 1)))]
    print(
        f"{label}: cold {cold * 1e3:.0f} ms, warm median {statistics.median(warm) * 1e3:.0f} ms, "
        f"p95 {p95 * 1e3:.0f} ms over {len(warm)} requests"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpus", type=int, default=16384, help="GPUs (multiple of 64)")
    ap.add_argument("--seconds", type=int, default=180, help="seconds of 1 s telemetry")
    ap.add_argument("--requests", type=int, default=30, help="warm requests to time")
    args = ap.parse_args()
    from fastapi.testclient import TestClient

    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "telemetry.duckdb"
        t = time.perf_counter()
        rows = build(db, args.gpus, args.seconds)
        print(
            f"built {args.gpus} GPUs x {args.seconds} s: {rows:,} samples in {time.perf_counter() - t:.1f} s "
            f"({db.stat().st_size / 1e6:.0f} MB)"
        )
        headers = {"Authorization": f"Bearer {TOKEN}"}
        app = create_app(db, Path(tmp), TOKEN)
        client = TestClient(app)
        doc = client.get("/api/overview", headers=headers).json()
        assert doc["counts"]["gpus"] == args.gpus, doc["counts"]
        print(
            f"overview: {doc['counts']['gpus']} GPUs, {doc['counts']['racks']} racks, facility "
            f"{doc['power']['facility_power_w'] / 1e6:.2f} MW, {doc['throttling']['gpus_throttled']} throttled"
        )
        app2 = create_app(db, Path(tmp), TOKEN)  # a fresh app, so the first request is cold again
        cold, warm = timed(lambda: TestClient(app2).get("/api/overview", headers=headers), args.requests)
        report("GET /api/overview (in-process TestClient)", cold, warm)

        app3 = create_app(db, Path(tmp), TOKEN)
        server = uvicorn.Server(uvicorn.Config(app3, host="127.0.0.1", port=0, log_level="warning", lifespan="off"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.05)
        port = server.servers[0].sockets[0].getsockname()[1]
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=60) as http:
            cold, warm = timed(lambda: http.get("/api/overview"), args.requests)
        report("GET /api/overview (uvicorn + httpx, loopback)", cold, warm)
        server.should_exit = True
        thread.join(timeout=10)
        app2.state.web.db.close()
        app3.state.web.db.close()
        app.state.web.db.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
