"""`twinloop job-event`: a job records its checkpoint and restart events for `twinloop watch --job-heartbeats`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from twinloop.cli.main import app
from twinloop.ops.respond.adapters.heartbeats import JobHeartbeats

runner = CliRunner()


def test_events_land_in_the_jobs_file_and_the_loop_reads_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    for event, ts in (("checkpoint-start", "100"), ("checkpoint-done", "130"), ("checkpoint-start", "700"),
                      ("checkpoint_done", "720")):  # fmt: skip
        res = runner.invoke(app, ["job-event", event, "--dir", str(tmp_path), "--ts", ts, "--json"])
        assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc == {"job": "4242", "event": "checkpoint_done", "ts": 720.0, "file": str(tmp_path / "4242.jsonl")}
    res = runner.invoke(app, ["job-event", "restarted", "--dir", str(tmp_path), "--job", "7"])
    assert res.exit_code == 0 and res.stdout.startswith(f"{tmp_path / '7.jsonl'}: restarted at ")
    timing = JobHeartbeats(tmp_path, clock=lambda: 1000.0).timing("dc/jobs/4242")
    assert timing is not None and timing.checkpoint_write_s == 25.0 and timing.next_checkpoint_in_s == 310.0


@pytest.mark.parametrize(
    ("args", "where"),
    [
        (["checkpointed", "--job", "1"], "job-event: event: 'checkpointed' (allowed: checkpoint-start,"),
        (["restarted"], "--job: not given and $SLURM_JOB_ID is not set"),
        (["restarted", "--job", "1", "--ts", "-5"], "job-event: ts"),
        (["restarted", "--job", ".."], "--job"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], where: str
) -> None:
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    res = runner.invoke(app, ["job-event", *args, "--dir", str(tmp_path), "--json"])
    assert res.exit_code == 2, res.output
    assert where in res.stderr and res.stderr.count("\n") == 1 and res.stdout == ""


def test_a_directory_it_cannot_write_is_one_line_and_exit_2(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    res = runner.invoke(app, ["job-event", "restarted", "--job", "1", "--dir", str(blocker / "sub")])
    assert res.exit_code == 2 and "--dir" in res.stderr and "cannot write" in res.stderr, res.output
