"""A real Prometheus (Debian package) scrapes twinloop's exporter; the Prometheus source reads it back."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
from telemetry_helpers import free_port, twin_like_frames

from twinloop.telemetry.exporter import Exporter
from twinloop.telemetry.frame import Frame
from twinloop.telemetry.ingest import validated_frames
from twinloop.telemetry.report import IngestReport
from twinloop.telemetry.sources.prometheus import PrometheusConfig, PrometheusSource
from twinloop.telemetry.sources.twin import TwinConfig, TwinSource

pytestmark = pytest.mark.integration

PROMETHEUS = shutil.which("prometheus")


@pytest.fixture
def exporter_and_frames() -> Iterator[tuple[Exporter, list[Frame]]]:
    frames = twin_like_frames(n_gpus=8, steps=2, seed=5)
    ents = list(frames[-1].entities)
    energy = Frame.from_dense(frames[-1].ts_s[0], ents,
                              {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": np.linspace(1e6, 2e6, len(ents))})  # fmt: skip
    frames.append(energy)
    with Exporter(listen="127.0.0.1:0") as exporter:
        exporter.feed(TwinSource(TwinConfig(), frames=frames)).join(5)
        yield exporter, frames


@pytest.fixture
def prometheus(tmp_path: Path, exporter_and_frames: tuple[Exporter, list[Frame]]) -> Iterator[str]:
    if PROMETHEUS is None:
        pytest.skip("the prometheus binary is not installed (Debian package 'prometheus'; .ci/run installs it)")
    exporter, _ = exporter_and_frames
    port = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: twinloop\n    honor_labels: true\n"
        f"    static_configs:\n      - targets: ['127.0.0.1:{exporter.port}']\n"
    )
    log = (tmp_path / "prometheus.log").open("w")
    proc = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                pytest.fail(f"prometheus exited: {(tmp_path / 'prometheus.log').read_text()[-2000:]}")
            try:
                if httpx.get(f"{url}/-/ready", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("prometheus did not become ready in 30 s")
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _wait_for_series(url: str, n: int, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        body = httpx.get(f"{url}/api/v1/query", params={"query": "DCGM_FI_DEV_POWER_USAGE"}).json()
        if len(body["data"]["result"]) >= n:
            return
        time.sleep(0.3)
    pytest.fail(f"prometheus did not scrape {n} series in {timeout_s} s")


def test_prometheus_scrapes_exporter_and_source_reads_same_values(
    prometheus: str, exporter_and_frames: tuple[Exporter, list[Frame]]
) -> None:
    _, frames = exporter_and_frames
    _wait_for_series(prometheus, 8)
    report = IngestReport()
    source = PrometheusSource(PrometheusConfig(url=prometheus))
    back = Frame.concat(list(validated_frames(source, report)))
    assert report.ok, report.to_dict()
    for field in ("DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_SM_CLOCK"):
        _, ents, got = back.to_dense(field)
        _, want_ents, want = frames[1].to_dense(field)
        assert set(ents) == set(want_ents)
        order = [want_ents.index(e) for e in ents]
        assert np.allclose(got[-1], want[-1, order], rtol=1e-12), field
    # Energy goes out in mJ (dcgm-exporter's unit) and comes back in J.
    _, ents, energy = back.to_dense("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")
    _, want_ents, want_energy = frames[2].to_dense("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")
    assert np.allclose(energy[-1], want_energy[-1, [want_ents.index(e) for e in ents]])
    assert back.labels[ents[0]]["job"] == "llama-70b"
    # A range query over the last few seconds returns the scraped history (>= 2 scrapes at 1 s).
    time.sleep(2.2)
    now = time.time()
    cfg = PrometheusConfig(url=prometheus, mode="range", queries=("DCGM_FI_DEV_GPU_TEMP",), start_s=now - 5,
                           end_s=now, step_s=1)  # fmt: skip
    hist = Frame.concat(list(validated_frames(PrometheusSource(cfg), IngestReport())))
    ts, ents, temps = hist.to_dense("DCGM_FI_DEV_GPU_TEMP")
    assert len(ts) >= 2 and len(ents) == 8
    assert np.allclose(temps[-1], frames[1].to_dense("DCGM_FI_DEV_GPU_TEMP")[2][-1, [want_ents.index(e) for e in ents]])
