"""``twinloop watch nvml`` on real GPUs, replayed from the watcher's own store.

H200 (``tests/fixtures/h200``, ``tools/gpu/check.sh``): the live watcher ran while dense GEMMs, attention and a
heat soak ran, and twinloop's NVML adapter set a 450 W limit for 30 s inside the soak. H100
(``tests/fixtures/h100_nvml``, ``tools/gpu/check_nvml.sh``): a training-like step (GEMMs, then HBM copies) ran
while an operator set a 400 W limit with ``nvidia-smi -pl`` for 60 s. H200 again (``tests/fixtures/h200_preset_cap``,
``tools/gpu/check_preset_cap.sh``): the same step with the 400 W limit already set when the watcher started. What
must hold: the cap opens one
power-throttle incident on the GPU within the rule's persistence, its detections last until the limit is
restored, nothing else opens above ``info``, and the replay gives the incidents the live watcher printed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from twinloop.ops.events import Incident, Severity
from twinloop.ops.live.watcher import observe

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
FIX = FIXTURES / "h200"
H100 = FIXTURES / "h100_nvml"
PRESET = FIXTURES / "h200_preset_cap"
GPU = "site0/row0/rack0/vm/gpu0"


def replay(recording: Path = FIX / "watch_nvml.parquet") -> list[Incident]:
    return observe(f"replay:{recording}")


def cap_window(events_file: Path) -> tuple[float, float]:
    """When the cap was set and lifted, by twinloop's adapter (``status``) or an operator (``how``)."""
    events = {e["what"]: e for e in json.loads(events_file.read_text())["events"]}
    for e in (events["cap"], events["restore"]):
        assert e.get("status", "applied") == "applied" and e.get("how", "nvidia-smi -pl") == "nvidia-smi -pl"
    return events["cap"]["t"], events["restore"]["t"]


def one_throttle_over_the_cap(incidents: list[Incident], events_file: Path, after_s: float) -> Incident:
    """The one power-throttle incident, on the GPU, opened within the rule's 5 s persistence (at a 1 s cadence)
    of the cap and with evidence until the limit went back (within ``after_s``)."""
    cap_ts, restore_ts = cap_window(events_file)
    throttles = [i for i in incidents if str(i.event_class) == "power_throttle"]
    assert len(throttles) == 1, throttles
    (inc,) = throttles
    assert inc.root == GPU
    assert cap_ts <= inc.start_ts <= cap_ts + 8.0
    assert restore_ts - 5.0 <= inc.end_ts <= restore_ts + after_s
    return inc


def test_the_power_cap_opens_one_throttle_incident_for_its_duration() -> None:
    one_throttle_over_the_cap(replay(), FIX / "actuator.json", after_s=5.0)


def test_the_rest_of_the_run_opens_nothing_above_info() -> None:
    others = [i for i in replay() if str(i.event_class) != "power_throttle"]
    assert all(i.severity <= Severity.INFO for i in others), others


def test_the_replay_gives_what_the_live_watcher_printed() -> None:
    live = json.loads((FIX / "watch.json").read_text())
    assert live["source"] == "nvml" and live["samples"] == 400 and live["data_quality"]["gaps"] == 0
    printed = [(i["class"], i["opened_ts"], i["root"]) for i in live["incidents"]]
    assert [(str(i.event_class), i.start_ts, i.root) for i in replay()] == printed


def test_an_operators_cap_on_a_training_like_step_is_one_throttle_for_its_duration() -> None:
    # Fails before the watcher stored its open incidents as they stand at the end: the incident read as 5 s long.
    incidents = replay(H100 / "watch_cap.parquet")
    inc = one_throttle_over_the_cap(incidents, H100 / "operator_cap.json", after_s=1.0)
    cap_ts = cap_window(H100 / "operator_cap.json")[0]
    others = [i for i in incidents if i is not inc]
    assert all(i.severity <= Severity.INFO for i in others), others
    assert all(i.start_ts < cap_ts for i in others)  # the lifted cap opens nothing (no straggler, no phase change)


def test_a_cap_set_before_the_watcher_started_is_a_throttle_from_its_first_samples() -> None:
    # The pipeline's rule takes a limit it has always seen for the GPU's usual one; the live rule compares the
    # enforced limit with the GPU's default (its TDP).
    printed = json.loads((PRESET / "watch_preset.json").read_text())
    incidents = replay(PRESET / "watch_preset.parquet")
    assert [(str(i.event_class), i.root) for i in incidents] == [("power_throttle", GPU)]
    (inc,) = incidents
    assert printed["first_ts"] <= inc.start_ts <= printed["first_ts"] + 5.0
    assert inc.end_ts >= printed["last_ts"]  # the store holds one sample more than the live run stepped through
    # Live, with the watcher storing open incidents as they stand at the end: evidence to its last sample.
    (live,) = printed["incidents"]
    assert live["class"] == "power_throttle" and live["opened_ts"] == pytest.approx(inc.start_ts, abs=1e-3)
    assert live["last_ts"] == printed["last_ts"]
