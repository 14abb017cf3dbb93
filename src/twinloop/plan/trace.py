"""Request traces for serving plans: the Azure LLM inference trace format, statistics, rate scaling, tiling.

The Azure Public Dataset traces (``AzureLLMInferenceTrace_conv`` / ``_code``, 2023; CC BY 4.0, Microsoft
Azure) are CSV files with the columns ``TIMESTAMP, ContextTokens, GeneratedTokens``. This module reads any
file in that format from a path (twinloop ships no copy of the data), checks every row, and derives what
the serving planner needs: the request rate and the prompt/output length distributions (means and second
moments, for the queueing formulas in :mod:`twinloop.plan.batching`).

Bad rows either raise :class:`~twinloop.errors.InputError` naming the file and line (``strict=True``, the
default) or are skipped and counted in :attr:`RequestTrace.bad_rows`.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from twinloop.errors import InputError
from twinloop.safeio import read_text

AZURE_ATTRIBUTION = "Azure LLM inference trace 2023, Microsoft Azure, CC BY 4.0"
COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
MAX_TOKENS_PER_REQUEST = 10_000_000  # beyond any real context window; guards against garbage numbers


@dataclass(frozen=True)
class RequestTrace:
    """Requests in arrival order.

    Attributes:
        arrival_s: arrival time of each request, seconds after the first one (sorted, starts at 0).
        prompt_tokens: prompt (context) length of each request, tokens.
        output_tokens: generated length of each request, tokens (at least 1).
        source: the file (or label) the trace came from.
        bad_rows: rows skipped because they could not be parsed (non-strict loading only).
    """

    arrival_s: NDArray[np.float64]
    prompt_tokens: NDArray[np.int64]
    output_tokens: NDArray[np.int64]
    source: str
    bad_rows: int = 0

    @property
    def n_requests(self) -> int:
        """Number of requests."""
        return int(self.arrival_s.size)

    @property
    def duration_s(self) -> float:
        """Span of the arrivals plus one mean inter-arrival gap (so a tiled copy does not overlap), s;
        1 s when every request arrives at once.
        """
        n = self.n_requests
        if n <= 1:
            return 1.0
        span = float(self.arrival_s[-1] - self.arrival_s[0])
        return span * n / (n - 1) if span > 0 else 1.0

    @property
    def rate_req_per_s(self) -> float:
        """Mean arrival rate, requests per second."""
        return self.n_requests / self.duration_s

    def scale_rate(self, factor: float) -> RequestTrace:
        """The same requests arriving ``factor`` times faster (factor > 1 compresses time)."""
        if not factor > 0:
            raise InputError(self.source, "rate scale", f"must be > 0, got {factor}")
        return RequestTrace(self.arrival_s / factor, self.prompt_tokens, self.output_tokens, self.source, self.bad_rows)

    def with_rate(self, rate_req_per_s: float) -> RequestTrace:
        """The same requests rescaled in time so the mean rate is ``rate_req_per_s``."""
        return self.scale_rate(rate_req_per_s / self.rate_req_per_s)

    def tile(self, copies: int) -> RequestTrace:
        """``copies`` back-to-back repetitions of the trace (same rate, ``copies`` times as long)."""
        if copies < 1:
            raise InputError(self.source, "tile copies", f"must be >= 1, got {copies}")
        offsets = np.repeat(np.arange(copies, dtype=np.float64) * self.duration_s, self.n_requests)
        return RequestTrace(
            np.tile(self.arrival_s, copies) + offsets,
            np.tile(self.prompt_tokens, copies),
            np.tile(self.output_tokens, copies),
            self.source,
            self.bad_rows * copies,
        )

    def stats(self) -> TraceStats:
        """Summary statistics used by the planner."""
        if self.n_requests == 0:
            raise InputError(self.source, "", "trace has no valid requests")
        p = self.prompt_tokens.astype(np.float64)
        o = self.output_tokens.astype(np.float64)
        return TraceStats(
            n_requests=self.n_requests,
            duration_s=self.duration_s,
            rate_req_per_s=self.rate_req_per_s,
            prompt_mean=float(p.mean()),
            prompt_p50=float(np.percentile(p, 50)),
            prompt_p99=float(np.percentile(p, 99)),
            prompt_sq_mean=float((p * p).mean()),
            output_mean=float(o.mean()),
            output_p50=float(np.percentile(o, 50)),
            output_p99=float(np.percentile(o, 99)),
            output_max=float(o.max()),
            bad_rows=self.bad_rows,
        )


@dataclass(frozen=True)
class TraceStats:
    """Rate and length statistics of a trace (tokens; ``*_sq_mean`` is the mean of the square, tokens²)."""

    n_requests: int
    duration_s: float
    rate_req_per_s: float
    prompt_mean: float
    prompt_p50: float
    prompt_p99: float
    prompt_sq_mean: float
    output_mean: float
    output_p50: float
    output_p99: float
    output_max: float
    bad_rows: int


def _parse_tokens(text: str, source: str, line: int, column: str, minimum: int) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise InputError(source, f"line {line}", f"{column}: expected an integer, got {text!r}") from None
    if not minimum <= value <= MAX_TOKENS_PER_REQUEST:
        raise InputError(
            source, f"line {line}", f"{column}: {value} out of range (allowed {minimum}..{MAX_TOKENS_PER_REQUEST})"
        )
    return value


def _parse_timestamp(text: str, source: str, line: int) -> float:
    """Seconds since the epoch for an ISO timestamp (any number of fraction digits) or a plain number."""
    text = text.strip()
    try:
        value = float(text)
    except ValueError:
        try:
            value = datetime.fromisoformat(text).timestamp()
        except ValueError:
            raise InputError(
                source, f"line {line}", f"TIMESTAMP: expected 'YYYY-MM-DD HH:MM:SS[.fff]' or seconds, got {text!r}"
            ) from None
    if not np.isfinite(value):
        raise InputError(source, f"line {line}", f"TIMESTAMP: must be finite, got {text!r}")
    return value


def parse_azure_trace(text: str, source: str = "trace", *, strict: bool = True) -> RequestTrace:
    """Parse Azure-format trace CSV text.

    Args:
        text: the CSV content; the header must name ``TIMESTAMP, ContextTokens, GeneratedTokens`` (any order,
            extra columns ignored).
        source: file name used in error messages.
        strict: raise on the first bad row (True) or skip and count bad rows (False).

    Returns:
        The requests sorted by arrival, times relative to the first arrival.

    Raises:
        InputError: missing header columns, a bad row (strict), or no valid rows at all.
    """
    reader = csv.reader(io.StringIO(text))
    try:
        header = next(reader, None)
    except csv.Error as exc:
        raise InputError(source, "line 1", f"malformed CSV: {exc}") from None
    if header is None:
        raise InputError(source, "line 1", f"empty file; expected a header {', '.join(COLUMNS)}")
    names = [h.strip().lstrip("\ufeff") for h in header]
    missing = [c for c in COLUMNS if c not in names]
    if missing:
        raise InputError(source, "line 1", f"header lacks {', '.join(missing)} (need {', '.join(COLUMNS)})")
    i_ts, i_ctx, i_gen = (names.index(c) for c in COLUMNS)
    width = max(i_ts, i_ctx, i_gen) + 1

    times: list[float] = []
    prompts: list[int] = []
    outputs: list[int] = []
    bad = 0
    while True:
        try:
            row = next(reader, None)
        except csv.Error as exc:
            if strict:
                raise InputError(source, f"line {reader.line_num}", f"malformed CSV: {exc}") from None
            bad += 1
            continue
        if row is None:
            break
        line = reader.line_num
        if not row or all(not cell.strip() for cell in row):
            continue
        try:
            if len(row) < width:
                raise InputError(source, f"line {line}", f"expected {width} columns, got {len(row)}")
            ts = _parse_timestamp(row[i_ts], source, line)
            ctx = _parse_tokens(row[i_ctx], source, line, "ContextTokens", 1)
            gen = _parse_tokens(row[i_gen], source, line, "GeneratedTokens", 1)
        except InputError:
            if strict:
                raise
            bad += 1
            continue
        times.append(ts)
        prompts.append(ctx)
        outputs.append(gen)
    if not times:
        raise InputError(source, "", f"no valid requests ({bad} bad rows)")
    t = np.asarray(times, dtype=np.float64)
    order = np.argsort(t, kind="stable")
    t = t[order]
    return RequestTrace(
        arrival_s=t - t[0],
        prompt_tokens=np.asarray(prompts, dtype=np.int64)[order],
        output_tokens=np.asarray(outputs, dtype=np.int64)[order],
        source=source,
        bad_rows=bad,
    )


#: Largest trace file read (the public Azure conversation trace is ~1.3 MB per day).
MAX_TRACE_BYTES = 1024**3


def load_azure_trace(path: str | Path, *, strict: bool = True) -> RequestTrace:
    """Read an Azure-format trace CSV file (see :func:`parse_azure_trace`).

    Raises:
        InputError: the file cannot be read or decoded, or its content is bad (naming file and line).
    """
    path = Path(path)
    # A regular file of bounded size: /dev/zero never ends and a FIFO blocks (issue 19).
    text = read_text(path, max_bytes=MAX_TRACE_BYTES)
    return parse_azure_trace(text, source=str(path), strict=strict)
