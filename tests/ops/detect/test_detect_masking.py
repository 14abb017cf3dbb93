"""No masking (issue 14): a fault inside an open incident's scope keeps its own incident when its signature
differs; scattered throttling over a row is the row's; a serving fleet's replicas are no stragglers."""

from __future__ import annotations

import numpy as np

from twinloop.hardware.gpu import GpuSpec, load_gpu_catalog
from twinloop.lab.detector_data import fleet_entities
from twinloop.ops.detect.grouping import IncidentGrouper
from twinloop.ops.detect.pipeline import THERMAL_PATH, DetectionPipeline, PipelineConfig
from twinloop.ops.detect.rules import POWER_LIMIT, SM_CLOCK, GpuLimits
from twinloop.ops.events import EventClass, Incident

ENTITIES = fleet_entities(n_rows=2, racks_per_row=4)  # 2 rows x 4 racks x 8 nodes x 8 GPUs


def _gpus(prefix: str) -> np.ndarray:
    return np.array([i for i, e in enumerate(ENTITIES) if e.startswith(prefix + "/")], dtype=np.int64)


def _opened(updates: list[Incident]) -> dict[int, Incident]:
    out: dict[int, Incident] = {}
    for u in updates:
        if u.status == "open":
            out[u.incident_id] = u
    merged = {u.incident_id for u in updates if u.status == "merged"}
    return {k: v for k, v in out.items() if k not in merged}


def test_a_gpu_thermal_path_fault_inside_a_row_cooling_incident_gets_its_own_incident() -> None:
    # Row 1's coolant fails from t = 0 (every GPU of the row, the coolant rule); at t = 200 s one GPU's thermal
    # interface fails too (the cooling rule: its die above its coolant). Before: the GPU's firing grew the row
    # incident (same class, below its root) and no one saw the second fault.
    g = IncidentGrouper(ENTITIES)
    row = _gpus("dc/r01")
    gpu = int(row[77])
    updates: list[Incident] = []
    for t in range(400):
        g.observe(float(t), EventClass.COOLING_DEGRADATION, row)
        if t >= 200:
            g.observe(float(t), EventClass.COOLING_DEGRADATION, np.array([gpu]), (), THERMAL_PATH)
        updates += g.step(float(t))
    opened = _opened(updates)
    roots = {i.root for i in opened.values()}
    assert roots == {"dc/r01", ENTITIES[gpu]}
    assert all(i.event_class == EventClass.COOLING_DEGRADATION for i in opened.values())
    # The same firings with the same signature stay one incident (grouping itself is unchanged).
    g2 = IncidentGrouper(ENTITIES)
    updates = []
    for t in range(400):
        g2.observe(float(t), EventClass.COOLING_DEGRADATION, row)
        if t >= 200:
            g2.observe(float(t), EventClass.COOLING_DEGRADATION, np.array([gpu]))
        updates += g2.step(float(t))
    assert {i.root for i in _opened(updates).values()} == {"dc/r01"}


def test_each_incident_closes_when_its_own_evidence_is_gone() -> None:
    # The GPU's fault is repaired at t = 300 s while the row's coolant incident goes on: the GPU's incident
    # closes after the quiet period, the row's stays open.
    g = IncidentGrouper(ENTITIES, quiet_s=120.0)
    row = _gpus("dc/r01")
    gpu = int(row[5])
    updates: list[Incident] = []
    for t in range(600):
        g.observe(float(t), EventClass.COOLING_DEGRADATION, row)
        if 100 <= t < 300:
            g.observe(float(t), EventClass.COOLING_DEGRADATION, np.array([gpu]), (), THERMAL_PATH)
        updates += g.step(float(t))
    closed = [u for u in updates if u.status == "closed"]
    assert [u.root for u in closed] == [ENTITIES[gpu]]
    assert 295.0 <= closed[0].end_ts < 300.0  # its last detection
    assert {i.root for i in g.open_incidents} == {"dc/r01"}


def test_throttling_scattered_over_a_row_is_one_row_incident() -> None:
    # One GPU in each of four nodes over three racks of row 0 throttles at once (a hot air-cooled row): one
    # incident of the row, not four GPU incidents each drained on its own. Two GPUs in one rack stay apart.
    g = IncidentGrouper(ENTITIES)
    picks = np.array([_gpus(p)[3] for p in ("dc/r00/k00/n01", "dc/r00/k00/n05", "dc/r00/k01/n02", "dc/r00/k03/n07")])
    updates: list[Incident] = []
    for t in range(60):
        g.observe(float(t), EventClass.THERMAL_THROTTLE, picks)
        updates += g.step(float(t))
    assert {i.root for i in _opened(updates).values()} == {"dc/r00"}
    g = IncidentGrouper(ENTITIES)
    two = picks[:2]
    updates = []
    for t in range(60):
        g.observe(float(t), EventClass.THERMAL_THROTTLE, two)
        updates += g.step(float(t))
    assert {i.root for i in _opened(updates).values()} == {ENTITIES[int(two[0])], ENTITIES[int(two[1])]}


