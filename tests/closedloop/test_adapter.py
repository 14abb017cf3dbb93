import numpy as np

from twinloop.closedloop.adapter import TwinAdapter
from twinloop.ops.events import EventClass, Incident, Severity
from twinloop.ops.respond.actions import ActionKind, ActionRequest
from twinloop.ops.respond.policy import default_policy
from twinloop.ops.respond.responder import Responder
from twinloop.twin.engine import Twin
from twinloop.twin.jobs import Phase
from twinloop.twin.scenario import scenario_from_dict

SITE = {
    "name": "adapter-test",
    "site": "dc1",
    "duration_s": 120,
    "rows": [
        {"racks": 2, "nodes_per_rack": 2, "cdu": {"capacity_w": 60000, "flow_kg_per_s": 2.0, "pump_power_w": 300}}
    ],
    "power_chain": {"facility_power_budget_w": 1.0e5},
    "jobs": [{"name": "train", "kind": "training", "gpus": 16, "profile": {"load_bytes_per_gpu": 4e9}}],
}


def twin_running(steps: int = 60) -> Twin:
    twin = Twin(scenario_from_dict(SITE, "t.yaml"), "t.yaml")
    twin.run(float(steps))
    return twin


def test_entities_jobs_and_limits_come_from_the_twin() -> None:
    twin = twin_running()
    a = TwinAdapter(twin)
    gpu = "dc1/r01/k01/n01/g0"
    assert a.job_of(gpu) == "dc1/jobs/train"
    assert a.cdu_of(gpu) == "dc1/r01"
    assert a.limits(ActionKind.POWER_CAP, "dc1/jobs/train") == (200.0, 700.0)
    lo, hi = a.limits(ActionKind.CDU_SETPOINT, "dc1/r01") or (0, 0)
    assert lo < a.current(ActionKind.CDU_SETPOINT, "dc1/r01") <= hi  # type: ignore[operator]
    assert a.limits(ActionKind.POWER_CAP, "dc1/r09") is None


def test_power_cap_on_a_job_reaches_exactly_its_gpus() -> None:
    twin = twin_running()
    reply = TwinAdapter(twin).apply(ActionRequest(ActionKind.POWER_CAP, "dc1/jobs/train", 450.0))
    assert reply.status == "applied"
    limits = twin.physics.gpus.user_limit_w
    job_gpus = np.asarray(twin.job_by_name("train").gpus)  # type: ignore[union-attr]
    assert np.all(limits[job_gpus] == 450.0)
    others = np.setdiff1d(np.arange(twin.topo.n_gpus), job_gpus)
    assert np.all(limits[others] == 700.0)


def test_twin_refusals_come_back_as_refused() -> None:
    a = TwinAdapter(twin_running())
    assert a.apply(ActionRequest(ActionKind.CDU_FLOW, "dc1/r01/k01", 1.2)).status == "refused"
    assert a.apply(ActionRequest(ActionKind.REQUEUE, "dc1/jobs/nope")).status == "refused"
    assert a.apply(ActionRequest(ActionKind.EXCLUDE_GPU, "dc1/r01/k01/n01/g0")).status == "refused"
    # A training job's GPU holds no serving replica to restart.
    assert a.apply(ActionRequest(ActionKind.RESTART_REPLICA, "dc1/r01/k01/n01/g0")).status == "refused"


def test_a_replica_restart_is_refused_where_the_scheduler_cannot_do_it() -> None:
    # Slurm has no command that restarts one replica of a job: an honest refusal. Kubernetes deletes the replica's pod
    # (tests/ops/respond/test_adapters.py), but only knows which pod from `--jobs k8s`: without it, refused too.
    from twinloop.ops.respond.adapters.commands import KubernetesAdapter, SlurmAdapter

    reply = SlurmAdapter().apply(ActionRequest(ActionKind.RESTART_REPLICA, "dc1/r01/k01/n01/g0"))
    assert reply.status == "refused" and "does not support restart_replica" in reply.detail
    reply = KubernetesAdapter().apply(ActionRequest(ActionKind.RESTART_REPLICA, "dc1/r01/k01/n01/g0"))
    assert reply.status == "refused" and "needs --jobs k8s" in reply.detail


