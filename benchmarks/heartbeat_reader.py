"""The checkpoint reader's cost per question on a long job heartbeat file: the incremental ``JobHeartbeats`` (reads
what was appended since the last question) against parsing the whole file at each question (the reader before).

    python benchmarks/heartbeat_reader.py                     # files of 300,000 and 3,600,000 lines
    python benchmarks/heartbeat_reader.py --lines 300000 --json
    python benchmarks/heartbeat_reader.py --no-memory        # times only (the memory passes run under tracemalloc)

The file: one job stepping 6 times a second (the step lines ``twinloop job-event step`` writes: step, step_time_s,
loss, grad_norm, tokens_per_s) with a checkpoint every 10 minutes (``checkpoint_start``, ``checkpoint_done`` 20 s
later), written line by line with the real writer (:func:`~twinloop.ops.respond.adapters.heartbeats.record`) into a
temporary directory: 300,000 lines are ~14 hours of such a job, 3,600,000 a week.

A question is what the responder asks at each poll while a requeue waits for the job's checkpoint:
``checkpoint_done`` then ``timing``. Between two questions the job appends one step line (the real writer).

* after, first question: the whole backlog read once (a watcher started on a running job; a good step line is told
  by msgspec, any other by ``json.loads``);
* after, per question: the median over ``--queries`` questions, each after one more step line;
* before, per question: ``read_text`` + ``parse_events`` as it was (``json.loads`` every line) + ``derive_timing``,
  what the reader before did at every question whose file had changed (its cache held only while the file was
  unchanged; a stepping job changes it every step), the median over ``--before-queries``;
* memory (``tracemalloc``, in separate passes: it slows Python down): the peak of one question (before: any; after:
  the first) and what the reader keeps once it has answered.

Wall time on the shared 2-core machine moves with the other processes' load (printed); CPU time (``process_time``)
much less. No target is asserted here: the figures are for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from twinloop.ops.respond.adapters.heartbeat_lines import EVENTS, JobEvents, bad_field, parse_events
from twinloop.ops.respond.adapters.heartbeats import JobHeartbeats, derive_timing, record

T0 = 1_795_430_000.0
STEP_S = 1.0 / 6.0  # 6 steps a second
CHECKPOINT_EVERY_STEPS = 3600  # every 10 minutes at that pace
CHECKPOINT_WRITE_S = 20.0
JOB = "42"


def write_job_file(directory: Path, lines: int) -> float:
    """``lines`` lines of one job (see the module docstring) with the real writer; returns the last line's time."""
    ts, step, written = T0, 0, 0
    while written < lines:
        step += 1
        ts = T0 + step * STEP_S
        values = {"step": step, "step_time_s": STEP_S, "loss": 2.5, "grad_norm": 0.9, "tokens_per_s": 1.2e5}
        record(directory, JOB, "step", ts, values)
        written += 1
        if step % CHECKPOINT_EVERY_STEPS == 0 and written + 2 <= lines:
            record(directory, JOB, "checkpoint_start", ts)
            record(directory, JOB, "checkpoint_done", ts + CHECKPOINT_WRITE_S)
            written += 2
    return ts


def _timed(fn: Callable[[], object]) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def parse_events_before(text: str) -> JobEvents:
    """``parse_events`` as it was before: ``json.loads`` on every line (now a good step line is told by msgspec)."""
    found: dict[str, list[float]] = {e: [] for e in EVENTS}
    bad: list[tuple[int, str]] = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
        except (ValueError, RecursionError):
            bad.append((number, "not JSON"))
            continue
        why = bad_field(doc)
        if why is not None:
            bad.append((number, why))
            continue
        if doc["event"] in found:
            found[doc["event"]].append(float(doc["ts"]))
    return JobEvents({e: tuple(sorted(v)) for e, v in found.items()}, tuple(bad))


def _before(path: Path, now_s: float, since_s: float) -> None:
    """The reader before, at a question on a changed file: the whole file parsed again."""
    events = parse_events_before(path.read_text(encoding="utf-8", errors="replace"))
    done = events.of("checkpoint_done")
    _ = bool(done) and done[-1] >= since_s
    derive_timing(events, now_s)


def _after(beats: JobHeartbeats, since_s: float) -> None:
    beats.checkpoint_done(JOB, since_s)
    beats.timing(JOB)


def _peak_mib(fn: Callable[[], object]) -> tuple[float, float]:
    """(peak while ``fn`` ran, still held after it), MiB, by tracemalloc."""
    gc.collect()
    tracemalloc.start()
    fn()
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 2**20, current / 2**20


