"""Prometheus: query an existing server's HTTP API (instant or range) or scrape an exporter directly.

Modes:

* ``instant`` — ``GET /api/v1/query`` for each query, ``polls`` times every ``period_s``;
* ``range`` — ``GET /api/v1/query_range`` over ``[start_s, end_s]`` at ``step_s``;
* ``scrape`` — ``GET <url>`` of a ``/metrics`` endpoint (dcgm-exporter, twinloop's exporter) and parse
  the text format (or OpenMetrics); the series of one GPU's MIG instances are merged by ``max``, as in ``follow``;
* ``follow`` — a fleet, every scrape: labels once per ``discover_s``, then label-light range queries for the
  steps not read yet (:mod:`twinloop.telemetry.sources.prometheus_follow`), for ``duration_s`` (None: until
  stopped).

A ``url`` that is a local file is a saved query answer (``curl .../api/v1/query_range?... > f.json``), read once
(:mod:`twinloop.telemetry.sources.prometheus_saved`) whatever the mode, or a saved exporter page (``curl
http://node:9400/metrics > f.prom``), read when its samples carry exposition timestamps.

Label mapping to entities: an ``entity`` label (twinloop's exporter sets it) is used as is; otherwise
``<entity_prefix>/<Hostname>/gpu<gpu>`` for GPU series and ``<entity_prefix>/<Hostname>`` for series
without a ``gpu`` label. The metric name is the field (``field`` overrides it for queries whose result has
no ``__name__``, such as ``avg by (Hostname) (...)``); values are divided by the field's ``dcgm_scale``
(dcgm-exporter's mJ → J). A server that is down, slow or answers an error is counted as ``source_error``
naming the URL and query, and the source goes on with the next query or poll.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any, ClassVar, Literal

import httpx
import numpy as np
from pydantic import Field

from twinloop.errors import InputError
from twinloop.telemetry.fields import FIELD_BY_NAME, canonical_field
from twinloop.telemetry.frame import Frame
from twinloop.telemetry.promtext import parse_text, parse_value
from twinloop.telemetry.report import IngestReport
from twinloop.telemetry.sources.base import Source, SourceConfig
from twinloop.telemetry.sources.prometheus_follow import (
    Follower,
    discovery_queries,
    fetch_range,
    grid_floor,
    poll_values,
    sleep_until,
)
from twinloop.telemetry.sources.prometheus_saved import is_prometheus_text, load_answer, no_samples
from twinloop.telemetry.sources.rows import Rows

ALL_FIELDS_QUERY = '{__name__=~"DCGM_FI_.*|TWINLOOP_FI_.*"}'
#: Prometheus label → twinloop entity label.
LABEL_MAP = {"UUID": "UUID", "modelName": "modelName", "Hostname": "Hostname", "gpu": "gpu", "device": "device",
             "pci_bus_id": "pci_bus_id", "hpc_job": "job", "exported_job": "job", "model": "model",
             # dcgm-exporter's Kubernetes pod mapping and MIG instance labels, kept as they are.
             "pod": "pod", "namespace": "namespace", "container": "container", "GPU_I_ID": "GPU_I_ID",
             "GPU_I_PROFILE": "GPU_I_PROFILE", "DCGM_FI_DRIVER_VERSION": "DCGM_FI_DRIVER_VERSION"}  # fmt: skip
#: Labels of one MIG instance, not of its GPU: a series with a ``GPU_I_ID`` is merged into its GPU's entity (by
#: ``max``), so these stay off the GPU's labels, which are its own (UUID, modelName, Hostname, ...) whichever
#: instance's series came last. Under Kubernetes the pod mapping is per instance too.
INSTANCE_LABELS = frozenset({"GPU_I_ID", "GPU_I_PROFILE", "pod", "namespace", "container"})


def entity_labels_of(labels: Mapping[str, str]) -> dict[str, str]:
    """The twinloop labels a series gives its entity: the mapped ones, less a MIG instance's own."""
    mig = bool(labels.get("GPU_I_ID"))
    return {LABEL_MAP[k]: v for k, v in labels.items() if k in LABEL_MAP and not (mig and k in INSTANCE_LABELS)}


#: The labels follow mode's discovery keeps: those mapped above and those that name the entity.
KEPT_LABELS = tuple(dict.fromkeys(("entity", "Hostname", "instance", *LABEL_MAP)))


