"""Batching strategies: how each sets the decode batch, time to first token (TTFT) and time per output token.

Every strategy turns a workload (request rate, prompt and output length samples) and a replica's step
times (a :class:`StepModel`, from the roofline) into an operating point. The formulas are steady-state
*fluid* approximations with one queue each, documented per strategy:

* Little's law sets the decode batch: ``B = λ · O · TPOT`` (λ requests/s per replica, O mean output tokens).
* Prompts queue for the prefill "server"; their wait is Pollaczek–Khinchine's M/G/1 mean
  ``W = λ·E[S²] / (2·(1 − ρ))`` with ``ρ = λ·E[S]``, ``S`` the per-prompt service time computed from every
  prompt length in the workload (so a trace's heavy tail raises the wait).
* A request arriving mid-iteration waits on average half an iteration (the residual) before its prefill.

Without a request rate (``rate_req_per_s=None``) the plan is the *offline* operating point: as many
concurrent sequences as fit (the capacity), throughput at that point, and TTFT without queueing. When the
rate exceeds the capacity the queue grows without bound: ``saturated`` is set, throughput is the capacity
and TTFT is infinite.

Strategies (registry :data:`BATCHING_STRATEGIES`): ``static`` (fixed batch filled before it starts, runs
until its longest request ends), ``dynamic`` (server takes whatever queued when it frees up, Triton-style),
``continuous`` (iteration-level scheduling, Orca/vLLM; prefills stall decodes), ``chunked`` (prefill split
into chunks that ride along decode steps under a token budget, Sarathi-Serve/vLLM), ``disaggregated``
(separate prefill and decode replicas, KV shipped between them; Splitwise/DistServe).

These are models, not simulations; their TTFT is a mean, not a percentile.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar, Protocol

import numpy as np
from numpy.typing import NDArray

from twinloop.errors import InputError

#: Prefill token budget per step for chunked prefill (a guess inside the 512-2048 range Sarathi-Serve
#: evaluated and vLLM uses as ``max_num_batched_tokens`` for chunked prefill).
DEFAULT_CHUNK_TOKENS = 2048

_BISECT_ITERS = 60
#: Most prefill/decode splits the disaggregated strategy evaluates under a rate (an even grid beyond that).
_MAX_SPLITS = 64


class StepModel(Protocol):
    """Step times of one model replica (seconds); implemented by the serving roofline."""

    def decode_s(self, batch: float, context_tokens: float) -> float:
        """Time per output token of a decode iteration over ``batch`` sequences of mean ``context_tokens``."""
        ...

    def prefill_latency_s(self, prompt_tokens: NDArray[np.float64]) -> NDArray[np.float64]:
        """Prefill latency of one prompt of each given length (through every pipeline stage)."""
        ...

    def prefill_busy_s(self, prompt_tokens: NDArray[np.float64]) -> NDArray[np.float64]:
        """Time one prompt occupies the replica (the latency divided over pipeline stages in flight)."""
        ...

    def batch_prefill_s(self, n_prompts: float, prompt_tokens: float) -> float:
        """Prefill of ``n_prompts`` prompts of ``prompt_tokens`` tokens in one batch."""
        ...

    def mixed_s(self, batch: float, context_tokens: float, prefill_tokens: float) -> float:
        """One iteration with ``batch`` decode tokens plus ``prefill_tokens`` prompt tokens (chunked)."""
        ...

    def kv_transfer_s(self, prompt_tokens: float) -> float:
        """Shipping one prompt's KV from a prefill replica to a decode replica."""
        ...


