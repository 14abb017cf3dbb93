"""A real Prometheus (Debian package) scrapes twinloop's exporter; the Prometheus source reads it back."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from telemetry_helpers import twin_like_frames
from tests import servers

from twinloop.telemetry.exporter import Exporter
from twinloop.telemetry.frame import Frame
from twinloop.telemetry.ingest import validated_frames
from twinloop.telemetry.report import IngestReport
from twinloop.telemetry.sources.prometheus import PrometheusConfig, PrometheusSource
from twinloop.telemetry.sources.twin import TwinConfig, TwinSource

pytestmark = pytest.mark.integration


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
def prometheus(tmp_path: Path, exporter_and_frames: tuple[Exporter, list[Frame]]) -> Iterator[servers.Running]:
    exporter, _ = exporter_and_frames
    with servers.prometheus(tmp_path, [f"127.0.0.1:{exporter.port}"]) as server:
        yield server


def test_prometheus_scrapes_exporter_and_source_reads_same_values(
    prometheus: servers.Running, exporter_and_frames: tuple[Exporter, list[Frame]]
) -> None:
    _, frames = exporter_and_frames
    prometheus.wait_until(lambda: len(prometheus.query("DCGM_FI_DEV_POWER_USAGE")) >= 8, "8 series scraped")
    url = prometheus.url
    report = IngestReport()
    source = PrometheusSource(PrometheusConfig(url=url))
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
    cfg = PrometheusConfig(url=url, mode="range", queries=("DCGM_FI_DEV_GPU_TEMP",), start_s=now - 5,
                           end_s=now, step_s=1)  # fmt: skip
    hist = Frame.concat(list(validated_frames(PrometheusSource(cfg), IngestReport())))
    ts, ents, temps = hist.to_dense("DCGM_FI_DEV_GPU_TEMP")
    assert len(ts) >= 2 and len(ents) == 8
    assert np.allclose(temps[-1], frames[1].to_dense("DCGM_FI_DEV_GPU_TEMP")[2][-1, [want_ents.index(e) for e in ents]])


def test_a_saved_query_range_answer_is_detect_input(
    prometheus: servers.Running, exporter_and_frames: tuple[Exporter, list[Frame]], tmp_path: Path
) -> None:
    """`curl .../api/v1/query_range > f.json; twinloop detect f.json` reads what the range source reads."""
    import httpx

    from twinloop.ops.detect.offline import read_series

    prometheus.wait_until(lambda: len(prometheus.query("DCGM_FI_DEV_GPU_TEMP")) >= 8, "8 series scraped")
    time.sleep(2.2)
    now = time.time()
    params = {"query": "DCGM_FI_DEV_GPU_TEMP", "start": now - 5, "end": now, "step": 1}
    saved = tmp_path / "temps.json"
    saved.write_bytes(httpx.get(f"{prometheus.url}/api/v1/query_range", params=params, timeout=5).content)
    blocks, report = read_series(saved)
    cfg = PrometheusConfig(url=prometheus.url, mode="range", queries=("DCGM_FI_DEV_GPU_TEMP",), start_s=now - 5,
                           end_s=now, step_s=1)  # fmt: skip
    ts, ents, temps = Frame.concat(list(validated_frames(PrometheusSource(cfg), IngestReport()))).to_dense(
        "DCGM_FI_DEV_GPU_TEMP"
    )
    (block,) = blocks
    assert report.layout == "prometheus" and block.field == "DCGM_FI_DEV_GPU_TEMP"
    assert list(block.names) == list(ents) and np.allclose(block.values, temps) and np.allclose(block.ts, ts)
