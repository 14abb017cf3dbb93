import json
from pathlib import Path

import numpy as np
import pytest

from twinloop.errors import InputError
from twinloop.ops.learn.forecast import HeatLoadForecaster
from twinloop.ops.learn.precool import RowHeatForecast, load_models
from twinloop.twin.engine import Twin
from twinloop.twin.scenario import SCENARIO_DIR, scenario_from_dict


def _spec(announce_s: float):  # type: ignore[no-untyped-def]
    raw = {
        "name": "precool-test",
        "site": "pc",
        "duration_s": 1200,
        "step_s": 5,
        "seed": 4,
        "rows": [{"count": 2, "racks": 2, "nodes_per_rack": 2, "node": {"gpu": "h100-sxm"}}],
        "power_chain": {"facility_power_budget_w": 5.0e6},
        "jobs": [
            {"name": "later", "kind": "training", "gpus": 16, "submit_s": 900, "announce_s": announce_s,
             "plan": {"model": "llama-3-8b", "precision": "bf16"}},
        ],
        "telemetry": {"keep_gpu": False, "facility_every_s": 5, "gpu_every_s": 5},
    }  # fmt: skip
    return scenario_from_dict(raw, "test", str(SCENARIO_DIR))


def _rises(announce_s: float) -> dict[float, dict[str, float]]:
    twin = Twin(_spec(announce_s))
    heat = RowHeatForecast(twin, *load_models())
    out = {}
    while twin.t_s < 880:
        heat.observe(twin.step())
        if twin.t_s in (200.0, 850.0):
            out[twin.t_s] = {row: heat.rise_w(row) for row in ("pc/r01", "pc/r02")}
    return out


def test_the_packaged_model_loads_and_round_trips() -> None:
    models, sample_s = load_models()
    assert sample_s == 5.0 and sorted(models) == [300.0, 600.0, 900.0]
    x = np.random.default_rng(0).normal(size=(5, models[600.0].scale_.size)) * 1e4  # type: ignore[union-attr]
    again = HeatLoadForecaster.from_dict(json.loads(json.dumps(models[600.0].to_dict())))
    assert np.array_equal(again.predict_features(x), models[600.0].predict_features(x))


def test_an_announced_job_shows_as_heat_coming_on_its_row_only() -> None:
    announced = _rises(600.0)
    unannounced = _rises(0.0)
    planned_w = 16 * 500.0  # 16 H100s at well over 500 W each when training
    assert announced[850.0]["pc/r01"] > 0.5 * planned_w  # first fit puts it on the first row
    assert abs(announced[850.0]["pc/r02"]) < 0.1 * planned_w
    assert unannounced[850.0]["pc/r01"] < 0.1 * planned_w  # not known until it is submitted
    assert abs(announced[200.0]["pc/r01"]) < 0.1 * planned_w  # before the announcement


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


def test_the_sample_interval_must_be_a_multiple_of_the_step() -> None:
    twin = Twin(_spec(0.0))
    models, _ = load_models()
    with pytest.raises(InputError, match="sample_s"):
        RowHeatForecast(twin, models, 7.0)
    with pytest.raises(InputError, match="horizon_s"):
        RowHeatForecast(twin, models, 5.0, horizon_s=123.0)
