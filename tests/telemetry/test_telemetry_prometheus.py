"""Prometheus text format and the Prometheus source (against a fake HTTP API; the real server is in the
integration test): label mapping, unit scaling, range queries, a server that is down or slow."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from telemetry_helpers import T0
from tests.servers import free_port

from twinloop.telemetry.exporter import LatestValues
from twinloop.telemetry.frame import Frame
from twinloop.telemetry.ingest import validated_frames
from twinloop.telemetry.promtext import parse_line, parse_text
from twinloop.telemetry.report import IngestReport
from twinloop.telemetry.sources.prometheus import PrometheusConfig, PrometheusSource


def _run(cfg: PrometheusConfig) -> tuple[Frame, IngestReport]:
    report = IngestReport()
    return Frame.concat(list(validated_frames(PrometheusSource(cfg), report))), report


def test_parse_dcgm_exporter_lines() -> None:
    s = parse_line('DCGM_FI_DEV_SM_CLOCK{gpu="0", UUID="GPU-60", Hostname="n1",note="a \\"q\\" \\\\"} 1410')
    assert s is not None and s.name == "DCGM_FI_DEV_SM_CLOCK" and s.value == 1410.0
    assert s.labels == {"gpu": "0", "UUID": "GPU-60", "Hostname": "n1", "note": 'a "q" \\'}
    assert parse_line("# HELP x y") is None
    nan = parse_line("up NaN 1700000000000")
    assert nan is not None and math.isnan(nan.value) and nan.ts_ms == 1_700_000_000_000
    with pytest.raises(ValueError):
        parse_line('x{gpu="0" 1')


def test_exporter_text_parses_back_with_escaped_labels() -> None:
    entity = 's/r/k/"n"\\x/gpu1'
    latest = LatestValues()
    latest.update(Frame.from_long([1.0], [entity], ["DCGM_FI_DEV_GPU_TEMP"], [61.5], labels={entity: {"job": "a\nb"}}))
    report = IngestReport()
    (sample,) = parse_text(latest.render(), "t", report)
    assert report.ok and sample.value == 61.5
    assert sample.labels["entity"] == entity and sample.labels["pod"] == "a\nb" and sample.labels["gpu"] == "1"


@settings(max_examples=200, deadline=None)
@given(garbage=st.lists(st.text(max_size=80), max_size=10))
def test_text_parser_never_crashes_and_valid_lines_land(garbage: list[str]) -> None:
    good = 'DCGM_FI_DEV_POWER_USAGE{gpu="3"} 512.25'
    text = "\n".join([good, *garbage, good.replace("512.25", "99")])
    report = IngestReport()
    samples = parse_text(text, "fuzz", report)
    values = [s.value for s in samples if s.name == "DCGM_FI_DEV_POWER_USAGE" and s.labels == {"gpu": "3"}]
    assert values[0] == 512.25 and values[-1] == 99.0


def test_instant_query_maps_labels_and_scales_energy(fake_prometheus: Callable[..., str]) -> None:
    url = fake_prometheus()
    frame, report = _run(PrometheusConfig(url=url, entity_prefix="site0/row0/rack2"))
    assert report.problems == {"nan": 1}
    ts, ents, power = frame.to_dense("DCGM_FI_DEV_POWER_USAGE")
    assert ents == ("site0/row0/rack2/node7/gpu0", "site0/row0/rack2/node7/gpu1")
    assert power[0].tolist() == [303.0, 313.0] and ts.tolist() == [T0 + 45]
    energy = frame.to_dense("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")[2]
    assert energy[0, 0] == pytest.approx((1_000_000 + 4_500_000 * 3) / 1000.0)  # mJ → J
    assert frame.labels["site0/row0/rack2/node7/gpu1"]["job"] == "job42"


def test_range_query_returns_every_point(fake_prometheus: Callable[..., str]) -> None:
    url = fake_prometheus()
    frame, _ = _run(PrometheusConfig(url=url, mode="range", start_s=T0, end_s=T0 + 30, step_s=15))
    ts, _, power = frame.to_dense("DCGM_FI_DEV_POWER_USAGE")
    assert ts.tolist() == [T0, T0 + 15, T0 + 30] and power[:, 1].tolist() == [310.0, 311.0, 312.0]


def test_server_down_is_counted_not_raised() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    frame, report = _run(PrometheusConfig(url=url, queries=("up", "DCGM_FI_DEV_GPU_TEMP"), timeout_s=1))
    assert len(frame) == 0
    assert report.problems == {"source_error": 2}
    assert report.examples["source_error"][0].startswith(f"{url}/api/v1/query: up: ConnectError")


def test_slow_server_times_out_and_is_counted(fake_prometheus: Callable[..., str]) -> None:
    url = fake_prometheus(delay_s=1.0)
    frame, report = _run(PrometheusConfig(url=url, timeout_s=0.2, polls=2, period_s=0))
    assert len(frame) == 0 and report.problems == {"source_error": 2}
    assert "no answer within 0.2 s" in report.examples["source_error"][0]


def test_error_answer_is_counted(fake_prometheus: Callable[..., str]) -> None:
    url = fake_prometheus()
    _, report = _run(PrometheusConfig(url=url + "/nothing-here"))
    assert report.problems == {"source_error": 1} and "HTTP 404" in report.examples["source_error"][0]


def test_dcgm_exporter_scrape_keeps_profiling_fields_and_kubernetes_labels() -> None:
    from telemetry_helpers import DATA, serving

    body = (DATA / "dcgm_exporter_k8s.prom").read_bytes()
    with serving(body) as url:
        frame, report = _run(PrometheusConfig(url=url, mode="scrape", entity_prefix="dc/r1/k2"))
    assert report.ok, report.to_dict()  # nothing dropped: every field is known
    scraped = {line.split("{")[0] for line in body.decode().splitlines() if line.startswith("DCGM_")}
    assert set(frame.fields) == scraped and len(frame) == 2 * len(scraped)
    busy, idle = "dc/r1/k2/gpu-node-017/gpu0", "dc/r1/k2/gpu-node-017/gpu1"
    assert frame.labels[busy]["pod"] == "llama3-70b-worker-3" and frame.labels[busy]["namespace"] == "ml-train"
    assert frame.labels[busy]["container"] == "pytorch" and "pod" not in frame.labels[idle]
    assert frame.labels[busy]["DCGM_FI_DRIVER_VERSION"] == "550.54.15"
    _, ents, nvlink = frame.to_dense("DCGM_FI_PROF_NVLINK_TX_BYTES")
    assert ents == (busy, idle) and nvlink[0].tolist() == [45678901234.0, 0.0]
    _, _, energy = frame.to_dense("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")
    assert energy[0, 0] == 98765432.1  # mJ on the wire, J in the store
    # ...and the exporter publishes the same pod labels again (round trip through the twin-side exporter).
    latest = LatestValues()
    latest.update(frame)
    again = latest.render()
    assert 'pod="llama3-70b-worker-3"' in again and 'namespace="ml-train"' in again and 'container="pytorch"' in again
