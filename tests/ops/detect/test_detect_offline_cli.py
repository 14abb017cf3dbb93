"""`twinloop detect FILE`: CSV and Parquet, wide and long, bad input → exit 2 with one clear line."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from twinloop.errors import InputError
from twinloop.lab.detector_data import Fault, SyntheticCluster, fleet_entities
from twinloop.ops.detect.offline import detect_blocks, read_series


def wide_csv(path: Path, n: int = 400, step_at: int = 300, dt_s: float = 1.0) -> Path:
    rng = np.random.default_rng(0)
    temp = 55.0 + 0.5 * rng.standard_normal(n)
    temp[step_at:] += 8.0
    power = 500.0 + 5.0 * rng.standard_normal(n)
    lines = ["timestamp,temp_c,power_w"] + [f"{1.7e9 + i * dt_s:.1f},{temp[i]:.3f},{power[i]:.2f}" for i in range(n)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_wide_csv_json(tmp_path: Path, cli_json: Callable[..., Any]) -> None:
    out = cli_json("detect", str(wide_csv(tmp_path / "w.csv")))
    assert out["layout"] == "wide" and out["samples"] == 400 and out["dt_s"] == pytest.approx(1.0)
    hits = out["detections"]
    assert hits, "the 16 sigma step must be found"
    assert {h["entity"] for h in hits} == {"temp_c"}
    first = min(h["ts"] for h in hits)
    assert 0 <= first - (1.7e9 + 300) < 30
    assert {h["kind"] for h in hits} == {"anomaly", "change_point"}
    assert all(h["class"] == "unclassified" for h in hits)


def test_field_and_detector_options_and_table_output(tmp_path: Path, cli: Callable[..., Any]) -> None:
    path = wide_csv(tmp_path / "w.csv")
    res = cli("detect", str(path), "--field", "power_w", "--detector", "cusum", "--json")
    assert res.exit_code == 0
    out = json.loads(res.stdout)
    assert out["series"] == 1 and out["detectors"] == ["cusum"] and out["detections"] == []
    res = cli("detect", str(path), "--detector", "page_hinkley")
    assert res.exit_code == 0
    assert "temp_c" in res.stdout and "detections" in res.stdout and "wide" in res.stdout


def test_slow_sampling_adapts(tmp_path: Path, cli_json: Callable[..., Any]) -> None:
    out = cli_json("detect", str(wide_csv(tmp_path / "w.csv", dt_s=60.0)))
    assert out["dt_s"] == pytest.approx(60.0)
    first = min(h["ts"] for h in out["detections"])
    assert 0 <= first - (1.7e9 + 300 * 60.0) <= 10 * 60.0


def test_out_of_order_duplicates_and_nans_are_counted(tmp_path: Path, cli_json: Callable[..., Any]) -> None:
    path = tmp_path / "messy.csv"
    rows = [f"{t},{50 + (t % 3) * 0.1}" for t in range(100)]
    rows[10], rows[11] = rows[11], rows[10]  # one pair swapped
    rows.insert(50, "49,50.0")  # a duplicate timestamp
    rows[70] = "69,"  # an empty cell
    rows[71] = "70,nan"
    path.write_text("t,value\n" + "\n".join(rows) + "\n")
    out = cli_json("detect", str(path))
    assert out["out_of_order_rows"] == 1
    assert out["duplicate_rows"] == 1
    assert out["nan_count"] == {"value": 2}
    assert out["detections"] == []


def long_parquet(path: Path) -> Path:
    entities = fleet_entities(1, 1)  # 64 GPUs
    sim = SyntheticCluster(entities, (Fault("coolant", tuple(range(64)), 200.0, None, 15.0),), seed=2)
    cols: dict[str, list[Any]] = {"ts": [], "entity": [], "field": [], "value": []}
    for t in range(280):
        s = sim.sample(float(t))
        for f in ("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_SM_CLOCK"):
            cols["ts"] += [float(t)] * len(entities)
            cols["entity"] += entities
            cols["field"] += [f] * len(entities)
            cols["value"] += s.fields[f].tolist()
    pq.write_table(pa.table(cols), path)
    return path


def test_long_parquet_runs_detectors_and_the_pipeline(tmp_path: Path, cli_json: Callable[..., Any]) -> None:
    out = cli_json("detect", str(long_parquet(tmp_path / "long.parquet")))
    assert out["layout"] == "long" and out["series"] == 3 * 64
    temps = [d for d in out["detections"] if d["field"] == "DCGM_FI_DEV_GPU_TEMP"]
    assert temps and min(d["ts"] for d in temps) >= 200.0
    cooling = [i for i in out["incidents"] if i["class"] == "cooling_degradation"]
    assert len(cooling) == 1
    assert cooling[0]["root"] == "dc/r00/k00" and cooling[0]["n_members"] == 64
    assert cooling[0]["start_ts"] - 200.0 < 30.0


@pytest.mark.parametrize(
    ("content", "suffix", "needle"),
    [
        ("ts,a,b\n1,2,3\n2,3\n3,4,5\n", ".csv", "line 3"),
        ("a,b\nx,y\nz,w\n", ".csv", "no value column"),
        ("ts,a\n1,2\n2,x\n3,4\n", ".csv", "a: line 3: non-numeric value 'x'"),
        ("ts,a\n", ".csv", "no rows"),
        ("ts,a\n1,2\n", ".csv", "at least 2"),
        ("not a parquet file", ".parquet", "malformed file"),
    ],
)
def test_bad_input_exits_2_with_one_line(
    tmp_path: Path, cli: Callable[..., Any], content: str, suffix: str, needle: str
) -> None:
    path = tmp_path / f"bad{suffix}"
    path.write_text(content)
    res = cli("detect", str(path), "--json")
    assert res.exit_code == 2
    assert res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and str(path) in lines[0]


def test_unknown_options_and_missing_file_exit_2(tmp_path: Path, cli: Callable[..., Any]) -> None:
    path = wide_csv(tmp_path / "w.csv")
    res = cli("detect", str(path), "--detector", "cusun")
    assert res.exit_code == 2 and "did you mean cusum" in res.stderr
    res = cli("detect", str(path), "--field", "nope")
    assert res.exit_code == 2 and "unknown column 'nope'" in res.stderr
    res = cli("detect", str(tmp_path / "missing.csv"))
    assert res.exit_code == 2 and "file not found" in res.stderr


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=300))
def test_reader_never_crashes_on_garbage(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "garbage.csv"
    path.write_bytes(data)
    try:
        blocks, report = read_series(path)
    except InputError:
        return
    detect_blocks(blocks)
    assert report.rows >= 1


def test_long_csv_bad_lines_are_counted_by_the_telemetry_reader(tmp_path: Path, cli_json: Callable[..., Any]) -> None:
    rows = ["ts,entity,field,value"]
    for t in range(120):
        for g in range(2):
            value = 60.0 + 0.1 * ((t * 7 + g) % 5) + (15.0 if t >= 90 and g == 0 else 0.0)
            rows.append(f"{t},dc/r01/k01/n01/g{g},DCGM_FI_DEV_GPU_TEMP,{value}")
    rows.insert(40, "39,dc/r01/k01/n01/g0,DCGM_FI_DEV_GPU_TEMP")  # truncated
    rows.insert(41, "39,dc/r01/k01/n01/g1,DCGM_FI_DEV_GPU_TEMP,hot")  # not a number
    path = tmp_path / "long.csv"
    path.write_text("\n".join(rows) + "\n")
    out = cli_json("detect", str(path))
    assert out["layout"] == "long" and out["series"] == 2
    assert sum(out["problems"].values()) == 2
    hits = {d["entity"] for d in out["detections"]}
    assert hits == {"dc/r01/k01/n01/g0"}


def test_counters_become_rates_and_code_fields_are_left_to_rules(tmp_path: Path, cli_json: Callable[..., Any]) -> None:
    rows = ["ts,entity,field,value"]
    for t in range(200):
        rows.append(f"{t},dc/r01/k01/n01/g0,DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION,{600.0 * t + (t % 3)}")
        rows.append(f"{t},dc/r01/k01/n01/g0,DCGM_FI_DEV_CLOCKS_EVENT_REASONS,{4 if (t // 7) % 2 else 0}")
    path = tmp_path / "counters.csv"
    path.write_text("\n".join(rows) + "\n")
    out = cli_json("detect", str(path))
    assert out["series"] == 2
    assert out["detections"] == []  # a steadily rising energy counter is a constant power, not an anomaly


def test_label_and_text_columns_are_not_analysed(tmp_path: Path, cli_json: Callable[..., Any]) -> None:
    """A labelled benchmark file (NAB's older layout: ``timestamp,value,label,notes``; Yahoo's ``is_anomaly``)
    runs on its values: the label is the answer, not a signal, and a notes column is no reason to stop."""
    rows = ["timestamp,value,label,notes,is_anomaly"]
    for i in range(400):
        step = 8.0 if i >= 300 else 0.0
        rows.append(f"{1.7e9 + i:.0f},{55.0 + step + 0.3 * ((i * 7919) % 13 - 6) / 6:.3f},{int(i >= 300)},"
                    f"{'APB' if i == 300 else ''},{int(i >= 300)}")  # fmt: skip
    path = tmp_path / "labelled.csv"
    path.write_text("\n".join(rows) + "\n")
    out = cli_json("detect", str(path))
    assert set(out["skipped_columns"]) == {"label", "notes", "is_anomaly"}
    assert {h["entity"] for h in out["detections"]} == {"value"}
    explicit = cli_json("detect", str(path), "--field", "label")  # named: analysed
    assert explicit["skipped_columns"] == {} and {h["entity"] for h in explicit["detections"]} <= {"label"}


def test_a_text_column_is_skipped_but_a_typo_in_a_numeric_one_is_an_error(
    tmp_path: Path, cli: Callable[..., Any]
) -> None:
    path = tmp_path / "mixed.csv"
    path.write_text("ts,host,load\n1,a,0.5\n2,b,0.6\n3,c,0.7\n")
    res = cli("detect", str(path), "--json")
    assert res.exit_code == 0 and json.loads(res.stdout)["skipped_columns"] == {
        "host": "text column (no value reads as a number)"
    }
    path.write_text("ts,load\n1,0.5\n2,0.6x\n3,0.7\n")
    res = cli("detect", str(path), "--json")
    assert res.exit_code == 2 and "non-numeric value '0.6x'" in res.stderr
    path.write_text("ts,label,notes\n1,0,\n2,1,x\n")
    res = cli("detect", str(path), "--json")
    assert res.exit_code == 2 and "skipped: label, notes" in res.stderr