@dataclass(frozen=True)
class Workload:
    """What the replicas must serve.

    Attributes:
        prompt_tokens: prompt length of each request (or one value for fixed lengths), tokens.
        output_tokens: output length of each request (same length as ``prompt_tokens``), tokens.
        rate_req_per_s: total arrival rate over all replicas (requests/s); ``None`` = offline (saturation).
    """

    prompt_tokens: NDArray[np.float64]
    output_tokens: NDArray[np.float64]
    rate_req_per_s: float | None

    @property
    def prompt_mean(self) -> float:
        """Mean prompt length, tokens."""
        return float(np.mean(self.prompt_tokens))

    @property
    def output_mean(self) -> float:
        """Mean output length, tokens."""
        return float(np.mean(self.output_tokens))

    @property
    def decode_context_mean(self) -> float:
        """Mean context a decode step attends to, weighted by output tokens: ``E[O·P + O(O-1)/2] / E[O]``."""
        p, o = self.prompt_tokens, self.output_tokens
        return float(np.mean(o * p + o * (o - 1) / 2)) / max(float(np.mean(o)), 1e-12)

    def output_max_of(self, batch: float) -> float:
        """Expected longest output among ``batch`` requests (the ``B/(B+1)`` quantile), tokens."""
        q = float(np.clip(batch / (batch + 1.0), 0.0, 1.0))
        return float(np.quantile(self.output_tokens, q))


@dataclass(frozen=True)
class BatchingResult:
    """An operating point; rates and throughputs are totals over all replicas.

    Attributes:
        strategy: registry name.
        decode_batch: mean sequences in a decode iteration (per decoding replica).
        prefill_prompts_per_batch: prompts prefilled together (static/dynamic: the batch; else 1).
        ttft_s / tpot_s / queue_wait_s: mean time to first token, per output token, and in queue (s).
        throughput_req_per_s / output_tokens_per_s / prompt_tokens_per_s: served totals.
        capacity_req_per_s: the highest sustainable total rate at this configuration.
        saturated: the requested rate exceeds the capacity (TTFT is then infinite).
        offline: no rate was given; the point is the capacity.
        prefill_fraction / decode_fraction / idle_fraction: share of GPU time in each phase, averaged over
            all replicas (sums to 1).
        prefill_replicas / decode_replicas: replicas per role (both = all replicas unless disaggregated).
        chunk_tokens: token budget per iteration (chunked prefill), else 0.
    """

    strategy: str
    decode_batch: float
    prefill_prompts_per_batch: float
    ttft_s: float
    tpot_s: float
    queue_wait_s: float
    throughput_req_per_s: float
    output_tokens_per_s: float
    prompt_tokens_per_s: float
    capacity_req_per_s: float
    saturated: bool
    offline: bool
    prefill_fraction: float
    decode_fraction: float
    idle_fraction: float
    prefill_replicas: int
    decode_replicas: int
    chunk_tokens: int = 0


def _bisect(f: Callable[[float], float], lo: float, hi: float) -> float:
    """Root of ``f`` in [lo, hi] given f(lo) > 0 >= f(hi)."""
    for _ in range(_BISECT_ITERS):
        mid = 0.5 * (lo + hi)
        if f(mid) > 0:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def _mg1_wait_s(rate: float, service: NDArray[np.float64]) -> float:
    """Pollaczek–Khinchine mean wait of an M/G/1 queue (s); infinite when ρ >= 1."""
    rho = rate * float(np.mean(service))
    if rho >= 1.0:
        return float("inf")
    return rate * float(np.mean(service * service)) / (2.0 * (1.0 - rho))


def _result(
    name: str,
    wl: Workload,
    n: int,
    rate: float,
    capacity: float,
    saturated: bool,
    *,
    decode_batch: float,
    prefill_prompts_per_batch: float,
    ttft_s: float,
    tpot_s: float,
    queue_wait_s: float,
    prefill_fraction: float,
    decode_fraction: float,
    prefill_replicas: int | None = None,
    decode_replicas: int | None = None,
    chunk_tokens: int = 0,
) -> BatchingResult:
    """Assemble a result from per-replica ``rate`` and ``capacity`` (requests/s) on ``n`` replicas."""
    served = min(rate, capacity)
    pre = float(np.clip(prefill_fraction, 0.0, 1.0))
    dec = float(np.clip(decode_fraction, 0.0, 1.0))
    if pre + dec > 1.0:
        pre, dec = pre / (pre + dec), dec / (pre + dec)
    return BatchingResult(
        strategy=name,
        decode_batch=decode_batch,
        prefill_prompts_per_batch=prefill_prompts_per_batch,
        ttft_s=ttft_s,
        tpot_s=tpot_s,
        queue_wait_s=queue_wait_s,
        throughput_req_per_s=served * n,
        output_tokens_per_s=served * n * wl.output_mean,
        prompt_tokens_per_s=served * n * wl.prompt_mean,
        capacity_req_per_s=capacity * n,
        saturated=saturated,
        offline=wl.rate_req_per_s is None,
        prefill_fraction=pre,
        decode_fraction=dec,
        idle_fraction=max(0.0, 1.0 - pre - dec),
        prefill_replicas=n if prefill_replicas is None else prefill_replicas,
        decode_replicas=n if decode_replicas is None else decode_replicas,
        chunk_tokens=chunk_tokens,
    )


