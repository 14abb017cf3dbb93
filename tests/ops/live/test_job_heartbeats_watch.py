"""`twinloop watch --actuator slurm --job-heartbeats DIR` end to end (issue 14): a straggler in the telemetry, the job's
own checkpoint events in the heartbeat directory, Slurm behind a fake runner. The requeue waits for the checkpoint
the job records, and the straggler's response follows the job's measured checkpoint cadence.
"""

from __future__ import annotations

import csv
import json
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from twinloop.cli.main import app
from twinloop.ops.live.actuators import JobLookup, make_actuator
from twinloop.ops.live.cluster import LiveOptions, SourceCluster
from twinloop.ops.live.jobs import JobMap
from twinloop.ops.live.watcher import WatchConfig, Watcher
from twinloop.ops.respond.adapters.heartbeats import JobHeartbeats, parse_events, record
from twinloop.telemetry.sources.files import FileConfig, FileSource

T0 = 1_795_430_000.0
GPUS = [f"dc/row0/rack0/node0{n}/gpu{g}" for n in (1, 2) for g in range(4)]
SLOW = "dc/row0/rack0/node02/gpu3"  # SM clock 1500 MHz against 1980: it costs job 42 24 % of its throughput


def _recording(path: Path, t0: float, seconds: int = 360) -> Path:
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["ts", "entity", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_SM_CLOCK",
                    "DCGM_FI_DEV_POWER_MGMT_LIMIT"])  # fmt: skip
        for k in range(seconds):
            w.writerows([t0 + k, g, 600.0, 60.0, 1500.0 if g == SLOW else 1980.0, 700.0] for g in GPUS)
    return path


def _cadence(directory: Path, dones: Sequence[float], write_s: float = 20.0) -> None:
    """Job 42's past checkpoints: each written in ``write_s``."""
    for done in dones:
        record(directory, "42", "checkpoint_start", done - write_s)
        record(directory, "42", "checkpoint_done", done)


