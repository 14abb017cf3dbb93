"""The exporter's cache: the newest value of every (entity, field), and its Prometheus text exposition.

Built for a fleet behind one exporter (16,384 GPUs x 5 fields is 82k series and ~25 MB of text a scrape):

* Values live in one NumPy column per field, indexed by entity (structure of arrays); an update is a handful of
  vectorized scatters per field, whatever the number of GPUs.
* The text of a series other than its value (``NAME{labels} ``, and the ``# HELP``/``# TYPE`` lines before the
  first series of a family) changes only when a series appears or an entity's labels change. It is built once
  per such change (the *plan*); a render gathers the values in plan order, formats them in bulk
  (``map(repr, ...)``, C speed) and interleaves them with the cached prefixes in one ``str.join``.

The text is the classic format 0.0.4 exactly as ``prometheus_client.generate_latest`` writes it for the same
series (families sorted by name, series by entity, label names sorted, values as Python's shortest repr,
``NaN``/``+Inf``/``-Inf``), except that large values keep Python's spelling (``12500000.0``) where
``prometheus_client`` switches to Go's (``1.25e+07``); both parse to the same float. :func:`reference_render`
renders the same cache through ``prometheus_client``'s registry and collector, and the tests hold the two equal
sample for sample through ``prometheus_client``'s parser.

Counters (energy, ECC and remap totals) are exposed *untyped*: ``prometheus_client`` appends ``_total`` to a
counter's name, and dcgm-exporter's names have no such suffix; the metric names matter more to existing
dashboards than the TYPE line (``rate()`` works the same on an untyped series).
"""

from __future__ import annotations

import itertools
import re
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from twinloop.telemetry.exporter_labels import entity_labels, label_text
from twinloop.telemetry.fields import FIELD_BY_NAME
from twinloop.telemetry.frame import Frame

_METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
# Python's repr of the non-finite floats → the exposition format's spelling.
_SPECIAL = {"nan": "NaN", "inf": "+Inf", "-inf": "-Inf"}


def _metric_name(field: str) -> str:
    """The metric name of a field: the field name, with prometheus_client's underscore escaping if it needs one."""
    if _METRIC_NAME.match(field):
        return field
    from prometheus_client.openmetrics.exposition import UNDERSCORES, escape_metric_name

    return escape_metric_name(field, UNDERSCORES)


def _family(field: str) -> tuple[str, str, float]:
    """(help text, ``prometheus_client`` type, scale to dcgm-exporter's unit) of a field's metric family."""
    spec = FIELD_BY_NAME.get(field)
    if spec is None:
        return field, "gauge", 1.0
    unit = spec.dcgm_unit or spec.unit
    counter = " (a counter, exposed untyped: dcgm-exporter's name has no _total)"
    doc = f"{spec.description} (in {unit})" + (counter if spec.kind == "counter" else "")
    return doc, ("gauge" if spec.kind == "gauge" else "unknown"), spec.dcgm_scale


def _family_header(field: str) -> tuple[str, float]:
    """(``# HELP``/``# TYPE`` lines, scale) of a field's metric family, spelled as ``generate_latest`` does."""
    doc, kind, scale = _family(field)
    name = _metric_name(field)
    doc = doc.replace("\\", r"\\").replace("\n", r"\n")
    return f"# HELP {name} {doc}\n# TYPE {name} {'untyped' if kind == 'unknown' else kind}\n", scale


class _Column:
    """One field's newest (ts, value) per entity; ``has`` marks the entities that have one."""

    __slots__ = ("has", "ts", "value")

    def __init__(self, capacity: int) -> None:
        self.ts = np.full(capacity, -np.inf)
        self.value = np.zeros(capacity)
        self.has = np.zeros(capacity, dtype=bool)

    def grow(self, capacity: int) -> None:
        extra = capacity - self.ts.shape[0]
        self.ts = np.concatenate([self.ts, np.full(extra, -np.inf)])
        self.value = np.concatenate([self.value, np.zeros(extra)])
        self.has = np.concatenate([self.has, np.zeros(extra, dtype=bool)])


