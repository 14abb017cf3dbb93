"""Training step time, vectorized over arrays of configurations.

One micro-batch on the heaviest pipeline stage (``v·⌈L/(pp·v)⌉`` layers + LM head) takes

* compute: forward GEMMs at the policy dtype's peak × ``gemm`` efficiency (attention core at the flash
  efficiency, or as GEMMs when unfused), ×3 for forward + backward, plus recomputation (full: the layers'
  forward again; selective: the attention core's forward, or under DeepSeek-V3's scheme the MLA
  up-projections' forward, :mod:`twinloop.plan.recompute`);
* element-wise work, memory-bound: ``elementwise_hbm_passes`` × the activation bytes the layers store /
  usable HBM bandwidth (full recompute repeats the forward third; selective the attention-core third, or
  under DeepSeek-V3's scheme the forward third of the recomputed norm and SwiGLU outputs);
* TP/SP communication: per layer 2 all-reduces forward and 2 backward (with SP: reduce-scatter +
  all-gather pairs, the same ring volume), 2 more with full recompute; ``tp_comm_exposed`` of it exposed;
* CP ring attention: ``cp-1`` K/V exchanges forward, twice that backward, hidden behind the attention core;
* EP all-to-all per MoE layer: dispatch (``moe_dispatch`` dtype) + combine (``moe_combine``), forward and
  backward (+ forward again with full recompute), scaled by the routing imbalance; each of a token's
  ``k`` copies is counted (no per-rank deduplication: an upper bound on the volume);
* pipeline point-to-point: ``2·v`` sends of the stage boundary activation (``/tp``: scatter-gather).

A step is ``m + (pp-1)/v`` micro-batch times (1F1B with ``v`` interleaved chunks: bubble ``(pp-1)/(v·m)``)
plus the exposed data-parallel gradient sync (overlapped with the last micro-batch's backward except its
last gradient bucket, Megatron-Core's default size; ZeRO-3 gathers weights every micro-batch, overlapped
with compute) plus the
optimizer step (memory-bound). Under DualPipe both carry twice the parameters over twice the ranks
(:mod:`twinloop.plan.dualpipe`). ``slowdown`` (≥ 1, from DVFS under a power limit) stretches compute.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from twinloop.plan import collectives as coll
from twinloop.plan import dualpipe, fp8_casts, nccl
from twinloop.plan import efficiency as effc
from twinloop.plan import gemm as gemm_mod
from twinloop.plan.collectives import Topology
from twinloop.plan.efficiency import DEFAULT_EFFICIENCY, TrainEfficiency
from twinloop.plan.memory import (
    activation_bytes_per_layer,
    fp8_weight_elems,
    micro_batches,
    params_per_gpu,
    stage_layers,
)
from twinloop.plan.parallel import ConfigArrays
from twinloop.plan.workload import TrainWorkload

F64 = NDArray[np.float64]

#: Share of a layer's element-wise HBM traffic that belongs to the forward pass (forward writes each stored
#: activation once, backward reads it and writes its gradient): the FLOP ratio 1 : 2, same convention.
ELEMENTWISE_FORWARD_SHARE = 1.0 / 3.0


@dataclass(frozen=True)
class TimeArrays:
    """Per-step times (seconds, per GPU on the critical path), one entry per configuration.

    Attributes:
        step_s: the whole optimizer step.
        compute_s: GEMMs + attention + element-wise over all micro-batches (after ``slowdown``).
        gemm_share: compute-bound share of ``compute_s`` (the rest is memory-bound element-wise work).
        tp_comm_s / cp_comm_s / ep_comm_s / pp_p2p_s: exposed communication over all micro-batches.
        bubble_s: pipeline fill and drain.
        dp_sync_s / dp_exposed_s: data-parallel (ZeRO) communication, total and exposed.
        optimizer_s: the optimizer update.
        overlapped_s: communication hidden behind compute (DP, CP and the non-exposed TP/EP/PP shares).
        micro_batch_s: one micro-batch on the heaviest stage.
        hardware_flops: FLOPs one GPU executes per step (with recomputation).
        tensor_ideal_s: the step's tensor-core work (GEMMs and attention core, with recomputation) at 100 % of its
            dtype's peak at f_max: what the compute phase's tensor activity is measured against
            (:mod:`twinloop.plan.activity`).
    """

    step_s: F64
    compute_s: F64
    gemm_share: F64
    tp_comm_s: F64
    cp_comm_s: F64
    ep_comm_s: F64
    pp_p2p_s: F64
    bubble_s: F64
    dp_sync_s: F64
    dp_exposed_s: F64
    optimizer_s: F64
    overlapped_s: F64
    micro_batch_s: F64
    hardware_flops: F64
    tensor_ideal_s: F64


@dataclass(frozen=True)
class GemmFactors:
    """Relative GEMM efficiency (× ``eff.gemm``) of each GEMM class, one entry per configuration."""

    proj: F64
    ffn: F64
    shared: F64
    experts: F64
    head: F64


def _mix(
    dtype: str,
    m: F64,
    parts: list[tuple[float, F64 | float, F64 | float]],
    scaling: str,
    machine: gemm_mod.GemmMachine = gemm_mod.REFERENCE_MACHINE,
) -> F64:
    """FLOP-weighted harmonic mean of the relative efficiencies of GEMMs ``(flop weight, N, K)`` with ``M=m``."""
    sc: gemm_mod.Fp8Scaling = "block" if scaling == "block" else "tensor"
    total = sum(wt for wt, _, _ in parts)
    inv = np.zeros_like(m)
    for wt, n, k in parts:
        inv = inv + wt / gemm_mod.relative_efficiency(dtype, m, n, k, sc, machine)
    return np.asarray(total / inv, dtype=np.float64)


def gemm_factors(w: TrainWorkload, c: ConfigArrays, tokens: F64, eff: TrainEfficiency) -> GemmFactors:
    """Shape/dtype efficiency of the layer GEMMs for every configuration (see :mod:`twinloop.plan.gemm`).

    ``M`` is the micro-batch's tokens (the whole TP group's, as SP gathers them); TP shards the N of the
    column-parallel GEMMs (QKV, FFN up/gate, LM head) and the K of the row-parallel ones (output, FFN down).
    A routed expert sees ``tokens·k·ep / E`` tokens per micro-batch (its EP group's share of the routed
    copies). Backward GEMMs permute (M, N, K); the forward shape stands in. The GEMMs run on the plan's GPU
    (its peak at the datasheet clock and its usable HBM bandwidth: skinny GEMMs are bandwidth-bound). With
    ``eff.gemm_shape`` off every factor is 1 (the single-constant model).
    """
    ones = np.ones_like(tokens)
    if not eff.gemm_shape:
        return GemmFactors(ones, ones, ones, ones, ones)
    tp = c.tp.astype(np.float64)
    h, sc = float(w.hidden), eff.fp8_scaling
    up = 2.0 if w.gated else 1.0
    mach = gemm_mod.GemmMachine(w.peak_bf16_flops_per_s, eff.hbm * w.hbm_bytes_per_s)

    def ffn(dtype: str, m: F64, f: float) -> F64:
        if f <= 0:
            return ones
        return _mix(dtype, m, [(up * f, up * f / tp, h), (f, h, f / tp)], sc, mach)

    qkv = (w.q_dim + w.kv_dim / 2, (w.q_dim + w.kv_dim) / tp, h)
    proj = _mix(w.dtype_proj, tokens, [qkv, (w.o_dim, h, w.o_dim / tp)], sc, mach)
    experts = ones
    if w.is_moe and w.n_routed_experts:
        per_expert = tokens * w.experts_per_token * c.ep / w.n_routed_experts
        experts = ffn(w.dtype_experts, per_expert, float(w.moe_ffn_hidden))
    head_sc: gemm_mod.Fp8Scaling = "block" if sc == "block" else "tensor"
    head = gemm_mod.relative_efficiency(w.dtype_head, tokens, w.vocab / tp, h, head_sc, mach)
    return GemmFactors(
        proj=proj,
        ffn=ffn(w.dtype_ffn, tokens, float(w.ffn_hidden)),
        shared=ffn(w.dtype_experts, tokens, float(w.shared_ffn_hidden)),
        experts=experts,
        head=np.asarray(head, dtype=np.float64),
    )


def _link_for(topo: Topology, n: NDArray[np.int64], stride: NDArray[np.int64]) -> tuple[F64, F64]:
    """(ranks per node, 1 where the group is entirely inside a node) for groups of ``n`` at ``stride``."""
    k = np.asarray(topo.ranks_per_node(n.astype(np.float64), stride.astype(np.float64)))
    return k, (k >= n).astype(np.float64)


def _topology(topo: Topology, eff: TrainEfficiency) -> Topology:
    """``topo`` with the efficiency factors' link efficiencies and collective model (NCCL-like or α–β)."""
    intra = dataclasses.replace(topo.intra, efficiency=eff.nvlink)
    inter = dataclasses.replace(topo.inter, efficiency=eff.network)
    algorithms: Literal["alpha-beta", "nccl"] = "nccl" if eff.collectives == "nccl" else "alpha-beta"
    return Topology(intra, inter, topo.gpus_per_node, algorithms)


