"""Users' own telemetry files, round 3: the variants a real cluster's tools write that broke before.

A UTF-8 byte-order mark (Windows PowerShell's ``nvidia-smi ... | Out-File -Encoding utf8``, Excel's "CSV UTF-8"),
nvidia-smi CSV recorded without its header line given to ``detect``, and OpenMetrics text (timestamps in
seconds, exemplars, ``# EOF``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from twinloop.telemetry.promtext import parse_text
from twinloop.telemetry.report import IngestReport
from twinloop.telemetry.sources.sampler_csv import is_sampler_csv

BOM = "\ufeff"
SMI_HEADER = (
    "timestamp, index, uuid, power.draw [W], power.limit [W], temperature.gpu, clocks.sm [MHz], utilization.gpu [%], "
    "clocks_throttle_reasons.active"
)


def _smi_rows(sweeps: int = 30, gpus: int = 2) -> list[str]:
    return [
        f"2024/05/01 12:{s // 60:02d}:{s % 60:02d}.123, {g}, GPU-{g:08d}-aaaa-bbbb-cccc-dddddddddddd, "
        f"{250.12 + g + s % 3:.2f} W, 700.00 W, {60 + s % 4}, 1980 MHz, {90 + g} %, 0x000000000000000{4 * (s == 3)}"
        for s in range(sweeps)
        for g in range(gpus)
    ]


def _write(path: Path, lines: list[str], bom: bool = True, eol: str = "\r\n") -> Path:
    path.write_bytes(((BOM if bom else "") + eol.join(lines) + eol + eol).encode("utf-8"))
    return path


def test_nvidia_smi_csv_with_bom_and_crlf_is_read_by_ingest(tmp_path: Path, cli_json: Callable[..., Any]) -> None:
    smi = _write(tmp_path / "smi.csv", [SMI_HEADER, *_smi_rows()])
    out = cli_json("ingest", "nvidia-smi", str(smi), "--db", str(tmp_path / "t.duckdb"))
    # 60 lines x 6 mapped columns, none truncated (before: "no row kept (61 truncated)", the header not seen).
    assert out["rows_stored"] == 360 and out["problems"] == {}


def test_nvidia_smi_csv_with_bom_is_read_by_detect(tmp_path: Path, cli_json: Callable[..., Any]) -> None:
    smi = _write(tmp_path / "smi.csv", [SMI_HEADER, *_smi_rows()])
    out = cli_json("detect", str(smi))
    # Before: read as a generic CSV and refused ("timestamp: non-numeric value '2024/05/01 12:00:00.123'").
    assert out["layout"] == "nvidia-smi", out["layout"]


def test_long_csv_with_bom_is_read_by_ingest_file(tmp_path: Path, cli_json: Callable[..., Any]) -> None:
    rows = [f"{1.7e9 + k},site0/row0/rack0/node0/gpu0,DCGM_FI_DEV_GPU_TEMP,{60 + k % 3}" for k in range(20)]
    path = _write(tmp_path / "long.csv", ["ts,entity,field,value", *rows], eol="\n")
    out = cli_json("ingest", "file", str(path), "--db", str(tmp_path / "t.duckdb"))
    assert out["rows_stored"] == 20  # before: "header: expected 'ts,entity,field,value' ..., got ['\ufeffts', ...]"


def test_saved_prometheus_answer_with_bom_is_read(tmp_path: Path, cli_json: Callable[..., Any]) -> None:
    values = [[1.7e9 + 15 * k, str(60 + k % 4)] for k in range(40)]
    doc = {"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"__name__": "DCGM_FI_DEV_GPU_TEMP", "gpu": "0", "Hostname": "n1"}, "values": values}]}}  # fmt: skip
    path = tmp_path / "temps.json"
    path.write_bytes((BOM + json.dumps(doc)).encode("utf-8"))
    out = cli_json("detect", str(path))
    assert out["rows"] == 40  # before: "malformed JSON: Unexpected UTF-8 BOM"


def test_sampler_csv_with_bom_is_recognised(tmp_path: Path) -> None:
    path = _write(tmp_path / "samples.csv", ["t,power_mw,gpu_temp_c", "0.0,300000,55"], eol="\n")
    assert is_sampler_csv(path)


def test_headerless_nvidia_smi_csv_in_detect_is_one_clear_error(tmp_path: Path, cli: Callable[..., Any]) -> None:
    smi = _write(tmp_path / "smi.csv", _smi_rows(), bom=False, eol="\n")
    res = cli("detect", str(smi))
    # Before: its first data line was taken for a header ("9 samples of 3 series", columns named ' 250.12 W').
    assert res.exit_code == 2, res.stdout
    (line,) = res.stderr.strip().splitlines()
    assert str(smi) in line and "line 1" in line and "no header" in line and "--format=csv" in line


OM_TEXT = """# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{gpu="0",Hostname="n1"} 612.5 1714564800.125
# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION_total{gpu="0",Hostname="n1"} 1.5e+11 # {trace_id="abc"} 1.0 1714564800.0
DCGM_FI_DEV_GPU_TEMP{gpu="0",Hostname="n1"} 61 1714564800
# EOF
"""


def test_openmetrics_timestamps_in_seconds_and_exemplars() -> None:
    report = IngestReport()
    samples = parse_text(OM_TEXT, "om", report)
    assert report.ok, report.examples
    assert [(s.name, s.value, s.ts_ms) for s in samples] == [
        ("DCGM_FI_DEV_POWER_USAGE", 612.5, 1_714_564_800_125),
        ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION_total", 1.5e11, None),
        ("DCGM_FI_DEV_GPU_TEMP", 61.0, 1_714_564_800_000),  # OpenMetrics (# EOF): an integer is seconds too
    ]


def test_text_format_integer_timestamps_stay_milliseconds() -> None:
    report = IngestReport()
    (s,) = parse_text('DCGM_FI_DEV_GPU_TEMP{gpu="0"} 61 1714564800123\n', "t", report)
    assert report.ok and s.ts_ms == 1_714_564_800_123


def test_bom_before_the_first_sample_line() -> None:
    report = IngestReport()
    (s,) = parse_text(BOM + 'DCGM_FI_DEV_GPU_TEMP{gpu="0"} 61\n', "t", report)
    assert report.ok and s.value == 61.0


_LABELS = st.dictionaries(
    st.sampled_from(["gpu", "UUID", "Hostname", "GPU_I_ID", "GPU_I_PROFILE", "container", "pod", "modelName"]),
    st.text(max_size=12),
    max_size=5,
)


def _escaped(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


@settings(max_examples=150, deadline=None)
@given(
    labels=_LABELS,
    value=st.floats(allow_nan=False, allow_infinity=False, width=32),
    ts_s=st.one_of(st.none(), st.integers(1_000_000_000, 2_000_000_000)),
    millis=st.integers(0, 999),
    openmetrics=st.booleans(),
    exemplar=st.booleans(),
)
def test_a_sample_round_trips_in_either_format(
    labels: dict[str, str], value: float, ts_s: int | None, millis: int, openmetrics: bool, exemplar: bool
) -> None:
    body = ",".join(f'{k}="{_escaped(v)}"' for k, v in labels.items())
    stamp = "" if ts_s is None else (f" {ts_s}.{millis:03d}" if openmetrics else f" {ts_s * 1000 + millis}")
    tail = ' # {trace_id="x"} 1.0' if exemplar and openmetrics else ""
    text = f"# TYPE m gauge\nm{{{body}}} {value!r}{stamp}{tail}\n" + ("# EOF\n" if openmetrics else "")
    report = IngestReport()
    (s,) = parse_text(text, "t", report)
    assert report.ok and s.value == value and dict(s.labels) == labels
    assert s.ts_ms == (None if ts_s is None else ts_s * 1000 + millis)


# dcgm-exporter on a node with an A100 split in two MIG instances (GPU_I_ID 1 and 2) and a whole GPU 0.
MIG_SCRAPE = Path(__file__).parents[1] / "fixtures" / "users_round3" / "dcgm_mig.prom"


def test_a_mig_gpus_instances_merge_by_max_in_a_scrape() -> None:
    from telemetry_helpers import serving

    from twinloop.telemetry.ingest import validated_frames
    from twinloop.telemetry.sources.prometheus import PrometheusConfig, PrometheusSource

    report = IngestReport()
    with serving(MIG_SCRAPE.read_bytes()) as url:
        (frame,) = validated_frames(PrometheusSource(PrometheusConfig(url=url, mode="scrape")), report)
    # Before: two rows per field for gpu2, the second dropped as a "duplicate" (which one kept: file order).
    assert report.ok, report.to_dict()
    _, ents, fb = frame.to_dense("DCGM_FI_DEV_FB_USED")
    assert ents == ("site0/row0/rack0/n1/gpu2",) and fb.tolist() == [[30000.0]]
    _, ents, temp = frame.to_dense("DCGM_FI_DEV_GPU_TEMP")
    assert ents == ("site0/row0/rack0/n1/gpu0", "site0/row0/rack0/n1/gpu2") and temp.tolist() == [[52.0, 47.0]]


DMON = Path(__file__).parents[1] / "fixtures" / "users_round3" / "dmon.txt"  # `nvidia-smi dmon -o T` output


def test_nvidia_smi_dmon_output_is_one_clear_error_everywhere(tmp_path: Path, cli: Callable[..., Any]) -> None:
    for args in (
        ("ingest", "nvidia-smi", str(DMON), "--db", str(tmp_path / "t.duckdb")),
        ("detect", str(DMON)),
        ("watch", f"nvidia-smi:{DMON}"),
    ):
        res = cli(*args)
        assert res.exit_code == 2, (args, res.stdout)
        line = res.stderr.strip().splitlines()[-1]
        # Round 4 reads dmon logs (tests/telemetry/test_users_files_round4.py); this one (-o T) lacks the day.
        assert line.startswith(f"error: {DMON}: line 1: nvidia-smi dmon -o T output") and "start_date" in line, line


def test_watch_of_a_recording_with_no_readable_row_exits_2(tmp_path: Path, cli: Callable[..., Any]) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("ts,entity,field,value\nabc,site0/row0/rack0/n0/gpu0,DCGM_FI_DEV_GPU_TEMP,50\n")
    res = cli("watch", f"replay:{bad}")
    # Before: "0 samples (end): 0 incidents ...", exit 0, as if the loop had watched the file and seen nothing.
    assert res.exit_code == 2 and res.stdout == ""
    assert res.stderr.strip().splitlines()[-1] == f"error: replay:{bad}: no row kept (1 parse_error); first: " \
        f"{bad}:2: bad timestamp 'abc'"  # fmt: skip
    headerless = _write(tmp_path / "smi.csv", _smi_rows(), bom=False, eol="\n")
    res = cli("watch", f"nvidia-smi:{headerless}")
    assert res.exit_code == 2 and "no header line" in res.stderr.strip().splitlines()[-1]
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    res = cli("watch", f"replay:{empty}")
    assert res.exit_code == 2 and "no sample in the recording" in res.stderr
    ok = _write(tmp_path / "ok.csv", [SMI_HEADER, *_smi_rows()])
    assert cli("watch", f"nvidia-smi:{ok}").exit_code == 0


def test_dcgmi_dmon_output_is_one_clear_error(cli: Callable[..., Any]) -> None:
    path = Path(__file__).parents[1] / "fixtures" / "users_round3" / "dcgmi_dmon.txt"  # `dcgmi dmon -e 155,150,100`
    res = cli("detect", str(path))
    assert res.exit_code == 2 and res.stderr.startswith(f"error: {path}: line 1: dcgmi dmon output is not read")


def _grafana_csv(path: Path, cell: Callable[[float], str]) -> Path:
    """A Grafana panel's "Download CSV" (series joined by time; quoted series names with labels)."""
    head = '"Time",' + ",".join(f'"DCGM_FI_DEV_GPU_TEMP{{Hostname=""node-1"", gpu=""{g}""}}"' for g in (0, 1))
    rows = [f'"2024-05-01 12:{i // 60:02d}:{i % 60:02d}",{cell(60 + 8 * (i > 90))},{cell(58)}' for i in range(120)]
    path.write_text("\n".join([head, *rows]) + "\n")
    return path


