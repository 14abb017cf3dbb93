"""The stages of the serving planner (:func:`twinloop.plan.serve.plan_serve`).

In order:

1. :func:`setup`: validate the request, read the workload, build the replica roofline (and the draft's);
2. :func:`size_memory`: weights, activation workspace and runtime per GPU, the KV cache and its offload tier;
3. :func:`run_batching`: the batching strategy's queueing model on the replica's step model
   (:class:`ReplicaSteps`), with the HBM-only batch when the offload tier costs more than it gains;
4. :func:`operating_phases`: prefill and decode activity at the operating point (what the twin turns into power);
5. :func:`economics`: energy, cost and warm-up.

Each stage takes the request and what earlier stages returned; none has side effects.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from twinloop.errors import InputError
from twinloop.hardware.gpu import GpuSpec, get_gpu
from twinloop.model.arch import ModelArch, load_model
from twinloop.model.precision import DTYPES
from twinloop.plan.batching import BatchingResult, BatchingStrategy, ChunkedPrefill, Workload, get_strategy
from twinloop.plan.cost import Prices, cost_usd
from twinloop.plan.kv_offload import OFFLOAD_TIERS, KvCapacity, OffloadPath, kv_capacity, offload_path, offload_read_s
from twinloop.plan.serve_moe_load import MoeLoad
from twinloop.plan.serve_power import ServeEnergy, idle_power_w, serve_energy
from twinloop.plan.serve_roofline import PhaseRoofline, ReplicaRoofline, build_roofline
from twinloop.plan.speculative import SpeculativeDecoder, validate_spec
from twinloop.plan.trace import AZURE_ATTRIBUTION, load_azure_trace
from twinloop.plan.warmup import WarmupPlan, plan_warmup
from twinloop.probe.profile import load_node_profile

if TYPE_CHECKING:
    from twinloop.plan.serve_request import ServeRequest

#: vLLM's default ``gpu_memory_utilization`` (share of HBM the engine may use).
GPU_MEMORY_UTILIZATION = 0.90
#: GUESS: CUDA context, NCCL buffers and CUDA graphs outside the weights/KV/activations (~1 GB per GPU).
RUNTIME_BYTES = 1.0e9
#: GUESS: CPU time to tokenize one prompt token. Hugging Face fast (Rust) tokenizers encode ~0.25-1 M
#: tokens/s per core (tiktoken's README benchmark: a few MB/s of text per thread, ~4 bytes/token).
TOKENIZE_S_PER_TOKEN = 2.0e-6
#: GUESS: CPU time to detokenize one output token incrementally (Python-side incremental detokenization in
#: vLLM/TGI; tens of microseconds per batch row have been reported as a CPU bottleneck at large batches).
DETOKENIZE_S_PER_TOKEN = 5.0e-6


def weight_label(weight_dtype: str, expert_dtype: str | None) -> str:
    """The weights' dtype as printed: ``bf16``, or ``bf16, experts mxfp4`` when the experts differ."""
    if expert_dtype is None or expert_dtype == weight_dtype:
        return weight_dtype
    return f"{weight_dtype}, experts {expert_dtype}"


def _check_unused(req: ServeRequest) -> None:
    """Refuse a setting that would change nothing without its companion (it was silently ignored before)."""
    if req.kv_offload == "none" and req.kv_offload_gb > 0:
        raise InputError(
            "--kv-offload-gb",
            "",
            f"{req.kv_offload_gb:g} GB given, but --kv-offload is none (name a tier: "
            f"{', '.join(t for t in OFFLOAD_TIERS if t != 'none')})",
        )
    if req.draft_model is None:
        for name, flag in (("spec_tokens", "--spec-tokens"), ("acceptance", "--acceptance")):
            if getattr(req, name) != type(req).model_fields[name].default:
                raise InputError(flag, "", "applies to speculative decoding only: give --draft-model too")


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
        if ep > arch.n_routed_experts:
            raise InputError("--ep", "", f"ep={ep} exceeds the {arch.n_routed_experts} routed experts of {arch.name}")
        if tp % ep:
            raise InputError("--ep", "", f"ep={ep} must divide tp={tp} (experts are spread over the TP group)")
        if arch.n_routed_experts % ep:
            raise InputError("--ep", "", f"ep={ep} does not divide the {arch.n_routed_experts} routed experts")


