"""Job heartbeats (issue 14): the events a job records → checkpoint confirmation and what its restarts cost."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twinloop.errors import InputError
from twinloop.ops.respond.actions import ActionKind, ActionRequest
from twinloop.ops.respond.adapters.base import JobTiming
from twinloop.ops.respond.adapters.commands import SlurmAdapter, slurm_end_time_s
from twinloop.ops.respond.adapters.heartbeat_lines import EVENTS, LINE_EVENTS, bad_field, line_event, parse_events
from twinloop.ops.respond.adapters.heartbeats import JobHeartbeats, derive_timing, open_heartbeats, record
from twinloop.ops.respond.restart_cost import choose_restart

T0 = 1_795_430_000.0


def _cadence(directory: Path, job: str, dones: Sequence[float], write_s: float) -> None:
    for done in dones:
        record(directory, job, "checkpoint_start", done - write_s)
        record(directory, job, "checkpoint-done", done)


def test_timing_from_the_jobs_own_checkpoints_and_restarts(tmp_path: Path) -> None:
    _cadence(tmp_path, "42", [T0 - 1200, T0 - 600, T0 - 10], write_s=25.0)  # intervals 600, 590
    record(tmp_path, "42", "requeued", T0 - 5000)
    record(tmp_path, "42", "restarted", T0 - 4860)
    timing = JobHeartbeats(tmp_path, clock=lambda: T0).timing("dc1/jobs/42")
    # median interval 595 s after the last done at T0 - 10: the next one in 585 s; 10 s of work since that save
    assert timing == JobTiming(
        checkpoint_write_s=25.0,
        restart_s=140.0,
        next_checkpoint_in_s=585.0,
        unsaved_s=10.0,
        checkpoint_interval_s=595.0,
        next_checkpoint_at_full_pace=True,
    )
    # a restart never seen complete, and a lone checkpoint: nothing measured but the save just now
    record(tmp_path, "7", "requeued", T0)
    record(tmp_path, "7", "checkpoint_done", T0)
    assert JobHeartbeats(tmp_path, clock=lambda: T0).timing("7") == JobTiming(
        unsaved_s=0.0, next_checkpoint_at_full_pace=True
    )


def test_a_heartbeat_cadence_is_stretched_by_the_stragglers_slowdown_before_pricing_the_wait(tmp_path: Path) -> None:
    # Saves every 600 s (20 s writes), the last 510 s ago: by the cadence the next is in 90 s at the pace the job
    # saved at. A 20 % straggler makes the job reach that iteration in 90 / 0.8 = 112.5 s: waiting costs 0.2 x 112.5
    # = 22.5 job-seconds against the 20 s write, so restart now. Before: priced at 90 s (18 s), it waited.
    _cadence(tmp_path, "42", [T0 - 1710, T0 - 1110, T0 - 510], write_s=20.0)
    timing = JobHeartbeats(tmp_path, clock=lambda: T0).timing("dc1/jobs/42")
    assert timing is not None and timing.next_checkpoint_in_s == 90.0
    choice = choose_restart(0.2, timing)
    assert choice.when == "now"
    assert "restart at its own checkpoint 22s" in choice.why or "restart at its own checkpoint 23s" in choice.why
    # The twin's adapter reports the wait at the job's pace now: not stretched again.
    assert choose_restart(0.2, replace(timing, next_checkpoint_at_full_pace=False)).when == "at_checkpoint"


def test_the_jobs_failure_rate_counts_restarts_nobody_asked_for(tmp_path: Path) -> None:
    record(tmp_path, "42", "checkpoint_done", T0 - 4000)  # the file's first event
    record(tmp_path, "42", "restarted", T0 - 3000)  # a crash: no requeue before it
    record(tmp_path, "42", "requeued", T0 - 2100)  # the loop moved it: not a failure
    record(tmp_path, "42", "restarted", T0 - 2000)
    record(tmp_path, "42", "restarted", T0 - 1000)  # another crash
    timing = JobHeartbeats(tmp_path, clock=lambda: T0).timing("42")
    assert timing is not None and timing.interruptions_per_s == 2 / 4000.0


def test_a_job_that_changed_its_cadence_is_judged_by_its_recent_checkpoints(tmp_path: Path) -> None:
    old = [T0 - 50_000 + 1000.0 * k for k in range(30)]  # every 1000 s, 60 s writes, long ago
    _cadence(tmp_path, "42", old, write_s=60.0)
    _cadence(tmp_path, "42", [T0 - 100.0 * k for k in range(20, -1, -1)], write_s=15.0)  # now every 100 s, 15 s writes
    timing = JobHeartbeats(tmp_path, clock=lambda: T0 + 30).timing("42")
    assert timing == JobTiming(
        checkpoint_write_s=15.0,
        next_checkpoint_in_s=70.0,
        unsaved_s=30.0,
        checkpoint_interval_s=100.0,
        next_checkpoint_at_full_pace=True,
    )


def test_an_overdue_checkpoint_is_due_now_and_a_missed_one_unknown(tmp_path: Path) -> None:
    _cadence(tmp_path, "42", [T0 - 200, T0 - 100], write_s=10.0)
    at = {now: JobHeartbeats(tmp_path, clock=lambda now=now: now).timing("42") for now in (T0 + 50, T0 + 150)}
    assert at[T0 + 50] is not None and at[T0 + 50].next_checkpoint_in_s == 0.0  # 50 s late: jitter, due now
    assert at[T0 + 150] is not None and at[T0 + 150].next_checkpoint_in_s is None  # a whole interval missed


def test_checkpoint_confirmed_from_either_file_and_unknown_without_the_directory(tmp_path: Path) -> None:
    beats = JobHeartbeats(tmp_path)
    assert beats.checkpoint_done("dc/jobs/42", T0) is False  # nothing recorded yet
    record(tmp_path, "42", "checkpoint_done", T0 - 1)
    assert beats.checkpoint_done("dc/jobs/42", T0) is False  # an older checkpoint
    record(tmp_path, "42", "checkpoint_done", T0 + 3)
    assert beats.checkpoint_done("dc/jobs/42", T0) is True
    touched = tmp_path / "9.checkpoint"  # the older convention still counts
    touched.touch()
    os.utime(touched, (T0 + 1, T0 + 1))
    assert beats.checkpoint_done("dc/jobs/9", T0) is True
    assert JobHeartbeats(tmp_path / "gone").checkpoint_done("dc/jobs/42", T0) is None
    assert JobHeartbeats(tmp_path / "gone").timing("dc/jobs/42") is None
    with pytest.raises(InputError, match=r"--job-heartbeats.*not a directory"):
        open_heartbeats(tmp_path / "gone")


def test_a_bad_line_is_skipped_counted_and_reported_once_naming_file_line_and_field(tmp_path: Path) -> None:
    f = tmp_path / "42.jsonl"
    f.write_text('{"ts": 100, "event": "checkpoint_done"}\n{"ts": "soon", "event": "checkpoint_done"}\n\nnope\n')
    told: list[str] = []
    beats = JobHeartbeats(tmp_path, warn=told.append)
    assert beats.checkpoint_done("42", 100.0) is True
    assert beats.checkpoint_done("42", 100.0) is True
    assert beats.bad_lines == 2
    assert told == [f"job heartbeats: {f}: line 2: field ts: 'soon' (allowed: Unix time, s, a finite number >= 0)"
                    " (skipped; 2 bad line(s))"]  # fmt: skip
    assert parse_events('{"ts": 1, "event": "checkpointed"}').bad == ((1, _allowed("'checkpointed'")),)


def _allowed(got: str) -> str:
    return f"field event: {got} (allowed: {', '.join(LINE_EVENTS)})"


def test_the_writer_appends_one_json_line_and_refuses_bad_input(tmp_path: Path) -> None:
    path = record(tmp_path / "new", "site/jobs/42", "checkpoint-start", 12.5)
    assert path == tmp_path / "new" / "42.jsonl"
    assert [json.loads(x) for x in path.read_text().splitlines()] == [{"ts": 12.5, "event": "checkpoint_start"}]
    with pytest.raises(InputError, match="event: 'done'"):
        record(tmp_path, "42", "done")
    with pytest.raises(InputError, match="ts"):
        record(tmp_path, "42", "restarted", float("nan"))
    with pytest.raises(InputError, match="--job"):
        record(tmp_path, "jobs/..", "restarted")


_TS = st.one_of(st.floats(allow_nan=True), st.integers(), st.booleans(), st.text(max_size=5), st.none(),
                st.just(10**400))  # fmt: skip
_EVENT = st.one_of(st.sampled_from(EVENTS), st.text(max_size=12))
_LINE = st.one_of(st.text(max_size=60), st.fixed_dictionaries({"ts": _TS, "event": _EVENT}).map(json.dumps),
                  st.just("[" * 100_000))  # fmt: skip


@given(st.lists(_LINE, max_size=30), st.floats(min_value=0, max_value=4e9))
def test_any_lines_never_crash_and_derived_durations_are_not_negative(lines: list[str], now: float) -> None:
    events = parse_events("\n".join(lines))
    kept = sum(len(v) for v in events.ts.values())
    assert kept + len(events.bad) == sum(1 for x in "\n".join(lines).split("\n") if x.strip())
    timing = derive_timing(events, now)
    for value in (timing.checkpoint_write_s, timing.restart_s, timing.next_checkpoint_in_s, timing.unsaved_s):
        assert value is None or value >= 0.0


def _squeue(doc: object) -> SlurmAdapter:
    return SlurmAdapter(runner=lambda argv: subprocess.CompletedProcess(argv, 0, json.dumps(doc), ""))


def test_slurm_gives_the_remaining_time_from_the_jobs_end_time(tmp_path: Path) -> None:
    _cadence(tmp_path, "42", [T0 - 200, T0 - 100], write_s=10.0)
    old = {"jobs": [{"job_id": 41, "end_time": T0 + 99}, {"job_id": 42, "end_time": T0 + 3600}]}  # Slurm <= 22.05
    new = {"jobs": [{"job_id": 42, "end_time": {"set": True, "infinite": False, "number": T0 + 1800}}]}
    for doc, left_s in ((old, 3600.0), (new, 1800.0)):
        adapter = _squeue(doc)
        adapter.heartbeats = JobHeartbeats(tmp_path, clock=lambda: T0)
        timing = adapter.job_timing("dc/jobs/42")
        assert timing is not None and timing.remaining_s == left_s and timing.next_checkpoint_in_s == 0.0
    assert slurm_end_time_s(json.dumps({"jobs": [{"job_id": 42, "end_time": {"infinite": True}}]}), "42") is None
    assert slurm_end_time_s("not json", "42") is None
    assert _squeue(old).job_timing("dc/jobs/42") is None  # no heartbeats: no squeue, nothing known, as before


def test_a_requeue_the_loop_applies_is_recorded_for_the_restart_time(tmp_path: Path) -> None:
    adapter = _squeue({})
    adapter.dry_run = False
    adapter.heartbeats = JobHeartbeats(tmp_path, clock=lambda: T0)
    assert adapter.apply(ActionRequest(ActionKind.REQUEUE, "dc/jobs/42")).status == "applied"
    record(tmp_path, "42", "restarted", T0 + 140)
    timing = adapter.heartbeats.timing("42")
    assert timing is not None and timing.restart_s == 140.0


# ---------------------------------------------------------------- the reader reads each file as it grows

_GOOD = st.builds(
    lambda event, dt: json.dumps({"ts": T0 + dt, "event": event, **({"step": 1} if event == "step" else {})}),
    st.sampled_from(LINE_EVENTS),
    st.floats(-2000, 2000, allow_nan=False),
)
_ANY_LINE = st.one_of(_GOOD, _GOOD, _GOOD, st.text(max_size=30), st.just('{"ts": 5, "event": "restarted"'))


def _whole(path: Path) -> tuple[str, str]:
    """The file's text, and its complete lines' (to its last newline)."""
    text = path.read_bytes().decode("utf-8", errors="replace")
    return text, text[: text.rfind("\n") + 1]


@settings(max_examples=150, deadline=None)
@given(
    lines=st.lists(_ANY_LINE, max_size=25),
    end_newline=st.booleans(),
    cuts=st.lists(st.tuples(st.integers(0, 3000), st.floats(-1000, 1000)), max_size=6),
    rotate_after=st.integers(0, 6),
)
def test_any_split_of_the_appends_against_the_queries_answers_as_reading_the_whole_file(
    tmp_path_factory: pytest.TempPathFactory,
    lines: list[str],
    end_newline: bool,
    cuts: list[tuple[int, float]],
    rotate_after: int,
) -> None:
    """However the appends fall against the questions (mid-line included), and across a rotation, each answer is
    the one parsing the whole file then gives (the bad lines: its complete lines'; a line still being written is
    judged once its newline is there)."""
    directory = tmp_path_factory.mktemp("beats")
    path = directory / "42.jsonl"
    text = "\n".join(lines) + ("\n" if end_newline else "")
    told: list[str] = []
    beats = JobHeartbeats(directory, clock=lambda: T0 + 3000, warn=told.append)
    written = 0
    for k, (cut, since) in enumerate([*sorted(cuts), (len(text), 0.0)]):
        if k == rotate_after and path.exists():
            # Rotated: another file under the name, its first line another (a step line, not the reader's) and
            # longer than the old file (so not even the same size as a state read before: see FileTail).
            pad = "x" * path.stat().st_size
            new = directory / "new"
            new.write_text(json.dumps({"ts": 0, "event": "step", "step": 0, "pad": pad}) + "\n")
            os.replace(new, path)
        with path.open("ab") as f:
            f.write(text[written : max(cut, written)].encode())
        written = max(cut, written)
        got = beats.events("42")
        assert got is not None
        whole, complete = _whole(path)
        want = parse_events(whole)
        assert got.ts == want.ts
        assert got.bad == parse_events(complete).bad and beats.bad_lines == len(got.bad)
        assert beats.timing("42") == derive_timing(want, T0 + 3000)
        dones = want.of("checkpoint_done")
        assert beats.checkpoint_done("42", T0 + since) is (bool(dones) and dones[-1] >= T0 + since)
    assert len(told) <= 1 and all(m.startswith(f"job heartbeats: {path}: line ") for m in told)


def test_a_long_file_is_read_once_and_then_only_what_was_appended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, every question parsed the whole file again: a week of a job's step lines, seconds a question."""
    from twinloop.ops.respond.adapters import heartbeats

    for k in range(2000):
        record(tmp_path, "42", "step", T0 + k, {"step": k})
    record(tmp_path, "42", "checkpoint_done", T0 + 2000)
    parsed: list[str] = []
    real = heartbeats.line_event
    monkeypatch.setattr(heartbeats, "line_event", lambda line: (parsed.append(line), real(line))[1])
    monkeypatch.setattr(heartbeats, "READ_CHUNK_BYTES", 4096, raising=False)  # a backlog over many reads
    beats = JobHeartbeats(tmp_path, clock=lambda: T0 + 2100)
    assert beats.checkpoint_done("42", T0 + 1999) is True
    assert len(parsed) == 2001
    parsed.clear()
    for _ in range(3):
        assert beats.checkpoint_done("42", T0 + 2001) is False
    assert parsed == []  # nothing written since: nothing parsed
    record(tmp_path, "42", "step", T0 + 2001, {"step": 2001})
    record(tmp_path, "42", "checkpoint_done", T0 + 2002)
    assert beats.checkpoint_done("42", T0 + 2001) is True
    assert len(parsed) == 2