def test_grafana_csv_export(tmp_path: Path, cli: Callable[..., Any], cli_json: Callable[..., Any]) -> None:
    raw = cli_json("detect", str(_grafana_csv(tmp_path / "raw.csv", lambda v: f"{v:g}")))
    assert raw["series"] == 2 and raw["dt_s"] == 1.0 and raw["detections"]  # worked before: the +8 C step is found
    # "Formatted data" on: every value carries its unit. Before: "skipped: ..." with no reason in the error.
    path = _grafana_csv(tmp_path / "formatted.csv", lambda v: f'"{v:g} °C"')
    res = cli("detect", str(path))
    assert res.exit_code == 2 and "values carry a unit, e.g. '60 °C'" in res.stderr and "Formatted data" in res.stderr


def test_a_recorded_nvidia_smi_csv_without_timestamps_is_refused(tmp_path: Path, cli: Callable[..., Any]) -> None:
    # `nvidia-smi --query-gpu=index,power.draw,temperature.gpu --format=csv -l 1 > log.csv`: no time in the file.
    rows = [f"{g}, {300 + s + g:.2f} W, {60 + s % 3}" for s in range(30) for g in range(2)]
    path = _write(tmp_path / "log.csv", ["index, power.draw [W], temperature.gpu", *rows], bom=False, eol="\n")
    # Before: every row stamped with the time it was parsed (detect: "dt 1.96e-05 s, 50 duplicate rows"; watch:
    # "1 samples"; ingest: 120 rows stored at today's date), exit 0.
    for args in (("ingest", "nvidia-smi", str(path), "--db", str(tmp_path / "t.duckdb")), ("detect", str(path)),
                 ("watch", f"nvidia-smi:{path}")):  # fmt: skip
        res = cli(*args)
        assert res.exit_code == 2, (args, res.stdout)
        line = res.stderr.strip().splitlines()[-1]
        assert f"{path}:2: no timestamp column" in line and "timestamp first in --query-gpu" in line, line


