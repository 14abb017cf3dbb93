"""ResponderController: the LoopController over a responder in approve mode."""

from __future__ import annotations

import pytest

from twinloop.web.controller import LoopController, ModeSwitch, UnknownActionError

from .conftest import make_loop


def test_is_a_loop_controller_with_mode_switch() -> None:
    ctl = make_loop().controller
    assert isinstance(ctl, LoopController) and isinstance(ctl, ModeSwitch)
    # The cooling rule's third action (facility water) is refused: the test site's adapter does not know that setting.
    assert ctl.status() == {"run": "live", "mode": "approve", "policy": "default", "pending": 2, "actions_logged": 3}


def test_pending_actions_carry_the_responder_log() -> None:
    loop = make_loop()
    pending = loop.controller.pending_actions()
    assert [p["action_id"] for p in pending] == sorted(loop.responder.pending)
    for p in pending:
        request = loop.responder.pending[p["action_id"]]
        assert p["kind"] == str(request.kind) and p["target"] == request.target and p["value"] == request.value
        assert p["status"] == "pending" and p["incident_id"] == 7 and "cooling-degradation" in p["detail"]


def test_approve_applies_and_reject_records() -> None:
    loop = make_loop()
    first, second = sorted(loop.responder.pending)
    done = loop.controller.approve(first)
    assert done["status"] == "applied" and done["action_id"] == first
    assert loop.adapter.applied and loop.adapter.applied[0].kind == loop.responder.log[first].request.kind
    assert loop.controller.reject(second)["status"] == "rejected"
    assert loop.responder.pending == {} and loop.responder.log[-1].status == "rejected"
    assert loop.responder.log[-1].ts == 1001.0  # the controller's clock, not the wall clock
    with pytest.raises(UnknownActionError):
        loop.controller.approve(first)
    with pytest.raises(UnknownActionError):
        loop.controller.reject(12345)


def test_set_mode_validates() -> None:
    loop = make_loop()
    assert loop.controller.set_mode("auto")["mode"] == "auto" and loop.responder.mode == "auto"
    with pytest.raises(ValueError, match="mode must be one of"):
        loop.controller.set_mode("chaos")
