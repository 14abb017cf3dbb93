"""The twin's state, declared once: what :class:`~twinloop.twin.engine.Twin` holds and its parts read.

:class:`SiteState` only declares (no behaviour, no values); the engine assigns every attribute in
``Twin.__init__``/``Twin.reset``. Operations, actions, faults, telemetry and the summary are typed against it
(through :class:`~twinloop.twin.operations.ClusterOps`) instead of against the engine, so the engine imports
them and none of them imports the engine: the twin's import graph has no cycle (a test checks).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from twinloop.twin.cooling import Cooling
from twinloop.twin.events import Event
from twinloop.twin.jobs import Job
from twinloop.twin.power_chain import ChainFlows, PowerChain
from twinloop.twin.scenario import ScenarioSpec
from twinloop.twin.scheduler import Scheduler
from twinloop.twin.state import GpuPhysics
from twinloop.twin.topology import Topology
from twinloop.twin.weather import Ambient

THROTTLE_REASONS = ("sw_power_cap", "sw_thermal", "hw_slowdown", "hw_power_brake")


@dataclass
class Accounts:
    """Running totals (float64) for the summary and conservation checks."""

    facility_j: float = 0.0
    it_j: float = 0.0
    host_j: float = 0.0
    conversion_loss_j: float = 0.0
    cooling_j: float = 0.0
    carbon_g: float = 0.0
    peak_facility_w: float = 0.0
    peak_it_w: float = 0.0
    peak_it_instant_w: float = 0.0
    throttled_gpu_s: dict[str, float] = field(default_factory=lambda: dict.fromkeys(THROTTLE_REASONS, 0.0))
    # GPU-seconds a limit under the TDP bound (``limited``) or the power brake held a GPU with work; once each.
    power_throttled_below_tdp_gpu_s: float = 0.0
    failures: dict[str, int] = field(default_factory=dict)
    psu_overloads: int = 0
    thermal_shutdowns: int = 0


class SiteState:
    """Declarations of the twin's state (assigned by the engine; see the module docstring)."""

    spec: ScenarioSpec
    topo: Topology
    physics: GpuPhysics
    chain: PowerChain
    cooling: Cooling
    scheduler: Scheduler
    seed: int
    rng: np.random.Generator
    dt_s: float
    t_s: float
    step_index: int
    gpus_per_node: int
    # jobs and their slots (slot 0 = idle GPUs)
    jobs: list[Job]
    n_slots: int
    slot_activity: NDArray[np.float64]
    job_of_gpu: NDArray[np.int64]
    # incidents and their after-effects
    straggle: dict[int, float]
    co_tenants: dict[int, float]
    drift_rate_c_per_s: NDArray[np.float64]
    extra_ambient_c: float
    node_down_until: NDArray[np.float64]
    node_powered: NDArray[np.bool_]
    brake_until: NDArray[np.float64]
    braked_gpus: NDArray[np.int64]
    hw_slow_gpus: NDArray[np.int64]
    # power and cooling of the last step
    ambient: Ambient
    rack_coolant_c: NDArray[np.float64]
    pdu_rating_w: NDArray[np.float64]
    node_dc_w: NDArray[np.float64]
    flows: ChainFlows | None
    facility_w: float
    cooling_w: float
    pue: float
    # accounting and failures
    accounts: Accounts
    failure_model: Any
    failure_causes: tuple[Any, ...]
    events: list[Event]
    _step_events: list[Event]
    _next_repair_s: float
