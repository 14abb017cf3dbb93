"""Heat forecast per CDU row for precooling: the learned rack forecaster, fed through the cluster port.

The cooling optimizer asks, every control period, how much heat each row will gain within the horizon
(:meth:`RowHeatForecast.rise_w`) and what it carries now (:meth:`RowHeatForecast.load_w`). Both come from the
rack heat-load forecaster (:class:`~twinloop.ops.learn.forecast.HeatLoadForecaster`, applied online by
:class:`~twinloop.ops.learn.forecast_online.OnlineForecast`) on rack power and
what the job queue and the planner know ahead, as the cluster offers them (:class:`~twinloop.ops.ports.RackHeat`;
the twin's come from ``twinloop.closedloop.twin_history.TwinRecorder``: a job is known from ``submit_s -
announce_s``). The row's rise is
the part of the forecast change that the queue's knowledge accounts for (the model is linear, so this is the
known-ahead columns' share), summed over the row's racks: a rack that will cool offsets one that will heat. The
rest of the forecast (recent trend, time of day, the intercept) is left out on purpose: its intercept carries the
training halls' average load growth (about +2.7 kW per rack per 10 min, from their backlogs), which on an idle row
would read as heat coming when nothing is queued.

The packaged model (:data:`PACKAGED_MODEL`) was fitted by ``benchmarks/forecast_twin.py --save`` on seeded random
queues on a 256-GPU hall at 5 s samples (see docs/calibration.md, heat-load forecast); it is applied here to
other halls, whose racks may be larger. The model predicts load changes in W from features in W, so the rack
size enters only through the loads themselves — an extrapolation the calibration section measures only on the
training hall.

Whether heat coming is worth precooling for is :class:`ArrivalTemperature`'s question: how hot the row's GPUs would
run if the arriving work drove them to their power limit, against their slowdown temperature.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from importlib import resources
from pathlib import Path

import numpy as np

from twinloop.errors import InputError
from twinloop.ops.detect.rules import POWER, POWER_LIMIT, TEMP, GpuLimits
from twinloop.ops.learn.forecast import HeatLoadForecaster
from twinloop.ops.learn.forecast_online import OnlineForecast
from twinloop.ops.ports import F64, RackHeat

PACKAGED_MODEL = "rack_heat_forecast.json"
#: Feature columns that carry what the queue and planner know ahead: the known-change sum (3) and, from
#: column 7 on, the known-ahead columns (see :meth:`OnlineForecast.features`).
KNOWN_FEATURES = [3]
N_BASE_FEATURES = 7


def load_models(path: Path | None = None) -> tuple[dict[float, HeatLoadForecaster], float]:
    """Rack forecasters by horizon and the sample interval they were fitted at (s), from ``path`` or the package.

    Raises:
        InputError: unreadable JSON or a model that does not parse (names the file and field).
    """
    source = str(path) if path is not None else f"package:{PACKAGED_MODEL}"
    try:
        text = (
            path.read_text()
            if path is not None
            else resources.files(__package__).joinpath("models", PACKAGED_MODEL).read_text()
        )
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(source, f"line {exc.lineno}", f"not JSON: {exc.msg}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("rack"), list) or not data["rack"]:
        raise InputError(source, "rack", "missing (allowed: a list of HeatLoadForecaster.to_dict() objects)")
    dt_s = data.get("sample_s")
    if not isinstance(dt_s, int | float) or dt_s <= 0:
        raise InputError(source, "sample_s", f"{dt_s!r} (allowed: > 0 s)")
    models = [HeatLoadForecaster.from_dict(m, f"{source}: rack") for m in data["rack"]]
    return {m.horizon_s: m for m in models}, float(dt_s)


class RowHeatForecast:
    """Forecast heat per CDU row from the cluster's :class:`~twinloop.ops.ports.RackHeat`; call :meth:`observe`
    on every sample that carries one.

    A rack's row is its parent id (``site/row/rack``). Until the first observation every row's rise and load are
    0 W, so a cluster that never offers rack heat (no scheduler telling its queue) leaves precooling off.

    Args:
        models: rack forecasters by horizon (:func:`load_models`), fitted at ``sample_s``.
        sample_s: the models' sample interval, s: the interval the cluster must offer rack heat at.
        horizon_s: the horizon the optimizer asks about, s (one of the models').
    """

    def __init__(self, models: Mapping[float, HeatLoadForecaster], sample_s: float, horizon_s: float = 600.0) -> None:
        model = next((m for h, m in models.items() if abs(h - horizon_s) < 1e-6), None)
        if model is None:
            have = ", ".join(f"{h:g}" for h in sorted(models))
            raise InputError("RowHeatForecast", "horizon_s", f"{horizon_s:g} (allowed: {have})")
        if sample_s <= 0:
            raise InputError("RowHeatForecast", "sample_s", f"{sample_s} (allowed: > 0 s)")
        self.models = dict(models)
        self.sample_s = float(sample_s)
        self.horizon_s = horizon_s
        self.model = model
        self.online: OnlineForecast | None = None
        self._rack_row = np.array([], dtype=str)
        self._rise = np.zeros(0)
        self._load = np.zeros(0)

    @property
    def horizons_s(self) -> tuple[float, ...]:
        """The horizons the models need known-ahead columns for, s (what the cluster should compute)."""
        return tuple(sorted(self.models))

    def observe(self, heat: RackHeat) -> None:
        """Feed one rack-heat sample (the cluster offers one every ``sample_s``)."""
        if self.online is None or self.online.entities != heat.rack_ids:
            self.online = OnlineForecast(self.models, heat.rack_ids, self.sample_s)
            self._rack_row = np.array([rid.rsplit("/", 1)[0] for rid in heat.rack_ids])
        self.online.update(heat.t_s, heat.load_w, heat.scheduled_delta_w, heat.known_ahead_w)
        self._load = heat.load_w
        x = self.online.features(self.horizon_s)
        self._rise = self.model.contribution(x, KNOWN_FEATURES + list(range(N_BASE_FEATURES, x.shape[1])))

    def rise_w(self, row: str) -> float:
        """Heat the queue says the row will gain within the horizon (net over its racks; negative = cooling), W."""
        return float(self._rise[self._rack_row == row].sum())

    def load_w(self, row: str) -> float:
        """The row's rack load at the last sample, W."""
        return float(self._load[self._rack_row == row].sum())


class ArrivalTemperature:
    """How hot a row's GPUs would run if heat arriving on the row drove them to their power limit.

    A plain rule on what the loop observes, with the GPUs' own limits (:class:`~twinloop.ops.detect.rules.GpuLimits`:
    the catalog's thermal resistance R and slowdown temperature per GPU). For each GPU of the row:

    ``T_full = T_now + R·max(P_limit − P_now, 0)``

    its temperature now plus the rise its own thermal resistance predicts if its power went from now to its
    enforced power limit (the telemetry's power limit, else the TDP): the most a job landing on it can draw,
    sustained. The row's prediction is the hottest ``T_full`` over its GPUs (the queue does not say which of the
    row's GPUs a job gets, so any may), plus the coolant's warming under the arriving heat:
    ``max(mean(T − R·P) − T_supply, 0) · rise / load``: the coolant warms in proportion to the heat it carries
    (``Q / (ṁ·c_p)``), and the row's present ratio is read from its GPUs' mean coolant-side temperature
    ``T − R·P`` above the CDU supply per watt of row load.

    What is a guess: R is the catalog's figure (fitted on one H100; a GPU's own R varies with its part and its
    thermal interface); a GPU at steady state (``T − R·P`` is its coolant only once its ~10 s time constant has
    passed); the arriving heat spread over the row like today's (a job packed into few racks warms their coolant
    more); the supply staying where it is until the job arrives (the optimizer re-predicts every period, so a
    relaxing setpoint is seen one period later).

    Args:
        gpu_ids: GPU ids ``site/row/rack/node/gpu`` in the order of the samples' per-GPU arrays.
        limits: the GPUs' limits (same order).
    """

    def __init__(self, gpu_ids: tuple[str, ...], limits: GpuLimits) -> None:
        self._row_of = np.array(["/".join(gid.split("/")[:2]) for gid in gpu_ids])
        self.limits = limits
        self._gpu: dict[str, F64] = {}

    def observe(self, gpu: Mapping[str, F64]) -> None:
        """Keep the latest sample's per-GPU fields (temperature, power, power limit); read at prediction time."""
        self._gpu = dict(gpu)

    def slowdown_c(self, row: str) -> float | None:
        """The lowest slowdown temperature among the row's GPUs, °C (None for a row with no GPU)."""
        mask = self._row_of == row
        return float(self.limits.slowdown_temp_c[mask].min()) if mask.any() else None

    def predict_c(
        self, row: str, rise_w: float, load_w: float, supply_c: float | None, aggregate: str = "max"
    ) -> float | None:
        """The hottest (``aggregate="max"``) or mean (``"mean"``) GPU of ``row`` once ``rise_w`` of heat arrives on a
        row carrying ``load_w`` now, °C.

        None when the row has no GPU or no GPU of it reported temperature and power.
        """
        temp, power = self._gpu.get(TEMP), self._gpu.get(POWER)
        mask = self._row_of == row
        if temp is None or power is None or not mask.any():
            return None
        t, p = temp[mask], power[mask]
        r = self.limits.thermal_resistance_c_per_w[mask]
        limit = self._gpu.get(POWER_LIMIT)
        full_w = self.limits.tdp_w[mask] if limit is None else np.where(np.isfinite(limit[mask]), limit[mask], np.nan)
        full_w = np.where(np.isfinite(full_w), full_w, self.limits.tdp_w[mask])
        t_full = t + r * np.maximum(full_w - p, 0.0)
        if not np.isfinite(t_full).any():
            return None
        warming_c = 0.0
        coolant = t - r * p
        if supply_c is not None and load_w > 0 and np.isfinite(coolant).any():
            warming_c = max(float(np.nanmean(coolant)) - supply_c, 0.0) * max(rise_w, 0.0) / load_w
        return float(np.nanmax(t_full) if aggregate == "max" else np.nanmean(t_full)) + warming_c
