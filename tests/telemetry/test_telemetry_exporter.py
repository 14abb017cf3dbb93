"""Exporter: dcgm-exporter names and labels, unit scaling, and a scrape read back by the Prometheus source."""

from __future__ import annotations

import time

import httpx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from telemetry_helpers import twin_like_frames

from twinloop.errors import InputError
from twinloop.telemetry.exporter import Exporter, LatestValues, entity_labels, parse_listen, reference_render
from twinloop.telemetry.frame import Frame
from twinloop.telemetry.ingest import validated_frames
from twinloop.telemetry.report import IngestReport
from twinloop.telemetry.sources.files import FileConfig, FileSource
from twinloop.telemetry.sources.prometheus import PrometheusConfig, PrometheusSource
from twinloop.telemetry.sources.twin import TwinConfig, TwinSource


def test_gpu_entities_get_dcgm_exporter_labels() -> None:
    labels = entity_labels("site0/row0/rack1/node5/gpu3", {"UUID": "GPU-x", "job": "j9", "gpu_kind": "h100-sxm"})
    assert labels == {"gpu": "3", "UUID": "GPU-x", "device": "nvidia3", "modelName": "h100-sxm",
                      "Hostname": "site0-row0-rack1-node5", "pci_bus_id": "00000000:48:00.0", "pod": "j9",
                      "namespace": "twinloop", "container": "main", "hpc_job": "j9",
                      "entity": "site0/row0/rack1/node5/gpu3"}  # fmt: skip
    assert entity_labels("site0/row0/rack1", {}) == {"entity": "site0/row0/rack1"}
    # The twin's ids (g<i>) are GPUs too; its nodes are numbered per rack, so Hostname takes the whole path.
    a, b = entity_labels("dc1/r01/k01/n01/g2", {}), entity_labels("dc1/r01/k02/n01/g2", {})
    assert a["gpu"] == "2" and a["Hostname"] != b["Hostname"] and a["UUID"] != b["UUID"]
    assert a["UUID"] == entity_labels("dc1/r01/k01/n01/g2", {})["UUID"]  # stable across calls
    assert "pod" not in a  # no job, no pod labels


def test_latest_values_keep_newest_and_render_energy_in_mj() -> None:
    latest = LatestValues()
    e = "s/r/k/n0/gpu0"
    latest.update(Frame.from_long([2.0, 1.0], [e, e], ["DCGM_FI_DEV_POWER_USAGE"] * 2, [200.0, 100.0]))
    latest.update(Frame.from_long([1.5], [e], ["DCGM_FI_DEV_POWER_USAGE"], [150.0]))  # older: ignored
    latest.update(Frame.from_long([2.0], [e], ["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"], [12.5]))
    text = latest.render()
    assert "# TYPE DCGM_FI_DEV_POWER_USAGE gauge" in text
    # dcgm-exporter's counter names have no _total: exposed untyped under the same name.
    assert "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION untyped" in text and "_total{" not in text
    assert text.count("DCGM_FI_DEV_POWER_USAGE{") == 1
    assert 'DCGM_FI_DEV_POWER_USAGE{Hostname="s-r-k-n0",UUID="GPU-' in text and "} 200.0\n" in text
    assert 'entity="s/r/k/n0/gpu0",gpu="0",' in text and "} 12500.0\n" in text


def test_labels_follow_the_latest_frame() -> None:
    latest = LatestValues()
    e = "s/r/k/n0/gpu0"
    latest.update(Frame.from_long([1.0], [e], ["DCGM_FI_DEV_POWER_USAGE"], [1.0], labels={e: {"job": "a"}}))
    assert 'pod="a"' in latest.render()
    latest.update(Frame.from_long([2.0], [e], ["DCGM_FI_DEV_POWER_USAGE"], [1.0], labels={e: {}}))
    assert "pod=" not in latest.render()


def test_body_is_rendered_once_per_period_and_cached() -> None:
    ents = [f"s/r/k/n0/gpu{i}" for i in range(4)]
    exporter = Exporter(listen="127.0.0.1:0", render_period_s=3600.0)
    exporter.latest.update(Frame.from_dense(1.0, ents, {"DCGM_FI_DEV_POWER_USAGE": np.arange(4.0)}))
    first = exporter.body()
    assert exporter.body() is first and exporter.renders == 1
    exporter.latest.update(Frame.from_dense(2.0, ents, {"DCGM_FI_DEV_POWER_USAGE": np.arange(4.0) + 1}))
    assert exporter.body() is first and exporter.renders == 1  # new data, but the period has not passed
    exporter.render_period_s = 0.0
    assert exporter.body() != first and exporter.renders == 2
    assert exporter.body() is exporter.body() and exporter.renders == 2  # no new data: no new render


def test_concurrent_scrapes_use_a_bounded_pool() -> None:
    import threading
    from concurrent.futures import ThreadPoolExecutor

    frames = twin_like_frames(n_gpus=64, steps=1)
    with Exporter(listen="127.0.0.1:0", max_threads=4, max_pending=128) as exporter:
        exporter.feed(TwinSource(TwinConfig(), frames=frames)).join(5)
        url = f"http://127.0.0.1:{exporter.port}/metrics"
        before = threading.active_count()
        with ThreadPoolExecutor(32) as pool:
            codes = list(pool.map(lambda _: httpx.get(url, timeout=10).status_code, range(64)))
        assert codes == [200] * 64
        workers = [t for t in threading.enumerate() if t.name.startswith("twinloop-exporter-http")]
        assert len(workers) <= 4 and threading.active_count() <= before + 4
        assert exporter.renders == 1


