"""Commands (validated, logged, refused with a reason), injected faults and their consequences, jobs."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from tests.twin.twin_helpers import make, small

from twinloop.twin.actions import (
    ACTIONS,
    Drain,
    HoldAdmission,
    RequeueJob,
    SchedulePrecool,
    SetClocks,
    SetCoolant,
    SetPowerLimit,
    TriggerCheckpoint,
)
from twinloop.twin.jobs import Phase


def test_power_limit_out_of_range_is_refused_with_reason() -> None:
    twin = make(small())
    res = twin.apply(SetPowerLimit("dc1/r01/k01/n01/g0", 50.0))
    assert not res.ok
    assert "allowed: 200..700 W" in res.reason
    assert twin.physics.gpus.user_limit_w[0] == 700
    assert twin.action_log[-1] is res
    assert not twin.apply(SetPowerLimit("dc1/r09", 300)).ok  # unknown entity


def test_power_limit_applies_to_a_rack() -> None:
    twin = make(small())
    assert twin.apply(SetPowerLimit("dc1/r01/k01", 350.0)).ok
    twin.run(120)
    p = twin.physics.gpus.power_w
    assert p[:16].max() <= 350.0 + 1e-3
    assert twin.accounts.throttled_gpu_s["sw_power_cap"] > 0


def test_set_clocks_validates_and_locks() -> None:
    twin = make(small())
    assert not twin.apply(SetClocks("dc1", 5000)).ok
    assert twin.apply(SetClocks("dc1", 990)).ok
    twin.run(80)
    assert twin.physics.clock_mhz()[:16].max() <= 990 + 1.0
    assert twin.apply(SetClocks("dc1", None)).ok


def test_cooling_commands() -> None:
    twin = make(small(cooling={"control": "commanded"}))
    assert not twin.apply(SetCoolant("dc1/r01", setpoint_c=80)).ok
    assert not twin.apply(SetCoolant("dc1/r01/k01", setpoint_c=25)).ok  # a rack, not a row
    assert twin.apply(SetCoolant("dc1/r01", setpoint_c=25, flow_fraction=1.2)).ok
    assert twin.apply(SchedulePrecool("dc1/r01", start_s=20, setpoint_c=22, duration_s=30, ramp_down_s=50)).ok
    twin.run(30)
    assert twin.cooling.state.setpoint_c[0] == 22
    twin.run(100)
    assert twin.cooling.state.setpoint_c[0] == twin.cooling.base_setpoint_c[0]
    reactive = make(small(cooling={"control": "reactive"}))
    res = reactive.apply(SetCoolant("dc1/r01", setpoint_c=25))
    assert not res.ok and "reactive" in res.reason


def test_drain_hold_requeue_checkpoint() -> None:
    twin = make(small())
    assert twin.apply(Drain("dc1/r01/k01/n01")).ok
    assert not twin.apply(Drain("dc1/r01")).ok
    twin.run(80)
    job = twin.jobs[0]
    assert 0 not in job.nodes  # drained node not used
    assert twin.apply(TriggerCheckpoint("train")).ok
    twin.run(40)
    assert job.iterations_at_checkpoint > 0
    twin.run(40)
    before = job.iterations
    assert twin.apply(RequeueJob("train")).ok
    assert job.iterations == job.iterations_at_checkpoint < before
    assert job.interruptions == 1
    assert twin.apply(HoldAdmission(True)).ok
    twin.run(20)
    assert job.phase == Phase.QUEUED
    assert twin.apply(HoldAdmission(False)).ok
    twin.run(5)
    assert job.phase == Phase.RAMP_UP


def test_action_registry_and_pickling() -> None:
    assert set(ACTIONS) >= {
        "set_power_limit",
        "set_clocks",
        "set_coolant",
        "schedule_precool",
        "trigger_checkpoint",
        "drain",
        "requeue_job",
        "hold_admission",
    }
    action = SetPowerLimit("dc1", 400)
    assert pickle.loads(pickle.dumps(action)) == action


def test_gpu_fall_off_bus_interrupts_and_restarts_from_checkpoint() -> None:
    raw = small(
        faults=[{"kind": "gpu_fall_off_bus", "target": "dc1/r01/k01/n02/g3", "start_s": 200}],
        jobs=[
            {
                "name": "train",
                "kind": "training",
                "gpus": 16,
                "checkpoint_interval_s": 100,
                "restart_overhead_s": 30,
                "profile": {"load_bytes_per_gpu": 0},
            }
        ],
    )
    twin = make(raw)
    twin.run(200)  # the fault starts at t = 200 s, i.e. in the 201st step
    job = twin.jobs[0]
    r = twin.step()
    kinds = [e.kind for e in r.events]
    assert "gpu_fell_off_bus" in kinds and "job_interrupted" in kinds
    gpu = 11
    assert twin.physics.gpus.xid[gpu] == 79
    assert job.lost_iterations > 0 and job.interruptions == 1
    twin.run(100)
    assert job.phase in (Phase.SUSTAINED, Phase.CHECKPOINT)
    assert 1 not in job.nodes  # the broken node is down
    assert twin.physics.gpus.power_w[8:16].max() == 0.0
    assert twin.ground_truth[0].kind == "gpu_fall_off_bus"
    assert twin.ground_truth[0].entity == "dc1/r01/k01/n02/g3"
    assert 0 < job.ettr(twin.t_s) < 1


def test_sdc_shows_only_in_the_loss() -> None:
    raw = small(
        faults=[{"kind": "sdc", "target": "dc1/r01/k01/n01/g2", "start_s": 150, "duration_s": 100, "magnitude": 0.5}]
    )
    twin = make(raw)
    losses = []
    for _ in range(300):
        r = twin.step()
        assert r.facility is not None
        losses.append(float(r.facility["job"]["TWINLOOP_FI_JOB_LOSS"][0]))
    jump = losses[160] - losses[140]
    assert jump > 0.4
    assert losses[270] < losses[240] - 0.4
    assert twin.physics.gpus.xid.max() == 0
    assert twin.jobs[0].interruptions == 0


def test_job_hang_restarts_after_timeout() -> None:
    raw = small(
        faults=[{"kind": "job_hang", "target": "train", "start_s": 100}],
        jobs=[
            {
                "name": "train",
                "kind": "training",
                "gpus": 16,
                "hang_timeout_s": 60,
                "profile": {"load_bytes_per_gpu": 0},
            }
        ],
    )
    twin = make(raw)
    twin.run(120)
    job = twin.jobs[0]
    assert job.phase == Phase.HUNG
    it = job.iterations
    twin.run(30)
    assert job.iterations == it
    twin.run(30)
    assert job.interruptions == 1


def test_straggler_slows_the_whole_job() -> None:
    def iterations(faults: list[dict[str, object]]) -> float:
        twin = make(small(faults=faults))
        twin.run(400)
        return twin.jobs[0].iterations

    base = iterations([])
    slow = iterations([{"kind": "straggler", "target": "dc1/r01/k01/n01/g5", "start_s": 0, "magnitude": 0.5}])
    assert slow < 0.8 * base


def test_heat_wave_raises_cooling_power() -> None:
    def cooling(faults: list[dict[str, object]]) -> float:
        twin = make(small(faults=faults))
        twin.run(200)
        return twin.accounts.cooling_j

    assert cooling([{"kind": "heat_wave", "target": "dc1", "start_s": 0, "magnitude": 15}]) > 1.2 * cooling([])


@pytest.mark.parametrize("kind", ["cdu_pump_degradation", "cooling_setpoint_drift"])
def test_cooling_faults_raise_gpu_temperature(kind: str) -> None:
    def temp(faults: list[dict[str, object]]) -> float:
        twin = make(small(faults=faults))
        twin.run(600)
        return float(np.mean(twin.physics.gpus.temp_c[:16]))

    fault = {"kind": kind, "target": "dc1/r01", "start_s": 100, "magnitude": 0.3 if "pump" in kind else 20}
    assert temp([fault]) > temp([]) + 1.0


def test_degraded_thermal_interface_heats_one_gpu() -> None:
    twin = make(small(faults=[{"kind": "gpu_thermal_interface", "target": "dc1/r01/k01/n01/g4", "start_s": 0}]))
    twin.run(200)
    t = twin.physics.gpus.temp_c[:8]
    assert t[4] > np.delete(t, 4).max() + 10


def test_operator_power_cap_lowers_the_node_limit_and_lifts_it() -> None:
    cap = {"kind": "operator_power_cap", "target": "dc1/r01/k01/n01", "start_s": 60, "duration_s": 120}
    twin = make(small(faults=[cap]))
    tdp = float(twin.physics.tdp_w[0])
    twin.run(100)
    lim = twin.physics.gpus.user_limit_w
    assert np.allclose(lim[:8], 0.65 * tdp) and np.allclose(lim[8:], tdp)
    assert float(twin.physics.gpus.power_w[:8].max()) <= 0.65 * tdp + 1.0  # the node obeys its cap
    twin.run(100)
    assert np.allclose(twin.physics.gpus.user_limit_w, tdp)


def test_operator_power_cap_on_a_rack_caps_that_rack_only() -> None:
    """sweeps/new-user/sdc-restart.yaml: a rack target was turned into its row (as for a CDU fault, one CDU per
    row), so an operator capping one rack capped the whole row, the training job's nodes included."""
    cap = {"kind": "operator_power_cap", "target": "dc1/r01/k02", "start_s": 10, "duration_s": 120}
    twin = make(small(faults=[cap]))
    tdp = float(twin.physics.tdp_w[0])
    twin.run(20)
    lim = twin.physics.gpus.user_limit_w
    assert np.allclose(lim[16:], 0.65 * tdp) and np.allclose(lim[:16], tdp)  # rack k02's nodes, not k01's


def test_operator_power_cap_magnitude_is_checked() -> None:
    from twinloop.errors import InputError

    cap = {"kind": "operator_power_cap", "target": "dc1/r01/k01/n01", "start_s": 0, "magnitude": 1.5}
    with pytest.raises(InputError, match="fraction of TDP"):
        make(small(faults=[cap]))
