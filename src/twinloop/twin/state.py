"""Per-GPU state as structure-of-arrays (float32 where precision allows) and the vectorized GPU step.

One step for all GPUs is about forty NumPy passes over float32 arrays, all in place into preallocated buffers:
activity gather → static + fixed HBM power → limits (user, caps, thermal) → DVFS (clock-scale target from the
HBM-aware inverse table, clipped to the supported range) → relative clock → HBM power at that clock → power →
exact RC die and HBM temperatures → energy counter. The HBM power of the bytes that ride on tensor work follows
the clock (:mod:`twinloop.twin.dvfs`), so the power needs the step's relative clock (a table look-up).
Sparse events (kernel launch peaks, power brake, hardware slowdown) patch index subsets between passes, so
they cost O(affected GPUs). See :mod:`twinloop.twin.dvfs` and :mod:`twinloop.twin.thermal` for the physics.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
from numpy.typing import NDArray

from twinloop.hardware.power import clock_scale
from twinloop.twin.dvfs import (
    HBM_TABLE_ROWS,
    INV_TABLE_SIZE,
    hbm_clock_table,
    hbm_split_w,
    inverse_clock_table,
    kind_constants,
)
from twinloop.twin.thermal import (
    HBM_DIE_COUPLING,
    HBM_R_C_PER_W,
    HBM_TAU_S,
    SW_THERMAL_MARGIN_C,
    hbm_step,
    rc_alpha,
    rc_step,
    thermal_limit_coefficients,
)
from twinloop.twin.topology import Topology
from twinloop.twin.variation import GpuVariation

F32 = np.float32
INITIAL_TEMP_ABOVE_COOLANT_C = 5.0


@dataclass
class GpuArrays:
    """All per-GPU arrays. State: ``temp_c``, ``hbm_temp_c``, ``energy_j`` (float64), limits and caps.

    Constants (per GPU, from its kind): static power ``static_a_w + static_b_w_per_c·T``, thermal R and decay
    factors, clock ranges. Buffers hold the last step's intermediate results (power, relative clock, flags).
    """

    temp_c: NDArray[np.float32]
    hbm_temp_c: NDArray[np.float32]
    energy_j: NDArray[np.float64]
    power_w: NDArray[np.float32]
    clock_x: NDArray[np.float32]
    g: NDArray[np.float32]
    limit_w: NDArray[np.float32]
    user_limit_w: NDArray[np.float32]
    g_cap: NDArray[np.float32]
    gid: NDArray[np.intp]
    xid: NDArray[np.int32]
    limited: NDArray[np.bool_]
    thermal_bound: NDArray[np.bool_]
    static_a_w: NDArray[np.float32]
    static_b_w_per_c: NDArray[np.float32]
    r_c_per_w: NDArray[np.float32]
    inv_r: NDArray[np.float32]
    alpha: NDArray[np.float32]
    th_c1: NDArray[np.float32]
    th_c2: NDArray[np.float32]
    g_min: NDArray[np.float32]
    coolant_c: NDArray[np.float32]
    buf_s: NDArray[np.float32]
    buf_d: NDArray[np.float32]
    buf_m: NDArray[np.float32]
    buf_t: NDArray[np.float32]
    buf_x: NDArray[np.float32]
    buf_i: NDArray[np.intp]
    buf_j: NDArray[np.intp]

    def nbytes(self) -> int:
        """Bytes held by all per-GPU arrays."""
        return sum(int(getattr(self, f.name).nbytes) for f in fields(self))


class GpuPhysics:
    """Builds the arrays for a topology and advances them one step at a time."""

    def __init__(self, topo: Topology, dt_s: float, variation: GpuVariation | None = None) -> None:
        self.topo = topo
        # Manufacturing variation (drawn by the caller; none = every GPU nominal). The dynamic factor costs one
        # multiply per step, skipped when every GPU is nominal.
        self.variation = variation if variation is not None else GpuVariation.nominal(topo.n_gpus)
        self.leak_factor = self.variation.leakage
        self.dyn_factor: NDArray[np.float32] | None = (
            None if bool((self.variation.dynamic == 1.0).all()) else self.variation.dynamic
        )
        self.dt_s = dt_s
        self.kc = kind_constants(topo.kinds)
        self.n_kinds = len(topo.kinds)
        self.table = inverse_clock_table(self.kc.coeff)
        self.table_scale = F32(INV_TABLE_SIZE - 1)
        k = topo.gpu_kind
        kinds = topo.kinds
        row_air = np.array([r.cooling == "air" for r in topo.rows])[topo.gpu_row]
        air_factor = np.array([r.air.resistance_factor for r in topo.rows])[topo.gpu_row]
        r = np.array([g.thermal_resistance_c_per_w for g in kinds])[k] * np.where(row_air, air_factor, 1.0)
        c = np.array([g.thermal_capacitance_j_per_c for g in kinds])[k]
        self.r_c_per_w = (r * self.variation.thermal_resistance).astype(F32)
        self.c_j_per_c = c.astype(F32)
        self.slowdown_c = np.array([g.slowdown_temp_c for g in kinds], dtype=F32)[k]
        self.shutdown_c = np.array([g.shutdown_temp_c for g in kinds], dtype=F32)[k]
        self.tdp_w = np.array([g.tdp_w for g in kinds], dtype=F32)[k]
        self.limit_min_w = np.array([g.power_limit_min_w for g in kinds], dtype=F32)[k]
        self.limit_max_w = np.array([g.power_limit_max_w for g in kinds], dtype=F32)[k]
        self.clock_max_mhz = self.kc.clock_max_mhz[k]
        self.clock_min_mhz = self.kc.clock_min_mhz[k]
        self.hbm_alpha = F32(np.exp(-dt_s / HBM_TAU_S))
        self.hbm_r = F32(HBM_R_C_PER_W)
        self.hbm_couple = F32(HBM_DIE_COUPLING)
        self.gpu_rack = topo.gpu_rack.astype(np.intp)
        per_rack = np.bincount(topo.gpu_rack, minlength=topo.n_racks)
        self.rack_shape = (topo.n_racks, int(per_rack[0])) if (per_rack == per_rack[0]).all() else None
        self.gpus: GpuArrays = self.initial(25.0)
        self._hbm_inverse()
        self.d_table = np.zeros(1, dtype=F32)
        self.m_table = np.zeros(1, dtype=F32)
        self.mx_table = np.zeros(1, dtype=F32)
        self.dr_table = np.ones(1, dtype=F32)
        self.row_table = np.zeros(1, dtype=np.intp)
        self.hbm_clocked = False
        self.slot_hbm_w = (np.zeros((1, self.n_kinds)), np.zeros((1, self.n_kinds)))  # (M0, Mx) per (slot, kind)

    def _hbm_inverse(self) -> None:
        """The HBM-aware inverse table, its ``r = Mx/D`` range and step (see :mod:`twinloop.twin.dvfs`).

        ``Mx ≤ mem·k·tensor`` and ``D ≥ clocked_tensor·tensor``, so ``r`` is bounded per kind; a GPU whose dynamic
        factor ``f`` is below 1 has ``r/f`` (its clocked power is ``f·D``, its HBM power is not scaled), so the
        table reaches the smallest factor's bound, and such GPUs pick their own row each step.
        """
        kc = self.kc
        tensor_w = np.maximum(kc.clocked_per_activity_w[:, 0].astype(np.float64), 1e-9)
        self.r_bound = float(np.max(kc.mem_per_activity_w * kc.gemm_dram_per_tensor / tensor_w, initial=0.0))
        f_min = 1.0 if self.dyn_factor is None else min(1.0, float(self.dyn_factor.min()))
        self.r_step = max(self.r_bound / f_min, 1e-9) / (HBM_TABLE_ROWS - 1)
        self.hbm_table = hbm_clock_table(self.kc.coeff, self.r_step * (HBM_TABLE_ROWS - 1)).reshape(-1)
        # Per GPU 1/(f·r_step): its row is ceil(r·that) (only used with manufacturing variation).
        self.row_scale = None if self.dyn_factor is None else (1.0 / (self.dyn_factor * self.r_step)).astype(F32)

    def initial(self, coolant_c: float) -> GpuArrays:
        """Fresh arrays: GPUs idle a few degrees above ``coolant_c``, limits at TDP, clocks uncapped."""
        n = self.topo.n_gpus
        k = self.topo.gpu_kind
        alpha = rc_alpha(self.r_c_per_w, self.c_j_per_c, self.dt_s)
        c1, c2 = thermal_limit_coefficients(alpha, self.slowdown_c - F32(SW_THERMAL_MARGIN_C))
        temp = np.full(n, coolant_c + INITIAL_TEMP_ABOVE_COOLANT_C, dtype=F32)
        return GpuArrays(
            temp_c=temp,
            hbm_temp_c=temp.copy(),
            energy_j=np.zeros(n),
            power_w=np.zeros(n, dtype=F32),
            clock_x=np.ones(n, dtype=F32),
            g=np.ones(n, dtype=F32),
            limit_w=np.zeros(n, dtype=F32),
            user_limit_w=self.tdp_w.copy(),
            g_cap=np.ones(n, dtype=F32),
            gid=k.astype(np.intp),
            xid=np.zeros(n, dtype=np.int32),
            limited=np.zeros(n, dtype=bool),
            thermal_bound=np.zeros(n, dtype=bool),
            static_a_w=self.kc.static_a_w[k] * self.leak_factor,
            static_b_w_per_c=self.kc.static_b_w_per_c[k] * self.leak_factor,
            r_c_per_w=self.r_c_per_w.copy(),
            inv_r=(F32(1.0) / self.r_c_per_w).astype(F32),
            alpha=alpha,
            th_c1=c1,
            th_c2=c2,
            g_min=self.kc.g_min[k].copy(),
            coolant_c=np.full(n, coolant_c, dtype=F32),
            buf_s=np.zeros(n, dtype=F32),
            buf_d=np.zeros(n, dtype=F32),
            buf_m=np.zeros(n, dtype=F32),
            buf_t=np.zeros(n, dtype=F32),
            buf_x=np.zeros(n, dtype=F32),
            buf_i=np.zeros(n, dtype=np.intp),
            buf_j=np.zeros(n, dtype=np.intp),
        )

    def set_thermal_resistance(self, idx: NDArray[np.int64], r_c_per_w: NDArray[np.float32]) -> None:
        """Change R for some GPUs (degraded thermal interface) and refresh their decay/limit constants."""
        a = self.gpus
        a.r_c_per_w[idx] = r_c_per_w
        a.inv_r[idx] = F32(1.0) / a.r_c_per_w[idx]
        a.alpha[idx] = rc_alpha(a.r_c_per_w[idx], self.c_j_per_c[idx], self.dt_s)
        c1, c2 = thermal_limit_coefficients(a.alpha[idx], self.slowdown_c[idx] - F32(SW_THERMAL_MARGIN_C))
        a.th_c1[idx] = c1
        a.th_c2[idx] = c2

    def set_powered(self, idx: NDArray[np.int64], on: bool) -> None:
        """Power GPUs off (no power at all, idle activity) or back on."""
        a = self.gpus
        k = self.topo.gpu_kind[idx]
        a.static_a_w[idx] = self.kc.static_a_w[k] * self.leak_factor[idx] if on else 0.0
        a.static_b_w_per_c[idx] = self.kc.static_b_w_per_c[k] * self.leak_factor[idx] if on else 0.0
        # Off: clock-scale pinned to 0, so power is exactly 0; a power cycle also clears locked clocks.
        a.g_min[idx] = self.kc.g_min[k] if on else 0.0
        a.g_cap[idx] = 1.0 if on else 0.0
        if not on:
            a.gid[idx] = k

    def group_tables(self, slot_activity: NDArray[np.float64]) -> None:
        """Per (slot, kind) clocked dynamic power at full clock ``D``, fixed HBM power ``M0`` and clock-following
        HBM power ``Mx`` (W per unit relative clock), and the HBM-aware inverse table's row and scale.

        ``slot_activity`` has shape (slots, 3): tensor, sm, dram, the DRAM activity at the kind's reference clock.
        Its part that rides on tensor work (``k·tensor·x``, at most all of it) follows the clock; the rest does not.
        """
        kc = self.kc
        d = slot_activity[:, :2] @ kc.clocked_per_activity_w.T.astype(np.float64)  # (slots, kinds)
        d[1:] += kc.context_w[None, :]  # every job slot holds a CUDA context; slot 0 (no job) does not
        d = np.maximum(d, 1e-3)
        m0, mx = hbm_split_w(slot_activity, kc, self.r_bound, d)
        self.slot_hbm_w = (m0, mx)
        rows = np.minimum(np.ceil(mx / (d * self.r_step)), HBM_TABLE_ROWS - 1)
        self.d_table = d.astype(F32).reshape(-1)
        self.m_table = m0.astype(F32).reshape(-1)
        self.mx_table = mx.astype(F32).reshape(-1)
        self.r_table = (mx / d).astype(F32).reshape(-1)
        self.dr_table = (d * (1.0 + rows * self.r_step)).astype(F32).reshape(-1)
        self.row_table = (rows.astype(np.intp) * INV_TABLE_SIZE).reshape(-1)
        self.hbm_clocked = bool(mx.any())

    def per_gpu_from_rack(self, rack_values: NDArray[np.float32], out: NDArray[np.float32]) -> None:
        """Spread a per-rack value to the rack's GPUs (a broadcast copy when racks are uniform)."""
        if self.rack_shape is not None:
            np.copyto(out.reshape(self.rack_shape), rack_values[:, None])
        else:
            np.take(rack_values, self.gpu_rack, out=out, mode="clip")

    def dvfs(self, rack_limit_w: NDArray[np.float32] | None) -> None:
        """Limits and DVFS: fills ``g`` (clipped clock-scale), flags, and buffers ``s`` (static + fixed HBM), ``d``,
        ``m`` (fixed HBM).

        ``rack_limit_w`` is the cap-derived per-GPU limit per rack, or None when no cap binds.
        """
        a = self.gpus
        s, d, m, lim, t = a.buf_s, a.buf_d, a.buf_m, a.limit_w, a.buf_t
        np.take(self.d_table, a.gid, out=d, mode="clip")
        if self.dyn_factor is not None:
            np.multiply(d, self.dyn_factor, out=d)
        np.take(self.m_table, a.gid, out=m, mode="clip")
        np.multiply(a.static_b_w_per_c, a.temp_c, out=s)
        np.add(s, a.static_a_w, out=s)
        np.add(s, m, out=s)
        if rack_limit_w is None:
            np.copyto(lim, a.user_limit_w)
        else:
            self.per_gpu_from_rack(rack_limit_w, lim)
            np.minimum(lim, a.user_limit_w, out=lim)
        # Thermal power limit that lands the die at the software slowdown target at the end of the step.
        np.multiply(a.th_c2, a.temp_c, out=t)
        np.subtract(a.th_c1, t, out=t)
        np.subtract(t, a.coolant_c, out=t)
        np.multiply(t, a.inv_r, out=t)
        np.less(t, lim, out=a.thermal_bound)
        np.minimum(lim, t, out=lim)
        # g where D·g(x) + Mx·x fills what is left: b = left / (D·(1 + r)) on the row of r (dvfs module docstring).
        g, dr = a.g, a.buf_x
        np.subtract(lim, s, out=g)
        if self.row_scale is None:
            np.take(self.dr_table, a.gid, out=dr, mode="clip")
            np.take(self.row_table, a.gid, out=a.buf_j, mode="clip")
        else:
            self._rows_with_variation(dr, d)
        np.divide(g, dr, out=g)
        np.clip(g, 0.0, 1.0, out=g)
        np.multiply(g, self.table_scale, out=t)
        np.copyto(a.buf_i, t, casting="unsafe")
        np.add(a.buf_i, a.buf_j, out=a.buf_i)
        np.take(self.hbm_table, a.buf_i, out=g, mode="clip")
        np.less(g, a.g_cap, out=a.limited)
        np.maximum(g, a.g_min, out=g)
        np.minimum(g, a.g_cap, out=g)

    def _rows_with_variation(self, dr: NDArray[np.float32], d: NDArray[np.float32]) -> None:
        """Each GPU's table row for its own ``r/f`` into ``buf_j`` (flat offset), ``f·D·(1 + r_row)`` into ``dr``.

        ``d`` holds ``f·D``.
        """
        a = self.gpus
        assert self.row_scale is not None
        np.take(self.r_table, a.gid, out=dr, mode="clip")
        np.multiply(dr, self.row_scale, out=dr)
        np.ceil(dr, out=dr)
        np.minimum(dr, F32(HBM_TABLE_ROWS - 1), out=dr)
        np.multiply(dr, F32(INV_TABLE_SIZE), out=a.buf_t)
        np.copyto(a.buf_j, a.buf_t, casting="unsafe")
        np.multiply(dr, F32(self.r_step), out=dr)
        np.add(dr, F32(1.0), out=dr)
        np.multiply(dr, d, out=dr)

    def finish(self) -> None:
        """Relative clock (into ``gpus.clock_x``, which the power peaks read), power, die/HBM temperatures and energy
        from the (patched) ``g``.
        """
        a = self.gpus
        p, g, t = a.power_w, a.g, a.buf_t
        np.multiply(g, self.table_scale, out=t)
        np.copyto(a.buf_i, t, casting="unsafe")
        np.take(self.table, a.buf_i, out=a.clock_x, mode="clip")
        np.multiply(a.buf_d, g, out=p)
        np.add(p, a.buf_s, out=p)
        if self.hbm_clocked:
            # HBM power of the GEMM traffic at this step's clock: Mx·x, x = g⁻¹(g) (rounded down, as the cap needs).
            mx = a.buf_x
            np.take(self.mx_table, a.gid, out=mx, mode="clip")
            np.multiply(mx, a.clock_x, out=mx)
            np.add(a.buf_m, mx, out=a.buf_m)
            np.add(p, mx, out=p)
        # Die: T_ss = T_cool + R·P, exact RC update.
        np.multiply(a.r_c_per_w, p, out=t)
        np.add(t, a.coolant_c, out=t)
        rc_step(a.temp_c, t, a.alpha)
        # HBM: T_ss = T_cool + k·(T_die − T_cool) + R_hbm·P_hbm, exact RC update.
        hbm_step(a.hbm_temp_c, a.temp_c, a.coolant_c, a.buf_m, self.hbm_couple, self.hbm_r, self.hbm_alpha, t)
        a.energy_j += p * self.dt_s if self.dt_s != 1.0 else p

    def patch_g(self, idx: NDArray[np.int64], value: NDArray[np.float32] | float) -> None:
        """Override the clock scale of some GPUs this step (launch peak, power brake, HW slowdown)."""
        self.gpus.g[idx] = value

    def x_of_g(self, g: NDArray[np.float32]) -> NDArray[np.float32]:
        """Relative clock for clock-scale values ``g`` (table inverse of ``clock_scale``)."""
        idx = np.multiply(g, self.table_scale).astype(np.intp)
        return np.take(self.table, idx, mode="clip")

    def clock_x(self) -> NDArray[np.float32]:
        """Relative SM clock (0..1) of every GPU for the last step; computed on demand into ``gpus.clock_x``."""
        a = self.gpus
        np.multiply(a.g, self.table_scale, out=a.buf_t)
        np.copyto(a.buf_i, a.buf_t, casting="unsafe")
        np.take(self.table, a.buf_i, out=a.clock_x, mode="clip")
        return a.clock_x

    def clock_mhz(self) -> NDArray[np.float32]:
        """SM clock of every GPU (MHz)."""
        return np.asarray(self.clock_x() * self.clock_max_mhz, dtype=F32)

    def g_for_clock(self, idx: NDArray[np.int64], clock_mhz: float | None) -> NDArray[np.float32]:
        """Clock-scale cap for a locked clock (``None`` = unlocked, 1)."""
        if clock_mhz is None:
            return np.ones(idx.size, dtype=F32)
        x = np.clip(clock_mhz / self.clock_max_mhz[idx].astype(np.float64), 0.0, 1.0)
        return np.asarray(clock_scale(x, self.kc.coeff), dtype=F32)