@dataclass(frozen=True)
class _Stage:
    """What every stage of one micro-batch on the heaviest pipeline stage needs."""

    w: TrainWorkload
    c: ConfigArrays
    topo: Topology
    eff: TrainEfficiency
    imbalance: F64 | float
    layers: F64
    lf: F64
    tokens: F64
    full: NDArray[np.bool_]
    selective: NDArray[np.bool_]


@dataclass(frozen=True)
class _Compute:
    gemm: F64
    ideal: F64
    attn: F64
    compute_mb: F64
    hbm_bytes_per_s: float


def _tensor_time(st: _Stage, g: GemmFactors, gemm_eff: float, attn_eff: float) -> tuple[F64, F64]:
    """(tensor-core time, forward attention-core time) of one micro-batch at the given efficiencies: forward,
    backward and the recomputation the config asks for. With every factor 1 it is the ideal (peak) time.
    """
    w, tokens, lf = st.w, st.tokens, st.lf
    tp = st.c.tp
    layer_gemm = tokens / tp * lf * (w.fwd_attn_proj_s / g.proj + w.fwd_dense_ffn_s / g.ffn + w.fwd_shared_s / g.shared)
    layer_gemm = layer_gemm / gemm_eff + tokens / tp * lf * st.imbalance * w.fwd_experts_s / (gemm_eff * g.experts)
    head_gemm = tokens / tp * w.fwd_head_s / (gemm_eff * g.head)
    attn = tokens / tp * lf * w.fwd_attn_s / attn_eff
    unfused = 1.0 if w.attention_kernel == "unfused" else 0.0
    # selective: Megatron recomputes the attention core; DeepSeek-V3 the MLA up-projections (+ an unfused core)
    sel_gemm = attn
    if st.eff.recompute_scheme == "deepseek-v3":
        sel_gemm = tokens / tp * lf * w.fwd_ds_recompute_s / (gemm_eff * g.proj) + unfused * attn
    gemm = 3 * (layer_gemm + head_gemm + attn)
    gemm = gemm + np.where(st.full, layer_gemm + attn, np.where(st.selective, sel_gemm, 0.0))
    return np.asarray(gemm, dtype=np.float64), np.asarray(attn, dtype=np.float64)


