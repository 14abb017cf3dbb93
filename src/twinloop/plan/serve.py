"""The serving planner: model + GPUs + parallelism + batching + workload → memory, latency, throughput,
power, energy, money and warm-up (``twinloop plan serve``).

:func:`plan_serve` validates a :class:`ServeRequest`, builds the replica roofline
(:mod:`~twinloop.plan.serve_roofline`), sizes the paged KV cache and its offload tier
(:mod:`~twinloop.plan.kv_offload`), runs the batching strategy's queueing model
(:mod:`~twinloop.plan.batching`), optionally with speculative decoding (:mod:`~twinloop.plan.speculative`),
and prices the result (:mod:`~twinloop.plan.serve_power`, :mod:`~twinloop.plan.cost`,
:mod:`~twinloop.plan.warmup`).

Memory per GPU: ``HBM × GPU_MEMORY_UTILIZATION − weights/(tp·pp) − activation workspace − runtime`` is
left for the KV cache. Throughput and energy count *output* tokens; ``throughput_total_tokens_per_s`` adds
prompt tokens.

The ``prefill`` and ``decode`` :class:`PhaseSummary` objects carry the per-phase activity the twin turns
into GPU power: ``tensor_active``, ``sm_active``, ``dram_active`` (0..1), ``clock_mhz``, ``power_w`` and
``time_fraction`` (share of GPU time in that phase; the rest idles at ``idle_power_w``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from twinloop.errors import InputError, pydantic_error
from twinloop.hardware.gpu import GpuSpec, get_gpu
from twinloop.model.arch import ModelArch, load_model
from twinloop.model.params import param_counts
from twinloop.model.precision import DTYPES
from twinloop.plan.batching import BATCHING_STRATEGIES, DEFAULT_CHUNK_TOKENS, ChunkedPrefill, Workload, get_strategy
from twinloop.plan.cost import Prices, cost_usd
from twinloop.plan.efficiency import DEFAULT_PUE
from twinloop.plan.kv_offload import OFFLOAD_TIERS, kv_capacity, offload_path, offload_read_s
from twinloop.plan.serve_power import idle_power_w, serve_energy
from twinloop.plan.serve_roofline import PhaseRoofline, ReplicaRoofline, build_roofline
from twinloop.plan.speculative import SpeculativeDecoder, expected_tokens_per_step, validate_spec
from twinloop.plan.trace import AZURE_ATTRIBUTION, load_azure_trace
from twinloop.plan.warmup import WarmupPlan, plan_warmup
from twinloop.probe.profile import load_node_profile

#: vLLM's default ``gpu_memory_utilization`` (share of HBM the engine may use).
GPU_MEMORY_UTILIZATION = 0.90
#: GUESS: CUDA context, NCCL buffers and CUDA graphs outside the weights/KV/activations (~1 GB per GPU).
RUNTIME_BYTES = 1.0e9
#: vLLM's default ``max_num_seqs``: the scheduler's cap on sequences in one batch.
DEFAULT_MAX_SEQS = 256
#: vLLM's default paged-KV block size, tokens.
DEFAULT_BLOCK_SIZE = 16
#: GUESS: CPU time to tokenize one prompt token. Hugging Face fast (Rust) tokenizers encode ~0.25-1 M
#: tokens/s per core (tiktoken's README benchmark: a few MB/s of text per thread, ~4 bytes/token).
TOKENIZE_S_PER_TOKEN = 2.0e-6
#: GUESS: CPU time to detokenize one output token incrementally (Python-side incremental detokenization in
#: vLLM/TGI; tens of microseconds per batch row have been reported as a CPU bottleneck at large batches).
DETOKENIZE_S_PER_TOKEN = 5.0e-6


class ServeRequest(BaseModel):
    """Everything ``plan serve`` needs. ``gpus`` is the whole deployment; one replica uses ``tp·pp`` GPUs.

    ``rate_req_per_s`` is the total arrival rate (None: offline, plan at capacity); with a ``trace`` it
    rescales the trace's own rate. ``kv_offload_gb`` is the offload tier's capacity over the deployment.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str
    gpu: str = "h100-sxm"
    gpus: int = Field(8, ge=1, le=100_000)
    tp: int = Field(8, ge=1, le=1024)
    pp: int = Field(1, ge=1, le=1024)
    ep: int = Field(1, ge=1, le=1024)
    weight_dtype: str = "bf16"
    kv_dtype: str = "bf16"
    batching: str = "continuous"
    prompt_tokens: int = Field(1024, ge=1, le=10_000_000)
    output_tokens: int = Field(256, ge=1, le=10_000_000)
    trace: str | None = None
    rate_req_per_s: float | None = Field(None, gt=0)
    block_size: int = Field(DEFAULT_BLOCK_SIZE, ge=1, le=4096)
    max_seqs: int = Field(DEFAULT_MAX_SEQS, ge=1, le=1_000_000)
    chunk_tokens: int = Field(DEFAULT_CHUNK_TOKENS, ge=16, le=1_000_000)  # token budget per iteration
    kv_offload: str = "none"
    kv_offload_gb: float = Field(0.0, ge=0)
    draft_model: str | None = None
    spec_tokens: int = 4
    acceptance: float = 0.7
    gds: bool = False
    node_profile: str | None = None
    price_gpu_hour_usd: float = Field(2.0, ge=0)
    price_kwh_usd: float = Field(0.10, ge=0)
    pue: float = Field(DEFAULT_PUE, ge=1.0, le=5.0)


