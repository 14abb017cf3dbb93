"""Read a routing run saved by ``twinloop plan moe --out DIR`` (``DIR/moe_routing.json``, the same document as
``plan moe --json``) for ``plan serve --routing FILE``: one (router, placement) row's per-step, per-rank traffic.

The saved run routed ``tokens_per_step`` tokens per step; the serving planner uses its load ratios for both the
decode and the prefill step and says so in a warning when the serving batch differs (a smaller batch spreads
fewer tokens over the experts, so its imbalance is usually larger than the file's).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from twinloop.errors import InputError
from twinloop.model.arch import ModelArch
from twinloop.model.routing.simulator import RankTraffic, StepMetrics

if TYPE_CHECKING:
    from twinloop.plan.serve_request import ServeRequest

_RANK_FIELDS = ("touched", "send_intra", "send_inter", "recv_intra", "recv_inter")
#: StepMetrics' per-step series, in its field order, with their dtypes.
_STEP_FIELDS: tuple[tuple[str, type], ...] = (
    ("imbalance", float), ("load_factor", float), ("dropped", np.int64), ("redirected", np.int64),
    ("a2a_intra_bytes", float), ("a2a_inter_bytes", float), ("quality", float), ("served_true", float),
    ("mean_k", float), ("burst", bool),
)  # fmt: skip


def _array(path: str, where: str, value: Any, dtype: type, ndim: int) -> np.ndarray:
    try:
        a: np.ndarray = np.asarray(value, dtype=dtype)
    except (TypeError, ValueError, OverflowError):
        raise InputError(path, where, "must be an array of numbers") from None
    if a.ndim != ndim or a.size == 0:
        raise InputError(path, where, f"must be a non-empty {ndim}-d array, got shape {a.shape}")
    if dtype is not bool and not (np.all(np.isfinite(a)) and np.all(a >= 0)):
        raise InputError(path, where, "must hold finite numbers >= 0")
    return a


def _metrics(path: str, row: dict[str, Any], i: int) -> StepMetrics:
    ps, rk = row.get("per_step"), row.get("ranks")
    if not isinstance(ps, dict) or not isinstance(rk, dict):
        raise InputError(
            path, f"rows[{i}].per_step/ranks", "missing: save the run again with `twinloop plan moe --out DIR`"
        )

    def step(name: str, dtype: type = float) -> np.ndarray:
        return _array(path, f"rows[{i}].per_step.{name}", ps.get(name), dtype, 1)

    def rank(name: str) -> np.ndarray:
        return _array(path, f"rows[{i}].ranks.{name}", rk.get(name), np.int64, 2)

    load = rank("rank_load")
    traffic = RankTraffic(*(rank(f) for f in _RANK_FIELDS))
    shapes = {a.shape for a in (load, *(getattr(traffic, f) for f in _RANK_FIELDS))}
    if len(shapes) != 1:
        raise InputError(path, f"rows[{i}].ranks", f"arrays of different shapes {sorted(shapes)}")
    series = {name: step(name, dtype) for name, dtype in _STEP_FIELDS}
    for name, a in series.items():
        if a.shape[0] != load.shape[0]:
            raise InputError(path, f"rows[{i}].per_step.{name}", f"has {a.shape[0]} steps, ranks have {load.shape[0]}")
    return StepMetrics(**series, rank_load=load, ranks=traffic)


def read_routing_row(
    path: str, model: str, ep: int, router: str | None, placement: str
) -> tuple[dict[str, Any], int, dict[str, Any], StepMetrics]:
    """(document, row index, row, its metrics) of the one row of a saved routing run with ``placement`` and, when
    given, ``router``; the file must be for ``model`` at expert parallelism ``ep`` (InputError otherwise).
    """
    try:
        doc = json.loads(Path(path).read_bytes())
    except OSError as exc:
        raise InputError(path, "", f"cannot read: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise InputError(path, f"line {exc.lineno}", f"not JSON: {exc.msg}") from None
    except (UnicodeDecodeError, RecursionError):
        raise InputError(path, "", "not JSON: undecodable bytes or nesting too deep") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list):
        raise InputError(path, "rows", "missing: expected the output of `twinloop plan moe --json` or --out")
    if doc.get("model") != model:
        raise InputError(path, "model", f"routing of {doc.get('model')!r}, but the plan is for {model!r}")
    if doc.get("ep") != ep:
        raise InputError(path, "ep", f"routed on ep={doc.get('ep')}, but --ep is {ep}")
    rows = [
        (i, r) for i, r in enumerate(doc["rows"])
        if isinstance(r, dict) and r.get("placement") == placement and router in (None, r.get("router"))
    ]  # fmt: skip
    if len(rows) != 1:
        named = [r for r in doc["rows"] if isinstance(r, dict)]
        have = ", ".join(f"{r.get('router')}/{r.get('placement')}" for r in named)
        # `plan moe --out` saves every router by default: say which flag picks one row, with a real example
        names = [str(r.get("router")) for _, r in rows]
        plain = "topk" if "topk" in names else (names[0] if names else "")
        pick = f"; pick one with --router NAME, e.g. --router {plain}" if names and router is None else ""
        raise InputError(
            path, "rows", f"{len(rows)} rows match --router {router or '(any)'} --placement {placement}{pick} "
            f"(rows: {have})"
        )  # fmt: skip
    i, row = rows[0]
    m = _metrics(path, row, i)
    if m.rank_load.shape[1] != ep:
        raise InputError(path, f"rows[{i}].ranks.rank_load", f"has {m.rank_load.shape[1]} ranks, --ep is {ep}")
    return doc, i, row, m


def load_routing_file(
    req: ServeRequest, arch: ModelArch, ranks_per_node: int, warnings: list[str]
) -> tuple[str, StepMetrics, int, StepMetrics, int, tuple[str, str]]:
    """(source, decode metrics, their tokens per step, prefill metrics, their tokens, (router, placement)).

    The row is the one with ``req.placement`` and, when given, ``req.router`` (InputError naming the rows
    otherwise); the file must be for the same model and EP degree.
    """
    path = str(req.routing_file)
    doc, _, row, m = read_routing_row(path, arch.name, req.ep, req.router, req.placement)
    tokens = doc.get("tokens_per_step")
    if not isinstance(tokens, int) or tokens < 1:
        raise InputError(path, "tokens_per_step", f"must be an integer >= 1, got {tokens!r}")
    if doc.get("ranks_per_node") != ranks_per_node:
        warnings.append(
            f"{path} split the all-to-all over {doc.get('ranks_per_node')} ranks per node; this plan has "
            f"{ranks_per_node} (its NVLink/network split is the file's)"
        )
    warnings.append(
        f"{path} routed {tokens} tokens per step; its load ratios stand in for the serving decode and prefill "
        "batches (simulate the serving shape with --router instead)"
    )
    return path, m, tokens, m, tokens, (str(row.get("router")), str(row.get("placement")))