def activation_workspace_bytes(arch: ModelArch, tp: int, tokens: float, max_seqs: int) -> float:
    """Peak activation memory of one forward pass over ``tokens`` tokens on one GPU (bytes, BF16): the
    residual stream and attention buffers (~4·hidden per token) plus the FFN intermediates split by TP, and
    FP32 logits of ``max_seqs`` sampled rows. An estimate in the spirit of vLLM's profiling run.
    """
    ffn = max(arch.ffn_hidden, arch.experts_per_token * arch.moe_ffn_hidden + arch.shared_ffn_hidden)
    per_token = 4 * arch.hidden + 3 * ffn / tp
    return tokens * per_token * 2.0 + max_seqs * arch.vocab / tp * 4.0


@dataclass(frozen=True)
class ReplicaSteps:
    """The :class:`~twinloop.plan.batching.StepModel` of one replica: roofline + speculation + offload + CPU."""

    roof: ReplicaRoofline
    spec: SpeculativeDecoder | None
    offload: Any
    hbm_sequences: int
    prefill_context: float
    same_node: bool
    token_budget: float

    def decode_phase(self, batch: float, context_tokens: float) -> PhaseRoofline:
        """A decode round's roofline: one speculative cycle when a draft model is set, else one plain decode step."""
        return self.spec.decode(batch, context_tokens) if self.spec else self.roof.decode(batch, context_tokens)

    def decode_s(self, batch: float, context_tokens: float) -> float:
        """Time per decode round of ``batch`` sequences, with the offloaded KV read and the detokenization floor."""
        return float(self.decode_total_s(self.decode_phase(batch, context_tokens).time_s, batch, context_tokens))

    def decode_total_s(self, gpu_s: Any, batch: float, context_tokens: float) -> Any:
        """A decode round's time from its GPU time ``gpu_s`` (scalar or array): plus the offloaded KV's read,
        and no faster than detokenization.
        """
        per_cycle = self.spec.tokens_per_cycle if self.spec else 1.0
        kv_read = batch * context_tokens * self.roof.kv_bytes_per_token_per_gpu
        gpu = gpu_s + float(offload_read_s(float(batch), self.hbm_sequences, kv_read, self.offload)) / per_cycle
        # Detokenization runs in its own CPU process, overlapped with the GPU: the slower one paces tokens.
        return np.maximum(gpu, batch * DETOKENIZE_S_PER_TOKEN)

    def _prefill_total(self, prompt: Any, n: Any = 1.0) -> NDArray[np.float64]:
        t = np.asarray(self.roof.prefill(prompt, n).time_s, dtype=np.float64)
        if self.spec:
            t = t + np.asarray(self.spec.draft.prefill(prompt, n).time_s, dtype=np.float64)
        return t

    def prefill_latency_s(self, prompt_tokens: NDArray[np.float64]) -> NDArray[np.float64]:
        """Prefill latency of one prompt of each length, the draft model's prefill included."""
        return self._prefill_total(prompt_tokens)

    def prefill_busy_s(self, prompt_tokens: NDArray[np.float64]) -> NDArray[np.float64]:
        """Time each prompt occupies the replica when queued prompts share a batch up to the token budget."""
        # Queued prompts are prefilled together up to the token budget, sharing one read of the weights:
        # a prompt occupies the replica for its share of such a batch.
        p = np.asarray(prompt_tokens, dtype=np.float64)
        k = np.maximum(1.0, np.floor(self.token_budget / np.maximum(p, 1.0)))
        return self._prefill_total(p, k) / k / self.roof.pp

    def batch_prefill_s(self, n_prompts: float, prompt_tokens: float) -> float:
        """Prefill of ``n_prompts`` prompts of ``prompt_tokens`` tokens in one batch, the draft's included."""
        return float(self._prefill_total(prompt_tokens, n_prompts))

    def mixed_s(self, batch: float, context_tokens: float, prefill_tokens: float) -> float:
        """A chunked iteration: the decode round plus what its ``prefill_tokens`` prompt tokens add to it."""
        base = self.roof.mixed(batch, context_tokens, 0.0, self.prefill_context)
        mixed = self.roof.mixed(batch, context_tokens, prefill_tokens, self.prefill_context)
        return self.decode_s(batch, context_tokens) + max(0.0, float(mixed.time_s) - float(base.time_s))

    def kv_transfer_s(self, prompt_tokens: float) -> float:
        """Shipping one prompt's KV cache to a decode replica (over the scale-up link when on the same node)."""
        return self.roof.kv_transfer_s(prompt_tokens, self.same_node)


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


