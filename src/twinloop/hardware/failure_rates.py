"""Per-component failure rates of a GPU cluster, derived from Llama 3's 54-day interruption table.

Source: Llama Team, AI @ Meta, "The Llama 3 Herd of Models" (arXiv:2407.21783, 2024), section 3.3.4 and
Table 5: 16,384 H100 GPUs (2,048 servers x 8) over a 54-day snapshot had 466 job interruptions, 47 planned and
419 unexpected (copied in ``shared/anchors/reliability.md``). Every rate is ``count / (units * 1296 h)``, where
``units`` is what the cause scales with (its *scope*): per GPU, per server (``node``; ``network`` too, a guess:
switches and cables grow with the node count of a fat tree) or per job-GPU-hour (``job``; a guess: Llama 3 ran
one job size). The planner (:mod:`twinloop.plan.failures`) and the twin (:mod:`twinloop.twin.failures`, which
adds temperature acceleration and draws events) share these rates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Scope = Literal["gpu", "node", "job", "network"]

LLAMA3_GPUS = 16_384
LLAMA3_GPUS_PER_NODE = 8
LLAMA3_NODES = LLAMA3_GPUS // LLAMA3_GPUS_PER_NODE
LLAMA3_DAYS = 54
LLAMA3_HOURS = LLAMA3_DAYS * 24.0
LLAMA3_PLANNED = 47
LLAMA3_UNEXPECTED = 419
LLAMA3_CITATION = "Llama Team, 'The Llama 3 Herd of Models', arXiv:2407.21783 (2024), section 3.3.4, Table 5"

# (name, Table 5 label, count, scope, hardware, temp_accelerated, detectable, xid, planned)
LLAMA3_TABLE: tuple[tuple[str, str, int, Scope, bool, bool, bool, int | None, bool], ...] = (
    ("faulty_gpu", "Faulty GPU", 148, "gpu", True, True, True, 79, False),
    ("gpu_hbm3", "GPU HBM3 Memory", 72, "gpu", True, True, True, 48, False),
    ("software_bug", "Software Bug", 54, "job", False, False, True, 31, False),
    ("network_switch_cable", "Network Switch/Cable", 35, "network", True, False, True, None, False),
    ("host_maintenance", "Host Maintenance (unplanned)", 32, "node", False, False, True, None, False),
    ("gpu_sram", "GPU SRAM Memory", 19, "gpu", True, True, True, 95, False),
    ("gpu_system_processor", "GPU System Processor", 17, "gpu", True, True, True, 119, False),
    ("nic", "NIC", 7, "node", True, False, True, None, False),
    ("nccl_watchdog", "NCCL Watchdog Timeouts", 7, "job", False, False, True, None, False),
    ("silent_data_corruption", "Silent Data Corruption", 6, "gpu", True, True, False, None, False),
    ("gpu_thermal_interface_sensor", "GPU Thermal Interface + Sensor", 6, "gpu", True, True, True, None, False),
    ("ssd", "SSD", 3, "node", True, False, True, None, False),
    ("power_supply", "Power Supply", 3, "node", True, False, True, None, False),
    ("server_chassis", "Server Chassis", 2, "node", True, False, True, None, False),
    ("io_expansion_board", "IO Expansion Board", 2, "node", True, False, True, None, False),
    ("dependency", "Dependency", 2, "job", False, False, True, None, False),
    ("cpu", "CPU", 2, "node", True, False, True, None, False),
    ("system_memory", "System Memory", 2, "node", True, False, True, None, False),
    ("planned_maintenance", "Planned interruptions (all kinds)", LLAMA3_PLANNED, "job", False, False, True, None, True),
)

SCOPES: tuple[Scope, ...] = ("gpu", "node", "job", "network")


def llama3_units(scope: Scope) -> int:
    """How many units of ``scope`` the Llama 3 run had (GPUs for gpu/job scope, servers for node/network)."""
    return LLAMA3_GPUS if scope in ("gpu", "job") else LLAMA3_NODES


@dataclass(frozen=True)
class FailureCause:
    """One root cause of job interruptions.

    Attributes:
        name: identifier, e.g. ``faulty_gpu``.
        scope: what the rate is per: a GPU, a node (server), the network (per node), or a job-GPU-hour.
        rate_per_unit_hour: events per unit per hour at ``FailureConfig.ref_temp_c`` (before ``rate_scale``).
        hardware: a hardware fault (Llama 3: ~78 % of unexpected interruptions; 324 of 419 in this table).
        temp_accelerated: rate follows the Arrhenius factor of the GPU's temperature.
        detectable: some hardware counter or log shows it (False for silent data corruption).
        xid: the NVIDIA XID code it shows as, or None.
        planned: a planned interruption (a checkpoint is taken first; no work is lost).
        llama3_count: its count in the Llama 3 54-day table.
    """

    name: str
    scope: Scope
    rate_per_unit_hour: float
    hardware: bool
    temp_accelerated: bool
    detectable: bool
    xid: int | None
    planned: bool = False
    llama3_count: int = 0


CAUSES: tuple[FailureCause, ...] = tuple(
    FailureCause(
        name=name,
        scope=scope,
        rate_per_unit_hour=count / (llama3_units(scope) * LLAMA3_HOURS),
        hardware=hw,
        temp_accelerated=temp,
        detectable=det,
        xid=xid,
        planned=planned,
        llama3_count=count,
    )
    for name, _label, count, scope, hw, temp, det, xid, planned in LLAMA3_TABLE
)
CAUSE_NAMES: tuple[str, ...] = tuple(c.name for c in CAUSES)
N_CAUSES = len(CAUSES)