def test_a_serving_fleets_replicas_are_no_stragglers() -> None:
    # A serving job's replicas run different loads (so different clocks at the power limit) and nobody waits for
    # the slowest: once the loop knows the job is a fleet, its slow-clocked replica is no straggler.
    ents = tuple(f"dc/r01/k01/n{n:02d}/g{g}" for n in (1, 2) for g in range(8))
    n = len(ents)

    def run(replicas: bool) -> set[str]:
        pipe = DetectionPipeline(ents, config=PipelineConfig(emit_info=False))
        if replicas:
            pipe.replica_job("chat")
        rng = np.random.default_rng(1)
        roots: set[str] = set()
        for t in range(120):
            clock = 1980.0 * (1.0 + 0.002 * rng.standard_normal(n))
            clock[8:10] *= 0.85
            fields = {SM_CLOCK: clock, POWER_LIMIT: np.full(n, 700.0)}
            for u in pipe.step(float(t), fields, np.zeros(n, dtype=np.int64), ["chat"]):
                if u.event_class == EventClass.STRAGGLER:
                    roots.add(u.root)
        return roots

    assert run(False) == {"dc/r01/k01/n02"}
    assert run(True) == set()


def _job_pipeline_run(psu_lost_from: float | None, spike_at: float | None, slow_from: float | None) -> set[EventClass]:
    """Classes of the job-rooted incidents of a 16-GPU training job: its node 1 reports lost PSU redundancy (an
    alarm that stays on, the GPUs at full speed) from ``psu_lost_from``; the loss jumps at ``spike_at``; the step
    time rises 30 % at ``slow_from``."""
    from twinloop.ops.detect.rules import JOB_LOSS, JOB_STEP_TIME, PSU_STATE

    ents = tuple(f"dc/r01/k01/n{n:02d}/g{g}" for n in (1, 2) for g in range(8))
    n = len(ents)
    pipe = DetectionPipeline(ents, config=PipelineConfig(emit_info=False))
    rng = np.random.default_rng(2)
    classes: set[EventClass] = set()
    for t in range(900):
        psu = np.zeros(n)
        if psu_lost_from is not None and t >= psu_lost_from:
            psu[:8] = 1.0
        fields = {SM_CLOCK: 1980.0 * (1.0 + 0.002 * rng.standard_normal(n)), POWER_LIMIT: np.full(n, 700.0),
                  PSU_STATE: psu}  # fmt: skip
        loss = 3.0 - t / 1000.0 + 0.003 * rng.standard_normal()
        if spike_at is not None and t >= spike_at:
            loss += 0.5
        step = 2.0 * (1.0 + 0.005 * rng.standard_normal()) * (1.3 if slow_from is not None and t >= slow_from else 1.0)
        job = {JOB_LOSS: np.array([loss]), JOB_STEP_TIME: np.array([step])}
        for u in pipe.step(float(t), fields, np.zeros(n, dtype=np.int64), ["train"], job):
            if u.root == "dc/jobs/train":
                classes.add(u.event_class)
    return classes


def test_an_open_hardware_alarm_on_one_gpu_does_not_blind_sdc_or_slowdown_detection() -> None:
    # Before: the PSU alarm (firing every second from t = 100 s) vetoed the SDC rule and explained any slowdown of
    # the job for as long as it lasted.
    assert EventClass.SUSPECTED_SDC in _job_pipeline_run(100.0, 600.0, None)
    assert EventClass.STRAGGLER in _job_pipeline_run(100.0, None, 600.0)
    # A hardware change at the moment of the spike still explains it (the veto itself is kept).
    assert EventClass.SUSPECTED_SDC not in _job_pipeline_run(599.0, 600.0, None)
    assert _job_pipeline_run(None, None, None) == set()


