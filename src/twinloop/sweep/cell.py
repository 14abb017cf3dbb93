"""Run one cell of a sweep (the kernel each Ray task calls) and the row it becomes.

A row has a fixed schema whatever the scenario, so it streams into Parquet and the store batch by batch:
the inputs (sweep, cell, kind, scenario, seed, loop, mode, policy, overrides), the status (``ok`` or
``failed``, attempts, error), wall time and worker, and two maps ``metrics`` (every outcome metric of
:func:`twinloop.closedloop.passes.outcome_metrics`, or the plan's numeric figures) and ``detection``
(precision, recall and median time to detect per injected fault kind, false alarms, incidents).
"""

from __future__ import annotations

import math
import os
import socket
import time
from typing import Any

import pyarrow as pa

from twinloop.sweep.spec import Cell

ROW_SCHEMA = pa.schema(
    [
        ("sweep", pa.string()),
        ("cell", pa.int64()),
        ("kind", pa.string()),
        ("scenario", pa.string()),
        ("seed", pa.int64()),
        ("loop", pa.string()),
        ("mode", pa.string()),
        ("policy", pa.string()),
        ("overrides", pa.string()),
        ("status", pa.string()),
        ("attempts", pa.int64()),
        ("error", pa.string()),
        ("wall_s", pa.float64()),
        ("worker", pa.string()),
        ("metrics", pa.map_(pa.string(), pa.float64())),
        ("detection", pa.map_(pa.string(), pa.float64())),
    ]
)

#: Columns that differ between otherwise identical runs (timing and placement), left out of reproducibility checks.
VOLATILE = ("wall_s", "worker", "attempts")


def _finite(d: dict[str, Any]) -> dict[str, float]:
    """Numeric entries only, as floats (None and non-finite values are left out: a map has no gaps)."""
    out = {}
    for k, v in d.items():
        if isinstance(v, bool | int | float) and math.isfinite(float(v)):
            out[k] = float(v)
    return out


def _twin(cell: Cell) -> tuple[dict[str, float], dict[str, float]]:
    from twinloop.closedloop.passes import outcome_metrics, run_pass
    from twinloop.ops import Policy
    from twinloop.twin.scenario import scenario_from_dict

    spec = scenario_from_dict(cell.inputs, cell.source, cell.base_dir)
    policy = Policy.model_validate(cell.policy_doc) if cell.policy_doc is not None else None
    # The sweep is judged on the loop itself: the cooling optimizer and precooling stay as `twinloop run` has them.
    r = run_pass(spec, cell.loop_on, mode=cell.mode or "auto", policy=policy, source=cell.source)  # type: ignore[arg-type]
    det: dict[str, float] = {"incidents": float(len(r.incidents)), "false_alarms": float(len(r.detection.false_alarms))}
    for q in r.detection.per_fault:
        det[f"precision[{q.fault}]"] = q.precision
        det[f"recall[{q.fault}]"] = q.recall
        if q.median_time_to_detect_s is not None:
            det[f"median_time_to_detect_s[{q.fault}]"] = q.median_time_to_detect_s
    return _finite(outcome_metrics(r)), _finite(det)


def _flatten(prefix: str, obj: Any, out: dict[str, Any]) -> None:
    if isinstance(obj, dict):
        for k, v in obj.items():
            _flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    else:
        out[prefix] = obj


def _plan(cell: Cell) -> tuple[dict[str, float], dict[str, float]]:
    import dataclasses

    from twinloop.plan.train import plan_train
    from twinloop.plan.train_request import make_request

    plan = plan_train(make_request(cell.source, **cell.inputs))
    flat: dict[str, Any] = {}
    doc = dataclasses.asdict(plan)
    doc.pop("phases", None)  # the twin's per-phase activity profile, not a figure of merit
    _flatten("", doc, flat)
    return _finite(flat), {}


def worker_id() -> str:
    """``host:pid`` of the process running the cell (a Ray worker, or the driver)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def run_cell(cell: Cell, sweep: str) -> dict[str, Any]:
    """Run ``cell`` and return its row (status ``ok``); exceptions propagate (the runner retries, then records)."""
    started = time.perf_counter()
    metrics, detection = _twin(cell) if cell.kind == "twin" else _plan(cell)
    return row(cell, sweep, "ok", 1, None, time.perf_counter() - started, worker_id(), metrics, detection)


def row(
    cell: Cell,
    sweep: str,
    status: str,
    attempts: int,
    error: str | None,
    wall_s: float,
    worker: str,
    metrics: dict[str, float],
    detection: dict[str, float],
) -> dict[str, Any]:
    """One row of :data:`ROW_SCHEMA` (maps as sorted (key, value) lists, so rows compare equal when equal)."""
    return {
        "sweep": sweep,
        "cell": cell.index,
        "kind": cell.kind,
        "scenario": cell.scenario,
        "seed": cell.seed,
        "loop": cell.loop,
        "mode": cell.mode,
        "policy": cell.policy_path or "",
        "overrides": cell.overrides_json,
        "status": status,
        "attempts": attempts,
        "error": error,
        "wall_s": wall_s,
        "worker": worker,
        "metrics": sorted(metrics.items()),
        "detection": sorted(detection.items()),
    }
