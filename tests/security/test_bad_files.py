"""Issue 19's bad files, each reproduced: one line naming file and field with the allowed range, exit code 2 (or,
for values a reader can skip, counted and left out)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from twinloop.cli.main import app
from twinloop.errors import InputError
from twinloop.telemetry.frame import MAX_FIELDS, Frame
from twinloop.telemetry.report import IngestReport
from twinloop.telemetry.validate import Validator

runner = CliRunner()
POWER = "DCGM_FI_DEV_POWER_USAGE"
ONE_NODE = "duration_s: 10\nrows: [{racks: 1, nodes_per_rack: 1}]\n"


def _error(args: list[str]) -> str:
    res = runner.invoke(app, args)
    assert res.exit_code == 2, (res.exit_code, res.output[-1500:])
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("fault", "allowed"),
    [
        ("{kind: psu_loss, target: dc1/r01/k01/n01, start_s: 0, magnitude: -5}", "PSUs lost 0 < m <= 16"),
        ("{kind: psu_loss, target: dc1/r01/k01/n01, start_s: 0, magnitude: [-5, 2]}", "PSUs lost"),
        ("{kind: heat_wave, target: dc1, start_s: 0, magnitude: .nan}", "finite"),
        ("{kind: heat_wave, target: dc1, start_s: 0, magnitude: [0, .inf]}", "finite"),
        ("{kind: heat_wave, target: dc1, start_s: 0, magnitude: 1e300}", "-30..30"),
        ("{kind: sdc, target: dc1/r01/k01/n01/g0, start_s: 0, magnitude: -1}", "0 < m <= 100"),
    ],
)
def test_fault_magnitudes(tmp_path: Path, fault: str, allowed: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(ONE_NODE + f"faults: [{fault}]\n")
    line = _error(["sim", str(path), "--json"])
    assert str(path) in line and "faults.0.magnitude" in line and allowed in line


def test_non_utf8_scenario_and_sweep(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"duration_s: 10\nname: \xff\n")
    assert "not valid UTF-8" in _error(["sim", str(bad), "--json"])
    assert "not valid UTF-8" in _error(["sweep", str(bad), "--json"])


def test_too_many_rows_is_bounded(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("duration_s: 10\nrows: [{count: 1000, racks: 200, nodes_per_rack: 72}]\n")
    assert "allowed: 1..1000000" in _error(["sim", str(path), "--json"])


@pytest.mark.parametrize("value", [["abc", "1"], [[1.0], [2.0]]])
def test_parquet_value_column_of_the_wrong_type(tmp_path: Path, value: list[object]) -> None:
    path = tmp_path / "t.parquet"
    cols = {"ts": [1.7e9, 1.7e9 + 1], "entity": ["dc1/r01/k01/n01/g0"] * 2, "field": [POWER] * 2, "value": value}
    pq.write_table(pa.table(cols), path)
    line = _error(["ingest", "file", str(path), "--db", str(tmp_path / "db.duckdb"), "--json"])
    assert str(path) in line and "value" in line and "allowed: numbers" in line


def test_nan_timestamp_in_a_csv_is_counted(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("ts,entity,field,value\nnan,dc1/r01/k01/n01/g0,DCGM_FI_DEV_POWER_USAGE,100\n")
    assert "bad_timestamp" in _error(["ingest", "file", str(path), "--db", str(tmp_path / "db.duckdb"), "--json"])


def test_more_field_names_than_int16_holds(tmp_path: Path) -> None:
    n = MAX_FIELDS + 10
    with pytest.raises(InputError, match=f"{n} distinct field names"):
        Frame.from_long([1.0] * n, ["e"] * n, [f"f{i}" for i in range(n)], [1.0] * n, source="x.csv")
    path = tmp_path / "wide.csv"
    path.write_text("ts,entity," + ",".join(f"f{i}" for i in range(n)) + "\n1700000000,e," + ",".join("1" * n) + "\n")
    assert "allowed: <= 32767" in _error(["ingest", "file", str(path), "--db", str(tmp_path / "db.duckdb"), "--json"])


def test_validator_memory_is_sparse_in_entities_times_fields() -> None:
    # 30,000 entities each with its own field name: a dense entity x field matrix would be 30k x 30k x 8 B = 7 GB.
    n = 30_000
    ents = [f"dc1/r01/k01/n{i:05d}/g0" for i in range(n)]
    fields = [f"u{i}" for i in range(n)] + [POWER] * n
    frame = Frame.from_long(np.full(2 * n, 1.7e9), ents + ents, fields, np.full(2 * n, 100.0))
    val, report = Validator(now_s=1.7e9), IngestReport()
    kept = val.check(frame, report)
    assert len(kept) == n and report.problems["unknown_field"] == n
    again = val.check(frame, IngestReport())
    assert len(again) == 0  # every (entity, field) series remembered: a resent batch is all duplicates
    assert val._keys.nbytes < 10 * n * 8


def test_detect_absurd_values_are_counted_and_the_change_still_found(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    v = 300 + rng.normal(0, 5, 1500)
    v[900:] += 80
    v[300], v[400] = 1e300, -1e300
    path = tmp_path / "d.csv"
    path.write_text("timestamp,power_w\n" + "".join(f"{1.7e9 + i:.0f},{float(x)!r}\n" for i, x in enumerate(v)))
    res = runner.invoke(app, ["detect", str(path), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["problems"] == {"absurd_value": 2}
    assert any(abs(d["ts"] - (1.7e9 + 900)) < 60 for d in doc["detections"])
    assert "overflow" not in res.stderr


def test_detect_progress_on_stderr_only_without_json(tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    path.write_text("timestamp,power_w\n" + "".join(f"{1.7e9 + i:.0f},{300 + i % 7}\n" for i in range(3000)))
    res = runner.invoke(app, ["detect", str(path), "--json"])
    assert res.exit_code == 0 and res.stderr == ""
