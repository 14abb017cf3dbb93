import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twinloop.closedloop.twin_history import (
    KNOWN_COLUMNS,
    TwinHistory,
    TwinRecorder,
    record_run,
    train_forecasters,
)
from twinloop.errors import InputError
from twinloop.lab.forecast_scenarios import forecast_scenario
from twinloop.ops.learn.forecast import HeatLoadForecaster, LoadHistory, evaluate, features
from twinloop.ops.learn.forecast_online import OnlineForecast
from twinloop.twin.engine import Twin
from twinloop.twin.scenario import JobSpec

H = (600.0,)


def small(seed: int, **kw: float) -> tuple[Twin, tuple[float, ...]]:
    sc = forecast_scenario(seed, racks=4, duration_s=3600, step_s=10, backlog_jobs=4, arrivals_per_h=6, **kw)
    return Twin(sc.spec), sc.known_from_s


def run(seed: int) -> TwinHistory:
    twin, known = small(seed)
    return record_run(twin, known, H)


@pytest.fixture(scope="module")
def trained() -> dict[str, dict[float, HeatLoadForecaster]]:
    return train_forecasters([run(s) for s in range(4)], H)


def test_queue_knowledge_beats_persistence_on_held_apart_seeds(trained: dict) -> None:
    test = [run(100), run(101)]
    for level in ("rack", "site"):
        score = evaluate(trained[level][600.0], [x for r in test for x in r.level(level)])
        assert score.improvement >= 0.30, (level, score)


def test_generator_and_recording_are_deterministic() -> None:
    a, b = forecast_scenario(5), forecast_scenario(5)
    assert a == b and forecast_scenario(6).spec != a.spec
    ra, rb = run(3), run(3)
    assert np.array_equal(ra.site.load_w, rb.site.load_w)
    assert all(np.array_equal(x.known_for(600.0), y.known_for(600.0)) for x, y in zip(ra.rack, rb.rack, strict=True))


def test_known_ahead_does_not_see_unannounced_future_jobs() -> None:
    """A job submitted late without notice changes nothing the recorder knew before its submission."""
    twin, known = small(7, notice_fraction=0.0)
    late = JobSpec(name="late", kind="training", gpus=8, submit_s=2000.0, run_s=600.0)
    spec2 = twin.spec.model_copy(update={"jobs": (*twin.spec.jobs, late)})
    a = record_run(twin, known, H)
    b = record_run(Twin(spec2), (*known, 2000.0), H)
    before = a.site.ts_s - a.site.ts_s[0] < 2000.0 - 15.0  # observations up to t = 1990 s
    assert np.array_equal(a.site.known_for(600.0)[before], b.site.known_for(600.0)[before])
    assert not np.array_equal(a.site.load_w, b.site.load_w)  # the late job did run


def test_known_ahead_has_a_column_per_kind_and_the_site_sums_the_racks() -> None:
    hist = run(1)
    site = hist.site.known_for(600.0)
    assert site.shape == (len(hist.site.ts_s), len(KNOWN_COLUMNS))
    assert np.allclose(site, sum(r.known_for(600.0) for r in hist.rack))
    assert (site[:, 2] <= 1e-9).all()  # ends only lower the load
    assert site[:, 0].max() > 0  # some training start was foreseen


def test_online_forecast_matches_offline(trained: dict) -> None:
    twin, known = small(102)
    rec = TwinRecorder(twin, known, H)
    online = OnlineForecast(trained["rack"], rec.entities("rack"), rec.sample_s)
    got = []
    for _ in range(200):
        obs = rec.observe(twin.step())
        assert obs is not None
        o = obs["rack"]
        online.update(o.t_s, o.load_w, o.scheduled_delta_w, o.known_ahead_w)
        got.append(online.forecast(600.0))
    offline = np.column_stack([trained["rack"][600.0].predict(h) for h in rec.history().rack])
    np.testing.assert_allclose(np.array(got), offline, rtol=1e-9, atol=1e-6)
    entity = rec.entities("rack")[1]
    assert online.forecast_entity(entity, 600.0) == pytest.approx(got[-1][1])


