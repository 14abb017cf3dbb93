"""Job heartbeats: how a training job tells the live loop that its checkpoint is written, and what its
checkpoints and restarts cost.

The convention: one directory the job (or its launcher) and the watcher both reach, and in it one append-only
JSON-lines file per job, ``<dir>/<job>.jsonl`` (``<job>`` is the scheduler's id: the Slurm job id, the
Kubernetes ``namespace.pod``), one event a line::

    {"ts": 1795430000.5, "event": "checkpoint_start"}
    {"ts": 1795430021.0, "event": "checkpoint_done"}
    {"ts": 1795431200.0, "event": "requeued"}      # written by the loop when it requeues the job
    {"ts": 1795431345.0, "event": "restarted"}     # the job computes again after loading its checkpoint

``ts`` is Unix time, s (the live loop's clock); other keys are ignored. Rank 0 writes, with :func:`record` or
``twinloop job-event``. The same file carries the job's progress, one ``step`` line a step (its keys in
:data:`STEP_FIELDS`), which :mod:`twinloop.ops.live.job_progress` turns into the job telemetry the hang, slowdown and
SDC rules read; the checkpoint reader here skips those lines. Each rank's own step time goes to its own file,
``<dir>/<job>.ranks/<gpu>.jsonl`` (:func:`record_rank`, :data:`RANK_STEP_FIELDS`), read by
:mod:`twinloop.ops.live.rank_progress` as the per-GPU field the rank straggler rule reads. The older convention,
touching ``<dir>/<job>.checkpoint`` when a checkpoint is complete, still counts as a completed checkpoint at the
file's modification time. Each line's schema (events, keys, allowed ranges) and its parsing are in
:mod:`twinloop.ops.respond.adapters.heartbeat_lines`; this module holds the writers and the checkpoint reader.

What the loop derives (:func:`derive_timing`; None where the file does not tell):

* a checkpoint is confirmed when a ``checkpoint_done`` at or after the time the loop asked is recorded;
* ``checkpoint_write_s``: the median of ``checkpoint_start`` → next ``checkpoint_done``;
* ``next_checkpoint_in_s``: the last ``checkpoint_done`` plus the median interval between them, minus now
  (at least two needed); 0 when up to one interval overdue, None when later (the cadence is broken). That is the
  wait at the job's pace when it saved (``next_checkpoint_at_full_pace``): the restart pricing stretches it by
  ``1/(1 - s)`` for a job a straggler slows by ``s``;
* ``restart_s``: the median of ``requeued`` → next ``restarted``;
* ``checkpoint_interval_s``: the median interval between ``checkpoint_done`` (at least two needed);
* ``interruptions_per_s``: the failures (a ``restarted`` with no ``requeued`` since the one before: nobody asked
  for it) over the time from the file's first event to now; None when none is recorded (unknown, priced as 0);

each median over the last :data:`RECENT` (20).

A live watcher must not stop on a job's typo: a bad line (not JSON, no finite ``ts`` >= 0, an unknown ``event``)
is skipped and counted, and the first one of each file is reported once, naming the file, the line and the
field; a last line still without its newline counts once it is a good line, and is judged bad only once its
newline is written (it may be half-written). A directory that cannot be read answers None (unknown: a requeue
waiting on a checkpoint goes to a person at its timeout); a job with no file has confirmed nothing yet.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import json
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from typing import Any

from twinloop.errors import InputError
from twinloop.ops.file_tail import FileTail
from twinloop.ops.respond.adapters.base import JobTiming, leaf
from twinloop.ops.respond.adapters.heartbeat_lines import (
    EVENTS,
    LINE_EVENTS,
    RANK_EVENT,
    RANK_STEP_FIELDS,
    STEP_FIELDS,
    JobEvents,
    as_float,
    line_event,
    parse_events,
    rank_step_values,
    step_values,
)
from twinloop.ops.say_once import SayOnce

# The line schemas moved to heartbeat_lines; the names callers took from here still come from here.
__all__ = [
    "EVENTS",
    "KEPT_BAD_LINES",
    "LINE_EVENTS",
    "RANK_EVENT",
    "RANK_STEP_FIELDS",
    "READ_CHUNK_BYTES",
    "RECENT",
    "STEP_FIELDS",
    "JobEvents",
    "JobHeartbeats",
    "derive_timing",
    "job_file_name",
    "merge_events",
    "open_heartbeats",
    "own_job_id",
    "parse_events",
    "rank_dir",
    "rank_step_values",
    "record",
    "record_rank",
]

#: Medians are over a job's last 20 checkpoints or restarts: a job that changed its cadence is judged by its new one.
RECENT = 20


def _paired_s(starts: Sequence[float], ends: Sequence[float]) -> list[float]:
    """Durations from each of the last :data:`RECENT` starts to the first end at or after it and before the next
    start (no such end: none). Both sorted.
    """
    out = []
    first = max(len(starts) - RECENT, 0)
    for i in range(first, len(starts)):
        limit = starts[i + 1] if i + 1 < len(starts) else math.inf
        k = bisect.bisect_left(ends, starts[i])
        if k < len(ends) and ends[k] < limit:
            out.append(ends[k] - starts[i])
    return out


def _interval_s(done: Sequence[float]) -> float | None:
    """The job's checkpoint cadence: the median interval between its last saves (None with fewer than two)."""
    intervals = [b - a for a, b in itertools.pairwise(done[-RECENT - 1 :]) if b > a]
    return median(intervals) if intervals else None


