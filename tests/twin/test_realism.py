"""A hall as messy as a real one: seeded variation, NVML-like readings, instant power peaks, seeded fault ranges."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twinloop.errors import InputError
from twinloop.twin.engine import Twin
from twinloop.twin.faults import resolve_faults
from twinloop.twin.scenario import VariationSpec, scenario_from_dict
from twinloop.twin.topology import build_topology
from twinloop.twin.variation import draw_variation

from .twin_helpers import make, small

NO_VARIATION = {"leakage_sigma": 0, "dynamic_sigma": 0, "thermal_resistance_sigma": 0}


def _run(raw: dict[str, Any], steps: int = 90) -> tuple[Twin, list[dict[str, np.ndarray]]]:
    twin = make(raw)
    blocks = []
    for _ in range(steps):
        r = twin.step()
        if r.gpu is not None:
            blocks.append({k: v.copy() for k, v in r.gpu.items()})
    return twin, blocks


def _messy(seed: int) -> dict[str, Any]:
    return small(
        seed=seed,
        failures={"rate_scale": 2000.0},
        straggler_fraction=0.1,
        straggler_speed_range=[0.9, 0.98],
        telemetry={"gpu_every_s": 1, "aggregate": "sample"},
        faults=[{"kind": "straggler", "target": "random-gpu:dc1/r01/k01", "start_s": [20, 40], "duration_s": 30}],
    )


def test_same_seed_is_bit_identical_and_other_seeds_differ() -> None:
    a, blocks_a = _run(_messy(5))
    b, blocks_b = _run(_messy(5))
    c, blocks_c = _run(_messy(6))
    assert a.summary() == b.summary()
    assert [(e.t_s, e.kind, e.entity, e.detail) for e in a.events] == [
        (e.t_s, e.kind, e.entity, e.detail) for e in b.events
    ]
    for x, y in zip(blocks_a, blocks_b, strict=True):
        for k in x:
            assert np.array_equal(x[k], y[k]), k
    assert np.array_equal(a.physics.gpus.temp_c, b.physics.gpus.temp_c)
    assert np.array_equal(a.node_peak_w, b.node_peak_w)
    assert a.ground_truth == b.ground_truth
    # another seed: other hardware, other readings, other energy
    assert not np.array_equal(a.physics.r_c_per_w, c.physics.r_c_per_w)
    assert not np.array_equal(blocks_a[-1]["DCGM_FI_DEV_POWER_USAGE"], blocks_c[-1]["DCGM_FI_DEV_POWER_USAGE"])
    assert a.summary()["energy"]["gpu_kwh"] != c.summary()["energy"]["gpu_kwh"]


def test_construction_touches_no_global_random_state_and_draws_the_same_hall() -> None:
    raw = small(seed=3)
    np.random.seed(123)
    before = np.random.get_state()[1].copy()
    t1, t2 = make(raw), make(raw)
    assert np.array_equal(np.random.get_state()[1], before)
    for f in ("leakage", "dynamic", "thermal_resistance"):
        assert np.array_equal(getattr(t1.variation, f), getattr(t2.variation, f))
    # a reset to another seed changes the random processes, not the hardware
    r = t1.physics.r_c_per_w.copy()
    t1.reset(99)
    assert np.array_equal(t1.physics.r_c_per_w, r)


@settings(max_examples=25, deadline=None)
@given(
    sigma=st.one_of(st.just(0.0), st.floats(0.005, 0.1)),
    clip=st.floats(1.0, 4.0),
    seed=st.integers(0, 2**31),
)
def test_variation_distribution_matches_the_configuration(sigma: float, clip: float, seed: int) -> None:
    spec = VariationSpec(leakage_sigma=sigma, dynamic_sigma=sigma / 2, thermal_resistance_sigma=0.0, clip_sigmas=clip)
    n = 20_000
    v = draw_variation(np.random.default_rng(seed), n, spec)
    assert v.thermal_resistance.min() == v.thermal_resistance.max() == 1.0
    for x, s in ((v.leakage, sigma), (v.dynamic, sigma / 2)):
        z = (x.astype(np.float64) - 1.0) / s if s > 0 else np.zeros(n)
        assert np.abs(z).max() <= clip + 1e-3  # truncated
        if s > 0:
            # truncated standard normal: variance 1 - 2c·φ(c) / (2Φ(c) - 1)
            from statistics import NormalDist

            nd = NormalDist()
            var = 1 - 2 * clip * nd.pdf(clip) / (2 * nd.cdf(clip) - 1)
            assert abs(z.mean()) < 4 / np.sqrt(n)
            assert abs(z.std() - np.sqrt(var)) < 0.03


def test_the_twin_applies_the_drawn_variation() -> None:
    raw = small(variation={"leakage_sigma": 0.05, "dynamic_sigma": 0.03, "thermal_resistance_sigma": 0.04})
    twin = make(raw)
    nominal = make(small(variation=NO_VARIATION))
    v = twin.variation
    assert np.allclose(twin.physics.r_c_per_w / nominal.physics.r_c_per_w, v.thermal_resistance, rtol=1e-6)
    assert np.allclose(twin.physics.gpus.static_a_w / nominal.physics.gpus.static_a_w, v.leakage, rtol=1e-6)
    # idle power differs GPU to GPU by the leakage factor; under one power cap the clocks spread
    job = twin.jobs[0]
    while job.phase.name != "SUSTAINED":
        twin.step()
    twin.physics.gpus.user_limit_w[:] = 400.0
    twin.step()
    clock = twin.physics.clock_x()[job.gpus]
    assert np.allclose(twin.physics.gpus.power_w[job.gpus], 400.0, atol=0.5)
    assert (clock.max() - clock.min()) / clock.mean() > 0.01


def test_readings_are_quantised_like_nvml() -> None:
    _, blocks = _run(small(telemetry={"gpu_every_s": 1, "aggregate": "sample"}), 60)
    for b in blocks:
        for name in ("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_MEMORY_TEMP"):
            assert np.array_equal(b[name], np.round(b[name])), name
        clock = b["DCGM_FI_DEV_SM_CLOCK"].astype(np.float64)
        assert np.allclose(clock / 15.0, np.round(clock / 15.0), atol=1e-4)
        mw = b["DCGM_FI_DEV_POWER_USAGE"].astype(np.float64) * 1000.0
        assert np.allclose(mw, np.round(mw), atol=0.1)
        assert np.array_equal(b["DCGM_FI_DEV_GPU_UTIL"], np.round(b["DCGM_FI_DEV_GPU_UTIL"]))


def test_reported_power_is_the_one_second_mean_with_noise_of_the_configured_size() -> None:
    raw = small(telemetry={"gpu_every_s": 1, "aggregate": "sample"}, sensors={"power_noise_fraction": 0.002})
    twin = make(raw)
    errs, powers = [], []
    for _ in range(80):
        r = twin.step()
        assert r.gpu is not None
        p = twin.physics.gpus.power_w.astype(np.float64)
        errs.append(r.gpu["DCGM_FI_DEV_POWER_USAGE"] - p)
        powers.append(p)
    err, power = np.concatenate(errs), np.concatenate(powers)
    sigma = np.maximum(0.002 * power, 0.3)
    z = err / sigma
    assert abs(z.mean()) < 0.1 and 0.9 < z.std() < 1.1  # unbiased 1 s mean, noise as configured


def test_psus_see_the_instant_peak_the_telemetry_does_not_show() -> None:
    """A node whose 1 s mean fits its working PSUs still trips them at load steps; without peaks it does not."""

    def run(peaks: dict[str, Any]) -> tuple[int, float]:
        twin = make(small(variation=NO_VARIATION, power_peaks=peaks, duration_s=300))
        while twin.jobs[0].phase.name != "SUSTAINED":
            twin.step()
        nodes = np.unique(twin.topo.gpu_node[twin.jobs[0].gpus])
        mean_max = 0.0
        for _ in range(30):
            twin.step()
            mean_max = max(mean_max, float(twin.node_dc_w[nodes].max()))
        # two PSUs left whose ride-through sits 2 % above the busiest node's mean draw
        twin.chain.psus_alive[nodes] = 2.0
        twin.chain.psu_rating_w[nodes] = 1.02 * mean_max / (2 * twin.spec.power_chain.psu_overload_tolerance)
        worst_mean = 0.0
        for _ in range(60):
            twin.step()
            if not twin.braked_gpus.size:
                worst_mean = max(worst_mean, float(twin.node_dc_w[nodes].max()))
        return twin.accounts.psu_overloads, worst_mean / mean_max

    trips, _ = run({})
    quiet, ratio = run({"overshoot_fraction": [0.0, 0.0], "ripple_fraction": 0.0})
    assert trips > 0
    assert quiet == 0 and ratio < 1.02


def test_synchronous_job_peaks_add_up_at_the_facility() -> None:
    twin = make(small(variation=NO_VARIATION))
    seen = 0.0
    for _ in range(120):
        twin.step()
        seen = max(seen, float(twin.node_peak_w.sum() - twin.node_dc_w.sum()))
        assert (twin.node_peak_w >= twin.node_dc_w - 1e-6).all()
    assert twin.accounts.peak_it_instant_w > twin.accounts.peak_it_w
    # 16 GPUs overshooting together: well above one GPU's ~100 W
    assert seen > 16 * 50


def _with_fault(fault: dict[str, Any], seed: int = 0) -> dict[str, Any]:
    return small(seed=seed, faults=[fault])


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    lo=st.integers(0, 100),
    width=st.integers(0, 100),
    mag_lo=st.floats(0.1, 0.9),
    level=st.sampled_from(["gpu", "node", "rack"]),
)
def test_a_seeded_fault_range_is_drawn_inside_the_range(
    seed: int, lo: int, width: int, mag_lo: float, level: str
) -> None:
    kind = {"gpu": "straggler", "node": "psu_loss", "rack": "cdu_pump_degradation"}[level]
    fault = {
        "kind": kind,
        "target": f"random-{level}:dc1/r01/k02",
        "start_s": [lo, lo + width],
        "duration_s": [10, 20],
        "magnitude": [mag_lo, 1.0] if kind != "psu_loss" else [1, 3],
    }
    spec = scenario_from_dict(_with_fault(fault, seed), "t.yaml")
    topo = build_topology(spec)
    (f,) = resolve_faults(spec, topo, "t.yaml")
    (g,) = resolve_faults(spec, topo, "t.yaml")
    assert f == g  # same seed, same draw
    lab = f.label
    assert lo <= lab.start_s <= lo + width and lab.start_s == round(lab.start_s)
    assert lab.end_s is not None and 10 <= lab.end_s - lab.start_s <= 20
    if kind == "psu_loss":
        assert f.magnitude in (1.0, 2.0, 3.0)
    else:
        assert mag_lo <= f.magnitude <= 1.0
    if level == "rack":  # a CDU fault on a rack acts on its row
        assert lab.entity.startswith("dc1/r01/k02") and f.level == "row"
    else:
        assert lab.entity.startswith("dc1/r01/k02/") and f.level == level


def test_seeds_move_the_drawn_faults() -> None:
    fault = {"kind": "straggler", "target": "random-gpu", "start_s": ["1m", "30m"], "duration_s": 60}
    labels = {resolve_faults(s := scenario_from_dict(_with_fault(fault, k), "t"), build_topology(s), "t")[0].label
              for k in range(8)}  # fmt: skip
    assert len({lab.start_s for lab in labels}) > 4 and len({lab.entity for lab in labels}) > 4


@pytest.mark.parametrize(
    ("fault", "field", "words"),
    [
        ({"start_s": ["20m", "10m"]}, "faults.0.start_s", "low <= high"),
        ({"start_s": [1, 2, 3]}, "faults.0.start_s", "[low, high]"),
        ({"magnitude": [0.5, "x"]}, "faults.0.magnitude", "number"),
        ({"magnitude": [0.5, 1.5]}, "faults.0.magnitude", "0 < m <= 1"),
        ({"target": "random-cdu"}, "faults.0.target", "random-gpu"),
        ({"target": "random-gpu:dc1/r09"}, "faults.0.target", "unknown entity"),
        ({"target": "random-rack:dc1/r01/k01/n01"}, "faults.0.target", "no rack under"),
    ],
)
def test_bad_fault_ranges_name_the_field(fault: dict[str, Any], field: str, words: str) -> None:
    base = {"kind": "straggler", "target": "random-gpu", "start_s": 10}
    if fault.get("target", "").startswith("random-rack"):
        base["kind"] = "cdu_pump_degradation"
    with pytest.raises(InputError) as err:
        Twin(scenario_from_dict(_with_fault({**base, **fault}), "t.yaml"), "t.yaml")
    assert err.value.field == field and words in err.value.message