def _compute(st: _Stage) -> _Compute:
    """GEMMs, attention and memory-bound element-wise work of one micro-batch (before DVFS ``slowdown``)."""
    w, c, eff, tokens, layers, full, selective = st.w, st.c, st.eff, st.tokens, st.layers, st.full, st.selective
    tp = c.tp
    attn_eff = eff.flash_attention if w.attention_kernel == "flash" else eff.gemm
    g = gemm_factors(w, c, tokens, eff)  # each GEMM class at its own shape's efficiency
    gemm, attn = _tensor_time(st, g, eff.gemm, attn_eff)
    one = np.ones_like(tokens)
    ideal, _ = _tensor_time(st, GemmFactors(one, one, one, one, one), 1.0, 1.0)
    deepseek = eff.recompute_scheme == "deepseek-v3"
    hbm = eff.hbm * w.hbm_bytes_per_s
    act_layer = activation_bytes_per_layer(w, c)
    scores = c.micro_batch * (w.seq_len / c.cp) * w.seq_len * w.n_heads / tp * w.act_score_bytes
    output_bytes = 2 * w.bytes_act * tokens * (w.hidden + w.vocab) / tp
    ew = eff.elementwise_hbm_passes * (layers * act_layer + output_bytes) / hbm
    # FP8 casts, amax and transposes of every quantised input (forward) and output gradient (backward)
    fx = w.fp8
    if fx.any:
        b_fused, b_unfused = fp8_casts.cast_bytes_per_element(eff.fp8_amax, eff.fp8_fused_casts)
        tpf = tp.astype(np.float64)
        g_fused, g_unfused = fp8_casts.sp_gathered_bytes_per_element(eff.fp8_amax, eff.fp8_fused_casts, tpf)
        sp_repl = (g_fused * fx.fused_repl + g_unfused * fx.unfused_repl) / tpf  # SP: local shard + gathered ᵀ
        no_sp = b_fused * fx.fused_repl + b_unfused * fx.unfused_repl  # replicated on every TP rank
        repl = np.where((c.sequence_parallel == 1) & (tp > 1), sp_repl, no_sp)
        per_token = repl + (b_fused * fx.fused_shard + b_unfused * fx.unfused_shard) / tpf
        ew = ew + tokens * layers * per_token / hbm
        # ZeRO-3 frees the gathered weights after use, so TE cannot keep their FP8 copies across micro-batches:
        # the gathered weights are cast again at each gather (forward and backward)
        w_cast = fp8_casts.weight_cast_bytes_per_element(eff.fp8_amax) * fp8_weight_elems(w, c) / hbm
        ew = ew + np.where(c.zero == 3, 2 * w_cast, 0.0)
    ew_extra = np.where(full, 1.0, 0.0) * ELEMENTWISE_FORWARD_SHARE * ew
    ew_scores = eff.elementwise_hbm_passes * layers * scores / hbm
    sel_ew = ew_scores
    if deepseek:  # the recomputed norm outputs (replicated unless SP) and SwiGLU outputs (TP-sharded)
        repl_div = np.where(c.sequence_parallel == 1, tp, 1)
        ds_bytes = tokens * layers * (w.ds.recompute_repl_bytes / repl_div + w.ds.recompute_shard_bytes / tp)
        sel_ew = sel_ew + eff.elementwise_hbm_passes * ds_bytes / hbm
    ew_extra += np.where(selective, 1.0, 0.0) * ELEMENTWISE_FORWARD_SHARE * sel_ew
    # the stack's FP8 path beyond its kernels' time: neither tensor work nor clock-bound (efficiency.py)
    fp8_gemms = any(gemm_mod.curve_name(d) == "fp8" for d in (w.dtype_proj, w.dtype_ffn, w.dtype_experts))
    stretch = eff.fp8_step_stretch if fp8_gemms else 1.0
    compute_mb = (gemm + ew + ew_extra) * stretch
    return _Compute(gemm=gemm, ideal=ideal, attn=attn, compute_mb=compute_mb, hbm_bytes_per_s=hbm)


