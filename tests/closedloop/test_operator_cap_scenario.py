"""Issue 14 on the twin: an operator's power cap on a training node is a power throttle, not a straggler.

Before the fix the cap went unreported (the power-throttle rule excused every compute sample of a training GPU as a
"heavier phase") and, when the operator lifted it, the node's lagging smoothed clock made it a straggler: the loop
checkpointed the job, drained the node and requeued the job off a node that had done nothing wrong.
"""

from __future__ import annotations

import pytest

from twinloop.closedloop.passes import run_pass
from twinloop.lab.operator_cap import NODE, operator_cap_scenario
from twinloop.ops.events import EventClass


@pytest.mark.slow
def test_an_operator_cap_is_a_power_throttle_and_the_loop_leaves_the_node_alone() -> None:
    r = run_pass(operator_cap_scenario(), True, optimize_cooling=False)
    throttles = [i for i in r.incidents if i.event_class == EventClass.POWER_THROTTLE]
    assert throttles and all(i.root.startswith(NODE) for i in throttles)
    assert 200.0 <= min(i.start_ts for i in throttles) <= 215.0
    assert not [i for i in r.incidents if i.event_class == EventClass.STRAGGLER]
    moves = [a for a in r.actions if a.request.kind in ("drain", "requeue", "checkpoint")]
    assert moves == [], moves
