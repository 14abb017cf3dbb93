"""`twinloop watch SOURCE --db FILE` keys the GPU rows it writes: a watcher run again over the same recording stores
none of them twice, and a restarted live watcher still writes every new row (nothing lost).
"""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

from typer.testing import CliRunner

from twinloop.cli.main import app
from twinloop.ops.live.actuators import NoActuator
from twinloop.ops.live.cluster import LiveOptions, SourceCluster
from twinloop.ops.live.kinds import build_source
from twinloop.ops.live.row_keys import gpu_rows_source_key
from twinloop.ops.live.watcher import WatchConfig, Watcher
from twinloop.ops.records import LiveRecords
from twinloop.telemetry.fields import DCGM_FI_DEV_POWER_USAGE, DCGM_FI_DEV_SM_CLOCK
from twinloop.telemetry.ingest import default_source_key
from twinloop.telemetry.sources.files import FileConfig, FileSource
from twinloop.telemetry.store.duckdb_store import DuckDBStore
from twinloop.telemetry.store.session import SessionStore

T0 = 1_795_430_000.0
GPUS = tuple(f"dc/row0/rack0/node01/gpu{g}" for g in range(4))
SMI = Path(__file__).parents[2] / "fixtures" / "h100_nvml" / "smi.csv"  # a real H100's nvidia-smi log
runner = CliRunner()


def _recording(path: Path, seconds: range) -> Path:
    """4 GPUs, one row each per second of ``seconds`` (power rising with time, so each row is distinct)."""
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["ts", "entity", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_SM_CLOCK"])
        for k in seconds:
            w.writerows([T0 + k, g, 300.0 + k, 60.0, 1980.0] for g in GPUS)
    return path


def _rows(db: Path, field: str) -> list[tuple[float, str]]:
    with DuckDBStore(db, read_only=True) as store:
        tab = store.query(field)
    return sorted(zip(tab.column("ts").to_pylist(), tab.column("entity").to_pylist(), strict=True))


def _twice(rows: list[tuple[float, str]]) -> list[tuple[float, str]]:
    return [k for k, n in Counter(rows).items() if n > 1]


def _cli_watch(spec: str, db: Path) -> None:
    res = runner.invoke(app, ["watch", spec, "--db", str(db), "--json"])
    assert res.exit_code == 0, res.output


def test_a_recording_watched_twice_into_one_store_is_stored_once(tmp_path: Path) -> None:
    rec = _recording(tmp_path / "gpus.csv", range(40))
    db = tmp_path / "watch.duckdb"
    _cli_watch(f"replay:{rec}", db)
    first = _rows(db, DCGM_FI_DEV_SM_CLOCK)
    assert len(first) == 40 * len(GPUS) and not _twice(first)
    _cli_watch(f"replay:{rec}", db)  # an operator re-running it (after a crash, or with other rules)
    assert _rows(db, DCGM_FI_DEV_SM_CLOCK) == first


def test_a_real_nvidia_smi_log_watched_twice_is_stored_once(tmp_path: Path) -> None:
    db = tmp_path / "watch.duckdb"
    _cli_watch(f"nvidia-smi:{SMI}", db)
    first = _rows(db, DCGM_FI_DEV_POWER_USAGE)
    assert len(first) >= 500 and not _twice(first)
    _cli_watch(f"nvidia-smi:{SMI}", db)
    assert _rows(db, DCGM_FI_DEV_POWER_USAGE) == first


def test_a_recording_is_keyed_as_twinloop_ingest_keys_it_and_pacing_is_not_data(tmp_path: Path) -> None:
    rec = _recording(tmp_path / "gpus.csv", range(3))
    key = gpu_rows_source_key(f"replay:{rec}", build_source(f"replay:{rec}"))
    assert key == default_source_key(FileSource(FileConfig(path=str(rec))))  # what `twinloop ingest file` uses
    smi = [gpu_rows_source_key(f"nvidia-smi:{SMI}", build_source(f"nvidia-smi:{SMI}", period_s=p)) for p in (1, 2)]
    assert smi[0] == smi[1] and str(SMI.resolve()) in smi[0]


def test_a_live_source_is_keyed_by_its_kind_and_target() -> None:
    assert gpu_rows_source_key("nvml", build_source("nvml")) == "live:nvml:"
    assert gpu_rows_source_key("nvml", build_source("nvml", period_s=0.5)) == "live:nvml:"
    dcgm = gpu_rows_source_key("dcgm:node17:9400", build_source("dcgm:node17:9400"))
    assert dcgm == "live:dcgm:http://node17:9400/metrics"


def _watch_as_live(rec: Path, db: Path) -> None:
    """A watcher whose GPU rows carry the key of a live NVML source (the recording stands in for the GPUs)."""
    built = build_source(f"replay:{rec}")
    store = SessionStore(db)
    key = gpu_rows_source_key("nvml", build_source("nvml"))
    cluster = SourceCluster(built.source, NoActuator(), LiveOptions(cadence_s=built.cadence_s),
                            on_frame=lambda f: store.append(f, source_key=key))  # fmt: skip
    Watcher(cluster, LiveRecords(store), config=WatchConfig(mode="observe")).run()


def test_a_restarted_live_watcher_writes_every_new_row_and_none_twice(tmp_path: Path) -> None:
    db = tmp_path / "watch.duckdb"
    _watch_as_live(_recording(tmp_path / "before.csv", range(30)), db)
    # Restarted: the source hands again the last 10 s it had stored (a catch-up), then new readings, and one late
    # reading from before all it stored (older than the key's span, never stored).
    _watch_as_live(_recording(tmp_path / "after.csv", range(20, 60)), db)
    _watch_as_live(_recording(tmp_path / "late.csv", range(-5, -4)), db)
    rows = _rows(db, DCGM_FI_DEV_SM_CLOCK)
    assert not _twice(rows)
    assert rows == sorted((T0 + k, g) for k in [-5, *range(60)] for g in GPUS)
    with DuckDBStore(db, read_only=True) as store:
        spans = store.con.execute("SELECT source, ts_min, ts_max FROM ingests").fetchall()
    assert spans == [("live:nvml:", T0 - 5, T0 + 59)]
