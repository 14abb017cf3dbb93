"""The loop on real H100 readings (``tests/fixtures/h100``, copied from ``shared/data/h100`` with its README).

What must hold (issue 12): the power-limit steps of the ``cap_*`` phases open a power-throttle incident on the GPU;
the burst/stall cycles are a workload phase change, not a fault; idle, context load and cool-down open nothing of
warning severity or above. Each is checked on the excerpts, and on the full recordings when ``shared/data`` is here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from twinloop.lab.phases import by_phase, load_phases, phase_at
from twinloop.ops.live.watcher import observe

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "h100"
ROOT = Path(__file__).resolve().parents[3]
#: ``../shared/data/h100`` of the main checkout (a worktree sits one level deeper).
SHARED = next(
    (p for p in (ROOT.parent / "shared/data/h100", ROOT.parent.parent / "shared/data/h100") if p.is_dir()),
    ROOT.parent / "shared/data/h100",
)
GPU = "site0/row0/rack0/vm/gpu0"
QUIET = ("idle", "context_load", "cooldown", "before", "end")


def watch(spec: str) -> list[dict[str, Any]]:
    return [
        {"opened_ts": i.start_ts, "class": str(i.event_class), "severity": i.severity.name.lower(), "root": i.root,
         "members": i.members}
        for i in observe(spec)
    ]  # fmt: skip


def check(incidents: list[dict[str, Any]], expect_caps: bool) -> None:
    phases = load_phases(FIX / "phases.csv")
    found = by_phase(incidents, phases)
    throttles = [i for i in incidents if i["class"] == "power_throttle"]
    if expect_caps:
        assert throttles, f"no power-throttle incident; found {found}"
        assert all(i["root"] == GPU for i in throttles)
        assert {phase_at(phases, i["opened_ts"]) for i in throttles} <= {"cap_600", "cap_500", "cap_400", "cap_300",
                                                                          "cap_200"}  # fmt: skip
        assert phase_at(phases, min(i["opened_ts"] for i in throttles)) == "cap_600"
    faults = [i for i in incidents if i["class"] not in ("benign_phase_change", "unclassified")]
    for i in faults:
        ph = phase_at(phases, i["opened_ts"])
        assert not ph.startswith(("burst", "stall")), f"a fault in the burst/stall cycles: {i}"
    for ph, incs in found.items():
        if ph in QUIET:
            assert all(i["severity"] == "info" for i in incs), f"{ph}: {incs}"


def test_caps_open_a_power_throttle_on_the_gpu_1hz_excerpt() -> None:
    check(watch(f"replay:{FIX / 'nvml_1hz_idle_to_caps.csv'}"), expect_caps=True)


def test_bursts_and_cooldown_open_no_fault_1hz_excerpt() -> None:
    check(watch(f"replay:{FIX / 'nvml_1hz_bursts_cooldown.csv'}"), expect_caps=False)


def test_cap_600_step_at_20hz_excerpt() -> None:
    incidents = watch(f"replay:{FIX / 'samples_20hz_cap600.csv'}")
    check(incidents, expect_caps=True)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["nvml_ingest_1hz.duckdb", "samples_20hz.csv"])
def test_full_recordings(name: str) -> None:
    path = SHARED / name
    if not path.is_file():
        pytest.skip(f"{path} not present (the shared data folder is not next to the repository)")
    check(watch(f"replay:{path}"), expect_caps=True)