def test_a_hot_rows_tail_gpu_is_the_rows_incident_and_a_local_fault_keeps_its_own() -> None:
    # Row 0 runs hot: GPU A throttles at 2 °C warmer than its row-mates for its power (the tail of a hot row); GPU B,
    # in the same row at the same time, is 15 °C warmer (its own thermal path). Before: two GPU incidents, so
    # the policy capped and drained A's node too (the mixed_hall A100 row's drains). Now: the row's incident for A,
    # B's own incident beside it.
    from twinloop.hardware.power import CLOCK_EVENT_SW_THERMAL
    from twinloop.ops.detect.rules import CLOCK_REASONS, POWER, TEMP

    ents = fleet_entities(n_rows=1, racks_per_row=4)
    n = len(ents)
    a, b = 10, 150
    pipe = DetectionPipeline(ents, config=PipelineConfig(emit_info=False))
    rng = np.random.default_rng(4)
    opened: dict[int, Incident] = {}
    for t in range(200):
        power = np.full(n, 600.0) + rng.normal(0.0, 2.0, n)
        temp = np.round(40.0 + pipe.limits.thermal_resistance_c_per_w * power)
        bits = np.zeros(n)
        if t >= 100:
            temp[a] += 2.0
            temp[b] += 15.0
            bits[[a, b]] = CLOCK_EVENT_SW_THERMAL
        fields = {TEMP: temp, POWER: power, CLOCK_REASONS: bits, SM_CLOCK: np.full(n, 1980.0)}
        for u in pipe.step(float(t), fields):
            if u.event_class == EventClass.THERMAL_THROTTLE:
                opened[u.incident_id] = u
    assert {i.root for i in opened.values()} == {"dc/r00", ents[b]}


def _a100_row() -> tuple[list[str], GpuSpec, GpuLimits, DetectionPipeline]:
    """One air-cooled row of A100s (4 racks) and a pipeline over it."""
    ents = fleet_entities(n_rows=1, racks_per_row=4)
    n = len(ents)
    spec = load_gpu_catalog()["a100-sxm-80gb"]
    lim = GpuLimits.from_kinds([spec], np.zeros(n, np.int64), np.full(n, 1.8))
    return ents, spec, lim, DetectionPipeline(ents, limits=lim, config=PipelineConfig(emit_info=False))


def test_gpus_pinned_at_slowdown_while_their_row_still_warms_are_the_rows_incident() -> None:
    # An air-cooled A100 row's load ramps up (8 W/s per GPU, a job's ramp-up). The GPUs differ only by the
    # manufacturing spread of their thermal resistance (4 %): the warmer ones reach their slowdown temperature
    # first and are held there (throttled, power cut back) while the others are still warming through their RC,
    # ~10 °C below their steady state. Before: against the row's instantaneous T - R·P the held GPUs looked "much
    # warmer for their power" than their still-warming row-mates and each opened its own thermal-path incident
    # (mixed_hall: four A100s capped and drained). Now the comparison uses the power through the RC: their
    # throttling is the row's. A GPU whose thermal path really failed (R x 2) keeps its own incident.
    from twinloop.hardware.power import CLOCK_EVENT_SW_THERMAL
    from twinloop.ops.detect.rules import CLOCK_REASONS, POWER, TEMP

    ents, spec, lim, pipe = _a100_row()
    n = len(ents)
    rng = np.random.default_rng(11)
    r_true = lim.thermal_resistance_c_per_w * (1.0 + 0.04 * rng.standard_normal(n))
    bad, coolant_c = 200, 33.0
    t_max = lim.slowdown_temp_c - 2.0  # the throttle holds the die here
    temp = coolant_c + r_true * 60.0
    opened: dict[int, Incident] = {}
    for t in range(400):
        r_now = r_true.copy()
        if t >= 250:
            r_now[bad] *= 2.0
        demand = np.full(n, float(np.clip(60.0 + 8.0 * (t - 60), 60.0, 400.0)))
        # The throttle cuts power to what holds the die at t_max (at steady state: (t_max - coolant) / R).
        cap = (t_max - coolant_c) / r_now
        held = (temp >= t_max - 0.25) & (demand > cap)
        power = np.where(held, cap, demand)
        tss = coolant_c + r_now * power
        temp = tss + (temp - tss) * np.exp(-1.0 / (r_now * spec.thermal_capacitance_j_per_c))
        fields = {
            TEMP: np.round(temp),
            POWER: power,
            CLOCK_REASONS: np.where(held, CLOCK_EVENT_SW_THERMAL, 0),
            SM_CLOCK: np.where(held, 1200.0, 1410.0),
        }
        for u in pipe.step(float(t), fields):
            if u.event_class == EventClass.THERMAL_THROTTLE:
                opened[u.incident_id] = u
    gpu_roots = {i.root for i in opened.values() if i.root.count("/") == 4}
    assert gpu_roots == {ents[bad]}, sorted(gpu_roots)