def _with_time(busy: PhaseRoofline, latency: PhaseRoofline) -> PhaseRoofline:
    """The busy-pipeline activity of ``busy`` with the iteration time and parts of ``latency``."""
    return PhaseRoofline(
        time_s=latency.time_s, compute_s=latency.compute_s, memory_s=latency.memory_s, comm_s=latency.comm_s,
        overhead_s=latency.overhead_s, flops=latency.flops, bytes=latency.bytes,
        tensor_active=busy.tensor_active, sm_active=busy.sm_active, dram_active=busy.dram_active,
        clock_mhz=busy.clock_mhz, power_w=busy.power_w, bound=latency.bound,
    )  # fmt: skip


@dataclass(frozen=True)
class ServeSetup:
    """The validated inputs of one plan.

    Attributes:
        arch / gpu / strategy: the model, the GPU kind and the batching strategy; replicas: ``gpus / (tp·pp)``.
        wl / info: the workload (lengths, rate) and where it came from; roof: the replica roofline (under the
            request's static MoE imbalance factor); spec: the speculative decoder, if any, and its draft's KV
            bytes per token per GPU; warnings: collected by every stage (appended to in place).
    """

    arch: ModelArch
    gpu: GpuSpec
    strategy: BatchingStrategy
    replicas: int
    wl: Workload
    info: dict[str, Any]
    roof: ReplicaRoofline
    spec: SpeculativeDecoder | None
    draft_kv_per_gpu: float
    warnings: list[str] = field(default_factory=list)


def setup(req: ServeRequest) -> ServeSetup:
    """Stage 1: validate names and parallelism, read the workload, build the rooflines."""
    arch = load_model(req.model)
    gpu = get_gpu(req.gpu)
    _check_dtype(req.weight_dtype, "--weight-dtype")
    if req.expert_dtype is not None:
        _check_dtype(req.expert_dtype, "--expert-dtype")
    _check_dtype(req.kv_dtype, "--kv-dtype")
    strategy = ChunkedPrefill(req.chunk_tokens) if req.batching == "chunked" else get_strategy(req.batching)
    if req.kv_offload not in OFFLOAD_TIERS:
        raise InputError("--kv-offload", "", f"unknown tier {req.kv_offload!r} (allowed: {', '.join(OFFLOAD_TIERS)})")
    validate_parallel(arch, req.gpus, req.tp, req.pp, req.ep)
    if req.moe_imbalance != 1.0 and (not arch.is_moe or req.ep < 2):
        why = f"{arch.name} has no experts" if not arch.is_moe else "ep=1 leaves no rank hotter than another"
        raise InputError("--moe-imbalance", "", f"{why} (allowed: 1)")
    _check_unused(req)
    wl, info = _workload(req)
    seq_tokens = wl.prompt_tokens + wl.output_tokens
    # sliding-window layers (Gemma 2/3, Llama 4) hold at most their window: KV per token at the mean length
    kv_ctx = float(np.mean(seq_tokens))
    moe = MoeLoad.static(req.moe_imbalance) if req.moe_imbalance != 1.0 else None
    roof = build_roofline(
        arch,
        gpu,
        req.tp,
        req.pp,
        req.ep,
        req.weight_dtype,
        req.kv_dtype,
        kv_context_len=kv_ctx,
        moe=moe,
        expert_dtype=req.expert_dtype,
    )
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
    warnings: list[str] = []
    too_long = int(np.sum(seq_tokens > arch.max_position))
    if too_long:
        warnings.append(f"{too_long} request(s) exceed the model's context window of {arch.max_position} tokens")
    replicas = req.gpus // (req.tp * req.pp)
    return ServeSetup(arch, gpu, strategy, replicas, wl, info, roof, spec, draft_kv_per_gpu, warnings)