@dataclass(frozen=True)
class PhaseSummary:
    """One phase at the operating point (per GPU).

    Attributes:
        iteration_s: one iteration (prefill: one prompt, or the batch for static/dynamic; decode: one round).
        tokens_per_iteration: new tokens the iteration processes (replica total).
        bound: ``compute``, ``memory`` or ``communication``.
        arithmetic_intensity_flops_per_byte / ridge_flops_per_byte: the iteration's FLOP/byte and the GPU's.
        compute_s / memory_s / comm_s: the iteration's parts.
        tensor_active / sm_active / dram_active: activity 0..1; clock_mhz after DVFS; power_w per GPU.
        time_fraction: share of GPU time spent in this phase.
    """

    iteration_s: float
    tokens_per_iteration: float
    bound: str
    arithmetic_intensity_flops_per_byte: float
    ridge_flops_per_byte: float
    compute_s: float
    memory_s: float
    comm_s: float
    tensor_active: float
    sm_active: float
    dram_active: float
    clock_mhz: float
    power_w: float
    time_fraction: float


@dataclass(frozen=True)
class ServePlan:
    """The serving plan; see the module docstring for conventions. Sequences and throughputs are totals over
    all replicas; per-GPU figures say so."""

    model: str
    gpu: str
    gpus: int
    tp: int
    pp: int
    ep: int
    replicas: int
    batching: str
    weight_dtype: str
    kv_dtype: str
    params_total: int
    params_active: int
    weight_bytes_total: float
    weight_bytes_per_gpu: float
    hbm_bytes_per_gpu: float
    kv_free_bytes_per_gpu: float
    kv_cache_bytes_per_token: float
    kv_cache_bytes_per_token_per_gpu: float
    block_size: int
    kv_fragmentation_fraction: float
    max_concurrent_sequences: int
    max_concurrent_sequences_hbm: int
    max_concurrent_sequences_offload: int
    decode_batch_per_replica: float
    prompt_tokens_mean: float
    output_tokens_mean: float
    rate_req_per_s: float | None
    ttft_s: float
    tpot_s: float
    queue_wait_s: float
    e2e_latency_s: float
    throughput_tokens_per_s: float
    throughput_total_tokens_per_s: float
    throughput_req_per_s: float
    capacity_req_per_s: float
    saturated: bool
    offline: bool
    prefill_replicas: int
    decode_replicas: int
    prefill: PhaseSummary
    decode: PhaseSummary
    idle_power_w: float
    idle_fraction: float
    power_per_gpu_w: float
    energy_per_token_j: float
    energy_per_request_j: float
    cost_per_million_tokens_usd: float
    cpu_tokenize_s_per_request: float
    cpu_detokenize_s_per_request: float
    warmup_s: float
    warmup: WarmupPlan
    kv_offload: dict[str, Any]
    speculative: dict[str, Any] | None
    workload: dict[str, Any]
    warnings: tuple[str, ...]