class BatchingStrategy(ABC):
    """Base class: one batching strategy. Subclasses set ``name`` and implement :meth:`plan`."""

    name: ClassVar[str] = ""

    @abstractmethod
    def plan(self, step: StepModel, wl: Workload, max_sequences: int, n_replicas: int) -> BatchingResult:
        """The operating point for ``wl`` on ``n_replicas`` replicas holding ``max_sequences`` each."""

    @staticmethod
    def _per_replica_rate(wl: Workload, n: int) -> float | None:
        return None if wl.rate_req_per_s is None else wl.rate_req_per_s / n


class _BatchThenDecode(BatchingStrategy):
    """Shared by static and dynamic batching: a batch is prefilled together, then decoded to its end."""

    def batch_time_s(self, step: StepModel, wl: Workload, b: float) -> tuple[float, float]:
        """(prefill, decode) time of one batch of ``b`` requests; the batch runs until its longest output."""
        prefill = step.batch_prefill_s(b, wl.prompt_mean)
        decode = wl.output_max_of(b) * step.decode_s(b, wl.decode_context_mean)
        return prefill, decode


class StaticBatching(_BatchThenDecode):
    """Fixed batch of ``max_sequences``: waits until the batch is full, then runs it to its longest request.

    TTFT = fill wait ``(B-1)/(2λ)`` + wait for the server (M/D/1 with batches arriving at λ/B:
    ``ρT/(2(1-ρ))``) + prefill of the whole batch. Finished sequences stay as padding until the batch ends.
    """

    name = "static"

    def plan(self, step: StepModel, wl: Workload, max_sequences: int, n_replicas: int) -> BatchingResult:
        """Full batches of ``max_sequences``: capacity, then TTFT from the fill and M/D/1 waits plus the prefill."""
        b = float(max_sequences)
        t_pre, t_dec = self.batch_time_s(step, wl, b)
        t_batch = t_pre + t_dec
        cap = b / t_batch
        lam = self._per_replica_rate(wl, n_replicas)
        rate = cap if lam is None else lam
        saturated = lam is not None and lam >= cap
        if lam is None:
            wait = 0.0
        elif saturated:
            wait = float("inf")
        else:
            rho = lam * t_batch / b
            wait = (b - 1) / (2 * lam) + rho * t_batch / (2 * (1 - rho))
        served = min(rate, cap)
        return _result(
            self.name, wl, n_replicas, rate, cap, saturated,
            decode_batch=b, prefill_prompts_per_batch=b, ttft_s=wait + t_pre,
            tpot_s=step.decode_s(b, wl.decode_context_mean), queue_wait_s=wait,
            prefill_fraction=served / b * t_pre, decode_fraction=served / b * t_dec,
        )  # fmt: skip


