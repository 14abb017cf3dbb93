"""Failure processes of a GPU cluster, calibrated on Llama 3's 54-day interruption table.

Source: Llama Team, AI @ Meta, "The Llama 3 Herd of Models" (arXiv:2407.21783, 2024), section 3.3.4 and
Table 5: 16,384 H100 GPUs (2,048 servers x 8) over a 54-day snapshot had 466 job interruptions, 47 planned and
419 unexpected; Table 5 breaks the 419 unexpected ones down by root cause (``LLAMA3_TABLE`` below; it sums to
419, so its "host maintenance" row is *unplanned* host maintenance, and the 47 planned interruptions are the
separate cause ``planned_maintenance``). Copied in ``/work/shared/anchors/reliability.md``.

Every rate is derived from that table in code: ``rate = count / (units * 1296 h)`` where ``units`` is what
the cause scales with (its *scope*):

* ``gpu`` - per GPU (faulty GPU, HBM3, SRAM, GPU system processor, thermal interface + sensor, SDC);
* ``node`` - per server (host maintenance, NIC, SSD, power supply, chassis, IO expansion board, CPU, DRAM);
* ``network`` - per server too: switches and cables grow with the node count of a fat tree (a guess);
* ``job`` - per job-GPU-hour (software bug, NCCL watchdog, dependency, planned maintenance): a job on more
  GPUs runs more ranks that can hit a bug or a timeout (a guess; Llama 3 only ran one job size).

GPU-scope *hardware* causes are accelerated with GPU temperature by an Arrhenius factor
``AF(T) = exp(Ea/k_B * (1/T_ref - 1/T))`` with ``Ea = 0.7 eV`` (a common electromigration/semiconductor guess,
not fitted to any data) and ``T_ref = 65 C`` (a guess at the typical H100 temperature of the Llama 3 run),
so at ``T_ref`` the rates reproduce the table exactly.

``FailureModel.draw`` is O(events) per step, with no O(GPUs) pass: it draws the total number of *candidate*
events from a Poisson process whose GPU-scope rates are bounded by ``AF(max_temp_c)`` and whose job-scope
rates assume every GPU is busy, then places each candidate on a uniformly chosen GPU and keeps it with
probability ``AF(T_gpu) / AF(max_temp_c)`` (temperature) or only if the GPU runs a job (job scope). This is
exact Poisson thinning: the kept events are the Poisson process of the temperature-weighted, busy-only rates.
Temperatures above ``max_temp_c`` count as ``max_temp_c`` (GPUs shut down around there anyway).

XID codes follow NVIDIA's Xid catalog (https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html):
79 "GPU has fallen off the bus", 48 double-bit ECC error (HBM; row remapping 63/64 follows), 95 uncontained
ECC error, 119 GSP RPC timeout, 31 GPU memory page fault (an application fault). Each cause gets the one
representative XID it most often shows as, or ``None`` where no GPU XID applies (host parts, network, SDC).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from twinloop.errors import InputError, unknown_name
from twinloop.hardware.failure_rates import (  # noqa: F401 (re-exported: the twin's failure vocabulary)
    CAUSE_NAMES,
    CAUSES,
    LLAMA3_CITATION,
    LLAMA3_DAYS,
    LLAMA3_GPUS,
    LLAMA3_GPUS_PER_NODE,
    LLAMA3_HOURS,
    LLAMA3_NODES,
    LLAMA3_PLANNED,
    LLAMA3_TABLE,
    LLAMA3_UNEXPECTED,
    N_CAUSES,
    SCOPES,
    FailureCause,
    Scope,
    llama3_units,
)

BOLTZMANN_EV_PER_K = 8.617333262e-5


def cause_index(name: str) -> int:
    """Index of cause ``name`` in ``CAUSES``.

    Raises:
        InputError: unknown cause name.
    """
    if name not in CAUSE_NAMES:
        raise unknown_name("failures", "cause", "failure cause", name, CAUSE_NAMES)
    return CAUSE_NAMES.index(name)


def arrhenius_factor(
    temp_c: float | NDArray[np.float64] | NDArray[np.float32], ref_temp_c: float, activation_energy_ev: float
) -> NDArray[np.float64]:
    """Arrhenius acceleration ``exp(Ea/k_B * (1/T_ref - 1/T))`` (1 at ``ref_temp_c``; >1 hotter)."""
    t_k = np.asarray(temp_c, dtype=np.float64) + 273.15
    return np.exp(activation_energy_ev / BOLTZMANN_EV_PER_K * (1.0 / (ref_temp_c + 273.15) - 1.0 / t_k))


@dataclass(frozen=True)
class FailureConfig:
    """Failure-model settings (frozen; validated on construction).

    Attributes:
        rate_scale: multiplies every rate (1 = Llama 3 fleet).
        activation_energy_ev: Arrhenius activation energy, eV. 0.7 eV is a guess (typical for
            semiconductor wear-out mechanisms), not fitted to GPU data.
        ref_temp_c: GPU temperature at which the rates reproduce the Llama 3 table, C. 65 C is a guess at the
            typical H100 temperature of that run (not published).
        max_temp_c: temperature cap of the acceleration (and the thinning bound), C.
        include_planned: include planned interruptions (``planned_maintenance``).
        disabled_causes: cause names whose rate is set to zero.
    """

    rate_scale: float = 1.0
    activation_energy_ev: float = 0.7
    ref_temp_c: float = 65.0
    max_temp_c: float = 100.0
    include_planned: bool = True
    disabled_causes: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        src = "FailureConfig"
        if not (np.isfinite(self.rate_scale) and 0.0 <= self.rate_scale <= 1e6):
            raise InputError(src, "rate_scale", f"{self.rate_scale} is out of range (allowed 0..1e6)")
        if not (np.isfinite(self.activation_energy_ev) and 0.0 <= self.activation_energy_ev <= 2.0):
            raise InputError(src, "activation_energy_ev", f"{self.activation_energy_ev} (allowed 0..2 eV)")
        if not (np.isfinite(self.ref_temp_c) and -20.0 <= self.ref_temp_c <= 120.0):
            raise InputError(src, "ref_temp_c", f"{self.ref_temp_c} is out of range (allowed -20..120 C)")
        if not (np.isfinite(self.max_temp_c) and self.ref_temp_c <= self.max_temp_c <= 150.0):
            raise InputError(src, "max_temp_c", f"{self.max_temp_c} (allowed ref_temp_c..150 C)")
        for name in self.disabled_causes:
            cause_index(name)


@dataclass(frozen=True, eq=False)
class FailureDraw:
    """Failure events of one step.

    Attributes:
        gpu: GPU index per event (for node/network/job scope: one GPU of the affected node or job).
        cause: index into ``CAUSES`` per event.
    """

    gpu: NDArray[np.int64]
    cause: NDArray[np.int16]

    @property
    def n_events(self) -> int:
        """Number of events."""
        return int(self.gpu.shape[0])


def _empty_draw() -> FailureDraw:
    gpu = np.zeros(0, dtype=np.int64)
    cause = np.zeros(0, dtype=np.int16)
    gpu.setflags(write=False)
    cause.setflags(write=False)
    return FailureDraw(gpu=gpu, cause=cause)


_EMPTY = _empty_draw()
_SCOPE_CODE = {"gpu": 0, "node": 1, "network": 1, "job": 2}  # network events are placed like node events


class FailureModel:
    """Samples failure events per simulation step (see module docstring for the O(events) thinning)."""

    def __init__(self, config: FailureConfig = FailureConfig()) -> None:
        self.config = config
        rates = np.array([c.rate_per_unit_hour for c in CAUSES]) * config.rate_scale
        for i, c in enumerate(CAUSES):
            if (c.planned and not config.include_planned) or c.name in config.disabled_causes:
                rates[i] = 0.0
        self.rates_per_unit_hour: NDArray[np.float64] = rates
        self.temp_accelerated = np.array([c.temp_accelerated for c in CAUSES])
        self.scope_code = np.array([_SCOPE_CODE[c.scope] for c in CAUSES], dtype=np.int8)
        self.af_max = float(arrhenius_factor(config.max_temp_c, config.ref_temp_c, config.activation_energy_ev))
        self._bounded = rates * np.where(self.temp_accelerated, self.af_max, 1.0)
        # Candidate rate per GPU (gpu + job scope) and per node (node + network scope), events/hour.
        self._per_gpu_h = float(self._bounded[self.scope_code != 1].sum())
        self._per_node_h = float(self._bounded[self.scope_code == 1].sum())

    def _units(self, n_gpus: int, gpus_per_node: int) -> NDArray[np.float64]:
        n_nodes = -(-n_gpus // gpus_per_node)
        return np.where(self.scope_code == 1, float(n_nodes), float(n_gpus))

    def expected_rate_per_hour(
        self,
        n_gpus: int,
        gpus_per_node: int = LLAMA3_GPUS_PER_NODE,
        temp_c: float | NDArray[np.float64] | None = None,
    ) -> NDArray[np.float64]:
        """Expected events per hour per cause for ``n_gpus`` GPUs all busy in one job.

        Args:
            n_gpus: GPUs in the job.
            gpus_per_node: GPUs per server (node count = ceil(n_gpus / gpus_per_node)).
            temp_c: GPU temperature, C (a scalar, or per-GPU temperatures whose mean Arrhenius factor is used);
                default ``config.ref_temp_c``.

        Returns:
            Array of length ``len(CAUSES)``, events/hour.
        """
        _check_layout(n_gpus, gpus_per_node)
        ref = self.config.ref_temp_c if temp_c is None else temp_c
        temp = np.minimum(np.asarray(ref, dtype=np.float64), self.config.max_temp_c)
        af = float(np.mean(arrhenius_factor(temp, self.config.ref_temp_c, self.config.activation_energy_ev)))
        accel = np.where(self.temp_accelerated, af, 1.0)
        return np.asarray(self.rates_per_unit_hour * accel * self._units(n_gpus, gpus_per_node), dtype=np.float64)

    def interruptions_per_s(
        self, n_gpus: int, n_nodes: int, temp_c: float | NDArray[np.float64] | NDArray[np.float32] | None = None
    ) -> float:
        """Expected rate of the failures that stop a job holding ``n_gpus`` GPUs on ``n_nodes`` nodes and lose its
        unsaved work, 1/s: every detectable, unplanned cause (a planned interruption checkpoints first; silent data
        corruption stops nothing), GPU and job scope per GPU, node and network scope per node it holds, GPU-scope
        hardware causes at the GPUs' temperatures (Arrhenius, as :meth:`draw` places them). The twin's analogue of
        an operator's measured MTBF of the job's share of the fleet.

        Args:
            n_gpus: GPUs the job holds.
            n_nodes: nodes it holds.
            temp_c: the GPUs' temperatures, C (a scalar or per GPU: their mean acceleration); default
                ``config.ref_temp_c``.
        """
        if n_gpus < 0 or n_nodes < 0:
            raise InputError("failures", "n_gpus/n_nodes", f"{n_gpus}/{n_nodes} (allowed >= 0)")
        ref = self.config.ref_temp_c if temp_c is None else temp_c
        temp = np.minimum(np.asarray(ref, dtype=np.float64), self.config.max_temp_c)
        af = float(np.mean(arrhenius_factor(temp, self.config.ref_temp_c, self.config.activation_energy_ev)))
        stops = np.array([c.detectable and not c.planned for c in CAUSES])
        units = np.where(self.scope_code == 1, float(n_nodes), float(n_gpus))
        rate_h = self.rates_per_unit_hour * np.where(self.temp_accelerated, af, 1.0) * units
        return float(rate_h[stops].sum()) / 3600.0

    def draw(
        self,
        rng: np.random.Generator,
        dt_s: float,
        gpu_temp_c: NDArray[np.float32] | NDArray[np.float64],
        gpus_per_node: int,
        job_of_gpu: NDArray[np.int64],
    ) -> FailureDraw:
        """Failure events during one step of ``dt_s`` seconds.

        Args:
            rng: the random generator (the only source of randomness; same state, same events).
            dt_s: step length, s.
            gpu_temp_c: per-GPU temperature, C, shape (n_gpus,); GPU ``i`` sits in node ``i // gpus_per_node``.
            gpus_per_node: GPUs per server.
            job_of_gpu: job id per GPU, shape (n_gpus,); negative = idle (no job-scope events there).

        Returns:
            The events (usually none; then a shared read-only empty draw); cost O(1) without events,
            O(events) with.
        """
        n_gpus = int(gpu_temp_c.shape[0])
        if gpus_per_node < 1:
            raise InputError("FailureModel.draw", "gpus_per_node", f"{gpus_per_node} (allowed >= 1)")
        if job_of_gpu.shape[0] != n_gpus:
            raise InputError("FailureModel.draw", "job_of_gpu", f"length {job_of_gpu.shape[0]} != {n_gpus} GPUs")
        if n_gpus == 0 or dt_s <= 0.0:
            return _EMPTY
        n_nodes = -(-n_gpus // gpus_per_node)
        lam = (self._per_gpu_h * n_gpus + self._per_node_h * n_nodes) * (dt_s / 3600.0)
        k = int(rng.poisson(lam))
        if k == 0:
            return _EMPTY
        return self._place(rng, k, n_gpus, n_nodes, gpu_temp_c, gpus_per_node, job_of_gpu)

    def _place(
        self,
        rng: np.random.Generator,
        k: int,
        n_gpus: int,
        n_nodes: int,
        gpu_temp_c: NDArray[np.float32] | NDArray[np.float64],
        gpus_per_node: int,
        job_of_gpu: NDArray[np.int64],
    ) -> FailureDraw:
        lam_c = self._bounded * np.where(self.scope_code == 1, float(n_nodes), float(n_gpus))
        cause = rng.choice(N_CAUSES, size=k, p=lam_c / lam_c.sum())
        scope = self.scope_code[cause]
        # GPU and job scope: a uniform GPU; node and network scope: a uniform node, then a GPU in it.
        gpu = rng.integers(0, n_gpus, size=k, dtype=np.int64)
        node = rng.integers(0, n_nodes, size=k, dtype=np.int64)
        width = np.minimum(gpus_per_node, n_gpus - node * gpus_per_node)
        in_node = node * gpus_per_node + (rng.random(k) * width).astype(np.int64)
        gpu = np.where(scope == 1, in_node, gpu)
        keep_u = rng.random(k)
        temp = np.minimum(np.asarray(gpu_temp_c[gpu], dtype=np.float64), self.config.max_temp_c)
        af = arrhenius_factor(temp, self.config.ref_temp_c, self.config.activation_energy_ev)
        keep = np.where(self.temp_accelerated[cause], keep_u * self.af_max < af, True)
        keep &= (scope != 2) | (job_of_gpu[gpu] >= 0)
        return FailureDraw(gpu=gpu[keep], cause=cause[keep].astype(np.int16))


def _check_layout(n_gpus: int, gpus_per_node: int) -> None:
    if n_gpus < 0:
        raise InputError("failures", "n_gpus", f"{n_gpus} (allowed >= 0)")
    if gpus_per_node < 1:
        raise InputError("failures", "gpus_per_node", f"{gpus_per_node} (allowed >= 1)")


# --- Signals the engine uses: stragglers, silent data corruption, a baseline loss curve -----------------------


def draw_stragglers(
    rng: np.random.Generator,
    n_gpus: int,
    fraction: float,
    slowdown_range: tuple[float, float] = (0.5, 0.9),
) -> NDArray[np.float32]:
    """Per-GPU speed factor with a random subset of stragglers.

    Args:
        rng: random generator.
        n_gpus: number of GPUs.
        fraction: probability that a GPU is a straggler, 0..1.
        slowdown_range: (low, high) speed factor of a straggler, 0 < low <= high <= 1 (1 = full speed).

    Returns:
        float32 array (n_gpus,): 1.0 for healthy GPUs, uniform in ``slowdown_range`` for stragglers.
    """
    lo, hi = slowdown_range
    if n_gpus < 0:
        raise InputError("draw_stragglers", "n_gpus", f"{n_gpus} (allowed >= 0)")
    if not 0.0 <= fraction <= 1.0:
        raise InputError("draw_stragglers", "fraction", f"{fraction} (allowed 0..1)")
    if not 0.0 < lo <= hi <= 1.0:
        raise InputError("draw_stragglers", "slowdown_range", f"{slowdown_range} (allowed 0 < low <= high <= 1)")
    speed = np.ones(n_gpus, dtype=np.float32)
    k = int(rng.binomial(n_gpus, fraction)) if n_gpus else 0
    idx = rng.choice(n_gpus, size=k, replace=False) if k else np.zeros(0, dtype=np.int64)
    speed[idx] = rng.uniform(lo, hi, size=k).astype(np.float32)
    return speed


@dataclass(frozen=True, eq=False)
class LossSignal:
    """A per-step training signal (or a perturbation of one).

    Attributes:
        loss: training loss per step, nats (or its perturbation), float32.
        grad_norm: global gradient norm per step (or its perturbation), float32.
    """

    loss: NDArray[np.float32]
    grad_norm: NDArray[np.float32]


def sdc_loss_signature(
    rng: np.random.Generator,
    n_steps: int,
    onset_step: int,
    magnitude: float,
    kind: Literal["spike", "drift"] = "spike",
) -> LossSignal:
    """Perturbation that silent data corruption adds to a job's loss and gradient norm (nothing else).

    SDC shows in no hardware counter; only the training signal changes. A guess at its shapes:

    * ``spike``: at ``onset_step`` the gradient norm jumps by ``magnitude * g`` (g uniform 2..4) and decays with
      a time constant of 3..15 steps; the loss jumps by ``magnitude`` and recovers slowly (50..200 steps) to a
      residual of 10..30 % (corrupted updates leave damage behind).
    * ``drift``: from ``onset_step`` the loss rises linearly to ``+magnitude`` over 100..500 steps and stays
      there; the gradient norm rises in proportion (``g`` uniform 1..2).

    Args:
        rng: random generator (picks the shape parameters).
        n_steps: length of the series.
        onset_step: first affected step (>= n_steps: no effect).
        magnitude: loss perturbation, nats (> 0).
        kind: ``spike`` or ``drift``.

    Returns:
        ``LossSignal`` of deltas to *add* to the job's loss and grad norm; zero before ``onset_step``.
    """
    if n_steps < 0 or onset_step < 0:
        raise InputError("sdc_loss_signature", "n_steps/onset_step", "must be >= 0")
    if not (np.isfinite(magnitude) and magnitude > 0.0):
        raise InputError("sdc_loss_signature", "magnitude", f"{magnitude} (allowed > 0)")
    if kind not in ("spike", "drift"):
        raise InputError("sdc_loss_signature", "kind", f"{kind!r} (allowed spike, drift)")
    age = np.arange(n_steps, dtype=np.float64) - onset_step
    on = age >= 0.0
    age = np.maximum(age, 0.0)
    if kind == "spike":
        g = rng.uniform(2.0, 4.0)
        tau_grad = rng.uniform(3.0, 15.0)
        tau_loss = rng.uniform(50.0, 200.0)
        residual = rng.uniform(0.1, 0.3)
        loss = magnitude * (residual + (1.0 - residual) * np.exp(-age / tau_loss))
        grad = magnitude * g * np.exp(-age / tau_grad)
    else:
        g = rng.uniform(1.0, 2.0)
        ramp = rng.uniform(100.0, 500.0)
        loss = magnitude * np.minimum((age + 1.0) / ramp, 1.0)
        grad = g * loss
    return LossSignal(
        loss=np.where(on, loss, 0.0).astype(np.float32), grad_norm=np.where(on, grad, 0.0).astype(np.float32)
    )


def baseline_loss_curve(steps: int, seed: int) -> LossSignal:
    """A realistic healthy training signal: noisy power-law loss and gradient norm.

    ``loss = 1.8 + 10 * (1 + s/100)^-0.5`` nats (11.8 at step 0, about ln of a 128k vocabulary, towards 1.8)
    with 0.5 % Gaussian noise; ``grad_norm = 0.3 + 3 * (1 + s/100)^-0.7`` with log-normal noise (sigma 0.1).
    The constants are a guess at a large-LM pre-training curve, not fitted to one.

    Args:
        steps: number of steps.
        seed: random seed.
    """
    if steps < 0:
        raise InputError("baseline_loss_curve", "steps", f"{steps} (allowed >= 0)")
    rng = np.random.default_rng(seed)
    x = 1.0 + np.arange(steps, dtype=np.float64) / 100.0
    loss = (1.8 + 10.0 * x**-0.5) * (1.0 + 0.005 * rng.standard_normal(steps))
    grad = (0.3 + 3.0 * x**-0.7) * np.exp(0.1 * rng.standard_normal(steps))
    return LossSignal(loss=loss.astype(np.float32), grad_norm=grad.astype(np.float32))
