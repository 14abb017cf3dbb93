"""``power_throttled_below_tdp_gpu_s`` counts GPU-seconds: a GPU held by a cap below its TDP *and* by the power
brake in the same second is one throttled GPU-second, not two (issue 14: the loop's PSU response on `default`)."""

from __future__ import annotations

from tests.twin.twin_helpers import make, small

from twinloop.twin.actions import Drain, RequeueJob, SetPowerLimit


def test_a_capped_gpu_under_the_power_brake_counts_once() -> None:
    # One node of the 16-GPU job keeps 1 of its 6 PSUs and is capped at 300 W: 8 x 300 W beside its host's draw is
    # more than the one PSU carries, so the node trips and brakes while capped. (At the 200 W floor its GPUs held
    # 263 W before the twin's HBM power followed the clock, and tripped; now they hold 200 W and it does not.)
    node = "dc1/r01/k01/n01"
    twin = make(small(faults=[{"kind": "psu_loss", "target": node, "start_s": 20, "duration_s": 80, "magnitude": 5}]))
    assert twin.apply(SetPowerLimit(node, 300.0)).ok
    per_step, both = [], 0
    for _ in range(100):
        before = twin.accounts.power_throttled_below_tdp_gpu_s
        twin.step()
        per_step.append(twin.accounts.power_throttled_below_tdp_gpu_s - before)
        a = twin.physics.gpus
        capped = int((a.limited[:8] & (a.limit_w[:8] < 690.0)).sum())
        both += int(capped > 0 and twin.braked_gpus.size > 0)
    assert both > 0  # the case this test is about happened
    assert max(per_step) <= 8 * twin.dt_s  # at most the node's 8 GPUs per second


def test_a_braked_gpu_with_no_work_is_not_throttled() -> None:
    # The loop moves the job off a node whose PSUs are short while its power brake is still on: for the brake's
    # last seconds its GPUs hold no work, so no clock of any workload is held down. (A limit counts only where it
    # binds, `limited`; the brake is treated the same.) NVML's brake bit, `throttled_gpu_s["hw_power_brake"]`,
    # still counts every braked GPU.
    node = "dc1/r01/k01/n01"
    twin = make(small(faults=[{"kind": "psu_loss", "target": node, "start_s": 20, "duration_s": 80, "magnitude": 5}]))
    while not twin.braked_gpus.size:
        twin.step()
    assert twin.apply(Drain(node)).ok and twin.apply(RequeueJob("train")).ok
    idle_braked_steps = 0
    while twin.braked_gpus.size:
        before = twin.accounts.power_throttled_below_tdp_gpu_s
        brake_before = twin.accounts.throttled_gpu_s["hw_power_brake"]
        twin.step()
        if twin.braked_gpus.size and (twin.job_of_gpu[twin.braked_gpus] < 0).all():
            idle_braked_steps += 1
            assert twin.accounts.throttled_gpu_s["hw_power_brake"] - brake_before == 8 * twin.dt_s
            assert twin.accounts.power_throttled_below_tdp_gpu_s == before
    assert idle_braked_steps > 0  # the case this test is about happened
