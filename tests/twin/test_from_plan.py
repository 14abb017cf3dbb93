import copy
from typing import Any

import pytest

from twinloop.errors import InputError
from twinloop.hardware.gpu import get_gpu
from twinloop.hardware.power import relative_speed
from twinloop.plan.train import plan_train
from twinloop.plan.train_request import make_request
from twinloop.twin.engine import Twin
from twinloop.twin.from_plan import planned_profile
from twinloop.twin.scenario import scenario_from_dict

from .twin_helpers import small


def planned_site(**plan: Any) -> dict[str, Any]:
    raw = small()
    raw["jobs"] = [{"name": "train", "kind": "training", "gpus": 16, "plan": {"model": "llama-3-8b", **plan}}]
    return raw


def test_training_profile_comes_from_the_plan() -> None:
    plan = plan_train(make_request(model="llama-3-8b", gpu="h100-sxm", gpus=16))
    prof = planned_profile("training", {"model": "llama-3-8b"}, 16, "h100-sxm")
    # The profile holds the full-clock compute time; slowed at the plan's (power-capped) clock it is the plan's step.
    compute = plan.phases.phases[0]
    speed = relative_speed(compute.clock_mhz, get_gpu("h100-sxm").sm_clock_max_mhz, prof.compute_fraction)
    assert compute.clock_mhz < get_gpu("h100-sxm").sm_clock_max_mhz  # dense training is power-bound on an H100
    assert prof.compute_s / speed + prof.comm_s == pytest.approx(plan.step_time_s, rel=1e-6)
    assert prof.tokens_per_step == plan.tokens_per_step
    assert prof.hbm_bytes_used == plan.memory_per_gpu_bytes["total"]
    assert prof.compute.tensor_active == plan.phases.phases[0].tensor_active


def test_serving_profile_prefill_hotter_than_decode() -> None:
    prof = planned_profile("serving", {"model": "llama-3-8b"}, 8, "h100-sxm")
    assert prof.compute.tensor_active > prof.comm.tensor_active
    assert prof.decode_tokens_per_s > 0 and prof.tokens_per_step > 0


def test_planned_job_runs_in_the_twin_and_overrides_still_apply() -> None:
    raw = planned_site()
    raw["jobs"][0]["profile"] = {"load_bytes_per_gpu": 1e9}
    twin = Twin(scenario_from_dict(raw, "t.yaml"), "t.yaml")
    job = twin.jobs[0]
    assert job.profile.load_bytes_per_gpu == 1e9
    assert (
        job.profile.tokens_per_step
        == planned_profile("training", {"model": "llama-3-8b"}, 16, "h100-sxm").tokens_per_step
    )
    twin.run(120.0)
    assert twin.summary()["jobs"][0]["iterations"] > 0


def test_bad_plan_names_the_field() -> None:
    with pytest.raises(InputError, match=r"t\.yaml: jobs\.0\.plan"):
        scenario_from_dict(planned_site(precision="fp3"), "t.yaml")
    raw = copy.deepcopy(planned_site())
    raw["jobs"][0]["plan"] = {"precision": "bf16"}
    with pytest.raises(InputError, match=r"jobs\.0\.plan.*model"):
        scenario_from_dict(raw, "t.yaml")
