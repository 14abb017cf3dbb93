"""Features and labels from twin runs: finite, deterministic, the injected fault's canonical class."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest

from twinloop.lab.classifier_dataset import (
    CANONICAL_CLASS,
    Reported,
    RunIncidents,
    background_class,
    collect_run,
    dataset_from_runs,
    label_incident,
)
from twinloop.lab.fault_scenarios import random_scenario
from twinloop.ops.classify.features import FEATURE_NAMES, N_FEATURES, FeatureExtractor
from twinloop.ops.evaluate import FAULT_CLASSES, Label
from twinloop.ops.events import EventClass, Incident, Severity
from twinloop.twin.faults import FAULT_TARGETS
from twinloop.twin.scenario import scenario_from_dict

C = EventClass
SITE = {
    "name": "classify-test",
    "site": "dc1",
    "duration_s": 420,
    "rows": [
        {"racks": 2, "nodes_per_rack": 2, "cdu": {"capacity_w": 60000, "flow_kg_per_s": 2.0, "pump_power_w": 300}}
    ],
    "power_chain": {"facility_power_budget_w": 1.0e5},
    "jobs": [{"name": "train", "kind": "training", "gpus": 16, "profile": {"load_bytes_per_gpu": 4e9}}],
    "faults": [{"kind": "psu_loss", "target": "dc1/r01/k01/n01", "start_s": 200, "duration_s": 120, "magnitude": 5}],
}


@cache
def small_run() -> RunIncidents:
    return collect_run(scenario_from_dict(SITE, "classify-test.yaml"))


def test_features_are_finite_fixed_length_and_deterministic() -> None:
    run = small_run()
    assert run.reported
    again = collect_run(scenario_from_dict(SITE, "classify-test.yaml"))
    assert len(again.reported) == len(run.reported)
    for a, b in zip(run.reported, again.reported, strict=True):
        assert a.features.shape == (N_FEATURES,) and np.isfinite(a.features).all()
        assert np.array_equal(a.features, b.features)
        assert a.incident == b.incident
    assert len(FEATURE_NAMES) == len(set(FEATURE_NAMES)) == N_FEATURES


def test_the_injected_psu_loss_is_labeled_power_delivery_and_seen_in_the_features() -> None:
    run = small_run()
    labeled = [(rep, *label_incident(rep, run.faults, run.background)) for rep in run.reported]
    psu = [(rep, cls) for rep, cls, what in labeled if what == "psu_loss"]
    assert psu, [(r.incident.event_class, r.incident.root, w) for r, _, w in labeled]
    rep, cls = psu[0]
    assert cls == C.POWER_DELIVERY_FAULT
    f = dict(zip(FEATURE_NAMES, rep.features, strict=True))
    assert f["root_node"] == 1.0 and f["psu_degraded_frac"] == 1.0
    assert f[f"rule_{rep.incident.event_class.value}"] == 1.0
    data = dataset_from_runs([run])
    assert len(data) == len(run.reported) - data.n_ambiguous
    assert C.POWER_DELIVERY_FAULT in data.labels


def _rep(root: str, members: tuple[str, ...], start_s: float, jobs: tuple[str, ...] = ()) -> Reported:
    inc = Incident(1, C.UNCLASSIFIED, root, members, start_s, start_s, Severity.INFO)
    return Reported(inc, np.zeros(N_FEATURES), jobs)


def test_labeling_rules() -> None:
    gpu_fault = Label("gpu_thermal_interface", "dc1/r01/k01/n01/g3", 100.0, 300.0)
    row_fault = Label("cdu_pump_degradation", "dc1/r02", 100.0, 300.0)
    job_fault = Label("job_hang", "dc1/jobs/train", 500.0, 600.0)
    faults = [gpu_fault, row_fault, job_fault]
    # the GPU itself, or its node, during the fault: the fault's canonical class
    assert (
        label_incident(_rep("dc1/r01/k01/n01/g3", ("dc1/r01/k01/n01/g3",), 150.0), faults, [])[0] == C.THERMAL_THROTTLE
    )
    assert label_incident(_rep("dc1/r01/k01/n01", ("dc1/r01/k01/n01/g3",), 150.0), faults, [])[0] == C.THERMAL_THROTTLE
    # a whole rack is not one GPU's fault; a rack under a degraded row's CDU is
    assert label_incident(_rep("dc1/r01/k01", (), 150.0), faults, [])[0] == C.BENIGN_PHASE_CHANGE
    assert label_incident(_rep("dc1/r02/k02", (), 150.0), faults, [])[0] == C.COOLING_DEGRADATION
    # outside the time window (before start - lead, after end + grace): nothing
    assert label_incident(_rep("dc1/r02/k02", (), 90.0), faults, [])[0] == C.BENIGN_PHASE_CHANGE
    assert label_incident(_rep("dc1/r02/k02", (), 361.0), faults, [])[0] == C.BENIGN_PHASE_CHANGE
    # a job fault covers incidents on the job and on GPUs the job runs
    assert label_incident(_rep("dc1/jobs/train", (), 520.0), faults, [])[0] == C.JOB_HANG
    assert label_incident(_rep("dc1/r01/k02/n01", (), 520.0, ("dc1/jobs/train",)), faults, [])[0] == C.JOB_HANG
    # background events: a GPU failure is a hardware error, a software crash is ambiguous (None)
    bg = [
        Label("failure:faulty_gpu", "dc1/r03/k01/n01/g0", 700.0, 1300.0),
        Label("failure:software_bug", "dc1/r04", 700.0, 1300.0),
    ]
    assert label_incident(_rep("dc1/r03/k01/n01/g0", (), 710.0), faults, bg) == (
        C.GPU_HARDWARE_ERROR,
        "background:failure",
    )
    assert label_incident(_rep("dc1/r04/k01", (), 710.0), faults, bg)[0] is None


def test_canonical_classes_cover_every_fault_kind_and_are_among_its_detectable_classes() -> None:
    assert set(CANONICAL_CLASS) == set(FAULT_TARGETS)
    for kind, cls in CANONICAL_CLASS.items():
        assert cls in FAULT_CLASSES[kind], kind
    assert background_class("failure:silent_data_corruption") == C.SUSPECTED_SDC
    assert background_class("failure:power_supply") == C.POWER_DELIVERY_FAULT
    assert background_class("psu_overload:draw 5637 W") == C.POWER_DELIVERY_FAULT
    assert background_class("failure:nccl_watchdog") is None


@pytest.mark.parametrize("seed", [0, 7, 123])
def test_random_scenarios_are_deterministic_valid_and_small(seed: int) -> None:
    a, b = random_scenario(seed), random_scenario(seed)
    assert a == b and a != random_scenario(seed + 1)
    n_gpus = sum(r.count * r.racks * r.nodes_per_rack * r.node.gpus for r in a.rows)
    assert 128 <= n_gpus <= 256 and 2 <= len(a.faults) <= 3
    starts = sorted(f.start_s for f in a.faults)
    ends = sorted(f.start_s + (f.duration_s or 0.0) for f in a.faults)
    assert all(e < s for e, s in zip(ends[:-1], starts[1:], strict=True))  # one fault at a time


def test_extractor_sees_a_local_temperature_rise_and_no_future() -> None:
    ids = [f"dc1/r01/k01/n01/g{i}" for i in range(4)]
    ex = FeatureExtractor(ids, np.full(4, 87.0), np.full(4, 700.0), np.full(4, 1980.0))
    temp = np.full(4, 50.0)
    inc = Incident(1, C.THERMAL_THROTTLE, ids[0], (ids[0],), 200.0, 200.0, Severity.MINOR)
    for t in range(1, 201):
        if t > 150:
            temp[0] = 60.0
        ex.observe(float(t), {"DCGM_FI_DEV_GPU_TEMP": temp.copy()})
    f = dict(zip(FEATURE_NAMES, ex.features(inc), strict=True))
    assert f["temp_delta_c"] == pytest.approx(10.0) and f["temp_delta_contrast_c"] == pytest.approx(10.0)
    assert f["temp_margin_c"] == pytest.approx(27.0) and f["root_gpu"] == 1.0 and f["rule_thermal_throttle"] == 1.0
    assert np.isfinite(ex.features(inc)).all()


def test_the_studies_fault_kinds_do_not_move_with_new_twin_kinds() -> None:
    from twinloop.lab.fault_scenarios import ADVISORY_FAULT_KINDS, FAULT_KINDS

    assert (
        len(FAULT_KINDS) == 11 and FAULT_KINDS[0] == "cdu_pump_degradation" and FAULT_KINDS[-1] == "facility_power_cap"
    )
    assert (*FAULT_KINDS, "operator_power_cap") == ADVISORY_FAULT_KINDS
