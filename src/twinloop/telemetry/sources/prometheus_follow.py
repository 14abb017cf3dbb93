"""Follow mode of the Prometheus source: every scrape of a fleet, at a cost that does not grow with its labels.

Reading a fleet through PromQL costs most in its labels and in JSON: at 16,384 GPUs and 5 fields an instant query
that returns every series with all its labels (``UUID``, ``Hostname``, ``modelName``, ``pci_bus_id``, ``job`` ...)
is 26 MB of JSON per poll, more than Prometheus can encode and Python decode in a second on a small machine
(docs/benchmarks.md, "Loop"). Follow mode splits what changes from what does not:

* **discovery**, once per ``discover_s``: two small instant queries per configured selector, ``count by
  (__name__) (...)`` for the metric names and ``group by (<the labels twinloop keeps>) (...)`` for one label set
  per entity (16,384 series for 16,384 GPUs, not one per metric, and none of the labels twinloop drops); its
  frame has no rows, only the entities and their labels (topology, UUID, model, pod);
* **values**, every ``period_s`` in between: per metric found at discovery, ``max by (<key>) (<metric>)`` over
  ``/api/v1/query_range`` from the step after the last one read to the last step now past. Only the labels that
  name the entity travel: ``entity`` where twinloop's exporter sets it, otherwise ``Hostname`` (or ``instance``)
  and ``gpu``, which is what :meth:`PrometheusSource.entity_of` maps. ``max`` merges the rare duplicates (one GPU
  scraped by two jobs, MIG slices of one GPU) the same way on every poll. The metrics are asked for concurrently,
  so Prometheus evaluates one while this process decodes another, and the answers are decoded by ``msgspec``
  straight into typed records (about twice as fast as ``json`` on this shape).

A poll that takes longer than ``period_s`` is caught up by the next ones, which get every step since (up to
``max_catchup_steps``; older steps are given up and the gap shows in the loop's warnings), so no scrape is lost to
a slow poll. When any metric's query fails, nothing of that poll is kept and the same steps are asked for again
a period later: a step is delivered whole, once.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass

import httpx
import msgspec
import numpy as np

from twinloop.telemetry.fields import FIELD_BY_NAME, canonical_field
from twinloop.telemetry.frame import Frame

#: A series' labels → its entity id.
EntityOf = Callable[[Mapping[str, str]], str]


class _Series(msgspec.Struct):
    metric: dict[str, str] = {}
    values: list[tuple[float, float]] = []


class _SeriesText(msgspec.Struct):
    metric: dict[str, str] = {}
    values: list[tuple[float, str]] = []


class _Data(msgspec.Struct):
    result: list[_Series] = []


class _DataText(msgspec.Struct):
    result: list[_SeriesText] = []


class _Answer(msgspec.Struct):
    status: str = ""
    data: _Data | None = None
    errorType: str = ""  # noqa: N815 (Prometheus's field name)
    error: str = ""


class _AnswerText(msgspec.Struct):
    status: str = ""
    data: _DataText | None = None
    errorType: str = ""  # noqa: N815
    error: str = ""


# Values arrive as strings; the lax decoder reads "611.1" and "NaN" as floats but not "+Inf"/"-Inf", which the
# text decoder (and numpy) take.
_DECODE = msgspec.json.Decoder(_Answer, strict=False)
_DECODE_TEXT = msgspec.json.Decoder(_AnswerText)


@dataclass(frozen=True)
class RangeAnswer:
    """A range answer's series, flattened: each series' labels and point count, and all points in series order."""

    labels: list[dict[str, str]]
    counts: np.ndarray
    ts_s: np.ndarray
    value: np.ndarray


def decode_range(body: bytes) -> RangeAnswer:
    """A ``query_range`` answer (``ValueError`` naming the problem for an error or a malformed body)."""
    try:
        answer: _Answer | _AnswerText = _DECODE.decode(body)
    except msgspec.ValidationError:
        try:
            answer = _DECODE_TEXT.decode(body)
        except msgspec.DecodeError as exc:
            raise ValueError(f"not a Prometheus answer ({exc})") from None
    except msgspec.DecodeError as exc:
        raise ValueError(f"not a Prometheus answer ({exc})") from None
    if answer.status != "success" or answer.data is None:
        raise ValueError(f"{answer.errorType or 'error'}: {answer.error}")
    result = answer.data.result
    points = [p for s in result for p in s.values]
    pts = np.array(points, dtype=np.float64 if isinstance(answer, _Answer) else object).reshape(-1, 2)
    return RangeAnswer([s.metric for s in result], np.array([len(s.values) for s in result], dtype=np.int64),
                       pts[:, 0].astype(np.float64), _floats(pts[:, 1]))  # fmt: skip


def _floats(raw: np.ndarray) -> np.ndarray:
    try:
        return raw.astype(np.float64)
    except ValueError:
        return np.array([_float_or_nan(v) for v in raw], dtype=np.float64)


def _float_or_nan(v: object) -> float:
    try:
        return float(str(v))
    except ValueError:
        return math.nan


def key_labels(series_labels: Sequence[Mapping[str, str]]) -> tuple[str, ...]:
    """The labels that name each series' entity, common to all the discovered series."""
    if series_labels and all(lab.get("entity") for lab in series_labels):
        return ("entity",)
    host = "Hostname" if series_labels and all(lab.get("Hostname") for lab in series_labels) else "instance"
    return (host, "gpu")


def discovery_queries(selector: str, kept_labels: Sequence[str]) -> tuple[str, str]:
    """The metric-names query and the per-entity labels query for one configured selector."""
    return f"count by (__name__) ({selector})", f"group by ({', '.join(kept_labels)}) ({selector})"