def measure(lines: int, queries: int, before_queries: int, memory: bool) -> dict[str, Any]:
    """Every figure for one file of ``lines`` lines (see the module docstring)."""
    with tempfile.TemporaryDirectory(prefix="twinloop-heartbeats-") as tmp:
        directory = Path(tmp)
        start = time.perf_counter()
        last_ts = write_job_file(directory, lines)
        write_s = time.perf_counter() - start
        path = directory / f"{JOB}.jsonl"
        clock = [last_ts]
        since_s = last_ts + 1.0  # the requeue asked after the last save: the answer is no, poll after poll
        beats = JobHeartbeats(directory, clock=lambda: clock[0])
        first = _timed(lambda: _after(beats, since_s))
        step = lines
        per_query: list[tuple[float, float]] = []
        for _ in range(queries):
            step += 1
            clock[0] += STEP_S
            record(directory, JOB, "step", clock[0], {"step": step, "step_time_s": STEP_S})
            per_query.append(_timed(lambda: _after(beats, since_s)))
        before: list[tuple[float, float]] = []
        for _ in range(before_queries):
            step += 1
            clock[0] += STEP_S
            record(directory, JOB, "step", clock[0], {"step": step, "step_time_s": STEP_S})
            before.append(_timed(lambda: _before(path, clock[0], since_s)))
        out: dict[str, Any] = {
            "lines": lines,
            "file_mib": path.stat().st_size / 2**20,
            "write_s": write_s,
            "after_first_wall_s": first[0],
            "after_first_cpu_s": first[1],
            "after_query_wall_s": statistics.median(q[0] for q in per_query) if per_query else None,
            "after_query_cpu_s": statistics.median(q[1] for q in per_query) if per_query else None,
            "before_query_wall_s": statistics.median(q[0] for q in before) if before else None,
            "before_query_cpu_s": statistics.median(q[1] for q in before) if before else None,
            "answers_equal": _equal(beats, path, clock[0]),
        }
        if memory:
            del beats
            fresh: list[JobHeartbeats] = []

            def first_question() -> None:
                fresh.append(JobHeartbeats(directory, clock=lambda: clock[0]))
                _after(fresh[0], since_s)

            out["after_first_peak_mib"], out["after_kept_mib"] = _peak_mib(first_question)
            out["before_query_peak_mib"], _ = _peak_mib(lambda: _before(path, clock[0], since_s))
        return out


def _equal(beats: JobHeartbeats, path: Path, now_s: float) -> bool:
    """Whether the reader's answers equal the whole file's, parsed now and as before."""
    text = path.read_text(encoding="utf-8", errors="replace")
    events = beats.events(JOB)
    whole, before = parse_events(text), parse_events_before(text)
    return (
        events is not None and events.ts == whole.ts == before.ts and beats.timing(JOB) == derive_timing(whole, now_s)
    )


def _fmt(x: float | None, unit: str = "s") -> str:
    if x is None:
        return "-"
    if unit == "s":
        return f"{x * 1e3:.3f} ms" if x < 1.0 else f"{x:.2f} s"
    return f"{x:,.1f} MiB"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--lines", type=int, nargs="+", default=[300_000, 3_600_000], help="file lengths, lines")
    ap.add_argument("--queries", type=int, default=50, help="incremental questions timed per file")
    ap.add_argument("--before-queries", type=int, default=3, help="whole-file questions timed per file")
    ap.add_argument("--no-memory", action="store_true", help="skip the tracemalloc passes")
    ap.add_argument("--json", action="store_true", help="print one JSON document")
    a = ap.parse_args()
    rows = [measure(n, a.queries, a.before_queries, not a.no_memory) for n in a.lines]
    if a.json:
        print(json.dumps({"load_avg_1m": os.getloadavg()[0], "rows": rows}, indent=2))
        return
    print(f"load average (1 min) at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    print("| lines | file | before: per question (wall / CPU) | after: first question (wall / CPU) "
          "| after: per question (wall / CPU) | memory peak before / after first | kept after |")  # fmt: skip
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['lines']:,} | {_fmt(r['file_mib'], 'MiB')} "
            f"| {_fmt(r['before_query_wall_s'])} / {_fmt(r['before_query_cpu_s'])} "
            f"| {_fmt(r['after_first_wall_s'])} / {_fmt(r['after_first_cpu_s'])} "
            f"| {_fmt(r['after_query_wall_s'])} / {_fmt(r['after_query_cpu_s'])} "
            f"| {_fmt(r.get('before_query_peak_mib'), 'MiB')} / {_fmt(r.get('after_first_peak_mib'), 'MiB')} "
            f"| {_fmt(r.get('after_kept_mib'), 'MiB')} |"
        )
    for r in rows:
        print(f"{r['lines']:,} lines written in {r['write_s']:.1f} s; answers equal to the whole file's: "
              f"{r['answers_equal']}")  # fmt: skip


if __name__ == "__main__":
    main()
