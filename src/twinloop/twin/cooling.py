"""Cooling: one CDU (liquid) or air handler per row, and the chiller/economizer plant behind them.

Per row, vectorized over rows (small arrays):

* The loop's supply temperature is a state with thermal mass ``loop_heat_capacity_j_per_c``. The CDU removes
  ``Q_rem = clip(Q_in + C·(T_sup − target)/Δt, 0, capacity)`` — all incoming heat plus what brings the supply
  back to its target — so when the heat exceeds the capacity, the supply temperature rises.
* The target is the setpoint (plus any drift fault), never below facility water + approach; after a cut it falls
  at most ``setpoint_ramp_c_per_s`` (the CDU controller ramps, so the plant does not pull the loop's whole thermal
  mass down in one step — a facility power spike). The facility water
  setpoint is a state too: a command may reset it (warmer water lets the economizer carry more of the heat).
* Capacity scales with flow (``capacity·min(1, ṁ/ṁ_nom)``) and with any capacity-loss fault.
* Coolant seen by a rack's GPUs: ``T_sup + ½·Q_rack/(ṁ_rack·c_p)`` (mean of the rack's inlet and outlet); the
  return is ``T_sup + Q_row/(ṁ·c_p)``. Air rows add recirculated hot air to the inlet.
* Pump and fan power follow the affinity law, ``P = P_nom·(ṁ/ṁ_nom)³``.
* Plant: heat goes to a water-side economizer when the wet-bulb plus approach is below the facility water
  setpoint; above it a chiller with ``COP = COP_ref − slope·(lift − lift_ref)`` (≥ COP_min), ``lift = T_wb − T_fw``
  (wet-bulb minus the facility water it makes), takes over, blended over
  ``BLEND_C`` degrees. Tower fans/pumps always draw ``economizer_power_fraction`` of the heat. Without a chiller
  (``chiller: false``, warm-water cooling) the facility water follows the wet-bulb plus approach when that is
  warmer than the setpoint, so GPU temperatures — and, through leakage power under a cap, clocks — follow the
  weather over the day.

Control modes: ``fixed`` (setpoints and flows stay), ``reactive`` (a PID per row on the row's hottest GPU drives
the setpoint and flow, with feed-forward precooling for queued jobs' requested power and a rate-limited
flow ramp-down), ``commanded`` (setpoints/flows change only by actions and scheduled commands).
Constants flagged as guesses in the scenario schema; ``BLEND_C`` is a guess too.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from twinloop.twin.scenario import CoolingPlantSpec
from twinloop.twin.topology import Topology

CP_WATER_J_PER_KG_C = 4186.0
CP_AIR_J_PER_KG_C = 1006.0
BLEND_C = 4.0


@dataclass
class ScheduledCommand:
    """A setpoint/flow change for one row (or all rows: ``row = -1``) at ``at_s``."""

    at_s: float
    row: int
    setpoint_c: float | None
    flow_fraction: float | None


@dataclass
class CoolingState:
    """Per-row cooling state and the plant's last figures (arrays have one entry per row)."""

    supply_c: NDArray[np.float64]
    setpoint_c: NDArray[np.float64]
    flow_fraction: NDArray[np.float64]
    pump_health: NDArray[np.float64]
    capacity_health: NDArray[np.float64]
    drift_c: NDArray[np.float64]
    target_c: NDArray[np.float64]
    integral: NDArray[np.float64]
    last_error: NDArray[np.float64]
    return_c: NDArray[np.float64]
    heat_removed_w: NDArray[np.float64]
    mover_power_w: NDArray[np.float64]
    plant_power_w: float = 0.0
    facility_water_setpoint_c: float = 25.0
    schedule: list[ScheduledCommand] = field(default_factory=list)


