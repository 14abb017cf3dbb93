"""DualPipe (DeepSeek-V3 §3.2.2, Table 2): which layouts it runs, its parameter copies and in-flight activations.

DualPipe feeds micro-batches into the pipeline from both ends. Each of the ``pp`` ranks holds two pipeline
stages, stage ``i`` for the forward direction and stage ``pp-1-i`` for the reverse one, so the whole model
is held twice across the pipeline (Table 2: parameters 2×, "DualPipe requires keeping two copies of the
model parameters"); a micro-batch still visits one stage per rank, so compute per micro-batch is that of
1F1B. Peak activations are ``pp + 1`` stage-micro-batches instead of 1F1B's ``pp`` (Table 2: "only
increasing the peak activation memory by 1/PP times"). It "only requires that the pipeline stages and
micro-batches be divisible by 2" (§3.2.2), and has no interleaved variant. Its bubble is the framework
profile's ``bubble_scale`` (:mod:`twinloop.plan.frameworks`).

The two copies of a parameter are data-parallel replicas of each other: DeepSeek's reference code
(github.com/deepseek-ai/DualPipe, ``examples/example_dualpipe.py``) gives rank ``r`` the stages
``full_modules[r]`` and ``full_modules[pp - 1 - r]`` and sums each copy's gradient with its mirror rank's.
So the planner treats each parameter's data-parallel group as ``2·dp·cp`` ranks: unsharded weights and
gradients double, while ZeRO-sharded state (optimizer from ZeRO-1, gradients from ZeRO-2, weights at
ZeRO-3) is sharded over twice as many ranks and stays the same per GPU; the gradient sync moves twice the
bytes per GPU. How HAI-LLM shards the optimizer over the mirror copies is not published (GUESS: as over any
data-parallel replica).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from twinloop.plan.parallel import ConfigArrays

F64 = NDArray[np.float64]

#: DeepSeek-V3 Table 2: parameter copies per pipeline rank under DualPipe.
PARAM_COPIES = 2


def param_copies(c: ConfigArrays, schedule: str) -> F64:
    """Copies of each parameter held per pipeline rank: 2 under DualPipe with a pipeline, else 1."""
    dual = (schedule == "dualpipe") & (c.pp > 1)
    return np.where(dual, float(PARAM_COPIES), 1.0)


def in_flight_micro_batches(pp: NDArray[np.float64], m: NDArray[np.float64]) -> F64:
    """Stage-micro-batches whose activations a DualPipe rank holds at its peak: ``min(pp + 1, m)`` (Table 2)."""
    return np.asarray(np.minimum(pp + 1, m), dtype=np.float64)


def feasible(c: ConfigArrays, global_batch: int) -> NDArray[np.bool_]:
    """Configurations DualPipe can run: no pipeline, or an even ``pp`` and an even number of micro-batches,
    without interleaving (§3.2.2).
    """
    m = global_batch // (c.dp * c.micro_batch)
    return np.asarray((c.pp == 1) | ((c.pp % 2 == 0) & (m % 2 == 0) & (c.interleave == 1)), dtype=np.bool_)


def infeasible_reason(c: ConfigArrays, global_batch: int) -> tuple[str, str] | None:
    """(field, reason) why DualPipe cannot run the first configuration of ``c``, or None when it can."""
    pp, v, m = int(c.pp[0]), int(c.interleave[0]), global_batch // int(c.dp[0] * c.micro_batch[0])
    if pp == 1:
        return None
    if v > 1:
        return "interleave", f"DualPipe has no interleaved schedule (interleave={v}; use 1)"
    if pp % 2:
        return "pp", f"DualPipe needs an even number of pipeline stages (pp={pp})"
    if m % 2:
        return "micro_batch", f"DualPipe needs an even number of micro-batches per step ({m})"
    return None
