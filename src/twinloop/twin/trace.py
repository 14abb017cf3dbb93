"""Serving load from an Azure-format request trace (TIMESTAMP, ContextTokens, GeneratedTokens).

Requests are assigned round-robin to a job's replicas. Per second and replica, the trace gives the prefill
tokens arriving and the decode tokens demanded: a request decodes its generated tokens at
``DECODE_TOKENS_PER_S_PER_SEQ`` (a guess) starting when it arrives, so overlapping requests add up (continuous
batching). The trace wraps around when the run is longer than the trace.

The packaged sample ``twinloop/data/azure_conv_sample.csv`` is derived from the Azure Public Dataset,
AzureLLMInferenceTrace_conv (2023-11-16), CC BY 4.0, Microsoft Azure.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from twinloop.errors import InputError

DECODE_TOKENS_PER_S_PER_SEQ = 30.0
DATA_DIR = Path(__file__).resolve().parent.parent / "data"


@dataclass(frozen=True)
class ServingLoad:
    """Per-second demand, shape ``(seconds, replicas)``: prefill tokens and decode tokens."""

    prefill_tokens: NDArray[np.float32]
    decode_tokens: NDArray[np.float32]
    requests: int

    @property
    def seconds(self) -> int:
        """Length of the (wrapping) load in seconds."""
        return int(self.prefill_tokens.shape[0])

    def at(self, t_s: float) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
        """(prefill, decode) tokens per replica for the second containing ``t_s`` (wrapping)."""
        i = int(t_s) % self.seconds
        return self.prefill_tokens[i], self.decode_tokens[i]


def _parse_ts(text: str) -> float:
    head, _, frac = text.strip().partition(".")
    base = datetime.strptime(head, "%Y-%m-%d %H:%M:%S").timestamp()
    return base + (float("0." + frac) if frac else 0.0)


def read_trace(path: str | Path) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """(arrival_s from the first request, context tokens, generated tokens). Lines starting with '#' are skipped."""
    p = Path(path)
    lines = [ln for ln in p.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    if not lines or [c.strip() for c in lines[0].split(",")] != ["TIMESTAMP", "ContextTokens", "GeneratedTokens"]:
        raise InputError(str(p), "header", "expected columns TIMESTAMP,ContextTokens,GeneratedTokens")
    arrivals, ctx, gen = [], [], []
    for n, line in enumerate(lines[1:], start=2):
        parts = line.split(",")
        try:
            arrivals.append(_parse_ts(parts[0]))
            ctx.append(float(parts[1]))
            gen.append(float(parts[2]))
        except (ValueError, IndexError):
            raise InputError(str(p), f"line {n}", "expected 'YYYY-MM-DD HH:MM:SS.ffff,int,int'") from None
    if not arrivals:
        raise InputError(str(p), "", "trace has no requests")
    t = np.asarray(arrivals)
    order = np.argsort(t, kind="stable")
    return t[order] - t[order][0], np.asarray(ctx)[order], np.asarray(gen)[order]


def serving_load(path: str | Path, replicas: int, rate_scale: float = 1.0) -> ServingLoad:
    """Per-second, per-replica prefill and decode demand from a trace (tokens scaled by ``rate_scale``)."""
    arrival_s, ctx, gen = read_trace(path)
    seconds = int(np.ceil(arrival_s[-1])) + 1
    rep = np.arange(arrival_s.size) % replicas
    sec = arrival_s.astype(np.int64)
    prefill = np.zeros((seconds, replicas))
    np.add.at(prefill, (sec, rep), ctx * rate_scale)
    # Decode demand: a rate of DECODE_TOKENS_PER_S_PER_SEQ from arrival until the request's tokens are out.
    rate = np.zeros((seconds + 1, replicas))
    end = np.minimum(arrival_s + gen / DECODE_TOKENS_PER_S_PER_SEQ, seconds).astype(np.int64)
    np.add.at(rate, (sec, rep), DECODE_TOKENS_PER_S_PER_SEQ * rate_scale)
    np.add.at(rate, (np.maximum(end, sec + 1), rep), -DECODE_TOKENS_PER_S_PER_SEQ * rate_scale)
    decode = np.maximum(np.cumsum(rate, axis=0)[:seconds], 0.0)
    return ServingLoad(prefill.astype(np.float32), decode.astype(np.float32), int(arrival_s.size))


def resolve_trace_path(trace: str, base_dir: str) -> Path:
    """A trace path relative to the scenario file, or a packaged data file (``package:NAME``)."""
    if trace.startswith("package:"):
        return DATA_DIR / trace.removeprefix("package:")
    p = Path(trace)
    return p if p.is_absolute() or not base_dir else Path(base_dir) / p