def test_concatenated_scrapes_parse_whole() -> None:
    one = MIG_SCRAPE.read_text()
    report = IngestReport()
    assert len(parse_text(one + one, "two", report)) == 2 * len(parse_text(one, "one", IngestReport())) == 10
    assert report.ok


def test_a_semicolon_csv_is_one_clear_error(tmp_path: Path, cli: Callable[..., Any]) -> None:
    # Excel's CSV in a locale with decimal commas. Before: "line 2: malformed file: CSV parse error: Expected 1
    # columns, got 3" (or, with whole numbers, one text column and "no value column").
    path = tmp_path / "temps.csv"
    rows = [f"2024-05-01 12:00:{s:02d};{60 + s % 3},5;58,0" for s in range(30)]
    path.write_text("\n".join(["timestamp;gpu0_temp;gpu1_temp", *rows]) + "\n")
    res = cli("detect", str(path))
    assert res.exit_code == 2
    assert res.stderr.strip() == f"error: {path}: line 1: fields separated by ';' (a spreadsheet export with " \
        "decimal commas); allowed: ',' between fields and '.' as the decimal point"  # fmt: skip


def test_an_ambiguous_date_names_the_formats_read(tmp_path: Path, cli: Callable[..., Any]) -> None:
    path = tmp_path / "temps.csv"
    path.write_text("time,temp\n" + "".join(f"05/01/2024 12:00:{s:02d},{60 + s % 3}\n" for s in range(30)))
    res = cli("detect", str(path))
    # Before: "non-numeric value '05/01/2024 12:00:00' (allowed: numbers)".
    assert res.exit_code == 2 and "time: line 2: a time not read: '05/01/2024 12:00:00' (allowed: epoch seconds" in (
        res.stderr
    )


