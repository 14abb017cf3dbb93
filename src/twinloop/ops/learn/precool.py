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
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from importlib import resources
from pathlib import Path

import numpy as np

from twinloop.errors import InputError
from twinloop.ops.learn.forecast import HeatLoadForecaster
from twinloop.ops.learn.forecast_online import OnlineForecast
from twinloop.ops.ports import RackHeat

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
