"""Walls a new user hit walking the CLI on an 80-column terminal (each test failed before its fix)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

_MOE = ["plan", "moe", "--model", "mixtral-8x7b", "--gpus", "64", "--ep", "8", "--steps", "1", "--tokens", "64"]


def _one_error_line(result: Any) -> str:
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return str(lines[0])


@pytest.mark.parametrize(
    "command",
    [["sim", "--duration", "1m"], ["run", "--duration", "1m"], _MOE],
    ids=["sim", "run", "plan moe"],
)
@pytest.mark.parametrize("where", ["file", "under-file"])
def test_out_that_cannot_be_a_directory_is_one_line_exit_2(
    cli: Callable[..., Any], tmp_path: Path, command: list[str], where: str
) -> None:
    """`--out` naming a file (or a path under one) was a FileExistsError / NotADirectoryError traceback (exit 1),
    and for `plan moe` only after the whole routing study had run.
    """
    afile = tmp_path / "afile"
    afile.write_text("keep me\n")
    out = afile if where == "file" else afile / "sub"
    line = _one_error_line(cli(*command, "--out", str(out)))
    assert line.startswith("error: --out: ") and str(out) in line
    assert afile.read_text() == "keep me\n"  # nothing lost


def test_sweep_out_is_checked_before_any_run(
    cli: Callable[..., Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`sweep --out FILE` ran the first eight runs (minutes) before its row sink's mkdir raised a traceback."""
    import twinloop.sweep.runner

    def no_runs(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("runs started before --out was checked")

    monkeypatch.setattr(twinloop.sweep.runner, "run_cells", no_runs)
    afile = tmp_path / "afile"
    afile.write_text("")
    spec = Path(__file__).resolve().parents[2] / "sweeps" / "new-user.yaml"
    line = _one_error_line(cli("sweep", str(spec), "--out", str(afile)))
    assert line.startswith("error: --out: ")


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["--gpus", "64", "--ep", "3"], ["ep", "8 routed experts", "3"]),
        (["--gpus", "64", "--ep", "16"], ["ep", "8 routed experts", "16"]),
        (["--gpus", "60", "--ep", "8"], ["60 GPUs", "ep 8"]),
    ],
)
@pytest.mark.parametrize("command", [["plan", "train", "--gpu", "h100-sxm"], ["plan", "moe", "--steps", "1"]])
def test_expert_parallelism_that_cannot_work_says_why(
    cli: Callable[..., Any], command: list[str], args: list[str], needles: list[str]
) -> None:
    """`--ep 3` for Mixtral's 8 experts said only "no valid configuration ... with {'ep': 3}" (a Python dict)."""
    line = _one_error_line(cli(*command, "--model", "mixtral-8x7b", *args))
    assert "{" not in line and all(n in line for n in needles), line


def test_plan_moe_names_the_training_config_in_words(cli: Callable[..., Any]) -> None:
    """The footer printed the planner's config as a Python dict repr ({'tp': 1, 'pp': 1, ...})."""
    result = cli(*_MOE, "--router", "topk", "--placement", "contiguous")
    assert result.exit_code == 0, result.stderr
    assert "{'" not in result.stdout and "tp1 pp1" in result.stdout.replace("\n", " ")


@pytest.mark.parametrize(
    "command", [["plan", "serve", "--tp", "8"], ["plan", "train", "--gpu", "h100-sxm", "--gpus", "64"]]
)
def test_routing_file_of_many_routers_says_to_pick_one(
    cli: Callable[..., Any], tmp_path: Path, command: list[str]
) -> None:
    """`plan moe --out` saves every router by default; `--routing` then said only '6 rows match --router/--placement'
    though its help says it replaces --router: the error now says which flag picks one row.
    """
    assert cli(*_MOE, "--out", str(tmp_path)).exit_code == 0
    line = _one_error_line(
        cli(*command, "--model", "mixtral-8x7b", "--ep", "8", "--routing", str(tmp_path / "moe_routing.json"))
    )
    assert "--router topk" in line and "rows:" in line, line


def test_sim_says_a_job_that_never_started_is_queued_not_ettr_zero(cli: Callable[..., Any]) -> None:
    """A 2-minute `sim` of the default hall printed "ETTR 0.000" for the two jobs submitted later, as if they had
    run and lost all their time; they are queued. (--json keeps ettr 0.0 and gives the phase.)
    """
    result = cli("sim", "--duration", "2m")
    assert result.exit_code == 0, result.stderr
    out = " ".join(result.stdout.split())
    assert "train-llama-8b-sweep (training) │ not started (queued)" in out, out
    assert "ETTR 0.000" not in out


