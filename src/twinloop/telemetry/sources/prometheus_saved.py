"""A saved Prometheus HTTP API answer as input (``curl .../api/v1/query_range ... > f.json``): ``twinloop detect
f.json``, ``twinloop ingest prometheus f.json``.

An SRE's history of a metric usually lives in Prometheus, and the quickest export is the API's own JSON: a range
query's ``{"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {...}, "values": [[t,
"v"], ...]}, ...]}}``. The file is read with the live Prometheus source's mapping
(:meth:`~twinloop.telemetry.sources.prometheus.PrometheusSource.result_frame`, which reads it through
:func:`load_answer`; :func:`~twinloop.telemetry.sources.prometheus.read_saved_answer`): an ``entity`` label as is, else
``Hostname``/``instance`` and ``gpu``; the metric name is the field (DCGM names canonicalised and scaled, as
``watch prometheus`` reads them); ``"NaN"`` and ``"+Inf"`` values are counted as missing. A bare ``data`` object
or a list of results is accepted too. An instant query (``resultType`` vector) holds one sample per series: too
few to detect anything, so it is refused with the range query to run instead.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from twinloop.errors import InputError
from twinloop.telemetry.report import IngestReport

#: How far into a ``.json`` file to look for the API's keys before calling it something else.
SNIFF_BYTES = 4096


def is_prometheus_json(p: Path) -> bool:
    """Whether ``p`` is read as a Prometheus API answer: any ``.json`` file (the only JSON ``detect`` reads, so a
    wrong one gets this reader's error), or another file that starts like one (``curl ... > temps.txt``).
    """
    if not p.is_file():
        return False
    if p.suffix.lower() == ".json":
        return True
    try:
        with p.open(encoding="utf-8-sig", errors="replace") as fh:
            head = fh.read(SNIFF_BYTES)
    except OSError:
        return False
    return head.lstrip()[:1] in ("{", "[") and any(k in head for k in ('"resultType"', '"result"', '"metric"'))


def is_prometheus_text(p: Path) -> bool:
    """Whether ``p`` is a saved exporter page (``curl http://node:9400/metrics > f.prom``): it opens with the
    exposition format's ``# HELP`` / ``# TYPE`` lines.
    """
    if not p.is_file() or p.suffix.lower() in (".json", ".parquet", ".pq", ".duckdb", ".db"):
        return False
    try:
        with p.open(encoding="utf-8-sig", errors="replace") as fh:
            head = fh.read(SNIFF_BYTES).lstrip()
    except OSError:
        return False
    return head.startswith(("# HELP ", "# TYPE "))


def _result_data(doc: Any, source: str) -> Mapping[str, Any]:
    """The ``data`` object of an API answer (or of a bare ``data`` object or result list); InputError otherwise."""
    if isinstance(doc, list):
        return {"resultType": "matrix", "result": doc}
    if not isinstance(doc, Mapping):
        raise InputError(source, "", "expected a JSON object (a Prometheus API answer)")
    if "status" in doc and doc.get("status") != "success":
        why = f"{doc.get('errorType', 'error')}: {doc.get('error', '')}".strip()
        raise InputError(source, "status", f"{doc.get('status')!r} ({why}; allowed: a successful query's answer)")
    data = doc.get("data", doc)
    if not isinstance(data, Mapping) or not isinstance(data.get("result"), list):
        raise InputError(source, "data.result", "missing (allowed: a query_range answer, resultType matrix)")
    kind = data.get("resultType", "matrix")
    if kind == "vector":
        raise InputError(
            source, "data.resultType", "'vector' (an instant query: one sample per series; allowed: matrix, from "
            "/api/v1/query_range?query=...&start=...&end=...&step=...)",
        )  # fmt: skip
    if kind != "matrix":
        raise InputError(source, "data.resultType", f"{kind!r} (allowed: matrix)")
    return data


def load_answer(p: Path) -> Mapping[str, Any]:
    """The ``data`` object of a saved answer (validated: a successful range query).

    Raises:
        InputError: not JSON, an error answer, an instant query, or no result list.
    """
    source = str(p)
    try:
        doc = json.loads(p.read_text(encoding="utf-8-sig"))
    except json.JSONDecodeError as exc:
        raise InputError(source, f"line {exc.lineno}", f"malformed JSON: {exc.msg}") from None
    except RecursionError:
        raise InputError(source, "", "JSON nested too deeply (allowed: a Prometheus API answer)") from None
    return _result_data(doc, source)


def no_samples(source: str, report: IngestReport) -> InputError:
    """The error for an answer none of whose samples could be read."""
    first = next(iter(report.examples.values()), [""])[0]
    return InputError(source, "data.result", f"no valid samples ({first or 'the result is empty'})")