class Cooling:
    """The cooling model for a topology; :meth:`step` advances it by one step."""

    def __init__(self, topo: Topology, plant: CoolingPlantSpec, dt_s: float) -> None:
        rows = topo.rows
        self.topo = topo
        self.plant = plant
        self.dt_s = dt_s
        self.liquid = np.array([r.cooling == "liquid" for r in rows])
        self.base_setpoint_c = np.array(
            [r.cdu.supply_temp_c if r.cooling == "liquid" else r.air.supply_temp_c for r in rows]
        )
        self.flow_nom_kg_per_s = np.array(
            [r.cdu.flow_kg_per_s if r.cooling == "liquid" else r.air.airflow_kg_per_s for r in rows]
        )
        self.cp = np.where(self.liquid, CP_WATER_J_PER_KG_C, CP_AIR_J_PER_KG_C)
        self.capacity_w = np.array([r.cdu.capacity_w if r.cooling == "liquid" else r.air.capacity_w for r in rows])
        self.mover_nom_w = np.array([r.cdu.pump_power_w if r.cooling == "liquid" else r.air.fan_power_w for r in rows])
        self.loop_c_j_per_c = np.array(
            [r.cdu.loop_heat_capacity_j_per_c if r.cooling == "liquid" else 2.0e5 for r in rows]
        )
        self.approach_c = np.array([r.cdu.approach_c if r.cooling == "liquid" else 2.0 for r in rows])
        self.setpoint_min_c = np.array([r.cdu.setpoint_min_c if r.cooling == "liquid" else 16.0 for r in rows])
        self.setpoint_max_c = np.array([r.cdu.setpoint_max_c if r.cooling == "liquid" else 32.0 for r in rows])
        self.flow_min = np.array([r.cdu.flow_min_fraction for r in rows])
        self.flow_max = np.array([r.cdu.flow_max_fraction for r in rows])
        self.ramp_c_per_s = np.array([r.cdu.setpoint_ramp_c_per_s if r.cooling == "liquid" else 0.05 for r in rows])
        self.recirc = np.where(self.liquid, 0.0, np.array([r.air.recirculation_fraction for r in rows]))
        racks_per_row = np.bincount(topo.rack_row, minlength=topo.n_rows).astype(np.float64)
        self.rack_flow_share = 1.0 / racks_per_row[topo.rack_row]
        self.state = self.initial_state()

    def initial_state(self) -> CoolingState:
        """State at t = 0: supply at setpoint, nominal flow, healthy."""
        n = self.topo.n_rows
        return CoolingState(
            supply_c=self.base_setpoint_c.copy(),
            setpoint_c=self.base_setpoint_c.copy(),
            flow_fraction=np.ones(n),
            pump_health=np.ones(n),
            capacity_health=np.ones(n),
            drift_c=np.zeros(n),
            target_c=self.base_setpoint_c.copy(),
            integral=np.zeros(n),
            last_error=np.zeros(n),
            return_c=self.base_setpoint_c.copy(),
            heat_removed_w=np.zeros(n),
            mover_power_w=self.mover_nom_w.copy(),
            facility_water_setpoint_c=self.plant.facility_water_setpoint_c,
        )

    def reset(self) -> None:
        """Back to the initial state."""
        self.state = self.initial_state()

    def mass_flow_kg_per_s(self) -> NDArray[np.float64]:
        """Current mass flow per row (commanded fraction × pump health × nominal)."""
        s = self.state
        return self.flow_nom_kg_per_s * s.flow_fraction * s.pump_health

    def coolant_per_rack_c(self, rack_heat_w: NDArray[np.float64]) -> NDArray[np.float64]:
        """Temperature the GPUs of each rack see (mean of the rack's inlet and outlet)."""
        s = self.state
        mdot_rack = (self.mass_flow_kg_per_s() * self.cp)[self.topo.rack_row] * self.rack_flow_share
        rise = rack_heat_w / np.maximum(mdot_rack, 1e-3)
        inlet = s.supply_c[self.topo.rack_row] + self.recirc[self.topo.rack_row] * rise
        return inlet + 0.5 * rise

    def control(
        self, t_s: float, row_max_gpu_c: NDArray[np.float64] | None, row_heat_w: NDArray[np.float64], precool_w: float
    ) -> None:
        """Apply the control mode for this step (before :meth:`step`)."""
        s = self.state
        while s.schedule and s.schedule[0].at_s <= t_s:
            cmd = s.schedule.pop(0)
            rows = slice(None) if cmd.row < 0 else slice(cmd.row, cmd.row + 1)
            if cmd.setpoint_c is not None:
                s.setpoint_c[rows] = np.clip(cmd.setpoint_c, self.setpoint_min_c[rows], self.setpoint_max_c[rows])
            if cmd.flow_fraction is not None:
                s.flow_fraction[rows] = np.clip(cmd.flow_fraction, self.flow_min[rows], self.flow_max[rows])
        if self.plant.control != "reactive" or row_max_gpu_c is None:
            return
        pid = self.plant.pid
        error = row_max_gpu_c - pid.target_gpu_temp_c
        s.integral = np.clip(s.integral + error * self.dt_s, -500.0, 500.0)
        deriv = (error - s.last_error) / self.dt_s
        s.last_error = error
        correction = pid.kp_c_per_c * error + pid.ki_c_per_c_s * s.integral + pid.kd_c_s_per_c * deriv
        precool = self.plant.precool_c_per_mw * precool_w / 1e6
        s.setpoint_c = np.clip(self.base_setpoint_c - correction - precool, self.setpoint_min_c, self.setpoint_max_c)
        # Flow follows heat load, rate-limited on the way down (fan/pump ramp-down after a job ends).
        target = np.clip(
            0.3 + row_heat_w / self.capacity_w + 0.05 * np.maximum(error, 0.0), self.flow_min, self.flow_max
        )
        down = self.dt_s / max(self.plant.ramp_down_s, self.dt_s)
        s.flow_fraction = np.maximum(target, s.flow_fraction - down)

    def step(self, row_heat_w: NDArray[np.float64], wetbulb_c: float) -> None:
        """Advance the loops by one step with ``row_heat_w`` flowing in; updates powers and temperatures."""
        s, dt = self.state, self.dt_s
        mdot = self.mass_flow_kg_per_s()
        flow_ratio = mdot / self.flow_nom_kg_per_s
        capacity = self.capacity_w * s.capacity_health * np.minimum(1.0, flow_ratio)
        floor = self.facility_water_c(wetbulb_c) + self.approach_c
        wanted = np.maximum(s.setpoint_c + s.drift_c, floor)
        target = np.maximum(wanted, s.target_c - self.ramp_c_per_s * dt)
        s.target_c = target
        removed = np.clip(row_heat_w + self.loop_c_j_per_c * (s.supply_c - target) / dt, 0.0, capacity)
        s.supply_c = s.supply_c + (row_heat_w - removed) * dt / self.loop_c_j_per_c
        s.return_c = s.supply_c + row_heat_w / np.maximum(mdot * self.cp, 1e-3)
        s.heat_removed_w = removed
        s.mover_power_w = self.mover_nom_w * flow_ratio**3
        s.plant_power_w = self.plant_power_w(float(removed.sum() + s.mover_power_w.sum()), wetbulb_c)

    def facility_water_c(self, wetbulb_c: float) -> float:
        """Facility water supply: the setpoint with a chiller; towers alone cannot beat wet-bulb + approach."""
        p, setpoint_c = self.plant, self.state.facility_water_setpoint_c
        if p.chiller:
            return setpoint_c
        return max(setpoint_c, wetbulb_c + p.economizer_approach_c)

    def cop(self, wetbulb_c: float) -> float:
        """Chiller coefficient of performance at ``wetbulb_c`` making the facility water at its setpoint.

        A chiller's work per unit of heat grows with its lift, condensing minus evaporating temperature, which
        follow the tower water (wet-bulb + approach) and the chilled water it makes: warmer facility water lowers the
        lift as much as a cooler wet-bulb does (Carnot's ``T_evap/(T_cond − T_evap)`` to first order).
        """
        p = self.plant
        lift_c = wetbulb_c - self.state.facility_water_setpoint_c
        ref_lift_c = p.chiller_ref_wetbulb_c - p.chiller_ref_facility_water_c
        return max(p.chiller_cop_min, p.chiller_cop_ref - p.chiller_cop_slope_per_c * (lift_c - ref_lift_c))

    def chiller_share(self, wetbulb_c: float) -> float:
        """Fraction of the heat the chiller carries (0: full economizer, 1: full chiller)."""
        p = self.plant
        excess = wetbulb_c + p.economizer_approach_c - self.state.facility_water_setpoint_c
        return float(np.clip(excess / BLEND_C, 0.0, 1.0))

    def plant_power_w(self, heat_w: float, wetbulb_c: float) -> float:
        """Electric power of chiller + towers to reject ``heat_w`` at ``wetbulb_c``."""
        share = self.chiller_share(wetbulb_c) if self.plant.chiller else 0.0
        return heat_w * (self.plant.economizer_power_fraction + share / self.cop(wetbulb_c))
