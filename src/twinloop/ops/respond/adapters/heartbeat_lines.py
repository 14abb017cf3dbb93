"""The lines of a job's heartbeat files, and how one is parsed: what each event and key means, the range each value
is allowed, and why a line is bad. The files, their writers and their reader are in
:mod:`twinloop.ops.respond.adapters.heartbeats` (the job's own file, its checkpoints and restarts),
:mod:`twinloop.ops.live.job_progress` (its step lines) and :mod:`twinloop.ops.live.rank_progress` (each rank's file).

A job file ``<dir>/<job>.jsonl`` holds one JSON object a line, ``ts`` (Unix time, s) and ``event`` required::

    {"ts": 1795430000.5, "event": "checkpoint_start"}
    {"ts": 1795430021.0, "event": "checkpoint_done"}
    {"ts": 1795430022.1, "event": "step", "step": 1200, "step_time_s": 0.82, "loss": 2.31}

the events in :data:`LINE_EVENTS` (a step line's keys in :data:`STEP_FIELDS`); a rank's file in ``<dir>/<job>.ranks/``
holds :data:`RANK_EVENT` lines (:data:`RANK_STEP_FIELDS`, and the GPU: ``gpu_uuid``, or ``host`` and ``gpu_index``).
Other keys are ignored. Nothing here raises on a bad line: each parser says why it is bad, naming the field and the
allowed range, and the reader skips it and tells the watcher once per file.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from twinloop.telemetry.fields import (
    TWINLOOP_FI_JOB_GRAD_NORM,
    TWINLOOP_FI_JOB_LOSS,
    TWINLOOP_FI_JOB_PROGRESS,
    TWINLOOP_FI_JOB_STEP_TIME,
    TWINLOOP_FI_JOB_TOKENS_PER_S,
    TWINLOOP_FI_RANK_STEP_TIME,
)

#: The job lifecycle events the checkpoint reader takes.
EVENTS = ("checkpoint_start", "checkpoint_done", "requeued", "restarted")
#: Every event a line may carry: the lifecycle ones above, and the job's progress (``step``, and ``finished`` when it
#: ends, read by :mod:`twinloop.ops.live.job_progress`; the checkpoint reader skips them).
LINE_EVENTS = (*EVENTS, "step", "finished")
#: A step line's key → (the job field it feeds, the smallest value allowed, whether the bound is exclusive).
STEP_FIELDS: Mapping[str, tuple[str, float, bool]] = {
    "step": (TWINLOOP_FI_JOB_PROGRESS, 0.0, False),
    "step_time_s": (TWINLOOP_FI_JOB_STEP_TIME, 0.0, True),
    "loss": (TWINLOOP_FI_JOB_LOSS, -math.inf, False),
    "grad_norm": (TWINLOOP_FI_JOB_GRAD_NORM, 0.0, False),
    "tokens_per_s": (TWINLOOP_FI_JOB_TOKENS_PER_S, 0.0, False),
}
#: The event of a rank's own step line (in ``<dir>/<job>.ranks/``, read by :mod:`twinloop.ops.live.rank_progress`).
RANK_EVENT = "rank_step"
#: A rank step line's key → (what it feeds, the smallest value allowed, whether the bound is exclusive); both
#: required. ``step_time_s`` is the rank's own compute time of the step, without the wait for its peers.
RANK_STEP_FIELDS: Mapping[str, tuple[str, float, bool]] = {
    "step": ("step", 0.0, False),
    "step_time_s": (TWINLOOP_FI_RANK_STEP_TIME, 0.0, True),
}
#: A GPU's NVML UUID (``GPU-`` and five hex groups; NVML's buffer holds 96 characters), also its rank file's name.
_UUID = re.compile(r"[A-Za-z0-9-]{1,96}")
#: A host name as ``hostname`` gives it (short or full), also part of its rank file's name.
_HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}")
#: Which GPU a rank line names, as the line writes it: ``("uuid", uuid, -1)`` or ``("host", host, gpu index)``.
GpuRef = tuple[str, str, int]


@dataclass(frozen=True)
class JobEvents:
    """One job's recorded events, each kind sorted by time (Unix s), and the lines that were skipped.

    Attributes:
        ts: per event name in :data:`EVENTS`, its times.
        bad: ``(line number, why)`` of each skipped line (1-based).
    """

    ts: dict[str, tuple[float, ...]]
    bad: tuple[tuple[int, str], ...] = ()

    def of(self, event: str) -> tuple[float, ...]:
        """The times of ``event``, sorted."""
        return self.ts.get(event, ())


def as_float(x: float) -> float:
    """``x`` as a float; an integer too large for one is infinite (JSON allows any number of digits)."""
    try:
        return float(x)
    except OverflowError:
        return math.inf


def _short(value: Any) -> str:
    """``repr(value)``, cut to 40 characters for a one-line warning."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