def _next_checkpoint_in_s(done: Sequence[float], now_s: float) -> float | None:
    """Time until the job's next checkpoint is done, from the cadence of its past ones (see module docstring)."""
    period_s = _interval_s(done)
    if period_s is None:
        return None
    due_in_s = done[-1] + period_s - now_s
    return None if due_in_s < -period_s else max(due_in_s, 0.0)


def _interruptions_per_s(events: JobEvents, now_s: float) -> float | None:
    """Failures per second: restarts nobody asked for (no ``requeued`` since the restart before) over the time since
    the job's first recorded event; None when none is recorded.
    """
    restarts, requeues = events.of("restarted"), events.of("requeued")
    failures = sum(
        1 for i, ts in enumerate(restarts) if not any((restarts[i - 1] if i else -math.inf) < r <= ts for r in requeues)
    )
    first = min((kind[0] for kind in (events.of(e) for e in EVENTS) if kind), default=now_s)
    return failures / (now_s - first) if failures and now_s > first else None


def derive_timing(events: JobEvents, now_s: float) -> JobTiming:
    """What one job's checkpoints and restarts cost, from its recorded events, at ``now_s`` (Unix s)."""
    writes = _paired_s(events.of("checkpoint_start"), events.of("checkpoint_done"))
    restarts = _paired_s(events.of("requeued"), events.of("restarted"))
    # Wall time since the last save or restart: an upper bound on the work a restart would redo (pauses count).
    saved = [*events.of("checkpoint_done")[-1:], *events.of("restarted")[-1:]]
    return JobTiming(
        checkpoint_write_s=median(writes) if writes else None,
        restart_s=median(restarts) if restarts else None,
        next_checkpoint_in_s=_next_checkpoint_in_s(events.of("checkpoint_done"), now_s),
        unsaved_s=max(0.0, now_s - max(saved)) if saved else None,
        checkpoint_interval_s=_interval_s(events.of("checkpoint_done")),
        interruptions_per_s=_interruptions_per_s(events, now_s),
        next_checkpoint_at_full_pace=True,
    )


def merge_events(parts: Sequence[JobEvents]) -> JobEvents:
    """Several files' events as one job's (a controller's own file and its pods'): each kind's times united and
    sorted, a time recorded in two files counted once; the bad lines are each file's own (the warning named them).
    """
    return JobEvents({e: tuple(sorted({t for part in parts for t in part.of(e)})) for e in EVENTS})


def job_file_name(job: str) -> str | None:
    """The scheduler's id of ``job`` (the last part of ``site/jobs/<id>``) if it is a plain file name, else None."""
    name = leaf(job)
    return None if not name or name in (".", "..") or "\0" in name else name


def _job_file(job: str) -> str:
    """:func:`job_file_name`, or an error naming the bad id."""
    name = job_file_name(job)
    if name is None:
        raise InputError("--job", "", f"{job!r} is not a job id (a Slurm job id or namespace.pod)")
    return name


def _field_error(why: str) -> InputError:
    """A parser's ``field NAME: what (allowed: ...)`` as the writer's one-line error."""
    field, _, rest = why.removeprefix("field ").partition(": ")
    return InputError("job-event", field, rest)


