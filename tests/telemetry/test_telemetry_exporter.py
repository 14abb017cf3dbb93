"""Exporter: dcgm-exporter names and labels, unit scaling, and a scrape read back by the Prometheus source."""

from __future__ import annotations

import time

import httpx
import numpy as np
import pytest
from telemetry_helpers import twin_like_frames

from twinloop.errors import InputError
from twinloop.telemetry.exporter import Exporter, LatestValues, entity_labels, parse_listen
from twinloop.telemetry.frame import Frame
from twinloop.telemetry.ingest import validated_frames
from twinloop.telemetry.report import IngestReport
from twinloop.telemetry.sources.files import FileConfig, FileSource
from twinloop.telemetry.sources.prometheus import PrometheusConfig, PrometheusSource
from twinloop.telemetry.sources.twin import TwinConfig, TwinSource


def test_gpu_entities_get_dcgm_exporter_labels() -> None:
    labels = entity_labels("site0/row0/rack1/node5/gpu3", {"UUID": "GPU-x", "job": "j9", "gpu_kind": "h100-sxm"})
    assert labels == {"gpu": "3", "UUID": "GPU-x", "device": "nvidia3", "modelName": "h100-sxm",
                      "Hostname": "node5", "hpc_job": "j9", "entity": "site0/row0/rack1/node5/gpu3"}  # fmt: skip
    assert entity_labels("site0/row0/rack1", {}) == {"entity": "site0/row0/rack1"}


def test_latest_values_keep_newest_and_render_energy_in_mj() -> None:
    latest = LatestValues()
    e = "s/r/k/n0/gpu0"
    latest.update(Frame.from_long([2.0, 1.0], [e, e], ["DCGM_FI_DEV_POWER_USAGE"] * 2, [200.0, 100.0]))
    latest.update(Frame.from_long([1.5], [e], ["DCGM_FI_DEV_POWER_USAGE"], [150.0]))  # older: ignored
    latest.update(Frame.from_long([2.0], [e], ["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"], [12.5]))
    text = latest.render()
    assert "# TYPE DCGM_FI_DEV_POWER_USAGE gauge" in text
    assert "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter" in text
    assert 'DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="",device="nvidia0",modelName="",Hostname="n0",' in text
    assert text.count("DCGM_FI_DEV_POWER_USAGE{") == 1 and '"} 200\n' in text
    assert 'entity="s/r/k/n0/gpu0"} 12500\n' in text


def test_served_metrics_read_back_through_scrape_mode() -> None:
    frames = twin_like_frames(n_gpus=8, steps=3)
    with Exporter(listen="127.0.0.1:0") as exporter:
        exporter.feed(TwinSource(TwinConfig(), frames=frames)).join(5)
        url = f"http://127.0.0.1:{exporter.port}/metrics"
        resp = httpx.get(url)
        assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/plain; version=0.0.4")
        assert httpx.get(url.replace("/metrics", "/nope")).status_code == 404
        report = IngestReport()
        back = Frame.concat(list(validated_frames(PrometheusSource(PrometheusConfig(url=url, mode="scrape")), report)))
    assert report.ok
    _, ents, temp = back.to_dense("DCGM_FI_DEV_GPU_TEMP")
    _, ents0, temp0 = frames[-1].to_dense("DCGM_FI_DEV_GPU_TEMP")
    order = [ents0.index(e) for e in ents]
    assert np.allclose(temp[0], temp0[0, order])
    assert back.labels[ents[0]]["job"] == "llama-70b"


def test_feed_error_is_kept_and_listen_is_validated() -> None:
    with Exporter(listen="127.0.0.1:0") as exporter:
        exporter.feed(FileSource(FileConfig(path="/nonexistent/telemetry.csv"))).join(5)
        deadline = time.monotonic() + 5
        while exporter.feed_error is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert isinstance(exporter.feed_error, FileNotFoundError)
    with pytest.raises(InputError, match="HOST:PORT"):
        parse_listen("localhost")
    assert parse_listen(":9400") == ("127.0.0.1", 9400)
