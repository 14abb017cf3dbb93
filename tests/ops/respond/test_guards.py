from hypothesis import given, settings
from hypothesis import strategies as st

from twinloop.ops.respond.actions import ActionKind, ActionRequest, ActionResult
from twinloop.ops.respond.guards import SAFE_DIRECTION, GuardConfig, GuardRails

SETTINGS = [ActionKind.POWER_CAP, ActionKind.CDU_SETPOINT, ActionKind.CDU_FLOW, ActionKind.FACILITY_WATER]
LIMITS = {
    ActionKind.POWER_CAP: (200.0, 700.0),
    ActionKind.CDU_SETPOINT: (15.0, 45.0),
    ActionKind.CDU_FLOW: (0.3, 1.5),
    ActionKind.FACILITY_WATER: (10.0, 32.0),
}

request_st = st.tuples(
    st.sampled_from(SETTINGS),
    st.sampled_from(["dc/r1/k1/n1", "dc/r1/k1/n2", "dc/r2/cdu"]),
    st.floats(-1e6, 1e6, allow_nan=False),
    st.floats(0, 120),  # time since the previous request
)


@settings(max_examples=200, deadline=None)
@given(st.lists(request_st, min_size=1, max_size=40))
def test_guard_never_lets_an_action_outside_the_rails(seq: list[tuple[ActionKind, str, float, float]]) -> None:
    cfg = GuardConfig(min_interval_s=30, window_s=300, max_actions_per_window=10)
    guard = GuardRails(cfg)
    current: dict[tuple[ActionKind, str], float] = {}
    issued: dict[tuple[ActionKind, str], list[float]] = {}
    all_issued: list[float] = []
    now = 0.0
    for i, (kind, target, value, gap) in enumerate(seq):
        now += gap
        lo, hi = LIMITS[kind]
        cur = current.get((kind, target), (lo + hi) / 2)
        d = guard.check(ActionRequest(kind, target, value), now, (lo, hi), cur)
        if not d.allowed:
            continue
        v = d.request.value
        assert v is not None and lo <= v <= hi
        # Only moves away from the safe direction are step-limited (a power fault may be met at once).
        safe = SAFE_DIRECTION.get(kind, 0)
        assert (v - cur) * -safe <= cfg.max_step[kind] + 1e-9 if safe else abs(v - cur) <= cfg.max_step[kind] + 1e-9
        times = issued.setdefault((kind, target), [])
        assert not times or now - times[-1] >= cfg.min_interval_s
        assert sum(1 for t in all_issued if now - t <= cfg.window_s) < cfg.max_actions_per_window
        times.append(now)
        all_issued.append(now)
        current[(kind, target)] = v
        guard.record(ActionResult(i, d.request, "applied", now))


def test_safe_direction_moves_at_once_unsafe_ones_in_steps() -> None:
    guard = GuardRails()
    limits = LIMITS[ActionKind.POWER_CAP]
    down = guard.check(ActionRequest(ActionKind.POWER_CAP, "n1", 0.0), 0.0, limits, 700.0)
    up = guard.check(ActionRequest(ActionKind.POWER_CAP, "n2", 700.0), 0.0, limits, 200.0)
    assert down.request.value == 200.0  # to the hardware minimum in one action
    assert up.request.value == 200.0 + guard.config.max_step[ActionKind.POWER_CAP]


def test_unknown_limits_are_refused_not_guessed() -> None:
    d = GuardRails().check(ActionRequest(ActionKind.POWER_CAP, "x", 500.0), 0.0, None, 600.0)
    assert not d.allowed and "no hardware limits" in d.refusal


def test_failure_backs_off() -> None:
    guard = GuardRails(GuardConfig(failure_backoff_s=600))
    req = ActionRequest(ActionKind.DRAIN, "dc/r1/k1/n1")
    guard.record(ActionResult(0, req, "failed", 100.0))
    assert not guard.check(req, 500.0, None, None).allowed
    assert guard.check(req, 701.0, None, None).allowed
