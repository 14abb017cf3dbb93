"""Serving roofline: time, bound and activity of prefill, decode, verify and mixed (chunked) iterations.

One iteration of a replica (``tp·pp`` GPUs) processes ``tokens`` new tokens:

* FLOPs per token from :func:`twinloop.model.flops.forward_flops_per_token` (linear in the context), each
  op class at its dtype's tensor rate (weights in the weight dtype run W8A8/FP8-style GEMMs; attention core
  in BF16), split evenly over the replica's GPUs;
* bytes: the weights the tokens touch (:func:`~twinloop.model.flops.decode_weight_bytes`: dense parts once,
  MoE experts as the expected distinct experts the batch routes to) plus the KV cache read (decode: every
  sequence's context) and written (every new token);
* communication (α–β, :mod:`twinloop.plan.collectives`): a TP all-reduce after attention and after each
  dense FFN, an EP all-to-all (dispatch + combine) or a TP all-reduce per MoE layer, PP activation sends;
* ``time = max(compute, memory) + communication`` per stage (no overlap: conservative), a pipeline round
  of ``pp`` micro-batches, plus a fixed per-iteration overhead (scheduler, launches).

DVFS: if the activity at full clock would exceed the power limit (TDP), the clock drops until it fits
(:class:`~twinloop.hardware.power.GpuPowerModel`) and the compute time stretches by ``f_max/f``.

All efficiency factors are named below with where their value comes from; GUESS marks the ones no
measurement fixed (docs/sections/calibration-plan-serve.md compares the result with published figures).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from twinloop.hardware.gpu import GpuSpec
from twinloop.hardware.power import MMA_MIN_ROWS, GpuPowerModel
from twinloop.model.arch import ModelArch
from twinloop.model.flops import (
    decode_weight_bytes,
    expected_experts_touched,
    forward_flops_per_token,
    weight_bytes,
)
from twinloop.model.kv_cache import kv_cache_bytes_per_token
from twinloop.model.params import param_counts
from twinloop.model.precision import PrecisionPolicy, bytes_per_element, get_policy
from twinloop.plan import collectives as coll
from twinloop.plan.activity import comm_activity
from twinloop.plan.efficiency import (
    DECODE_HBM_EFFICIENCY,
    FLASH_ATTENTION_EFFICIENCY,
    NETWORK_EFFICIENCY,
    NVLINK_EFFICIENCY,
)
from twinloop.plan.serve_moe_load import MoeLoad, routed_all_to_all_s
from twinloop.plan.serve_power import SERVE_DIE_TEMP_C
from twinloop.plan.train_power import DVFS_ITERATIONS

Arr = NDArray[np.float64]


@dataclass(frozen=True)
class ServeEfficiency:
    """Efficiency factors of the serving roofline (each 0..1 unless a time).

    Attributes:
        gemm: achieved fraction of the dense tensor peak for prefill/verify GEMMs. GUESS: serving prefill
            reaches ~60-75 % of peak (below training's fitted 0.78: shorter GEMMs, FP8 scaling overheads).
        attention: achieved fraction of peak for the attention core; FlashAttention-2 forward 50-73 % of A100
            peak (Dao 2023) → :data:`twinloop.plan.efficiency.FLASH_ATTENTION_EFFICIENCY`.
        hbm: achieved fraction of the HBM bandwidth in decode (weight and KV streaming). MEASURED on a real
            H100 SXM streaming Llama-3-8B's weights at batch 1-32 →
            :data:`twinloop.plan.efficiency.DECODE_HBM_EFFICIENCY` (was the GUESS 0.75).
        step_overhead_s: fixed time per iteration (CPU scheduling, sampling, kernel launches with CUDA graphs).
            GUESS: ~1-3 ms per iteration is commonly reported for vLLM/TensorRT-LLM.
        nvlink / network: NCCL bandwidth efficiencies (:mod:`twinloop.plan.efficiency`).
    """

    gemm: float = 0.70
    attention: float = FLASH_ATTENTION_EFFICIENCY
    hbm: float = DECODE_HBM_EFFICIENCY
    step_overhead_s: float = 1.5e-3
    nvlink: float = NVLINK_EFFICIENCY
    network: float = NETWORK_EFFICIENCY


DEFAULT_EFFICIENCY = ServeEfficiency()


@dataclass(frozen=True)
class PhaseRoofline:
    """One iteration of a phase on one replica (per-GPU figures; fields may be arrays for many prompts).

    Attributes:
        time_s: iteration (or round) time, s; ``compute_s``/``memory_s``/``comm_s``/``overhead_s`` its parts
            (compute after DVFS; the iteration takes ``pp·max(compute, memory) + pp·comm + overhead``).
        flops / bytes: per-GPU FLOPs and HBM bytes of the iteration.
        bound: ``compute``, ``memory`` or ``communication`` (largest part).
        arithmetic_intensity: flops / bytes (FLOP/byte); the GPU's ridge point is peak / bandwidth.
        tensor_active / sm_active / dram_active: DCGM-style activities 0..1 over the iteration.
        clock_mhz: SM clock after DVFS under the power limit.
        power_w: per-GPU board power during the iteration.
    """

    time_s: Any
    compute_s: Any
    memory_s: Any
    comm_s: Any
    overhead_s: float
    flops: Any
    bytes: Any
    tensor_active: Any
    sm_active: Any
    dram_active: Any
    clock_mhz: Any
    power_w: Any
    bound: str = field(default="")

    @property
    def arithmetic_intensity(self) -> float:
        """FLOPs per HBM byte of the iteration."""
        return float(np.mean(self.flops) / max(float(np.mean(self.bytes)), 1.0))


def serving_policy(weight_dtype: str, expert_dtype: str | None = None) -> PrecisionPolicy:
    """Precision for serving: layer GEMM weights (attention projections, dense and expert FFN) in
    ``weight_dtype``, routed and shared experts in ``expert_dtype`` when given (gpt-oss ships BF16 attention with
    MXFP4 experts); embedding, LM head, router and attention core stay BF16 unless the weights are wider.
    """
    base = get_policy("bf16")
    narrow = bytes_per_element(weight_dtype, "--weight-dtype") < 2.0  # narrower than BF16 (fp8, int8, fp4, mxfp4)
    classes = (
        ("attn_proj", "dense_ffn", "expert_ffn")
        if narrow
        else ("attn_proj", "dense_ffn", "expert_ffn", "lm_head", "embedding", "router")
    )
    table = {c: weight_dtype for c in classes}
    name = f"serve-{weight_dtype}"
    if expert_dtype is not None and expert_dtype != weight_dtype:
        table["expert_ffn"] = expert_dtype
        name += f"-experts-{expert_dtype}"
    return base.with_overrides(table, name=name)


def _comm_link(gpu: GpuSpec, eff: ServeEfficiency) -> coll.Topology:
    return coll.default_topology(gpu, intra_eff=eff.nvlink, inter_eff=eff.network)


@dataclass(frozen=True)
class ReplicaRoofline:
    """The roofline of one model replica; build it with :func:`build_roofline`.

    Attributes:
        arch / gpu: the model and the GPU kind.
        tp / pp / ep: tensor, pipeline and expert parallel degrees (ep divides tp).
        policy: the serving precision policy; kv_dtype: the KV-cache dtype.
        weight_bytes: bytes of one replica's weights; kv_bytes_per_token: all layers, whole replica.
        kv_bytes_per_token_per_gpu: what one GPU stores per token (TP shards KV heads; MLA's latent and
            KV heads beyond ``n_kv_heads`` ranks are replicated).
    """

    arch: ModelArch
    gpu: GpuSpec
    tp: int
    pp: int
    ep: int
    policy: PrecisionPolicy
    kv_dtype: str
    eff: ServeEfficiency
    weight_bytes: float
    kv_bytes_per_token: float
    kv_bytes_per_token_per_gpu: float
    # per-token ideal (100 % efficiency) tensor time of the whole replica's work on one GPU, s
    gemm_ideal_s_per_token: float
    attn_ideal_s_per_token_key: float
    flops_per_token: float
    attn_flops_per_token_key: float
    base_weight_read_bytes: float
    expert_bytes_per_layer_expert: float
    embedding_row_bytes: float
    topo: coll.Topology
    fp8_gemm_share: float = 0.0  # share of the ideal GEMM time in FP8 (weights FP8 tensor activity, power model)
    # the routed experts' part of gemm_ideal_s_per_token (what an EP rank's load factor stretches), s
    routed_gemm_ideal_s_per_token: float = 0.0
    # the EP ranks' load every iteration runs under (a static factor or routed traffic); None: balanced
    moe: MoeLoad | None = None

    @property
    def gpus(self) -> int:
        """GPUs of one replica."""
        return self.tp * self.pp

    def weights_read_bytes(self, tokens: Arr, touched: Arr | None = None) -> Arr:
        """Weight bytes one iteration of ``tokens`` tokens reads from HBM (whole replica); ``touched``: distinct
        experts per MoE layer (default: the uniform-routing expectation).
        """
        t = np.asarray(tokens, dtype=np.float64)
        if touched is None:
            touched = np.vectorize(lambda x: expected_experts_touched(self.arch, float(x)), otypes=[float])(t)
        rows = np.minimum(t, self.arch.vocab) * self.embedding_row_bytes
        return np.asarray(self.base_weight_read_bytes + touched * self.expert_bytes_per_layer_expert + rows)

    def _comm_s(self, tokens: Arr, moe: MoeLoad | None = None) -> Arr:
        """Communication of one stage for a micro-batch of ``tokens`` tokens, s (``moe``: the EP ranks' load)."""
        a = self.arch
        t = np.asarray(tokens, dtype=np.float64)
        act: Arr = t * (a.hidden * self.policy.bytes("tp_comm"))
        stage = 1.0 / self.pp
        out = np.zeros_like(t)
        if self.tp > 1:
            k = min(self.tp, self.gpu.gpus_per_node)
            ar = np.asarray(
                coll.hierarchical_all_reduce_s(act, np.full_like(act, self.tp), np.full_like(act, k), self.topo)
            )
            ffn_all_reduces = a.n_dense_layers + (a.n_moe_layers if self.ep == 1 else 0)
            out = out + ar * (a.n_dense_layers + a.n_moe_layers + ffn_all_reduces) * stage
        if self.ep > 1 and a.n_moe_layers:
            k = min(self.ep, self.gpu.gpus_per_node)
            per_copy = a.hidden * (self.policy.bytes("moe_dispatch") + self.policy.bytes("moe_combine"))
            if moe is not None and moe.routed:
                a2a = routed_all_to_all_s(t, moe, self.ep, per_copy, self.topo)
            else:
                send: Arr = t / self.ep * a.experts_per_token * per_copy
                if moe is not None:  # a static factor: the hottest rank sends and receives that much more
                    send = send * moe.load_factor
                a2a = np.asarray(
                    coll.hierarchical_all_to_all_s(send, np.full_like(send, self.ep), np.full_like(send, k), self.topo)
                )
            out = out + a2a * a.n_moe_layers * stage
        if self.pp > 1:
            link = self.topo.intra if self.gpus <= self.gpu.gpus_per_node else self.topo.inter
            out = out + np.asarray(coll.p2p_s(act / self.tp, link))
        return out

    def _gemm_ideal_per_token(self, moe: MoeLoad | None) -> Any:
        """Ideal GEMM time per token: the rank's routed experts run ``load_factor`` × their balanced share."""
        if moe is None:
            return self.gemm_ideal_s_per_token
        return self.gemm_ideal_s_per_token + (np.asarray(moe.load_factor) - 1.0) * self.routed_gemm_ideal_s_per_token

    def iteration(self, tokens: Any, attn_pairs: Any, kv_read_tokens: Any, micro_batches: int = 1) -> PhaseRoofline:
        """One iteration over all stages (per-GPU figures of the GPU the arrays describe).

        Args:
            tokens: new tokens the iteration processes (replica total).
            attn_pairs: Σ over new tokens of the keys each attends to.
            kv_read_tokens: cached tokens whose KV is read from HBM (decode: Σ contexts).
            micro_batches: micro-batches in the pipeline (``pp`` for decode rounds, 1 for a single prompt);
                each stage runs every micro-batch, and the weights are read once per micro-batch.

        With :attr:`moe` set, the EP ranks' load (:class:`~twinloop.plan.serve_moe_load.MoeLoad`) stretches the
        routed experts and the all-to-all; per-rank arrays give per-rank figures (ranks on the last axis,
        broadcast against ``tokens``; the all-to-all waits for the slowest rank).
        """
        moe = self.moe
        m = float(micro_batches)
        t = np.asarray(tokens, dtype=np.float64) / m
        pairs = np.asarray(attn_pairs, dtype=np.float64) / m
        kv_read = np.asarray(kv_read_tokens, dtype=np.float64) / m
        n = self.gpus
        e = self.eff
        # Tensor-pipe cycles: a GEMM with fewer rows than the smallest MMA tile costs as many as a full tile.
        gemm_per_token = self._gemm_ideal_per_token(moe)
        tensor_ideal = (gemm_per_token * np.maximum(t, MMA_MIN_ROWS) + self.attn_ideal_s_per_token_key * pairs) / n
        # Two kernel classes, each its own roofline: GEMMs stream the weights, attention streams the KV cache.
        gemm_full = gemm_per_token * t / e.gemm / n
        attn_full = self.attn_ideal_s_per_token_key * pairs / e.attention / n
        weight_bytes = self.weights_read_bytes(t, None if moe is None else moe.touched) / n
        kv_bytes = (kv_read + t) * self.kv_bytes_per_token_per_gpu
        nbytes = weight_bytes + kv_bytes
        bw = self.gpu.hbm_bandwidth_bytes_per_s * e.hbm
        gemm_mem, attn_mem = weight_bytes / bw, kv_bytes / bw
        memory = gemm_mem + attn_mem
        comm = self._comm_s(t, moe)
        # Time: a micro-batch crosses pp stages, and with m = pp micro-batches in flight every stage runs
        # each of them once per round, so both a lone prompt and a full decode round take pp stage times.
        # Activity: each GPU is busy m stage times of that round (a lone prompt leaves it idle (pp-1)/pp).
        stages = float(self.pp)
        comm_sm, comm_dram = comm_activity(self.gpu)  # NCCL's CTAs and HBM traffic while a collective runs

        def activity(x: Arr) -> tuple[Arr, Arr, Arr, Arr]:
            busy = np.maximum(gemm_full / x, gemm_mem) + np.maximum(attn_full / x, attn_mem)
            time: Arr = stages * (busy + comm) + e.step_overhead_s
            # tensor_active counts cycles: at a lower clock the same work fills a larger share of them.
            tensor: Arr = np.clip(m * tensor_ideal / x / time, 0.0, 1.0) * tensor_weight
            sm: Arr = np.clip(m * (busy + comm_sm * comm) / time, 0.0, 1.0)
            # DRAM activity is the share of time the memory is busy (how the power model is fitted: NVML's memory
            # utilisation reads 1 for a stream at the achievable bandwidth), not bytes over the datasheet figure.
            dram: Arr = np.clip(m * (memory + comm_dram * comm) / time, 0.0, 1.0)
            return time, tensor, sm, dram

        model = GpuPowerModel(self.gpu)
        tensor_weight = model.tensor_weight(self.fp8_gemm_share)
        limit: Arr = np.full_like(t, self.gpu.tdp_w)
        temp: Arr = np.full_like(t, SERVE_DIE_TEMP_C)
        x: Arr = np.ones_like(t)
        for _ in range(DVFS_ITERATIONS):  # the clock sets the activities (shares of time), which set the clock
            _, tensor, sm, dram = activity(x)
            clock: Arr = np.asarray(model.max_clock_for_power(limit, tensor, sm, dram, temp), dtype=np.float64)
            x = clock / self.gpu.sm_clock_max_mhz
        time, tensor, sm, dram = activity(x)
        power = np.asarray(model.power_w(clock, tensor, sm, dram, temp))
        # The fixed point approaches from above by < 0.01 W: above the lowest clock, power is the limit at most.
        power = np.where(clock > self.gpu.sm_clock_min_mhz, np.minimum(power, limit), power)
        gemm_c, attn_c = gemm_full / x, attn_full / x
        compute = gemm_c + attn_c
        compute_bound = np.where(gemm_c >= gemm_mem, gemm_c, 0.0) + np.where(attn_c >= attn_mem, attn_c, 0.0)
        memory_bound = np.where(gemm_c < gemm_mem, gemm_mem, 0.0) + np.where(attn_c < attn_mem, attn_mem, 0.0)
        parts = {
            "compute": float(np.mean(compute_bound)),
            "memory": float(np.mean(memory_bound)),
            "communication": float(np.mean(comm)),
        }
        flops_gpu = (self.flops_per_token * t + self.attn_flops_per_token_key * pairs) * m / n
        return PhaseRoofline(
            time_s=_out(time), compute_s=_out(compute), memory_s=_out(memory), comm_s=_out(comm),
            overhead_s=e.step_overhead_s, flops=_out(flops_gpu), bytes=_out(nbytes * m),
            tensor_active=_out(tensor), sm_active=_out(sm), dram_active=_out(dram), clock_mhz=_out(clock),
            power_w=_out(power), bound=max(parts, key=lambda k: parts[k]),
        )  # fmt: skip

    def decode(self, batch: float, context_tokens: float) -> PhaseRoofline:
        """A decode round: one new token for each of ``batch`` sequences of mean context ``context_tokens``."""
        b = max(float(batch), 1e-9)
        return self.iteration(b, b * context_tokens, b * context_tokens, micro_batches=self.pp)

    def verify(self, batch: float, context_tokens: float, tokens_per_seq: int) -> PhaseRoofline:
        """A speculative-decoding verify round: ``tokens_per_seq`` tokens for each of ``batch`` sequences."""
        b, n = max(float(batch), 1e-9), float(tokens_per_seq)
        return self.iteration(b * n, b * n * (context_tokens + (n - 1) / 2), b * context_tokens, self.pp)

    def prefill(self, prompt_tokens: Any, n_prompts: Any = 1.0) -> PhaseRoofline:
        """Prefill of ``n_prompts`` prompts of ``prompt_tokens`` tokens each (array: one prompt per entry)."""
        p = np.asarray(prompt_tokens, dtype=np.float64)
        return self.iteration(n_prompts * p, n_prompts * p * (p + 1) / 2, np.zeros_like(p), micro_batches=1)

    def mixed(
        self, batch: float, context_tokens: float, prefill_tokens: float, prefill_context: float
    ) -> PhaseRoofline:
        """A chunked-prefill iteration: ``batch`` decode tokens plus ``prefill_tokens`` prompt tokens whose
        keys average ``prefill_context``.
        """
        b = max(float(batch), 0.0)
        c = max(float(prefill_tokens), 0.0)
        tokens = max(b + c, 1e-9)
        return self.iteration(tokens, b * context_tokens + c * prefill_context, b * context_tokens, self.pp)

    def kv_transfer_s(self, prompt_tokens: float, same_node: bool) -> float:
        """Send one prompt's KV from a prefill replica to a decode replica (GPUs send their shards in parallel)."""
        link = self.topo.intra if same_node else self.topo.inter
        return float(coll.p2p_s(prompt_tokens * self.kv_bytes_per_token_per_gpu, link))


def _out(x: Arr) -> Any:
    a = np.asarray(x, dtype=np.float64)
    return float(a) if a.ndim == 0 else a


def kv_bytes_per_token_per_gpu(arch: ModelArch, kv_bytes_per_token: float, tp: int, pp: int) -> float:
    """KV bytes one GPU stores per token: layers split by PP; KV heads split by TP up to ``n_kv_heads``
    ranks (more ranks replicate heads); MLA's shared latent is replicated on every TP rank.
    """
    shards = 1 if arch.attention == "mla" else min(tp, arch.n_kv_heads)
    return kv_bytes_per_token / pp / shards


def build_roofline(
    arch: ModelArch,
    gpu: GpuSpec,
    tp: int = 1,
    pp: int = 1,
    ep: int = 1,
    weight_dtype: str = "bf16",
    kv_dtype: str = "bf16",
    eff: ServeEfficiency = DEFAULT_EFFICIENCY,
    kv_context_len: float | None = None,
    moe: MoeLoad | None = None,
    expert_dtype: str | None = None,
) -> ReplicaRoofline:
    """Precompute a replica's per-token costs (validation of tp/pp/ep is the caller's: see ``plan_serve``).

    ``kv_context_len``: the sequence length the KV cache per token is averaged at, which matters only for
    models with sliding-window or chunked layers (Gemma 2/3, Llama 4): those hold at most their window per
    sequence. None counts every layer as global (an upper bound). ``moe``: the EP ranks' load (None: balanced).
    ``expert_dtype``: the experts' weights when they differ from ``weight_dtype`` (:func:`serving_policy`).
    """
    policy = serving_policy(weight_dtype, expert_dtype)
    f0 = forward_flops_per_token(arch, 0.0)
    f1 = forward_flops_per_token(arch, 1.0)
    gemm_by_dtype = {dt: fl / (gpu.tflops(dt) * 1e12) for dt, fl in f0.by_dtype(policy).items()}
    gemm_ideal = sum(gemm_by_dtype.values())
    fp8_share = (
        gemm_by_dtype.get("fp8", 0.0) / gemm_ideal if gemm_ideal > 0 and gpu.tflops("fp8") > gpu.tflops("bf16") else 0.0
    )
    attn_key_flops = f1.attn_core - f0.attn_core
    attn_ideal = attn_key_flops / (gpu.tflops(policy.dtype("attn_core")) * 1e12)
    counts = param_counts(arch)
    routed_flops = 2.0 * arch.n_moe_layers * arch.experts_per_token * counts.expert if arch.is_moe else 0.0
    routed_ideal = routed_flops / (gpu.tflops(policy.dtype("expert_ffn")) * 1e12)
    expert_bytes = arch.n_moe_layers * counts.expert * policy.bytes("expert_ffn")
    kv = kv_cache_bytes_per_token(arch, kv_dtype, context_len=kv_context_len)
    return ReplicaRoofline(
        arch=arch, gpu=gpu, tp=tp, pp=pp, ep=ep, policy=policy, kv_dtype=kv_dtype, eff=eff,
        weight_bytes=weight_bytes(arch, policy), kv_bytes_per_token=kv,
        kv_bytes_per_token_per_gpu=kv_bytes_per_token_per_gpu(arch, kv, tp, pp),
        gemm_ideal_s_per_token=gemm_ideal, attn_ideal_s_per_token_key=attn_ideal,
        flops_per_token=f0.total, attn_flops_per_token_key=attn_key_flops,
        base_weight_read_bytes=decode_weight_bytes(arch, policy, 0.0),
        expert_bytes_per_layer_expert=expert_bytes, embedding_row_bytes=arch.hidden * policy.bytes("embedding"),
        topo=_comm_link(gpu, eff), fp8_gemm_share=fp8_share, routed_gemm_ideal_s_per_token=routed_ideal,
        moe=moe,
    )  # fmt: skip