def test_non_loopback_listen_needs_allow_remote() -> None:
    with pytest.raises(InputError, match="allow-remote"):
        Exporter(listen="0.0.0.0:0").start()
    with Exporter(listen="0.0.0.0:0", allow_remote=True) as exporter:
        assert httpx.get(f"http://127.0.0.1:{exporter.port}/metrics").status_code == 200


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


def test_scrapes_during_a_render_get_the_previous_body_at_once() -> None:
    import threading

    ents = ["s/r/k/n0/gpu0"]
    exporter = Exporter(listen="127.0.0.1:0", render_period_s=0.0)
    exporter.latest.update(Frame.from_dense(1.0, ents, {"DCGM_FI_DEV_POWER_USAGE": np.ones(1)}))
    first = exporter.body()
    exporter.latest.update(Frame.from_dense(2.0, ents, {"DCGM_FI_DEV_POWER_USAGE": np.ones(1) * 2}))
    started = threading.Event()

    def slow_render() -> str:
        started.set()
        time.sleep(0.5)
        return "new\n"

    exporter.latest.render = slow_render  # type: ignore[method-assign]
    renderer = threading.Thread(target=exporter.body)
    renderer.start()
    assert started.wait(5)
    t0 = time.monotonic()
    assert exporter.body() is first and time.monotonic() - t0 < 0.2  # did not wait for the render
    renderer.join(5)
    assert exporter.body() == b"new\n" and exporter.renders == 2


# ----- the vectorized render against prometheus_client's own rendering of the same cache ----------------------
def _parsed(text: str) -> list[tuple[str, str, str, list[tuple[str, dict[str, str], str]]]]:
    from prometheus_client.parser import text_string_to_metric_families

    # repr: NaN compares unequal to itself, its spelling does not.
    return [(f.name, f.type, f.documentation, [(s.name, s.labels, repr(s.value)) for s in f.samples])
            for f in text_string_to_metric_families(text)]  # fmt: skip


_ENTITY = st.sampled_from(["s/r/k/n0/gpu0", "s/r/k/n0/gpu1", "s/r/k/n1/g7", "s/r/k/n1", "s/r/k", "cdu-1",
                           'odd "name"\\x', "s/r/k/n9/gpu12"])  # fmt: skip
_FIELD = st.sampled_from(["DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
                          "FACILITY_CUSTOM_THING", "power.draw"])  # fmt: skip
_VALUE = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, -0.0, 1e7, 12345678.9]))
_LABELS = st.dictionaries(st.sampled_from(["job", "UUID", "gpu_kind", "Hostname", "namespace", "model"]),
                          st.text(alphabet='ab"\\\n é', max_size=4), max_size=3)  # fmt: skip


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.lists(st.tuples(st.floats(0, 10), _ENTITY, _FIELD, _VALUE), min_size=1, max_size=12),
                          st.dictionaries(_ENTITY, _LABELS, max_size=3)), min_size=1, max_size=4))  # fmt: skip
def test_render_matches_prometheus_client_sample_for_sample(updates: list) -> None:  # type: ignore[type-arg]
    latest = LatestValues()
    for rows, labels in updates:
        ts, ents, flds, vals = zip(*rows, strict=True)
        latest.update(Frame.from_long(list(ts), list(ents), list(flds), list(vals), labels=labels))
        fast, slow = latest.render(), reference_render(latest)
        assert _parsed(fast) == _parsed(slow)
    # Values below 1e6 (where prometheus_client keeps Python's float spelling) give the very same bytes; the
    # margin keeps a value that float32 storage rounds up to 1e6 (999,999.99) out of it.
    if all(abs(v) < 9.9e5 or not np.isfinite(v) for rows, _ in updates for *_, v in rows):
        assert fast == slow


def test_render_follows_new_gpus_and_label_changes_at_fleet_scale() -> None:
    ents = [f"dc/row0/rack{i // 32}/node{i // 8}/gpu{i % 8}" for i in range(2048)]
    latest = LatestValues()
    power = np.arange(2048.0)
    latest.update(Frame.from_dense(1.0, ents[:1024], {"DCGM_FI_DEV_POWER_USAGE": power[:1024]}))
    assert latest.render().count("\nDCGM_FI_DEV_POWER_USAGE{") == 1024
    latest.update(Frame.from_dense(2.0, ents, {"DCGM_FI_DEV_POWER_USAGE": power + 1}, labels={ents[5]: {"job": "j"}}))
    text = latest.render()
    assert _parsed(text) == _parsed(reference_render(latest))
    assert text.count('pod="j"') == 1 and text.count("\nDCGM_FI_DEV_POWER_USAGE{") == 2048
    latest.update(Frame.from_dense(3.0, ents[:1], {"DCGM_FI_DEV_POWER_USAGE": np.array([-5.0])}))
    assert _parsed(latest.render()) == _parsed(reference_render(latest))


def test_gzip_level_zero_answers_uncompressed() -> None:
    ents = [f"s/r/k/n0/gpu{i}" for i in range(4)]
    with pytest.raises(InputError, match="gzip_level"):
        Exporter(gzip_level=10)
    for level, encoding in [(0, None), (1, "gzip")]:
        with Exporter(listen="127.0.0.1:0", gzip_level=level) as exporter:
            exporter.latest.update(Frame.from_dense(1.0, ents, {"DCGM_FI_DEV_POWER_USAGE": np.arange(4.0)}))
            resp = httpx.get(f"http://127.0.0.1:{exporter.port}/metrics", headers={"Accept-Encoding": "gzip"})
            assert resp.headers.get("content-encoding") == encoding
            assert _parsed(resp.text) == _parsed(reference_render(exporter.latest))