def test_closed_loop_cooling_rule_changes_the_twin() -> None:
    twin = twin_running()
    before = float(twin.cooling.state.setpoint_c[0])
    incident = Incident(1, EventClass.COOLING_DEGRADATION, "dc1/r01/k01", ("dc1/r01/k01/n01/g0",), 0, 0, Severity.MAJOR)
    out = Responder(default_policy(), TwinAdapter(twin), mode="auto").handle(
        [incident], twin.t_s, lambda f, e, a="mean", ago=0.0: 70.0
    )
    assert [r.status for r in out] == ["applied", "applied", "applied"], [r.detail for r in out]
    twin.run(5.0)
    assert float(twin.cooling.state.setpoint_c[0]) < before


def test_supply_limit_follows_the_working_psus_of_a_node() -> None:
    twin = twin_running()
    a = TwinAdapter(twin)
    node = "dc1/r01/k01/n01"
    whole = a.supply_limit_w(node)
    assert whole is not None and whole > 700.0  # all PSUs: more than the GPUs' highest limit
    _, index = twin.topo.resolve(node)
    twin.chain.psus_alive[index] = 1.0
    one = a.supply_limit_w(node)
    rating = float(twin.chain.psu_rating_w[index])
    assert one is not None and one < (rating * a.supply_margin) / 8  # the host's draw comes off first
    assert a.supply_limit_w("dc1/r01") is None and a.supply_limit_w("dc1/r01/k01/n01/g0") is None


def test_checkpoint_done_follows_the_twin_job_state() -> None:
    """The requeue gate reads the twin's job: not done while the triggered checkpoint is being written, done once
    it completed after the request."""
    site = {**SITE, "jobs": [{**SITE["jobs"][0], "checkpoint_write_s": 30, "checkpoint_interval_s": 3600}]}  # type: ignore[dict-item]
    twin = Twin(scenario_from_dict(site, "t.yaml"), "t.yaml")
    twin.run(60.0)
    a = TwinAdapter(twin)
    job = "dc1/jobs/train"
    since = float(twin.t_s)
    assert a.checkpoint_done(job, since) is False  # work since launch, no checkpoint after `since`
    assert a.apply(ActionRequest(ActionKind.CHECKPOINT, job)).status == "applied"
    twin.run(20.0)
    assert a.checkpoint_done(job, since) is False  # still writing (30 s)
    twin.run(15.0)
    assert a.checkpoint_done(job, since) is True
    assert a.checkpoint_done("dc1/jobs/nope", since) is None


def test_is_serving_reads_the_twin_job_kind() -> None:
    a = TwinAdapter(twin_running(5))
    assert a.is_serving("dc1/jobs/train") is False
    assert a.is_serving("dc1/jobs/nope") is None


def test_job_timing_comes_from_the_twin_job() -> None:
    """What the straggler response weighs: the job's checkpoint write, its restart (overhead + load), the time to
    its own next checkpoint and, for a job with a run time, what is left of it."""
    job_spec = {**SITE["jobs"][0], "checkpoint_write_s": 30, "checkpoint_interval_s": 600, "run_s": 3600}  # type: ignore[dict-item]
    twin = Twin(scenario_from_dict({**SITE, "jobs": [job_spec]}, "t.yaml"), "t.yaml")
    twin.run(60.0)
    a = TwinAdapter(twin)
    t = a.job_timing("dc1/jobs/train")
    job = twin.job_by_name("train")
    assert t is not None and job is not None and job.first_start_s is not None
    assert t.checkpoint_write_s == 30.0
    assert t.restart_s == job.spec.restart_overhead_s + job.profile.load_s
    assert t.next_checkpoint_in_s == job.next_checkpoint_s - twin.t_s
    # the save comes at an iteration count, 600 s of full-speed work on; at the job's pace it takes longer
    assert 0 < t.next_checkpoint_in_s <= 600 / job.speed + job.profile.iteration_s
    assert t.remaining_s == job.first_start_s + 3600 - twin.t_s
    assert a.job_timing("dc1/jobs/nope") is None