@dataclass(frozen=True)
class MemorySizing:
    """Per-GPU memory at the plan (bytes) and the KV capacity it leaves.

    Attributes:
        weights_per_gpu: the replica's weights (and the draft's) per GPU; free: left for the KV cache;
        kv_per_gpu: KV bytes per token per GPU (target + draft); path: the offload tier; cap: sequences that
        fit (HBM and offload); batch_cap: the scheduler's batch cap (``min(cap, max_seqs)``).
    """

    weights_per_gpu: float
    free: float
    kv_per_gpu: float
    path: OffloadPath
    cap: KvCapacity
    batch_cap: int


def size_memory(req: ServeRequest, s: ServeSetup) -> MemorySizing:
    """Stage 2: weights, activations and runtime per GPU; the KV cache in what is left (errors when nothing is)."""
    arch, gpu, roof, spec, wl = s.arch, s.gpu, s.roof, s.spec, s.wl
    seq_tokens = wl.prompt_tokens + wl.output_tokens
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
            f"{weight_label(req.weight_dtype, req.expert_dtype)} over tp·pp={roof.gpus}) plus "
            f"{RUNTIME_BYTES / 1e9:.1f} GB runtime, "
            f"but {gpu.name} offers {usable / 1e9:.1f} GB ({GPU_MEMORY_UTILIZATION:.0%} of "
            f"{gpu.hbm_bytes / 1e9:.0f} GB HBM); use more GPUs per replica (tp/pp) or a narrower --weight-dtype"
            f"{' or --expert-dtype' if arch.is_moe else ''}",
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
    kv_per_gpu = roof.kv_bytes_per_token_per_gpu + s.draft_kv_per_gpu
    path = offload_path(req.kv_offload, gpu, req.kv_offload_gb * 1e9 / s.replicas)
    cap = kv_capacity(free, kv_per_gpu, seq_tokens, req.block_size, path, roof.gpus)
    if cap.max_sequences < 1:
        raise InputError(
            "--prompt-tokens" if req.trace is None else req.trace,
            "",
            f"one sequence of {float(np.mean(seq_tokens)):.0f} tokens needs "
            f"{cap.bytes_per_sequence_per_gpu / 1e9:.2f} GB of KV per GPU but only {free / 1e9:.2f} GB is free "
            "after the weights",
        )
    return MemorySizing(weights_per_gpu, free, kv_per_gpu, path, cap, min(cap.max_sequences, req.max_seqs))


