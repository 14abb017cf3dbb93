"""Detector profiles per signal kind: selection, alarm spacing, and regressions on the packaged NAB series."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from twinloop.errors import InputError
from twinloop.lab.nab_windows import WindowScore, load_windows, score_alarms
from twinloop.ops.detect import load_variants
from twinloop.ops.detect.ewma_zscore import EwmaZScoreParams, typical_step
from twinloop.ops.detect.offline import SeriesBlock, detect_blocks, read_series
from twinloop.ops.detect.profiles import (
    PROFILES,
    UTILISATION_FLOOR_PCT,
    detect_with_profile,
    select_profile,
    space_alarms,
    span_seconds,
)
from twinloop.ops.events import Detection, EventClass

NAB = Path(__file__).resolve().parents[3] / "benchmarks" / "data" / "nab"
EC2 = "realKnownCause/ec2_request_latency_system_failure.csv"
MT = "realKnownCause/machine_temperature_system_failure.csv"


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
        (["machine_temperature_system_failure.csv", "value"], "temperature"),
        (["ec2_cpu_utilization_24ae8d.csv", "value"], "utilisation"),
        (["CPUUtilization"], "utilisation"),  # CloudWatch metric names are CamelCase
        (["ReadLatency"], "latency"),
        (["TargetResponseTime"], "latency"),
        (["TravelTime_387.csv", "value"], "latency"),
        (["speed_6005.csv", "value"], "latency"),  # road speed and occupancy: the same road state as travel time
        (["occupancy_t4013.csv", "value"], "latency"),
        (["hbm_temperature"], "temperature"),
        (["retry_attempts"], "generic"),  # "attempt" holds "temp" but is a count
        (["tempdb_size"], "generic"),
        (["http_responses_5xx"], "generic"),  # a count of responses, not a response time
        (["response_time_ms"], "latency"),
        (["fan_speed_rpm"], "generic"),  # a fan's speed is no road state
        (["pump_speed_pct"], "utilisation"),
        (["value"], "generic"),  # nothing known: the generic robust profile, no floor in percentage points
        ([], "generic"),
        (["exchange-2_cpc_results.csv", "value"], "generic"),  # a price: a 0.5 point floor would blind it
        (["grok_asg_anomaly.csv", "value"], "generic"),
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


def _nab_score(file: str, key: str, profile: str) -> WindowScore:
    load_variants()
    blocks, _ = read_series(NAB / file, ["value"])
    dets = detect_with_profile(blocks, select_profile(profile, [file, "value"]))
    ts = blocks[0].ts
    return score_alarms([d.ts for d in dets], load_windows(NAB / "combined_windows.json", key), ts)


#: The packaged NAB series (benchmarks/data/nab), scored with ``--profile auto`` (which must pick the series'
#: kind from its file name): windows, fewest found, most false alarms, lowest NAB score. Fitted series must stay
#: at their documented result (docs/sections/calibration-detect.md, "Real labelled series (NAB)"); held-out ones
#: at their measured result with a margin, so a detector change that loses a window or adds alarms fails here.
#: The figures in the comments are the old scorer's; with NAB's (probationary period, false positives weighted by
#: their distance after a window) no window moves, false alarms fall or stay and the NAB scores rise or stay within
#: 0.1 (docs/sections/calibration-detect.md, "Scored as NAB scores"), so the bands hold unchanged.
NAB_EXPECTED = [
    # fitted: ec2 latency 3/3, 0 false alarms, NAB 83.3
    ("ec2_request_latency_system_failure.csv", "realKnownCause", 3, 3, 1, 75.0),
    # fitted: machine temperature 3/3, 2 false alarms over 79 days, NAB 95.0
    ("machine_temperature_system_failure.csv", "realKnownCause", 3, 3, 3, 88.0),
    # held out: ambient temperature 1/2, 1 false alarm, NAB 44.7
    ("ambient_temperature_system_failure.csv", "realKnownCause", 2, 1, 2, 35.0),
    # fitted (utilisation floors): RDS CPU 1/2, 0 false alarms, NAB 46.4
    ("rds_cpu_utilization_cc0c53.csv", "realAWSCloudwatch", 2, 1, 1, 38.0),
    # fitted (utilisation floors): idle EC2 CPU 0/2, 0 false alarms (was 2/2 with 29), NAB 0.0: its windows hold
    # single-sample spikes, which the profile's 2-sample persistence ignores by design
    ("ec2_cpu_utilization_24ae8d.csv", "realAWSCloudwatch", 2, 0, 0, -1.0),
    # fitted (utilisation floors): busy EC2 CPU 1/2, 0 false alarms, NAB 38.0
    ("ec2_cpu_utilization_5f5533.csv", "realAWSCloudwatch", 2, 1, 1, 30.0),
    # fitted (novelty gate; held out until its 20 false alarms were inspected): bursty EC2 CPU 2/2, 2 false alarms
    # (was 20, 19 of them routine bursts), NAB 87.7
    ("ec2_cpu_utilization_fe7f93.csv", "realAWSCloudwatch", 2, 2, 3, 80.0),
    # held out: RDS CPU 2/2, 1 false alarm, NAB 89.8 (scored once after the novelty gate; 90.1 before it)
    ("rds_cpu_utilization_e47b3b.csv", "realAWSCloudwatch", 2, 2, 3, 75.0),
    # Unnamed signals (docs/sections/calibration-detect.md, "Unnamed signals"). Road series, latency profile since the
    # road-state routing (generic before it): fitted speed 0/1, 0; fitted occupancy 1/2, 0, NAB 45.3 (43.4 generic).
    # Since the profiles keep their baselines across a hole shorter than a day ("Holes in the time axis", NAB's
    # scorer): fitted speed 0/1, 2 false alarms, -11.0; occupancy 1/2, 3, 40.3
    ("speed_6005.csv", "realTraffic", 1, 0, 2, -12.0),
    ("occupancy_6005.csv", "realTraffic", 2, 1, 3, 35.0),
    # held out, scored once after the routing: speed 1/3, 4, NAB 24.7 (generic 1/3, 3, 26.3); speed 1/2, 0, NAB 49.9
    # (generic 0/2); occupancy 0/2, 1, NAB -2.8 (generic the same). With the holes kept: speed 2/3, 4, 55.8;
    # speed 2/2, 0, 99.7; occupancy 1/2, 2, 41.1
    ("speed_7578.csv", "realTraffic", 3, 2, 5, 45.0),
    ("speed_t4013.csv", "realTraffic", 2, 2, 1, 90.0),
    ("occupancy_t4013.csv", "realTraffic", 2, 1, 3, 30.0),
    # held-out travel times, latency: 1/3, 5, 23.9 and 0/1, 2, -11.0 with the stock hole rule; with the holes kept
    # 3/3, 18, 63.2 and 1/1, 24, -33.6 (its one window found, at the price of many single extreme averages paged)
    ("TravelTime_387.csv", "realTraffic", 3, 3, 20, 50.0),
    ("TravelTime_451.csv", "realTraffic", 1, 1, 26, -45.0),
    # hourly cost per click, generic: fitted 0/2, 0; held out 3/3, 1 false alarm, NAB 93.0 (default 1/3, 6, 22.2).
    # Since generic judges a strongly cyclic series against the same time of earlier days ("generic judges a cyclic
    # series", NAB's scorer): fitted 1/2, 2, 41.1; held out (old, for the record) 3/3, 6, 82.1 (95.0 before)
    ("exchange-2_cpc_results.csv", "realAdExchange", 2, 1, 3, 35.0),
    ("exchange-3_cpc_results.csv", "realAdExchange", 3, 3, 7, 75.0),
    # Fresh held-out round ("A fresh held-out round"), generic, with the cyclic-series branch: fitted CPM 2/2, 4, 83.2
    # (0/2, 0, 0.0 before); held out (fresh), scored once before and once after the change: CPM 1/1, 5, 68.0 (0/1, 1,
    # -5.5 before); CPC 0/3, 1, -1.8 and CPM 0/4, 1, -1.4 (unchanged); keyboard series 0/2, 2, -5.5 and 0/2, 5, -11.2
    # (unchanged, no strong cycle)
    ("exchange-2_cpm_results.csv", "realAdExchange", 2, 2, 5, 75.0),
    ("exchange-3_cpm_results.csv", "realAdExchange", 1, 1, 6, 60.0),
    ("exchange-4_cpc_results.csv", "realAdExchange", 3, 0, 2, -5.0),
    ("exchange-4_cpm_results.csv", "realAdExchange", 4, 0, 2, -5.0),
    ("rogue_agent_key_hold.csv", "realKnownCause", 2, 0, 3, -10.0),
    ("rogue_agent_key_updown.csv", "realKnownCause", 2, 0, 6, -16.0),
    # More CloudWatch series (docs/sections/calibration-detect.md, "More held-out CloudWatch series"), generic: fitted
    # disk-write bytes 1/1, 9 false alarms, NAB 49.3 (7, 57.8 with the holes kept and NAB's scorer); fitted
    # network-in bytes 2/2, 8, 73.3; held out, scored once:
    # disk-write bytes 1/3, 2, 27.2; auto-scaling group 1/3, 12, 8.8; network-in (4 days) 0/2, 1, -2.8
    ("ec2_disk_write_bytes_1ef3de.csv", "realAWSCloudwatch", 1, 1, 10, 40.0),
    ("ec2_network_in_5abac7.csv", "realAWSCloudwatch", 2, 2, 9, 65.0),
    ("ec2_disk_write_bytes_c0d644.csv", "realAWSCloudwatch", 3, 1, 3, 20.0),
    ("grok_asg_anomaly.csv", "realAWSCloudwatch", 3, 1, 13, 0.0),
    ("iio_us-east-1_i-a2eb1cd9_NetworkIn.csv", "realAWSCloudwatch", 2, 0, 2, -10.0),
    # nabasg: auto-scaling group CPU utilisation (docs/sections/calibration-detect.md, "NAB's auto-scaling group CPU
    # utilisation"), utilisation, held out (asg), scored once with the shipped code: 1/1, 24 false alarms, NAB -34.2
    ("cpu_utilization_asg_misconfiguration.csv", "realKnownCause", 1, 1, 26, -40.0),
    # Second fresh round (NAB's artificial series; docs/sections/calibration-detect.md, "A second fresh held-out
    # round"), scored once with the shipped code. No window (artificialNoAnomaly: false alarms only, no normalised
    # score): fitted daily cycle without noise 0 false alarms (2 in the probationary period); held out square wave 0;
    # held out flat line 0, which must stay 0 (an alarm on a constant is nonsense whatever the design).
    ("art_daily_no_noise.csv", "artificialNoAnomaly", 0, 0, 1, None),
    ("art_daily_perfect_square_wave.csv", "artificialNoAnomaly", 0, 0, 1, None),
    ("art_flatline.csv", "artificialNoAnomaly", 0, 0, 0, None),
    # held out noisy daily cycle and uniform noise without a fault (copied later, scored once): 0 false alarms each
    ("art_daily_small_noise.csv", "artificialNoAnomaly", 0, 0, 1, None),
    ("art_noisy.csv", "artificialNoAnomaly", 0, 0, 1, None),
    # held out, one window each, both missed with no false alarm (NAB 0.0): extra single spikes of a routine height
    # (generic); bursts of 1-3 units read as percent by ``auto`` (the word "load"), under the utilisation floor
    ("art_increase_spike_density.csv", "artificialWithAnomaly", 1, 0, 1, -6.0),
    ("art_load_balancer_spikes.csv", "artificialWithAnomaly", 1, 0, 1, -6.0),
    # day-shape faults of a noisy daily cycle (copied later), found by phase_z on the day, one novelty_z false alarm
    # the morning after: fitted flat middle 1/1, 2, 88.1; held out (scored once) jumps down 1/1, 1, 83.7 and no
    # daytime rise 1/1, 1, 88.0; jumps up found by novelty_z at the first high sample, 1/1, 0, 92.9
    ("art_daily_flatmiddle.csv", "artificialWithAnomaly", 1, 1, 3, 80.0),
    ("art_daily_jumpsdown.csv", "artificialWithAnomaly", 1, 1, 2, 75.0),
    ("art_daily_jumpsup.csv", "artificialWithAnomaly", 1, 1, 1, 85.0),
    ("art_daily_nojump.csv", "artificialWithAnomaly", 1, 1, 2, 80.0),
]


@pytest.mark.parametrize(("file", "folder", "windows", "found", "max_false", "min_nab"), NAB_EXPECTED)
def test_auto_profile_on_packaged_nab_series(
    file: str, folder: str, windows: int, found: int, max_false: int, min_nab: float | None
) -> None:
    score = _nab_score(file, f"{folder}/{file}", "auto")
    assert score.windows == windows
    assert score.found >= found
    assert score.false_alarms <= max_false
    if min_nab is None:  # no labelled window: NAB's normalised score is undefined
        assert windows == 0 and math.isnan(score.nab_score)
    else:
        assert score.nab_score > min_nab


def test_default_detectors_on_nab_unchanged() -> None:
    """The GPU-telemetry defaults are not tuned on NAB: their documented results there must not move (a change
    here means the defaults changed, which moves the twin's detection results too)."""
    ec2 = _nab_score("ec2_request_latency_system_failure.csv", EC2, "default")
    assert (ec2.found, ec2.false_alarms) == (1, 0)
    mt = _nab_score("machine_temperature_system_failure.csv", MT, "default")
    # 16 false alarms since the scorer counts rows as NAB does (17 alarms before: two detectors on one row)
    assert (mt.found, mt.false_alarms) == (2, 16)


def test_typical_step_is_the_quantum_or_the_noise_scale() -> None:
    """Property check of the step floor's estimate: on a random walk over a grid of quantum q (with float jitter
    far below q) it is q; on white noise about 0.95 σ (median |N(0, 2σ²)|); a constant column has no step."""
    rng = np.random.default_rng(1)
    for q in (0.066, 0.5, 7.0):
        levels = np.cumsum(rng.choice([-1, 0, 0, 1], size=2000))
        walk = 3.0 + q * levels + rng.choice([0.0, 1e-12], size=2000)
        noise = rng.normal(40.0, q, 2000)
        window = np.column_stack([walk, noise, np.full(2000, 0.134), np.full(2000, np.nan)])
        step = typical_step(window)
        assert step[0] == pytest.approx(q, rel=1e-6)
        assert step[1] == pytest.approx(0.954 * q, rel=0.08)
        assert step[2] == 0.0 and step[3] == 0.0


def _idle_cpu(rng: np.random.Generator, n: int) -> np.ndarray:
    """A near-idle VM's CPU % at 5 min, like NAB's ec2_cpu_utilization_24ae8d: mostly 0.134 with ±0.002 jitter,
    a quarter of the samples one quantum (0.066) lower, a few one quantum higher."""
    v = 0.134 + rng.choice([0.0, 0.002, -0.002], size=n, p=[0.6, 0.2, 0.2])
    u = rng.random(n)
    v[u < 0.25] = 0.066
    v[u > 0.97] = 0.2
    return np.asarray(v, dtype=np.float64)


def test_step_floor_reads_a_quantum_as_one_step_not_tens_of_sigmas() -> None:
    """The robust z on a quantised idle CPU: without the step floor its MAD is the ±0.002 jitter and quantum flips
    alarm all day; with it (``step_floor`` 1) the flips are quiet and a real 2 h rise to 3 % still alarms."""
    rng = np.random.default_rng(2)
    n = 4 * 288
    t = np.asarray(1.7e9 + 300.0 * np.arange(n), dtype=np.float64)
    v = _idle_cpu(rng, n)
    rise = slice(3 * 288, 3 * 288 + 24)
    v[rise] = 3.0
    block = SeriesBlock("cpu_pct", t, ("vm0",), v.reshape(-1, 1))
    load_variants()
    params = {"robust": True, "threshold": 6.0, "window_s": 86400.0, "refresh_s": 3600.0, "warmup_s": 21600.0,
              "min_persistence": 2, "persistence_s": 600.0, "smooth_s": 0.0, "flap_jumps": 1e9}  # fmt: skip
    outside = [d for d in detect_blocks([block], ["ewma_zscore"], **params) if not t[rise.start] <= d.ts < t[rise.stop]]
    assert len(outside) > 10
    floored = detect_blocks([block], ["ewma_zscore"], step_floor=1.0, **params)
    assert floored and all(t[rise.start] <= d.ts < t[rise.stop] for d in floored)


def test_gap_s_keeps_a_robust_baseline_across_a_hole_shorter_than_it() -> None:
    """A 5-min series with a 40 min hole (8 intervals) and a 15-sigma spike 20 samples after it: the base re-warms
    after 5 intervals and misses the spike (warm-up 6 h); with ``gap_s`` = a day the day-long robust baseline is kept
    and the spike alarms. A hole longer than ``gap_s`` still re-warms (no alarm: the spike falls in the warm-up)."""
    rng = np.random.default_rng(5)
    n = 3 * 288
    t = 1.7e9 + 300.0 * np.arange(n, dtype=np.float64)
    t[2 * 288 :] += 2400.0  # the hole: 40 min between rows 575 and 576
    v = 50.0 + rng.normal(0.0, 1.0, n)
    v[2 * 288 + 20] = 65.0
    block = SeriesBlock("speed", t, ("road",), v.reshape(-1, 1))
    load_variants()
    params = {"robust": True, "threshold": 8.0, "window_s": 86400.0, "refresh_s": 3600.0, "warmup_s": 21600.0,
              "min_persistence": 1, "persistence_s": 0.0, "smooth_s": 0.0, "flap_jumps": 1e9}  # fmt: skip
    spike = t[2 * 288 + 20]
    assert not [d for d in detect_blocks([block], ["ewma_zscore"], **params) if d.ts == spike]
    kept = detect_blocks([block], ["ewma_zscore"], gap_s=86400.0, **params)
    assert [d.ts for d in kept] == [spike]
    assert not [d for d in detect_blocks([block], ["ewma_zscore"], gap_s=1800.0, **params) if d.ts == spike]
    with pytest.raises(InputError):
        EwmaZScoreParams(gap_s=-1.0)


def test_utilisation_floor_in_points_of_capacity() -> None:
    """The utilisation profile on an idle VM: a held 1-point rise is below its floor of 0.5 points × threshold 6
    (quiet), a held 5-point rise is an incident; ``generic`` (no floor in points) pages the 1-point rise too,
    since on this series it is fifteen quanta."""
    assert UTILISATION_FLOOR_PCT == 0.5
    rng = np.random.default_rng(3)
    n = 5 * 288
    t = np.asarray(1.7e9 + 300.0 * np.arange(n), dtype=np.float64)
    small, big = slice(2 * 288, 2 * 288 + 36), slice(4 * 288, 4 * 288 + 36)
    v = _idle_cpu(rng, n)
    v[small] += 1.0
    v[big] += 5.0
    block = SeriesBlock("cpu_pct", t, ("vm0",), v.reshape(-1, 1))
    load_variants()
    util = detect_with_profile([block], select_profile("utilisation"))
    assert len(util) >= 1 and all(t[big.start] <= d.ts < t[big.stop] for d in util)
    generic = detect_with_profile([block], select_profile("generic"))
    assert any(t[small.start] <= d.ts < t[small.stop] for d in generic)


def test_temperature_profile_ignores_routine_dips_that_end() -> None:
    """Synthetic check of the temperature profile's design, at 5 min: two weeks of 90 ± 3 °C (a daily cycle),
    with a 2 h dip on day 8 to 60 °C (routine: it ends before the 4 h persistence) and a 12 h fall to 40 °C on day 11
    (a failure): one alarm, in the fall, about 4 h after it starts."""
    dt_s = 300.0
    n = 14 * 288
    t = np.asarray(1.7e9 + dt_s * np.arange(n), dtype=np.float64)
    v = 90.0 + 3.0 * np.sin(2 * np.pi * t / 86400.0) + np.random.default_rng(0).normal(0.0, 0.5, n)
    dip = slice(8 * 288, 8 * 288 + 24)
    fall = slice(11 * 288, 11 * 288 + 144)
    v[dip] = 60.0
    v[fall] = 40.0
    block = SeriesBlock("temp_c", t, ("m0",), v.reshape(-1, 1))
    load_variants()
    dets = detect_with_profile([block], select_profile("temperature"))
    assert [round((d.ts - t[fall.start]) / 3600.0) for d in dets] == [4]


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