def bad_field(doc: Any, events: Sequence[str] = LINE_EVENTS) -> str | None:
    """Why a decoded line is not one of ``events`` (naming the field), or None when it is one."""
    if not isinstance(doc, dict):
        return "not a JSON object"
    ts = doc.get("ts")
    if isinstance(ts, bool) or not isinstance(ts, int | float) or not 0 <= as_float(ts) < math.inf:
        return f"field ts: {_short(ts)} (allowed: Unix time, s, a finite number >= 0)"
    if doc.get("event") not in events:
        return f"field event: {_short(doc.get('event'))} (allowed: {', '.join(events)})"
    return None


def _allowed(key: str, fields: Mapping[str, tuple[str, float, bool]] = STEP_FIELDS) -> str:
    _, low, strict = fields[key]
    return "any finite number" if low == -math.inf else f"a finite number {'>' if strict else '>='} {low:g}"


def step_values(
    doc: Mapping[str, Any],
    fields: Mapping[str, tuple[str, float, bool]] = STEP_FIELDS,
    required: Sequence[str] = ("step",),
) -> tuple[dict[str, float], str | None]:
    """A step line's fields (by default a job ``step`` line's job fields; a ``rank_step`` line's with
    :data:`RANK_STEP_FIELDS`), or why it is bad (naming the field and its allowed range).
    """
    for key in required:
        if key not in doc:
            what = "steps done, " if key == "step" else ""
            return {}, f"field {key}: missing (allowed: {what}{_allowed(key, fields)})"
    out: dict[str, float] = {}
    for key, (name, low, strict) in fields.items():
        if key not in doc or (doc[key] is None and key not in required):
            continue
        x = doc[key]
        v = as_float(x) if isinstance(x, int | float) and not isinstance(x, bool) else math.nan
        if not (math.isfinite(v) and (v > low if strict else v >= low)):
            return {}, f"field {key}: {_short(x)} (allowed: {_allowed(key, fields)})"
        out[name] = v
    return out, None


def uuid_key(uuid: str) -> str:
    """A GPU UUID as compared: lower case, without NVML's ``GPU-`` prefix (CUDA's 16 bytes print without it)."""
    key = uuid.strip().lower()
    return key.removeprefix("gpu-")


def _rank_gpu(doc: Mapping[str, Any]) -> tuple[GpuRef | None, str | None]:
    """The GPU a rank line names (``gpu_uuid``, else ``host`` and ``gpu_index``), or why it names none."""
    uuid = doc.get("gpu_uuid")
    if uuid is not None:
        if not isinstance(uuid, str) or not _UUID.fullmatch(uuid):
            return None, f"field gpu_uuid: {_short(uuid)} (allowed: the GPU's NVML UUID, GPU-<hex groups>)"
        return ("uuid", uuid, -1), None
    if "host" not in doc:
        return None, "field gpu_uuid: missing (allowed: the GPU's NVML UUID; or host and gpu_index)"
    host = doc["host"]
    if not isinstance(host, str) or not _HOST.fullmatch(host):
        return None, f"field host: {_short(host)} (allowed: the GPU's host name: letters, digits, '.', '_', '-')"
    if "gpu_index" not in doc:
        return None, "field gpu_index: missing (allowed: the GPU's NVML index on its host, an integer >= 0)"
    index = doc["gpu_index"]
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < 1 << 20:
        return None, f"field gpu_index: {_short(index)} (allowed: the GPU's NVML index on its host, an integer >= 0)"
    return ("host", host, index), None


