"""No table cuts a value: every table-printing command at 80 and 200 columns, values checked against --json."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from twinloop.cli import output, tables

SRC = str(Path(__file__).resolve().parents[2] / "src")
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
BOX = "│┃┏┡└┌├┗┝┠┨┯┷"
WIDTHS = [80, 200]

SCENARIO = """
name: columns-test
site: dc1
duration_s: 2m
rows: [{racks: 2, nodes_per_rack: 2, cdu: {capacity_w: 60000, flow_kg_per_s: 2.0, pump_power_w: 300}}]
power_chain: {facility_power_budget_w: 1.0e5}
jobs: [{name: train-with-a-rather-long-job-name, kind: training, gpus: 16, profile: {load_bytes_per_gpu: 4.0e9}}]
faults: [{kind: psu_loss, target: dc1/r01/k01/n01, start_s: 30, duration_s: 60, magnitude: 5}]
"""


@pytest.fixture
def shown(cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch) -> Callable[..., str]:
    """Run a command with the terminal ``width`` columns wide; return stdout after checking nothing is cut."""

    def run(width: int, *args: str) -> str:
        monkeypatch.setattr(output.stdout, "_width", width)
        result = cli(*args)
        assert result.exit_code == 0, result.stderr
        text = str(result.stdout)
        assert "…" not in text and "..." not in text, text
        for line in text.splitlines():
            if line[:1] in BOX:  # table lines fit the terminal; free text is left to the terminal to wrap
                assert len(line) <= width, f"{len(line)} > {width}: {line}"
        return text

    return run


def _all_in(values: Iterable[str], text: str) -> None:
    missing = [v for v in values if v not in text]
    assert not missing, f"cut or missing: {missing}\n{text}"


@pytest.mark.parametrize("width", WIDTHS)
def test_gpus(shown: Callable[..., str], cli_json: Callable[..., Any], width: int) -> None:
    text = shown(width, "gpus")
    gpus = cli_json("gpus")["gpus"]
    _all_in([g["name"] for g in gpus], text)
    _all_in([f"{g['sm_clock_min_mhz']:.0f}-{g['sm_clock_max_mhz']:.0f}" for g in gpus], text)
    _all_in([f"{g['hbm_bandwidth_bytes_per_s'] / 1e12:.2f}" for g in gpus], text)


@pytest.mark.parametrize("width", WIDTHS)
def test_models(shown: Callable[..., str], cli_json: Callable[..., Any], width: int) -> None:
    text = shown(width, "models")
    models = cli_json("models")["models"]
    _all_in([m["name"] for m in models], text)
    _all_in([f"{m['params_total'] / 1e9:.2f}" for m in models], text)  # 671.03, not 671…
    _all_in([f"{m['params_active'] / 1e9:.2f}" for m in models], text)  # 37.55, not 37.…
    _all_in([f"{m['kv_cache_bytes_per_token']:,.0f}" for m in models], text)


@pytest.mark.parametrize("width", WIDTHS)
def test_plan_train_with_search_and_power_sweep(
    shown: Callable[..., str], cli_json: Callable[..., Any], width: int
) -> None:
    args = ("plan", "train", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--gpus", "8")
    text = shown(width, *args, "--search", "energy", "--top", "3", "--power-sweep")
    doc = cli_json(*args, "--search", "energy", "--top", "3", "--power-sweep")
    _all_in([f"{doc['tokens_per_s']:,.0f}", f"${doc['cost_usd']:,.0f}", f"{doc['gpu_hours']:,.0f}"], text)
    _all_in([f"{v / 1e9:.2f}" for v in doc["memory_per_gpu_bytes"].values()], text)
    _all_in([f"{r['tokens_per_s']:,.0f}" for r in doc["search"]["results"]], text)
    words = [w for r in doc["search"]["results"] for w in _describe(r).split()]
    _all_in(words, text)  # the config label may wrap between words, never inside one
    points = doc["power_sweep"]["points"]
    _all_in([f"{p['power_limit_w']:.0f}" for p in points], text)
    # energy per step in a unit that shows it (the old table printed 0.00 MJ for every row)
    sweep = text[text.index("Power sweep") :].splitlines()
    energies = [line.split("│")[5].strip() for line in sweep if line.startswith("│")]
    assert energies and all(e.split()[1] in ("J", "kJ", "MJ", "GJ") and float(e.split()[0]) >= 1 for e in energies)


def _describe(row: dict[str, Any]) -> str:
    from twinloop.plan.search import describe

    return describe(row)


@pytest.mark.parametrize("width", WIDTHS)
def test_plan_serve(shown: Callable[..., str], cli_json: Callable[..., Any], width: int) -> None:
    args = ("plan", "serve", "--model", "mixtral-8x7b", "--gpu", "h200-sxm", "--kv-offload", "dram",
            "--kv-offload-gb", "512")  # fmt: skip
    text = shown(width, *args)
    doc = cli_json(*args)
    _all_in([f"{doc['throughput_tokens_per_s']:,.0f}", f"{doc['max_concurrent_sequences']}", "mixtral-8x7b"], text)
    _all_in([f"{doc['prefill']['power_w']:.0f}", f"{doc['decode']['power_w']:.0f}", f"{doc['idle_power_w']:.0f}"], text)


@pytest.mark.slow
def test_plan_compare(shown: Callable[..., str], cli_json: Callable[..., Any], monkeypatch: pytest.MonkeyPatch) -> None:
    from twinloop.plan import showcase

    rows = showcase.showcase(train_gpus=256)  # planned once, printed at both widths
    monkeypatch.setattr(showcase, "showcase", lambda **kw: rows)
    doc = cli_json("plan", "compare", "--train-gpus", "256")
    for width in (80, 160, 200):
        text = shown(width, "plan", "compare", "--train-gpus", "256")
        for case in doc["cases"]:
            t, s = case["train"], case["serve"]
            _all_in([case["model"], case["gpu"], case["precision"], f"{t['tokens_per_s'] / 1e6:.2f}M"], text)
            _all_in([f"{s['throughput_tokens_per_s']:.0f}", f"{s['cost_per_million_tokens_usd']:.2f}"], text)


@pytest.mark.parametrize("width", WIDTHS)
def test_sim(shown: Callable[..., str], cli_json: Callable[..., Any], tmp_path: Path, width: int) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(SCENARIO)
    text = shown(width, "sim", str(scenario))
    doc = cli_json("sim", str(scenario))
    facility = tables.energy_wh(doc["energy"]["facility_kwh"] * 3.6e6)  # e.g. 619 Wh, 20.9 kWh, 1.23 MWh
    _all_in([f"{doc['pue']:.3f}", "train-with-a-rather-long-job-name", facility], text)


@pytest.mark.slow
def test_run(shown: Callable[..., str], tmp_path: Path) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(SCENARIO)
    for width in WIDTHS:
        text = shown(width, "run", str(scenario), "--out", str(tmp_path / f"out{width}"))
        _all_in(["psu_loss", "loop off", "loop on", "thermal_throttled_gpu_s", "psu_trips"], text)


@pytest.mark.parametrize("width", WIDTHS)
def test_detect(shown: Callable[..., str], cli_json: Callable[..., Any], tmp_path: Path, width: int) -> None:
    rng = np.random.default_rng(0)
    temp = 55.0 + 0.5 * rng.standard_normal(400)
    temp[300:] += 8.0
    name = "site0/row1/rack02/node03/gpu4_temp_c"  # a long column name must show in full
    lines = [f"timestamp,{name}"] + [f"{1.7e9 + i:.1f},{temp[i]:.3f}" for i in range(400)]
    csv = tmp_path / "w.csv"
    csv.write_text("\n".join(lines) + "\n")
    text = shown(width, "detect", str(csv))
    doc = cli_json("detect", str(csv))
    assert doc["detections"]
    _all_in([d["entity"] for d in doc["detections"]] + [d["detector"] for d in doc["detections"]], text)


@pytest.mark.parametrize("width", WIDTHS)
def test_query(shown: Callable[..., str], cli_json: Callable[..., Any], tmp_path: Path, width: int) -> None:
    entity = "site-with-a-long-name/row01/rack042/node007/gpu7"
    rows = ["ts,entity,field,value"] + [f"{1.7e9 + i},{entity},DCGM_FI_DEV_POWER_USAGE,{612.5 + i}" for i in range(5)]
    csv = tmp_path / "t.csv"
    csv.write_text("\n".join(rows) + "\n")
    db = str(tmp_path / "t.duckdb")
    cli_json("ingest", "file", str(csv), "--db", db)
    text = shown(width, "query", "--db", db, "--field", "DCGM_FI_DEV_POWER_USAGE")
    _all_in([entity, "612.5", "616.5", "2023-11-14T22:13:20.000Z"], text)


@pytest.mark.parametrize("width", WIDTHS)
def test_probe(shown: Callable[..., str], cli_json: Callable[..., Any], width: int) -> None:
    root = str(FIXTURES / "probe" / "dgx-h100")
    text = shown(width, "probe", "--sysfs-root", root)
    doc = cli_json("probe", "--sysfs-root", root)
    _all_in([f["check"] for f in doc["findings"]], text)
    # evidence paths may wrap only at spaces (there are none inside a path)
    _all_in([e for f in doc["findings"] for e in f["evidence"] if len(e) < width - 30], text)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("command", [[], ["plan"], ["plan", "train"], ["plan", "serve"], ["sim"], ["ingest"]])
def test_help_never_cuts_an_option(width: int, command: list[str]) -> None:
    """`--help` at a narrow terminal (a real process: click reads COLUMNS itself)."""
    env = {**os.environ, "PYTHONPATH": SRC, "COLUMNS": str(width)}
    out = subprocess.run([sys.executable, "-m", "twinloop.cli.main", *command, "--help"], capture_output=True,
                         text=True, env=env, timeout=120)  # fmt: skip
    assert out.returncode == 0 and "…" not in out.stdout
    if command == ["plan", "train"]:
        assert "--sequence-parallel / --no-sequence-parallel" in out.stdout
        assert "--power-sweep" in out.stdout and "--price-gpu-hour" in out.stdout


def test_real_process_reads_columns_from_the_environment() -> None:
    env = {**os.environ, "PYTHONPATH": SRC, "COLUMNS": "80"}
    out = subprocess.run([sys.executable, "-m", "twinloop.cli.main", "gpus"], capture_output=True, text=True, env=env)
    assert out.returncode == 0 and "…" not in out.stdout and "h100-sxm" in out.stdout
    assert max(len(line) for line in out.stdout.splitlines() if line[:1] in BOX) <= 80