class DynamicBatching(_BatchThenDecode):
    """The server takes every queued request (up to ``max_sequences``) whenever it frees up.

    The batch solves ``B = λ·T_batch(B)`` (clipped to [1, max]); a new request waits for the running batch's
    residual ``ρ·T/2`` and is then prefilled with its batch.
    """

    name = "dynamic"

    def plan(self, step: StepModel, wl: Workload, max_sequences: int, n_replicas: int) -> BatchingResult:
        """The batch size that solves ``B = λ·T_batch(B)``, then TTFT and TPOT at that batch."""
        c = float(max_sequences)

        def t_batch(b: float) -> float:
            return sum(self.batch_time_s(step, wl, b))

        cap = c / t_batch(c)
        lam = self._per_replica_rate(wl, n_replicas)
        saturated = lam is not None and lam >= cap
        if lam is None or saturated:
            b = c
        elif lam * t_batch(1.0) <= 1.0:
            b = 1.0
        else:
            b = _bisect(lambda x: lam * t_batch(x) - x, 1.0, c)
        t_pre, t_dec = self.batch_time_s(step, wl, b)
        rate = cap if lam is None else lam
        served = min(rate, cap)
        rho = min(1.0, served * (t_pre + t_dec) / b)
        wait = float("inf") if saturated else (0.0 if lam is None else rho * (t_pre + t_dec) / 2)
        return _result(
            self.name, wl, n_replicas, rate, cap, saturated,
            decode_batch=b, prefill_prompts_per_batch=b, ttft_s=wait + t_pre,
            tpot_s=step.decode_s(b, wl.decode_context_mean), queue_wait_s=wait,
            prefill_fraction=served / b * t_pre, decode_fraction=served / b * t_dec,
        )  # fmt: skip


def _decode_batch(lam: float, out: float, tpot: Callable[[float], float], cap: float) -> float:
    """Little's law fixed point ``B = λ·O·TPOT(B)`` on [0, cap] (cap when it does not close)."""

    def f(b: float) -> float:
        return lam * out * tpot(b) - b

    if f(cap) > 0:
        return cap
    return _bisect(f, 0.0, cap)


class ContinuousBatching(BatchingStrategy):
    """Iteration-level scheduling (Orca, vLLM): sequences join and leave the batch at every step.

    Prefills run as their own iterations and stall every decoding sequence, so
    ``TPOT = t_decode(B) / (1 − ρ_prefill)`` with ``ρ_prefill = λ·E[t_prefill]``; ``B = λ·O·TPOT``.
    TTFT = M/G/1 wait on prefills + the prefill + half a decode iteration.
    """

    name = "continuous"

    def plan(self, step: StepModel, wl: Workload, max_sequences: int, n_replicas: int) -> BatchingResult:
        """Capacity from prefill busy time and full-batch decode, the decode batch by Little's law, TTFT by M/G/1."""
        c = float(max_sequences)
        ctx, out = wl.decode_context_mean, wl.output_mean
        busy = step.prefill_busy_s(wl.prompt_tokens)
        latency = float(np.mean(step.prefill_latency_s(wl.prompt_tokens)))
        cap = 1.0 / (float(np.mean(busy)) + out * step.decode_s(c, ctx) / c)
        lam = self._per_replica_rate(wl, n_replicas)
        saturated = lam is not None and lam >= cap
        rate = cap if lam is None else lam
        served = min(rate, cap)
        rho_p = served * float(np.mean(busy))

        def tpot(b: float) -> float:
            return step.decode_s(max(b, 1.0), ctx) / max(1.0 - rho_p, 1e-9)

        b = c if lam is None or saturated else _decode_batch(lam, out, tpot, c)
        b_eff = max(b, 1.0)
        if lam is None:
            wait = 0.0
        elif saturated:
            wait = float("inf")
        else:
            wait = _mg1_wait_s(lam, busy)
        residual = step.decode_s(b_eff, ctx) / 2
        return _result(
            self.name, wl, n_replicas, rate, cap, saturated,
            decode_batch=b, prefill_prompts_per_batch=1.0, ttft_s=wait + latency + residual,
            tpot_s=tpot(b), queue_wait_s=wait, prefill_fraction=rho_p,
            decode_fraction=served * out * step.decode_s(b_eff, ctx) / b_eff,
        )  # fmt: skip


