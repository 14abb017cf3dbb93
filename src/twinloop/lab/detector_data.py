"""Synthetic per-GPU telemetry with injected faults, for the detector tests, the benchmark and demos.

This is *not* the twin (``twinloop.twin``): it is a small, fast, seeded generator whose only job is to make
each fault class show the signature the rules look for, on top of realistic noise. Power comes from the shared
power model (``GpuPowerModel``: DVFS under the power limit), the die temperature from an exact first-order RC
step towards ``coolant + R·P``; each GPU runs one synthetic training job (``gpus_per_job`` GPUs, a step every
``step_s`` seconds, a power-law loss curve). Fault kinds and what they do (``magnitude`` in brackets):

``coolant`` (+°C of coolant, ramped over 20 s), ``tim`` (× thermal resistance), ``thermal`` (coolant so hot the
GPU reaches slowdown; sets the SW-thermal bit and the clock falls), ``power_cap`` (power limit, W),
``power_brake`` (HW power-brake bit, clock × 0.5), ``xid`` (the XID code, once), ``straggler`` (× SM clock
with no clock-event reason), ``sdc`` (+nats of loss and ×(1+m) grad norm on the target GPUs' job),
``hang`` (the job stops progressing and its GPUs idle), ``phase`` (the job's tensor activity → ``magnitude``:
a benign workload change), ``flap`` (the temperature sensor toggles by ``magnitude`` °C with 1–3 sample runs),
``nan`` (all fields NaN).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from twinloop.hardware.gpu import get_gpu
from twinloop.hardware.power import (
    CLOCK_EVENT_HW_POWER_BRAKE,
    CLOCK_EVENT_SW_POWER_CAP,
    CLOCK_EVENT_SW_THERMAL,
    GpuPowerModel,
)
from twinloop.ops.detect.rules import (
    CLOCK_REASONS,
    JOB_GRAD_NORM,
    JOB_LOSS,
    JOB_PROGRESS,
    POWER,
    POWER_LIMIT,
    SM_CLOCK,
    TEMP,
    TENSOR,
    XID,
)
from twinloop.telemetry.fields import DCGM_FI_DEV_FB_USED, DCGM_FI_DEV_MEMORY_TEMP, DCGM_FI_PROF_DRAM_ACTIVE

F64 = NDArray[np.float64]

FAULT_KINDS = (
    "coolant",
    "tim",
    "thermal",
    "power_cap",
    "power_brake",
    "xid",
    "straggler",
    "sdc",
    "hang",
    "phase",
    "flap",
    "nan",
)


def fleet_entities(
    n_rows: int = 1, racks_per_row: int = 2, nodes_per_rack: int = 8, gpus_per_node: int = 8
) -> list[str]:
    """Entity ids ``dc/rRR/kKK/nNN/gG`` in site/row/rack/node/gpu order."""
    return [
        f"dc/r{r:02d}/k{k:02d}/n{n:02d}/g{g}"
        for r in range(n_rows)
        for k in range(racks_per_row)
        for n in range(nodes_per_rack)
        for g in range(gpus_per_node)
    ]


@dataclass(frozen=True)
class Fault:
    """One injected fault.

    Attributes:
        kind: one of ``FAULT_KINDS``.
        gpus: indices of the affected GPUs.
        start_s: onset, s. end_s: end, s (None = until the end).
        magnitude: see the module docstring.
    """

    kind: str
    gpus: tuple[int, ...]
    start_s: float
    end_s: float | None = None
    magnitude: float = 1.0

    def active(self, t_s: float) -> bool:
        """Whether the fault is on at ``t_s``."""
        return self.start_s <= t_s and (self.end_s is None or t_s < self.end_s)


@dataclass
class Sample:
    """One step of synthetic telemetry, in the shapes ``DetectionPipeline.step`` takes."""

    ts: float
    fields: dict[str, F64]
    job_index: NDArray[np.int64]
    job_ids: list[str]
    job_fields: dict[str, F64]


class SyntheticCluster:
    """Seeded synthetic telemetry for ``len(entities)`` H100 GPUs (see module docstring).

    Args:
        entities: GPU ids (e.g. from :func:`fleet_entities`).
        faults: faults to inject.
        seed: random seed.
        gpus_per_job: consecutive GPUs per job (the last job may be smaller).
        step_s: training step time, s.
        tensor_active: nominal tensor-pipe activity of the jobs.
    """

    def __init__(
        self,
        entities: list[str],
        faults: tuple[Fault, ...] = (),
        seed: int = 0,
        gpus_per_job: int = 32,
        step_s: float = 2.0,
        tensor_active: float = 0.55,
    ) -> None:
        self.entities = entities
        self.faults = faults
        self.rng = np.random.default_rng(seed)
        self.gpu = get_gpu("h100-sxm")
        self.model = GpuPowerModel(self.gpu)
        n = len(entities)
        self.n = n
        self.job_index = (np.arange(n) // gpus_per_job).astype(np.int64)
        self.n_jobs = int(self.job_index.max()) + 1 if n else 0
        self.job_ids = [f"job{j}" for j in range(self.n_jobs)]
        self.step_s = step_s
        self.tensor0 = tensor_active
        self.r = np.full(n, self.gpu.thermal_resistance_c_per_w)
        self.tau_s = self.gpu.thermal_resistance_c_per_w * self.gpu.thermal_capacitance_j_per_c
        self.coolant_c = 30.0 + self.rng.normal(0.0, 0.5, n)
        # Start at thermal equilibrium with the nominal workload, so the first minutes hold no transient.
        t0 = np.full(n, self.tensor0)
        self.temp = self.coolant_c + self.r * 550.0
        for _ in range(8):
            clock0 = self.model.max_clock_for_power(
                np.full(n, self.gpu.tdp_w), t0, t0 + 0.25, 0.5 * t0 + 0.1, self.temp
            )
            p0 = self.model.power_w(clock0, t0, t0 + 0.25, 0.5 * t0 + 0.1, self.temp)
            self.temp = self.coolant_c + self.r * np.minimum(p0, self.gpu.tdp_w)
        self.progress = np.zeros(self.n_jobs)
        self.last_step = np.zeros(self.n_jobs)
        self.loss = np.full(self.n_jobs, np.nan)
        self.grad = np.full(self.n_jobs, np.nan)
        self.xid = np.zeros(n)
        self.flap_state = np.zeros(n, dtype=bool)
        self.flap_left = np.zeros(n, dtype=np.int64)

    def _mask(self, kind: str, t_s: float) -> tuple[NDArray[np.bool_], F64]:
        mask = np.zeros(self.n, dtype=bool)
        mag = np.zeros(self.n)
        for f in self.faults:
            if f.kind == kind and f.active(t_s):
                idx = np.asarray(f.gpus, dtype=np.int64)
                mask[idx] = True
                ramp = min(1.0, (t_s - f.start_s) / 20.0) if kind in ("coolant", "thermal") else 1.0
                mag[idx] = f.magnitude * ramp
        return mask, mag

    def _job_mask(self, kind: str, t_s: float) -> tuple[NDArray[np.bool_], F64]:
        g, mag = self._mask(kind, t_s)
        jobs = np.zeros(self.n_jobs, dtype=bool)
        jmag = np.zeros(self.n_jobs)
        jobs[self.job_index[g]] = True
        jmag[self.job_index[g]] = mag[g]
        return jobs, jmag

    def sample(self, t_s: float, dt_s: float = 1.0) -> Sample:
        """Advance by ``dt_s`` to ``t_s`` and return the telemetry."""
        n, rng = self.n, self.rng
        hang_j, _ = self._job_mask("hang", t_s)
        phase_j, phase_m = self._job_mask("phase", t_s)
        tensor_j = np.where(phase_j, phase_m, self.tensor0)
        tensor_j = np.where(hang_j, 0.02, tensor_j)
        tensor = tensor_j[self.job_index] + rng.normal(0.0, 0.01, n)
        tensor = np.clip(tensor, 0.0, 1.0)
        sm = np.clip(tensor + 0.25, 0.0, 1.0)
        dram = np.clip(0.5 * tensor + 0.1, 0.0, 1.0)

        cap, cap_w = self._mask("power_cap", t_s)
        limit = np.where(cap, cap_w, self.gpu.tdp_w)
        coolant_on, coolant_m = self._mask("coolant", t_s)
        thermal_on, thermal_m = self._mask("thermal", t_s)
        tim_on, tim_m = self._mask("tim", t_s)
        coolant = self.coolant_c + np.where(coolant_on, coolant_m, 0.0) + np.where(thermal_on, thermal_m, 0.0)
        r = np.where(tim_on, self.r * tim_m, self.r)

        clock = np.asarray(self.model.max_clock_for_power(limit, tensor, sm, dram, self.temp), dtype=np.float64)
        reasons = np.where(clock < self.gpu.sm_clock_max_mhz - 1.0, CLOCK_EVENT_SW_POWER_CAP, 0)
        hot = self.temp >= self.gpu.slowdown_temp_c
        clock = np.where(hot, clock * 0.8, clock)
        reasons = np.where(hot, reasons | CLOCK_EVENT_SW_THERMAL, reasons)
        brake, _ = self._mask("power_brake", t_s)
        clock = np.where(brake, clock * 0.5, clock)
        reasons = np.where(brake, reasons | CLOCK_EVENT_HW_POWER_BRAKE, reasons)
        strag, strag_m = self._mask("straggler", t_s)
        clock = np.where(strag, clock * strag_m, clock)
        clock = clock + rng.normal(0.0, 3.0, n)
        power = np.asarray(self.model.power_w(clock, tensor, sm, dram, self.temp), dtype=np.float64)
        power = np.minimum(power, limit) + rng.normal(0.0, 4.0, n)

        t_ss = coolant + r * power
        self.temp = t_ss + (self.temp - t_ss) * np.exp(-dt_s / self.tau_s)
        temp = self.temp + rng.normal(0.0, 0.3, n)
        flap, flap_m = self._mask("flap", t_s)
        self.flap_left -= 1
        toggle = flap & (self.flap_left <= 0)
        self.flap_state = np.where(toggle, ~self.flap_state, self.flap_state & flap)
        self.flap_left = np.where(toggle, rng.integers(1, 4, n), self.flap_left)
        temp = np.where(self.flap_state, temp + flap_m, temp)

        for f in self.faults:
            if f.kind == "xid" and f.start_s <= t_s < f.start_s + dt_s:
                self.xid[list(f.gpus)] = f.magnitude

        fields = {
            TEMP: temp,
            DCGM_FI_DEV_MEMORY_TEMP: temp + 4.0 + rng.normal(0.0, 0.3, n),
            POWER: power,
            SM_CLOCK: clock,
            POWER_LIMIT: limit.astype(np.float64),
            CLOCK_REASONS: reasons.astype(np.float64),
            XID: self.xid.copy(),
            TENSOR: tensor,
            DCGM_FI_PROF_DRAM_ACTIVE: dram + rng.normal(0.0, 0.01, n),
            DCGM_FI_DEV_FB_USED: np.full(n, 60_000.0),
        }
        nan, _ = self._mask("nan", t_s)
        if nan.any():
            for v in fields.values():
                v[nan] = np.nan

        self.progress += np.where(hang_j, 0.0, dt_s / self.step_s)
        steps = np.floor(self.progress)
        new_step = steps > self.last_step
        self.last_step = steps
        sdc_j, sdc_m = self._job_mask("sdc", t_s)
        loss = (1.8 + 10.0 * (1.0 + steps / 100.0) ** -0.5) * (1.0 + 0.005 * rng.standard_normal(self.n_jobs))
        grad = (0.3 + 3.0 * (1.0 + steps / 100.0) ** -0.7) * np.exp(0.1 * rng.standard_normal(self.n_jobs))
        loss = loss + np.where(sdc_j, sdc_m, 0.0)
        grad = grad * np.where(sdc_j, 1.0 + sdc_m, 1.0)
        # A job reports loss and grad norm once per step; between steps the last values repeat.
        self.loss = np.where(new_step | np.isnan(self.loss), loss, self.loss)
        self.grad = np.where(new_step | np.isnan(self.grad), grad, self.grad)
        loss, grad = self.loss.copy(), self.grad.copy()
        job_fields = {JOB_LOSS: loss, JOB_GRAD_NORM: grad, JOB_PROGRESS: steps}
        return Sample(t_s, fields, self.job_index, self.job_ids, job_fields)
