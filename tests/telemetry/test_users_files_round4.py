"""Users' own telemetry files, round 4: ``nvidia-smi dmon`` logs, and the labels of a MIG GPU in a dcgm-exporter
scrape.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twinloop.errors import InputError
from twinloop.telemetry.fields import (
    DCGM_FI_DEV_FB_USED,
    DCGM_FI_DEV_GPU_TEMP,
    DCGM_FI_DEV_GPU_UTIL,
    DCGM_FI_DEV_MEM_CLOCK,
    DCGM_FI_DEV_MEM_COPY_UTIL,
    DCGM_FI_DEV_MEMORY_TEMP,
    DCGM_FI_DEV_PCIE_REPLAY_COUNTER,
    DCGM_FI_DEV_POWER_USAGE,
    DCGM_FI_DEV_SM_CLOCK,
)
from twinloop.telemetry.frame import Frame
from twinloop.telemetry.ingest import validated_frames
from twinloop.telemetry.report import IngestReport
from twinloop.telemetry.sources.nvidia_smi import NvidiaSmiConfig, NvidiaSmiParser, NvidiaSmiSource
from twinloop.telemetry.sources.prometheus import read_saved_scrape

FIXTURES = Path(__file__).parents[1] / "fixtures"
MIG_SCRAPE = FIXTURES / "users_round3" / "dcgm_mig.prom"  # one A100 (gpu 2) split into two MIG instances


def _saved_page(tmp_path: Path, lines: list[str], name: str) -> Path:
    """The scrape as ``curl ... >> f.prom`` saves it from an exporter that writes exposition timestamps."""
    stamped = [line if line.startswith("#") else f"{line} 1714564800000" for line in lines]
    path = tmp_path / name
    path.write_text("\n".join(stamped) + "\n")
    return path


def test_a_merged_mig_gpu_keeps_its_own_labels_not_its_last_instances(tmp_path: Path) -> None:
    lines = MIG_SCRAPE.read_text().splitlines()
    gpu2 = "site0/row0/rack0/n1/gpu2"
    want = {"gpu": "2", "UUID": "GPU-c", "device": "nvidia2", "modelName": "NVIDIA A100-SXM4-80GB", "Hostname": "n1"}
    for name, order in (("as-scraped.prom", lines), ("instances-reversed.prom", _instances_reversed(lines))):
        frame, problems = read_saved_scrape(_saved_page(tmp_path, order, name), IngestReport())
        # Before: GPU_I_ID "2" and GPU_I_PROFILE of whichever instance came last, as if the GPU were that instance.
        assert frame.labels[gpu2] == want, (name, frame.labels[gpu2])
        _, _, fb = frame.to_dense("DCGM_FI_DEV_FB_USED")
        assert fb.tolist() == [[30000.0]] and problems.get("NaN", 0) <= 1
    # A GPU without MIG keeps its own (pod mapping) labels as before.
    assert frame.labels["site0/row0/rack0/n1/gpu0"]["UUID"] == "GPU-a"
    assert "pod" in frame.labels["site0/row0/rack0/n1/gpu0"]


def _instances_reversed(lines: list[str]) -> list[str]:
    """The scrape with the two instances' lines of each metric swapped (an exporter's series order is not fixed)."""
    out = list(lines)
    idx = [i for i, line in enumerate(lines) if 'GPU_I_ID="' in line]
    for a, b in zip(idx[::2], idx[1::2], strict=True):
        out[a], out[b] = lines[b], lines[a]
    return out


# --- nvidia-smi dmon -------------------------------------------------------------------------------------------

DMON_DT = FIXTURES / "users_round4" / "dmon_pucvmet_dt.log"  # `nvidia-smi dmon -s pucvmet -o DT`, 2 GPUs, 40 s
DMON_T = FIXTURES / "users_round3" / "dmon.txt"  # `nvidia-smi dmon -o T`: time of day, no date
GPU0 = "site0/row0/rack0/n1/gpu0"


def _dmon_frame(path: Path, **options: Any) -> tuple[Frame, IngestReport]:
    report = IngestReport()
    cfg = NvidiaSmiConfig(path=str(path), node_prefix="site0/row0/rack0/n1", **options)
    frames = list(validated_frames(NvidiaSmiSource(cfg), report))
    return Frame.concat(frames), report


def test_a_dmon_log_is_read_into_dcgm_fields(tmp_path: Path) -> None:
    frame, report = _dmon_frame(DMON_DT, utc_offset_h=2.0)
    # 40 s x 2 GPUs x 11 mapped columns; the header repeated at second 20 is read as a header, not a row.
    assert len(frame) == 880 and report.problems == {"unavailable": 160, "unknown_column": 8}, report.to_dict()
    ts, ents, power = frame.to_dense(DCGM_FI_DEV_POWER_USAGE)
    assert ents == (GPU0, "site0/row0/rack0/n1/gpu1") and power[0].tolist() == [690.0, 687.0]
    # 2024-05-01 12:00:00 recorded at UTC+2 is 10:00:00 UTC; one sample a second.
    assert ts[0] == datetime(2024, 5, 1, 10, tzinfo=UTC).timestamp() and ts.size == 40 and set(np.diff(ts)) == {1.0}
    expect = {DCGM_FI_DEV_GPU_TEMP: 51.0, DCGM_FI_DEV_MEMORY_TEMP: 60.0, DCGM_FI_DEV_GPU_UTIL: 98.0,
              DCGM_FI_DEV_MEM_COPY_UTIL: 45.0, DCGM_FI_DEV_MEM_CLOCK: 2619.0, DCGM_FI_DEV_SM_CLOCK: 1980.0,
              DCGM_FI_DEV_FB_USED: 62000e6 / 2**20, DCGM_FI_DEV_PCIE_REPLAY_COUNTER: 0.0}  # fmt: skip
    for field, value in expect.items():
        assert frame.to_dense(field)[2][0, 0] == pytest.approx(value), field
    assert frame.labels[GPU0] == {"gpu": "0", "device": "nvidia0", "Hostname": "n1"}


def test_a_dmon_log_is_read_by_ingest_detect_and_watch(
    tmp_path: Path, cli: Callable[..., Any], cli_json: Callable[..., Any]
) -> None:
    """Before: ``nvidia-smi dmon output is not read (no date, abbreviated columns)``, exit 2, in all three."""
    out = cli_json("ingest", "nvidia-smi", str(DMON_DT), "--db", str(tmp_path / "t.duckdb"))
    assert out["rows_stored"] == 880 and out["rows_dropped"] == 0
    hint = cli("ingest", str(DMON_DT))  # the kind left out: the hint names the one that reads it
    assert hint.exit_code == 2 and f"`twinloop ingest nvidia-smi {DMON_DT}`" in hint.stderr
    found = cli_json("detect", str(DMON_DT))
    assert found["layout"] == "nvidia-smi" and found["samples"] == 40 and found["dt_s"] == 1.0
    # GPU 1 runs 9 C hotter and 285 MHz slower from second 30: found.
    hot = {(d["entity"].rsplit("/", 1)[-1], d["field"]) for d in found["detections"]}
    assert ("gpu1", DCGM_FI_DEV_GPU_TEMP) in hot and all(name == "gpu1" for name, _ in hot), hot
    res = cli("watch", f"nvidia-smi:{DMON_DT}")
    assert res.exit_code == 0 and "40 samples (end)" in res.stdout + res.stderr


def test_a_dmon_log_without_its_day_or_time_is_one_clear_error_everywhere(
    tmp_path: Path, cli: Callable[..., Any], cli_json: Callable[..., Any]
) -> None:
    no_time = tmp_path / "dmon.log"  # `nvidia-smi dmon > dmon.log`: no -o at all
    no_time.write_text("# gpu   pwr gtemp mtemp    sm   mem   enc   dec  mclk  pclk\n"
                       "# Idx     W     C     C     %     %     %     %   MHz   MHz\n"
                       "    0   312    51    60    98    45     0     0  2619  1980\n")  # fmt: skip
    date_only = tmp_path / "dmon-d.log"  # `-o D`
    date_only.write_text("#Date      gpu   pwr\n#YYYYMMDD  Idx     W\n 20240501    0   312\n")
    for path, why in ((no_time, "with no date or time"), (date_only, "with a date but no time of day"),
                      (DMON_T, "-o T output has the time of day but no date")):  # fmt: skip
        for args in (
            ("ingest", "nvidia-smi", str(path), "--db", str(tmp_path / "t.duckdb")),
            ("detect", str(path)),
            ("watch", f"nvidia-smi:{path}"),
        ):
            res = cli(*args)
            assert res.exit_code == 2, (args, res.stdout)
            line = res.stderr.strip().splitlines()[-1]
            assert line.startswith(f"error: {path}: line 1: nvidia-smi dmon") and why in line, line
            assert "-o DT" in line, line
    # The -o T log with its day given: read, and no time invented.
    out = cli_json("ingest", "nvidia-smi", str(DMON_T), "--db", str(tmp_path / "t2.duckdb"),
                   "--set", "start_date=2024-05-01", "--set", "utc_offset_h=0")  # fmt: skip
    assert out["rows_stored"] == 4 * 9 and out["rows_dropped"] == 0


def test_a_dmon_o_t_log_across_midnight_moves_to_the_next_day(tmp_path: Path) -> None:
    path = tmp_path / "t.log"
    rows = " 23:59:59      0    300\n 00:00:00      0    301\n 00:00:01      0    302\n"
    path.write_text("#Time        gpu    pwr\n#HH:MM:SS    Idx      W\n" + rows)
    frame, report = _dmon_frame(path, start_date=date(2024, 5, 1), utc_offset_h=0.0)
    ts, _, power = frame.to_dense(DCGM_FI_DEV_POWER_USAGE)
    start = datetime(2024, 5, 1, 23, 59, 59, tzinfo=UTC).timestamp()
    assert report.ok and ts.tolist() == [start, start + 1, start + 2] and power[:, 0].tolist() == [300, 301, 302]


def test_older_drivers_columns_crlf_bom_and_bad_rows(tmp_path: Path) -> None:
    """An older driver's ``temp`` (not ``gtemp``); CRLF and a BOM; a garbled, a truncated, a too-long row, a bad
    date and a non-number are counted and the rest is read; a unit other than the mapped one is not converted.
    """
    lines = [
        "#Date       Time        gpu   pwr  temp    sm   mem   enc   dec  mclk  pclk",
        "#YYYYMMDD   HH:MM:SS    Idx    kW     C     %     %     %     %   MHz   MHz",
        " 20240501   12:00:00      0    25    43    10     4    40     0  3499  1721",
        " 20240501   12:00:01      0    25    43    10     4    40     0  3499",
        " 20240501   12:00:02      0    25    43    10     4    40     0  3499  1721  99",
        " 2024-05-01 12:00:03      0    25    43    10     4    40     0  3499  1721",
        " 20240501   12:00:04      0    25    4x    10     4    40     0  3499  1721",
        "GPU 0 fell off the bus",
        " 20240501   12:00:05      0    25    44    10     4    40     0  3499  1721",
    ]
    path = tmp_path / "old.log"
    path.write_bytes(("\ufeff" + "\r\n".join(lines) + "\r\n").encode())
    frame, report = _dmon_frame(path, utc_offset_h=0.0)
    assert report.problems == {"unknown_column": 1, "truncated": 2, "parse_error": 3}, report.to_dict()
    assert frame.to_dense(DCGM_FI_DEV_GPU_TEMP)[2][:, 0].tolist() == [43.0, 44.0]
    assert DCGM_FI_DEV_POWER_USAGE not in frame.fields  # "kW" is not dmon's W: skipped, not scaled by guess


def test_a_dmon_log_with_no_row_kept_is_exit_2(tmp_path: Path, cli: Callable[..., Any]) -> None:
    path = tmp_path / "garbled.log"
    path.write_text("#Date       Time        gpu   pwr\n#YYYYMMDD   HH:MM:SS    Idx     W\n"
                    " 20240501   12:00:00      0   abc\n 20240501   12:00:01\n")  # fmt: skip
    for args in (("ingest", "nvidia-smi", str(path), "--db", str(tmp_path / "t.duckdb")), ("detect", str(path)),
                 ("watch", f"nvidia-smi:{path}")):  # fmt: skip
        res = cli(*args)
        assert res.exit_code == 2 and res.stderr.strip(), (args, res.stdout)
        assert len(res.stderr.strip().splitlines()[-1:]) == 1


_DMON_WORDS = st.sampled_from(["#", "#Date", "Time", "gpu", "Idx", "pwr", "gtemp", "temp", "sm", "fb", "-", "W",
                               "MB", "20240501", "12:00:00", "99999999", "25:61:61", "0", "-1", "1e309", "nan",
                               "0x10", "\ufeff", "\r", "#Entity"])  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(st.one_of(st.text(max_size=60), st.lists(_DMON_WORDS, max_size=12).map(" ".join)), max_size=12),
    start=st.none() | st.dates(min_value=date(1970, 1, 2), max_value=date(9998, 12, 30)),
)
def test_the_dmon_reader_never_crashes_on_garbage(lines: list[str], start: date | None) -> None:
    """Any text after a dmon header: rows, counted problems, or one InputError; never another exception."""
    cfg = NvidiaSmiConfig(path="fuzz.log", node_prefix="site0/row0/rack0/n1", utc_offset_h=0.0, start_date=start)
    parser = NvidiaSmiParser(cfg, "fuzz.log")
    report = IngestReport()
    try:
        for k, line in enumerate(["#Date Time gpu pwr", "#YYYYMMDD HH:MM:SS Idx W", *lines], start=1):
            parser.feed(line + "\n", k, report)
    except InputError as exc:
        assert "fuzz.log" in str(exc) and "\n" not in str(exc)
    frame = parser.flush()
    assert np.isfinite(frame.value).all() and np.isfinite(frame.ts_s).all()