def _tp_comm(st: _Stage) -> F64:
    """Tensor/sequence-parallel collectives of one micro-batch (TP stays inside a node), before overlap.

    Without SP Megatron all-reduces the activation; with SP it reduce-scatters and all-gathers it (the same
    ring volume). The α–β model charges both as all-reduces; the NCCL model charges what runs: an all-reduce
    may use NVLS, the reduce-scatter/all-gather pair the ring (NVLS for them is not modelled).
    """
    w, c = st.w, st.c
    tp_bytes = st.tokens * w.hidden * w.bytes_tp_comm
    tpf = c.tp.astype(np.float64)
    k_tp, _ = _link_for(st.topo, c.tp, np.ones_like(c.tp))
    one = np.asarray(coll.hierarchical_all_reduce_s(tp_bytes, tpf, k_tp, st.topo))
    if st.topo.algorithms == "nccl":
        pair = 2 * np.asarray(coll.hierarchical_reduce_scatter_s(tp_bytes, tpf, k_tp, st.topo))
        one = np.where(c.sequence_parallel == 1, pair, one)
    return np.where(c.tp > 1, st.layers * (4 + 2 * st.full) * one, 0.0)


def _cp_comm(st: _Stage, attn: F64) -> tuple[F64, F64]:
    """Context-parallel ring attention K/V exchanges of one micro-batch: (total, exposed beyond the core)."""
    w, c, topo, full = st.w, st.c, st.topo, st.full
    kv_heads = np.maximum(w.n_kv_heads / c.tp, 1.0)
    kv_chunk = 2 * st.tokens * kv_heads * w.head_dim * w.bytes_act
    _, inside_cp = _link_for(topo, c.cp, c.tp)
    hop = np.where(inside_cp == 1, coll.p2p_s(kv_chunk, topo.intra), coll.p2p_s(kv_chunk, topo.inter))
    cp_total = np.where(c.cp > 1, st.layers * (3 + full) * (c.cp - 1) * hop, 0.0)
    attn_time = attn * (3 + full + st.selective) / 3
    return cp_total, np.maximum(cp_total - attn_time, 0.0)