def _check_dtype(value: str, flag: str) -> None:
    if value not in DTYPES:
        raise InputError(flag, "", f"unknown dtype {value!r} (allowed: {', '.join(DTYPES)})")


def validate_parallel(arch: ModelArch, gpus: int, tp: int, pp: int, ep: int, source: str = "--tp") -> None:
    """Raise :class:`InputError` when tp/pp/ep cannot shard ``arch`` on ``gpus`` GPUs."""
    if gpus % (tp * pp):
        raise InputError("--gpus", "", f"{gpus} GPUs are not a multiple of tp·pp = {tp}·{pp} = {tp * pp}")
    if arch.n_heads % tp:
        raise InputError(source, "", f"tp={tp} does not divide the {arch.n_heads} attention heads of {arch.name}")
    if arch.attention != "mla" and arch.n_kv_heads % tp and tp % arch.n_kv_heads:
        raise InputError(
            source, "", f"tp={tp} and the {arch.n_kv_heads} KV heads of {arch.name}: neither divides the other"
        )
    n_layers = arch.n_dense_layers + arch.n_moe_layers
    if pp > n_layers:
        raise InputError("--pp", "", f"pp={pp} exceeds the {n_layers} layers of {arch.name}")
    if ep > 1:
        if not arch.is_moe:
            raise InputError("--ep", "", f"ep={ep} but {arch.name} has no experts (allowed: 1)")
        if tp % ep:
            raise InputError("--ep", "", f"ep={ep} must divide tp={tp} (experts are spread over the TP group)")
        if arch.n_routed_experts % ep:
            raise InputError("--ep", "", f"ep={ep} does not divide the {arch.n_routed_experts} routed experts")


def activation_workspace_bytes(arch: ModelArch, tp: int, tokens: float, max_seqs: int) -> float:
    """Peak activation memory of one forward pass over ``tokens`` tokens on one GPU (bytes, BF16): the
    residual stream and attention buffers (~4·hidden per token) plus the FFN intermediates split by TP, and
    FP32 logits of ``max_seqs`` sampled rows. An estimate in the spirit of vLLM's profiling run."""
    ffn = max(arch.ffn_hidden, arch.experts_per_token * arch.moe_ffn_hidden + arch.shared_ffn_hidden)
    per_token = 4 * arch.hidden + 3 * ffn / tp
    return tokens * per_token * 2.0 + max_seqs * arch.vocab / tp * 4.0


@dataclass(frozen=True)
class _ReplicaSteps:
    """The :class:`~twinloop.plan.batching.StepModel` of one replica: roofline + speculation + offload + CPU."""

    roof: ReplicaRoofline
    spec: SpeculativeDecoder | None
    offload: Any
    hbm_sequences: int
    prefill_context: float
    same_node: bool
    token_budget: float

    def decode_phase(self, batch: float, context_tokens: float) -> PhaseRoofline:
        return self.spec.decode(batch, context_tokens) if self.spec else self.roof.decode(batch, context_tokens)

    def decode_s(self, batch: float, context_tokens: float) -> float:
        gpu = float(self.decode_phase(batch, context_tokens).time_s)
        per_cycle = self.spec.tokens_per_cycle if self.spec else 1.0
        kv_read = batch * context_tokens * self.roof.kv_bytes_per_token_per_gpu
        gpu += float(offload_read_s(float(batch), self.hbm_sequences, kv_read, self.offload)) / per_cycle
        # Detokenization runs in its own CPU process, overlapped with the GPU: the slower one paces tokens.
        return max(gpu, batch * DETOKENIZE_S_PER_TOKEN)

    def _prefill_total(self, prompt: Any, n: Any = 1.0) -> NDArray[np.float64]:
        t = np.asarray(self.roof.prefill(prompt, n).time_s, dtype=np.float64)
        if self.spec:
            t = t + np.asarray(self.spec.draft.prefill(prompt, n).time_s, dtype=np.float64)
        return t

    def prefill_latency_s(self, prompt_tokens: NDArray[np.float64]) -> NDArray[np.float64]:
        return self._prefill_total(prompt_tokens)

    def prefill_busy_s(self, prompt_tokens: NDArray[np.float64]) -> NDArray[np.float64]:
        # Queued prompts are prefilled together up to the token budget, sharing one read of the weights:
        # a prompt occupies the replica for its share of such a batch.
        p = np.asarray(prompt_tokens, dtype=np.float64)
        k = np.maximum(1.0, np.floor(self.token_budget / np.maximum(p, 1.0)))
        return self._prefill_total(p, k) / k / self.roof.pp

    def batch_prefill_s(self, n_prompts: float, prompt_tokens: float) -> float:
        return float(self._prefill_total(prompt_tokens, n_prompts))

    def mixed_s(self, batch: float, context_tokens: float, prefill_tokens: float) -> float:
        base = self.roof.mixed(batch, context_tokens, 0.0, self.prefill_context)
        mixed = self.roof.mixed(batch, context_tokens, prefill_tokens, self.prefill_context)
        return self.decode_s(batch, context_tokens) + max(0.0, float(mixed.time_s) - float(base.time_s))

    def kv_transfer_s(self, prompt_tokens: float) -> float:
        return self.roof.kv_transfer_s(prompt_tokens, self.same_node)