def test_thermal_path_cap_from_the_twins_readings_holds_the_die_just_below_slowdown() -> None:
    """Issue 14: a GPU whose thermal interface fails (R x 2.5) is capped at what its own path carries: read off its
    readings through the loop's reader and the adapter's coolant, the cap holds its die at slowdown less the margin
    (not far below it, as a fixed 0.7 of the limit can, and not above it).
    """
    from twinloop.closedloop.cluster import TwinReader
    from twinloop.ops.respond.thermal_cap import MARGIN_C, ThermalPathCap, thermal_path_cap

    twin = twin_running(30)
    a = TwinAdapter(twin)
    reader = TwinReader(twin, a)
    gpu = "dc1/r01/k01/n01/g0"
    _, i = twin.topo.resolve(gpu)
    idx = np.array([i])
    twin.physics.set_thermal_resistance(idx, twin.physics.gpus.r_c_per_w[idx] * np.float32(2.5))
    for _ in range(90):
        twin.step()
        reader.record()
    path = a.thermal_path(gpu)
    assert path is not None and path.slowdown_temp_c == 89.0
    assert a.thermal_path("dc1/r01/k01/n01") is None and a.thermal_path("dc1/r09/k01/n01/g0") is None
    found = thermal_path_cap(reader, gpu, path.coolant_temp_c, path.slowdown_temp_c, (200.0, 700.0))
    assert isinstance(found, ThermalPathCap), found
    assert a.apply(ActionRequest(ActionKind.POWER_CAP, gpu, found.cap_w)).status == "applied"
    temps = []
    for _ in range(120):
        twin.step()
        temps.append(float(twin.state["gpu_temp_c"][i]))
    target = path.slowdown_temp_c - MARGIN_C
    assert max(temps[60:]) <= target + 0.5
    assert max(temps[60:]) >= target - 2.0


def test_jobs_on_follows_the_job_off_a_drained_node() -> None:
    # The responder asks it before a requeue: a job already moved off an incident's node is not requeued again.
    twin = twin_running()
    a = TwinAdapter(twin)
    node = "dc1/r01/k01/n01"
    assert a.jobs_on(node) == ("dc1/jobs/train",)
    assert a.jobs_on("dc1/r01/k02/n02") == ()
    assert a.jobs_on("dc1/r07") is None  # not in the twin: cannot tell
    assert a.apply(ActionRequest(ActionKind.DRAIN, node)).status == "applied"
    assert a.apply(ActionRequest(ActionKind.REQUEUE, "dc1/jobs/train")).status == "applied"
    twin.run(5.0)
    assert a.jobs_on(node) == ()
    assert a.jobs_on("dc1/r01") == ("dc1/jobs/train",)


def test_next_checkpoint_of_a_slowed_job_is_at_its_slowed_pace() -> None:
    """With saves at iteration counts a job slowed by ``s`` reaches its save iteration ``1/(1 - s)`` later in wall
    time. The straggler's "restart at its own checkpoint" price ``R + s·t`` (ops/respond/restart_cost.py) is right only
    if ``t`` is that wall time: the twin's ``next_checkpoint_in_s`` is, computed at the job's pace. That pace is its
    compute's speed over the last half minute: read at a step spent communicating (GPUs at full clock) the estimate
    came up to 20 % early."""
    straggler = {"kind": "straggler", "target": "dc1/r01/k01/n01/g5", "start_s": 150, "duration_s": 3600}
    job_spec = {**SITE["jobs"][0], "checkpoint_write_s": 10, "checkpoint_interval_s": 300}  # type: ignore[dict-item]
    raw = {**SITE, "duration_s": 3600, "jobs": [job_spec], "faults": [{**straggler, "magnitude": 0.5}]}
    twin = Twin(scenario_from_dict(raw, "t.yaml"), "t.yaml")
    a = TwinAdapter(twin)
    job = twin.job_by_name("train")
    assert job is not None
    estimates = []
    for _ in range(140):
        twin.step()
        timing = a.job_timing("dc1/jobs/train")
        if twin.t_s >= 60 and timing is not None and timing.next_checkpoint_in_s:
            estimates.append(twin.t_s + timing.next_checkpoint_in_s)
    healthy_s = float(np.median(estimates))
    assert max(estimates) - min(estimates) < 2 * job.wall_iteration_s()  # steady, whichever step it is read at
    twin.run(100.0)  # the straggler since 150 s
    timing = a.job_timing("dc1/jobs/train")
    assert timing is not None and timing.next_checkpoint_in_s is not None
    asked_s = twin.t_s
    while job.phase != Phase.CHECKPOINT:
        twin.step()
    assert abs(asked_s + timing.next_checkpoint_in_s - twin.t_s) <= 2 * job.wall_iteration_s()
    assert twin.t_s > healthy_s + 60.0  # the save came later than at the healthy pace, as the estimate said