def _ep_comm(st: _Stage) -> F64:
    """Expert-parallel dispatch/combine all-to-alls of one micro-batch, before overlap."""
    w, c, topo = st.w, st.c, st.topo
    if not w.is_moe:
        return np.zeros_like(st.tokens)
    k_ep, _ = _link_for(topo, c.ep, c.tp)
    epf = c.ep.astype(np.float64)

    def a2a(bytes_per_elem: float) -> F64:
        one = st.tokens * w.hidden * st.imbalance * bytes_per_elem
        if st.eff.a2a_dedup:
            copies = np.full_like(one, float(w.experts_per_token))
            t = coll.dedup_all_to_all_s(one, copies, epf, k_ep, topo, w.node_limit)
        else:
            t = coll.hierarchical_all_to_all_s(one * w.experts_per_token, epf, k_ep, topo)
        return np.asarray(t, dtype=np.float64)

    fwd = a2a(w.bytes_dispatch) + a2a(w.bytes_combine)
    bwd = 2 * a2a(w.bytes_combine)
    return np.where(c.ep > 1, w.n_moe_layers * st.lf * (fwd * (1 + st.full) + bwd), 0.0)


def _pp_comm(st: _Stage) -> F64:
    """Pipeline sends of one micro-batch (scatter-gather: each TP rank sends 1/tp of the boundary activation)."""
    w, c, topo = st.w, st.c, st.topo
    p2p_bytes = st.tokens * w.hidden * w.bytes_act / c.tp
    _, inside_pp = _link_for(topo, c.pp, c.tp * c.cp * c.dp)
    p2p_one = np.where(inside_pp == 1, coll.p2p_s(p2p_bytes, topo.intra), coll.p2p_s(p2p_bytes, topo.inter))
    return np.where(c.pp > 1, 2 * c.interleave * p2p_one, 0.0)


def _dp_params(st: _Stage) -> tuple[F64, F64, NDArray[np.int64]]:
    """(non-expert, expert) parameters per GPU and each parameter's data-parallel group size, with DualPipe's
    second copy counted as a data-parallel replica (:mod:`twinloop.plan.dualpipe`).
    """
    dense, experts = params_per_gpu(st.w, st.c)
    copies = dualpipe.param_copies(st.c, st.eff.pipeline_schedule)
    return dense * copies, experts * copies, st.c.dp * st.c.cp * copies.astype(np.int64)


def dp_last_bucket_fraction(params_per_gpu: F64, n_dp: NDArray[np.int64], bucket_params: float) -> F64:
    """Share of the data-parallel sync in its last gradient bucket, which backward cannot hide.

    Megatron-Core's default bucket is ``max(40M, 1M × dp_size)`` parameters
    (:data:`twinloop.plan.efficiency.DP_BUCKET_PARAMS`); a GPU holding fewer parameters has one bucket.
    """
    bucket = np.maximum(bucket_params, effc.DP_BUCKET_PARAMS_PER_RANK * n_dp.astype(np.float64))
    return np.asarray(np.clip(bucket / np.maximum(params_per_gpu, 1.0), 0.0, 1.0), dtype=np.float64)


