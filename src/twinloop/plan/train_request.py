"""What a user asks the training planner (:class:`TrainRequest`) and the resolved context it plans in.

Any parallelism field left ``None`` is chosen by the planner (the highest-throughput configuration that
fits in memory). Defaults: BF16 mixed precision, sequence length ``min(8192, max_position)``, a batch of
4,194,304 tokens (2^22, Llama 3 405B's initial batch), the power limit at TDP, Chinchilla's 20 tokens per
parameter as the training budget, flash attention without dropout (Llama-style training).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from twinloop.checked import Range, build, check_fields
from twinloop.errors import InputError
from twinloop.hardware.gpu import GpuSpec, get_gpu
from twinloop.hardware.power import GpuPowerModel
from twinloop.model.arch import ModelArch, load_model
from twinloop.model.precision import PrecisionPolicy, get_policy
from twinloop.plan.collectives import Topology, default_topology
from twinloop.plan.cost import Prices
from twinloop.plan.efficiency import DEFAULT_PUE, TrainEfficiency
from twinloop.plan.frameworks import DEFAULT_FRAMEWORK, get_framework
from twinloop.plan.parallel import ParallelConfig, Recompute
from twinloop.plan.workload import AttentionKernel, TrainWorkload, build_workload

DEFAULT_TOKENS_PER_BATCH = 4_194_304
DEFAULT_MAX_SEQ_LEN = 8192
CHINCHILLA_TOKENS_PER_PARAM = 20.0

PARALLEL_FIELDS = ("tp", "pp", "dp", "ep", "cp", "zero", "recompute", "sequence_parallel", "micro_batch", "interleave")

_POSITIVE = Range(ge=1)


@dataclass(frozen=True, kw_only=True)
class TrainRequest:
    """A training-plan request (frozen). Sizes in sequences/tokens, prices in USD, power in watts.

    Checked at construction (:mod:`twinloop.checked`: the planner's start-up cannot afford pydantic).
    """

    #: catalog model name or path to a Hugging Face config.json
    model: str
    #: catalog GPU name
    gpu: str
    gpus: Annotated[int, Range(ge=1, le=1_000_000)]
    tp: Annotated[int, _POSITIVE] | None = None
    pp: Annotated[int, _POSITIVE] | None = None
    dp: Annotated[int, _POSITIVE] | None = None
    ep: Annotated[int, _POSITIVE] | None = None
    cp: Annotated[int, _POSITIVE] | None = None
    zero: Annotated[int, Range(ge=0, le=3)] | None = None
    recompute: Recompute | None = None
    sequence_parallel: bool | None = None
    micro_batch: Annotated[int, _POSITIVE] | None = None
    interleave: Annotated[int, _POSITIVE] | None = None
    #: sequences per optimizer step
    global_batch: Annotated[int, _POSITIVE] | None = None
    #: tokens per optimizer step
    tokens_per_batch: Annotated[int, _POSITIVE] | None = None
    seq_len: Annotated[int, _POSITIVE] | None = None
    precision: str = "bf16"
    price_per_gpu_hour: Annotated[float, Range(ge=0)] = 2.0
    price_per_kwh: Annotated[float, Range(ge=0)] = 0.10
    pue: Annotated[float, Range(ge=1.0, le=5.0)] = DEFAULT_PUE
    train_tokens: Annotated[float, Range(gt=0)] | None = None
    power_limit_w: Annotated[float, Range(gt=0)] | None = None
    scaleout: str | None = None
    attention_kernel: AttentionKernel | None = None
    framework: str = DEFAULT_FRAMEWORK
    dropout: bool = False
    moe_zipf_s: Annotated[float, Range(ge=0)] = 0.0
    #: measured routing load factor
    moe_imbalance: Annotated[float, Range(gt=0, le=1000)] | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        check_fields(self)

    def fixed_parallelism(self) -> dict[str, int | str | bool]:
        """The parallelism choices the user made (the rest are searched)."""
        return {f: getattr(self, f) for f in PARALLEL_FIELDS if getattr(self, f) is not None}


def make_request(source: str = "plan train", **fields: Any) -> TrainRequest:
    """Build a :class:`TrainRequest`, turning every bad field into one-line :class:`InputError`."""
    return build(TrainRequest, fields, source)


@dataclass(frozen=True)
class TrainContext:
    """A request resolved against the catalogs: everything the formulas need."""

    request: TrainRequest
    arch: ModelArch
    gpu: GpuSpec
    policy: PrecisionPolicy
    workload: TrainWorkload
    topology: Topology
    power_model: GpuPowerModel
    seq_len: int
    global_batch: int
    power_limit_w: float
    prices: Prices
    train_tokens: float
    efficiency: TrainEfficiency

    def parallel_config(self) -> ParallelConfig | None:
        """The user's full configuration when every parallelism field was given (ep defaults to 1 for
        dense models, sequence parallelism to off when tp is 1), else None.
        """
        fixed = self.request.fixed_parallelism()
        if not self.arch.is_moe:
            fixed.setdefault("ep", 1)
        if fixed.get("tp") == 1:
            fixed.setdefault("sequence_parallel", False)
        if fixed.get("pp") == 1:
            fixed.setdefault("interleave", 1)
        if any(f not in fixed for f in PARALLEL_FIELDS):
            return None
        return ParallelConfig(**fixed)  # type: ignore[arg-type]


def resolve(req: TrainRequest) -> TrainContext:
    """Look up the model, GPU and precision policy and derive the batch, sequence and power defaults."""
    arch = load_model(req.model)
    gpu = get_gpu(req.gpu)
    policy = get_policy(req.precision)
    seq_len = req.seq_len or min(DEFAULT_MAX_SEQ_LEN, arch.max_position)
    both = req.global_batch is not None and req.tokens_per_batch is not None
    if both and req.global_batch * seq_len != req.tokens_per_batch:  # type: ignore[operator]
        raise InputError(
            "--tokens-per-batch",
            "",
            f"{req.tokens_per_batch} disagrees with --global-batch {req.global_batch} × seq_len {seq_len}; "
            "give one of them",
        )
    if req.tokens_per_batch is not None and req.tokens_per_batch < seq_len:  # it would be planned as one sequence
        raise InputError(
            "--tokens-per-batch",
            "",
            f"{req.tokens_per_batch} is less than one sequence (allowed: >= seq_len {seq_len})",
        )
    if req.moe_imbalance is not None and not arch.is_moe:  # as `plan serve` says: it would be ignored
        raise InputError("--moe-imbalance", "", f"{arch.name} has no experts (allowed: leave it out)")
    if req.global_batch is not None:
        global_batch = req.global_batch
    else:
        tokens = req.tokens_per_batch or DEFAULT_TOKENS_PER_BATCH
        global_batch = max(1, round(tokens / seq_len))
    limit = req.power_limit_w if req.power_limit_w is not None else gpu.tdp_w
    if not gpu.power_limit_min_w <= limit <= gpu.power_limit_max_w:
        raise InputError(
            "--power-limit",
            "",
            f"{limit:g} W outside {gpu.name}'s range {gpu.power_limit_min_w:g}-{gpu.power_limit_max_w:g} W",
        )
    framework = get_framework(req.framework)
    kernel = req.attention_kernel or framework.attention_kernel
    workload = build_workload(arch, policy, gpu, seq_len, kernel, req.dropout)
    return TrainContext(
        request=req,
        arch=arch,
        gpu=gpu,
        policy=policy,
        workload=workload,
        topology=default_topology(gpu, req.scaleout),
        power_model=GpuPowerModel(gpu),
        seq_len=seq_len,
        global_batch=global_batch,
        power_limit_w=limit,
        prices=Prices(req.price_per_gpu_hour, req.price_per_kwh, req.pue),
        train_tokens=req.train_tokens or CHINCHILLA_TOKENS_PER_PARAM * workload.params_total,
        efficiency=framework.efficiency(),
    )
