"""Heat forecast per CDU row for precooling: the learned rack forecaster, fed live from the twin.

The cooling optimizer asks, every control period, how much heat each row will gain within the horizon
(:meth:`RowHeatForecast.rise_w`) and what it carries now (:meth:`RowHeatForecast.load_w`). Both come from the
rack heat-load forecaster (:class:`~twinloop.ops.learn.forecast.HeatLoadForecaster`, applied online by
:class:`~twinloop.ops.learn.forecast_online.OnlineForecast`) on what :class:`TwinRecorder` sees: rack power and
what the job queue and the planner know ahead (a job is known from ``submit_s - announce_s``). The row's rise is
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
from twinloop.ops.learn.twin_history import TwinRecorder
from twinloop.twin.engine import StepResult, Twin

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
    """Forecast heat per CDU row of a twin; call :meth:`observe` after every twin step.

    Args:
        twin: the twin to watch.
        models: rack forecasters by horizon (:func:`load_models`), fitted at ``sample_s``.
        sample_s: the models' sample interval, s (a multiple of the twin step).
        horizon_s: the horizon the optimizer asks about, s (one of the models').
    """

    def __init__(
        self, twin: Twin, models: Mapping[float, HeatLoadForecaster], sample_s: float, horizon_s: float = 600.0
    ) -> None:
        every = sample_s / twin.dt_s
        if every < 1 or abs(every - round(every)) > 1e-9:
            raise InputError("RowHeatForecast", "sample_s", f"{sample_s} (allowed: a multiple of {twin.dt_s} s)")
        model = next((m for h, m in models.items() if abs(h - horizon_s) < 1e-6), None)
        if model is None:
            have = ", ".join(f"{h:g}" for h in sorted(models))
            raise InputError("RowHeatForecast", "horizon_s", f"{horizon_s:g} (allowed: {have})")
        self.twin = twin
        self.horizon_s = horizon_s
        self.every = round(every)
        self.recorder = TwinRecorder(twin, horizons_s=tuple(sorted(models)))
        self.online = OnlineForecast(models, self.recorder.entities("rack"), sample_s)
        self.model = model
        rack_ids = self.recorder.entities("rack")
        self._rack_row = np.array([rid.rsplit("/", 1)[0] for rid in rack_ids])
        self._rise = np.zeros(len(rack_ids))
        self._load = np.zeros(len(rack_ids))
        self._steps = 0

    def observe(self, result: StepResult) -> None:
        """Feed one twin step (only every ``sample_s`` reaches the model)."""
        self._steps += 1
        if self._steps % self.every or result.facility is None:
            return
        obs = self.recorder.observe(result)
        if obs is None:
            return
        rack = obs["rack"]
        self.online.update(rack.t_s, rack.load_w, rack.scheduled_delta_w, rack.known_ahead_w)
        self._load = rack.load_w
        x = self.online.features(self.horizon_s)
        self._rise = self.model.contribution(x, KNOWN_FEATURES + list(range(N_BASE_FEATURES, x.shape[1])))

    def rise_w(self, row: str) -> float:
        """Heat the queue says the row will gain within the horizon (net over its racks; negative = cooling), W."""
        return float(self._rise[self._rack_row == row].sum())

    def load_w(self, row: str) -> float:
        """The row's rack load at the last sample, W."""
        return float(self._load[self._rack_row == row].sum())
