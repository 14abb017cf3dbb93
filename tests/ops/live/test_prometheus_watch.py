"""`twinloop watch prometheus:URL` against a real Prometheus (Debian package) scraping twinloop's exporter, started
here on 127.0.0.1 and stopped afterwards: the fleet path, at 8 GPUs."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from tests import servers

from twinloop.ops.live.actuators import NoActuator
from twinloop.ops.live.cluster import LiveOptions, SourceCluster
from twinloop.ops.live.kinds import build_source
from twinloop.ops.live.watcher import WatchConfig, Watcher
from twinloop.telemetry.exporter import Exporter, LatestValues
from twinloop.telemetry.frame import Frame
from twinloop.telemetry.report import IngestReport
from twinloop.telemetry.sources.prometheus import PrometheusConfig, PrometheusSource

pytestmark = pytest.mark.integration
GPUS = [f"dc/row0/rack{i // 4}/node{i // 2}/gpu{i % 2}" for i in range(8)]


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[str]:
    latest = LatestValues()
    cols = {"DCGM_FI_DEV_POWER_USAGE": np.linspace(200, 690, 8), "DCGM_FI_DEV_GPU_TEMP": np.full(8, 55.0),
            "DCGM_FI_DEV_SM_CLOCK": np.full(8, 1755.0)}  # fmt: skip
    latest.update(Frame.from_dense(time.time(), GPUS, cols))
    with (
        Exporter(latest, listen="127.0.0.1:0") as exporter,
        servers.prometheus(tmp_path, [f"127.0.0.1:{exporter.port}"]) as server,
    ):
        count = "count(DCGM_FI_DEV_POWER_USAGE)"
        server.wait_until(lambda: float(server.query(count)[0]["value"][1]) == 8, "a scrape of all 8 GPUs", 40)
        yield server.url


def test_watch_prometheus_reads_every_gpu_each_tick(prometheus: str) -> None:
    built = build_source(f"prometheus:{prometheus}", period_s=1.0)
    cluster = SourceCluster(built.source, NoActuator(), LiveOptions(cadence_s=1.0, whole_sweeps=True))
    assert cluster.topology().gpu_ids == tuple(sorted(GPUS))
    w = Watcher(cluster, config=WatchConfig(mode="observe"))
    t0 = time.monotonic()
    summary = w.run(stop=lambda: time.monotonic() - t0 > 4.0)
    assert summary.samples >= 3 and summary.warnings == 0
    power = cluster.read("DCGM_FI_DEV_POWER_USAGE", "dc/row0", "max")
    assert power == pytest.approx(690.0)
    assert not [i for i in w.incidents if i.severity > 0]


def test_follow_mode_catches_up_after_a_stall_without_losing_a_step(prometheus: str) -> None:
    query = '{__name__=~"DCGM_FI_DEV_POWER_USAGE|DCGM_FI_DEV_GPU_TEMP"}'
    cfg = PrometheusConfig(url=prometheus, mode="follow", queries=(query,), period_s=1.0, duration_s=8.0)
    report = IngestReport()
    frames: list[Frame] = []
    for fr in PrometheusSource(cfg).frames(report):
        frames.append(fr)
        if len(frames) == 2:
            time.sleep(3.5)  # the consumer stalls; the source must not skip the steps it missed
    assert report.ok, report.summary()
    labels, values = frames[0], Frame.concat(frames[1:])
    assert len(labels) == 0 and sorted(labels.entities) == sorted(GPUS)
    assert all(labels.labels[g].get("UUID") for g in GPUS)
    assert max(len(np.unique(f.ts_s)) for f in frames[2:]) >= 3  # one poll read the stalled steps at once
    for g in GPUS:
        for name in ("DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_TEMP"):
            sel = (values.entity_names() == g) & (values.field_names() == name)
            ts = np.sort(values.ts_s[sel])
            assert ts.size >= 6 and np.all(np.diff(ts) == 1.0), (g, name, ts)
