"""Power chain: node PSUs → rack PDUs → row busways → UPS (AC) or rectifier (HVDC) → transformer → utility.

Every stage is an efficiency; what a stage loses is reported as conversion loss, so per step
``facility = IT (node DC) + PSU + PDU + busway + UPS/HVDC + transformer losses + cooling``, exactly.

PSUs share a node's load equally; their efficiency follows the scenario's curve of efficiency vs load fraction
(interpolated). A node whose instant DC draw exceeds ``psu_overload_tolerance`` × its working PSUs' rating is an
*overload event*: the node's GPUs are power-braked (HW_POWER_BRAKE, lowest clock) for ``BRAKE_S`` seconds. A node
with no working PSU is down.

Caps: racks/rows with ``rack_cap_w``/``row_cap_w`` and the facility budget are enforced by integral controllers
that lower a per-GPU power limit for the GPUs under them (like a rack power manager driving NVML limits);
the gain ``CAP_GAIN`` is a guess.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from twinloop.twin.scenario import PowerChainSpec
from twinloop.twin.topology import Topology

BRAKE_S = 5.0
CAP_GAIN = 0.5


@dataclass
class ChainFlows:
    """Powers of one step (W); per-rack/row arrays plus site scalars."""

    node_ac_w: NDArray[np.float64]
    rack_w: NDArray[np.float64]
    row_w: NDArray[np.float64]
    it_w: float
    psu_loss_w: float
    pdu_loss_w: float
    busway_loss_w: float
    ups_loss_w: float
    transformer_loss_w: float

    @property
    def conversion_loss_w(self) -> float:
        """All conversion losses together."""
        return self.psu_loss_w + self.pdu_loss_w + self.busway_loss_w + self.ups_loss_w + self.transformer_loss_w


class PowerChain:
    """Vectorized power chain for a topology."""

    def __init__(self, topo: Topology, spec: PowerChainSpec, gpu_limit_min_w: float, gpu_limit_max_w: float) -> None:
        self.topo = topo
        self.spec = spec
        rows = topo.rows
        node_row = topo.node_row
        self.psu_rating_w = np.array([r.node.psu_rating_w for r in rows])[node_row]
        self.psus_installed = np.array([r.node.psus for r in rows])[node_row]
        curve = np.asarray(spec.psu_efficiency_curve, dtype=np.float64)
        bonus = spec.psu_efficiency_hvdc_bonus if spec.kind == "hvdc" else 0.0
        self.curve_load = curve[:, 0]
        self.curve_eff = np.minimum(curve[:, 1] + bonus, 0.995)
        self.front_eff = spec.hvdc_efficiency if spec.kind == "hvdc" else spec.ups_efficiency
        self.rack_cap_w = np.array([r.rack_cap_w or np.inf for r in rows])[topo.rack_row]
        self.row_cap_w = np.array([r.row_cap_w or np.inf for r in rows])
        self.gpus_per_rack = np.bincount(topo.gpu_rack, minlength=topo.n_racks).astype(np.float64)
        self.gpus_per_row = np.bincount(topo.gpu_row, minlength=topo.n_rows).astype(np.float64)
        self.limit_min_w = gpu_limit_min_w
        self.limit_max_w = gpu_limit_max_w
        self.reset()

    def reset(self) -> None:
        """Healthy PSUs, caps relaxed, budget from the scenario."""
        self.psus_alive = self.psus_installed.astype(np.float64).copy()
        self.rack_limit_w = np.full(self.topo.n_racks, self.limit_max_w)
        self.row_limit_w = np.full(self.topo.n_rows, self.limit_max_w)
        self.facility_limit_w = self.limit_max_w
        self.budget_w = self.spec.facility_power_budget_w

    def flows(self, node_dc_w: NDArray[np.float64]) -> ChainFlows:
        """Push node DC power up the chain."""
        capacity = self.psus_alive * self.psu_rating_w
        load = node_dc_w / np.maximum(capacity, 1.0)
        eff = np.interp(load, self.curve_load, self.curve_eff)
        node_ac = np.where(capacity > 0, node_dc_w / eff, 0.0)
        rack_in = np.add.reduceat(node_ac, self.topo.rack_node_start)
        s = self.spec
        rack_w = rack_in / s.pdu_efficiency
        row_in = np.bincount(self.topo.rack_row, weights=rack_w, minlength=self.topo.n_rows)
        row_w = row_in / s.busway_efficiency
        ups_in = float(row_w.sum()) / self.front_eff
        utility = ups_in / s.transformer_efficiency
        it = float(node_dc_w.sum())
        psu_loss = float(node_ac.sum()) - it
        return ChainFlows(
            node_ac_w=node_ac,
            rack_w=rack_w,
            row_w=row_w,
            it_w=it,
            psu_loss_w=psu_loss,
            pdu_loss_w=float(rack_w.sum() - rack_in.sum()),
            busway_loss_w=float(row_w.sum() - row_in.sum()),
            ups_loss_w=ups_in - float(row_w.sum()),
            transformer_loss_w=utility - ups_in,
        )

    def overloaded_nodes(self, node_dc_w: NDArray[np.float64]) -> NDArray[np.int64]:
        """Nodes whose draw exceeds what their working PSUs can ride through (or that lost every PSU)."""
        capacity = self.psus_alive * self.psu_rating_w * self.spec.psu_overload_tolerance
        return np.flatnonzero(node_dc_w > capacity)

    def update_caps(self, flows: ChainFlows, facility_w: float) -> None:
        """Integral controllers: move per-GPU limits toward the rack, row and facility caps."""
        lo, hi = self.limit_min_w, self.limit_max_w
        if np.isfinite(self.rack_cap_w).any():
            self.rack_limit_w = np.clip(
                self.rack_limit_w + CAP_GAIN * (self.rack_cap_w - flows.rack_w) / self.gpus_per_rack, lo, hi
            )
        if np.isfinite(self.row_cap_w).any():
            self.row_limit_w = np.clip(
                self.row_limit_w + CAP_GAIN * (self.row_cap_w - flows.row_w) / self.gpus_per_row, lo, hi
            )
        n = float(self.gpus_per_row.sum())
        self.facility_limit_w = float(
            np.clip(self.facility_limit_w + CAP_GAIN * (self.budget_w - facility_w) / n, lo, hi)
        )

    def per_rack_limit_w(self) -> NDArray[np.float64]:
        """The tightest cap-derived per-GPU limit for each rack."""
        rack_row_w = np.minimum(self.rack_limit_w, self.row_limit_w[self.topo.rack_row])
        return np.asarray(np.minimum(rack_row_w, self.facility_limit_w), dtype=np.float64)
