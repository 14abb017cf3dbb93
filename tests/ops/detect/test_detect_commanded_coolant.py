"""The loop's own coolant moves are no unexplained changes (issue 14, new-user halls round 3, `h200-pump`).

While the cooling optimizer relaxed a row of idle GPUs (setpoint up 1 C a minute), each GPU's die and memory
temperature followed the coolant and its EWMA z-score detector alarmed every few minutes: 7-35 `unclassified`
incidents a run loop on, none loop off, and each unexplained alarm also counted as a hardware-side change that
explains a job's slowdown. A commanded setpoint is known to the pipeline (`commanded_setpoint`), so what follows it
is benign, as a temperature following a power change is.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from twinloop.lab.detector_data import fleet_entities
from twinloop.ops.detect.pipeline import DetectionPipeline, PipelineConfig
from twinloop.ops.detect.rules import CDU_SUPPLY, POWER, POWER_LIMIT, SM_CLOCK, TEMP
from twinloop.ops.events import EventClass, Incident
from twinloop.telemetry.fields import DCGM_FI_DEV_MEMORY_TEMP as MEMORY_TEMP

ENTITIES = fleet_entities(n_rows=2, racks_per_row=2)  # 2 rows x 2 racks x 8 nodes x 8 GPUs
MOVE_S = 600  # row 1's setpoint moves from here


def _setpoint(t: int) -> float:
    """Row 1's setpoint at ``t``: relaxed 1 C a minute, 30 -> 38 C (the optimizer)."""
    return 30.0 if t < MOVE_S else 30.0 + float(min((t - MOVE_S) // 60 + 1, 8))


def _unclassified_on_row1(tell: Literal["none", "log", "loop"], row: str = "dc/r01") -> bool:
    """Idle GPUs at 40 C over a 30 C coolant, read in whole degrees, their dies following row 1's coolant with a time
    constant of 60 s (the CDU's ramp and the die's own). ``tell``: nothing; ``log``, a control system's write log as
    the twin's (every CDU's configured setpoint at the start, then each change, to ``row``); ``loop``, the loop's own
    moves only, each with its time, as the runner tells them where the cluster reports no write log (live).
    Whether an unclassified incident opened on row 1.
    """
    n = len(ENTITIES)
    pipe = DetectionPipeline(ENTITIES, config=PipelineConfig(emit_info=True))
    rng = np.random.default_rng(5)
    row1 = np.array([e.startswith("dc/r01/") for e in ENTITIES])
    coolant = np.full(n, 30.0)
    updates: list[Incident] = []
    for t in range(1500):
        setpoint, last = _setpoint(t), _setpoint(t - 1)
        if tell == "log" and (t == 0 or setpoint != last):
            pipe.commanded_setpoint(row, setpoint if row == "dc/r01" else 30.0)
        if tell == "loop" and t > 0 and setpoint != last:
            pipe.commanded_setpoint(row, setpoint, at_s=float(t))
        coolant += np.where(row1, setpoint - coolant, 0.0) / 60.0
        fields = {
            TEMP: np.round(coolant + 10.0),
            MEMORY_TEMP: np.round(coolant + 14.0),
            POWER: 70.0 + rng.standard_normal(n),
            POWER_LIMIT: np.full(n, 700.0),
            SM_CLOCK: np.full(n, 345.0),
            CDU_SUPPLY: np.round(coolant, 1),
        }
        updates += pipe.step(float(t), fields)
    return any(u.event_class == EventClass.UNCLASSIFIED and u.root.startswith("dc/r01") for u in updates)


def test_temperatures_following_a_commanded_coolant_step_are_no_unclassified_incidents() -> None:
    assert _unclassified_on_row1("none")  # the detectors do see the temperatures move
    assert not _unclassified_on_row1("log")


def test_a_setpoint_told_for_another_cdu_explains_nothing() -> None:
    assert _unclassified_on_row1("log", row="dc/r00")


def test_the_loops_own_moves_told_with_their_time_explain_without_a_configured_setpoint() -> None:
    assert not _unclassified_on_row1("loop")