def value_query(metric: str, keys: Sequence[str]) -> str:
    """The label-light PromQL for one metric."""
    return f"max by ({', '.join(keys)}) ({metric})"


def grid_floor(t_s: float, step_s: float) -> float:
    """The last point of the ``step_s`` grid at or before ``t_s``."""
    return math.floor(t_s / step_s + 1e-9) * step_s


def range_frame(answers: Mapping[str, RangeAnswer], entity_of: EntityOf, source: str) -> Frame:
    """One frame from each metric's answer (series-major rows; values divided by the field's ``dcgm_scale``)."""
    entity_index: dict[str, int] = {}
    ents: list[np.ndarray] = []
    fields: list[str] = []
    for metric, ans in answers.items():
        fields.append(canonical_field(metric) or metric)
        per_series = [entity_index.setdefault(entity_of(lab), len(entity_index)) for lab in ans.labels]
        ents.append(np.repeat(np.asarray(per_series, dtype=np.int32), ans.counts))
    scales = [FIELD_BY_NAME[f].dcgm_scale if f in FIELD_BY_NAME else 1.0 for f in fields]
    parts = list(answers.values())
    return Frame(
        ts_s=np.concatenate([a.ts_s for a in parts]) if parts else np.zeros(0),
        entity_idx=np.concatenate(ents) if ents else np.zeros(0, dtype=np.int32),
        field_idx=np.repeat(np.arange(len(fields), dtype=np.int16), [a.value.size for a in parts]),
        value=np.concatenate([a.value / k for a, k in zip(parts, scales, strict=True)]) if parts else np.zeros(0),
        entities=tuple(entity_index),
        fields=tuple(fields),
        source=source,
    )


@dataclass
class Follower:
    """The state of a followed fleet between polls: what the series are, and the first step not read yet.

    Attributes:
        period_s: the step of the grid read (the scrape interval), s.
        discover_s: seconds between discoveries.
        max_catchup_steps: the most steps read back after a stall (older ones are given up).
        steps_per_poll: the most steps one poll reads; a longer backlog is read in several polls back to back, so
            frames keep flowing while the source catches up and no answer grows without bound.
    """

    period_s: float
    discover_s: float
    max_catchup_steps: int
    steps_per_poll: int = 10
    keys: tuple[str, ...] = ()
    metrics: tuple[str, ...] = ()
    next_ts: float | None = None
    discovered_at: float | None = None

    def due_for_discovery(self, now_s: float) -> bool:
        """Whether the labels should be read (again)."""
        return self.discovered_at is None or now_s - self.discovered_at >= self.discover_s

    def window(self, now_s: float) -> tuple[float, float] | None:
        """``(start_s, end_s)`` of the grid steps not read yet and past at ``now_s`` (None: nothing new)."""
        end = grid_floor(now_s, self.period_s)
        start = end if self.next_ts is None else max(self.next_ts, end - (self.max_catchup_steps - 1) * self.period_s)
        end = min(end, start + (self.steps_per_poll - 1) * self.period_s)
        return (start, end) if start <= end + 1e-9 else None

    def discovered(self, at_s: float, metrics: Sequence[str], label_sets: Sequence[Mapping[str, str]]) -> None:
        """A discovery at ``at_s`` found these metric names and per-entity label sets."""
        self.discovered_at = at_s
        self.keys = key_labels(label_sets)
        self.metrics = tuple(sorted(set(metrics) - {""}))
        if self.next_ts is None:
            self.next_ts = at_s

    def discovery_failed(self, at_s: float) -> None:
        """A rediscovery failed: go on with what is known and try again a discovery period later."""
        if self.metrics:
            self.discovered_at = at_s

    def wake_at(self, now_s: float, failed: bool) -> float:
        """Wall time to poll next: the next unread step, or the next grid step after a failure."""
        after = grid_floor(now_s, self.period_s) + self.period_s
        return after if failed or self.next_ts is None else self.next_ts


def fetch_range(client: httpx.Client, base_url: str, query: str, window: tuple[float, float],
                step_s: float) -> RangeAnswer | str:  # fmt: skip
    """One ``query_range`` over ``window``: its series, or a one-line error."""
    params: dict[str, str | float] = {"query": query, "start": window[0], "end": window[1], "step": step_s}
    try:
        resp = client.get(base_url.rstrip("/") + "/api/v1/query_range", params=params)
        return decode_range(resp.content)
    except httpx.TimeoutException:
        return f"{query}: no answer within {client.timeout.read} s"
    except httpx.HTTPError as exc:
        return f"{query}: {type(exc).__name__}: {exc}"
    except ValueError as exc:
        return f"{query}: HTTP {resp.status_code}: {exc}"


def poll_values(follower: Follower, fetch: Callable[[str], RangeAnswer | str], pool: Executor,
                window: tuple[float, float], entity_of: EntityOf, source: str,
                on_error: Callable[[str], None]) -> Frame | None:  # fmt: skip
    """Every metric's steps in ``window`` as one frame (maybe empty); None, nothing marked read, when a query failed."""
    futures = {m: pool.submit(fetch, value_query(m, follower.keys)) for m in follower.metrics}
    answers = {m: f.result() for m, f in futures.items()}
    errors = [a for a in answers.values() if isinstance(a, str)]
    for err in errors:
        on_error(err)
    if errors:
        return None
    follower.next_ts = window[1] + follower.period_s
    return range_frame({m: a for m, a in answers.items() if not isinstance(a, str)}, entity_of, source)


def sleep_until(t_s: float, stop_at: float | None) -> bool:
    """Sleep until wall time ``t_s``; False when ``stop_at`` comes first."""
    wake = t_s if stop_at is None else min(t_s, stop_at)
    time.sleep(max(0.0, wake - time.time()))
    return stop_at is None or time.time() < stop_at