class PrometheusConfig(SourceConfig):
    """Prometheus source options.

    Attributes:
        url: server base URL (``http://host:9090``), in ``scrape`` mode the ``/metrics`` URL, or a saved query
            answer's file.
        queries: PromQL queries (instant/range modes).
        mode: ``instant``, ``range`` or ``scrape``.
        start_s: range start, epoch s (``None`` = ``end_s - 3600``).
        end_s: range end, epoch s (``None`` = now).
        step_s: range resolution, s.
        polls: instant/scrape: number of polls.
        period_s: instant/scrape: seconds between polls.
        timeout_s: HTTP timeout per request, s.
        entity_prefix: prefix for entities built from ``Hostname``/``gpu`` labels.
        field: field name for results without ``__name__``.
        discover_s: follow: seconds between reads of the series' labels.
        duration_s: follow: how long to follow, s (None: until the consumer stops).
        max_catchup_steps: follow: the most steps one poll reads per metric after a stall.
    """

    url: str = "http://127.0.0.1:9090"
    queries: tuple[str, ...] = (ALL_FIELDS_QUERY,)
    mode: Literal["instant", "range", "scrape", "follow"] = "instant"
    start_s: float | None = None
    end_s: float | None = None
    step_s: float = Field(default=15.0, gt=0)
    polls: int = Field(default=1, ge=1)
    period_s: float = Field(default=15.0, ge=0)
    timeout_s: float = Field(default=5.0, gt=0)
    entity_prefix: str = "site0/row0/rack0"
    field: str | None = None
    discover_s: float = Field(default=60.0, gt=0)
    duration_s: float | None = Field(default=None, gt=0)
    max_catchup_steps: int = Field(default=300, ge=1)


def _max_of_duplicates(rows: Rows) -> Rows:
    """``rows`` with one row per ``(entity, field, ts)``, the largest value (NaN only when every one is NaN).

    A scrape of a MIG-enabled GPU has one series per GPU instance (``GPU_I_ID``), all mapped to the GPU's entity;
    ``max`` merges them the way follow mode's ``max by (...)`` does, so both modes read a MIG GPU alike.
    """
    keep: dict[tuple[str, str, float], int] = {}
    for i, key in enumerate(zip(rows.entity, rows.field, rows.ts, strict=True)):
        j = keep.setdefault(key, i)
        if j != i and (math.isnan(rows.value[j]) or rows.value[i] > rows.value[j]):
            rows.value[j] = rows.value[i]
    if len(keep) == len(rows.ts):
        return rows
    out = Rows(rows.source)
    out.labels = rows.labels
    for i in keep.values():
        out.add(rows.ts[i], rows.entity[i], rows.field[i], rows.value[i], rows.lines[i])
    return out