class ChunkedPrefill(BatchingStrategy):
    """Chunked prefill (Sarathi-Serve; vLLM): each iteration carries the decode tokens of ``B`` sequences plus
    up to ``chunk_tokens − B`` prompt tokens, so prefills no longer stall decodes outright.

    Fluid steady state: an iteration of length τ carries ``B = λ·O·τ`` decode tokens and ``λ·P·τ`` prompt
    tokens, ``τ = t_mixed(B, λ·P·τ)``. A prompt is served at ``chunk_tokens − B`` tokens per iteration:
    ``S = P·τ/(chunk − B)``, queued M/G/1; TTFT = wait + S + τ/2.
    """

    name = "chunked"

    def __init__(self, chunk_tokens: int = DEFAULT_CHUNK_TOKENS) -> None:
        self.chunk_tokens = chunk_tokens

    def _tau_max(self, wl: Workload, lam: float, cap: float) -> float:
        """Longest iteration at rate ``lam`` that keeps the batch within memory and the token budget."""
        out, pro = wl.output_mean, wl.prompt_mean
        return min(cap / (lam * out), self.chunk_tokens / (lam * (out + pro)))

    def _excess_s(self, step: StepModel, wl: Workload, lam: float, tau: float) -> float:
        """Iteration time needed minus ``tau`` when iterations of ``tau`` carry rate ``lam``'s tokens."""
        out, pro = wl.output_mean, wl.prompt_mean
        return step.mixed_s(lam * out * tau, wl.decode_context_mean, lam * pro * tau) - tau

    def _step_s(self, step: StepModel, wl: Workload, lam: float, cap: float) -> float | None:
        """Iteration time τ at per-replica rate ``lam``; None when no τ fits the budget and memory."""
        tau_hi = self._tau_max(wl, lam, cap)
        if self._excess_s(step, wl, lam, tau_hi) > 0:
            return None
        return _bisect(lambda tau: self._excess_s(step, wl, lam, tau), 0.0, tau_hi)

    def plan(self, step: StepModel, wl: Workload, max_sequences: int, n_replicas: int) -> BatchingResult:
        """Capacity as the highest rate whose iterations fit; the iteration time and TTFT at the served rate."""
        c = float(max_sequences)
        ctx, out = wl.decode_context_mean, wl.output_mean

        def feasible(lam: float) -> bool:
            return lam > 0 and self._excess_s(step, wl, lam, self._tau_max(wl, lam, c)) <= 0

        lo, hi = 0.0, 1.0
        while feasible(hi) and hi < 1e9:
            lo, hi = hi, hi * 2
        for _ in range(_BISECT_ITERS):
            mid = 0.5 * (lo + hi)
            if feasible(mid):
                lo = mid
            else:
                hi = mid
        cap = lo
        lam = self._per_replica_rate(wl, n_replicas)
        saturated = lam is not None and lam >= cap
        rate = cap if lam is None else lam
        served = min(rate, cap)
        tau = self._step_s(step, wl, served, c) if served > 0 else None
        if tau is None:  # exactly at capacity: take the last feasible point
            tau = self._step_s(step, wl, served * (1 - 1e-9), c) or step.mixed_s(c, ctx, 0.0)
        b = served * out * tau
        room = max(self.chunk_tokens - b, 1.0)
        service = np.maximum(wl.prompt_tokens * tau / room, tau)
        if lam is None:
            wait = 0.0
        elif saturated:
            wait = float("inf")
        else:
            wait = _mg1_wait_s(lam, service)
        busy = float(np.mean(step.prefill_busy_s(wl.prompt_tokens)))
        b_eff = max(b, 1.0)
        return _result(
            self.name, wl, n_replicas, rate, cap, saturated,
            decode_batch=b, prefill_prompts_per_batch=1.0, ttft_s=wait + float(np.mean(service)) + tau / 2,
            tpot_s=tau, queue_wait_s=wait, prefill_fraction=served * busy,
            decode_fraction=served * out * step.decode_s(b_eff, ctx) / b_eff, chunk_tokens=self.chunk_tokens,
        )  # fmt: skip