def run_batching(req: ServeRequest, s: ServeSetup, mem: MemorySizing) -> tuple[ReplicaSteps, BatchingResult]:
    """Stage 3: the strategy's queueing model; the HBM-only batch when streaming offloaded KV costs more."""
    wl = s.wl
    steps = ReplicaSteps(
        s.roof, s.spec, mem.path, mem.cap.hbm_sequences, wl.prompt_mean / 2, req.gpus <= s.gpu.gpus_per_node,
        req.chunk_tokens,
    )  # fmt: skip
    result = s.strategy.plan(steps, wl, mem.batch_cap, s.replicas)
    hbm_cap = min(mem.cap.hbm_sequences, req.max_seqs)
    if 1 <= hbm_cap < mem.batch_cap:
        hbm_only = s.strategy.plan(steps, wl, hbm_cap, s.replicas)
        if hbm_only.capacity_req_per_s > result.capacity_req_per_s:
            result = hbm_only
            s.warnings.append(
                f"the {mem.path.tier} KV offload tier lowers capacity here (streaming the offloaded KV costs more "
                "than the larger batch gains); planned with the HBM-only batch"
            )
    if result.saturated:
        s.warnings.append(
            f"rate {wl.rate_req_per_s:g} req/s exceeds the capacity {result.capacity_req_per_s:.3g} req/s: "
            "the queue grows without bound (TTFT infinite)"
        )
    return steps, result


@dataclass(frozen=True)
class OperatingPhases:
    """Prefill and decode at the operating point.

    Attributes:
        decode / prefill: the phases' rooflines (prefill: busy-pipeline activity with one batch's latency).
        decode_batch: sequences per decode round (≥ 1); prefill_tokens: prompt tokens per prefill iteration
            per pipeline stage.
    """

    decode: PhaseRoofline
    prefill: PhaseRoofline
    decode_batch: float
    prefill_tokens: float


def operating_phases(s: ServeSetup, steps: ReplicaSteps, result: BatchingResult) -> OperatingPhases:
    """Stage 4: the decode round and the prefill iteration at the batch the strategy chose."""
    roof, wl = s.roof, s.wl
    b = max(result.decode_batch, 1.0)
    decode_phase = steps.decode_phase(b, wl.decode_context_mean)
    # Prefill activity while busy: a full pipeline (pp prompts in flight) so every stage works.
    n_pre = result.prefill_prompts_per_batch * roof.pp
    p_mean = wl.prompt_mean
    busy = roof.iteration(n_pre * p_mean, n_pre * p_mean * (p_mean + 1) / 2, 0.0, micro_batches=roof.pp)
    prefill_phase = _with_time(busy, roof.prefill(p_mean, result.prefill_prompts_per_batch))
    return OperatingPhases(decode_phase, prefill_phase, b, n_pre * p_mean / roof.pp)


@dataclass(frozen=True)
class Economics:
    """Energy, cost and warm-up of the plan (idle_w: one idle GPU's power)."""

    energy: ServeEnergy
    cost_per_million_tokens_usd: float
    warmup: WarmupPlan
    idle_w: float


def economics(req: ServeRequest, s: ServeSetup, phases: OperatingPhases, result: BatchingResult) -> Economics:
    """Stage 5: energy per token from the phases' power and time shares, cost, weight-loading warm-up."""
    idle = idle_power_w(s.gpu)
    energy = serve_energy(
        phases.prefill.power_w, phases.decode.power_w, idle, result.prefill_fraction, result.decode_fraction,
        req.gpus, result.output_tokens_per_s, result.throughput_req_per_s,
    )  # fmt: skip
    prices = Prices(per_gpu_hour_usd=req.price_gpu_hour_usd, per_kwh_usd=req.price_kwh_usd, pue=req.pue)
    seconds_per_million = 1e6 / result.output_tokens_per_s if result.output_tokens_per_s > 0 else float("inf")
    cost = cost_usd(req.gpus * seconds_per_million / 3600.0, energy.energy_per_token_j * 1e6, prices)
    storage, host, label = _storage_profile(req.node_profile)
    warm = plan_warmup(
        s.roof.weight_bytes, s.roof.gpus, req.gpus, s.gpu,
        storage_read_bytes_per_s_per_node=storage, host_link_bytes_per_s=host, storage_source=label,
    )  # fmt: skip
    return Economics(energy, float(cost), warm, idle)