#: Where Kubernetes mounts a pod's namespace (the service account's token volume, in every pod that automounts it).
K8S_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def own_job_id(environ: Mapping[str, str] | None = None, namespace_file: Path | None = None) -> tuple[str | None, str]:
    """The job id a job's own process records its events under: ``$SLURM_JOB_ID``, else in a Kubernetes pod
    (``$KUBERNETES_SERVICE_HOST`` set) ``namespace.pod``, the name the loop's ``--jobs k8s`` gives a bare pod and
    under which it also reads a controller's pods (see ``KubernetesAdapter.checkpoint_done``).

    The namespace is ``$POD_NAMESPACE`` (the downward API's ``metadata.namespace``) else ``namespace_file``; the pod
    is ``$POD_NAME`` (``metadata.name``) else ``$HOSTNAME``, which Kubernetes sets to the pod's name.

    Args:
        environ: the environment (default: the process's).
        namespace_file: the service account's namespace file (default: :data:`K8S_NAMESPACE_FILE`).

    Returns:
        ``(job id, "")``, or ``(None, why)`` naming every source tried.
    """
    env = os.environ if environ is None else environ
    slurm = env.get("SLURM_JOB_ID", "").strip()
    if slurm:
        return slurm, ""
    if not env.get("KUBERNETES_SERVICE_HOST"):
        return None, "$SLURM_JOB_ID not set and not in a Kubernetes pod ($KUBERNETES_SERVICE_HOST not set)"
    path = K8S_NAMESPACE_FILE if namespace_file is None else namespace_file
    ns, unread = env.get("POD_NAMESPACE", "").strip(), ""
    if not ns:
        try:
            ns = path.read_text(encoding="utf-8", errors="replace").strip()
        except OSError as exc:
            ns, unread = "", f"cannot read: {exc.strerror or exc}"
        else:
            unread = "empty"
    pod = env.get("POD_NAME", "").strip() or env.get("HOSTNAME", "").strip()
    missing = []
    if not ns:
        missing.append(f"no namespace ($POD_NAMESPACE not set, {path}: {unread})")
    if not pod:
        missing.append("no pod name ($POD_NAME and $HOSTNAME not set)")
    if missing:
        return None, f"$SLURM_JOB_ID not set and in a Kubernetes pod {' and '.join(missing)}"
    return f"{ns}.{pod}", ""


def record(
    directory: str | Path, job: str, event: str, ts: float | None = None, values: Mapping[str, float] | None = None
) -> Path:
    """Append one event to ``<directory>/<job>.jsonl`` (creating both); returns the file.

    Args:
        directory: the heartbeat directory the watcher reads (``twinloop watch --job-heartbeats``).
        job: the scheduler's job id (``site/jobs/<id>`` is taken as ``<id>``).
        event: one of :data:`LINE_EVENTS` (``checkpoint-done`` spelled with a hyphen is accepted).
        ts: Unix time, s; now when None.
        values: a ``step`` line's keys of :data:`STEP_FIELDS` (``step`` required), written with the event.

    Raises:
        InputError: an unknown event, a bad job id, time or step value.
    """
    name = event.replace("-", "_")
    stamp = time.time() if ts is None else ts
    if name not in LINE_EVENTS:
        allowed = ", ".join(e.replace("_", "-") for e in LINE_EVENTS)
        raise InputError("job-event", "event", f"{event!r} (allowed: {allowed})")
    if not 0 <= as_float(stamp) < math.inf:
        raise InputError("job-event", "ts", f"{stamp!r} (allowed: Unix time, s, a finite number >= 0)")
    doc: dict[str, Any] = {"ts": stamp, "event": name}
    if name == "step":
        given = {k: v for k, v in (values or {}).items() if v is not None}
        unknown = sorted(set(given) - set(STEP_FIELDS))
        if unknown:
            raise InputError("job-event", unknown[0], f"not a step value (allowed: {', '.join(STEP_FIELDS)})")
        _, why = step_values(given)
        if why is not None:
            raise _field_error(why)
        doc.update(given)
    elif values:
        raise InputError("job-event", next(iter(values)), f"step values go with the step event, not {name!r}")
    root = Path(directory)
    path = root / f"{_job_file(job)}.jsonl"
    root.mkdir(parents=True, exist_ok=True)
    _append_line(path, doc)
    return path


def rank_dir(directory: str | Path, job: str) -> Path:
    """Where ``job``'s ranks write their step lines: ``<directory>/<job>.ranks`` (a directory: no job id's
    ``.jsonl`` can be taken for it).
    """
    return Path(directory) / f"{_job_file(job)}.ranks"


