"""Issue 14 in the twin: a ``co_tenant`` fault (another process on a job's GPU, slowing its rank) is named at that GPU
as the co-tenant's, and the loop moves the job off it as off a straggler (priced the same way), each action naming the
processes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from twinloop.closedloop.cluster import compute_processes
from twinloop.closedloop.passes import run_pass
from twinloop.errors import InputError
from twinloop.ops.detect.co_tenant import SOURCE
from twinloop.ops.events import EventClass
from twinloop.twin.engine import Twin
from twinloop.twin.scenario import scenario_from_dict

GPU = "dc9/r01/k02/n01/g3"


def _spec(kind: str = "co_tenant", target: str = GPU, magnitude: float | None = None, duration: str = "8m") -> Any:
    fault: dict[str, Any] = {"kind": kind, "target": target, "start_s": 60}
    if magnitude is not None:
        fault["magnitude"] = magnitude
    raw = {
        "name": "co-tenant",
        "site": "dc9",
        "duration_s": duration,
        "step_s": "1s",
        "seed": 3,
        "rows": [{"racks": 2, "nodes_per_rack": 2, "node": {"gpu": "h100-sxm"}, "cooling": "liquid"}],
        "jobs": [
            {
                "name": "train",
                "kind": "training",
                "gpus": 24,
                "checkpoint_interval_s": "10m",
                "checkpoint_write_s": "5s",
            }
        ],
        "faults": [fault],
        "failures": "off",
    }
    return scenario_from_dict(raw, "test", ".")


def test_a_co_tenant_slows_its_gpus_rank_and_adds_a_process_while_it_runs() -> None:
    twin = Twin(_spec(duration="3m"))
    _, k = twin.topo.resolve(GPU)
    twin.run(30)
    before = compute_processes(twin)
    assert twin.emits_processes and set(before.tolist()) <= {0.0, 1.0} and before.sum() == 24  # one rank a GPU
    assert twin.straggle_factors().min() == 1.0
    twin.run(60)
    after = compute_processes(twin)
    assert after[k] == 2.0 and (np.delete(after, k) == np.delete(before, k)).all()
    assert twin.straggle_factors()[k] == pytest.approx(0.45)  # the default: the H200's 0.165 s -> 0.365 s steps


def test_a_scenario_without_a_co_tenant_emits_no_process_count() -> None:
    assert not Twin(_spec(kind="straggler", magnitude=0.8, duration="1m")).emits_processes


def test_a_co_tenant_takes_a_gpu_only() -> None:
    with pytest.raises(InputError, match=r"faults\.0\.target"):
        Twin(_spec(target="dc9/r01/k02/n01"))


@pytest.mark.slow
def test_the_loop_names_the_co_tenant_at_its_gpu_and_prices_the_move_as_a_stragglers() -> None:
    off = run_pass(_spec(), False, optimize_cooling=False)
    co = [i for i in off.incidents if any(d.source == SOURCE for d in i.evidence)]
    assert co and {i.root for i in co} == {GPU} and {i.event_class for i in co} == {EventClass.STRAGGLER}
    on = run_pass(_spec(), True, optimize_cooling=False)
    moved = [a for a in on.actions if str(a.request.kind) in ("drain", "requeue") and a.status == "applied"]
    assert {str(a.request.kind) for a in moved} == {"drain", "requeue"}
    assert all(f"co-tenant on {GPU}: 2 compute processes" in a.request.reason for a in moved)
