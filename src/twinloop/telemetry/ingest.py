"""The ingest pipeline: source → validator → store, in batches, with a report of every problem."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from twinloop.errors import InputError
from twinloop.telemetry.frame import Frame
from twinloop.telemetry.report import IngestReport
from twinloop.telemetry.sources.base import Source
from twinloop.telemetry.store.base import Store
from twinloop.telemetry.validate import DEFAULT_MAX_FUTURE_S, Validator


def validated_frames(
    source: Source, report: IngestReport, max_frames: int | None = None, max_future_s: float = DEFAULT_MAX_FUTURE_S
) -> Iterator[Frame]:
    """The source's frames with bad rows removed (and counted in ``report``).

    ``max_future_s``: how far ahead of the wall clock a timestamp may lie before it is ``bad_timestamp``.
    """
    validator = Validator(max_future_s=max_future_s)
    for k, frame in enumerate(source.frames(report)):
        if max_frames is not None and k >= max_frames:
            break
        report.frames += 1
        good = validator.check(frame, report)
        if len(good):
            yield good


#: Source options that change how a source is read, not what it holds (left out of the source key).
_READ_OPTIONS = frozenset({"batch_rows", "speed"})


def default_source_key(source: Source) -> str:
    """``kind:target#options`` naming what a source holds: a file target is made absolute (the same file from
    any directory is one source) and the options that select data (a twin's seed, a query) are hashed in.
    """
    target = getattr(source.config, source.target_field, None) if source.target_field else None
    if isinstance(target, str) and target and Path(target).exists():
        target = str(Path(target).resolve())
    opts = source.config.model_dump(mode="json", exclude={source.target_field or "", *_READ_OPTIONS})
    digest = hashlib.sha1(json.dumps(opts, sort_keys=True).encode()).hexdigest()[:12]
    return f"{source.name}:{target or ''}#{digest}"


def ingest(
    source: Source,
    store: Store,
    batch_rows: int = 1_000_000,
    max_frames: int | None = None,
    max_seconds: float | None = None,
    on_batch: Callable[[int], None] | None = None,
    max_future_s: float = DEFAULT_MAX_FUTURE_S,
    source_key: str | None = None,
) -> IngestReport:
    """Read ``source`` into ``store``; one store transaction per batch of about ``batch_rows`` samples.

    Args:
        source: where samples come from.
        store: where they go.
        batch_rows: samples per store transaction (a crash loses at most the batch in flight); small frames
            are merged up to this size, a frame larger than it is written on its own.
        max_frames: stop after this many source frames.
        max_seconds: stop after this much wall time (live sources).
        on_batch: called with the row count after each committed batch (progress).
        max_future_s: timestamps further than this ahead of the wall clock are dropped as ``bad_timestamp``.
        source_key: identity of the source for idempotent ingest (default: :func:`source_key` of ``source``);
            rows this source already stored are counted as ``already_stored`` and not written again, so an
            ingest resumed after a crash never double-counts. ``""`` turns the check off.

    Returns:
        The report: rows in, rows stored, and every problem counted with examples; ``interrupted`` is set
        when Ctrl-C stopped the run (the rows read until then are stored).
    """
    report = IngestReport()
    key = default_source_key(source) if source_key is None else (source_key or None)
    pending: list[Frame] = []
    n_pending = 0
    t0 = time.monotonic()

    def flush() -> None:
        nonlocal pending, n_pending
        if pending:
            batch = Frame.concat(pending)
            written = store.append(batch, source_key=key)
            report.rows_stored += written
            if written < len(batch):
                lo, hi = float(batch.ts_s.min()), float(batch.ts_s.max())
                skipped = len(batch) - written
                msg = f"{skipped} rows between ts {lo:.3f} and {hi:.3f} were stored by an earlier ingest of this source"
                report.add("already_stored", key or source.label, None, msg, skipped)
            if on_batch is not None:
                on_batch(written)
        pending, n_pending = [], 0

    try:
        frames = validated_frames(source, report, max_frames, max_future_s)
        for frame in frames:
            if pending and n_pending + len(frame) > batch_rows:
                flush()
            pending.append(frame)
            n_pending += len(frame)
            if n_pending >= batch_rows:
                flush()
            if max_seconds is not None and time.monotonic() - t0 >= max_seconds:
                break
    except KeyboardInterrupt:
        # Live sources run until Ctrl-C: stop reading, keep what was read.
        report.interrupted = True
    finally:
        # Also on a source failure: what was read so far still lands.
        flush()
    return report


def require_rows_kept(report: IngestReport, source: str) -> None:
    """Refuse silent loss: raise when a source had input but not one row of it was kept.

    A file whose every row was dropped (a column set the parser could not place, a wrong unit, garbage) must
    not look like a successful empty ingest.

    Raises:
        InputError: ``rows_stored`` is 0 while rows were dropped or columns skipped; the message names the
            first problem with its file and line.
    """
    lost = {k: n for k, n in report.problems.items() if k != "already_stored"}
    if report.rows_stored or report.interrupted or not lost:
        return  # nothing read, or all of it stored before (idempotent re-ingest): not a loss
    order = ("parse_error", "truncated", "unknown_column", "out_of_range", "source_error")
    kind = next((k for k in order if k in lost), next(iter(lost)))
    example = (report.examples.get(kind) or [""])[0]
    counts = ", ".join(f"{n} {k}" for k, n in sorted(lost.items()))
    raise InputError(source, "", f"no row kept ({counts}); first: {example}")
