"""The telemetry field table: names, units, entity level, DCGM ids — data, rendered to docs.

GPU fields keep DCGM's names (``DCGM_FI_DEV_*``, ``DCGM_FI_PROF_*``) and DCGM's field ids, so a
dcgm-exporter dashboard reads twinloop data unchanged. Facility, rack, node and job fields that DCGM
does not cover get names in the same style under ``TWINLOOP_FI_<LEVEL>_<QUANTITY>``.

Units are fixed per field (the ``unit`` column); every source converts to them (NVML reports mW and
mJ, twinloop stores W and J). Where dcgm-exporter's own unit differs (energy: mJ),
``dcgm_scale`` is the factor from the twinloop unit to the exporter's unit; the exporter multiplies
by it and the Prometheus source divides by it, so values round-trip.

Every name is also a module constant holding itself (``DCGM_FI_DEV_POWER_USAGE = "DCGM_FI_DEV_POWER_USAGE"``,
as in DCGM's own Python bindings): the only spelling of a field in the code. Import the constant, never write
the string; a test (``tests/telemetry/test_field_vocabulary.py``) fails on a field-name literal elsewhere.

``python -m twinloop.telemetry.docgen > docs/telemetry-fields.md`` regenerates the documentation;
a test fails when the file and this table diverge.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

Level = Literal["gpu", "node", "rack", "row", "site", "job"]
Kind = Literal["gauge", "counter"]

# --- Field names: the one spelling of each (import these, never write the string). ---
# The same names as DCGM's own Python bindings (``dcgm_fields.DCGM_FI_DEV_POWER_USAGE``), holding the name.
# gpu
DCGM_FI_DEV_POWER_USAGE: Final = "DCGM_FI_DEV_POWER_USAGE"
DCGM_FI_DEV_POWER_USAGE_INSTANT: Final = "DCGM_FI_DEV_POWER_USAGE_INSTANT"
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION: Final = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"
DCGM_FI_DEV_GPU_TEMP: Final = "DCGM_FI_DEV_GPU_TEMP"
DCGM_FI_DEV_MEMORY_TEMP: Final = "DCGM_FI_DEV_MEMORY_TEMP"
DCGM_FI_DEV_SM_CLOCK: Final = "DCGM_FI_DEV_SM_CLOCK"
DCGM_FI_DEV_MEM_CLOCK: Final = "DCGM_FI_DEV_MEM_CLOCK"
DCGM_FI_DEV_POWER_MGMT_LIMIT: Final = "DCGM_FI_DEV_POWER_MGMT_LIMIT"
DCGM_FI_DEV_CLOCKS_EVENT_REASONS: Final = "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"
DCGM_FI_DEV_XID_ERRORS: Final = "DCGM_FI_DEV_XID_ERRORS"
DCGM_FI_DEV_GPU_UTIL: Final = "DCGM_FI_DEV_GPU_UTIL"
DCGM_FI_DEV_MEM_COPY_UTIL: Final = "DCGM_FI_DEV_MEM_COPY_UTIL"
DCGM_FI_PROF_SM_ACTIVE: Final = "DCGM_FI_PROF_SM_ACTIVE"
DCGM_FI_PROF_PIPE_TENSOR_ACTIVE: Final = "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"
DCGM_FI_PROF_DRAM_ACTIVE: Final = "DCGM_FI_PROF_DRAM_ACTIVE"
DCGM_FI_PROF_GR_ENGINE_ACTIVE: Final = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
DCGM_FI_PROF_SM_OCCUPANCY: Final = "DCGM_FI_PROF_SM_OCCUPANCY"
DCGM_FI_PROF_PIPE_FP64_ACTIVE: Final = "DCGM_FI_PROF_PIPE_FP64_ACTIVE"
DCGM_FI_PROF_PIPE_FP32_ACTIVE: Final = "DCGM_FI_PROF_PIPE_FP32_ACTIVE"
DCGM_FI_PROF_PIPE_FP16_ACTIVE: Final = "DCGM_FI_PROF_PIPE_FP16_ACTIVE"
DCGM_FI_PROF_PCIE_TX_BYTES: Final = "DCGM_FI_PROF_PCIE_TX_BYTES"
DCGM_FI_PROF_PCIE_RX_BYTES: Final = "DCGM_FI_PROF_PCIE_RX_BYTES"
DCGM_FI_PROF_NVLINK_TX_BYTES: Final = "DCGM_FI_PROF_NVLINK_TX_BYTES"
DCGM_FI_PROF_NVLINK_RX_BYTES: Final = "DCGM_FI_PROF_NVLINK_RX_BYTES"
DCGM_FI_PROF_PIPE_TENSOR_IMMA_ACTIVE: Final = "DCGM_FI_PROF_PIPE_TENSOR_IMMA_ACTIVE"
DCGM_FI_PROF_PIPE_TENSOR_HMMA_ACTIVE: Final = "DCGM_FI_PROF_PIPE_TENSOR_HMMA_ACTIVE"
DCGM_FI_PROF_PIPE_TENSOR_DFMA_ACTIVE: Final = "DCGM_FI_PROF_PIPE_TENSOR_DFMA_ACTIVE"
DCGM_FI_PROF_PIPE_INT_ACTIVE: Final = "DCGM_FI_PROF_PIPE_INT_ACTIVE"
DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL: Final = "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"
DCGM_FI_DEV_PCIE_REPLAY_COUNTER: Final = "DCGM_FI_DEV_PCIE_REPLAY_COUNTER"
DCGM_FI_DEV_DEC_UTIL: Final = "DCGM_FI_DEV_DEC_UTIL"
DCGM_FI_DEV_ENC_UTIL: Final = "DCGM_FI_DEV_ENC_UTIL"
DCGM_FI_DEV_FB_USED: Final = "DCGM_FI_DEV_FB_USED"
DCGM_FI_DEV_FB_FREE: Final = "DCGM_FI_DEV_FB_FREE"
DCGM_FI_DEV_ECC_SBE_VOL_TOTAL: Final = "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL"
DCGM_FI_DEV_ECC_DBE_VOL_TOTAL: Final = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"
DCGM_FI_DEV_ECC_SBE_AGG_TOTAL: Final = "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL"
DCGM_FI_DEV_ECC_DBE_AGG_TOTAL: Final = "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL"
DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS: Final = "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"
DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS: Final = "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS"
DCGM_FI_DEV_ROW_REMAP_FAILURE: Final = "DCGM_FI_DEV_ROW_REMAP_FAILURE"
DCGM_FI_DEV_ROW_REMAP_PENDING: Final = "DCGM_FI_DEV_ROW_REMAP_PENDING"
# gpu, not in DCGM's field table: the compute processes (CUDA contexts) NVML lists on the GPU
TWINLOOP_FI_GPU_COMPUTE_PROCESSES: Final = "TWINLOOP_FI_GPU_COMPUTE_PROCESSES"
# node
TWINLOOP_FI_NODE_POWER: Final = "TWINLOOP_FI_NODE_POWER"
TWINLOOP_FI_PSU_STATE: Final = "TWINLOOP_FI_PSU_STATE"
TWINLOOP_FI_PSU_OUTPUT_POWER: Final = "TWINLOOP_FI_PSU_OUTPUT_POWER"
# rack
TWINLOOP_FI_RACK_POWER: Final = "TWINLOOP_FI_RACK_POWER"
TWINLOOP_FI_RACK_INLET_TEMP: Final = "TWINLOOP_FI_RACK_INLET_TEMP"
TWINLOOP_FI_RACK_COOLANT_TEMP: Final = "TWINLOOP_FI_RACK_COOLANT_TEMP"
# row
TWINLOOP_FI_ROW_POWER: Final = "TWINLOOP_FI_ROW_POWER"
TWINLOOP_FI_CDU_SUPPLY_TEMP: Final = "TWINLOOP_FI_CDU_SUPPLY_TEMP"
TWINLOOP_FI_CDU_RETURN_TEMP: Final = "TWINLOOP_FI_CDU_RETURN_TEMP"
TWINLOOP_FI_CDU_FLOW: Final = "TWINLOOP_FI_CDU_FLOW"
TWINLOOP_FI_CDU_PUMP_POWER: Final = "TWINLOOP_FI_CDU_PUMP_POWER"
TWINLOOP_FI_CDU_SETPOINT: Final = "TWINLOOP_FI_CDU_SETPOINT"
TWINLOOP_FI_CDU_PUMP_SPEED: Final = "TWINLOOP_FI_CDU_PUMP_SPEED"
TWINLOOP_FI_CDU_HEAT_LOAD: Final = "TWINLOOP_FI_CDU_HEAT_LOAD"
TWINLOOP_FI_CDU_VALVE: Final = "TWINLOOP_FI_CDU_VALVE"
# site
TWINLOOP_FI_FACILITY_WATER_TEMP: Final = "TWINLOOP_FI_FACILITY_WATER_TEMP"
TWINLOOP_FI_FACILITY_WATER_SETPOINT: Final = "TWINLOOP_FI_FACILITY_WATER_SETPOINT"
TWINLOOP_FI_AMBIENT_TEMP: Final = "TWINLOOP_FI_AMBIENT_TEMP"
TWINLOOP_FI_WETBULB_TEMP: Final = "TWINLOOP_FI_WETBULB_TEMP"
TWINLOOP_FI_CARBON_INTENSITY: Final = "TWINLOOP_FI_CARBON_INTENSITY"
TWINLOOP_FI_CONVERSION_LOSS: Final = "TWINLOOP_FI_CONVERSION_LOSS"
TWINLOOP_FI_POWER_BUDGET: Final = "TWINLOOP_FI_POWER_BUDGET"
TWINLOOP_FI_FACILITY_POWER: Final = "TWINLOOP_FI_FACILITY_POWER"
TWINLOOP_FI_IT_POWER: Final = "TWINLOOP_FI_IT_POWER"
TWINLOOP_FI_COOLING_POWER: Final = "TWINLOOP_FI_COOLING_POWER"
TWINLOOP_FI_PUE: Final = "TWINLOOP_FI_PUE"
# job
TWINLOOP_FI_JOB_STEP_TIME: Final = "TWINLOOP_FI_JOB_STEP_TIME"
TWINLOOP_FI_JOB_LOSS: Final = "TWINLOOP_FI_JOB_LOSS"
TWINLOOP_FI_JOB_TOKENS_PER_S: Final = "TWINLOOP_FI_JOB_TOKENS_PER_S"
TWINLOOP_FI_JOB_GPUS: Final = "TWINLOOP_FI_JOB_GPUS"
TWINLOOP_FI_JOB_PHASE: Final = "TWINLOOP_FI_JOB_PHASE"
# gpu, from the job: the step time of the job's rank on this GPU on its own (per-rank step timers)
TWINLOOP_FI_RANK_STEP_TIME: Final = "TWINLOOP_FI_RANK_STEP_TIME"
#: DCGM's profiling fields (``DCGM_FI_PROF_*``: activity ratios in 0..1) share this prefix.
PROFILING_PREFIX: Final = "DCGM_FI_PROF_"
TWINLOOP_FI_JOB_GRAD_NORM: Final = "TWINLOOP_FI_JOB_GRAD_NORM"
TWINLOOP_FI_JOB_PROGRESS: Final = "TWINLOOP_FI_JOB_PROGRESS"
# an older name, accepted on input (see ``ALIASES``)
DCGM_FI_DEV_CLOCK_THROTTLE_REASONS: Final = "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"


@dataclass(frozen=True)
class FieldSpec:
    """One telemetry field.

    Args:
        name: the field name (DCGM name for GPU fields).
        unit: the fixed unit of stored values (``W``, ``J``, ``C``, ``MHz``, ``%``, ``ratio`` ...).
        level: the entity level it is usually reported at.
        description: one line.
        dcgm_id: DCGM's numeric field id, or ``None`` for twinloop-defined fields.
        kind: Prometheus metric type (``gauge`` or ``counter``).
        min_value: smallest physically valid value (``None`` = unbounded); below it a value is bad input.
        max_value: largest physically valid value (``None`` = unbounded).
        dcgm_scale: multiply a stored value by this to get dcgm-exporter's unit.
        dcgm_unit: dcgm-exporter's unit when it differs from ``unit``.
    """

    name: str
    unit: str
    level: Level
    description: str
    dcgm_id: int | None = None
    kind: Kind = "gauge"
    min_value: float | None = 0.0
    max_value: float | None = None
    dcgm_scale: float = 1.0
    dcgm_unit: str | None = None


_F = FieldSpec

FIELDS: tuple[FieldSpec, ...] = (
    # --- GPU (DCGM names and ids) ---
    _F(DCGM_FI_DEV_POWER_USAGE, "W", "gpu", "Board power draw (NVML mW / 1000)", 155),
    _F(
        DCGM_FI_DEV_POWER_USAGE_INSTANT,
        "W",
        "gpu",
        "Instantaneous board power draw (nvidia-smi power.draw.instant)",
        157,
    ),
    _F(
        DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION,
        "J",
        "gpu",
        "Energy since driver load (NVML mJ / 1000; dcgm-exporter reports mJ)",
        156,
        "counter",
        dcgm_scale=1000.0,
        dcgm_unit="mJ",
    ),
    _F(DCGM_FI_DEV_GPU_TEMP, "C", "gpu", "GPU die temperature", 150, min_value=-40.0, max_value=150.0),
    _F(DCGM_FI_DEV_MEMORY_TEMP, "C", "gpu", "HBM temperature", 140, min_value=-40.0, max_value=150.0),
    _F(DCGM_FI_DEV_SM_CLOCK, "MHz", "gpu", "SM clock", 100),
    _F(DCGM_FI_DEV_MEM_CLOCK, "MHz", "gpu", "Memory clock", 101),
    _F(DCGM_FI_DEV_POWER_MGMT_LIMIT, "W", "gpu", "Enforced power limit (NVML mW / 1000)", 160),
    _F(
        DCGM_FI_DEV_CLOCKS_EVENT_REASONS,
        "bitmask",
        "gpu",
        "Clock event (throttle) reasons, NVML nvmlClocksEventReason* bits; alias DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
        112,
    ),
    _F(DCGM_FI_DEV_XID_ERRORS, "xid", "gpu", "Code of the last XID error (0 = none)", 230),
    _F(DCGM_FI_DEV_GPU_UTIL, "%", "gpu", "GPU utilization (time a kernel ran)", 203, max_value=100.0),
    _F(DCGM_FI_DEV_MEM_COPY_UTIL, "%", "gpu", "Memory controller utilization", 204, max_value=100.0),
    _F(DCGM_FI_PROF_SM_ACTIVE, "ratio", "gpu", "Fraction of cycles an SM has a warp resident", 1002, max_value=1.0),
    _F(
        DCGM_FI_PROF_PIPE_TENSOR_ACTIVE,
        "ratio",
        "gpu",
        "Fraction of cycles the tensor pipe is active",
        1004,
        max_value=1.0,
    ),
    _F(
        DCGM_FI_PROF_DRAM_ACTIVE,
        "ratio",
        "gpu",
        "Fraction of cycles the HBM interface is active",
        1005,
        max_value=1.0,
    ),
    # Profiling (DCP) fields that dcgm-exporter publishes: ratios of elapsed cycles, and link bandwidth in B/s.
    _F(
        DCGM_FI_PROF_GR_ENGINE_ACTIVE,
        "ratio",
        "gpu",
        "Fraction of time the graphics engine is active",
        1001,
        max_value=1.0,
    ),
    _F(DCGM_FI_PROF_SM_OCCUPANCY, "ratio", "gpu", "Resident warps over the SM's maximum", 1003, max_value=1.0),
    _F(
        DCGM_FI_PROF_PIPE_FP64_ACTIVE,
        "ratio",
        "gpu",
        "Fraction of cycles the FP64 pipe is active",
        1006,
        max_value=1.0,
    ),
    _F(
        DCGM_FI_PROF_PIPE_FP32_ACTIVE,
        "ratio",
        "gpu",
        "Fraction of cycles the FP32 pipe is active",
        1007,
        max_value=1.0,
    ),
    _F(
        DCGM_FI_PROF_PIPE_FP16_ACTIVE,
        "ratio",
        "gpu",
        "Fraction of cycles the FP16 pipe is active",
        1008,
        max_value=1.0,
    ),
    _F(DCGM_FI_PROF_PCIE_TX_BYTES, "B/s", "gpu", "PCIe transmit rate, headers and payload", 1009),
    _F(DCGM_FI_PROF_PCIE_RX_BYTES, "B/s", "gpu", "PCIe receive rate, headers and payload", 1010),
    _F(DCGM_FI_PROF_NVLINK_TX_BYTES, "B/s", "gpu", "NVLink transmit rate, headers and payload", 1011),
    _F(DCGM_FI_PROF_NVLINK_RX_BYTES, "B/s", "gpu", "NVLink receive rate, headers and payload", 1012),
    _F(
        DCGM_FI_PROF_PIPE_TENSOR_IMMA_ACTIVE,
        "ratio",
        "gpu",
        "Fraction of cycles the INT8 tensor (IMMA) pipe is active",
        1013,
        max_value=1.0,
    ),
    _F(
        DCGM_FI_PROF_PIPE_TENSOR_HMMA_ACTIVE,
        "ratio",
        "gpu",
        "Fraction of cycles the FP16/BF16 tensor (HMMA) pipe is active",
        1014,
        max_value=1.0,
    ),
    _F(
        DCGM_FI_PROF_PIPE_TENSOR_DFMA_ACTIVE,
        "ratio",
        "gpu",
        "Fraction of cycles the FP64 tensor (DFMA) pipe is active",
        1015,
        max_value=1.0,
    ),
    _F(
        DCGM_FI_PROF_PIPE_INT_ACTIVE,
        "ratio",
        "gpu",
        "Fraction of cycles the integer pipe is active",
        1016,
        max_value=1.0,
    ),
    _F(DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL, "count", "gpu", "NVLink bandwidth counter, all links", 449, "counter"),
    _F(DCGM_FI_DEV_PCIE_REPLAY_COUNTER, "count", "gpu", "PCIe replays (link retries)", 202, "counter"),
    _F(DCGM_FI_DEV_DEC_UTIL, "%", "gpu", "Video decoder utilization", 206, max_value=100.0),
    _F(DCGM_FI_DEV_ENC_UTIL, "%", "gpu", "Video encoder utilization", 207, max_value=100.0),
    _F(DCGM_FI_DEV_FB_USED, "MiB", "gpu", "Framebuffer (HBM) memory used", 252),
    _F(DCGM_FI_DEV_FB_FREE, "MiB", "gpu", "Framebuffer (HBM) memory free", 251),
    _F(DCGM_FI_DEV_ECC_SBE_VOL_TOTAL, "count", "gpu", "Single-bit ECC errors since reboot", 310, "counter"),
    _F(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL, "count", "gpu", "Double-bit ECC errors since reboot", 311, "counter"),
    _F(DCGM_FI_DEV_ECC_SBE_AGG_TOTAL, "count", "gpu", "Single-bit ECC errors, lifetime", 312, "counter"),
    _F(DCGM_FI_DEV_ECC_DBE_AGG_TOTAL, "count", "gpu", "Double-bit ECC errors, lifetime", 313, "counter"),
    _F(
        DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS,
        "count",
        "gpu",
        "Rows remapped for uncorrectable errors",
        393,
        "counter",
    ),
    _F(DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS, "count", "gpu", "Rows remapped for correctable errors", 394, "counter"),
    _F(DCGM_FI_DEV_ROW_REMAP_FAILURE, "bool", "gpu", "1 when a row remap has failed", 395, max_value=1.0),
    _F(DCGM_FI_DEV_ROW_REMAP_PENDING, "bool", "gpu", "1 when a row remap waits for a GPU reset", 396, max_value=1.0),
    # --- node ---
    _F(TWINLOOP_FI_NODE_POWER, "W", "node", "Node input power (GPUs, CPUs, fans, NICs)"),
    _F(
        TWINLOOP_FI_PSU_STATE,
        "state",
        "node",
        "PSU state: 0 ok, 1 degraded (lost redundancy), 2 failed",
        max_value=2.0,
    ),
    _F(TWINLOOP_FI_PSU_OUTPUT_POWER, "W", "node", "Total PSU output power of the node"),
    # --- rack ---
    _F(TWINLOOP_FI_RACK_POWER, "W", "rack", "Rack input power"),
    _F(TWINLOOP_FI_RACK_INLET_TEMP, "C", "rack", "Rack air inlet temperature", min_value=-40.0, max_value=80.0),
    _F(
        TWINLOOP_FI_RACK_COOLANT_TEMP,
        "C",
        "rack",
        "Liquid coolant temperature in the rack's cold-plate loop",
        min_value=-10.0,
        max_value=100.0,
    ),
    # --- row (a CDU serves a row; an in-rack CDU reports at rack level) ---
    _F(TWINLOOP_FI_ROW_POWER, "W", "row", "Row (busway/PDU) power"),
    _F(TWINLOOP_FI_CDU_SUPPLY_TEMP, "C", "row", "CDU coolant supply temperature", min_value=-10.0, max_value=100.0),
    _F(TWINLOOP_FI_CDU_RETURN_TEMP, "C", "row", "CDU coolant return temperature", min_value=-10.0, max_value=100.0),
    _F(TWINLOOP_FI_CDU_FLOW, "L/min", "row", "CDU secondary-loop coolant flow"),
    _F(TWINLOOP_FI_CDU_PUMP_POWER, "W", "row", "CDU pump power"),
    _F(
        TWINLOOP_FI_CDU_SETPOINT,
        "C",
        "row",
        "CDU supply temperature setpoint (including any drift)",
        min_value=-10.0,
        max_value=100.0,
    ),
    _F(TWINLOOP_FI_CDU_PUMP_SPEED, "ratio", "row", "CDU pump speed command, fraction of nominal", max_value=2.0),
    _F(TWINLOOP_FI_CDU_HEAT_LOAD, "W", "row", "Heat the CDU rejects to facility water"),
    _F(TWINLOOP_FI_CDU_VALVE, "ratio", "row", "CDU facility-water control valve opening", max_value=1.0),
    # --- site ---
    _F(
        TWINLOOP_FI_FACILITY_WATER_TEMP,
        "C",
        "site",
        "Facility water supply temperature",
        min_value=-10.0,
        max_value=100.0,
    ),
    _F(
        TWINLOOP_FI_FACILITY_WATER_SETPOINT,
        "C",
        "site",
        "Facility water supply temperature setpoint",
        min_value=-10.0,
        max_value=100.0,
    ),
    _F(TWINLOOP_FI_AMBIENT_TEMP, "C", "site", "Outdoor dry-bulb temperature", min_value=-60.0, max_value=70.0),
    _F(TWINLOOP_FI_WETBULB_TEMP, "C", "site", "Outdoor wet-bulb temperature", min_value=-60.0, max_value=50.0),
    _F(TWINLOOP_FI_CARBON_INTENSITY, "gCO2/kWh", "site", "Grid carbon intensity"),
    _F(TWINLOOP_FI_CONVERSION_LOSS, "W", "site", "Power conversion losses (UPS, PDU, PSU or HVDC)"),
    _F(TWINLOOP_FI_POWER_BUDGET, "W", "site", "Facility power budget (cap) in force"),
    _F(TWINLOOP_FI_FACILITY_POWER, "W", "site", "Total facility power (IT + cooling + losses)"),
    _F(TWINLOOP_FI_IT_POWER, "W", "site", "IT power (all racks)"),
    _F(TWINLOOP_FI_COOLING_POWER, "W", "site", "Cooling power (chillers, towers, pumps, CRAH fans)"),
    _F(TWINLOOP_FI_PUE, "ratio", "site", "Power usage effectiveness = facility / IT power", min_value=1.0),
    # --- job (entity id ``<site>/jobs/<job id>``) ---
    _F(TWINLOOP_FI_JOB_STEP_TIME, "s", "job", "Wall time of the last training step / serving iteration"),
    _F(
        TWINLOOP_FI_GPU_COMPUTE_PROCESSES,
        "count",
        "gpu",
        "Compute processes on the GPU (NVML nvmlDeviceGetComputeRunningProcesses; absent where not supported)",
    ),
    _F(TWINLOOP_FI_RANK_STEP_TIME, "s", "gpu", "Step time of the job's rank on this GPU alone (no wait for peers)"),
    _F(TWINLOOP_FI_JOB_LOSS, "loss", "job", "Training loss of the last step", min_value=None),
    _F(TWINLOOP_FI_JOB_TOKENS_PER_S, "tokens/s", "job", "Job throughput"),
    _F(TWINLOOP_FI_JOB_GPUS, "count", "job", "GPUs allocated to the job"),
    _F(
        TWINLOOP_FI_JOB_PHASE,
        "state",
        "job",
        "Lifecycle phase: 0 queued, 1 ramp-up, 2 launch, 3 sustained, 4 checkpoint, 5 hung, 6 cooldown, 7 done",
        max_value=7.0,
    ),
    _F(TWINLOOP_FI_JOB_GRAD_NORM, "norm", "job", "Global gradient norm of the last step"),
    _F(TWINLOOP_FI_JOB_PROGRESS, "steps", "job", "Training steps (or requests) completed"),
)

FIELD_BY_NAME: dict[str, FieldSpec] = {f.name: f for f in FIELDS}

#: Older names accepted on input and mapped to the current one.
ALIASES: dict[str, str] = {DCGM_FI_DEV_CLOCK_THROTTLE_REASONS: DCGM_FI_DEV_CLOCKS_EVENT_REASONS}


def canonical_field(name: str) -> str | None:
    """The current field name for ``name`` (resolving aliases), or ``None`` if unknown."""
    name = ALIASES.get(name, name)
    return name if name in FIELD_BY_NAME else None


def render_markdown() -> str:
    """The field table as Markdown (the content of ``docs/telemetry-fields.md``)."""
    lines = [
        "# Telemetry fields",
        "",
        "Generated from `src/twinloop/telemetry/fields.py` by "
        "`python -m twinloop.telemetry.docgen > docs/telemetry-fields.md`; a test checks they agree.",
        "",
        "Entities are hierarchical ids `site/row/rack/node/gpu` (e.g. `site0/row0/rack3/node12/gpu5`); jobs are",
        "`<site>/jobs/<job id>`. Labels (job, model, gpu kind, UUID) travel with frames. Units are fixed per",
        "field: sources convert (NVML mW → W, mJ → J). `DCGM_FI_DEV_CLOCK_THROTTLE_REASONS` is accepted as an",
        "alias of `DCGM_FI_DEV_CLOCKS_EVENT_REASONS`. `exporter ×` is the factor the Prometheus exporter applies",
        "to match dcgm-exporter's unit (the Prometheus source divides it back out). The job fields and",
        "`TWINLOOP_FI_RANK_STEP_TIME` come from the twin, and on a real cluster from the jobs' heartbeat files",
        "(`twinloop watch --job-heartbeats DIR --db FILE` stores what its rules saw; docs/loop-api.md).",
        "",
        "| name | unit | level | kind | DCGM id | valid range | exporter × | description |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for f in FIELDS:
        lo = "" if f.min_value is None else f"{f.min_value:g}"
        hi = "" if f.max_value is None else f"{f.max_value:g}"
        rng = f"[{lo}, {hi}]" if (lo or hi) else "any"
        dcgm = "" if f.dcgm_id is None else str(f.dcgm_id)
        scale = "" if f.dcgm_scale == 1.0 else f"{f.dcgm_scale:g}"
        lines.append(f"| `{f.name}` | {f.unit} | {f.level} | {f.kind} | {dcgm} | {rng} | {scale} | {f.description} |")
    return "\n".join(lines) + "\n"