def _summary(phase: PhaseRoofline, gpu: GpuSpec, tokens: float, fraction: float, dtype_tflops: float) -> PhaseSummary:
    return PhaseSummary(
        iteration_s=float(np.mean(phase.time_s)),
        tokens_per_iteration=tokens,
        bound=phase.bound,
        arithmetic_intensity_flops_per_byte=phase.arithmetic_intensity,
        ridge_flops_per_byte=dtype_tflops * 1e12 / gpu.hbm_bandwidth_bytes_per_s,
        compute_s=float(np.mean(phase.compute_s)),
        memory_s=float(np.mean(phase.memory_s)),
        comm_s=float(np.mean(phase.comm_s)),
        tensor_active=float(np.mean(phase.tensor_active)),
        sm_active=float(np.mean(phase.sm_active)),
        dram_active=float(np.mean(phase.dram_active)),
        clock_mhz=float(np.mean(phase.clock_mhz)),
        power_w=float(np.mean(phase.power_w)),
        time_fraction=fraction,
    )


def _storage_profile(path: str | None) -> tuple[float | None, float | None, str | None]:
    """(storage read bytes/s per node, PCIe bytes/s per GPU, label) from a probe node profile, if given."""
    if path is None:
        return None, None, None
    profile = load_node_profile(path)
    if profile.storage_read_bytes_per_s is None:
        raise InputError(
            path, "node_profile.storage_read_bytes_per_s", "missing: run `twinloop probe` with the I/O benchmark"
        )
    links = [g.link_bandwidth_bytes_per_s for g in profile.pcie_gpus if g.link_bandwidth_bytes_per_s]
    return profile.storage_read_bytes_per_s, (min(links) if links else None), f"node profile {path}"


def _workload(req: ServeRequest) -> tuple[Workload, dict[str, Any]]:
    if req.trace is None:
        p = np.array([float(req.prompt_tokens)])
        o = np.array([float(req.output_tokens)])
        info: dict[str, Any] = {"source": "fixed lengths", "n_requests": None, "bad_rows": 0}
        return Workload(p, o, req.rate_req_per_s), info
    trace = load_azure_trace(req.trace)
    if req.rate_req_per_s is not None:
        trace = trace.with_rate(req.rate_req_per_s)
    stats = trace.stats()
    info = {
        "source": trace.source,
        "n_requests": stats.n_requests,
        "bad_rows": stats.bad_rows,
        "duration_s": stats.duration_s,
        "prompt_p50": stats.prompt_p50,
        "prompt_p99": stats.prompt_p99,
        "output_p50": stats.output_p50,
        "output_p99": stats.output_p99,
        "attribution": AZURE_ATTRIBUTION,
    }
    wl = Workload(trace.prompt_tokens.astype(np.float64), trace.output_tokens.astype(np.float64), stats.rate_req_per_s)
    return wl, info


