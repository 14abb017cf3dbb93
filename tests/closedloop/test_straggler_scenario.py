"""Issue 14 on the twin: a straggler present from the job's first step is named down to its GPU (or node), with
the loop off (detection) and on (its node drained, the job requeued off it)."""

from __future__ import annotations

import pytest

from twinloop.closedloop.passes import run_pass
from twinloop.ops.events import EventClass
from twinloop.twin.scenario import scenario_from_dict

SLOW_GPU = "dc9/r01/k02/n01/g3"


def _spec() -> object:
    raw = {
        "name": "straggler-from-start",
        "site": "dc9",
        "duration_s": "8m",
        "step_s": "1s",
        "seed": 3,
        "rows": [{"racks": 2, "nodes_per_rack": 2, "node": {"gpu": "h100-sxm"}, "cooling": "liquid"}],
        # A 5 s write (fast storage): found 36 s in, the job has 8 s of work since its start, more than the write,
        # so the restart goes through a checkpoint (with a 30 s write it has less, and is requeued without one:
        # tests/ops/respond/test_redo_cheaper.py).
        "jobs": [
            {
                "name": "train",
                "kind": "training",
                "gpus": 32,
                "checkpoint_interval_s": "10m",
                "checkpoint_write_s": "5s",
            }
        ],
        "faults": [{"kind": "straggler", "target": SLOW_GPU, "start_s": 0, "magnitude": 0.8}],
        "failures": "off",
    }
    return scenario_from_dict(raw, "test", ".")


@pytest.mark.slow
def test_a_straggler_from_the_first_step_is_named_to_its_gpu() -> None:
    r = run_pass(_spec(), False, optimize_cooling=False)  # type: ignore[arg-type]
    roots = {i.root for i in r.incidents if i.event_class == EventClass.STRAGGLER}
    node = SLOW_GPU.rsplit("/", 1)[0]
    assert roots and roots <= {SLOW_GPU, node, "dc9/jobs/train"}, roots
    assert roots & {SLOW_GPU, node}, roots


@pytest.mark.slow
def test_a_gpu_at_80_percent_still_gets_checkpoint_and_restart_at_once() -> None:
    # The proportionate straggler response (restart cost model) keeps the prompt action for a straggler that costs
    # the job more until its next checkpoint (10 min away) than a checkpoint write.
    r = run_pass(_spec(), True, optimize_cooling=False)  # type: ignore[arg-type]
    applied = [a for a in r.actions if a.status == "applied" and a.request.reason.startswith("straggler ")]
    kinds = [str(a.request.kind) for a in applied]
    assert kinds[:3] == ["checkpoint", "drain", "requeue"], kinds
    assert applied[0].ts < 60.0 and "-> now" in applied[0].request.reason
    assert applied[2].ts - applied[0].ts < 60.0
