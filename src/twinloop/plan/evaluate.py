"""Evaluate arrays of training configurations end to end: memory, time, power, energy, cost.

Both the single-config planner (:func:`twinloop.plan.train.plan_train`) and the search
(:mod:`twinloop.plan.search`) call :func:`evaluate`; a single plan is an array of length one, so the two
can never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from twinloop.hardware.power import GpuPowerModel
from twinloop.model.arch import ModelArch
from twinloop.model.moe import route_tokens
from twinloop.plan.collectives import Topology
from twinloop.plan.cost import Prices, cost_usd
from twinloop.plan.efficiency import DEFAULT_EFFICIENCY, TrainEfficiency
from twinloop.plan.memory import MemoryArrays, memory_per_gpu
from twinloop.plan.parallel import ConfigArrays
from twinloop.plan.train_power import PowerArrays, time_and_power
from twinloop.plan.train_time import TimeArrays
from twinloop.plan.workload import TrainWorkload

F64 = NDArray[np.float64]

#: Tokens per EP rank routed to estimate the imbalance (bounded so one routing call stays well under 1 s).
ROUTING_TOKENS_PER_RANK = 2048
ROUTING_MAX_TOKENS = 65_536
#: A routing call costs tokens x experts: beyond 256 experts (DeepSeek-V3) the token cap shrinks so that product
#: stays bounded (a 1,024-expert config would otherwise take minutes in a search); models up to 256 are unchanged.
ROUTING_MAX_TOKEN_EXPERTS = ROUTING_MAX_TOKENS * 256


@dataclass(frozen=True)
class TrainArrays:
    """Everything the planner reports, one entry per configuration.

    Attributes:
        configs: the configurations evaluated.
        memory / time / power: the parts (see their modules).
        fits: total memory ≤ the GPU's HBM.
        headroom_bytes: HBM minus total memory (negative when it does not fit).
        tokens_per_s: cluster throughput; tflops_per_gpu: model TFLOP/s per GPU; mfu / hfu: model and
            hardware FLOP utilization against the BF16 dense peak.
        energy_per_token_j: GPU energy per trained token (facility overhead not included).
        cost_per_token_usd: GPU-hours and facility energy per trained token.
        imbalance: MoE routing imbalance used for each configuration (1 for dense models).
    """

    configs: ConfigArrays
    memory: MemoryArrays
    time: TimeArrays
    power: PowerArrays
    fits: NDArray[np.bool_]
    headroom_bytes: F64
    tokens_per_s: F64
    tflops_per_gpu: F64
    mfu: F64
    hfu: F64
    energy_per_token_j: F64
    cost_per_token_usd: F64
    imbalance: F64


def routing_imbalance(
    arch: ModelArch,
    ep: NDArray[np.int64],
    gpus_per_node: int,
    zipf_s: float,
    seed: int,
    measured: float | None = None,
) -> F64:
    """MoE imbalance (hottest EP rank's load / mean) per configuration, one routing simulation per distinct
    ``ep`` (:func:`twinloop.model.moe.route_tokens`, seeded); 1 for dense models and ``ep == 1``.
    ``measured`` (e.g. the worst load factor of a :mod:`twinloop.plan.moe_study` run) replaces the static
    sample for every ``ep > 1``.
    """
    imbalance = np.ones(ep.shape, dtype=np.float64)
    if not arch.is_moe:
        return imbalance
    if measured is not None:
        return np.where(ep > 1, measured, 1.0)
    max_tokens = min(ROUTING_MAX_TOKENS, ROUTING_MAX_TOKEN_EXPERTS // arch.n_routed_experts)
    for e in np.unique(ep):
        tokens = int(min(int(e) * ROUTING_TOKENS_PER_RANK, max_tokens))
        per_node = int(np.gcd(int(e), gpus_per_node))
        load = route_tokens(arch, tokens, int(e), zipf_s=zipf_s, ranks_per_node=per_node, seed=seed)
        imbalance[ep == e] = load.imbalance
    return imbalance


def evaluate(
    w: TrainWorkload,
    c: ConfigArrays,
    topo: Topology,
    power_model: GpuPowerModel,
    global_batch: int,
    power_limit_w: F64 | float,
    prices: Prices,
    imbalance: F64 | float = 1.0,
    eff: TrainEfficiency = DEFAULT_EFFICIENCY,
) -> TrainArrays:
    """Memory, step time, power, energy and cost of every configuration in ``c``.

    Args:
        w: model-side scalars.
        c: configurations.
        topo: link tiers.
        power_model: the GPU's power model.
        global_batch: sequences per step.
        power_limit_w: per-GPU limit (scalar or per configuration).
        prices: GPU-hour and energy prices with the PUE.
        imbalance: MoE routing imbalance (scalar or per configuration).
        eff: efficiency factors.
    """
    mem = memory_per_gpu(w, c, global_batch, imbalance, eff)
    t, p = time_and_power(w, c, topo, power_model, global_batch, power_limit_w, imbalance, eff)
    gpus = (c.tp * c.pp * c.dp * c.cp).astype(np.float64)
    tokens_step = float(global_batch * w.seq_len)
    tokens_per_s = tokens_step / t.step_s
    model_flops_per_gpu = tokens_step * 3 * w.fwd_model_flops / gpus
    tflops = model_flops_per_gpu / t.step_s / 1e12
    peak = w.peak_bf16_flops_per_s
    energy_per_token = p.energy_per_step_j * gpus / tokens_step
    gpu_hours_per_token = gpus * t.step_s / 3600.0 / tokens_step
    cost = cost_usd(gpu_hours_per_token, energy_per_token, prices)
    hbm = w.hbm_capacity_bytes
    return TrainArrays(
        configs=c,
        memory=mem,
        time=t,
        power=p,
        fits=mem.total <= hbm,
        headroom_bytes=hbm - mem.total,
        tokens_per_s=tokens_per_s,
        tflops_per_gpu=tflops,
        mfu=tflops * 1e12 / peak,
        hfu=t.hardware_flops / t.step_s / peak,
        energy_per_token_j=energy_per_token,
        cost_per_token_usd=np.asarray(cost, dtype=np.float64),
        imbalance=np.broadcast_to(np.asarray(imbalance, dtype=np.float64), t.step_s.shape).copy(),
    )
