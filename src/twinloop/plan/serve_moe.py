"""MoE routing in the serving planner: the routed slowest-rank step beside the static imbalance factor.

Without routing, ``plan serve`` times an MoE replica as if every EP rank carried the same load (a static
factor, 1 by default: ``--moe-imbalance``). With ``--router`` (or ``--routing FILE`` from
``plan moe --out``) the routing simulator (:mod:`twinloop.model.routing`) runs the serving batch shape —
decode: one micro-batch of the operating batch (``decode batch / pp`` tokens) per step; prefill: one prefill
batch (``prompts per batch × prompt tokens``, at most :data:`ROUTING_TOKEN_CAP` simulated, the load ratios
carry over) — on the same drifting stream with a hot-expert burst as ``plan moe``. Each step's per-rank
traffic (:class:`~twinloop.plan.serve_moe_load.MoeLoad`: routed copies, distinct experts read, all-to-all
copies sent and received over NVLink and the network) goes through the serving roofline, and the slowest
rank sets the step.

The batch, the queue and every other part of the plan stay at the static plan's operating point: a routed
step changes the decode round (TPOT = static TPOT + routed round − static round) and the prefill batch
(TTFT likewise), not the batch the strategy chose. The stream is a generative guess (see
:mod:`twinloop.model.routing.workload`), not a trained router's trace.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from twinloop.errors import InputError
from twinloop.model.arch import ModelArch
from twinloop.model.routing import AffinityStream, DriftSpec, Router, make_router
from twinloop.model.routing import placement as pl
from twinloop.model.routing.simulator import StepMetrics, simulate, warmup_choices
from twinloop.plan.batching import BatchingResult, Workload
from twinloop.plan.serve_moe_load import MoeLoad

if TYPE_CHECKING:
    from twinloop.plan.serve_request import ServeRequest
    from twinloop.plan.serve_stages import ReplicaSteps

F64 = NDArray[np.float64]

#: Most tokens one simulated routing step holds (the router sees tokens × experts float32 logits: 16 Ki × 256
#: experts = 16 MB); a larger prefill batch is simulated at this size and its load ratios carried over.
ROUTING_TOKEN_CAP = 16_384
#: Tokens per step of the warm-up sample an affinity placement is fitted on (a profile taken before serving).
PLACEMENT_FIT_TOKENS = 4096


def validate_routing(req: ServeRequest, arch: ModelArch) -> None:
    """Raise :class:`InputError` when ``--router`` / ``--routing`` cannot apply to this request."""
    flag = "--router" if req.router is not None else "--routing"
    if not arch.is_moe:
        raise InputError(flag, "", f"{arch.name} is dense (no routed experts): routing applies to MoE models only")
    if req.ep < 2:
        raise InputError(
            "--ep", "", f"{flag} needs expert parallelism (ep >= 2): with ep=1 every GPU holds a shard of every "
            "expert, so no rank is hotter than another",
        )  # fmt: skip
    if req.draft_model is not None:
        raise InputError("--draft-model", "", f"speculative decoding is not timed under {flag} (allowed: no draft)")
    if req.placement not in pl.PLACEMENTS:
        raise InputError(
            "--placement", "", f"unknown placement {req.placement!r} (allowed: {', '.join(pl.PLACEMENTS)})"
        )
    if req.router is not None and req.routing_file is None:  # with a file, --router only picks its row
        make_router(req.router)  # unknown names fail here, before any planning


def serving_drift(tokens: int, steps: int, burst_share: float = 0.2) -> DriftSpec:
    """The ``plan moe`` stream at ``tokens`` per step: one drift period over the run, a hot-expert burst over
    its third quarter (``burst_share`` of the tokens pulled to one expert; 0: no burst).
    """
    return DriftSpec(
        tokens_per_step=tokens, drift_period_steps=steps, burst_start_step=steps // 2,
        burst_steps=max(1, steps // 4) if burst_share > 0 else 0, burst_share=burst_share,
    )  # fmt: skip


def simulate_routing(
    arch: ModelArch,
    ep: int,
    ranks_per_node: int,
    router: str | Router,
    placement: str,
    steps: int,
    tokens: int,
    seed: int = 0,
    burst_share: float = 0.2,
) -> StepMetrics:
    """Route ``steps`` steps of ``tokens`` tokens of ``arch``'s experts on ``ep`` ranks (seeded, repeatable).

    Args:
        arch: an MoE model.
        ep: EP group size (ranks).
        ranks_per_node: ranks of the group on one node.
        router: a registry name or a router object.
        placement: ``contiguous`` or ``affinity`` (fitted on a warm-up sample of the same stream at
            :data:`PLACEMENT_FIT_TOKENS` tokens per step).
        steps: routing steps to run.
        tokens: tokens per step.
        seed: the stream's seed.
        burst_share: the hot-expert burst (0: none).
    """
    e, k = arch.n_routed_experts, arch.experts_per_token
    stream = AffinityStream.create(serving_drift(tokens, steps, burst_share), e, seed)
    if placement == "contiguous":
        where = pl.contiguous(e, ep, ranks_per_node)
    else:
        fit = AffinityStream.create(dataclasses.replace(stream.spec, tokens_per_step=PLACEMENT_FIT_TOKENS), e, seed)
        co, load = pl.coactivation(warmup_choices(fit, k), e)
        where = pl.affinity(co, load, ep, ranks_per_node)
    r = make_router(router) if isinstance(router, str) else router
    return simulate(r, stream, where, k, steps, arch.node_limit)


def moe_load(m: StepMetrics, tokens: int, top_k: int, ranks_per_node: int) -> MoeLoad:
    """Per-(step, rank) :class:`MoeLoad` of a routing run of ``tokens`` tokens per step (ratios per token)."""
    ep = m.rank_load.shape[1]
    r = m.ranks

    def per_token(copies: NDArray[np.int64]) -> F64:
        return np.asarray(copies / max(tokens, 1), dtype=np.float64)

    return MoeLoad(
        load_factor=np.asarray(m.rank_load / (tokens * top_k / ep), dtype=np.float64),
        touched=np.asarray(r.touched * ep, dtype=np.float64),
        send_intra=per_token(r.send_intra), send_inter=per_token(r.send_inter),
        recv_intra=per_token(r.recv_intra), recv_inter=per_token(r.recv_inter),
        ranks_per_node=ranks_per_node,
    )  # fmt: skip


def _stats(x: F64) -> dict[str, float]:
    p50, p99 = np.percentile(x, [50, 99])
    return {"p50": float(p50), "p99": float(p99), "max": float(np.max(x)), "mean": float(np.mean(x))}


def _traffic(m: StepMetrics, load: MoeLoad, tokens: float, bytes_per_copy: float, copies: float) -> dict[str, Any]:
    """Routing figures of one phase: hottest-rank load and all-to-all bytes (one layer), drops, quality."""
    assert load.send_intra is not None and load.recv_intra is not None
    assert load.send_inter is not None and load.recv_inter is not None
    intra = np.max(np.maximum(load.send_intra, load.recv_intra), axis=-1) * tokens * bytes_per_copy
    inter = np.max(np.maximum(load.send_inter, load.recv_inter), axis=-1) * tokens * bytes_per_copy
    return {
        "load_factor_max": _stats(np.max(np.asarray(load.load_factor), axis=-1)),
        "a2a_intra_bytes_slowest_rank": _stats(intra),
        "a2a_inter_bytes_slowest_rank": _stats(inter),
        "dropped_share": float(m.dropped.sum() / copies),
        "redirected_share": float(m.redirected.sum() / copies),
        "quality": float(m.quality.mean()),
        "served_true": float(m.served_true.mean()),
    }


def routed_serving(
    req: ServeRequest,
    arch: ModelArch,
    steps: ReplicaSteps,
    result: BatchingResult,
    wl: Workload,
    warnings: list[str],
) -> dict[str, Any]:
    """The routed decode/prefill steps, TPOT and TTFT per routing step, beside the static plan's (JSON-able).

    Args:
        req: the request (router, placement, steps, seed or routing file).
        arch: the model.
        steps: the static plan's step model.
        result: the static plan's batching result (its operating point).
        wl: the workload.
        warnings: the plan's warnings (appended to).
    """
    from twinloop.plan.serve_moe_file import load_routing_file
    from twinloop.plan.serve_stages import DETOKENIZE_S_PER_TOKEN, TOKENIZE_S_PER_TOKEN

    roof = steps.roof
    rpn = math.gcd(req.ep, roof.gpu.gpus_per_node)
    b, ctx = max(result.decode_batch, 1.0), wl.decode_context_mean
    n_pre, p_mean = result.prefill_prompts_per_batch, wl.prompt_mean
    dec_tokens = max(1, round(b / roof.pp))
    pre_tokens = max(1, min(round(n_pre * p_mean), ROUTING_TOKEN_CAP))
    if req.routing_file is not None:
        source, dec_m, dec_tokens, pre_m, pre_tokens, names = load_routing_file(req, arch, rpn, warnings)
    else:
        names = (req.router or "", req.placement)
        run = (arch, req.ep, rpn, names[0], req.placement, req.routing_steps)
        dec_m = simulate_routing(*run, dec_tokens, req.routing_seed, req.routing_burst_share)
        pre_m = simulate_routing(*run, pre_tokens, req.routing_seed, req.routing_burst_share)
        source = "simulated"
    k = arch.experts_per_token
    dec_load, pre_load = moe_load(dec_m, dec_tokens, k, rpn), moe_load(pre_m, pre_tokens, k, rpn)
    dec_gpu = np.max(dataclasses.replace(roof, moe=dec_load).decode(b, ctx).time_s, axis=-1)
    dec_s = np.asarray(steps.decode_total_s(dec_gpu, b, ctx), dtype=np.float64)
    dec_static = steps.decode_s(b, ctx)
    pre_s = np.max(dataclasses.replace(roof, moe=pre_load).prefill(p_mean, n_pre).time_s, axis=-1)
    pre_static = float(roof.prefill(p_mean, n_pre).time_s)
    ttft_static = result.ttft_s + p_mean * TOKENIZE_S_PER_TOKEN + DETOKENIZE_S_PER_TOKEN
    tpot, ttft = result.tpot_s + (dec_s - dec_static), ttft_static + (pre_s - pre_static)
    per_copy = arch.hidden * (roof.policy.bytes("moe_dispatch") + roof.policy.bytes("moe_combine"))
    n = dec_m.rank_load.shape[0]
    return {
        "source": source, "router": names[0], "placement": names[1], "steps": n, "seed": req.routing_seed,
        "burst_share": req.routing_burst_share if source == "simulated" else None,
        "decode_tokens_per_step": dec_tokens, "prefill_tokens_per_step": pre_tokens,
        "static": {
            "moe_imbalance": req.moe_imbalance, "decode_step_s": dec_static, "tpot_s": result.tpot_s,
            "prefill_step_s": pre_static, "ttft_s": ttft_static,
        },
        "routed": {
            "decode_step_s": _stats(dec_s), "tpot_s": _stats(tpot),
            "prefill_step_s": _stats(pre_s), "ttft_s": _stats(ttft),
        },
        "decode": _traffic(dec_m, dec_load, b / roof.pp, per_copy, n * dec_tokens * k),
        "prefill": _traffic(pre_m, pre_load, n_pre * p_mean, per_copy, n * pre_tokens * k),
        "per_step": {
            "decode_step_s": dec_s.tolist(), "tpot_s": tpot.tolist(), "prefill_step_s": pre_s.tolist(),
            "ttft_s": ttft.tolist(), "burst": dec_m.burst.tolist(),
        },
    }  # fmt: skip