class PrometheusSource(Source):
    """Samples from a Prometheus server's HTTP API or an exporter's ``/metrics``."""

    name: ClassVar[str] = "prometheus"
    config_type: ClassVar[type[SourceConfig]] = PrometheusConfig
    target_field: ClassVar[str | None] = "url"

    @property
    def cfg(self) -> PrometheusConfig:
        """The typed config."""
        assert isinstance(self.config, PrometheusConfig)
        return self.config

    def entity_of(self, labels: Mapping[str, str]) -> str:
        """The entity id a series' labels map to."""
        if labels.get("entity"):
            return labels["entity"]
        host = labels.get("Hostname") or labels.get("instance", "unknown").split(":")[0]
        base = f"{self.cfg.entity_prefix.rstrip('/')}/{host}"
        return f"{base}/gpu{labels['gpu']}" if labels.get("gpu") else base

    def _add(self, rows: Rows, labels: Mapping[str, str], ts: float, raw: str | float, where: int, src: str,
             report: IngestReport) -> None:  # fmt: skip
        name = self.cfg.field or labels.get("__name__", "")
        try:
            value = raw if isinstance(raw, float) else parse_value(raw)
        except ValueError:
            report.add("parse_error", src, where, f"{name}: bad value {raw!r}")
            return
        canon = canonical_field(name)
        if canon is not None:
            value /= FIELD_BY_NAME[canon].dcgm_scale
        entity = self.entity_of(labels)
        rows.labels.setdefault(entity, {}).update(entity_labels_of(labels))
        rows.add(ts, entity, canon or name or "<unnamed>", value, where)

    def _get(self, client: httpx.Client, url: str, params: dict[str, Any], what: str, report: IngestReport) -> Any:
        try:
            resp = client.get(url, params=params)
        except httpx.TimeoutException:
            report.add("source_error", url, None, f"{what}: no answer within {self.cfg.timeout_s:g} s")
            return None
        except httpx.HTTPError as exc:
            report.add("source_error", url, None, f"{what}: {type(exc).__name__}: {exc}")
            return None
        if self.cfg.mode == "scrape":
            if resp.status_code != 200:
                report.add("source_error", url, None, f"{what}: HTTP {resp.status_code}")
                return None
            return resp.text
        try:
            body = resp.json()
        except ValueError:
            report.add("source_error", url, None, f"{what}: HTTP {resp.status_code}, not JSON")
            return None
        if resp.status_code != 200 or body.get("status") != "success":
            report.add("source_error", url, None, f"{what}: {body.get('errorType', resp.status_code)}: "
                       f"{body.get('error', '')}")  # fmt: skip
            return None
        return body.get("data", {})

    def result_frame(self, data: Mapping[str, Any], src: str, report: IngestReport, where: int = 1) -> Frame | None:
        """The samples of one query's ``data`` (``resultType`` matrix: ``values``; vector: ``value``) as a frame,
        mapped to entities and fields as the live modes do; None when it holds no sample. A sample that is not a
        ``[time, "value"]`` pair is counted as ``parse_error``.
        """
        rows = Rows(src)
        for series in data.get("result", []):
            if not isinstance(series, Mapping):
                report.add("parse_error", src, where, "a result that is not an object")
                continue
            metric = series.get("metric")
            labels = {str(k): str(v) for k, v in metric.items()} if isinstance(metric, Mapping) else {}
            samples = series.get("values", [series["value"]] if "value" in series else [])
            if not isinstance(samples, list):
                report.add("parse_error", src, where, f"values that are not a list: {str(samples)[:40]!r}")
                continue
            for sample in samples:
                try:
                    ts, raw = float(sample[0]), sample[1]
                    if not math.isfinite(ts):
                        raise ValueError(ts)
                    if not isinstance(raw, str):  # the API writes values as strings; a bare number is accepted too
                        raw = float(raw) if isinstance(raw, (int, float)) and not isinstance(raw, bool) else None
                except (TypeError, ValueError, IndexError, KeyError):
                    raw = None
                if raw is None:
                    report.add("parse_error", src, where, f"bad sample {str(sample)[:40]!r}")
                    continue
                self._add(rows, labels, ts, raw, where, src, report)
        return rows.flush() if rows.ts else None

    def frames(self, report: IngestReport) -> Iterator[Frame]:
        """Yield one frame per poll (instant/scrape) or per query (range)."""
        cfg = self.cfg
        saved = Path(cfg.url)
        if "://" not in cfg.url and saved.is_file():  # a saved answer or exporter page (`curl ... > f.json`)
            yield (read_saved_scrape if is_prometheus_text(saved) else read_saved_answer)(saved, report)[0]
            return
        with httpx.Client(timeout=cfg.timeout_s) as client:
            if cfg.mode == "follow":
                yield from self._follow(client, report)
                return
            if cfg.mode == "range":
                end = time.time() if cfg.end_s is None else cfg.end_s
                start = end - 3600.0 if cfg.start_s is None else cfg.start_s
                for qi, query in enumerate(cfg.queries, start=1):
                    params = {"query": query, "start": start, "end": end, "step": cfg.step_s}
                    data = self._get(client, cfg.url.rstrip("/") + "/api/v1/query_range", params, query, report)
                    frame = self.result_frame(data or {}, cfg.url, report, qi)
                    if frame is not None:
                        yield frame
                return
            for poll in range(cfg.polls):
                if poll:
                    time.sleep(cfg.period_s)
                rows = Rows(cfg.url)
                if cfg.mode == "scrape":
                    text = self._get(client, cfg.url, {}, "scrape", report)
                    now = time.time()
                    for s in parse_text(text or "", cfg.url, report):
                        labels = {**s.labels, "__name__": s.name}
                        ts = now if s.ts_ms is None else s.ts_ms / 1000.0
                        self._add(rows, labels, ts, s.value, poll + 1, cfg.url, report)
                    rows = _max_of_duplicates(rows)
                else:
                    self._instant(client, rows, report)
                if rows.ts:
                    yield rows.flush()

    def _instant(self, client: httpx.Client, rows: Rows, report: IngestReport,
                 at_s: float | None = None) -> list[Mapping[str, str]]:  # fmt: skip
        """Run the instant queries into ``rows``; the label sets of the series they returned."""
        cfg = self.cfg
        seen: list[Mapping[str, str]] = []
        for qi, query in enumerate(cfg.queries, start=1):
            params: dict[str, Any] = {"query": query} if at_s is None else {"query": query, "time": at_s}
            data = self._get(client, cfg.url.rstrip("/") + "/api/v1/query", params, query, report)
            for series in (data or {}).get("result", []):
                value = series.get("value")
                if not isinstance(value, list) or len(value) != 2:
                    report.add("parse_error", cfg.url, qi, f"{query}: result without a value")
                    continue
                labels = series.get("metric", {})
                self._add(rows, labels, float(value[0]), value[1], qi, cfg.url, report)
                seen.append(labels)
        return seen

    def _discover(self, client: httpx.Client,
                  report: IngestReport) -> tuple[list[str], list[dict[str, str]], Frame] | None:  # fmt: skip
        """Follow mode's discovery: the metric names, the label sets, and a frame with no rows carrying them (None
        when a query failed or found no series).
        """
        cfg = self.cfg
        names: list[str] = []
        raw: list[dict[str, str]] = []
        labels: dict[str, dict[str, str]] = {}
        for selector in cfg.queries:
            for query in discovery_queries(selector, KEPT_LABELS):
                data = self._get(client, cfg.url.rstrip("/") + "/api/v1/query", {"query": query}, query,
                                 report)  # fmt: skip
                if data is None:
                    return None
                for series in data.get("result", []):
                    lab = series.get("metric", {})
                    if query.startswith("count"):
                        names.append(lab.get("__name__", ""))
                    else:
                        raw.append(lab)
                        labels.setdefault(self.entity_of(lab), {}).update(entity_labels_of(lab))
        if not names or not labels:
            return None
        empty = np.zeros(0)
        frame = Frame(empty, empty.astype(np.int32), empty.astype(np.int16), empty, tuple(labels), (), labels, cfg.url)
        return names, raw, frame

    def _follow(self, client: httpx.Client, report: IngestReport) -> Iterator[Frame]:
        cfg = self.cfg
        follower = Follower(cfg.period_s, cfg.discover_s, cfg.max_catchup_steps)
        stop_at = None if cfg.duration_s is None else time.time() + cfg.duration_s
        with ThreadPoolExecutor(max_workers=4, thread_name_prefix="twinloop-promql") as pool:
            while True:
                now, failed = time.time(), False
                if follower.due_for_discovery(now):
                    at = grid_floor(now, cfg.period_s)
                    found = self._discover(client, report)
                    if found is None:
                        follower.discovery_failed(at)
                    else:
                        follower.discovered(at, found[0], found[1])
                        yield found[2]
                window = follower.window(time.time()) if follower.metrics else None
                if window is not None:
                    fetch = partial(fetch_range, client, cfg.url, window=window, step_s=cfg.period_s)
                    frame = poll_values(follower, fetch, pool, window, self.entity_of, cfg.url,
                                        lambda err: report.add("source_error", cfg.url, None, err))  # fmt: skip
                    failed = frame is None
                    if frame is not None and len(frame):
                        yield frame
                if not sleep_until(follower.wake_at(time.time(), failed or not follower.metrics), stop_at):
                    return