def _dp_sync(st: _Stage, m: F64, busy_mb: F64) -> tuple[F64, F64]:
    """Data-parallel gradient sync / ZeRO over a step: (total, exposed after overlap with ``busy_mb`` compute)."""
    w, c, topo, eff = st.w, st.c, st.topo, st.eff
    dense, experts, n_dp = _dp_params(st)
    n_edp = n_dp // c.ep
    k_dp, _ = _link_for(topo, n_dp, c.tp)
    k_edp, _ = _link_for(topo, n_edp, c.tp * c.ep)

    def sync(params: F64, n: NDArray[np.int64], k: F64) -> tuple[F64, F64, F64]:
        nf = n.astype(np.float64)
        ar = coll.hierarchical_all_reduce_s(params * w.bytes_dp_comm, nf, k, topo)
        rs = coll.hierarchical_reduce_scatter_s(params * w.bytes_dp_comm, nf, k, topo)
        ag = coll.hierarchical_reduce_scatter_s(params * w.bytes_weights, nf, k, topo)
        return np.asarray(ar), np.asarray(rs), np.asarray(ag)

    ar_d, rs_d, ag_d = sync(dense, n_dp, k_dp)
    ar_e, rs_e, ag_e = sync(experts, n_edp, k_edp)
    ar, rs, ag = ar_d + ar_e, rs_d + rs_e, ag_d + ag_e
    bwd_window, fwd_window = (2.0 / 3.0) * busy_mb, (1.0 / 3.0) * busy_mb
    last = dp_last_bucket_fraction(dense + experts, n_dp, eff.dp_bucket_params)
    z0 = np.maximum(last * ar, ar - bwd_window)
    z12 = np.maximum(last * rs, rs - bwd_window) + np.maximum(last * ag, ag - fwd_window)
    z3_total = m * (2 * ag + rs)
    z3 = np.maximum(last * z3_total, z3_total - m * busy_mb)
    total = np.select([c.zero == 0, c.zero == 3], [ar, z3_total], default=rs + ag)
    exposed = np.select([c.zero == 0, c.zero == 3], [z0, z3], default=z12)
    return np.where(n_dp > 1, total, 0.0), np.where(n_dp > 1, exposed, 0.0)


