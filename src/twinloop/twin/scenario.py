"""Scenario schema for the twin: typed, frozen, validated at load.

A scenario YAML describes a site (rows of racks of nodes of GPUs, their cooling and power chain), the weather
and grid, the jobs, the scheduler, injected faults, failure processes and what telemetry to keep. Every field
carries its unit in its name; durations accept strings such as ``"6h"``, ``"90s"``, ``"500ms"``, ``"2d"``.

:func:`load_scenario` turns every problem — unknown field, wrong unit, value out of range, impossible topology
(a rack drawing more than its busway, a CDU with negative flow) — into one :class:`InputError` naming the file,
the dotted field and the allowed range.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from twinloop.errors import InputError, pydantic_error, unknown_name
from twinloop.hardware.gpu import GpuSpec, gpu_catalog, gpu_key
from twinloop.safeio import load_yaml
from twinloop.twin.from_plan import job_profile

SCENARIO_DIR = Path(__file__).resolve().parent.parent / "scenarios"
DEFAULT_SCENARIO = SCENARIO_DIR / "default.yaml"

#: The most GPUs a scenario may describe (~1 GB of twin state; the largest packaged hall has 16,384).
MAX_GPUS = 1_000_000

_UNITS_S = {"ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([a-z]*)\s*$")


def parse_duration_s(value: object) -> float:
    """Seconds from a number (seconds) or a string like ``"6h"``, ``"90s"``, ``"1.5d"``, ``"250ms"``.

    Raises:
        ValueError: on anything else, naming the allowed units.
    """
    if isinstance(value, bool):
        raise ValueError("expected a duration like '90s', '6h' (units: ms, s, m, min, h, d)")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        match = _DURATION_RE.match(value.lower())
        if not match or match.group(2) not in (*_UNITS_S, ""):
            raise ValueError(f"bad duration {value!r} (allowed: a number with unit ms, s, m, min, h or d)")
        seconds = float(match.group(1)) * _UNITS_S[match.group(2) or "s"]
    else:
        raise ValueError("expected a duration like '90s', '6h' (units: ms, s, m, min, h, d)")
    if not seconds >= 0 or seconds == float("inf"):
        raise ValueError(f"duration must be finite and >= 0, got {value!r}")
    return seconds


DurationS = Annotated[float, BeforeValidator(parse_duration_s)]


def _range_pair(value: object, parse: Any) -> tuple[float, float]:
    if len(value) != 2:  # type: ignore[arg-type]
        raise ValueError(f"a range is [low, high], got {len(value)} values")  # type: ignore[arg-type]
    lo, hi = parse(value[0]), parse(value[1])  # type: ignore[index]
    if not lo <= hi:
        raise ValueError(f"range low {lo} > high {hi} (allowed: low <= high)")
    return (lo, hi)


def parse_duration_or_range_s(value: object) -> float | tuple[float, float]:
    """A duration (see :func:`parse_duration_s`) or a range ``[low, high]`` of two durations, low <= high."""
    if isinstance(value, list | tuple):
        return _range_pair(value, parse_duration_s)
    return parse_duration_s(value)


def _parse_number(value: object) -> float:
    # YAML 1.1 reads "4.5e5" (no dot) as a string; accept numeric strings as pydantic's float does.
    try:
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise ValueError
        number = float(value)
    except ValueError:
        raise ValueError(f"expected a number or [low, high], got {value!r}") from None
    if not np.isfinite(number):
        raise ValueError(f"expected a finite number, got {value!r}")
    return number


def parse_number_or_range(value: object) -> float | tuple[float, float] | None:
    """A number, ``None``, or a range ``[low, high]`` of two numbers, low <= high."""
    if value is None:
        return None
    if isinstance(value, list | tuple):
        return _range_pair(value, _parse_number)
    return _parse_number(value)


#: A time in seconds, or a range ``[low, high]`` the twin draws a time from (uniformly, with the scenario seed).
DurationOrRangeS = Annotated[float | tuple[float, float], BeforeValidator(parse_duration_or_range_s)]
NumberOrRange = Annotated[float | tuple[float, float] | None, BeforeValidator(parse_number_or_range)]


def _gpu_name(value: Any) -> Any:
    """A GPU name that means a catalog key (``H100``, ``NVIDIA H100 80GB HBM3``) as that key; anything else as
    given (``check_scenario`` names an unknown one with the close keys).
    """
    return (gpu_key(value) or value) if isinstance(value, str) else value


GpuName = Annotated[str, BeforeValidator(_gpu_name)]


class _Frozen(BaseModel):
    # allow_inf_nan=False: no NaN or inf in any float field of a scenario (issue 19).
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class CduSpec(_Frozen):
    """A coolant distribution unit serving one row of liquid-cooled racks."""

    supply_temp_c: float = Field(30.0, ge=5, le=60, description="supply temperature setpoint")
    flow_kg_per_s: float = Field(25.0, gt=0, le=1000, description="nominal secondary-loop flow")
    capacity_w: float = Field(1.2e6, gt=0, le=1e8, description="heat it can move at nominal flow")
    pump_power_w: float = Field(4000.0, ge=0, le=1e6, description="pump power at nominal flow")
    loop_heat_capacity_j_per_c: float = Field(2.0e6, gt=0, description="coolant + piping thermal mass (guess)")
    approach_c: float = Field(3.0, ge=0, le=20, description="supply minus facility water at best")
    setpoint_min_c: float = Field(18.0, ge=5, le=60)
    setpoint_max_c: float = Field(45.0, ge=5, le=60)
    flow_min_fraction: float = Field(0.3, gt=0, le=1)
    flow_max_fraction: float = Field(1.3, ge=1, le=3)
    setpoint_ramp_c_per_s: float = Field(
        0.05, gt=0, le=10, description="fastest fall of the supply target after a setpoint cut (controller ramp, guess)"
    )


class AirSpec(_Frozen):
    """An air handler (CRAH) serving one row of air-cooled racks."""

    supply_temp_c: float = Field(24.0, ge=10, le=40)
    airflow_kg_per_s: float = Field(60.0, gt=0, le=5000)
    capacity_w: float = Field(6.0e5, gt=0, le=1e8)
    fan_power_w: float = Field(15000.0, ge=0, le=1e6, description="fan power at nominal airflow")
    recirculation_fraction: float = Field(0.05, ge=0, le=0.5, description="hot air back to inlets (guess)")
    resistance_factor: float = Field(1.8, ge=1, le=10, description="die-to-air R over die-to-liquid R (guess)")


class NodeSpec(_Frozen):
    """One server: GPUs of one catalog kind plus CPUs, NICs and PSUs."""

    gpu: GpuName = "h100-sxm"
    gpus: int = Field(8, ge=1, le=72)
    cpus: int = Field(2, ge=0, le=8)
    cpu_idle_power_w: float = Field(100.0, ge=0, le=1000)
    cpu_busy_power_w: float = Field(300.0, ge=0, le=1000)
    nics: int = Field(9, ge=0, le=32)
    nic_power_w: float = Field(25.0, ge=0, le=200)
    other_power_w: float = Field(900.0, ge=0, le=1e4, description="fans, DRAM, SSDs, switches on board")
    psus: int = Field(6, ge=1, le=16)
    psu_rating_w: float = Field(3300.0, gt=0, le=2e4)


class RowSpec(_Frozen):
    """``count`` identical rows of ``racks`` racks of ``nodes_per_rack`` nodes."""

    count: int = Field(1, ge=1, le=1000)
    racks: int = Field(8, ge=1, le=200)
    nodes_per_rack: int = Field(8, ge=1, le=72)
    node: NodeSpec = NodeSpec()
    cooling: Literal["liquid", "air"] = "liquid"
    cdu: CduSpec = CduSpec()
    air: AirSpec = AirSpec()
    rack_pdu_rating_w: float = Field(80000.0, gt=0, le=1e6)
    busway_rating_w: float = Field(640000.0, gt=0, le=1e8)
    rack_cap_w: float | None = Field(None, gt=0, description="enforced rack power cap (via GPU power limits)")
    row_cap_w: float | None = Field(None, gt=0)


class PowerChainSpec(_Frozen):
    """Utility → transformer → UPS (AC) or rectifier (HVDC) → busway → rack PDU → node PSU."""

    kind: Literal["ups", "hvdc"] = "ups"
    transformer_efficiency: float = Field(0.99, gt=0.5, le=1)
    ups_efficiency: float = Field(0.95, gt=0.5, le=1, description="double-conversion UPS (AC chain)")
    hvdc_efficiency: float = Field(0.975, gt=0.5, le=1, description="rectifier (HVDC chain)")
    busway_efficiency: float = Field(0.995, gt=0.5, le=1)
    pdu_efficiency: float = Field(0.99, gt=0.5, le=1)
    psu_efficiency_curve: tuple[tuple[float, float], ...] = Field(
        ((0.0, 0.80), (0.1, 0.90), (0.2, 0.94), (0.5, 0.96), (1.0, 0.94)),
        description="(load fraction, efficiency) points, 80 PLUS Titanium-like (guess)",
    )
    psu_efficiency_hvdc_bonus: float = Field(0.01, ge=0, le=0.1, description="DC-DC PSUs skip rectification")
    facility_power_budget_w: float = Field(2.0e6, gt=0, le=1e10)
    psu_overload_tolerance: float = Field(1.1, ge=1, le=2, description="peak/rating a PSU rides through")

    @model_validator(mode="after")
    def _curve(self) -> PowerChainSpec:
        loads = [p[0] for p in self.psu_efficiency_curve]
        effs = [p[1] for p in self.psu_efficiency_curve]
        if len(loads) < 2 or loads != sorted(loads) or not all(0 < e <= 1 for e in effs):
            raise ValueError("psu_efficiency_curve needs >= 2 points, increasing load, efficiency in (0, 1]")
        return self


class PidSpec(_Frozen):
    """PID gains for the reactive cooling mode (on the hottest GPU of each row)."""

    target_gpu_temp_c: float = Field(70.0, ge=30, le=95)
    kp_c_per_c: float = Field(0.3, ge=0, le=10)
    ki_c_per_c_s: float = Field(0.01, ge=0, le=10)
    kd_c_s_per_c: float = Field(0.0, ge=0, le=100)


class CoolingPlantSpec(_Frozen):
    """Chiller + water-side economizer feeding every CDU / air handler; control mode of the CDUs."""

    facility_water_setpoint_c: float = Field(25.0, ge=5, le=50)
    facility_water_min_c: float = Field(10.0, ge=5, le=50, description="lowest setpoint a command may set")
    facility_water_max_c: float = Field(32.0, ge=5, le=50, description="highest (ASHRAE W32 class by default)")
    chiller: bool = Field(True, description="False: towers only, facility water follows wet-bulb + approach")
    chiller_cop_ref: float = Field(6.0, gt=1, le=20, description="COP at the reference wet-bulb and facility water")
    chiller_ref_wetbulb_c: float = Field(18.0, ge=-20, le=40)
    chiller_ref_facility_water_c: float = Field(25.0, ge=5, le=50, description="the facility water COP_ref is at")
    chiller_cop_slope_per_c: float = Field(
        0.15, ge=0, le=2, description="COP lost per C of lift: wet-bulb up or facility water down (guess)"
    )
    chiller_cop_min: float = Field(2.0, gt=0.5, le=10)
    economizer_approach_c: float = Field(4.0, ge=0, le=20, description="tower water above wet-bulb")
    economizer_power_fraction: float = Field(0.02, ge=0, le=0.2, description="tower fans+pumps per W of heat")
    control: Literal["fixed", "reactive", "commanded"] = "fixed"
    pid: PidSpec = PidSpec()
    precool_c_per_mw: float = Field(3.0, ge=0, le=50, description="reactive feed-forward for queued jobs")
    ramp_down_s: float = Field(120.0, ge=0, le=3600, description="fan/pump ramp-down after a job ends")


class WeatherSpec(_Frozen):
    """Ambient temperature and grid carbon intensity over the day (sinusoid or hourly profile)."""

    start_hour: float = Field(0.0, ge=0, lt=24, description="local hour of day at t = 0")
    drybulb_mean_c: float = Field(20.0, ge=-40, le=55)
    drybulb_amplitude_c: float = Field(6.0, ge=0, le=30)
    peak_hour: float = Field(15.0, ge=0, lt=24)
    wetbulb_depression_c: float = Field(6.0, ge=0, le=30)
    drybulb_profile_c: tuple[float, ...] | None = Field(None, description="24 hourly values, overrides sinusoid")
    carbon_g_per_kwh: tuple[float, ...] = Field(
        (420.0,) * 6
        + (400.0, 380.0, 330.0, 280.0, 250.0, 230.0, 220.0, 230.0, 260.0, 300.0, 360.0)
        + (420.0, 460.0, 470.0, 460.0, 450.0, 440.0, 430.0),
        description="24 hourly grid carbon intensities (gCO2e/kWh)",
    )

    @model_validator(mode="after")
    def _profiles(self) -> WeatherSpec:
        if self.drybulb_profile_c is not None and len(self.drybulb_profile_c) != 24:
            raise ValueError("drybulb_profile_c needs 24 hourly values")
        if len(self.carbon_g_per_kwh) != 24 or min(self.carbon_g_per_kwh) < 0:
            raise ValueError("carbon_g_per_kwh needs 24 hourly values >= 0")
        return self


class JobSpec(_Frozen):
    """A training or serving job: ``plan`` (planner request fields) or the per-kind defaults of
    :class:`~twinloop.twin.workload.WorkloadProfile` set its profile; ``profile`` fields override either.
    """

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")
    kind: Literal["training", "serving"]
    gpus: int = Field(ge=1, le=1_000_000)
    submit_s: DurationS = 0.0
    announce_s: DurationS = Field(
        0.0, description="the queue knows the job this long before submit_s (deferred start, reservation)"
    )
    run_s: DurationS | None = Field(None, description="stop after this much wall time (None: run to the end)")
    profile: dict[str, float] = Field(default_factory=dict)
    plan: dict[str, Any] | None = Field(None, description="planner request fields (model, precision, ...)")
    checkpoint_interval_s: DurationS = 1800.0
    checkpoint_write_s: DurationS = 30.0
    restart_overhead_s: DurationS = 120.0
    trace: str | None = Field(None, description="Azure-format CSV (serving); relative to the scenario file")
    trace_rate_scale: float = Field(1.0, gt=0, le=1000)
    gpus_per_replica: int = Field(8, ge=1, le=512)
    hang_timeout_s: DurationS = 600.0


FaultKind = Literal[
    "cdu_pump_degradation",
    "cdu_capacity_loss",
    "cooling_setpoint_drift",
    "heat_wave",
    "psu_loss",
    "gpu_thermal_interface",
    "straggler",
    "sdc",
    "gpu_fall_off_bus",
    "job_hang",
    "facility_power_cap",
    "operator_power_cap",
    "co_tenant",
]


class FaultSpec(_Frozen):
    """An injected fault with its ground truth: what (kind), where (target), when (start, duration).

    ``magnitude`` meaning per kind: pump degradation/capacity loss → remaining fraction (0..1); setpoint drift
    → C per hour; heat wave → C added to ambient; PSU loss → PSUs lost; thermal interface → R multiplier;
    straggler → speed fraction; SDC → loss perturbation; facility cap → new budget W; operator power cap → the
    GPUs' power limit as a fraction of their TDP; co-tenant → the speed fraction the GPU's rank keeps beside another
    process. Others ignore it.

    Ranges: ``start_s``, ``duration_s`` and ``magnitude`` may each be ``[low, high]``, and ``target`` may be
    ``random-<level>`` (``gpu``, ``node``, ``rack``, ``row``) or ``random-<level>:<entity>`` (one of that level
    under the entity, e.g. ``random-gpu:dc1/r01``). The twin draws them once at construction, uniformly, from
    the scenario seed (one stream per fault: adding a fault does not move the others), and the ground truth
    holds the drawn values.
    """

    kind: FaultKind
    target: str = Field(
        description="entity id (row/rack/node/gpu, e.g. dc1/r01/k03/n05/g7), job name, 'site', or "
        "random-<level>[:<entity>]"
    )
    start_s: DurationOrRangeS
    duration_s: DurationOrRangeS | None = None
    magnitude: NumberOrRange = None


class SchedulerSpec(_Frozen):
    """Placement policy and admission under the facility power budget."""

    policy: Literal["first_fit", "power_aware"] = "first_fit"
    admission_fraction: float = Field(0.95, gt=0, le=1.5, description="admit while est. power <= this × budget")


class TelemetrySpec(_Frozen):
    """What telemetry to keep: resolution per level (rounded to whole steps, at least one) and which entities."""

    gpu_every_s: DurationS = 10.0
    facility_every_s: DurationS = 1.0
    aggregate: Literal["sample", "window"] = "window"
    entities: tuple[str, ...] = ("*",)
    keep_gpu: bool = True


class VariationSpec(_Frozen):
    """GPU-to-GPU manufacturing variation: per-GPU factors on leakage (static) power, clocked dynamic power and
    die-to-coolant thermal resistance, each ``1 + sigma·z`` with ``z`` a standard normal truncated at
    ``±clip_sigmas``, drawn once per GPU at twin construction from the scenario seed. Sizes and their basis:
    ``docs/sections/calibration-twin.md`` (the leakage and thermal sizes are guesses; the dynamic size is set so
    that a power-capped job's clock spread matches the ~8 % performance variation published for identical GPUs).
    All zero: every GPU is its catalog nominal.
    """

    leakage_sigma: float = Field(0.05, ge=0, le=0.3, description="relative std of static (leakage) power")
    dynamic_sigma: float = Field(0.03, ge=0, le=0.3, description="relative std of clocked dynamic power")
    thermal_resistance_sigma: float = Field(0.04, ge=0, le=0.3, description="relative std of die-to-coolant R")
    clip_sigmas: float = Field(3.0, gt=0, le=6, description="draws truncated at this many sigmas")

    @model_validator(mode="after")
    def _positive(self) -> VariationSpec:
        worst = max(self.leakage_sigma, self.dynamic_sigma, self.thermal_resistance_sigma) * self.clip_sigmas
        if worst >= 0.9:
            raise ValueError(f"sigma x clip_sigmas = {worst:.2f} could make a factor <= 0.1 (allowed: < 0.9)")
        return self


class SensorSpec(_Frozen):
    """How NVML/DCGM report GPU readings: noise and quantisation of the GPU telemetry (not of the physics).

    Power is the 1 s mean with Gaussian noise ``max(power_noise_fraction·P, power_noise_floor_w)`` (divided by
    the square root of the steps in a telemetry window), reported to the mW; temperatures in whole degrees;
    the SM clock in ``clock_step_mhz`` steps, with ``clock_jitter_mhz`` of noise on a power- or thermal-limited
    GPU (its clock hunts between bins under a cap). Sizes from the H100 readings (``calibration-twin.md``).
    ``enabled: false`` reports the exact model values.
    """

    enabled: bool = True
    power_noise_fraction: float = Field(0.0015, ge=0, le=0.1, description="std of the 1 s power over its value")
    power_noise_floor_w: float = Field(0.3, ge=0, le=50, description="least std of the 1 s power (W)")
    power_step_w: float = Field(0.001, ge=0, le=10, description="power resolution (NVML: 1 mW)")
    temp_step_c: float = Field(1.0, ge=0, le=5, description="temperature resolution (NVML: 1 C)")
    clock_step_mhz: float = Field(15.0, ge=0, le=100, description="SM clock bins (H100: 15 MHz)")
    clock_jitter_mhz: float = Field(15.0, ge=0, le=200, description="std of a limited GPU's reported clock")


class PowerPeakSpec(_Frozen):
    """The instantaneous power inside a step that PSUs and the power chain see (the telemetry shows 1 s means).

    At a load step a GPU overshoots its new steady power by ``overshoot_fraction`` of the step (drawn per job
    and step in the range); at steady load the sub-second ripple adds ``ripple_fraction`` of GPU power. Both
    from the H100 readings (``calibration-twin.md``).
    """

    overshoot_fraction: tuple[float, float] = Field((0.14, 0.34), description="(peak - new steady) / step size")
    ripple_fraction: float = Field(0.04, ge=0, le=0.5, description="1 s max over 1 s mean - 1 at steady load")

    @model_validator(mode="after")
    def _range(self) -> PowerPeakSpec:
        lo, hi = self.overshoot_fraction
        if not 0 <= lo <= hi <= 2:
            raise ValueError(f"overshoot_fraction {self.overshoot_fraction} (allowed: 0 <= low <= high <= 2)")
        return self


class ScenarioSpec(_Frozen):
    """A whole scenario (see module docstring)."""

    name: str = "scenario"
    site: str = Field("dc1", pattern=r"^[A-Za-z0-9_-]+$")
    duration_s: DurationS = 3600.0
    step_s: DurationS = 1.0
    seed: int = Field(0, ge=0)
    rows: tuple[RowSpec, ...] = Field(min_length=1, max_length=1000)
    power_chain: PowerChainSpec = PowerChainSpec()
    cooling: CoolingPlantSpec = CoolingPlantSpec()
    weather: WeatherSpec = WeatherSpec()
    jobs: tuple[JobSpec, ...] = Field((), max_length=10_000)
    scheduler: SchedulerSpec = SchedulerSpec()
    faults: tuple[FaultSpec, ...] = Field((), max_length=10_000)
    failures: Literal["off", "on"] | dict[str, Any] = "off"
    straggler_fraction: float = Field(0.0, ge=0, le=1, description="GPUs drawn as background stragglers at reset")
    straggler_speed_range: tuple[float, float] = Field((0.5, 0.9), description="their speed factor (low, high)")
    telemetry: TelemetrySpec = TelemetrySpec()
    variation: VariationSpec = VariationSpec()
    sensors: SensorSpec = SensorSpec()
    power_peaks: PowerPeakSpec = PowerPeakSpec()
    base_dir: str = Field("", description="directory that relative paths resolve against (set by the loader)")


def node_nameplate_w(node: NodeSpec, gpu: GpuSpec) -> float:
    """Highest steady node DC draw: GPUs at max power limit plus CPUs busy, NICs and the rest."""
    return (
        node.gpus * gpu.power_limit_max_w
        + node.cpus * node.cpu_busy_power_w
        + node.nics * node.nic_power_w
        + (node.other_power_w)
    )


def check_scenario(spec: ScenarioSpec, source: str = "scenario") -> None:
    """Cross-field checks the schema cannot express; raises :class:`InputError` naming the field."""
    n_gpus = sum(r.count * r.racks * r.nodes_per_rack * r.node.gpus for r in spec.rows)
    if n_gpus > MAX_GPUS:
        # Bound what a small file may cost: the twin holds several float arrays per GPU and steps them all.
        raise InputError(source, "rows", f"{n_gpus} GPUs in all (allowed: 1..{MAX_GPUS})")
    catalog = gpu_catalog()
    for i, row in enumerate(spec.rows):
        where = f"rows.{i}"
        if row.node.gpu not in catalog:
            raise unknown_name(source, f"{where}.node.gpu", "GPU", row.node.gpu, catalog)
        gpu = catalog[row.node.gpu]
        node_w = node_nameplate_w(row.node, gpu)
        psu_w = row.node.psus * row.node.psu_rating_w
        if psu_w < node_w:
            raise InputError(
                source,
                f"{where}.node.psu_rating_w",
                f"{row.node.psus} PSUs of {row.node.psu_rating_w:.0f} W "
                f"cannot feed a {node_w:.0f} W node (allowed: >= {node_w / row.node.psus:.0f} W)",
            )
        rack_w = node_w * row.nodes_per_rack
        if row.rack_pdu_rating_w < rack_w:
            raise InputError(
                source,
                f"{where}.rack_pdu_rating_w",
                f"rack draws up to {rack_w:.0f} W, more than its PDU rating (allowed: >= {rack_w:.0f} W)",
            )
        if row.busway_rating_w < rack_w * row.racks:
            raise InputError(
                source,
                f"{where}.busway_rating_w",
                f"{row.racks} racks draw up to {rack_w * row.racks:.0f} W, more than the busway rating "
                f"(allowed: >= {rack_w * row.racks:.0f} W)",
            )
        cdu = row.cdu
        if not cdu.setpoint_min_c <= cdu.supply_temp_c <= cdu.setpoint_max_c:
            raise InputError(
                source,
                f"{where}.cdu.supply_temp_c",
                f"{cdu.supply_temp_c} C outside the CDU setpoint range "
                f"(allowed: {cdu.setpoint_min_c}..{cdu.setpoint_max_c} C)",
            )
    names: set[str] = set()
    for j, job in enumerate(spec.jobs):
        if job.name in names:
            raise InputError(source, f"jobs.{j}.name", f"duplicate job name {job.name!r} (allowed: unique names)")
        names.add(job.name)
        if job.gpus > n_gpus:
            raise InputError(source, f"jobs.{j}.gpus", f"{job.gpus} GPUs requested (allowed: 1..{n_gpus})")
        if job.kind == "serving" and job.gpus % job.gpus_per_replica:
            raise InputError(
                source, f"jobs.{j}.gpus", f"{job.gpus} is not a multiple of gpus_per_replica {job.gpus_per_replica}"
            )
        try:
            job_profile(job.kind, job.gpus_per_replica if job.kind == "serving" else job.gpus, job.profile,
                        job.plan, spec.rows[0].node.gpu)  # fmt: skip
        except InputError as exc:
            raise InputError(source, f"jobs.{j}.plan.{exc.source.lstrip('-').replace('-', '_')}", exc.message) from None
        except (TypeError, ValueError) as exc:
            raise InputError(source, f"jobs.{j}.{'plan' if job.plan else 'profile'}", str(exc)) from None
    if spec.step_s <= 0 or spec.step_s > 60:
        raise InputError(source, "step_s", f"{spec.step_s} s (allowed: 0 < step <= 60 s)")
    if spec.duration_s < spec.step_s:
        raise InputError(source, "duration_s", f"{spec.duration_s} s (allowed: >= step_s {spec.step_s} s)")


def scenario_from_dict(raw: object, source: str = "scenario", base_dir: str = "") -> ScenarioSpec:
    """Validate a parsed mapping into a :class:`ScenarioSpec` (with the cross-field checks)."""
    if not isinstance(raw, dict):
        raise InputError(source, "", "expected a mapping at the top level")
    body = dict(raw)
    body.setdefault("base_dir", base_dir)
    try:
        spec = ScenarioSpec.model_validate(body)
    except ValidationError as exc:
        raise pydantic_error(source, exc) from None
    check_scenario(spec, source)
    return spec


def load_scenario(path: str | Path | None = None, **overrides: Any) -> ScenarioSpec:
    """Load, validate and check a scenario YAML (the packaged default when ``path`` is None).

    ``overrides`` (e.g. ``duration_s="6h"``, ``seed=3``) replace top-level fields before validation.
    """
    p = Path(path) if path is not None else DEFAULT_SCENARIO
    raw = load_yaml(p)
    if isinstance(raw, dict):
        raw.update({k: v for k, v in overrides.items() if v is not None})
    return scenario_from_dict(raw, str(p), str(p.resolve().parent))