def read_saved_scrape(p: Path, report: IngestReport | None = None) -> tuple[Frame, dict[str, int]]:
    """The samples of a saved exporter page (Prometheus text or OpenMetrics), mapped as a live scrape is, and the
    problems counted while reading it. Only samples with an exposition timestamp have a time: a page of which a
    sample has none is refused (a live scrape is stamped on arrival; a file's arrival is not its time).

    Raises:
        InputError: a sample without a timestamp, or no sample at all.
    """
    from twinloop.safeio import read_text

    report = report if report is not None else IngestReport()
    source = str(p)
    src = PrometheusSource(PrometheusConfig(url=source, mode="scrape"))
    rows = Rows(source)
    text = read_text(p).removeprefix("\ufeff")
    for s in parse_text(text, source, report):
        if s.ts_ms is None:
            raise InputError(
                source, f"{s.name}", "a saved /metrics page has no time of its own (allowed: samples with exposition "
                "timestamps); read the exporter live (`watch dcgm:URL`) or save a query_range answer instead",
            )  # fmt: skip
        src._add(rows, {**s.labels, "__name__": s.name}, s.ts_ms / 1000.0, s.value, 1, source, report)
    if not rows.ts:
        raise InputError(source, "", f"no sample ({next(iter(report.examples.values()), ['no metric line'])[0]})")
    return _max_of_duplicates(rows).flush(), dict(report.problems)


def read_saved_answer(p: Path, report: IngestReport | None = None) -> tuple[Frame, dict[str, int]]:
    """The samples of a saved Prometheus range-query answer (:mod:`~.prometheus_saved`), and the problems counted
    while reading it (also added to ``report`` when given).

    Raises:
        InputError: not JSON, an error answer, an instant query, or no valid sample.
    """
    report = report if report is not None else IngestReport()
    source = str(p)
    frame = PrometheusSource(PrometheusConfig(url=source)).result_frame(load_answer(p), source, report)
    if frame is None:
        raise no_samples(source, report)
    return frame, dict(report.problems)
