"""A job's own step lines as live job telemetry (issue 14: the hang, slowdown and SDC rules must hold in
`twinloop watch`, not only in the twin; NVML and dcgm-exporter see no job's steps).
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from twinloop.cli.main import app
from twinloop.ops.live.job_progress import JobProgress
from twinloop.ops.respond.adapters.heartbeats import parse_events, record
from twinloop.telemetry.fields import (
    TWINLOOP_FI_JOB_GRAD_NORM,
    TWINLOOP_FI_JOB_LOSS,
    TWINLOOP_FI_JOB_PHASE,
    TWINLOOP_FI_JOB_PROGRESS,
    TWINLOOP_FI_JOB_STEP_TIME,
)

T0 = 1_795_430_000.0
GPUS = [f"dc/row0/rack0/node01/gpu{g}" for g in range(2)]


def _step(directory: Path, ts: float, step: int, **values: float) -> None:
    record(directory, "7", "step", ts, {"step": step, **values})


def test_each_field_is_the_latest_reported_at_or_before_the_samples_time(tmp_path: Path) -> None:
    _step(tmp_path, T0, 1, step_time_s=0.8, loss=3.0)
    _step(tmp_path, T0 + 1, 2, step_time_s=0.9)  # no loss on this line: the last one stands
    _step(tmp_path, T0 + 2, 3, step_time_s=1.0, loss=2.5)
    progress = JobProgress(tmp_path)
    early = progress.fields(["dc/jobs/7", "dc/jobs/8"], T0 + 1.5)  # job 8 reported nothing
    assert early[TWINLOOP_FI_JOB_PROGRESS].tolist()[0] == 2 and math.isnan(early[TWINLOOP_FI_JOB_PROGRESS][1])
    assert early[TWINLOOP_FI_JOB_STEP_TIME][0] == 0.9 and early[TWINLOOP_FI_JOB_LOSS][0] == 3.0
    late = progress.fields(["7"], T0 + 5)
    assert late[TWINLOOP_FI_JOB_PROGRESS][0] == 3 and late[TWINLOOP_FI_JOB_LOSS][0] == 2.5
    assert late[TWINLOOP_FI_JOB_PHASE][0] == 3.0  # training
    assert math.isnan(late[TWINLOOP_FI_JOB_GRAD_NORM][0])


def test_the_file_is_read_as_it_grows_and_a_line_still_being_written_waits(tmp_path: Path) -> None:
    path = tmp_path / "7.jsonl"
    progress = JobProgress(tmp_path)
    assert math.isnan(progress.fields(["7"], T0)[TWINLOOP_FI_JOB_PROGRESS][0])  # no file yet
    line = json.dumps({"ts": T0, "event": "step", "step": 10}) + "\n"
    path.write_text(line + line[:20])
    assert progress.fields(["7"], T0 + 1)[TWINLOOP_FI_JOB_PROGRESS][0] == 10
    with path.open("a") as f:
        f.write(line[20:].replace('"step": 10', '"step": 11').replace(str(T0), str(T0 + 1)))
    assert progress.fields(["7"], T0 + 2)[TWINLOOP_FI_JOB_PROGRESS][0] == 11
    path.write_text(json.dumps({"ts": T0 + 3, "event": "step", "step": 1}) + "\n")  # rotated: shorter
    assert progress.fields(["7"], T0 + 4)[TWINLOOP_FI_JOB_PROGRESS][0] == 1


def test_the_phase_follows_the_jobs_checkpoint_and_restart_lines(tmp_path: Path) -> None:
    _step(tmp_path, T0, 5)
    record(tmp_path, "7", "checkpoint_start", T0 + 1)
    record(tmp_path, "7", "checkpoint_done", T0 + 30)
    record(tmp_path, "7", "requeued", T0 + 40)
    record(tmp_path, "7", "restarted", T0 + 90)
    _step(tmp_path, T0 + 95, 6)
    progress = JobProgress(tmp_path)
    phases = [progress.fields(["7"], T0 + dt)[TWINLOOP_FI_JOB_PHASE][0] for dt in (0, 10, 31, 50, 91, 96)]
    assert phases == [3.0, 4.0, 3.0, 0.0, 2.0, 3.0]  # training, checkpoint, training, queued, launch, training
    # The checkpoint reader still reads the same file (step lines are not its, nor bad lines).
    assert parse_events((tmp_path / "7.jsonl").read_text()).bad == ()


def test_a_bad_line_is_skipped_and_its_file_named_once(tmp_path: Path) -> None:
    path = tmp_path / "7.jsonl"
    lines = [{"ts": T0, "event": "step", "step": 1, "step_time_s": 1.0},
             {"ts": T0 + 1, "event": "step", "step": 2, "step_time_s": 0.0},  # not > 0
             {"ts": T0 + 2, "event": "step", "loss": 2.0},  # no step
             {"ts": T0 + 3, "event": "step", "step": True}]  # fmt: skip
    path.write_text("".join(json.dumps(x) + "\n" for x in lines) + "{not json\n")
    said: list[str] = []
    progress = JobProgress(tmp_path, said.append)
    out = progress.fields(["7"], T0 + 10)
    assert out[TWINLOOP_FI_JOB_PROGRESS][0] == 1 and out[TWINLOOP_FI_JOB_STEP_TIME][0] == 1.0
    assert progress.bad_lines == 4
    assert said == [f"job heartbeats: {path}: line 2: field step_time_s: 0.0 (allowed: a finite number > 0) (skipped)"]


@pytest.mark.parametrize(
    ("values", "field"),
    [({}, "step"), ({"step": -1}, "step"), ({"step": 1, "loss": math.nan}, "loss"), ({"step": 1, "x": 2}, "x")],
)
def test_recording_a_bad_step_names_the_field(tmp_path: Path, values: dict[str, float], field: str) -> None:
    from twinloop.errors import InputError

    with pytest.raises(InputError, match=f"job-event: {field}"):
        record(tmp_path, "7", "step", T0, values)
    assert not (tmp_path / "7.jsonl").exists()


_reports = st.lists(
    st.tuples(st.floats(0, 50, allow_nan=False), st.integers(0, 10**6), st.floats(1e-3, 100)), max_size=30
)


@settings(max_examples=60, deadline=None)
@given(reports=_reports, cuts=st.lists(st.integers(0, 4000), max_size=6), at=st.floats(0, 60))
def test_any_split_of_the_file_gives_the_latest_report_due(
    tmp_path_factory: pytest.TempPathFactory, reports: list[tuple[float, int, float]], cuts: list[int], at: float
) -> None:
    """However the writes fall against the reads, a sample sees the last report at or before its time."""
    directory = tmp_path_factory.mktemp("beats")
    ordered = sorted(reports, key=lambda r: r[0])
    text = "".join(json.dumps({"ts": T0 + t, "event": "step", "step": s, "step_time_s": d}) + "\n"
                   for t, s, d in ordered)  # fmt: skip
    progress = JobProgress(directory)
    path = directory / "7.jsonl"
    written = 0
    for cut in sorted(c for c in cuts if c < len(text)):
        with path.open("a") as f:
            f.write(text[written:cut])
        written = max(written, cut)
        progress.fields(["7"], T0 - 1)  # reads happen before anything is due
    with path.open("a") as f:
        f.write(text[written:])
    got = progress.fields(["7"], T0 + at)[TWINLOOP_FI_JOB_PROGRESS][0]
    due = [s for t, s, _ in ordered if T0 + t <= T0 + at]  # compared as written: in Unix seconds
    assert (math.isnan(got) and not due) or got == due[-1]


# ---------------------------------------------------------------- end to end: twinloop watch on a recording


def _recording(path: Path, cadence_s: float, seconds: float) -> Path:
    """Two busy GPUs at a steady clock, sampled every ``cadence_s``."""
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["ts", "entity", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_SM_CLOCK",
                    "DCGM_FI_DEV_POWER_MGMT_LIMIT"])  # fmt: skip
        for t in np.arange(0.0, seconds, cadence_s):
            w.writerows([T0 + t, g, 600.0, 60.0, 1980.0, 700.0] for g in GPUS)
    return path


def _job(beats: Path, until_s: float, step_s: float = 1.0, stall: tuple[float, float] | None = None,
         slow: tuple[float, float, float] | None = None, spike_at_s: float | None = None) -> None:  # fmt: skip
    """Job 7's step lines: a step every ``step_s`` (none inside ``stall``), ``slow`` = (from, to, factor) on the
    step time, a gradient-norm spike at ``spike_at_s``."""
    t, step = 0.0, 0
    rng = np.random.default_rng(0)
    while t < until_s:
        d = step_s * (slow[2] if slow and slow[0] <= t < slow[1] else 1.0)
        t += d
        if stall and stall[0] <= t < stall[1]:
            t = stall[1]
        step += 1
        grad = 1.0 + 0.05 * rng.standard_normal()
        loss = 3.0 - 0.001 * step + 0.01 * rng.standard_normal()
        if spike_at_s is not None and spike_at_s <= t < spike_at_s + d:
            grad = 3.0e5
        _step(beats, T0 + t, step, step_time_s=d, loss=loss, grad_norm=grad)


runner = CliRunner()


def _watch(tmp: Path, cadence_s: float, seconds: float, heartbeats: bool = True) -> dict[str, Any]:
    rec = _recording(tmp / f"gpus_{cadence_s:g}.csv", cadence_s, seconds)
    (tmp / "jobs.yaml").write_text("'7': [node01]\n")
    extra = ["--jobs", str(tmp / "jobs.yaml")] + (["--job-heartbeats", str(tmp / "beats")] if heartbeats else [])
    res = runner.invoke(app, ["watch", f"replay:{rec}", *extra, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)  # type: ignore[no-any-return]


def _of(doc: dict[str, Any], cls: str) -> list[dict[str, Any]]:
    return [i for i in doc["incidents"] if i["class"] == cls]


@pytest.mark.parametrize("cadence_s", [1.0, 5.0])
def test_a_hung_job_is_one_hang_incident_at_either_cadence(tmp_path: Path, cadence_s: float) -> None:
    # Steps every second, none from 100 s to 200 s (the last at 99 s): the hang rule's limit is max(3 steps, 15 s)
    # of no progress, so the hang is seen at 114 s, or at the first sample after it.
    _job(tmp_path / "beats", 300.0, stall=(100.0, 200.0))
    doc = _watch(tmp_path, cadence_s, 300.0)
    (hang,) = _of(doc, "job_hang")
    assert hang["root"] == "dc/jobs/7"
    assert 114.0 <= hang["opened_ts"] - T0 < 114.0 + cadence_s
    assert 195.0 <= hang["last_ts"] - T0 <= 200.0 + cadence_s
    assert [i["class"] for i in doc["incidents"] if i["severity"] != "info"] == ["job_hang"]


def test_without_the_jobs_heartbeats_the_hang_goes_unseen_as_before(tmp_path: Path) -> None:
    _job(tmp_path / "beats", 300.0, stall=(100.0, 200.0))
    assert _of(_watch(tmp_path, 1.0, 300.0, heartbeats=False), "job_hang") == []


def test_a_long_checkpoint_the_job_reports_is_no_hang(tmp_path: Path) -> None:
    beats = tmp_path / "beats"
    _job(beats, 300.0, stall=(100.0, 200.0))
    record(beats, "7", "checkpoint_start", T0 + 100.5)
    record(beats, "7", "checkpoint_done", T0 + 199.5)
    assert _of(_watch(tmp_path, 1.0, 300.0), "job_hang") == []


def test_a_slower_step_with_the_clock_unchanged_is_a_straggler_on_the_job(tmp_path: Path) -> None:
    # Steps 40 % slower from 120 s to 220 s, the GPUs' clock and power as before: something the GPU counters do not
    # show slows the job (a slow host or link, a co-tenant).
    _job(tmp_path / "beats", 300.0, slow=(120.0, 220.0, 1.4))
    doc = _watch(tmp_path, 1.0, 300.0)
    (slow,) = _of(doc, "straggler")
    assert slow["root"] == "dc/jobs/7" and 120.0 <= slow["opened_ts"] - T0 <= 130.0


def test_a_gradient_norm_spike_with_no_hardware_event_is_suspected_sdc(tmp_path: Path) -> None:
    _job(tmp_path / "beats", 300.0, spike_at_s=150.0)
    doc = _watch(tmp_path, 1.0, 300.0)
    (sdc,) = _of(doc, "suspected_sdc")
    assert sdc["root"] == "dc/jobs/7" and 150.0 <= sdc["opened_ts"] - T0 <= 153.0


def test_the_heartbeats_need_the_jobs_and_no_longer_a_scheduler_actuator(tmp_path: Path) -> None:
    rec = _recording(tmp_path / "t.csv", 1.0, 5.0)
    (tmp_path / "beats").mkdir()
    res = runner.invoke(app, ["watch", f"replay:{rec}", "--job-heartbeats", str(tmp_path / "beats")])
    assert res.exit_code == 2 and "needs --jobs" in res.stderr and res.stderr.count("\n") == 1, res.output


def test_job_event_records_a_step_with_its_values(tmp_path: Path) -> None:
    res = runner.invoke(app, ["job-event", "step", "--dir", str(tmp_path), "--job", "7", "--ts", str(T0), "--step",
                              "12", "--step-time-s", "0.8", "--loss", "2.5", "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["step"] == 12.0
    assert JobProgress(tmp_path).fields(["7"], T0)[TWINLOOP_FI_JOB_STEP_TIME][0] == 0.8
    res = runner.invoke(app, ["job-event", "step", "--dir", str(tmp_path), "--job", "7", "--loss", "1"])
    assert res.exit_code == 2 and "job-event: step: missing" in res.stderr, res.output
    res = runner.invoke(app, ["job-event", "restarted", "--dir", str(tmp_path), "--job", "7", "--step", "3"])
    assert res.exit_code == 2 and "step values go with the step event" in res.stderr, res.output


def test_a_spike_between_two_samples_is_seen_however_far_apart_they_are(tmp_path: Path) -> None:
    # A real H200 job stepping every 0.16 s: under a 5 s watcher the step after a flipped bit's loss spike was
    # reported before the next sample, and only the latest step was seen.
    for k, loss in enumerate([3.0, 3.0, 5.0e33, 3.0, 2.9]):
        _step(tmp_path, T0 + 0.2 * k, k + 1, loss=loss, grad_norm=1.0 + k)
    progress = JobProgress(tmp_path)
    out = progress.fields(["7"], T0 + 5.0)
    assert out[TWINLOOP_FI_JOB_LOSS][0] == 5.0e33 and out[TWINLOOP_FI_JOB_GRAD_NORM][0] == 5.0
    assert out[TWINLOOP_FI_JOB_PROGRESS][0] == 5  # the counter is the latest
    _step(tmp_path, T0 + 6.0, 6, loss=2.8)
    assert progress.fields(["7"], T0 + 7.0)[TWINLOOP_FI_JOB_LOSS][0] == 2.8  # the next sample's own steps only


def test_a_job_that_finished_is_no_hang(tmp_path: Path) -> None:
    # The H200 job's watcher opened a hang 15 s after its last step: the job had ended, the job file still named it.
    beats = tmp_path / "beats"
    _job(beats, 150.0)
    record(beats, "7", "finished", T0 + 150.5)
    doc = _watch(tmp_path, 1.0, 300.0)
    assert _of(doc, "job_hang") == []
    assert JobProgress(beats).fields(["7"], T0 + 200)[TWINLOOP_FI_JOB_PHASE][0] == 7.0


def test_a_rank_line_in_the_jobs_own_file_says_where_it_belongs(tmp_path: Path) -> None:
    line = {"ts": T0, "event": "rank_step", "step": 1, "step_time_s": 1.0}
    (tmp_path / "7.jsonl").write_text(json.dumps(line) + "\n")
    said: list[str] = []
    JobProgress(tmp_path, said.append).fields(["7"], T0)
    assert said == [f"job heartbeats: {tmp_path / '7.jsonl'}: line 1: field event: 'rank_step' belongs in 7.ranks/, one"
                    " file per rank (not the job's file) (skipped)"]  # fmt: skip