def plan_serve(request: ServeRequest) -> ServePlan:
    """Plan a serving deployment; see the module docstring.

    Raises:
        InputError: unknown model/GPU/dtype/strategy/tier, parallelism that cannot shard the model, weights
            that do not fit the GPUs, or a sequence whose KV does not fit.
    """
    req = request
    arch = load_model(req.model)
    gpu = get_gpu(req.gpu)
    _check_dtype(req.weight_dtype, "--weight-dtype")
    _check_dtype(req.kv_dtype, "--kv-dtype")
    strategy = ChunkedPrefill(req.chunk_tokens) if req.batching == "chunked" else get_strategy(req.batching)
    if req.kv_offload not in OFFLOAD_TIERS:
        raise InputError("--kv-offload", "", f"unknown tier {req.kv_offload!r} (allowed: {', '.join(OFFLOAD_TIERS)})")
    validate_parallel(arch, req.gpus, req.tp, req.pp, req.ep)
    replicas = req.gpus // (req.tp * req.pp)
    warnings: list[str] = []

    wl, info = _workload(req)
    seq_tokens = wl.prompt_tokens + wl.output_tokens
    # sliding-window layers (Gemma 2/3, Llama 4) hold at most their window: KV per token at the mean length
    kv_ctx = float(np.mean(seq_tokens))
    roof = build_roofline(arch, gpu, req.tp, req.pp, req.ep, req.weight_dtype, req.kv_dtype, kv_context_len=kv_ctx)
    spec: SpeculativeDecoder | None = None
    draft_kv_per_gpu = 0.0
    if req.draft_model is not None:
        validate_spec(req.spec_tokens, req.acceptance)
        draft_arch = load_model(req.draft_model, source="--draft-model")
        validate_parallel(draft_arch, req.gpus, req.tp, req.pp, 1, source="--draft-model (same tp as the target)")
        draft = build_roofline(
            draft_arch, gpu, req.tp, req.pp, 1, req.weight_dtype, req.kv_dtype, kv_context_len=kv_ctx
        )
        spec = SpeculativeDecoder(roof, draft, req.spec_tokens, req.acceptance)
        draft_kv_per_gpu = draft.kv_bytes_per_token_per_gpu

    too_long = int(np.sum(seq_tokens > arch.max_position))
    if too_long:
        warnings.append(f"{too_long} request(s) exceed the model's context window of {arch.max_position} tokens")

    weights_per_gpu = roof.weight_bytes / roof.gpus + (spec.draft_memory_bytes_per_gpu() if spec else 0.0)
    usable = gpu.hbm_bytes * GPU_MEMORY_UTILIZATION
    budget_tokens = float(
        req.chunk_tokens if req.batching == "chunked" else max(req.chunk_tokens, np.max(wl.prompt_tokens))
    )
    activations = activation_workspace_bytes(arch, req.tp, budget_tokens, req.max_seqs)
    if weights_per_gpu + RUNTIME_BYTES > usable:
        raise InputError(
            "--gpus",
            "",
            f"{arch.name} weights need {weights_per_gpu / 1e9:.1f} GB per GPU ({roof.weight_bytes / 1e9:.1f} GB in "
            f"{req.weight_dtype} over tp·pp={roof.gpus}) plus {RUNTIME_BYTES / 1e9:.1f} GB runtime, "
            f"but {gpu.name} offers {usable / 1e9:.1f} GB ({GPU_MEMORY_UTILIZATION:.0%} of "
            f"{gpu.hbm_bytes / 1e9:.0f} GB HBM); use more GPUs per replica (tp/pp) or a narrower --weight-dtype",
        )
    if weights_per_gpu + RUNTIME_BYTES + activations > usable:
        raise InputError(
            "--prompt-tokens" if req.trace is None else req.trace,
            "",
            f"prefill activations for {budget_tokens:.0f} tokens need {activations / 1e9:.1f} GB per GPU but only "
            f"{(usable - weights_per_gpu - RUNTIME_BYTES) / 1e9:.1f} GB is left after the weights; "
            "use --batching chunked or more GPUs",
        )
    free = usable - weights_per_gpu - RUNTIME_BYTES - activations
    kv_per_gpu = roof.kv_bytes_per_token_per_gpu + draft_kv_per_gpu
    path = offload_path(req.kv_offload, gpu, req.kv_offload_gb * 1e9 / replicas)
    cap = kv_capacity(free, kv_per_gpu, seq_tokens, req.block_size, path, roof.gpus)
    if cap.max_sequences < 1:
        raise InputError(
            "--prompt-tokens" if req.trace is None else req.trace,
            "",
            f"one sequence of {float(np.mean(seq_tokens)):.0f} tokens needs "
            f"{cap.bytes_per_sequence_per_gpu / 1e9:.2f} GB of KV per GPU but only {free / 1e9:.2f} GB is free "
            "after the weights",
        )
    batch_cap = min(cap.max_sequences, req.max_seqs)

    steps = _ReplicaSteps(
        roof, spec, path, cap.hbm_sequences, wl.prompt_mean / 2, req.gpus <= gpu.gpus_per_node, req.chunk_tokens
    )
    result = strategy.plan(steps, wl, batch_cap, replicas)
    hbm_cap = min(cap.hbm_sequences, req.max_seqs)
    if 1 <= hbm_cap < batch_cap:
        hbm_only = strategy.plan(steps, wl, hbm_cap, replicas)
        if hbm_only.capacity_req_per_s > result.capacity_req_per_s:
            result = hbm_only
            warnings.append(
                f"the {path.tier} KV offload tier lowers capacity here (streaming the offloaded KV costs more than "
                "the larger batch gains); planned with the HBM-only batch"
            )
    cpu_tokenize = wl.prompt_mean * TOKENIZE_S_PER_TOKEN
    ttft = result.ttft_s + cpu_tokenize + DETOKENIZE_S_PER_TOKEN

    ctx = wl.decode_context_mean
    b = max(result.decode_batch, 1.0)
    decode_phase = steps.decode_phase(b, ctx)
    # Prefill activity while busy: a full pipeline (pp prompts in flight) so every stage works.
    n_pre = result.prefill_prompts_per_batch * roof.pp
    p_mean = wl.prompt_mean
    prefill_phase = roof.iteration(n_pre * p_mean, n_pre * p_mean * (p_mean + 1) / 2, 0.0, micro_batches=roof.pp)
    prefill_latency = roof.prefill(p_mean, result.prefill_prompts_per_batch)
    prefill_phase = _with_time(prefill_phase, prefill_latency)
    idle = idle_power_w(gpu)
    energy = serve_energy(
        prefill_phase.power_w, decode_phase.power_w, idle, result.prefill_fraction, result.decode_fraction,
        req.gpus, result.output_tokens_per_s, result.throughput_req_per_s,
    )  # fmt: skip
    prices = Prices(per_gpu_hour_usd=req.price_gpu_hour_usd, per_kwh_usd=req.price_kwh_usd, pue=req.pue)
    seconds_per_million = 1e6 / result.output_tokens_per_s if result.output_tokens_per_s > 0 else float("inf")
    cost = cost_usd(req.gpus * seconds_per_million / 3600.0, energy.energy_per_token_j * 1e6, prices)

    storage, host, label = _storage_profile(req.node_profile)
    warm = plan_warmup(
        roof.weight_bytes, roof.gpus, req.gpus, gpu,
        storage_read_bytes_per_s_per_node=storage, host_link_bytes_per_s=host, storage_source=label,
    )  # fmt: skip
    counts = param_counts(arch)
    tflops = gpu.tflops(roof.policy.dtype("dense_ffn" if arch.n_dense_layers else "expert_ffn"))
    if result.saturated:
        warnings.append(
            f"rate {wl.rate_req_per_s:g} req/s exceeds the capacity {result.capacity_req_per_s:.3g} req/s: "
            "the queue grows without bound (TTFT infinite)"
        )
    return ServePlan(
        model=arch.name, gpu=gpu.name, gpus=req.gpus, tp=req.tp, pp=req.pp, ep=req.ep, replicas=replicas,
        batching=strategy.name, weight_dtype=req.weight_dtype, kv_dtype=req.kv_dtype,
        params_total=counts.total, params_active=counts.active, weight_bytes_total=roof.weight_bytes,
        weight_bytes_per_gpu=weights_per_gpu, hbm_bytes_per_gpu=gpu.hbm_bytes, kv_free_bytes_per_gpu=free,
        kv_cache_bytes_per_token=roof.kv_bytes_per_token, kv_cache_bytes_per_token_per_gpu=kv_per_gpu,
        block_size=req.block_size, kv_fragmentation_fraction=cap.fragmentation_fraction,
        max_concurrent_sequences=cap.max_sequences * replicas,
        max_concurrent_sequences_hbm=cap.hbm_sequences * replicas,
        max_concurrent_sequences_offload=cap.offload_sequences * replicas,
        decode_batch_per_replica=result.decode_batch, prompt_tokens_mean=wl.prompt_mean,
        output_tokens_mean=wl.output_mean, rate_req_per_s=wl.rate_req_per_s,
        ttft_s=ttft, tpot_s=result.tpot_s, queue_wait_s=result.queue_wait_s,
        e2e_latency_s=ttft + max(wl.output_mean - 1.0, 0.0) * result.tpot_s,
        throughput_tokens_per_s=result.output_tokens_per_s,
        throughput_total_tokens_per_s=result.output_tokens_per_s + result.prompt_tokens_per_s,
        throughput_req_per_s=result.throughput_req_per_s, capacity_req_per_s=result.capacity_req_per_s,
        saturated=result.saturated, offline=result.offline,
        prefill_replicas=result.prefill_replicas, decode_replicas=result.decode_replicas,
        prefill=_summary(prefill_phase, gpu, n_pre * p_mean / roof.pp, result.prefill_fraction, tflops),
        decode=_summary(decode_phase, gpu, b, result.decode_fraction, tflops),
        idle_power_w=idle, idle_fraction=result.idle_fraction,
        power_per_gpu_w=energy.power_per_gpu_w, energy_per_token_j=energy.energy_per_token_j,
        energy_per_request_j=energy.energy_per_request_j, cost_per_million_tokens_usd=float(cost),
        cpu_tokenize_s_per_request=cpu_tokenize,
        cpu_detokenize_s_per_request=wl.output_mean * DETOKENIZE_S_PER_TOKEN,
        warmup_s=warm.warmup_s_with_gds if req.gds else warm.warmup_s_without_gds, warmup=warm,
        kv_offload={
            "tier": path.tier, "capacity_bytes_per_replica": path.capacity_bytes,
            "read_bytes_per_s_per_gpu": path.read_bytes_per_s, "links": list(path.links),
        },
        speculative=None if spec is None else {
            "draft_model": spec.draft.arch.name, "spec_tokens": spec.tokens, "acceptance": spec.acceptance,
            "tokens_per_step": expected_tokens_per_step(spec.tokens, spec.acceptance),
        },
        workload=info, warnings=tuple(warnings),
    )  # fmt: skip