def _by_json_loads(line: str) -> tuple[str | None, float, str | None]:
    """The line check done by ``json.loads`` alone (the reader's fast path must answer the same)."""
    if not line.strip():
        return None, 0.0, None
    try:
        doc = json.loads(line)
    except (ValueError, RecursionError):
        return None, 0.0, "not JSON"
    why = bad_field(doc)
    if why is not None:
        return None, 0.0, why
    return (doc["event"], float(doc["ts"]), None) if doc["event"] in EVENTS else (None, 0.0, None)


_JSON_VALUE = st.recursive(
    st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=6) | st.just(10**400),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=6,
)
_KEY = st.sampled_from(['"ts"', '"event"', '"\\u0074s"', '"step"', '"x"'])
_RAW_VALUE = st.one_of(
    _JSON_VALUE.map(lambda v: json.dumps(v)),
    st.sampled_from(
        [
            '"step"',
            '"finished"',
            '"checkpoint_done"',
            "NaN",
            "-0",
            "1e400",
            "01",
            "1.e5",
            "-",
            '"\\ud800"',
            '"a{b"',
            '"[',
            "9" * 5000,
            "[" * 1200 + "]" * 1200,
            "{}",
            "true",
            '"\x01"',
        ]
    ),
    st.floats(0, 2e9).map(repr),
)
_OBJECT = st.lists(st.tuples(_KEY, _RAW_VALUE), max_size=5).map(
    lambda kv: "{" + ", ".join(f"{k}: {v}" for k, v in kv) + "}"
)
_ODD_LINE = st.one_of(
    _OBJECT,
    _OBJECT.map(lambda x: x + " \r"),
    _OBJECT.map(lambda x: "\ufeff" + x),
    _OBJECT.map(lambda x: x + ","),
    st.text(max_size=40),
    _GOOD,
)


@settings(max_examples=400, deadline=None)
@given(_ODD_LINE)
def test_the_fast_line_check_answers_as_json_loads_on_any_line(line: str) -> None:
    assert line_event(line) == _by_json_loads(line)
