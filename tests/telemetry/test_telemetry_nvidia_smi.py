"""nvidia-smi output parsing: header/units, noheader/nounits, N/A, truncated lines, garbage."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
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
    parse_header,
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
    # A garbage line that is itself a header (say "INDEX") rightly changes the column layout for the lines after it.
    assume(not any(parse_header(part) for line in garbage for part in line.splitlines()))
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


# ----- any --query-gpu column set (issue 15) ----------------------------------------------------------------
EXTRA_HEADER = ("timestamp, index, name, pstate, power.draw [W], power.draw.instant [W], temperature.gpu [C], "
                "clocks.sm [MHz], memory.used [MiB], utilization.gpu [%], fan.speed [%]")  # fmt: skip


def test_extra_columns_are_reported_and_the_rest_is_read(tmp_path: Path) -> None:
    p = tmp_path / "smi.csv"
    p.write_text(
        EXTRA_HEADER + "\n"
        "2023/11/14 22:13:20.000, 0, NVIDIA H100 80GB HBM3, P0, 71.20 W, 80.5 W, 31, 345 MHz, 512 MiB, 3 %, [N/A]\n"
        "2023/11/14 22:13:20.004, 1, NVIDIA H100 80GB HBM3, P0, 691.04 W, 700 W, 66, 1.8 GHz, 70 GiB, 99 %, [N/A]\n"
    )
    frame, report = _read(p)
    assert report.problems == {"unknown_column": 2}  # pstate and fan.speed, once each, not once per row
    assert "'pstate'" in report.examples["unknown_column"][0] and report.examples["unknown_column"][0].startswith(
        f"{p}:1:"
    )
    assert len(frame) == 12  # 6 mapped fields x 2 GPUs; the store keeps each GPU's own timestamp (ms apart)
    assert np.nanmax(frame.to_dense("DCGM_FI_DEV_POWER_USAGE_INSTANT")[2], axis=0).tolist() == [80.5, 700.0]
    assert np.nanmax(frame.to_dense("DCGM_FI_DEV_SM_CLOCK")[2], axis=0).tolist() == [345.0, 1800.0]  # 1.8 GHz converted
    assert np.nanmax(frame.to_dense("DCGM_FI_DEV_FB_USED")[2], axis=0).tolist() == [512.0, 70 * 1024.0]  # GiB converted


def test_header_units_convert_when_cells_have_none(tmp_path: Path) -> None:
    p = tmp_path / "smi.csv"
    p.write_text("timestamp, index, power.draw [mW], memory.used [GiB], clocks.sm [GHz]\n"
                 "2023/11/14 22:13:20.000, 0, 250000, 2, 1.5\n")  # fmt: skip
    frame, report = _read(p)
    assert report.ok
    assert frame.to_dense("DCGM_FI_DEV_POWER_USAGE")[2][0, 0] == pytest.approx(250.0)
    assert frame.to_dense("DCGM_FI_DEV_FB_USED")[2][0, 0] == 2048.0
    assert frame.to_dense("DCGM_FI_DEV_SM_CLOCK")[2][0, 0] == 1500.0


def _sweeps(n: int, gpus: int, id_col: str | None, skew_ms: int = 3) -> str:
    """``n`` sweeps of ``gpus`` lines, each GPU stamped ``skew_ms`` after the one before (as nvidia-smi does)."""
    head = "timestamp, " + (f"{id_col}, " if id_col else "") + "power.draw [W], temperature.gpu\n"
    rows = []
    for i in range(n):
        for g in range(gpus):
            ident = f"00000000:{0x18 + g:02X}:00.0, " if id_col else ""
            rows.append(f"2023/11/14 22:13:{20 + i:02d}.{g * skew_ms:03d}, {ident}{100 + 100 * g + i} W, {40 + g}\n")
    return head + "".join(rows)


@pytest.mark.parametrize("id_col", ["pci.bus_id", None])
def test_a_query_without_index_numbers_the_gpus(tmp_path: Path, id_col: str | None) -> None:
    """`--query-gpu=timestamp,power.draw,...` (no index): GPUs by bus id / UUID, else by their place in a sweep."""
    p = tmp_path / "smi.csv"
    p.write_text(_sweeps(5, 3, id_col))
    frame, report = _read(p)
    assert report.ok, report.to_dict()
    _, ents, power = frame.to_dense("DCGM_FI_DEV_POWER_USAGE")
    assert ents == ("s/r/k/n0/gpu0", "s/r/k/n0/gpu1", "s/r/k/n0/gpu2")
    third = power[:, 2]
    assert third[np.isfinite(third)].tolist() == [300.0, 301.0, 302.0, 303.0, 304.0]  # its own stamps, 6 ms late


def test_one_gpu_without_index_is_gpu0(tmp_path: Path) -> None:
    p = tmp_path / "smi.csv"
    p.write_text(_sweeps(4, 1, None))
    frame, _ = _read(p)
    assert frame.to_dense("DCGM_FI_DEV_GPU_TEMP")[1] == ("s/r/k/n0/gpu0",)


def test_a_unit_that_does_not_convert_is_a_parse_error_naming_the_column(tmp_path: Path) -> None:
    p = tmp_path / "smi.csv"
    p.write_text("timestamp, index, power.draw [MHz], temperature.gpu\n2023/11/14 22:13:20.000, 0, 250, 40\n")
    frame, report = _read(p)
    assert (
        report.problems == {"parse_error": 1}
        and "power.draw: unit 'MHz' does not convert to DCGM_FI_DEV_POWER_USAGE (allowed: w, mw, kw)"
        in report.examples["parse_error"][0]
    )
    assert frame.fields == ("DCGM_FI_DEV_GPU_TEMP",)


def test_every_row_dropped_is_exit_2_never_a_quiet_success(tmp_path: Path, cli: Any) -> None:
    p = tmp_path / "smi.csv"
    # No header and one column more than the default query: every row would be dropped.
    row = "2023/11/14 22:13:20.000, 0, GPU-x, H100, " + ", ".join(["1"] * 14)
    p.write_text(row + "\n" + row.replace(":20.", ":21.") + "\n")
    res = cli("ingest", "nvidia-smi", str(p), "--db", str(tmp_path / "t.duckdb"))
    assert res.exit_code == 2, res.stdout
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "no row kept (2 parse_error)" in lines[0] and f"{p}:1:" in lines[0]
    # The same rows with the header that says what they are: read, exit 0.
    header = "timestamp, index, uuid, name, " + ", ".join(f"x{i}" for i in range(13)) + ", power.draw [W]"
    p.write_text(header + "\n" + row + "\n")
    ok = cli("ingest", "nvidia-smi", str(p), "--db", str(tmp_path / "t.duckdb"), "--json")
    assert ok.exit_code == 0, ok.stderr
    assert '"rows_stored": 1' in ok.stdout and '"unknown_column"' in ok.stdout


# Known columns with a value strategy in their field's unit and the unit nvidia-smi prints in the header.
_ROUND_TRIP = {
    "power.draw": ("W", st.floats(0, 2000, allow_nan=False).map(lambda v: round(v, 2))),
    "power.limit": ("W", st.floats(1, 2000, allow_nan=False).map(lambda v: round(v, 2))),
    "temperature.gpu": ("C", st.integers(0, 120).map(float)),
    "clocks.sm": ("MHz", st.integers(0, 3000).map(float)),
    "clocks.mem": ("MHz", st.integers(0, 5000).map(float)),
    "utilization.gpu": ("%", st.integers(0, 100).map(float)),
    "memory.used": ("MiB", st.integers(0, 200_000).map(float)),
    "ecc.errors.corrected.volatile.total": (None, st.integers(0, 10**6).map(float)),
}


@settings(max_examples=120, deadline=None)
@given(
    cols=st.lists(st.sampled_from(sorted(_ROUND_TRIP)), min_size=1, max_size=len(_ROUND_TRIP), unique=True),
    extra=st.lists(st.sampled_from(["pstate", "fan.speed", "pcie.link.gen.current", "driver_version"]), unique=True),
    data=st.data(),
    with_units=st.booleans(),
)
def test_known_columns_round_trip_in_any_order(cols: list[str], extra: list[str], data: Any, with_units: bool) -> None:
    order = data.draw(st.permutations(["timestamp", "index", *cols, *extra]))
    values = {c: data.draw(_ROUND_TRIP[c][1]) for c in cols}

    def head(c: str) -> str:
        unit = _ROUND_TRIP[c][0] if c in _ROUND_TRIP else None
        return f"{c} [{unit}]" if unit and with_units else c

    def cell(c: str) -> str:
        return {"timestamp": "2023/11/14 22:13:20.000", "index": "2"}.get(c) or (
            f"{values[c]:g}" if c in values else "P0"
        )

    cfg = NvidiaSmiConfig(node_prefix="n", utc_offset_h=0.0)
    parser = NvidiaSmiParser(cfg, "rt")
    report = IngestReport()
    parser.feed(", ".join(head(c) for c in order), 1, report)
    assert parser.feed(", ".join(cell(c) for c in order), 2, report) == 2
    frame = parser.flush()
    from twinloop.telemetry.sources.nvidia_smi import QUERY_FIELDS

    got = {frame.fields[f]: v for f, v in zip(frame.field_idx.tolist(), frame.value.tolist(), strict=True)}
    assert got == {QUERY_FIELDS[c]: pytest.approx(float(f"{values[c]:g}")) for c in cols}
    assert set(frame.ts_s.tolist()) == {T0} and frame.entities == ("n/gpu2",)
    assert report.problems.get("unknown_column", 0) == len(extra)


@settings(max_examples=150, deadline=None)
@given(lines=st.lists(st.text(alphabet=st.sampled_from(list("0123456789,.[] :/-xWMiBHz%NA_abcdeinptuwo\t")),
                               max_size=80), max_size=12))  # fmt: skip
def test_parser_never_crashes_on_csv_like_garbage(lines: list[str]) -> None:
    cfg = NvidiaSmiConfig(node_prefix="n", utc_offset_h=0.0)
    parser = NvidiaSmiParser(cfg, "fuzz")
    report = IngestReport()
    for i, line in enumerate(lines, start=1):
        parser.feed(line, i, report)
    frame = parser.flush()
    assert len(frame) == len(frame.value) and bool(np.isfinite(frame.ts_s).all())


def test_a_header_between_rows_sets_the_columns_of_the_rows_after_it() -> None:
    # Found by the property test above: a lone "INDEX" line is a header too (`--query-gpu=index`).
    cfg = NvidiaSmiConfig(columns=("timestamp", "index", "power.draw", "clocks.sm"), node_prefix="n", utc_offset_h=0)
    parser = NvidiaSmiParser(cfg, "mixed")
    report = IngestReport()
    lines = [GOOD, "INDEX, power.draw [W]", GOOD.replace("22:13:20", "22:13:21"), "3, 250.0"]
    for i, line in enumerate(lines, start=1):
        parser.feed(line, i, report)
    assert report.problems == {"parse_error": 1}
    assert report.examples["parse_error"][0].startswith("mixed:3:")
    assert sorted(parser.flush().entities) == ["n/gpu0", "n/gpu3"]
