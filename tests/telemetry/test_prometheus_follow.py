"""Follow mode of the Prometheus source, without a server: decoding range answers, the catch-up window, frames,
and a poll that fails (the real server is in tests/ops/live/test_prometheus_watch.py)."""

from __future__ import annotations

import json
import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twinloop.telemetry.sources.prometheus import PrometheusConfig, PrometheusSource
from twinloop.telemetry.sources.prometheus_follow import (
    Follower,
    RangeAnswer,
    decode_range,
    grid_floor,
    key_labels,
    poll_values,
    range_frame,
    value_query,
)

T0 = 1_700_000_010.0  # on the 1 s and the 15 s grid


def _answer(series: list[tuple[dict[str, str], list[tuple[float, str]]]]) -> bytes:
    result = [{"metric": m, "values": [[t, v] for t, v in pts]} for m, pts in series]
    return json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}}).encode()


def test_decode_range_reads_values_including_special_ones() -> None:
    body = _answer([({"entity": "a/gpu0"}, [(T0, "1.5"), (T0 + 1, "NaN")]), ({"entity": "a/gpu1"}, [(T0, "+Inf")])])
    ans = decode_range(body)
    assert ans.labels == [{"entity": "a/gpu0"}, {"entity": "a/gpu1"}]
    assert ans.counts.tolist() == [2, 1]
    assert ans.ts_s.tolist() == [T0, T0 + 1, T0]
    assert ans.value[0] == 1.5 and math.isnan(ans.value[1]) and ans.value[2] == math.inf


def test_decode_range_names_errors_and_bad_bodies() -> None:
    with pytest.raises(ValueError, match="bad_data: parse error"):
        decode_range(b'{"status":"error","errorType":"bad_data","error":"parse error"}')
    with pytest.raises(ValueError, match="not a Prometheus answer"):
        decode_range(b"<html>proxy error</html>")
    bad = decode_range(_answer([({"gpu": "0"}, [(T0, "12"), (T0 + 1, "n/a")])]))
    assert bad.value[0] == 12.0 and math.isnan(bad.value[1])


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(
        st.lists(st.floats(allow_nan=False, allow_infinity=True, width=64), min_size=0, max_size=5),
        min_size=0,
        max_size=6,
    )
)
def test_decode_range_round_trips_every_point(values: list[list[float]]) -> None:
    series = [({"entity": f"n/gpu{i}"}, [(T0 + k, repr(v) if math.isfinite(v) else ("+Inf" if v > 0 else "-Inf"))
                                           for k, v in enumerate(vs)]) for i, vs in enumerate(values)]  # fmt: skip
    ans = decode_range(_answer(series))
    assert ans.counts.tolist() == [len(vs) for vs in values]
    assert ans.value.tolist() == [v for vs in values for v in vs]


def test_key_labels_prefer_entity_then_hostname() -> None:
    assert key_labels([{"entity": "a", "gpu": "0"}, {"entity": "b"}]) == ("entity",)
    assert key_labels([{"Hostname": "n1", "gpu": "0"}, {"Hostname": "n2", "gpu": "1"}]) == ("Hostname", "gpu")
    assert key_labels([{"Hostname": "n1", "gpu": "0"}, {"instance": "h:9400", "gpu": "1"}]) == ("instance", "gpu")
    assert value_query("DCGM_FI_DEV_GPU_TEMP", ("Hostname", "gpu")) == "max by (Hostname, gpu) (DCGM_FI_DEV_GPU_TEMP)"


def test_window_reads_each_step_once_and_caps_a_long_stall() -> None:
    f = Follower(period_s=1.0, discover_s=60.0, max_catchup_steps=10)
    f.discovered(T0, ["DCGM_FI_DEV_POWER_USAGE"], [{"entity": "a/gpu0"}])
    assert f.window(T0 + 0.4) == (T0, T0)
    f.next_ts = T0 + 1
    assert f.window(T0 + 0.9) is None
    assert f.window(T0 + 3.2) == (T0 + 1, T0 + 3)
    assert f.window(T0 + 100.5) == (T0 + 91, T0 + 100)  # older steps are given up (the loop reports the gap)
    f.steps_per_poll = 4
    assert f.window(T0 + 100.5) == (T0 + 91, T0 + 94)  # a backlog is read a few steps per poll
    assert f.wake_at(T0 + 0.2, failed=True) == T0 + 1 and f.wake_at(T0 + 5.2, failed=False) == T0 + 1
    assert grid_floor(T0 + 14.999, 15.0) == T0 and grid_floor(T0 + 15.0, 15.0) == T0 + 15


def test_range_frame_maps_entities_fields_and_units() -> None:
    src = PrometheusSource(PrometheusConfig(entity_prefix="dc/r0/k0"))
    power = RangeAnswer([{"Hostname": "n1", "gpu": "0"}, {"Hostname": "n1", "gpu": "1"}], np.array([2, 1]),
                        np.array([T0, T0 + 1, T0]), np.array([500.0, 510.0, 300.0]))  # fmt: skip
    energy = RangeAnswer([{"Hostname": "n1", "gpu": "1"}], np.array([1]), np.array([T0]), np.array([2.5e6]))
    frame = range_frame({"DCGM_FI_DEV_POWER_USAGE": power, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": energy},
                        src.entity_of, "test")  # fmt: skip
    assert frame.entities == ("dc/r0/k0/n1/gpu0", "dc/r0/k0/n1/gpu1")
    rows = sorted(zip(frame.entity_names().tolist(), frame.field_names().tolist(), frame.ts_s.tolist(),
                      frame.value.tolist(), strict=True))  # fmt: skip
    energy_field = frame.fields[1]
    assert rows == sorted([
        ("dc/r0/k0/n1/gpu0", "DCGM_FI_DEV_POWER_USAGE", T0, 500.0),
        ("dc/r0/k0/n1/gpu0", "DCGM_FI_DEV_POWER_USAGE", T0 + 1, 510.0),
        ("dc/r0/k0/n1/gpu1", "DCGM_FI_DEV_POWER_USAGE", T0, 300.0),
        ("dc/r0/k0/n1/gpu1", energy_field, T0, 2500.0),  # dcgm-exporter's mJ → J
    ])  # fmt: skip


def test_a_failed_metric_keeps_the_whole_poll_unread() -> None:
    f = Follower(period_s=1.0, discover_s=60.0, max_catchup_steps=300)
    f.discovered(T0, ["A", "B"], [{"entity": "n/gpu0"}])
    ok = RangeAnswer([{"entity": "n/gpu0"}], np.array([1]), np.array([T0]), np.array([1.0]))
    errors: list[str] = []
    answers: dict[str, RangeAnswer | str] = {"max by (entity) (A)": ok, "max by (entity) (B)": "B: HTTP 503: busy"}
    with ThreadPoolExecutor(2) as pool:
        frame = poll_values(f, answers.__getitem__, pool, (T0, T0), lambda lab: lab["entity"], "t", errors.append)
        assert frame is None and errors == ["B: HTTP 503: busy"] and f.next_ts == T0
        answers["max by (entity) (B)"] = ok
        frame = poll_values(f, answers.__getitem__, pool, (T0, T0), lambda lab: lab["entity"], "t", errors.append)
    assert frame is not None and len(frame) == 2 and f.next_ts == T0 + 1