def _optimizer_s(st: _Stage, hbm_bytes_per_s: float) -> F64:
    """Adam update (memory-bound): read+write master and both moments, read grads, write weights; plus the
    per-step cast-transpose of the FP8 GEMM weights (TE casts them in the first micro-batch and keeps them for
    the step, :mod:`.fp8_casts`; under ZeRO-3 they are cast at every gather, charged per micro-batch).
    """
    w, c = st.w, st.c
    dense, experts, n_dp = _dp_params(st)
    shard = np.where(c.zero >= 1, dense / n_dp + experts / (n_dp // c.ep), dense + experts)
    opt_bytes = 2 * w.bytes_master + 4 * w.bytes_opt_state + w.bytes_grads + w.bytes_weights
    copies = dualpipe.param_copies(c, st.eff.pipeline_schedule)
    cast = fp8_weight_elems(w, c) * copies * fp8_casts.weight_cast_bytes_per_element(st.eff.fp8_amax)
    cast = np.where(c.zero == 3, 0.0, cast)  # ZeRO-3: cast at every gather instead (in the micro-batch)
    return np.asarray((shard * opt_bytes + cast) / hbm_bytes_per_s, dtype=np.float64)


def step_time(
    w: TrainWorkload,
    c: ConfigArrays,
    topo: Topology,
    global_batch: int,
    imbalance: F64 | float = 1.0,
    slowdown: F64 | float = 1.0,
    eff: TrainEfficiency = DEFAULT_EFFICIENCY,
) -> TimeArrays:
    """Step time of every configuration in ``c``.

    Args:
        w: model-side scalars.
        c: configurations.
        topo: link tiers; its tiers' own ``efficiency`` is ignored in favour of ``eff.nvlink``/``eff.network``,
            and ``eff.collectives`` picks the collective model.
        global_batch: sequences per step.
        imbalance: MoE routing imbalance (hottest EP rank / mean), stretches expert compute and all-to-all.
        slowdown: compute stretch from DVFS (1 = full clock).
        eff: efficiency factors.
    """
    layers = stage_layers(w.n_layers, c.pp, c.interleave)
    st = _Stage(
        w, c, _topology(topo, eff), eff, imbalance, layers, layers / w.n_layers,
        c.micro_batch * (w.seq_len / c.cp), c.recompute == 2, c.recompute == 1,
    )  # fmt: skip
    sigma = np.asarray(slowdown, dtype=np.float64)
    comp = _compute(st)
    tp_total, (cp_total, cp_mb), ep_total, pp_total = _tp_comm(st), _cp_comm(st, comp.attn), _ep_comm(st), _pp_comm(st)
    tp_mb, ep_mb, pp_mb = eff.tp_comm_exposed * tp_total, eff.ep_a2a_exposed * ep_total, eff.pp_p2p_exposed * pp_total

    micro = sigma * comp.compute_mb + tp_mb + cp_mb + ep_mb + pp_mb
    m = micro_batches(global_batch, c).astype(np.float64)
    bubble = np.where(c.pp > 1, eff.bubble_scale * (c.pp - 1) / c.interleave * micro, 0.0)
    dp_total, dp_exposed = _dp_sync(st, m, sigma * comp.compute_mb)
    optimizer = _optimizer_s(st, comp.hbm_bytes_per_s)

    step = m * micro + bubble + dp_exposed + optimizer
    overlapped = (dp_total - dp_exposed) + m * ((cp_total - cp_mb) + (tp_total - tp_mb) + (ep_total - ep_mb))
    overlapped += m * (pp_total - pp_mb)
    sel_flops = w.fwd_attn_flops
    if eff.recompute_scheme == "deepseek-v3":
        sel_flops = w.ds.recompute_gemm_flops + (w.fwd_attn_flops if w.attention_kernel == "unfused" else 0.0)
    rc_flops = np.where(st.full, w.fwd_model_flops - w.fwd_head_flops, np.where(st.selective, sel_flops, 0.0))
    hw_flops = float(global_batch * w.seq_len) * (3 * w.fwd_model_flops + rc_flops) / (c.tp * c.pp * c.dp * c.cp)
    return TimeArrays(
        step_s=step,
        compute_s=m * sigma * comp.compute_mb,
        gemm_share=comp.gemm / comp.compute_mb,
        tp_comm_s=m * tp_mb,
        cp_comm_s=m * cp_mb,
        ep_comm_s=m * ep_mb,
        pp_p2p_s=m * pp_mb,
        bubble_s=bubble,
        dp_sync_s=dp_total,
        dp_exposed_s=dp_exposed,
        optimizer_s=optimizer,
        overlapped_s=overlapped,
        micro_batch_s=micro,
        hardware_flops=hw_flops,
        tensor_ideal_s=m * comp.ideal,
    )


def collective_summary(w: TrainWorkload, c: ConfigArrays, topo: Topology, eff: TrainEfficiency) -> dict[str, object]:
    """The per-micro-batch TP collective and the per-step data-parallel gradient collective of the first
    configuration in ``c``: kind, message bytes, group, ranks per node, time of one call and (NCCL model) the
    algorithm/protocol chosen, for ``plan train --json``. With SP under the NCCL model the TP collective is a
    reduce-scatter (and an all-gather of the same cost), as :func:`step_time` charges it.
    """
    t = _topology(topo, eff)
    tp, dp = int(c.tp[0]), int(c.dp[0] * c.cp[0])
    k_tp = int(np.asarray(t.ranks_per_node(tp, 1)))
    k_dp = int(np.asarray(t.ranks_per_node(dp, tp)))
    tp_bytes = float(c.micro_batch[0] * (w.seq_len / c.cp[0]) * w.hidden * w.bytes_tp_comm)
    tp_kind = "reduce_scatter" if t.algorithms == "nccl" and int(c.sequence_parallel[0]) == 1 else "all_reduce"
    dense, _ = params_per_gpu(w, c)
    dp_kind = "all_reduce" if int(c.zero[0]) == 0 else "reduce_scatter"
    out: dict[str, object] = {"model": t.algorithms}
    for name, size, n, k, kind in (
        ("tp", tp_bytes, tp, k_tp, tp_kind),
        ("dp_grads", float(dense[0]) * w.bytes_dp_comm, dp, k_dp, dp_kind),
    ):
        if n <= 1:
            continue
        fn = coll.hierarchical_all_reduce_s if kind == "all_reduce" else coll.hierarchical_reduce_scatter_s
        entry: dict[str, object] = {"collective": kind, "bytes": size, "ranks": n, "ranks_per_node": k}
        entry["time_s"] = float(fn(size, float(n), float(k), t))
        if t.algorithms == "nccl":
            entry["algorithm"] = nccl.choice(size, n, k, t, kind)  # type: ignore[arg-type]
        out[name] = entry
    return out