def rank_step_values(doc: Any) -> tuple[dict[str, float], GpuRef | None, str | None]:
    """A decoded ``rank_step`` line's values (:data:`RANK_STEP_FIELDS`) and GPU, or why it is bad (naming the
    field and its allowed range); never raises.
    """
    why = bad_field(doc, (RANK_EVENT,))
    if why is not None:
        return {}, None, why
    values, why = step_values(doc, RANK_STEP_FIELDS, tuple(RANK_STEP_FIELDS))
    if why is not None:
        return {}, None, why
    gpu, why = _rank_gpu(doc)
    if gpu is None:
        return {}, None, why
    return values, gpu, None


class _Head(msgspec.Struct):
    """The two keys every line needs; the others are skipped (their JSON still checked)."""

    ts: float
    event: str


_HEAD = msgspec.json.Decoder(_Head)
#: The fast path takes only a flat line (one ``{``, no ``[``, even inside strings) shorter than this: no nesting for
#: ``json.loads`` to refuse deeper than msgspec, no integer literal over Python's 4,300 digits.
_FLAT_MAX_CHARS = 4096
#: Events of lines that are not the checkpoint reader's (the job's progress).
_PROGRESS_EVENTS = frozenset(LINE_EVENTS) - frozenset(EVENTS)


def line_event(line: str) -> tuple[str | None, float, str | None]:
    """One line of a job file as the checkpoint reader takes it: ``(event, ts, None)``; ``(None, 0, why)`` for a bad
    one (naming the field); ``(None, 0, None)`` for a blank line or a line that is not the reader's (a step, a
    finished).

    A good step line (nearly every line of a long file) is told by msgspec, ~9x faster than ``json.loads`` (the
    first question on a week of steps parses 3.6 M of them); every other line, and any line msgspec refuses, by
    ``json.loads``, so the answer is ``json.loads``'s (msgspec is as strict or stricter on a flat line: a test).
    """
    if not line.strip():
        return None, 0.0, None
    if len(line) < _FLAT_MAX_CHARS and line.count("{") == 1 and "[" not in line:
        try:
            head = _HEAD.decode(line)
        except (msgspec.DecodeError, UnicodeEncodeError):  # UnicodeEncodeError: a lone surrogate in the text
            pass
        else:
            if head.event in _PROGRESS_EVENTS and 0.0 <= head.ts < math.inf:
                return None, 0.0, None
    try:
        doc = json.loads(line)
    except (ValueError, RecursionError):  # RecursionError: brackets nested thousands deep
        return None, 0.0, "not JSON"
    why = bad_field(doc)
    if why is not None:
        return None, 0.0, why
    if doc["event"] not in EVENTS:  # a step or finished line is the progress reader's
        return None, 0.0, None
    return doc["event"], as_float(doc["ts"]), None


def parse_events(text: str) -> JobEvents:
    """A heartbeat file's events; bad lines are skipped and listed, never raised (blank lines are ignored)."""
    found: dict[str, list[float]] = {e: [] for e in EVENTS}
    bad: list[tuple[int, str]] = []
    # Lines end at "\n" only (as an editor numbers them): JSON strings may hold U+2028 and friends unescaped.
    for number, line in enumerate(text.split("\n"), start=1):
        event, ts, why = line_event(line)
        if why is not None:
            bad.append((number, why))
        elif event is not None:
            found[event].append(ts)
    return JobEvents({e: tuple(sorted(v)) for e, v in found.items()}, tuple(bad))
