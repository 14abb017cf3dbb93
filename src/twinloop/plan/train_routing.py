"""A saved routing run as the training planner's MoE imbalance (``plan train --routing FILE``).

``plan moe --out DIR`` saves each router's per-step hottest-rank load (``load_factor``: copies on the hottest EP
rank over the nominal ``tokens·K/ep``). A synchronous training step waits for its slowest rank, so the planner's
expert-parallel time scales with that factor; over a run the mean of the per-step factors is what the step time
averages to (the step time is linear in it), and its p99 is reported beside it for the worst steps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from twinloop.errors import InputError
from twinloop.plan.serve_moe_file import read_routing_row


@dataclass(frozen=True)
class TrainRouting:
    """The routing run a training plan took its MoE imbalance from.

    Attributes:
        source: the file; router / placement: the row used; steps: routing steps in it.
        mean_load_factor: the factor the plan uses; p99_load_factor / max_load_factor: its worst steps.
        dropped_share: tokens·K copies dropped over the run, as a share of all copies.
    """

    source: str
    router: str
    placement: str
    steps: int
    mean_load_factor: float
    p99_load_factor: float
    max_load_factor: float
    dropped_share: float


def training_routing(path: str, model: str, ep: int | None, router: str | None, placement: str) -> TrainRouting:
    """Read the row of a saved routing run for a training plan of ``model`` at expert parallelism ``ep``."""
    if ep is None:
        raise InputError("--routing", "--ep", "give --ep (the routing run's expert parallelism) with --routing")
    _, _, row, m = read_routing_row(path, model, ep, router, placement)
    lf = np.asarray(m.load_factor, dtype=np.float64)
    summary = row.get("summary")
    dropped = summary.get("dropped_share") if isinstance(summary, dict) else None
    return TrainRouting(
        source=path, router=str(row.get("router")), placement=str(row.get("placement")), steps=int(lf.size),
        mean_load_factor=float(lf.mean()), p99_load_factor=float(np.percentile(lf, 99)),
        max_load_factor=float(lf.max()),
        dropped_share=float(dropped) if isinstance(dropped, int | float) else float("nan"),
    )  # fmt: skip