def _with_time(busy: PhaseRoofline, latency: PhaseRoofline) -> PhaseRoofline:
    """The busy-pipeline activity of ``busy`` with the iteration time and parts of ``latency``."""
    return PhaseRoofline(
        time_s=latency.time_s, compute_s=latency.compute_s, memory_s=latency.memory_s, comm_s=latency.comm_s,
        overhead_s=latency.overhead_s, flops=latency.flops, bytes=latency.bytes,
        tensor_active=busy.tensor_active, sm_active=busy.sm_active, dram_active=busy.dram_active,
        clock_mhz=busy.clock_mhz, power_w=busy.power_w, bound=latency.bound,
    )  # fmt: skip


def build_request(**kwargs: Any) -> ServeRequest:
    """A validated :class:`ServeRequest` from keyword arguments (pydantic errors → :class:`InputError`)."""
    try:
        return ServeRequest(**kwargs)
    except ValidationError as exc:
        err = pydantic_error("plan serve", exc)
        flag = _FLAGS.get(err.field, f"--{err.field.replace('_', '-')}") if err.field else "plan serve"
        raise InputError(flag, "", err.message) from None


_FLAGS = {
    "rate_req_per_s": "--rate",
    "price_gpu_hour_usd": "--price-gpu-hour",
    "price_kwh_usd": "--price-kwh",
}


__all__ = ["BATCHING_STRATEGIES", "PhaseSummary", "ServePlan", "ServeRequest", "build_request", "plan_serve"]