@dataclass(frozen=True)
class _Plan:
    """What a render needs besides the values: per family the entity indexes in render order, the scale, and
    the text before each value. Immutable: a render reads it outside the lock while updates go on.
    """

    structure: int
    families: tuple[tuple[str, NDArray[np.int64], float], ...]  # (field, entity indexes, scale)
    prefixes: tuple[str, ...]


class LatestValues:
    """The newest (ts, value) of every (entity, field), with entity labels; safe across threads.

    ``version`` grows with every update that changed something, so a reader can tell whether what it
    rendered is stale.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._index: dict[str, int] = {}
        self._entities: list[str] = []
        self._labels: list[dict[str, str]] = []
        self._label_text: list[str | None] = []
        self._columns: dict[str, _Column] = {}
        self._capacity = 0
        # Grows when a series appears or an entity's labels change: the render plan is rebuilt then only.
        self._structure = 0
        self._plan: _Plan | None = None
        self._order: NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self._last_entities: tuple[str, ...] | None = None
        self._last_ids: NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self.updates = 0
        self.version = 0

    # ----- updates ---------------------------------------------------------------------------------------
    def _ids(self, entities: tuple[str, ...]) -> NDArray[np.int64]:
        """Store indexes of a frame's entities, adding the new ones (caller holds the lock)."""
        # A producer sends the same entity list every step: one tuple comparison instead of a lookup per GPU.
        if entities == self._last_entities:
            return self._last_ids
        ids = np.fromiter((self._add(e) for e in entities), dtype=np.int64, count=len(entities))
        self._last_entities, self._last_ids = entities, ids
        return ids

    def _add(self, entity: str) -> int:
        i = self._index.get(entity)
        if i is not None:
            return i
        i = self._index[entity] = len(self._entities)
        self._entities.append(entity)
        self._labels.append({})
        self._label_text.append(None)
        if i >= self._capacity:
            self._capacity = max(1024, 2 * self._capacity, i + 1)
            for col in self._columns.values():
                col.grow(self._capacity)
        self._structure += 1
        return i

    def update(self, frame: Frame) -> None:
        """Take the last sample per (entity, field) of ``frame`` when newer than what is held.

        Labels of an entity are replaced by the frame's (not merged), so a GPU whose job ended loses its
        ``job`` label as soon as a frame says so.
        """
        if not len(frame):
            return
        n_fields = max(len(frame.fields), 1)
        key = frame.entity_idx.astype(np.int64) * n_fields + frame.field_idx
        # Newest per key: sort by (key, ts) and take each key's last row.
        order = np.lexsort((frame.ts_s, key))
        k_sorted = key[order]
        last = order[np.r_[k_sorted[1:] != k_sorted[:-1], True]]
        f_idx = frame.field_idx[last]
        with self._lock:
            ids = self._ids(frame.entities)[frame.entity_idx[last]]
            ts, value = frame.ts_s[last], frame.value[last]
            for k, name in enumerate(frame.fields):
                rows = f_idx == k
                if not rows.any():
                    continue
                col = self._columns.get(name)
                if col is None:
                    col = self._columns[name] = _Column(self._capacity)
                g, t = ids[rows], ts[rows]
                newer = t >= col.ts[g]
                g, t, v = g[newer], t[newer], value[rows][newer]
                if not col.has[g].all():
                    self._structure += 1
                col.ts[g], col.value[g], col.has[g] = t, v, True
            # A labelled producer (the twin) sends every entity's labels every step; only a change costs more.
            for ent, lab in frame.labels.items():
                i = self._add(ent)
                if self._labels[i] != lab:
                    self._labels[i] = dict(lab)
                    self._label_text[i] = None
                    self._structure += 1
            self.updates += 1
            self.version += 1

    def snapshot(self) -> tuple[dict[tuple[str, str], tuple[float, float]], dict[str, dict[str, str]]]:
        """A consistent copy of (values, labels): ``{(entity, field): (ts, value)}``, ``{entity: labels}``."""
        with self._lock:
            values: dict[tuple[str, str], tuple[float, float]] = {}
            for name, col in self._columns.items():
                for i in np.flatnonzero(col.has).tolist():
                    values[(self._entities[i], name)] = (float(col.ts[i]), float(col.value[i]))
            labels = {e: dict(lab) for e, lab in zip(self._entities, self._labels, strict=True) if lab}
        return values, labels

    # ----- rendering -------------------------------------------------------------------------------------
    def _text_of(self, i: int) -> str:
        text = self._label_text[i]
        if text is None:
            text = self._label_text[i] = label_text(entity_labels(self._entities[i], self._labels[i]))
        return text

    def _build_plan(self) -> _Plan:
        """The render plan for the current series and labels (caller holds the lock)."""
        n = len(self._entities)
        if self._order.shape[0] != n:  # entities are only ever added
            self._order = np.argsort(np.array(self._entities, dtype=str), kind="stable").astype(np.int64)
        families: list[tuple[str, NDArray[np.int64], float]] = []
        prefixes: list[str] = []
        for field in sorted(self._columns):
            col = self._columns[field]
            sel = self._order[col.has[self._order]]
            if not sel.size:
                continue
            header, scale = _family_header(field)
            name = _metric_name(field)
            texts = [self._text_of(i) for i in sel.tolist()]
            lead = "\n" if prefixes else ""
            prefixes.append(f"{lead}{header}{name}{texts[0]} ")
            prefixes.extend([f"\n{name}{t} " for t in texts[1:]])
            families.append((field, sel, scale))
        return _Plan(self._structure, tuple(families), tuple(prefixes))

    def render(self) -> str:
        """The Prometheus text exposition (format 0.0.4) of the held values."""
        with self._lock:
            plan = self._plan
            if plan is None or plan.structure != self._structure:
                plan = self._plan = self._build_plan()
            with np.errstate(over="ignore"):  # a huge value x the unit scale is +Inf, as in Python's own floats
                parts = [self._columns[field].value[sel] * scale for field, sel, scale in plan.families]
        if not parts:
            return ""
        values = np.concatenate(parts)
        texts = list(map(repr, values.tolist()))
        for i in np.flatnonzero(~np.isfinite(values)).tolist():
            texts[i] = _SPECIAL[texts[i]]
        return "".join(itertools.chain.from_iterable(zip(plan.prefixes, texts, strict=True))) + "\n"


class _Collector:
    """A ``prometheus_client`` collector over a :class:`LatestValues` (one metric family per field)."""

    def __init__(self, latest: LatestValues) -> None:
        self.latest = latest

    def collect(self) -> Iterator[object]:
        from prometheus_client.metrics_core import Metric

        values, labels = self.latest.snapshot()
        families: dict[str, Metric] = {}
        label_cache: dict[str, Mapping[str, str]] = {}
        for (ent, fld), (_, val) in sorted(values.items(), key=lambda kv: (kv[0][1], kv[0][0])):
            fam = families.get(fld)
            doc, kind, scale = _family(fld)
            if fam is None:
                fam = families[fld] = Metric(fld, doc, kind)
            lab = label_cache.get(ent)
            if lab is None:
                lab = label_cache[ent] = entity_labels(ent, labels.get(ent, {}))
            fam.add_sample(fld, dict(lab), val * scale)
        yield from families.values()


def reference_render(latest: LatestValues) -> str:
    """The same exposition rendered the slow, obvious way: ``prometheus_client``'s registry and
    ``generate_latest`` over a collector (one Python call per sample). Tests compare :meth:`LatestValues.render`
    with it.
    """
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(latest))  # type: ignore[arg-type]
    return generate_latest(registry).decode()