def _saved_pages(path: Path, stamped: bool) -> Path:
    """`curl -s http://node:9400/metrics >> f.prom` every second for a minute (stamped: each sample with its ms)."""
    lines = []
    for t in range(60):
        lines += ["# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).", "# TYPE DCGM_FI_DEV_GPU_TEMP gauge"]
        for g in range(2):
            stamp = f" {1_714_564_800_000 + 1000 * t}" if stamped else ""
            lines.append(
                f'DCGM_FI_DEV_GPU_TEMP{{gpu="{g}",UUID="GPU-{g}",Hostname="n1"}} {50 + g + 9 * (t > 40)}{stamp}'
            )
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_saved_exporter_page_with_timestamps_is_read(
    tmp_path: Path, cli: Callable[..., Any], cli_json: Callable[..., Any]
) -> None:
    path = _saved_pages(tmp_path / "scrapes.prom", stamped=True)
    # Before: ingest "malformed JSON: Expecting value"; detect "CSV parse error: Expected 1 columns, got 3".
    out = cli_json("detect", str(path))
    assert out["layout"] == "prometheus" and out["series"] == 2 and out["samples"] == 60 and out["detections"]
    stored = cli_json("ingest", "prometheus", str(path), "--db", str(tmp_path / "t.duckdb"))
    assert stored["rows_stored"] == 120


def test_a_saved_exporter_page_without_timestamps_is_refused(tmp_path: Path, cli: Callable[..., Any]) -> None:
    path = _saved_pages(tmp_path / "scrape.prom", stamped=False)
    for args in (("detect", str(path)), ("ingest", "prometheus", str(path), "--db", str(tmp_path / "t.duckdb"))):
        res = cli(*args)
        assert res.exit_code == 2 and res.stderr.strip().startswith(
            f"error: {path}: DCGM_FI_DEV_GPU_TEMP: a saved /metrics page has no time of its own"
        ), res.stderr
    # Before: `watch dcgm:FILE` polled "FILE/metrics" for ever, warning that the source was silent.
    res = cli("watch", f"dcgm:{path}", "--duration", "2")
    assert res.exit_code == 2 and f"{path} is a file; dcgm: takes the exporter's URL" in res.stderr


def test_dcgm_without_a_scheme_is_http() -> None:
    from twinloop.ops.live.kinds import LIVE_KINDS, KindArgs

    built = LIVE_KINDS["dcgm"](KindArgs(target="node17:9400"))
    assert built.source.config.url == "http://node17:9400/metrics"  # type: ignore[attr-defined]