def _wide_csv(tmp_path: Path, step_c: float) -> Path:
    import numpy as np

    rng = np.random.default_rng(0)
    temp = 55.0 + 0.5 * rng.standard_normal(400)
    temp[300:] += step_c
    csv = tmp_path / "w.csv"
    csv.write_text("t,gpu_temp_c\n" + "".join(f"{1.7e9 + i:.1f},{temp[i]:.3f}\n" for i in range(400)))
    return csv


def test_detect_on_a_wide_file_fits_80_columns_in_one_table(
    cli: Callable[..., Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wide CSV (nvidia-smi style, the H100 samples) repeated each column name under "entity / column" and
    "field", which pushed the detections table into three parts at 80 columns.
    """
    from twinloop.cli import output

    monkeypatch.setattr(output.stdout, "_width", 80)
    result = cli("detect", str(_wide_csv(tmp_path, 8.0)))
    assert result.exit_code == 0, result.stderr
    assert "(continued)" not in result.stdout and "field" not in result.stdout.split("detections", 1)[1]
    assert "gpu_temp_c" in result.stdout and "cusum" in result.stdout


def test_detect_with_nothing_found_prints_no_empty_table(cli: Callable[..., Any], tmp_path: Path) -> None:
    result = cli("detect", str(_wide_csv(tmp_path, 0.0)))
    assert result.exit_code == 0, result.stderr
    assert "0 detections" in result.stdout and "┏" not in result.stdout


def test_run_without_faults_in_its_window_prints_no_empty_detection_table(
    cli: Callable[..., Any], tmp_path: Path
) -> None:
    """`run --duration 1m` (the default hall's faults start at 8 min) printed an empty detection table."""
    result = cli("run", "--duration", "1m", "--out", str(tmp_path))
    assert result.exit_code == 0, result.stderr
    assert "Detection vs injected faults (loop-on pass): no fault injected within the run" in result.stdout
    assert result.stdout.count("┏") == 1  # the outcome table only


def test_run_gives_no_ettr_for_a_job_that_never_started(cli: Callable[..., Any], tmp_path: Path) -> None:
    """`run --duration 1m` printed `ettr[train-llama-8b-sweep]` 0 for loop off and on, as if the job had run and lost
    all its time; it is submitted later and never started. Its goodput (0 tokens/s) stays a figure.
    """
    result = cli("run", "--duration", "1m", "--out", str(tmp_path), "--json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    for side in ("loop_off", "loop_on"):
        outcome = doc[side]["outcome"]
        assert outcome["ettr[train-llama-8b-sweep]"] is None
        assert outcome["goodput_tokens_per_s[train-llama-8b-sweep]"] == 0.0
        assert outcome["ettr[train-llama-70b]"] > 0


@pytest.fixture
def small_store(cli: Callable[..., Any], tmp_path: Path) -> str:
    csv = tmp_path / "t.csv"
    rows = [f"{1.7e9 + i},site0/row0/rack0/node0/gpu{g},DCGM_FI_DEV_POWER_USAGE,{300 + g}" for i in range(5)
            for g in range(2)]  # fmt: skip
    csv.write_text("ts,entity,field,value\n" + "\n".join(rows) + "\n")
    db = str(tmp_path / "t.duckdb")
    assert cli("ingest", "file", str(csv), "--db", db).exit_code == 0
    return db


def test_query_matching_nothing_says_so(cli: Callable[..., Any], small_store: str) -> None:
    """`query --entity` with a typo printed an empty table and nothing else."""
    result = cli("query", "--db", small_store, "--field", "DCGM_FI_DEV_POWER_USAGE", "--entity", "site0/row9")
    assert result.exit_code == 0, result.stderr
    assert "┏" not in result.stdout
    assert "no samples of DCGM_FI_DEV_POWER_USAGE under site0/row9" in " ".join(result.stdout.split())


def test_query_every_with_aggregate_is_refused(cli: Callable[..., Any], small_store: str) -> None:
    """`--every 1m --aggregate` printed the aggregate table titled "every 1m": --every was silently dropped."""
    line = _one_error_line(
        cli("query", "--db", small_store, "--field", "DCGM_FI_DEV_POWER_USAGE", "--every", "1m", "--aggregate")
    )
    assert "--aggregate" in line and "--every" in line


@pytest.mark.parametrize(
    ("flags", "needles"),
    [
        (["--kv-offload-gb", "100"], ["--kv-offload-gb", "--kv-offload"]),
        (["--acceptance", "0.9"], ["--acceptance", "--draft-model"]),
        (["--spec-tokens", "6"], ["--spec-tokens", "--draft-model"]),
    ],
)
def test_plan_serve_flag_that_has_no_effect_alone_is_refused(
    cli: Callable[..., Any], flags: list[str], needles: list[str]
) -> None:
    """These were silently ignored (the same plan came back), as if the user's setting had been used; --moe-imbalance
    on a dense model already was an error.
    """
    line = _one_error_line(cli("plan", "serve", "--model", "llama-3-8b", "--gpus", "1", "--tp", "1", *flags))
    assert all(n in line for n in needles), line


def test_ingest_twin_takes_samples_and_names_its_options(cli: Callable[..., Any], tmp_path: Path) -> None:
    """`ingest twin --samples 3` and `--duration 30` said only "the twin source has no such option", with no way
    named to bound the twin (its option is `steps`); --samples (sweeps) now sets it, and the error lists them.
    """
    db = str(tmp_path / "t.duckdb")
    result = cli("ingest", "twin", "--samples", "3", "--db", db, "--json")
    assert result.exit_code == 0, result.stderr
    line = _one_error_line(cli("ingest", "twin", "--duration", "30", "--db", db))
    assert "--duration" in line and "steps" in line and "--samples" in line, line


@pytest.mark.parametrize(
    ("flags", "needles"),
    [
        (["--tokens-per-batch", "100"], ["--tokens-per-batch", "8192"]),  # was planned as 8,192 tokens, silently
        (["--moe-imbalance", "2"], ["--moe-imbalance", "no experts"]),  # was ignored (plan serve refuses it)
        (["--cp", "2", "--seq-len", "8191"], ["cp", "8191", "divisible"]),  # was "no valid configuration ..."
        (["--ray"], ["--ray", "--search"]),  # was ignored: Ray runs only a search
    ],
)
def test_plan_train_setting_it_cannot_honour_is_refused(
    cli: Callable[..., Any], flags: list[str], needles: list[str]
) -> None:
    line = _one_error_line(cli("plan", "train", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--gpus", "8", *flags))
    assert all(n in line for n in needles), line


def test_watch_alertmanager_url_without_scheme_is_refused_up_front(cli: Callable[..., Any], tmp_path: Path) -> None:
    """`--alertmanager am:9093` was taken; every alert then failed to send (a warning per alert, exit 0)."""
    csv = tmp_path / "w.csv"
    csv.write_text("ts,entity,field,value\n1.7e9,gpu0,DCGM_FI_DEV_POWER_USAGE,300\n")
    line = _one_error_line(cli("watch", f"replay:{csv}", "--alertmanager", "am:9093"))
    assert "--alertmanager" in line and "http://" in line


def test_query_on_a_csv_given_as_the_store_says_it_is_not_a_duckdb_store(
    cli: Callable[..., Any], tmp_path: Path
) -> None:
    """`query --db samples.csv` reached DuckDB's "Cannot launch in-memory database in read-only mode!"; the file is
    left as it was."""
    csv = tmp_path / "samples.csv"
    csv.write_text("timestamp,gpu,power_w\n2026-11-23T10:00:00Z,0,697.7\n")
    before = csv.read_bytes()
    line = _one_error_line(cli("query", "--db", str(csv), "--field", "DCGM_FI_DEV_POWER_USAGE"))
    assert "not a DuckDB store" in line and "samples.csv" in line
    assert csv.read_bytes() == before


def test_ingest_file_reads_the_nvml_samplers_csv_as_detect_and_watch_replay_do(
    cli: Callable[..., Any], tmp_path: Path
) -> None:
    """`ingest file samples_20hz.csv` (shared/data/h100's sampler layout) refused the header that `detect` and `watch
    replay:` read ("expected 'ts,entity,field,value' ..."); its NVML units are converted (mW -> W)."""
    import json

    csv = tmp_path / "samples.csv"
    csv.write_text("t,power_mw,gpu_temp_c,sm_mhz\n1795429872.431,69589,33,345\n1795429872.481,70112,33,1980\n")
    db = tmp_path / "s.duckdb"
    result = cli("ingest", "file", str(csv), "--db", str(db), "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["rows_stored"] == 6
    out = cli("query", "--db", str(db), "--field", "DCGM_FI_DEV_POWER_USAGE", "--json")
    assert [round(r["value"], 3) for r in json.loads(out.stdout)["rows"]] == [69.589, 70.112]
