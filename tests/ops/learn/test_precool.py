import json
from pathlib import Path

import numpy as np
import pytest

from twinloop.errors import InputError
from twinloop.ops.learn.forecast import KNOWN_COLUMNS, HeatLoadForecaster
from twinloop.ops.learn.precool import RowHeatForecast, load_models
from twinloop.ops.ports import RackHeat

RACKS = ("s/r01/k01", "s/r01/k02", "s/r02/k01")


def _heat(t_s: float, known_w: float) -> RackHeat:
    """Three racks at 20 kW; ``known_w`` of training starts known ahead on the first rack, at every horizon."""
    known = np.zeros((len(RACKS), len(KNOWN_COLUMNS)))
    known[0, 0] = known_w
    load = np.full(len(RACKS), 20e3)
    return RackHeat(t_s, RACKS, load, np.zeros(len(RACKS)), {h: known for h in (300.0, 600.0, 900.0)})


def test_the_packaged_model_loads_and_round_trips() -> None:
    models, sample_s = load_models()
    assert sample_s == 5.0 and sorted(models) == [300.0, 600.0, 900.0]
    x = np.random.default_rng(0).normal(size=(5, models[600.0].scale_.size)) * 1e4  # type: ignore[union-attr]
    again = HeatLoadForecaster.from_dict(json.loads(json.dumps(models[600.0].to_dict())))
    assert np.array_equal(again.predict_features(x), models[600.0].predict_features(x))


def test_bad_model_files_name_the_file_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "m.json"
    bad.write_text("{not json")
    with pytest.raises(InputError, match=r"m\.json: line 1"):
        load_models(bad)
    bad.write_text(json.dumps({"sample_s": 5, "rack": [{"horizon_s": 300, "ridge": 0, "lookback_s": 300}]}))
    with pytest.raises(InputError, match="rack: coef: missing"):
        load_models(bad)
    models, _ = load_models()
    doc = models[300.0].to_dict()
    bad.write_text(json.dumps({"sample_s": 5, "rack": [{**doc, "coef": doc["coef"][:-1]}]}))
    with pytest.raises(InputError, match="coef"):
        load_models(bad)
    bad.write_text(json.dumps({"sample_s": -1, "rack": [doc]}))
    with pytest.raises(InputError, match="sample_s"):
        load_models(bad)


def test_the_horizon_must_be_a_models_and_the_interval_positive() -> None:
    models, _ = load_models()
    with pytest.raises(InputError, match="horizon_s"):
        RowHeatForecast(models, 5.0, horizon_s=123.0)
    with pytest.raises(InputError, match="sample_s"):
        RowHeatForecast(models, 0.0)


def test_without_rack_heat_nothing_is_forecast() -> None:
    heat = RowHeatForecast(*load_models())
    assert heat.rise_w("s/r01") == 0.0 and heat.load_w("s/r01") == 0.0


def test_known_heat_shows_on_its_row_only() -> None:
    heat = RowHeatForecast(*load_models())
    for k in range(130):  # past the models' look-back
        heat.observe(_heat(5.0 * k, 0.0))
    quiet = heat.rise_w("s/r01")
    heat.observe(_heat(650.0, 16 * 600.0))
    assert heat.rise_w("s/r01") - quiet > 0.5 * 16 * 600.0
    assert heat.load_w("s/r01") == 40e3 and heat.load_w("s/r02") == 20e3
    assert abs(heat.rise_w("s/r02")) < 0.1 * 16 * 600.0
