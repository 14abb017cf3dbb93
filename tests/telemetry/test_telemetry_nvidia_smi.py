"""nvidia-smi output parsing: header/units, noheader/nounits, N/A, truncated lines, garbage."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from telemetry_helpers import SMI_FILE, T0

from twinloop.errors import InputError
from twinloop.telemetry.frame import Frame
from twinloop.telemetry.ingest import validated_frames
from twinloop.telemetry.report import IngestReport
from twinloop.telemetry.sources.nvidia_smi import (
    NvidiaSmiConfig,
    NvidiaSmiParser,
    NvidiaSmiSource,
    parse_value,
)


def _read(path: Path, **kw: object) -> tuple[Frame, IngestReport]:
    opts: dict[str, object] = {"node_prefix": "s/r/k/n0", "utc_offset_h": 0.0, **kw}
    cfg = NvidiaSmiConfig(path=str(path), **opts)  # type: ignore[arg-type]
    report = IngestReport()
    return Frame.concat(list(validated_frames(NvidiaSmiSource(cfg), report))), report


def test_recorded_file_with_header_and_units() -> None:
    frame, report = _read(SMI_FILE)
    assert report.problems == {"truncated": 1, "unavailable": 2}
    assert report.examples["truncated"][0].startswith(f"{SMI_FILE}:9: 9 of 17 columns")
    ts, ents, power = frame.to_dense("DCGM_FI_DEV_POWER_USAGE")
    assert ts[0] == T0 and ents == ("s/r/k/n0/gpu0", "s/r/k/n0/gpu1")
    assert power[:, 0].tolist() == [71.2, 180.51, 455.33, 612.8]
    assert power[:3, 1].tolist() == [691.04, 698.2, 699.51]
    reasons = frame.to_dense("DCGM_FI_DEV_CLOCKS_EVENT_REASONS")[2]
    assert reasons[0].tolist() == [1.0, 4.0]
    assert frame.labels["s/r/k/n0/gpu1"]["modelName"] == "NVIDIA H100 80GB HBM3"


def test_noheader_nounits_uses_configured_columns(tmp_path: Path) -> None:
    p = tmp_path / "smi.csv"
    p.write_text("2023/11/14 22:13:20.500, 3, 250.5, 1980\n2023/11/14 22:13:21.500, 3, [N/A], 1965\n")
    frame, report = _read(p, columns=("timestamp", "index", "power.draw", "clocks.sm"))
    assert report.problems == {"unavailable": 1}
    assert frame.to_dense("DCGM_FI_DEV_SM_CLOCK")[2][:, 0].tolist() == [1980.0, 1965.0]
    assert frame.to_dense("DCGM_FI_DEV_SM_CLOCK")[0].tolist() == [T0 + 0.5, T0 + 1.5]


def test_timezone_offset_shifts_to_utc(tmp_path: Path) -> None:
    p = tmp_path / "smi.csv"
    p.write_text("2023/11/15 00:13:20.000, 0, 100\n")
    frame, _ = _read(p, columns=("timestamp", "index", "power.draw"), utc_offset_h=2.0)
    assert frame.ts_s.tolist() == [T0]


def test_parse_value_spellings() -> None:
    assert parse_value(" 250.50 W") == 250.5
    assert parse_value("0x0000000000000044") == 0x44
    assert parse_value("45 %") == 45.0
    assert parse_value("[Not Supported]") is None
    assert parse_value("Yes") == 1.0
    with pytest.raises(ValueError):
        parse_value("fast")


def test_live_without_binary_is_an_input_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("shutil.which", lambda name: None)
    with pytest.raises(InputError, match="nvidia-smi is not installed"):
        list(NvidiaSmiSource(NvidiaSmiConfig(samples=1)).frames(IngestReport()))


GOOD = "2023/11/14 22:13:20.000, 0, 300.0, 1500"


@settings(max_examples=150, deadline=None)
@given(garbage=st.lists(st.text(max_size=60), max_size=8))
def test_parser_never_crashes_and_valid_lines_land(garbage: list[str]) -> None:
    cfg = NvidiaSmiConfig(columns=("timestamp", "index", "power.draw", "clocks.sm"), node_prefix="n", utc_offset_h=0)
    parser = NvidiaSmiParser(cfg, "fuzz")
    report = IngestReport()
    lines = [GOOD, *garbage, GOOD.replace("22:13:20", "22:13:21")]
    for i, line in enumerate(lines, start=1):
        for part in line.splitlines() or [""]:
            parser.feed(part, i, report)
    frame = parser.flush()
    power = frame.to_dense("DCGM_FI_DEV_POWER_USAGE")
    assert T0 in power[0].tolist() and T0 + 1 in power[0].tolist()


def test_live_mode_against_a_fake_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A stand-in binary that prints two GPUs per sweep forever, like `-lms`.
    script = tmp_path / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\ni=0\nwhile true; do\n"
        '  echo "2023/11/14 22:13:2$i.000, 0, 100.$i, 1980"\n'
        '  echo "2023/11/14 22:13:2$i.000, 1, 200.$i, 1965"\n'
        "  i=$((i+1)); sleep 0.05\ndone\n"
    )
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    cfg = NvidiaSmiConfig(columns=("timestamp", "index", "power.draw", "clocks.sm"), samples=3, period_ms=100,
                          node_prefix="n", utc_offset_h=0.0)  # fmt: skip
    report = IngestReport()
    frames = list(NvidiaSmiSource(cfg).frames(report))
    assert len(frames) == 3 and report.ok
    for k, f in enumerate(frames):
        ts, ents, power = f.to_dense("DCGM_FI_DEV_POWER_USAGE")
        assert ts.tolist() == [T0 + k] and ents == ("n/gpu0", "n/gpu1")
        assert power[0].tolist() == [float(f"100.{k}"), float(f"200.{k}")]