class Disaggregated(BatchingStrategy):
    """Prefill/decode disaggregation (Splitwise, DistServe): some replicas only prefill, the others only decode.

    The split maximizes capacity (offline) or, with a rate, minimizes TTFT + O·TPOT among the stable
    splits. Prefill replicas form M/G/1 queues at ``λ/n_prefill`` each; decode replicas run continuous
    batching without prefill stalls; shipping each prompt's KV adds ``t_kv/(O−1)`` to TPOT.
    """

    name = "disaggregated"

    def plan(self, step: StepModel, wl: Workload, max_sequences: int, n_replicas: int) -> BatchingResult:
        """The prefill/decode split (most capacity offline, least TTFT + O·TPOT at a rate) and its operating point."""
        if n_replicas < 2:
            raise InputError(
                "--batching", "disaggregated", "needs at least 2 replicas (gpus >= 2 x tp x pp) to split roles"
            )
        c = float(max_sequences)
        ctx, out = wl.decode_context_mean, wl.output_mean
        busy = step.prefill_busy_s(wl.prompt_tokens)
        latency = float(np.mean(step.prefill_latency_s(wl.prompt_tokens)))
        transfer = step.kv_transfer_s(wl.prompt_mean) / max(out - 1.0, 1.0)
        t_dec_c = step.decode_s(c, ctx)
        splits = np.arange(1, n_replicas)
        caps = np.minimum(splits / float(np.mean(busy)), (n_replicas - splits) * c / (out * t_dec_c))
        lam = wl.rate_req_per_s

        def point(n_p: int) -> tuple[float, float, float, float]:
            """(ttft, tpot, wait, decode batch) at split ``n_p`` for the given rate."""
            assert lam is not None
            wait = _mg1_wait_s(lam / n_p, busy)
            b = _decode_batch(lam / (n_replicas - n_p), out, lambda x: step.decode_s(max(x, 1.0), ctx), c)
            tpot = step.decode_s(max(b, 1.0), ctx) + transfer
            return wait + latency, tpot, wait, b

        best = int(splits[int(np.argmax(caps))])
        cap_total = float(caps.max())
        saturated = lam is not None and lam >= cap_total
        if lam is None or saturated:
            n_p, b, wait = best, c, (0.0 if lam is None else float("inf"))
            ttft, tpot = wait + latency, t_dec_c + transfer
        else:
            stable = [int(s) for s, cp in zip(splits, caps, strict=True) if cp > lam]
            if len(stable) > _MAX_SPLITS:  # many replicas: search an even grid of the stable splits
                stable = sorted({stable[int(i)] for i in np.linspace(0, len(stable) - 1, _MAX_SPLITS)})
            points = {s: point(s) for s in stable}
            n_p = min(stable, key=lambda s: points[s][0] + out * points[s][1])
            ttft, tpot, wait, b = points[n_p]
        n_d = n_replicas - n_p
        total = cap_total if lam is None else min(lam, cap_total)
        b_eff = max(b, 1.0)
        prefill_frac = total / n_p * float(np.mean(busy)) * n_p / n_replicas
        decode_frac = total / n_d * out * step.decode_s(b_eff, ctx) / b_eff * n_d / n_replicas
        rate = total / n_replicas if lam is None else lam / n_replicas
        return _result(
            self.name, wl, n_replicas, rate, cap_total / n_replicas, saturated,
            decode_batch=b, prefill_prompts_per_batch=1.0, ttft_s=ttft, tpot_s=tpot, queue_wait_s=wait,
            prefill_fraction=prefill_frac, decode_fraction=decode_frac,
            prefill_replicas=n_p, decode_replicas=n_d,
        )  # fmt: skip


BATCHING_STRATEGIES: dict[str, type[BatchingStrategy]] = {
    s.name: s for s in (StaticBatching, DynamicBatching, ContinuousBatching, ChunkedPrefill, Disaggregated)
}


def get_strategy(name: str) -> BatchingStrategy:
    """A batching strategy by registry name.

    Raises:
        InputError: unknown name (listing the known ones).
    """
    if name not in BATCHING_STRATEGIES:
        raise InputError("--batching", "", f"unknown strategy {name!r} (allowed: {', '.join(BATCHING_STRATEGIES)})")
    return BATCHING_STRATEGIES[name]()
