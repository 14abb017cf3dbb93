"""Ground truth of a twin run: the hall's background stragglers are true slow GPUs, not false alarms."""

from __future__ import annotations

from typing import Any

from twinloop.closedloop.cluster import TwinCluster
from twinloop.closedloop.labels import ground_truth
from twinloop.lab.classifier_dataset import background_class
from twinloop.ops.events import EventClass
from twinloop.ops.ports import END
from twinloop.twin.scenario import scenario_from_dict

from .test_cluster import SITE


def _run(**changes: Any) -> TwinCluster:
    spec = scenario_from_dict({**SITE, **changes}, "labels-test.yaml")
    cluster = TwinCluster(spec, duration_s=5)
    list(iter(cluster.poll, END))
    return cluster


def test_every_background_straggler_is_a_straggler_label_on_its_gpu() -> None:
    cluster = _run(straggler_fraction=0.2, straggler_speed_range=[0.8, 0.9])
    _, background = ground_truth(cluster.twin, cluster.adapter)
    slow = [b for b in background if b.kind.startswith("straggler:")]
    gpu_ids = cluster.twin.telemetry.entities("gpu")
    assert slow and {b.entity for b in slow} == {gpu_ids[i] for i in cluster.twin.background_stragglers.tolist()}
    assert all(background_class(b.kind) is EventClass.STRAGGLER for b in slow)
    assert all(b.start_s == 0.0 and b.end_s == cluster.now_s() for b in slow)


def test_a_hall_without_background_stragglers_has_no_such_label() -> None:
    cluster = _run(straggler_fraction=0.0)
    _, background = ground_truth(cluster.twin, cluster.adapter)
    assert not [b for b in background if b.kind.startswith("straggler:")]
