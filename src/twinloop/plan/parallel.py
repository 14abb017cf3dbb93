"""Parallelism configurations for training: one validated config, or arrays of all valid ones.

Rank order (Megatron-LM's): tensor parallel innermost, then context parallel, then data parallel, then
pipeline parallel outermost; the expert-parallel group is carved out of the data×context ranks (stride
``tp``). So a TP group of at most ``gpus_per_node`` stays on NVLink, and everything else spans nodes once
the inner groups fill a node.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from twinloop.errors import InputError
from twinloop.model.arch import ModelArch

Recompute = Literal["none", "selective", "full"]
RECOMPUTE_MODES: tuple[Recompute, ...] = ("none", "selective", "full")

#: Search bounds (the enumeration's candidate lists); configs outside them are still valid when given.
MAX_MICRO_BATCH = 16
MAX_CONTEXT_PARALLEL = 64
MAX_INTERLEAVE = 8


@dataclass(frozen=True)
class ParallelConfig:
    """One way to lay a training job on the GPUs.

    Attributes:
        tp / pp / dp / cp: tensor, pipeline, data and context (sequence-sharded attention) parallel degrees;
            ``tp·pp·dp·cp`` is the number of GPUs.
        ep: expert-parallel degree (MoE only), a divisor of ``dp·cp`` and of the number of routed experts.
        zero: ZeRO stage 0-3 over the data-parallel group (1 optimizer states, 2 + gradients, 3 + weights).
        recompute: activation recomputation ``none``, ``selective`` (attention core) or ``full`` (whole layer).
        sequence_parallel: shard norms/dropout activations over the TP group (Korthikanti et al. 2022).
        micro_batch: sequences per micro-batch on one pipeline.
        interleave: virtual pipeline stages per device (1 = plain 1F1B).
    """

    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: int = 1
    cp: int = 1
    zero: int = 0
    recompute: Recompute = "none"
    sequence_parallel: bool = False
    micro_batch: int = 1
    interleave: int = 1

    @property
    def gpus(self) -> int:
        """GPUs this config occupies."""
        return self.tp * self.pp * self.dp * self.cp


def validate_config(
    cfg: ParallelConfig, arch: ModelArch, gpus_per_node: int, gpus: int, global_batch: int, seq_len: int
) -> None:
    """Raise :class:`InputError` naming the first reason ``cfg`` cannot run; return quietly when it can.

    Args:
        cfg: the configuration to check.
        arch: the model (heads, layers, experts).
        gpus_per_node: GPUs on one NVLink domain (TP must stay inside it).
        gpus: GPUs of the job.
        global_batch: sequences per optimizer step.
        seq_len: tokens per sequence.
    """
    src = "parallel config"
    for f in fields(cfg):
        value = getattr(cfg, f.name)
        if f.name in ("tp", "pp", "dp", "ep", "cp", "micro_batch", "interleave") and (
            isinstance(value, bool) or not isinstance(value, int) or value < 1
        ):
            raise InputError(src, f.name, f"must be a positive integer, got {value!r}")
    if cfg.zero not in (0, 1, 2, 3):
        raise InputError(src, "zero", f"ZeRO stage must be 0, 1, 2 or 3, got {cfg.zero!r}")
    if cfg.recompute not in RECOMPUTE_MODES:
        raise InputError(src, "recompute", f"must be one of {', '.join(RECOMPUTE_MODES)}, got {cfg.recompute!r}")
    if cfg.gpus != gpus:
        raise InputError(
            src, "gpus", f"tp·pp·dp·cp = {cfg.tp}·{cfg.pp}·{cfg.dp}·{cfg.cp} = {cfg.gpus} but the job has {gpus} GPUs"
        )
    if cfg.tp > gpus_per_node:
        raise InputError(src, "tp", f"tp={cfg.tp} exceeds gpus_per_node {gpus_per_node}")
    if arch.n_heads % cfg.tp:
        raise InputError(src, "tp", f"heads {arch.n_heads} not divisible by tp {cfg.tp}")
    if arch.n_kv_heads % cfg.tp and cfg.tp % arch.n_kv_heads:
        raise InputError(src, "tp", f"KV heads {arch.n_kv_heads} and tp {cfg.tp}: neither divides the other")
    if cfg.pp > arch.n_layers:
        raise InputError(src, "pp", f"pp={cfg.pp} exceeds the {arch.n_layers} layers")
    if cfg.interleave > 1:
        if cfg.pp == 1:
            raise InputError(src, "interleave", "interleaved pipeline needs pp > 1")
        if cfg.pp * cfg.interleave > arch.n_layers:
            raise InputError(
                src, "interleave", f"pp·interleave = {cfg.pp * cfg.interleave} exceeds the {arch.n_layers} layers"
            )
    if cfg.cp > 1 and seq_len % (2 * cfg.cp):
        raise InputError(src, "cp", f"sequence length {seq_len} not divisible by 2·cp = {2 * cfg.cp}")
    if cfg.ep > 1 and not arch.is_moe:
        raise InputError(src, "ep", f"ep={cfg.ep} but {arch.name} has no experts")
    if arch.is_moe and arch.n_routed_experts % cfg.ep:
        raise InputError(src, "ep", f"{arch.n_routed_experts} experts not divisible by ep {cfg.ep}")
    if (cfg.dp * cfg.cp) % cfg.ep:
        raise InputError(src, "ep", f"ep={cfg.ep} must divide dp·cp = {cfg.dp * cfg.cp}")
    if cfg.sequence_parallel and cfg.tp == 1:
        raise InputError(src, "sequence_parallel", "sequence parallelism needs tp > 1")
    if global_batch % (cfg.dp * cfg.micro_batch):
        raise InputError(
            src,
            "micro_batch",
            f"global batch {global_batch} not divisible by dp·micro_batch = {cfg.dp}·{cfg.micro_batch}",
        )
    micro_batches = global_batch // (cfg.dp * cfg.micro_batch)
    if cfg.interleave > 1 and micro_batches % cfg.pp:
        raise InputError(
            src, "interleave", f"interleaving needs micro-batches per step ({micro_batches}) divisible by pp {cfg.pp}"
        )


@dataclass(frozen=True)
class ConfigArrays:
    """Many configurations as parallel NumPy arrays (one entry per configuration).

    ``recompute`` is coded 0 none, 1 selective, 2 full; ``sequence_parallel`` is 0/1.
    """

    tp: NDArray[np.int64]
    pp: NDArray[np.int64]
    dp: NDArray[np.int64]
    ep: NDArray[np.int64]
    cp: NDArray[np.int64]
    zero: NDArray[np.int64]
    recompute: NDArray[np.int64]
    sequence_parallel: NDArray[np.int64]
    micro_batch: NDArray[np.int64]
    interleave: NDArray[np.int64]

    def __len__(self) -> int:
        return int(self.tp.shape[0])

    @classmethod
    def from_configs(cls, configs: list[ParallelConfig]) -> ConfigArrays:
        """Pack a list of :class:`ParallelConfig` into arrays."""
        cols: dict[str, list[int]] = {f.name: [] for f in fields(cls)}
        for c in configs:
            for name in cols:
                value = getattr(c, name)
                if name == "recompute":
                    value = RECOMPUTE_MODES.index(value)
                cols[name].append(int(value))
        return cls(**{k: np.asarray(v, dtype=np.int64) for k, v in cols.items()})

    def select(self, mask_or_index: NDArray[np.bool_] | NDArray[np.int64]) -> ConfigArrays:
        """The subset picked by a boolean mask or an index array."""
        return ConfigArrays(**{f.name: getattr(self, f.name)[mask_or_index] for f in fields(self)})

    def config(self, i: int) -> ParallelConfig:
        """The ``i``-th configuration as a :class:`ParallelConfig`."""
        return ParallelConfig(
            tp=int(self.tp[i]),
            pp=int(self.pp[i]),
            dp=int(self.dp[i]),
            ep=int(self.ep[i]),
            cp=int(self.cp[i]),
            zero=int(self.zero[i]),
            recompute=RECOMPUTE_MODES[int(self.recompute[i])],
            sequence_parallel=bool(self.sequence_parallel[i]),
            micro_batch=int(self.micro_batch[i]),
            interleave=int(self.interleave[i]),
        )


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def enumerate_configs(
    arch: ModelArch,
    gpus_per_node: int,
    gpus: int,
    global_batch: int,
    seq_len: int,
    fixed: dict[str, int | str | bool] | None = None,
) -> ConfigArrays:
    """Every valid configuration (the same rules as :func:`validate_config`), as arrays.

    Args:
        arch: the model (layer and expert counts bound pp and ep).
        gpus_per_node: GPUs per node (tp stays within a node).
        gpus: GPUs of the job (the product of the degrees).
        global_batch: sequences per step (a multiple of dp × micro-batch).
        seq_len: tokens per sequence (a multiple of 2·cp when context-parallel).
        fixed: parallelism choices the user gave (names as in :class:`ParallelConfig`); the others vary.
            Candidates: tp divisors of ``gpus_per_node``; pp divisors of ``gpus`` up to the layer count;
            cp divisors up to :data:`MAX_CONTEXT_PARALLEL`; ep divisors of the expert count; micro-batch
            powers of two up to :data:`MAX_MICRO_BATCH`; interleave 1..:data:`MAX_INTERLEAVE`.

    Returns:
        The valid configurations; empty when none exists.
    """
    fixed = dict(fixed or {})
    divs = np.asarray(_divisors(gpus), dtype=np.int64)

    def cand(name: str, default: list[int]) -> NDArray[np.int64]:
        if name in fixed:
            value = fixed[name]
            if name == "recompute":
                value = RECOMPUTE_MODES.index(str(value))
            return np.asarray([int(value)], dtype=np.int64)
        return np.asarray(default, dtype=np.int64)

    tp = cand("tp", [d for d in _divisors(gpus_per_node) if gpus % d == 0])
    pp = cand("pp", [int(d) for d in divs if d <= arch.n_layers])
    cp = cand("cp", [int(d) for d in divs if d <= MAX_CONTEXT_PARALLEL])
    n_exp = arch.n_routed_experts if arch.is_moe else 1
    ep = cand("ep", _divisors(n_exp))
    zero = cand("zero", [0, 1, 2, 3])
    rc = cand("recompute", [0, 1, 2])
    sp = cand("sequence_parallel", [0, 1])
    mb = cand("micro_batch", [2**i for i in range(int(math.log2(MAX_MICRO_BATCH)) + 1)])
    v = cand("interleave", list(range(1, MAX_INTERLEAVE + 1)))

    # Only the four degrees that multiply to the GPU count interact; build those first, then expand.
    g_tp, g_pp, g_cp = (a.ravel() for a in np.meshgrid(tp, pp, cp, indexing="ij"))
    rest = gpus // (g_tp * g_pp * g_cp)
    ok = (g_tp * g_pp * g_cp * rest == gpus) & (g_tp <= gpus_per_node) & (arch.n_heads % g_tp == 0)
    ok &= (arch.n_kv_heads % g_tp == 0) | (g_tp % arch.n_kv_heads == 0)
    ok &= g_pp <= arch.n_layers
    ok &= (g_cp == 1) | (seq_len % (2 * g_cp) == 0)
    if "dp" in fixed:
        ok &= rest == int(fixed["dp"])
    g_tp, g_pp, g_cp, g_dp = g_tp[ok], g_pp[ok], g_cp[ok], rest[ok]

    idx = np.meshgrid(np.arange(g_tp.size), ep, zero, rc, sp, mb, v, indexing="ij")
    base, e, z, r, s, m, vv = (a.ravel() for a in idx)
    t, p, c, d = g_tp[base], g_pp[base], g_cp[base], g_dp[base]
    ok = ((d * c) % e == 0) & (n_exp % e == 0)
    ok &= (s == 0) | (t > 1)
    ok &= global_batch % (d * m) == 0
    n_micro = global_batch // np.maximum(d * m, 1)
    ok &= (vv == 1) | ((p > 1) & (p * vv <= arch.n_layers) & (n_micro % p == 0))
    return ConfigArrays(
        tp=t[ok],
        pp=p[ok],
        dp=d[ok],
        ep=e[ok],
        cp=c[ok],
        zero=z[ok],
        recompute=r[ok],
        sequence_parallel=s[ok],
        micro_batch=m[ok],
        interleave=vv[ok],
    )