def _watch(tmp: Path, beats: Path | None, job_done_at: float | None) -> tuple[list[tuple[float, str, str, str]], Any]:
    """Replay the recording through the watcher in auto mode; job 42 records a checkpoint at ``job_done_at``.

    Returns (time since T0, kind, status, reason) of each action, and the Slurm commands run.
    """
    issued: list[list[str]] = []

    def slurm(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        issued.append(list(argv))
        return subprocess.CompletedProcess(list(argv), 0, '{"jobs": []}' if argv[0] == "squeue" else "", "")

    jobs = JobLookup(lambda ids, _labels: JobMap.from_hosts(ids, {"42": ["node01", "node02"]}))
    cluster: SourceCluster | None = None
    # The loop's clock is the recording's (Unix time on a live cluster, where the job's clock is the same).
    heartbeats = None if beats is None else JobHeartbeats(beats, clock=lambda: cluster.now_s() if cluster else T0)
    actuator = make_actuator("slurm", heartbeats=heartbeats, jobs=jobs if heartbeats else None)
    actuator.real._runner = slurm  # type: ignore[attr-defined]
    source = FileSource(FileConfig(path=str(_recording(tmp / "t.csv", T0))))
    cluster = SourceCluster(source, actuator, LiveOptions(cadence_s=1.0), jobs=jobs)
    watcher = Watcher(cluster, None, config=WatchConfig(mode="auto", heartbeat_s=0.0))

    def the_job() -> bool:  # between ticks: the job finishes writing its checkpoint
        nonlocal job_done_at
        if beats is not None and job_done_at is not None and cluster.now_s() >= job_done_at:
            record(beats, "42", "checkpoint_done", job_done_at)
            job_done_at = None
        return False

    watcher.run(stop=the_job)
    log = watcher.runner.responder.log  # type: ignore[attr-defined]
    return [(r.ts - T0, str(r.request.kind), r.status, r.request.reason) for r in log], issued


def test_a_straggler_waits_for_the_jobs_own_checkpoint_and_the_requeue_for_its_record(tmp_path: Path) -> None:
    # Checkpoints every 100 s, each written in 20 s, the last at T0 - 40: by the cadence the next comes 46 s after
    # the straggler is seen (T0 + 14), at the pace the job saved at; slowed 24 %, in 46 / 0.76 = 61 s. Waiting costs
    # 24 % of 61 s = 15 s of the job's progress, less than a 20 s write.
    _cadence(tmp_path, [T0 - 440, T0 - 340, T0 - 240, T0 - 140, T0 - 40])
    actions, issued = _watch(tmp_path, tmp_path, job_done_at=T0 + 60)
    # the job records its checkpoint after the loop's step at T0 + 60: the requeue comes at the next one
    assert [(t, kind, status) for t, kind, status, _ in actions] == [(14.0, "drain", "applied"),
                                                                      (61.0, "requeue", "applied")]  # fmt: skip
    requeue = actions[1][3]
    assert "-> at_checkpoint" in requeue and "following its checkpoint in 61s" in requeue
    assert requeue.endswith("checkpoint of dc/jobs/42 confirmed")
    assert issued[0] == ["squeue", "--json", "--jobs", "42"] and issued[-1] == ["scontrol", "requeue", "42"]
    assert parse_events((tmp_path / "42.jsonl").read_text()).of("requeued") == (T0 + 61,)  # for its restart time


def test_a_straggler_on_a_job_with_a_long_cadence_is_checkpointed_now_and_requeued_once_written(tmp_path: Path) -> None:
    # The next checkpoint 486 s away: 24 % of it (117 s) costs more than a 20 s write. The job answers the
    # checkpoint signal sent at T0 + 14 and records its checkpoint at T0 + 34; the requeue follows the drain.
    _cadence(tmp_path, [T0 - 1500, T0 - 500])
    actions, issued = _watch(tmp_path, tmp_path, job_done_at=T0 + 34)
    assert [(t, kind, status) for t, kind, status, _ in actions] == [
        (14.0, "checkpoint", "applied"), (44.0, "drain", "applied"), (44.0, "requeue", "applied")]  # fmt: skip
    assert "-> now" in actions[0][3] and actions[2][3].endswith("checkpoint of dc/jobs/42 confirmed")
    assert ["scancel", "--signal=USR1", "--batch", "42"] in issued


def test_a_checkpoint_the_job_never_records_goes_to_a_person(tmp_path: Path) -> None:
    _cadence(tmp_path, [T0 - 1500, T0 - 500])
    actions, issued = _watch(tmp_path, tmp_path, job_done_at=None)
    t, kind, status, reason = actions[-1]
    assert (t, kind, status) == (314.0, "requeue", "pending")
    assert reason.endswith("checkpoint not complete after 300s: escalated to a person")
    assert ["scontrol", "requeue", "42"] not in issued


def test_without_job_heartbeats_the_job_of_a_gpu_stays_unknown_as_before(tmp_path: Path) -> None:
    # Unchanged without the option: the Slurm adapter cannot tell a GPU's job, so nothing is done to the job.
    actions, issued = _watch(tmp_path, None, job_done_at=None)
    assert [(kind, status) for _, kind, status, _ in actions] == [("checkpoint", "refused"), ("requeue", "refused"),
                                                                  ("drain", "applied")]  # fmt: skip
    assert "restart cost unknown" in actions[-1][3]
    assert all(a[0] == "scontrol" and a[1] == "update" for a in issued)


runner = CliRunner()


def test_the_watch_command_passes_the_heartbeats_to_the_slurm_adapter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    monkeypatch.setenv("PATH", str(tmp_path))  # no scontrol/squeue here, whatever this machine has
    t0 = time.time() - 10.0  # the CLI's heartbeats are on the wall clock, as on a live cluster
    rec = _recording(tmp_path / "t.csv", t0, seconds=60)
    beats = tmp_path / "beats"
    _cadence(beats, [t0 - 440, t0 - 340, t0 - 240, t0 - 140, t0 - 40])
    (tmp_path / "jobs.yaml").write_text("'42': [node01, node02]\n")
    base = ["watch", f"replay:{rec}", "--actuator", "slurm", "--json"]
    res = runner.invoke(app, [*base, "--jobs", str(tmp_path / "jobs.yaml"), "--job-heartbeats", str(beats)])
    assert res.exit_code == 0, res.output
    (drain,) = json.loads(res.stdout)["actions"]
    assert drain["kind"] == "drain" and drain["rule"] == "straggler-at-checkpoint", drain
    for extra, why in ((["--job-heartbeats", str(beats)], "needs --jobs"),
                       (["--jobs", str(tmp_path / "jobs.yaml"), "--job-heartbeats", str(tmp_path / "no")],
                        "not a directory")):  # fmt: skip
        res = runner.invoke(app, [*base, *extra])
        assert res.exit_code == 2 and why in res.stderr and res.stderr.count("\n") == 1, res.output
    # Without a scheduler's actuator the heartbeats are the jobs' progress alone (test_job_progress.py).
    res = runner.invoke(app, ["watch", f"replay:{rec}", "--jobs", str(tmp_path / "jobs.yaml"), "--job-heartbeats",
                              str(beats), "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "applied" not in {a["status"] for a in json.loads(res.stdout)["actions"]}
