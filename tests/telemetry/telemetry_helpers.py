"""Helpers shared by the telemetry tests (data paths, deterministic frames, a fake Prometheus API)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from twinloop.telemetry.frame import Frame

DATA = Path(__file__).parent / "data"
NVML_RECORDING = DATA / "nvml_h100_synthetic.json"
SMI_FILE = DATA / "nvidia_smi_h100.csv"
T0 = 1_700_000_000.0


def gpu_entities(n: int) -> list[str]:
    """n GPU entity ids, 8 per node, 4 nodes per rack."""
    return [f"site0/row0/rack{i // 32}/node{i // 8}/gpu{i % 8}" for i in range(n)]


def twin_like_frames(n_gpus: int = 16, steps: int = 5, seed: int = 0) -> list[Frame]:
    """Deterministic dense frames shaped like the twin's per-step output."""
    rng = np.random.default_rng(seed)
    ents = gpu_entities(n_gpus)
    out = []
    for k in range(steps):
        cols = {
            "DCGM_FI_DEV_POWER_USAGE": rng.uniform(100, 700, n_gpus),
            "DCGM_FI_DEV_GPU_TEMP": rng.uniform(30, 80, n_gpus),
            "DCGM_FI_DEV_SM_CLOCK": rng.uniform(1000, 1980, n_gpus).round(),
        }
        labels = {e: {"job": "llama-70b", "gpu_kind": "h100-sxm"} for e in ents}
        out.append(Frame.from_dense(T0 + k, ents, cols, labels=labels, source="twin"))
    return out


class _PromHandler(BaseHTTPRequestHandler):
    """A tiny stand-in for Prometheus' HTTP API (tests of the source's parsing and error handling)."""

    delay_s = 0.0
    series: ClassVar[list[dict[str, Any]]] = []

    def do_GET(self) -> None:
        import json
        import time
        from urllib.parse import parse_qs, urlparse

        time.sleep(self.delay_s)
        url = urlparse(self.path)
        q = parse_qs(url.query)
        if url.path == "/api/v1/query":
            result = [{"metric": s["metric"], "value": s["values"][-1]} for s in self.series]
            body = {"status": "success", "data": {"resultType": "vector", "result": result}}
        elif url.path == "/api/v1/query_range":
            start, end = float(q["start"][0]), float(q["end"][0])
            result = [
                {"metric": s["metric"], "values": [v for v in s["values"] if start <= v[0] <= end]} for s in self.series
            ]
            body = {"status": "success", "data": {"resultType": "matrix", "result": result}}
        else:
            self.send_error(404)
            return
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        return


PROM_SERIES = [
    {
        "metric": {"__name__": "DCGM_FI_DEV_POWER_USAGE", "gpu": str(g), "Hostname": "node7", "UUID": f"GPU-{g}",
                   "modelName": "NVIDIA H100 80GB HBM3", "hpc_job": "job42"},
        "values": [[T0 + k * 15, f"{300 + 10 * g + k:.1f}"] for k in range(4)],
    }
    for g in range(2)
] + [
    {
        "metric": {"__name__": "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "gpu": "0", "Hostname": "node7"},
        "values": [[T0 + k * 15, str(1_000_000 + 4_500_000 * k)] for k in range(4)],
    },
    {"metric": {"__name__": "DCGM_FI_DEV_GPU_TEMP", "gpu": "1", "Hostname": "node7"}, "values": [[T0, "NaN"]]},
]  # fmt: skip


def write_long_csv(path: Path, frames: list[Frame]) -> Path:
    """Write frames as a long CSV (ts,entity,field,value)."""
    lines = ["ts,entity,field,value"]
    for fr in frames:
        for t, e, f, v in zip(fr.ts_s.tolist(), fr.entity_names(), fr.field_names(), fr.value.tolist(), strict=True):
            lines.append(f"{t!r},{e},{f},{v!r}")
    path.write_text("\n".join(lines) + "\n")
    return path


@contextmanager
def serving(body: bytes) -> Iterator[str]:
    """A loopback HTTP server answering every GET with ``body`` (an exporter's ``/metrics``); yields its URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/metrics"
    finally:
        server.shutdown()
        server.server_close()
