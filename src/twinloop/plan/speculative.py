"""Speculative decoding: a draft model proposes ``k`` tokens, the target verifies them in one pass.

With a per-token acceptance probability ``α`` (independent across positions, Leviathan et al. 2023), one
draft-and-verify cycle yields on average ``(1 − α^(k+1)) / (1 − α)`` tokens (``k + 1`` when α = 1; 1 when
α = 0: the verify pass always produces one token of its own). A cycle costs ``k`` draft decode rounds
plus one target round carrying ``k + 1`` tokens per sequence, so the time per output token is
``(k·t_draft + t_verify) / E[tokens]``. The verify round reads the same weights and KV as a plain decode
round and computes ``k + 1`` times the FLOPs: while decode stays memory-bound the extra tokens are almost
free, which is where speculation pays. With α = 0 it is never faster than plain decoding.

The draft runs on the same GPUs with the same parallelism as the target and keeps its own KV cache, so it
also costs memory (weights and KV per token), which lowers the number of concurrent sequences.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from twinloop.errors import InputError
from twinloop.plan.serve_roofline import PhaseRoofline, ReplicaRoofline

MAX_SPEC_TOKENS = 16


def expected_tokens_per_step(k: int, alpha: float) -> float:
    """Expected output tokens per draft-and-verify cycle: ``(1 − α^(k+1)) / (1 − α)`` (``k + 1`` at α = 1)."""
    if k < 0:
        raise InputError("--spec-tokens", "", f"must be >= 0, got {k}")
    if not 0.0 <= alpha <= 1.0:
        raise InputError("--acceptance", "", f"must be in 0..1, got {alpha}")
    if alpha >= 1.0:
        return float(k + 1)
    return float((1.0 - alpha ** (k + 1)) / (1.0 - alpha))


def validate_spec(tokens: int, acceptance: float) -> None:
    """Raise :class:`InputError` for tokens outside 1..MAX_SPEC_TOKENS or acceptance outside 0..1."""
    if not 1 <= tokens <= MAX_SPEC_TOKENS:
        raise InputError("--spec-tokens", "", f"must be in 1..{MAX_SPEC_TOKENS}, got {tokens}")
    if not 0.0 <= acceptance <= 1.0:
        raise InputError("--acceptance", "", f"must be in 0..1, got {acceptance}")


def combine_phases(parts: Sequence[tuple[PhaseRoofline, float]], per: float = 1.0) -> PhaseRoofline:
    """Several iterations run back to back as one phase: ``parts`` are (iteration, count) pairs.

    Times, FLOPs and bytes add up (then are divided by ``per``, e.g. tokens per cycle); activities, clock and
    power are averaged weighted by time. The bound is that of the longest part.
    """
    times = np.array([float(np.mean(p.time_s)) * n for p, n in parts])
    w = times / max(times.sum(), 1e-30)

    def total(attr: str) -> float:
        return float(sum(float(np.mean(getattr(p, attr))) * n for p, n in parts)) / per

    def mean(attr: str) -> float:
        return float(sum(float(np.mean(getattr(p, attr))) * wi for (p, _), wi in zip(parts, w, strict=True)))

    return PhaseRoofline(
        time_s=total("time_s"),
        compute_s=total("compute_s"),
        memory_s=total("memory_s"),
        comm_s=total("comm_s"),
        overhead_s=float(sum(p.overhead_s * n for p, n in parts)) / per,
        flops=total("flops"),
        bytes=total("bytes"),
        tensor_active=mean("tensor_active"),
        sm_active=mean("sm_active"),
        dram_active=mean("dram_active"),
        clock_mhz=mean("clock_mhz"),
        power_w=mean("power_w"),
        bound=parts[int(np.argmax(times))][0].bound,
    )


@dataclass(frozen=True)
class SpeculativeDecoder:
    """Target and draft rooflines with ``tokens`` proposed per cycle at acceptance ``acceptance``.

    Attributes:
        target / draft: rooflines of the target and draft model on the same GPUs.
        tokens: draft tokens proposed per cycle (k).
        acceptance: probability each proposed token is accepted (α).
    """

    target: ReplicaRoofline
    draft: ReplicaRoofline
    tokens: int
    acceptance: float

    @property
    def tokens_per_cycle(self) -> float:
        """Expected output tokens per cycle."""
        return expected_tokens_per_step(self.tokens, self.acceptance)

    def decode(self, batch: float, context_tokens: float) -> PhaseRoofline:
        """Decode per output token: one cycle (k draft rounds + one verify round) over the tokens it yields."""
        draft = self.draft.decode(batch, context_tokens)
        verify = self.target.verify(batch, context_tokens, self.tokens + 1)
        return combine_phases([(draft, float(self.tokens)), (verify, 1.0)], per=self.tokens_per_cycle)

    def draft_memory_bytes_per_gpu(self) -> float:
        """Draft weights each GPU holds (bytes)."""
        return self.draft.weight_bytes / self.draft.gpus