def _append_line(path: Path, doc: Mapping[str, Any]) -> None:
    """Append ``doc`` as one JSON line: one write to a file opened for appending (writers do not interleave)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(doc) + "\n").encode())
    finally:
        os.close(fd)


def record_rank(
    directory: str | Path,
    job: str,
    values: Mapping[str, float],
    ts: float | None = None,
    gpu_uuid: str | None = None,
    host: str | None = None,
    gpu_index: int | None = None,
) -> Path:
    """Append one rank's step line to its own file in :func:`rank_dir` (creating both); returns the file.

    Args:
        directory: the heartbeat directory the watcher reads (``twinloop watch --job-heartbeats``).
        job: the scheduler's job id (``site/jobs/<id>`` is taken as ``<id>``).
        values: ``step`` (steps done) and ``step_time_s`` (the rank's own compute time of that step, s, without
            the wait for its peers: see :mod:`twinloop.ops.live.rank_progress`).
        ts: Unix time, s; now when None.
        gpu_uuid: the rank's GPU, by its NVML UUID (``nvidia-smi --query-gpu=uuid``); or else
        host: its host name, with
        gpu_index: its NVML index on that host (``nvidia-smi``'s index, not a CUDA ordinal under
            ``CUDA_VISIBLE_DEVICES``).

    Raises:
        InputError: a bad job id, time, value or GPU, naming the field.
    """
    unknown = sorted(set(values) - set(RANK_STEP_FIELDS))
    if unknown:
        raise InputError("job-event", unknown[0], f"not a rank-step value (allowed: {', '.join(RANK_STEP_FIELDS)})")
    doc: dict[str, Any] = {"ts": time.time() if ts is None else ts, "event": RANK_EVENT, **values}
    where = {"gpu_uuid": gpu_uuid, "host": host, "gpu_index": gpu_index}
    doc.update({k: v for k, v in where.items() if v is not None})
    _, gpu, why = rank_step_values(doc)
    if gpu is None:
        raise _field_error(why or "")
    # One file per GPU, named after it: a rank appends only to its own (see rank_progress on why not the job's).
    name = gpu_uuid if gpu_uuid is not None else f"{host}.gpu{gpu_index}"
    root = rank_dir(directory, job)
    root.mkdir(parents=True, exist_ok=True)
    path = root / f"{name}.jsonl"
    _append_line(path, doc)
    return path


#: Bytes read from a job file per read at most: a long backlog is parsed a chunk at a time, not held whole.
READ_CHUNK_BYTES = 8 << 20
#: Bad lines kept per file (their number and why; all are counted): a job that writes garbage every step must not
#: fill the watcher's memory.
KEPT_BAD_LINES = 100


_NONE: tuple[str | None, float, str | None] = (None, 0.0, None)


@dataclass
class _JobFile:
    """One job file as read so far: the tail, each lifecycle event's times (sorted), the bad lines.

    Step lines are parsed (a bad one is counted) but not kept: the questions need the lifecycle events only.
    """

    tail: FileTail = field(default_factory=FileTail)
    found: dict[str, list[float]] = field(default_factory=lambda: {e: [] for e in EVENTS})
    bad: list[tuple[int, str]] = field(default_factory=list)
    bad_count: int = 0
    #: The answer for what was read (None: to build again), and the partial last line it was built with.
    answer: JobEvents | None = None
    answer_partial: bytes = b""

    def take(self, number: int, line: str) -> None:
        event, ts, why = line_event(line)
        if why is not None:
            self.bad_count += 1
            if len(self.bad) < KEPT_BAD_LINES:
                self.bad.append((number, why))
        elif event is not None:
            bisect.insort(self.found[event], ts)  # a late line (two writers) is put in its place

    def events(self) -> JobEvents:
        """The events read, and a last line still without its newline if it is a good one already (a writer that
        ends its file without one); a bad one waits for its newline (it may be still being written).
        """
        if self.answer is not None and self.answer_partial == self.tail.partial:
            return self.answer
        found = {e: tuple(v) for e, v in self.found.items()}
        event, ts, _ = line_event(self.tail.partial.decode("utf-8", errors="replace")) if self.tail.partial else _NONE
        if event is not None:
            found[event] = tuple(sorted((*found[event], ts)))
        self.answer, self.answer_partial = JobEvents(found, tuple(self.bad)), self.tail.partial
        return self.answer


class JobHeartbeats:
    """Reads a heartbeat directory for the live loop: checkpoint confirmations and :class:`JobTiming`.

    Each job file is read as it grows (:class:`~twinloop.ops.file_tail.FileTail`): a question costs the bytes
    written since the last one, and the reader keeps per job the lifecycle events only, not the step lines (a job
    stepping 6 times a second writes 3.6 M of them a week). A file read afresh (truncated, rotated, rewritten) is
    parsed again from its start; a file that went away has recorded nothing (what was read is kept until another
    file takes its name).

    Args:
        directory: the heartbeat directory.
        clock: now, in the loop's clock (Unix s on a live cluster).
        warn: told once per file about its first bad line (the watcher's progress stream).
    """

    def __init__(
        self,
        directory: str | Path,
        clock: Callable[[], float] = time.time,
        warn: Callable[[str], None] | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.clock = clock
        self._say = SayOnce(warn)
        self._files: dict[str, _JobFile] = {}

    @property
    def bad_lines(self) -> int:
        """Lines skipped so far, over every job file read."""
        return sum(f.bad_count for f in self._files.values())

    def events(self, job: str) -> JobEvents | None:
        """``job``'s events (none recorded: empty); None when the directory cannot be read.

        ``bad`` holds the file's first :data:`KEPT_BAD_LINES` bad lines (:attr:`bad_lines` counts them all).
        """
        if not os.access(self.directory, os.R_OK | os.X_OK) or not self.directory.is_dir():
            return None
        name = job_file_name(job)
        if name is None:
            return None
        path = self.directory / f"{name}.jsonl"
        state = self._files.setdefault(str(path), _JobFile())
        try:
            self._catch_up(state, path)
        except FileNotFoundError:
            return JobEvents({})
        except OSError:
            return None
        if state.bad:  # said once per file
            number, why = state.bad[0]
            bad = f"{why} (skipped; {state.bad_count} bad line(s))"
            self._say(f"job heartbeats: {path}: line {number}: {bad}", key=str(path))
        return state.events()

    def _catch_up(self, state: _JobFile, path: Path) -> None:
        """Parse what was written to ``path`` since the last read, to its end as it is now."""
        while True:
            offset = state.tail.offset
            lines, fresh = state.tail.take(path, READ_CHUNK_BYTES)
            moved = fresh or state.tail.offset != offset
            if fresh:  # what it holds now is all there is
                state.found, state.bad, state.bad_count = {e: [] for e in EVENTS}, [], 0
            if lines or fresh:
                state.answer = None
            for number, raw in lines:
                state.take(number, raw.decode("utf-8", errors="replace"))
            if not moved or state.tail.stamp is not None:  # nothing more, or at the end
                return

    def checkpoint_done(self, job: str, since_ts: float) -> bool | None:
        """Whether ``job`` recorded a completed checkpoint (in its ``.jsonl``, or by touching its ``.checkpoint``) at
        or after ``since_ts``; None when the directory cannot be read.
        """
        events = self.events(job)
        if events is None:
            return None
        done = list(events.of("checkpoint_done"))
        with contextlib.suppress(OSError):
            done.append((self.directory / f"{_job_file(job)}.checkpoint").stat().st_mtime)
        return bool(done) and max(done) >= since_ts

    def timing(self, job: str, also: Sequence[str] = ()) -> JobTiming | None:
        """``job``'s :class:`JobTiming` now (remaining time is the scheduler's); None when unreadable.

        Args:
            job: the job id.
            also: more ids whose events count as ``job``'s (a controller's pods, each recording under
                ``namespace.pod``; an unreadable one is left out).
        """
        events = self.events(job)
        if events is None:
            return None
        more = [e for e in (self.events(other) for other in also) if e is not None]
        return derive_timing(merge_events([events, *more]) if more else events, self.clock())

    def note_requeue(self, job: str) -> str:
        """Record that the loop requeued ``job`` (its restart time is measured to the job's ``restarted``);
        '' or why it could not be recorded.
        """
        try:
            record(self.directory, job, "requeued", self.clock())
        except (OSError, InputError) as exc:
            return f"requeue not recorded in {self.directory}: {exc}"
        return ""


def open_heartbeats(directory: str | Path, warn: Callable[[str], None] | None = None) -> JobHeartbeats:
    """:class:`JobHeartbeats` over an existing directory (``twinloop watch --job-heartbeats``), on Unix time.

    Raises:
        InputError: ``directory`` is not a directory (a typo would leave every checkpoint unknown).
    """
    if not Path(directory).is_dir():
        raise InputError("--job-heartbeats", "", f"{directory}: not a directory")
    return JobHeartbeats(directory, warn=warn)
