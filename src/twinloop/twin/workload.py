"""What a job asks of its GPUs, phase by phase: the :class:`WorkloadProfile`.

A scenario can give a profile explicitly (``jobs[i].profile``) or take the per-kind defaults here. The planner
(``twinloop.plan``) can later produce one from a plan. The defaults are *guesses* shaped after public
descriptions of LLM jobs on H100s:

* training: ~3 s of compute (tensor cores busy, near TDP) then ~1 s of exposed communication (tensor idle,
  DRAM and copy engines moderate), so synchronized GPUs swing together between the two;
* serving: prefill is compute-bound (tensor ~0.8), decode is memory-bound (tensor ~0.05, DRAM ~0.75) and draws
  far below TDP; the request trace decides the per-second mix.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PhaseActivity:
    """DCGM-style activities (0..1) of one phase: tensor pipes, SMs, DRAM.

    They hold at the GPU kind's reference clock, its dense GEMM's clock at TDP (the H100's 1,367 MHz, where the
    power fit read its GEMM's activities): the DRAM traffic that rides on tensor work follows the clock away from it
    (:mod:`twinloop.twin.dvfs`).
    """

    tensor_active: float
    sm_active: float
    dram_active: float

    def __post_init__(self) -> None:
        for name in ("tensor_active", "sm_active", "dram_active"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} = {value} (allowed: 0..1)")


@dataclass(frozen=True)
class WorkloadProfile:
    """Per-phase activity and timing of one job (all times in seconds, bytes in bytes).

    Attributes:
        compute_s: compute phase of one training iteration (or one prefill batch for serving).
        comm_s: exposed communication phase of one iteration (0 for serving).
        compute: activity during compute (training) or prefill (serving).
        comm: activity during communication (training) or decode (serving).
        compute_fraction: share of compute-phase time that is compute-bound (roofline; slows with the clock).
        tokens_per_step: tokens one iteration processes (training) or — serving — prefill tokens per second
            one replica handles at full clock.
        decode_tokens_per_s: decode tokens per second one replica generates at full clock (serving).
        hbm_bytes_used: HBM bytes each GPU holds while the job runs.
        load_bytes_per_gpu: context/weights loaded SSD→DRAM→HBM during ramp-up.
        load_bandwidth_bytes_per_s: effective per-GPU load bandwidth of that path.
        requested_tdp_fraction: TDP fraction the job declares when queued (used for precooling, admission).
    """

    compute_s: float
    comm_s: float
    compute: PhaseActivity
    comm: PhaseActivity
    compute_fraction: float
    tokens_per_step: float
    decode_tokens_per_s: float
    hbm_bytes_used: float
    load_bytes_per_gpu: float
    load_bandwidth_bytes_per_s: float
    requested_tdp_fraction: float

    def __post_init__(self) -> None:
        if self.compute_s <= 0 or self.comm_s < 0:
            raise ValueError("compute_s must be > 0 and comm_s >= 0")
        if not 0.0 <= self.compute_fraction <= 1.0:
            raise ValueError(f"compute_fraction = {self.compute_fraction} (allowed: 0..1)")
        if not 0.0 < self.requested_tdp_fraction <= 1.5:
            raise ValueError(f"requested_tdp_fraction = {self.requested_tdp_fraction} (allowed: 0..1.5)")
        for name in ("tokens_per_step", "decode_tokens_per_s", "load_bandwidth_bytes_per_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0")
        if self.hbm_bytes_used < 0 or self.load_bytes_per_gpu < 0:
            raise ValueError("hbm_bytes_used and load_bytes_per_gpu must be >= 0")

    @property
    def iteration_s(self) -> float:
        """One training iteration at full clock (s)."""
        return self.compute_s + self.comm_s

    @property
    def load_s(self) -> float:
        """Ramp-up (context loading) time at the profile's load bandwidth (s)."""
        return self.load_bytes_per_gpu / self.load_bandwidth_bytes_per_s

    @classmethod
    def for_kind(cls, kind: str, base: WorkloadProfile | None = None, **overrides: Any) -> WorkloadProfile:
        """The default profile of ``kind`` ('training' or 'serving'), or ``base``, with flat overrides.

        Overrides use the attribute names; phase activities are given as ``compute_tensor_active``,
        ``comm_dram_active`` etc.
        """
        base = base or _DEFAULTS[kind]
        fields = {f.name for f in dataclasses.fields(cls)}
        direct: dict[str, Any] = {}
        phases: dict[str, dict[str, float]] = {"compute": {}, "comm": {}}
        for key, value in overrides.items():
            head, _, rest = key.partition("_")
            if head in phases and rest in ("tensor_active", "sm_active", "dram_active"):
                phases[head][rest] = float(value)
            elif key in fields and key not in phases:
                direct[key] = float(value)
            else:
                allowed = sorted(fields - set(phases)) + [
                    f"{p}_{a}" for p in phases for a in ("tensor_active", "sm_active", "dram_active")
                ]
                raise ValueError(f"unknown profile field {key!r} (allowed: {', '.join(allowed)})")
        for phase, changes in phases.items():
            if changes:
                direct[phase] = dataclasses.replace(getattr(base, phase), **changes)
        return dataclasses.replace(base, **direct)


_DEFAULTS = {
    "training": WorkloadProfile(
        compute_s=3.0,
        comm_s=1.0,
        compute=PhaseActivity(tensor_active=0.85, sm_active=0.95, dram_active=0.35),
        comm=PhaseActivity(tensor_active=0.0, sm_active=0.25, dram_active=0.15),
        compute_fraction=0.8,
        tokens_per_step=4.0e6,
        decode_tokens_per_s=1.0,
        hbm_bytes_used=70e9,
        load_bytes_per_gpu=40e9,
        load_bandwidth_bytes_per_s=2.0e9,
        requested_tdp_fraction=1.0,
    ),
    "serving": WorkloadProfile(
        compute_s=1.0,
        comm_s=0.0,
        compute=PhaseActivity(tensor_active=0.8, sm_active=0.9, dram_active=0.4),
        comm=PhaseActivity(tensor_active=0.05, sm_active=0.45, dram_active=0.75),
        compute_fraction=0.9,
        tokens_per_step=60000.0,
        decode_tokens_per_s=3000.0,
        hbm_bytes_used=60e9,
        load_bytes_per_gpu=20e9,
        load_bandwidth_bytes_per_s=2.0e9,
        requested_tdp_fraction=0.8,
    ),
}
