"""Search every valid parallelism configuration and rank them, vectorized with NumPy.

All configurations (:func:`twinloop.plan.parallel.enumerate_configs`) are evaluated at once as arrays:
memory first, then time, power, energy and cost for those that fit. No Python loop runs per configuration
(only one routing simulation per distinct expert-parallel degree for MoE models).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from twinloop.errors import InputError
from twinloop.plan import dualpipe
from twinloop.plan.evaluate import TrainArrays, evaluate, routing_imbalance
from twinloop.plan.memory import memory_per_gpu
from twinloop.plan.parallel import ConfigArrays, enumerate_configs
from twinloop.plan.train_request import TrainContext

Objective = Literal["throughput", "energy", "cost"]
OBJECTIVES: tuple[Objective, ...] = ("throughput", "energy", "cost")


@dataclass(frozen=True)
class SearchResult:
    """Ranked configurations.

    Attributes:
        objective: what the ranking optimizes.
        evaluated: configurations enumerated and evaluated for memory.
        fitting: configurations that fit in memory (evaluated for time, power and cost).
        ranked: the fitting ones, best first.
        smallest_memory_bytes: the least memory per GPU any configuration needs (explains "none fits").
    """

    objective: Objective
    evaluated: int
    fitting: int
    ranked: TrainArrays
    smallest_memory_bytes: float

    def rows(self, top: int) -> list[dict[str, Any]]:
        """The best ``top`` configurations as plain dicts (config, memory, step time, throughput, ...)."""
        a = self.ranked
        out = []
        for i in range(min(top, len(a.configs))):
            cfg = a.configs.config(i)
            out.append(
                {
                    "rank": i + 1,
                    "config": {
                        "tp": cfg.tp,
                        "pp": cfg.pp,
                        "dp": cfg.dp,
                        "ep": cfg.ep,
                        "cp": cfg.cp,
                        "micro_batch": cfg.micro_batch,
                        "zero": cfg.zero,
                        "recompute": cfg.recompute,
                        "sequence_parallel": cfg.sequence_parallel,
                        "interleave": cfg.interleave,
                    },
                    "memory_per_gpu_bytes": float(a.memory.total[i]),
                    "step_time_s": float(a.time.step_s[i]),
                    "tokens_per_s": float(a.tokens_per_s[i]),
                    "mfu": float(a.mfu[i]),
                    "power_per_gpu_w": float(a.power.average_power_w[i]),
                    "energy_per_token_j": float(a.energy_per_token_j[i]),
                    "cost_per_million_tokens_usd": float(a.cost_per_token_usd[i] * 1e6),
                }
            )
        return out


def rank_order(a: TrainArrays, objective: Objective) -> NDArray[np.int64]:
    """Indices best first: throughput descending, energy or cost per token ascending (stable ties)."""
    if objective == "throughput":
        key = -a.tokens_per_s
    elif objective == "energy":
        key = a.energy_per_token_j
    elif objective == "cost":
        key = a.cost_per_token_usd
    else:
        raise InputError("--search", "", f"unknown objective {objective!r} (allowed: {', '.join(OBJECTIVES)})")
    # Tie-break on less memory so equal-speed configurations prefer the one with more headroom.
    return np.lexsort((a.memory.total, key)).astype(np.int64)


def _select(a: TrainArrays, idx: NDArray[np.int64]) -> TrainArrays:
    def pick(obj: Any) -> Any:
        return type(obj)(**{k: getattr(obj, k)[idx] for k in obj.__dataclass_fields__})

    return TrainArrays(
        configs=a.configs.select(idx),
        memory=pick(a.memory),
        time=pick(a.time),
        power=pick(a.power),
        fits=a.fits[idx],
        headroom_bytes=a.headroom_bytes[idx],
        tokens_per_s=a.tokens_per_s[idx],
        tflops_per_gpu=a.tflops_per_gpu[idx],
        mfu=a.mfu[idx],
        hfu=a.hfu[idx],
        energy_per_token_j=a.energy_per_token_j[idx],
        cost_per_token_usd=a.cost_per_token_usd[idx],
        imbalance=a.imbalance[idx],
    )


def candidate_configs(ctx: TrainContext, fixed: dict[str, int | str | bool] | None = None) -> ConfigArrays:
    """Every valid configuration for the context, with the user's fixed choices (default: the request's); under
    the DualPipe schedule only those it can run (:func:`twinloop.plan.dualpipe.feasible`).
    """
    fixed = ctx.request.fixed_parallelism() if fixed is None else fixed
    configs = enumerate_configs(
        ctx.arch, ctx.gpu.gpus_per_node, ctx.request.gpus, ctx.global_batch, ctx.seq_len, fixed=fixed
    )
    if ctx.efficiency.pipeline_schedule == "dualpipe" and len(configs):
        configs = configs.select(np.flatnonzero(dualpipe.feasible(configs, ctx.global_batch)))
    return configs


def _concat(parts: list[Any]) -> Any:
    """Chunks of :class:`TrainArrays` (or of its parts) joined back in order: the inverse of slicing them."""
    first = parts[0]
    if hasattr(first, "__dataclass_fields__"):
        return type(first)(**{k: _concat([getattr(p, k) for p in parts]) for k in first.__dataclass_fields__})
    return np.concatenate(parts)


def _evaluate_chunk(shared: tuple[Any, ...], start: int, stop: int) -> TrainArrays:
    """The search's kernel on configurations ``start:stop`` (one Ray task with ``ray=True``)."""
    w, sub, topo, power_model, global_batch, power_limit_w, prices, imbalance, efficiency = shared
    idx = np.arange(start, stop)
    return evaluate(
        w, sub.select(idx), topo, power_model, global_batch, power_limit_w, prices, imbalance[idx], efficiency
    )


