"""The learned classifier as a second opinion (issue 14): an advisory class beside the rules', acted on by nothing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from twinloop.closedloop.passes import PassResult, run_pass
from twinloop.closedloop.scenario_run import run_scenario
from twinloop.errors import InputError
from twinloop.ops.classify.advisory import AdvisoryModel, load_advisory_model
from twinloop.ops.classify.base import LABELS
from twinloop.ops.classify.features import N_FEATURES, TELEMETRY_COLUMNS
from twinloop.ops.classify.learned import LogisticClassifier
from twinloop.ops.events import EventClass
from twinloop.telemetry.store import DuckDBStore
from twinloop.telemetry.store.loop_records import read_loop_table
from twinloop.twin.scenario import scenario_from_dict

SITE = {
    "name": "advisory-test",
    "site": "dc1",
    "duration_s": 420,
    "rows": [
        {"racks": 2, "nodes_per_rack": 2, "cdu": {"capacity_w": 60000, "flow_kg_per_s": 2.0, "pump_power_w": 300}}
    ],
    "power_chain": {"facility_power_budget_w": 1.0e5},
    "jobs": [{"name": "train", "kind": "training", "gpus": 16, "profile": {"load_bytes_per_gpu": 4e9}}],
    "faults": [{"kind": "psu_loss", "target": "dc1/r01/k01/n01", "start_s": 150, "duration_s": 120, "magnitude": 5}],
}


def _always(cls: EventClass) -> AdvisoryModel:
    """A model that says ``cls`` whatever it sees (its weights are zero, its intercepts favour ``cls``)."""
    classes = (cls, EventClass.BENIGN_PHASE_CHANGE if cls != EventClass.BENIGN_PHASE_CHANGE else EventClass.JOB_HANG)
    cols = np.asarray(TELEMETRY_COLUMNS, np.int64)
    return AdvisoryModel(
        classes, cols, np.zeros(cols.size), np.ones(cols.size), 8.0, np.zeros((1, cols.size)), np.array([-3.0])
    )


def _fitted(n_classes: int) -> LogisticClassifier:
    rng = np.random.default_rng(3)
    x = rng.normal(size=(120, N_FEATURES))
    labels = LABELS[:n_classes]
    y = [labels[i % n_classes] for i in range(120)]
    x[:, 5] += np.array([i % n_classes for i in range(120)]) * 2.0
    return LogisticClassifier(l2=0.01).fit(x, y)


@pytest.mark.parametrize("n_classes", [2, 4])
def test_the_exported_model_gives_the_fitted_models_probabilities(n_classes: int) -> None:
    clf = _fitted(n_classes)
    model = AdvisoryModel.from_classifier(clf, {"data": "synthetic"})
    x = np.random.default_rng(5).normal(size=(30, N_FEATURES)) * 3.0
    np.testing.assert_allclose(model.predict_proba(x), clf.predict_proba(x), atol=1e-9)
    again = AdvisoryModel.from_json(model.to_json())
    np.testing.assert_allclose(again.predict_proba(x), clf.predict_proba(x), atol=1e-9)
    assert again.trained_on == {"data": "synthetic"}


def test_a_bad_model_file_names_the_field(tmp_path: Path) -> None:
    text = AdvisoryModel.from_classifier(_fitted(3), {}).to_json().replace('"n_features": ', '"n_features": 1')
    path = tmp_path / "m.json"
    path.write_text(text)
    with pytest.raises(InputError, match="n_features"):
        load_advisory_model(path)
    path.write_text("{")
    with pytest.raises(InputError, match="not JSON"):
        load_advisory_model(path)


def test_the_packaged_model_loads_and_says_what_it_was_trained_on() -> None:
    model = load_advisory_model()
    assert "random_scenario" in model.trained_on["data"]
    assert model.predict_proba(np.zeros((2, N_FEATURES))).sum(axis=1) == pytest.approx([1.0, 1.0])


def _log(r: PassResult) -> list[tuple[object, ...]]:
    return [(a.ts, str(a.request.kind), a.request.target, a.request.value, a.status, a.detail) for a in r.actions]


def test_every_incident_gets_an_advisory_class_and_disagreements_are_reported() -> None:
    spec = scenario_from_dict(SITE, "advisory-test.yaml")
    r = run_pass(spec, True, advisory=_always(EventClass.JOB_HANG))
    assert r.advisor is not None and r.incidents
    # Every incident, at its first report, has the classifier's class and probability beside the rules'.
    assert set(r.advisor.advice) == {i.incident_id for i in r.incidents}
    for a in r.advisor.advice.values():
        assert a.advisory_class == EventClass.JOB_HANG and 0.9 < a.probability <= 1.0
    summary = r.advisor.summary()
    expected = sum(1 for a in r.advisor.advice.values() if a.rule_class != EventClass.JOB_HANG)
    assert expected > 0 and summary["disagreements"] == expected
    assert summary["incidents_judged"] == len(r.incidents)
    assert all(e["advisory_class"] == "job_hang" and not e["agrees"] for e in summary["examples"])
    assert sum(summary["by_pair"].values()) == expected


def test_the_loops_actions_are_the_same_with_the_advisory_on_and_off() -> None:
    spec = scenario_from_dict(SITE, "advisory-test.yaml")
    plain = run_pass(spec, True)
    advised = run_pass(spec, True, advisory=load_advisory_model())
    assert plain.advisor is None and advised.advisor is not None and advised.advisor.advice
    assert plain.actions and _log(advised) == _log(plain)
    assert [(i.incident_id, i.event_class, i.root, i.status) for i in advised.incidents] == [
        (i.incident_id, i.event_class, i.root, i.status) for i in plain.incidents
    ]


def test_twinloop_run_stores_the_advisory_class_of_every_incident(tmp_path: Path) -> None:
    spec = scenario_from_dict({**SITE, "duration_s": 240}, "advisory-test.yaml")
    r = run_scenario(spec, tmp_path / "out", advisory=_always(EventClass.JOB_HANG))
    assert r.on.advisor is not None
    with DuckDBStore(r.store, read_only=True) as store:
        rows = read_loop_table(store.con, "loop_advisory", "loop-on")
    assert {row["incident_id"] for row in rows} == set(r.on.advisor.advice)
    assert all(row["advisory_class"] == "job_hang" and row["advisory_probability"] > 0.9 for row in rows)


def _watch(tmp: Path, advisory: bool) -> tuple[list[tuple[object, ...]], list[dict[str, object]], object]:
    import duckdb

    from twinloop.ops.live.actuators import NoActuator
    from twinloop.ops.live.cluster import LiveOptions, SourceCluster
    from twinloop.ops.live.watcher import WatchConfig, Watcher
    from twinloop.ops.records import LiveRecords
    from twinloop.telemetry.sources.files import FileConfig, FileSource

    caps = Path(__file__).resolve().parents[2] / "fixtures" / "h100" / "nvml_1hz_idle_to_caps.csv"
    con = duckdb.connect(str(tmp / f"w{int(advisory)}.duckdb"))
    cluster = SourceCluster(FileSource(FileConfig(path=str(caps))), NoActuator(), LiveOptions(cadence_s=1.0))
    w = Watcher(cluster, LiveRecords(con), config=WatchConfig(mode="auto", heartbeat_s=0.0, advisory=advisory))
    w.run()
    log = [(a.ts, str(a.request.kind), a.request.target, a.request.value, a.status) for a in w.loop.actions]
    rows = read_loop_table(con, "loop_advisory")
    return log, rows, w.advisor


def test_watch_records_the_advisory_class_and_acts_the_same_without_it(tmp_path: Path) -> None:
    log_on, rows, advisor = _watch(tmp_path, True)
    log_off, rows_off, none = _watch(tmp_path, False)
    assert none is None and rows_off == []
    assert advisor is not None and rows and len(rows) == len(advisor.advice)  # type: ignore[attr-defined]
    assert log_on == log_off
