"""What ``plan serve`` is asked: :class:`ServeRequest`, validated at load (:func:`build_request`).

Apart from :mod:`twinloop.plan.serve` so that the planner's stages can name the request's type without
importing the planner that runs them.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from twinloop.errors import InputError, pydantic_error
from twinloop.plan.batching import DEFAULT_CHUNK_TOKENS
from twinloop.plan.efficiency import DEFAULT_PUE

#: vLLM's default ``max_num_seqs``: the scheduler's cap on sequences in one batch.
DEFAULT_MAX_SEQS = 256
#: vLLM's default paged-KV block size, tokens.
DEFAULT_BLOCK_SIZE = 16


class ServeRequest(BaseModel):
    """Everything ``plan serve`` needs. ``gpus`` is the whole deployment; one replica uses ``tp·pp`` GPUs.

    ``rate_req_per_s`` is the total arrival rate (None: offline, plan at capacity); with a ``trace`` it
    rescales the trace's own rate. ``kv_offload_gb`` is the offload tier's capacity over the deployment.
    MoE with ``ep > 1``: ``moe_imbalance`` is the static hottest-rank factor; ``router`` / ``placement`` /
    ``routing_steps`` / ``routing_seed`` / ``routing_burst_share`` simulate routing, ``routing_file`` reads a
    ``plan moe --out`` run instead (``router`` then picks its row).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str
    gpu: str = "h100-sxm"
    gpus: int = Field(8, ge=1, le=100_000)
    tp: int = Field(8, ge=1, le=1024)
    pp: int = Field(1, ge=1, le=1024)
    ep: int = Field(1, ge=1, le=1024)
    weight_dtype: str = "bf16"
    expert_dtype: str | None = None
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
    moe_imbalance: float = Field(1.0, gt=0, le=100)  # static: hottest EP rank's routed load / balanced
    router: str | None = None
    placement: str = "contiguous"
    routing_steps: int = Field(32, ge=1, le=10_000)
    routing_file: str | None = None
    routing_seed: int = 0
    routing_burst_share: float = Field(0.2, ge=0, le=1)  # share of tokens in the hot-expert burst (0: none)


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
    "routing_file": "--routing",
}
