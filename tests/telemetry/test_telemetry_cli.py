"""CLI: ingest / query / export with --json, and bad input as one stderr line with exit code 2."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from telemetry_helpers import NVML_RECORDING, SMI_FILE, T0, twin_like_frames, write_long_csv


def test_ingest_file_then_query_raw_downsampled_and_aggregated(tmp_path: Path, cli_json: Callable[..., Any]) -> None:
    csv = write_long_csv(tmp_path / "t.csv", twin_like_frames(n_gpus=16, steps=10))
    db = str(tmp_path / "t.duckdb")
    doc = cli_json("ingest", "file", str(csv), "--db", db)
    assert doc["rows_stored"] == 16 * 10 * 3 and doc["problems"] == {}
    raw = cli_json("query", "--db", db, "--field", "DCGM_FI_DEV_POWER_USAGE", "--entity", "site0/row0/rack0/node1")
    assert raw["count"] == 8 * 10 and raw["unit"] == "W"
    ds = cli_json("query", "--db", db, "--field", "DCGM_FI_DEV_POWER_USAGE", "--entity", "site0/row0/rack0/node1/gpu0",
                  "--every", "5s")  # fmt: skip
    assert [r["count"] for r in ds["rows"]] == [5, 5] and ds["every_s"] == 5.0
    assert ds["rows"][0]["min"] <= ds["rows"][0]["mean"] <= ds["rows"][0]["max"]
    recent = cli_json("query", "--db", db, "--field", "DCGM_FI_DEV_GPU_TEMP", "--since", "3s", "--aggregate")
    assert recent["since_s"] == T0 + 6 and all(r["count"] == 4 for r in recent["rows"])
    assert len(recent["rows"]) == 16


def test_ingest_reports_bad_rows_and_still_stores_good_ones(tmp_path: Path, cli_json: Callable[..., Any]) -> None:
    db = str(tmp_path / "s.duckdb")
    doc = cli_json("ingest", "nvidia-smi", str(SMI_FILE), "--db", db, "--set", "node_prefix=s/r/k/n0",
                   "--set", "utc_offset_h=0")  # fmt: skip
    assert doc["problems"]["truncated"]["count"] == 1
    assert doc["problems"]["truncated"]["examples"][0].startswith(f"{SMI_FILE}:9:")
    assert doc["rows_stored"] > 50


def test_ingest_nvml_replay_and_human_output(tmp_path: Path, cli: Callable[..., Any]) -> None:
    db = str(tmp_path / "n.duckdb")
    res = cli("ingest", "nvml", str(NVML_RECORDING), "--samples", "3", "--period", "0.1", "--db", db,
              "--set", f"start_ts_s={T0}")  # fmt: skip
    assert res.exit_code == 0, res.stderr
    assert "rows in" in res.stdout and "dropped 0" in res.stdout
    res = cli("query", "--db", db, "--field", "DCGM_FI_DEV_POWER_USAGE")
    assert res.exit_code == 0 and "2023-11-14T22:13:20.000Z" in res.stdout


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, cli: Callable[..., Any]) -> None:
    for args, needle in [
        (("ingest", "nvmll"), "unknown source 'nvmll'"),
        (("ingest", "file", str(tmp_path / "none.csv"), "--db", str(tmp_path / "x.duckdb")), "file not found"),
        (("ingest", "file", "x.csv", "--query", "up"), "--query: the file source has no such option"),
        (("ingest", "nvml", "--set", "period_s=0.01"), "period_s"),
        (("query", "--db", str(tmp_path / "none.duckdb"), "--field", "DCGM_FI_DEV_GPU_TEMP"), "file not found"),
        (("query", "--db", str(tmp_path / "x.duckdb"), "--field", "DCGM_FI_DEV_GPUTEMP"), "did you mean"),
        (("export", "--source", "file:x.csv", "--listen", "nowhere"), "HOST:PORT"),
        (("export", "--source", "file:x.csv", "--listen", "0.0.0.0:0"), "--allow-remote"),
    ]:
        if args[0] == "query" and "x.duckdb" in args[2]:
            (tmp_path / "x.csv").write_text("ts,entity,field,value\n1,a/0,DCGM_FI_DEV_GPU_TEMP,40\n")
            assert cli("ingest", "file", str(tmp_path / "x.csv"), "--db", args[2]).exit_code == 0
        res = cli(*args)
        assert res.exit_code == 2, (args, res.stdout, res.stderr)
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and needle in lines[0], (args, res.stderr)


def test_a_path_given_as_the_source_kind_names_the_kind_that_reads_it(tmp_path: Path, cli: Callable[..., Any]) -> None:
    long_csv = write_long_csv(tmp_path / "t.csv", twin_like_frames(n_gpus=2, steps=3))
    db = tmp_path / "t.duckdb"
    assert cli("ingest", "file", str(long_csv), "--db", str(db)).exit_code == 0
    for path, kind in [(long_csv, "file"), (SMI_FILE, "nvidia-smi"), (db, "replay")]:
        res = cli("ingest", str(path), "--db", str(tmp_path / "other.duckdb"))
        assert res.exit_code == 2, res.stdout
        assert f"`twinloop ingest {kind} {path}`" in res.stderr.strip(), res.stderr


def test_export_serves_for_a_duration_and_reports(tmp_path: Path, cli_json: Callable[..., Any]) -> None:
    csv = write_long_csv(tmp_path / "t.csv", twin_like_frames(n_gpus=4, steps=2))
    doc = cli_json("export", "--source", f"file:{csv}", "--listen", "127.0.0.1:0", "--duration", "0.3")
    assert doc["url"].startswith("http://127.0.0.1:") and doc["url"].endswith("/metrics")
    assert doc["rows_in"] == 4 * 2 * 3 and doc["problems"] == {}
    assert json.dumps(doc)


def test_ingest_prometheus_url_and_query(
    tmp_path: Path, cli_json: Callable[..., Any], fake_prometheus: Callable[..., str]
) -> None:
    url = fake_prometheus()
    db = str(tmp_path / "p.duckdb")
    doc = cli_json("ingest", "prometheus", url, "--query", "DCGM_FI_DEV_POWER_USAGE", "--db", db,
                   "--set", "entity_prefix=site0/row0/rack2")  # fmt: skip
    assert doc["source"] == f"prometheus:{url}" and doc["problems"]["nan"]["count"] == 1
    rows = cli_json("query", "--db", db, "--field", "DCGM_FI_DEV_POWER_USAGE", "--entity", "site0/row0/rack2/node7")
    assert sorted(r["value"] for r in rows["rows"]) == [303.0, 313.0]


def test_export_the_twin(cli_json: Callable[..., Any]) -> None:
    # The twin needs a moment to import and take its first step on a loaded machine.
    doc = cli_json("export", "--set", "steps=2", "--listen", "127.0.0.1:0", "--duration", "2.5")
    assert doc["source"] == "twin" and doc["rows_in"] > 0 and doc["problems"] == {}
