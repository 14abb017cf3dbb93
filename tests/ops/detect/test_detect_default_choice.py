"""`twinloop detect FILE` with no option: the default detectors for GPU telemetry, the kind profile for slower data.

The choice is the library's (:func:`twinloop.ops.detect.profiles.choose_profile`); the CLI reports it (text and
``--json``), and ``--profile`` / ``--detector`` still win.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from twinloop.ops.detect.offline import SeriesBlock, detect_blocks, read_series
from twinloop.ops.detect.profiles import TELEMETRY_MAX_DT_S, choose_profile, detect_with_profile, select_profile
from twinloop.telemetry.fields import DCGM_FI_DEV_GPU_TEMP


def _block(dt_s: float, n: int = 50, field: str = "", names: tuple[str, ...] = ("value",)) -> SeriesBlock:
    ts = np.asarray(1.7e9 + dt_s * np.arange(n), dtype=np.float64)
    return SeriesBlock(field, ts, names, np.ones((n, len(names))))


@pytest.mark.parametrize(
    ("dt_s", "layout", "field", "hints", "expected"),
    [
        (1.0, "wide", "", ["ec2_cpu_utilization.csv", "value"], "default"),  # 1 s: telemetry, whatever the name
        (TELEMETRY_MAX_DT_S, "wide", "", ["rds_cpu_utilization.csv", "value"], "default"),  # the bound is inclusive
        (61.0, "wide", "", ["rds_cpu_utilization.csv", "value"], "utilisation"),
        (300.0, "wide", "", ["ec2_request_latency.csv", "value"], "latency"),
        (3600.0, "wide", "", ["ambient_temperature.csv", "value"], "temperature"),
        (300.0, "wide", "", ["orders.csv", "value"], "generic"),  # no name says the kind
        (300.0, "nvidia-smi", "", ["smi.csv", "temperature.gpu"], "default"),  # nvidia-smi: always GPU telemetry
        (300.0, "long", DCGM_FI_DEV_GPU_TEMP, ["dcgm.parquet"], "default"),  # DCGM fields: GPU telemetry
        (300.0, "wide-entity", DCGM_FI_DEV_GPU_TEMP, ["dcgm.csv"], "default"),
        (300.0, "prometheus", DCGM_FI_DEV_GPU_TEMP, ["temps.json"], "default"),  # a saved query_range answer
        (300.0, "prometheus", "node_load1", ["load.json"], "utilisation"),
        (300.0, "long", "queue_depth", ["svc.parquet"], "generic"),  # the schema with service fields: by cadence
    ],
)
def test_choice_by_cadence_and_layout(dt_s: float, layout: str, field: str, hints: list[str], expected: str) -> None:
    choice = choose_profile([_block(dt_s, field=field)], layout, [*hints, field])
    assert choice.profile.name == expected
    assert choice.reason  # the CLI prints it


def test_reason_names_the_word_that_chose_or_how_to_say_the_kind() -> None:
    """A new user reads why: the word and the name it was found in, or (generic) how to name the kind."""
    named = choose_profile([_block(300.0)], "wide", ["machine_temperature_system_failure.csv", "value"])
    assert named.profile.name == "temperature" and "'temp' in 'machine_temperature_system_failure.csv'" in named.reason
    suffix = choose_profile([_block(300.0)], "wide", ["svc.csv", "p99_ms"])
    assert suffix.profile.name == "latency" and "'_ms' in 'p99_ms'" in suffix.reason
    unnamed = choose_profile([_block(300.0)], "wide", ["server_metrics.csv", "value"])
    assert unnamed.profile.name == "generic" and "--profile utilisation" in unnamed.reason


def test_single_sample_and_mixed_cadence() -> None:
    # One sample: no cadence to judge, the default (the CLI refuses the file before this anyway).
    assert choose_profile([_block(300.0, n=1)], "wide", ["cpu.csv"]).profile.name == "default"
    # Several blocks: the median of their cadences decides (two of three at 5 min).
    blocks = [_block(1.0, field="a"), _block(300.0, field="b"), _block(300.0, field="c")]
    assert choose_profile(blocks, "long", ["cpu_util"]).profile.name == "utilisation"


def test_default_profile_equals_the_default_detectors(tmp_path: Path) -> None:
    """The CLI runs a data-chosen ``default`` as plain detector names (keeping its progress bar): the same
    detections as through the profile, so GPU telemetry's results do not move."""
    rng = np.random.default_rng(0)
    v = 55.0 + 0.5 * rng.standard_normal((400, 2))
    v[300:, 0] += 8.0
    block = SeriesBlock("", np.asarray(1.7e9 + np.arange(400.0)), ("a", "b"), v)
    from twinloop.ops.detect import load_variants

    load_variants()
    via_profile = detect_with_profile([block], select_profile("default"))
    assert via_profile and via_profile == detect_blocks([block], select_profile("default").detector_names)


def _csv(path: Path, dt_s: float, n: int = 600) -> Path:
    """A CPU series with a lasting step from 10 % to 40 % at sample 450 (found by any profile)."""
    rng = np.random.default_rng(1)
    v = 10.0 + rng.normal(0.0, 1.0, n)
    v[450:] += 30.0
    path.write_text("timestamp,value\n" + "".join(f"{1.7e9 + i * dt_s:.0f},{x:.3f}\n" for i, x in enumerate(v)))
    return path


def test_cli_reports_the_choice(tmp_path: Path, cli_json: Callable[..., Any], cli: Callable[..., Any]) -> None:
    slow = cli_json("detect", str(_csv(tmp_path / "cpu_utilization.csv", 300.0)))
    assert slow["profile"] == "utilisation" and "300 s" in slow["profile_reason"]
    assert slow["detectors"] == select_profile("utilisation").detector_names
    assert any(abs(d["ts"] - (1.7e9 + 450 * 300.0)) <= 900.0 for d in slow["detections"])
    fast = cli_json("detect", str(_csv(tmp_path / "cpu_utilization_1s.csv", 1.0)))
    assert fast["profile"] == "default" and fast["detectors"] == ["ewma_zscore", "cusum"]
    blocks, _ = read_series(tmp_path / "cpu_utilization_1s.csv")
    from twinloop.ops.detect import load_variants

    load_variants()
    assert [d["ts"] for d in fast["detections"]] == [d.ts for d in detect_blocks(blocks)]  # today's defaults
    text = cli("detect", str(tmp_path / "cpu_utilization.csv")).stdout
    assert "profile utilisation" in text and "300 s" in text


def test_explicit_options_win(tmp_path: Path, cli: Callable[..., Any]) -> None:
    path = _csv(tmp_path / "cpu_utilization.csv", 300.0)
    res = json.loads(cli("detect", str(path), "--detector", "cusum", "--json").stdout)
    assert res["profile"] is None and res["profile_reason"] == "--detector" and res["detectors"] == ["cusum"]
    res = json.loads(cli("detect", str(path), "--profile", "default", "--json").stdout)
    assert res["profile"] == "default" and res["detectors"] == ["ewma_zscore", "cusum"]
    res = json.loads(cli("detect", str(path), "--profile", "latency", "--json").stdout)
    assert res["profile"] == "latency" and res["profile_reason"] == "--profile latency"
    fast = _csv(tmp_path / "gpu_temp_c.csv", 1.0)
    res = json.loads(cli("detect", str(fast), "--profile", "auto", "--json").stdout)
    assert res["profile"] == "temperature"  # --profile auto on 1 s data: the name decides, not the cadence