def test_a_busy_gpu_with_a_slightly_high_r_in_a_half_idle_row_is_no_thermal_path_fault() -> None:
    # An air-cooled A100 row, half idle (60 W), half busy and held at its slowdown temperature, all at steady state.
    # One busy GPU has a thermal resistance 10 % above the catalog's (manufacturing spread, 2.5 sigma at 4 %): it is
    # 5-6 °C warmer for its power than the row's median, and in °C the row's spread is the idle GPUs' (R·P small).
    # Before: that GPU was a thermal-path fault of its own (capped, drained, its job requeued: mixed_hall seed 4).
    # Now its excess is judged relative to its own R·P. A GPU whose thermal interface failed (R x 2) still is one.
    from twinloop.hardware.power import CLOCK_EVENT_SW_THERMAL
    from twinloop.ops.detect.rules import CLOCK_REASONS, POWER, TEMP

    ents, _spec, lim, pipe = _a100_row()
    n = len(ents)
    rng = np.random.default_rng(5)
    r_true = lim.thermal_resistance_c_per_w * (1.0 + 0.04 * np.clip(rng.standard_normal(n), -2.0, 2.0))
    busy = np.arange(n) % 2 == 0
    spread_gpu, bad, coolant_c = 10, 200, 34.0
    r_true[spread_gpu] = 1.10 * lim.thermal_resistance_c_per_w[spread_gpu]
    t_max = lim.slowdown_temp_c - 2.0
    opened: dict[int, Incident] = {}
    for t in range(300):
        r_now = r_true.copy()
        if t >= 150:
            r_now[bad] *= 2.0
        power = np.where(busy, np.minimum(400.0, (t_max - coolant_c) / r_now), 60.0)
        temp = coolant_c + r_now * power
        held = busy & (power < 400.0)
        fields = {
            TEMP: np.round(temp),
            POWER: power,
            CLOCK_REASONS: np.where(held, CLOCK_EVENT_SW_THERMAL, 0),
            SM_CLOCK: np.where(held, 1200.0, 1410.0),
        }
        for u in pipe.step(float(t), fields):
            if u.event_class == EventClass.THERMAL_THROTTLE:
                opened[u.incident_id] = u
    gpu_roots = {i.root for i in opened.values() if i.root.count("/") == 4}
    assert gpu_roots == {ents[bad]}, sorted(gpu_roots)


def _sdc_with_a_moved_reading(step_s: float, temp_jump_at: float) -> tuple[list[float], list[float]]:
    """A 16-GPU training job stepping every ``step_s`` (its loss reported once per step and repeated in between,
    as a framework's last value is); one GPU's temperature steps up 4 °C at ``temp_jump_at`` with no workload
    change (an unexplained per-field alarm on one GPU); the loss jumps +0.5 from t = 600 s (an SDC).

    Returns:
        (start times of the job's suspected-SDC incidents, start times of the unclassified incidents on that GPU).
    """
    from twinloop.ops.detect.rules import JOB_LOSS, TEMP

    ents = tuple(f"dc/r01/k01/n{n:02d}/g{g}" for n in (1, 2) for g in range(8))
    n = len(ents)
    pipe = DetectionPipeline(ents)
    rng = np.random.default_rng(3)
    sdc, moved = [], []
    loss, next_step = 3.0, 0.0
    for t in range(900):
        if t >= next_step:  # a new step: a new loss value
            loss = 3.0 - t / 1000.0 + 0.003 * rng.standard_normal() + (0.5 if t >= 600 else 0.0)
            next_step += step_s
        temp = np.full(n, 60.0)
        temp[3] += 4.0 if t >= temp_jump_at else 0.0
        fields = {SM_CLOCK: 1980.0 * (1.0 + 0.002 * rng.standard_normal(n)), POWER_LIMIT: np.full(n, 700.0),
                  TEMP: temp}  # fmt: skip
        for u in pipe.step(float(t), fields, np.zeros(n, dtype=np.int64), ["train"], {JOB_LOSS: np.array([loss])}):
            if u.status != "open":
                continue
            if u.root == "dc/jobs/train" and u.event_class == EventClass.SUSPECTED_SDC:
                sdc.append(u.start_ts)
            elif u.event_class == EventClass.UNCLASSIFIED and ents[3] in (u.root, *u.members):
                moved.append(u.start_ts)
    return sdc, moved


