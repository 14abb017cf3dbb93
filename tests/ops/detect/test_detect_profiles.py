"""Detector profiles per signal kind: selection, alarm spacing, and a regression on a real NAB series."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from twinloop.errors import InputError
from twinloop.ops.detect import load_variants
from twinloop.ops.detect.offline import read_series
from twinloop.ops.detect.profiles import (
    PROFILES,
    detect_with_profile,
    select_profile,
    space_alarms,
    span_seconds,
)
from twinloop.ops.detect.windows import load_windows, score_alarms
from twinloop.ops.events import Detection, EventClass

NAB = Path(__file__).resolve().parents[3] / "benchmarks" / "data" / "nab"
EC2 = "realKnownCause/ec2_request_latency_system_failure.csv"


@pytest.mark.parametrize(
    ("hints", "expected"),
    [
        (["gpu_temp_c"], "temperature"),
        (["ambient_temperature_system_failure.csv", "value"], "temperature"),
        (["ec2_request_latency_system_failure.csv"], "latency"),
        (["ttft_ms"], "latency"),
        (["cpu_utilization_asg_misconfiguration.csv"], "utilisation"),
        (["sm_util"], "utilisation"),
        (["rds_cpu_utilization_cc0c53.csv", "value"], "utilisation"),  # "_c" inside a name is no unit
        (["gpu_power_w", "inlet_c"], "temperature"),
        (["value"], "utilisation"),  # nothing known: the generic robust profile
        ([], "utilisation"),
    ],
)
def test_auto_picks_profile_by_name(hints: list[str], expected: str) -> None:
    assert select_profile("auto", hints).name == expected


def test_named_profiles_and_unknown_name() -> None:
    for name in PROFILES:
        assert select_profile(name, ["gpu_temp_c"]).name == name  # an explicit name ignores the hints
    with pytest.raises(InputError, match="allowed: default, latency"):
        select_profile("fast", [])


def test_span_clamps_to_sample_bounds() -> None:
    # 1 day at 300 s = 288 samples, inside [60, 2000]; at 1 s it would be 86400 samples: clamped to 2000.
    assert span_seconds((86400.0, 60, 2000), 300.0) == pytest.approx(86400.0)
    assert span_seconds((86400.0, 60, 2000), 1.0) == pytest.approx(2000.0)
    # Hourly data: a 1 h refresh is one sample, a 6 h warm-up at least 30 samples.
    assert span_seconds((21600.0, 30, 600), 3600.0) == pytest.approx(30 * 3600.0)


def _det(ts: float, entity: str = "a") -> Detection:
    return Detection(
        ts=ts, entity=entity, source="value", score=9.0, kind="anomaly",
        event_class=EventClass.UNCLASSIFIED, detector="ewma_zscore",
    )  # fmt: skip


def test_space_alarms_keeps_one_per_spacing_per_series() -> None:
    dets = [_det(0.0), _det(10.0), _det(10.0, "b"), _det(99.0), _det(100.0), _det(150.0)]
    kept = space_alarms(dets, 100.0)
    assert [(d.entity, d.ts) for d in kept] == [("a", 0.0), ("b", 10.0), ("a", 100.0)]


def test_latency_profile_finds_ec2_failures() -> None:
    """NAB realKnownCause/ec2_request_latency_system_failure (packaged, 4032 samples at 5 min): the latency
    profile must catch every labelled failure window with at most one false alarm over the 14 days. The
    default detectors catch 1 of 3 here (their flap suppression hides the failure's burst of jumps)."""
    load_variants()
    blocks, _ = read_series(NAB / "ec2_request_latency_system_failure.csv", ["value"])
    dets = detect_with_profile(blocks, select_profile("auto", ["ec2_request_latency_system_failure.csv"]))
    ts = blocks[0].ts
    score = score_alarms([d.ts for d in dets], load_windows(NAB / "combined_windows.json", EC2), ts[0], ts[-1])
    assert score.windows == 3
    assert score.found == 3
    assert score.false_alarms <= 1
    assert score.nab_score > 60.0


def test_cli_profile_keeps_json_shape_and_rejects_unknown(tmp_path: Path, cli: Callable[..., Any]) -> None:
    path = tmp_path / "svc_latency_ms.csv"
    rows = [f"{1.7e9 + 300.0 * i:.0f},{45.0 + (i % 7) * 0.5 + (60.0 if i == 250 else 0.0)}" for i in range(400)]
    path.write_text("ts,value\n" + "\n".join(rows) + "\n", encoding="utf-8")
    plain = json.loads(cli("detect", str(path), "--json").stdout)
    res = cli("detect", str(path), "--profile", "auto", "--json")
    assert res.exit_code == 0, res.stderr
    prof = json.loads(res.stdout)
    assert prof.keys() == plain.keys()
    assert prof["detectors"] == ["ewma_zscore"]  # auto → latency, from the file name
    assert [d["ts"] for d in prof["detections"]] == [1.7e9 + 300.0 * 250]
    bad = cli("detect", str(path), "--profile", "fast", "--json")
    assert bad.exit_code == 2
    assert "--profile" in bad.stderr