def search(
    ctx: TrainContext,
    objective: Objective = "throughput",
    fixed: dict[str, int | str | bool] | None = None,
    *,
    ray: bool = False,
    ray_address: str | None = None,
    chunks: int | None = None,
) -> SearchResult:
    """Evaluate all valid configurations and rank those that fit in memory by ``objective``.

    With ``ray=True`` the fitting configurations are evaluated in ``chunks`` slices (default: 4 per Ray CPU) as
    Ray tasks (:func:`twinloop.sweep.chunked.ray_map`, a local Ray or the cluster at ``ray_address``); every
    configuration is evaluated on its own by the same vectorized code, so the ranking is exactly the local one.

    Raises:
        InputError: no valid configuration exists for the GPU count and the fixed choices.
    """
    configs = candidate_configs(ctx, fixed)
    if len(configs) == 0:
        given = ctx.request.fixed_parallelism() if fixed is None else fixed
        raise InputError(
            "plan train",
            "parallelism",
            f"no valid configuration for {ctx.request.gpus} GPUs, global batch {ctx.global_batch}, "
            f"sequence {ctx.seq_len} with {', '.join(f'{k} {v}' for k, v in given.items()) or 'nothing fixed'}"
            + (
                " (DualPipe runs only even pp and micro-batch counts, without interleaving)"
                if ctx.efficiency.pipeline_schedule == "dualpipe"
                else ""
            ),
        )
    w = ctx.workload
    req = ctx.request
    imbalance = routing_imbalance(
        ctx.arch, configs.ep, ctx.gpu.gpus_per_node, req.moe_zipf_s, req.seed, req.moe_imbalance
    )
    mem = memory_per_gpu(w, configs, ctx.global_batch, imbalance, ctx.efficiency)
    fit = np.flatnonzero(mem.total <= w.hbm_capacity_bytes)
    smallest = float(mem.total.min())
    sub = configs.select(fit)
    shared = (
        w,
        sub,
        ctx.topology,
        ctx.power_model,
        ctx.global_batch,
        ctx.power_limit_w,
        ctx.prices,
        imbalance[fit],
        ctx.efficiency,
    )
    if ray and len(sub):
        from twinloop.sweep.chunked import ray_map

        arrays = _concat(ray_map(_evaluate_chunk, len(sub), shared, chunks=chunks, address=ray_address))
    else:
        arrays = _evaluate_chunk(shared, 0, len(sub))
    order = rank_order(arrays, objective) if len(sub) else np.zeros(0, dtype=np.int64)
    return SearchResult(objective, len(configs), int(fit.size), _select(arrays, order), smallest)


def describe(cfg_row: dict[str, Any]) -> str:
    """A compact one-line label of a configuration row (``tp8 pp16 dp128 ...``)."""
    c = cfg_row["config"]
    label = f"tp{c['tp']} pp{c['pp']} dp{c['dp']} cp{c['cp']} ep{c['ep']} mb{c['micro_batch']} z{c['zero']}"
    label += (
        f" {c['recompute']}"
        + (" sp" if c["sequence_parallel"] else "")
        + (f" v{c['interleave']}" if c["interleave"] > 1 else "")
    )
    return label