def test_a_reading_that_moved_on_one_gpu_does_not_veto_sdc_at_any_step_time() -> None:
    # Found on the default scenario after the planner moved train-llama-70b's step from ~6.2 s to ~6.9 s: a
    # temperature z-score alarm on one GPU of the 512 (no rule explained it) within 120 s before the SDC vetoed it
    # for 120 s, so it was caught late or, once the loss level had absorbed the jump, never (seed 2, loop off).
    # A moved reading changes how fast a GPU computes, not what it computes: only an XID or a power-delivery
    # fault (kept: test_an_open_hardware_alarm_on_one_gpu_does_not_blind_sdc_or_slowdown_detection) explains it.
    for step_s in (6.2, 6.9):
        sdc, moved = _sdc_with_a_moved_reading(step_s, temp_jump_at=560.0)
        assert moved and 560.0 <= min(moved) < 600.0  # the one-GPU alarm did begin shortly before the SDC
        assert sdc and 600.0 <= min(sdc) <= 600.0 + 2 * step_s
        sdc, _ = _sdc_with_a_moved_reading(step_s, temp_jump_at=1e9)
        assert sdc and 600.0 <= min(sdc) <= 600.0 + 2 * step_s


def _sdc_after_an_xid_restart(xid_at: int, jump_at: int | None) -> list[float]:
    """A 16-GPU training job (a step every 6 s, a checkpoint at 340-360 s) whose GPU 3 reports a fatal XID at
    ``xid_at``; the job is requeued at 400 s (rewinding 10 steps), ramps up from 430 s and trains again from
    491 s; the loss jumps +0.4 from ``jump_at``. Returns the start times of the job's suspected-SDC incidents.
    """
    from twinloop.ops.detect.rules import JOB_LOSS, JOB_PHASE, JOB_PROGRESS, XID
    from twinloop.twin.jobs import Phase

    ents = tuple(f"dc/r01/k01/n{n:02d}/g{g}" for n in (1, 2) for g in range(8))
    n = len(ents)
    pipe = DetectionPipeline(ents, config=PipelineConfig(emit_info=False))
    phases = {340: Phase.CHECKPOINT, 360: Phase.SUSTAINED, 400: Phase.QUEUED, 430: Phase.RAMP_UP, 490: Phase.LAUNCH,
              491: Phase.SUSTAINED}  # fmt: skip
    phase, steps, since, loss = Phase.SUSTAINED, 0, 0, 0.0
    sdc: list[float] = []
    for t in range(700):
        if t in phases:
            steps = max(0, steps - 10) if phases[t] == Phase.QUEUED else steps
            phase, since = phases[t], 0
        steps += phase == Phase.SUSTAINED and since % 6 == 5
        since += 1
        if phase == Phase.SUSTAINED or t == 0:  # outside training the last loss stays reported, as the twin's
            loss = 2.0 + 8.0 / (1.0 + steps / 200.0) ** 0.5 + (0.4 if jump_at is not None and t >= jump_at else 0.0)
        xid = np.zeros(n)
        xid[3] = 79.0 if t >= xid_at else 0.0
        fields = {SM_CLOCK: np.full(n, 1980.0), POWER_LIMIT: np.full(n, 700.0), XID: xid}
        job = {JOB_LOSS: np.array([loss]), JOB_PHASE: np.array([float(phase)]), JOB_PROGRESS: np.array([float(steps)])}
        for u in pipe.step(float(t), fields, np.zeros(n, dtype=np.int64), ["train"], job):
            if u.status == "open" and u.root == "dc/jobs/train" and u.event_class == EventClass.SUSPECTED_SDC:
                sdc.append(u.start_ts)
    return sdc


def test_sdc_that_begins_while_the_job_restarts_after_an_xid_is_caught() -> None:
    # The XID that made the job restart (395 s) was within hw_window_s of the first step after the restart, which
    # already carries the corruption that began during the ramp-up (450 s). Before: that XID vetoed the step, the
    # step became the new loss level, and the SDC was never reported. The restart left that GPU's work behind.
    assert _sdc_after_an_xid_restart(xid_at=395, jump_at=None) == []  # back at the checkpoint's loss: no SDC
    sdc = _sdc_after_an_xid_restart(xid_at=395, jump_at=450)
    assert sdc and 491 <= min(sdc) <= 491 + 2 * 6
    # An XID after the restart, as the jump shows, still explains it (the veto is kept).
    assert _sdc_after_an_xid_restart(xid_at=495, jump_at=495) == []