def test_bad_inputs_give_clear_errors(trained: dict) -> None:
    twin, known = small(0)
    with pytest.raises(InputError, match="known_from_s: 3 values"):
        TwinRecorder(twin, known[:3])
    with pytest.raises(InputError, match="after its submit_s"):
        TwinRecorder(twin, [k + 1e4 for k in known])
    ids = ["fc/r01/k01", "fc/r01/k02"]
    online = OnlineForecast(trained["rack"], ids, 10.0)
    with pytest.raises(InputError, match=r"load_w: shape \(3,\)"):
        online.update(0.0, np.zeros(3), np.zeros(2))
    with pytest.raises(InputError, match="update"):
        online.forecast(600.0)
    online.update(0.0, np.ones(2), np.zeros(2), {600.0: np.zeros((2, len(KNOWN_COLUMNS)))})
    with pytest.raises(InputError, match=r"unknown entity 'fc/r01/k09'.*did you mean"):
        online.forecast_entity("fc/r01/k09", 600.0)
    with pytest.raises(InputError, match="300 s has no model"):
        online.forecast(300.0)
    with pytest.raises(InputError, match=r"one sample every 10\.0 s"):
        online.update(100.0, np.ones(2), np.zeros(2))
    with pytest.raises(ValueError, match="one row per sample"):
        LoadHistory(np.arange(3.0), np.zeros(3), np.zeros(3), {600.0: np.zeros((2, 4))})
    hist = LoadHistory(np.arange(3.0), np.zeros(3), np.zeros(3), {600.0: np.zeros((3, 4))})
    with pytest.raises(ValueError, match="no known-ahead columns for horizon 300"):
        features(hist, 300.0)
    with pytest.raises(ValueError, match="no sample has a target 600 s ahead"):
        HeatLoadForecaster(600.0).fit([hist])
    plain = LoadHistory(np.arange(3.0), np.zeros(3), np.zeros(3))
    with pytest.raises(ValueError, match="same known-ahead columns"):
        HeatLoadForecaster(600.0).fit([hist, plain])


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(2, 120),
    dt=st.sampled_from([1.0, 5.0, 10.0, 30.0]),
    lookback=st.sampled_from([30.0, 120.0, 300.0]),
    seed=st.integers(0, 10_000),
)
def test_online_features_equal_offline_features_for_any_series(n: int, dt: float, lookback: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    ts = 3600.0 + np.arange(n) * dt
    known = {600.0: rng.normal(0, 1e3, (n, 2))}
    hist = LoadHistory(ts, rng.normal(5e4, 5e3, n), rng.normal(0, 1e3, n), known)
    model = HeatLoadForecaster(600.0, lookback_s=lookback).fit([_schedule_driven(0, width=2)])
    online = OnlineForecast({600.0: model}, ["e"], dt)
    offline = features(hist, 600.0, lookback)
    for i in range(n):
        online.update(
            ts[i], hist.load_w[i : i + 1], hist.scheduled_delta_w[i : i + 1], {600.0: known[600.0][i : i + 1]}
        )
        np.testing.assert_allclose(online.features(600.0)[0], offline[i], rtol=1e-9, atol=1e-6)


def _schedule_driven(seed: int, width: int = 1) -> LoadHistory:
    """Load that moves only when the known schedule says so (steps of known size, known 10 min ahead)."""
    rng = np.random.default_rng(seed)
    n, dt, h = 600, 10.0, 60
    steps = np.zeros(n)
    steps[rng.choice(n, 12, replace=False)] = rng.normal(0, 2e4, 12)
    load = 1e5 + np.cumsum(steps)
    csum = np.concatenate(([0.0], np.cumsum(steps)))
    idx = np.arange(n)
    ahead = csum[np.minimum(idx + h + 1, n)] - csum[idx + 1]
    cols = np.column_stack([ahead] + [np.zeros(n)] * (width - 1))
    return LoadHistory(np.arange(n) * dt, load, np.zeros(n), {600.0: cols})


@settings(max_examples=30, deadline=None)
@given(level_w=st.floats(1e4, 1e6), t0=st.floats(0, 86400))
def test_constant_load_with_nothing_scheduled_is_forecast_unchanged(level_w: float, t0: float) -> None:
    model = HeatLoadForecaster(600.0, ridge=1e-9).fit([_schedule_driven(s) for s in range(3)])
    online = OnlineForecast({600.0: model}, ["a", "b"], 10.0)
    for i in range(40):
        online.update(t0 + 10.0 * i, np.array([level_w, 2 * level_w]), np.zeros(2), {600.0: np.zeros((2, 1))})
    np.testing.assert_allclose(online.forecast(600.0), [level_w, 2 * level_w], rtol=1e-3)


def test_histories_are_frozen_dataclasses() -> None:
    hist = run(2).site
    with pytest.raises(dataclasses.FrozenInstanceError):
        hist.load_w = np.zeros(2)  # type: ignore[misc]
