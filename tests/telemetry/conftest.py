"""Shared fixtures for the telemetry tests: example sources and a fake Prometheus API."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the helpers module next to this file

from telemetry_helpers import (
    NVML_RECORDING,
    PROM_SERIES,
    SMI_FILE,
    T0,
    _PromHandler,
    twin_like_frames,
    write_long_csv,
)

from twinloop.telemetry.sources.base import Source
from twinloop.telemetry.sources.files import FileConfig, FileSource
from twinloop.telemetry.sources.nvidia_smi import NvidiaSmiConfig, NvidiaSmiSource
from twinloop.telemetry.sources.nvml import NvmlConfig, NvmlSource
from twinloop.telemetry.sources.prometheus import PrometheusConfig, PrometheusSource
from twinloop.telemetry.sources.replay import ReplayConfig, ReplaySource
from twinloop.telemetry.sources.twin import TwinConfig, TwinSource
from twinloop.telemetry.store.duckdb_store import DuckDBStore


@pytest.fixture
def fake_prometheus() -> Iterator[Callable[..., str]]:
    """Start a fake Prometheus API on a free loopback port; returns ``start(delay_s=0) -> base URL``."""
    servers: list[ThreadingHTTPServer] = []

    def start(delay_s: float = 0.0, series: list[dict[str, Any]] | None = None) -> str:
        handler = type("H", (_PromHandler,), {"delay_s": delay_s, "series": series or PROM_SERIES})
        srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        srv.daemon_threads = True
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
        return f"http://127.0.0.1:{srv.server_address[1]}"

    yield start
    for srv in servers:
        srv.shutdown()
        srv.server_close()


@pytest.fixture
def example_sources(tmp_path: Path, fake_prometheus: Callable[..., str]) -> dict[str, Callable[[], Source]]:
    """A deterministic example of every registered source kind (the conformance test runs them all)."""
    frames = twin_like_frames()
    csv_path = write_long_csv(tmp_path / "t.csv", frames)
    db = tmp_path / "replay.duckdb"
    with DuckDBStore(db) as store:
        for fr in frames:
            store.append(fr)
    url = fake_prometheus()
    return {
        "twin": lambda: TwinSource(TwinConfig(steps=4), frames=frames),
        "replay": lambda: ReplaySource(ReplayConfig(path=str(db), frame_s=2.0)),
        "file": lambda: FileSource(FileConfig(path=str(csv_path), batch_rows=20)),
        "nvml": lambda: NvmlSource(
            NvmlConfig(replay_file=str(NVML_RECORDING), samples=6, start_ts_s=T0, node_prefix="s/r/k/n0")
        ),
        "nvidia-smi": lambda: NvidiaSmiSource(
            NvidiaSmiConfig(path=str(SMI_FILE), node_prefix="s/r/k/n0", utc_offset_h=0.0, batch_rows=10)
        ),
        "prometheus": lambda: PrometheusSource(
            PrometheusConfig(url=url, mode="range", start_s=T0, end_s=T0 + 60, step_s=15)
        ),
    }
