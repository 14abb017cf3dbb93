"""`twinloop detect` on files whose time column only numbers the samples, or that have none (Yahoo S5's
``timestamp`` 1, 2, 3 ..., a pandas index, the UCR archive's one value per line): before, a numbered file was read
as 1 Hz GPU telemetry (GPU default detectors) and a file without a time column was refused.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from twinloop.ops.detect.offline import read_series
from twinloop.ops.detect.time_axis import ASSUMED_INTERVAL_S, is_sample_index

N = 1500
SHIFT_AT = 1000


def _values() -> np.ndarray:
    """Noise around 100 that steps up by 20 sigma at sample ``SHIFT_AT`` for 60 samples."""
    v = 100.0 + 3.0 * np.random.default_rng(0).standard_normal(N)
    v[SHIFT_AT : SHIFT_AT + 60] += 60.0
    return v


def _yahoo(path: Path) -> Path:
    rows = ["timestamp,value,is_anomaly"] + [f"{i + 1},{x:.3f},0" for i, x in enumerate(_values())]
    path.write_text("\n".join(rows) + "\n")
    return path


def test_a_numbered_timestamp_is_a_sample_index_not_one_hertz_telemetry(
    tmp_path: Path, cli_json: Callable[..., Any]
) -> None:
    out = cli_json("detect", str(_yahoo(tmp_path / "A1_real_1.csv")))
    assert (out["time_axis"], out["interval_s"], out["interval_assumed"]) == ("index", ASSUMED_INTERVAL_S, True)
    assert out["profile"] == "generic"  # before: default, "sampled every 1 s"
    first = min(d["ts"] for d in out["detections"])
    # Reported in the file's own numbering (timestamp 1 is the first row, so the step is at SHIFT_AT + 1).
    assert SHIFT_AT + 1 <= first <= SHIFT_AT + 10


def test_the_interval_can_be_given(tmp_path: Path, cli_json: Callable[..., Any]) -> None:
    out = cli_json("detect", str(_yahoo(tmp_path / "y.csv")), "--interval-s", "3600")
    assert (out["time_axis"], out["dt_s"], out["interval_assumed"]) == ("index", 3600.0, False)
    assert out["detections"] and all(1 <= d["ts"] <= N for d in out["detections"])


def test_one_value_per_line_without_a_header(tmp_path: Path, cli_json: Callable[..., Any]) -> None:
    path = tmp_path / "UCR_Anomaly_001.txt"
    path.write_text("".join(f"{x:.4f}\n" for x in _values()))
    out = cli_json("detect", str(path))
    assert out["samples"] == N  # the first line is data, not a header
    assert out["time_axis"] == "index"
    assert SHIFT_AT <= min(d["ts"] for d in out["detections"]) <= SHIFT_AT + 10  # numbered from 0


def test_a_pandas_index_column(tmp_path: Path) -> None:
    path = tmp_path / "df.csv"
    path.write_text(",value\n" + "".join(f"{i},{x:.3f}\n" for i, x in enumerate(_values())))
    blocks, report = read_series(path)
    assert report.time_axis == "index" and blocks[0].names == ("value",)
    assert blocks[0].ts[1] - blocks[0].ts[0] == ASSUMED_INTERVAL_S


def test_seconds_stay_seconds(tmp_path: Path) -> None:
    """`ts` (the telemetry schema's name) counting 0, 1, 2 ... is a clock: GPU telemetry keeps its detectors."""
    path = tmp_path / "gpu.csv"
    path.write_text("ts,power_w\n" + "".join(f"{i},{x:.3f}\n" for i, x in enumerate(_values())))
    _, report = read_series(path)
    assert (report.time_axis, report.dt_s, report.interval_s) == ("clock", 1.0, None)


@pytest.mark.parametrize(
    ("content", "args", "needle"),
    [
        ("timestamp,value\n1.7e9,1\n1.7e9+60,2\n", ("--interval-s", "60"), "the file keeps time"),
        ("timestamp,value\n1,1\n2,2\n3,1\n", ("--interval-s", "0"), "allowed: seconds > 0"),
        ("a,b\nx,y\nz,w\n", (), "no value column"),
    ],
)
def test_bad_interval_or_no_values_exit_2_with_one_line(
    tmp_path: Path, cli: Callable[..., Any], content: str, args: tuple[str, ...], needle: str
) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(content.replace("1.7e9+60", "1700000060"))
    res = cli("detect", str(path), *args, "--json")
    assert res.exit_code == 2 and res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], lines


@given(st.integers(0, 1), st.integers(2, 500), st.sampled_from(["timestamp", "Time", " date ", "index", ""]))
def test_consecutive_integers_under_a_date_or_index_name_number_samples(start: int, n: int, name: str) -> None:
    assert is_sample_index(name, np.arange(start, start + n, dtype=np.float64))


@given(
    st.lists(st.one_of(st.integers(-2, 6).map(float), st.floats(allow_nan=True)), min_size=0, max_size=50),
    st.sampled_from(["timestamp", "ts", "t_s", "time_s", "index", "value"]),
)
def test_anything_else_is_no_sample_index(values: list[float], name: str) -> None:
    ts = np.asarray(values, dtype=np.float64)
    numbered = ts.size >= 2 and np.isfinite(ts).all() and ts[0] in (0.0, 1.0) and bool(np.all(np.diff(ts) == 1.0))
    assert is_sample_index(name, ts) == (numbered and name in ("timestamp", "index"))
