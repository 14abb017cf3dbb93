"""Every file-taking command through the real CLI on hostile files: exit 0 or 2, never a traceback, and on exit 2
one line on stderr (issue 19). Examples are small (a one-node scenario, a handful of CSV rows) to keep this fast."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.security.fuzz_inputs import csv_rows, json_files, yaml_files
from typer.testing import CliRunner

from twinloop.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures"
runner = CliRunner()

SCENARIO: dict[str, Any] = {
    "duration_s": 10,
    "step_s": 1,
    "rows": [{"racks": 1, "nodes_per_rack": 1, "node": {"gpus": 8, "psus": 6}}],
    "jobs": [{"name": "t", "kind": "training", "gpus": 8}],
    "faults": [
        {"kind": "psu_loss", "target": "dc1/r01/k01/n01", "start_s": 2, "duration_s": 3, "magnitude": 1},
        {"kind": "heat_wave", "target": "dc1", "start_s": [1, 4], "magnitude": 3},
    ],
    "telemetry": {"gpu_every_s": 1},
}
SWEEP: dict[str, Any] = {"name": "fz", "scenarios": ["default"], "seeds": [0], "loops": [{"loop": False}]}
MODEL: dict[str, Any] = json.loads((FIX / "hf_configs" / "c4ai-command-r-v01.json").read_text())
NVML = (FIX / "h100" / "nvml_1hz_idle_to_caps.csv").read_text().splitlines()
NVML_HEADER, NVML_ROWS = NVML[0], NVML[1:9]
TRACE_LINES = [ln for ln in (ROOT / "src/twinloop/data/azure_conv_sample.csv").read_text().splitlines()
               if not ln.startswith("#")][:8]  # fmt: skip
FAST = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def check(args: list[str]) -> None:
    res = runner.invoke(app, args)
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise AssertionError(f"{args}: {type(res.exception).__name__}: {res.exception}") from res.exception
    assert res.exit_code in (0, 2), (args, res.exit_code, res.stderr[-2000:])
    assert "Traceback" not in res.stderr, res.stderr[-2000:]
    if res.exit_code == 2:
        lines = res.stderr.strip().splitlines()
        # One error line, last; `watch` may print its one "watching ..." banner before a source fails mid-run.
        errors = [ln for ln in lines if ln.startswith("error: ")]
        assert len(errors) == 1 and lines[-1] == errors[0] and len(lines) <= 2, res.stderr[-2000:]


def write(tmp: Path, name: str, data: bytes) -> Path:
    path = tmp / name
    path.write_bytes(data)
    return path


@FAST
@given(data=yaml_files(SCENARIO))
def test_sim(tmp_path: Path, data: bytes) -> None:
    check(["sim", str(write(tmp_path, "s.yaml", data)), "--out", str(tmp_path / "out"), "--json"])


@pytest.mark.slow
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=yaml_files(SCENARIO))
def test_run(tmp_path: Path, data: bytes) -> None:
    check(["run", str(write(tmp_path, "s.yaml", data)), "--out", str(tmp_path / "out"), "--json"])


@pytest.mark.slow
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=yaml_files(SWEEP))
def test_sweep(tmp_path: Path, data: bytes) -> None:
    spec = write(tmp_path, "w.yaml", data)
    check(["sweep", str(spec), "--workers", "1", "--duration", "10s", "--out", str(tmp_path / "o"), "--json"])


@FAST
@given(data=json_files(MODEL))
def test_plan_train_model(tmp_path: Path, data: bytes) -> None:
    model = write(tmp_path, "config.json", data)
    check(["plan", "train", "--model", str(model), "--gpu", "h100-sxm", "--gpus", "64", "--json"])


@FAST
@given(data=csv_rows(TRACE_LINES[0], TRACE_LINES[1:]))
def test_plan_serve_trace(tmp_path: Path, data: bytes) -> None:
    trace = write(tmp_path, "trace.csv", data)
    check(["plan", "serve", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--trace", str(trace), "--json"])


@FAST
@given(data=csv_rows(NVML_HEADER, NVML_ROWS))
def test_detect(tmp_path: Path, data: bytes) -> None:
    check(["detect", str(write(tmp_path, "d.csv", data)), "--json"])


@FAST
@given(data=csv_rows(NVML_HEADER, NVML_ROWS))
def test_ingest(tmp_path: Path, data: bytes) -> None:
    db = tmp_path / "i.duckdb"
    db.unlink(missing_ok=True)
    check(["ingest", "file", str(write(tmp_path, "i.csv", data)), "--db", str(db), "--json"])


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=csv_rows(NVML_HEADER, NVML_ROWS))
def test_watch_replay(tmp_path: Path, data: bytes) -> None:
    db = tmp_path / "w.duckdb"
    db.unlink(missing_ok=True)
    check(["watch", f"replay:{write(tmp_path, 'r.csv', data)}", "--db", str(db), "--json"])


@pytest.mark.parametrize("special", ["dir", "/dev/zero", "missing"])
@pytest.mark.parametrize(
    "argv",
    [
        ["sim", "{}", "--json"],
        ["run", "{}", "--json"],
        ["sweep", "{}", "--json"],
        ["detect", "{}", "--json"],
        ["ingest", "file", "{}", "--db", "{db}", "--json"],
        ["plan", "serve", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--trace", "{}", "--json"],
        ["plan", "train", "--model", "{}", "--gpu", "h100-sxm", "--gpus", "8", "--json"],
        ["watch", "replay:{}", "--db", "{db}", "--json"],
    ],
)
def test_directory_device_and_missing_paths(tmp_path: Path, argv: list[str], special: str) -> None:
    if special == "/dev/zero" and not Path("/dev/zero").exists():
        pytest.skip("no /dev/zero on this system")
    target = {"dir": str(tmp_path), "/dev/zero": "/dev/zero", "missing": str(tmp_path / "nope.yaml")}[special]
    args = [a.replace("{db}", str(tmp_path / "x.duckdb")).replace("{}", target) for a in argv]
    res = runner.invoke(app, args)
    assert res.exit_code == 2, (args, res.exit_code, res.output[-1500:])
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr


@pytest.mark.parametrize("name", ["small.yaml"])
def test_yaml_alias_bomb_through_sim_is_one_line(tmp_path: Path, name: str) -> None:
    from tests.security.test_safeio import BOMB

    res = runner.invoke(app, ["sim", str(write(tmp_path, name, BOMB.encode())), "--json"])
    assert res.exit_code == 2 and "expands to more than" in res.stderr


_ = st  # strategies module re-exported for readers extending the suite
