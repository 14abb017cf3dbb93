"""The new-user halls (``sweeps/new-user/``): every round's hall exists, loads, and fires its faults inside the run."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from twinloop.twin.engine import Twin
from twinloop.twin.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[2]
HALLS = ROOT / "sweeps" / "new-user"


def _rounds() -> dict[str, tuple[str, ...]]:
    # benchmarks/new_user_halls.py imports a sibling module by name, as it does when run as a script.
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from tests import benchmark_scripts

        return benchmark_scripts.load("new_user_halls").ROUNDS  # type: ignore[no-any-return]
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


def test_every_round_names_halls_that_exist() -> None:
    named = [hall for halls in _rounds().values() for hall in halls]
    assert len(named) == len(set(named))
    assert all((HALLS / f"{hall}.yaml").is_file() for hall in named)


@pytest.mark.parametrize("hall", sorted(p.stem for p in HALLS.glob("*.yaml")))
def test_hall_faults_start_inside_the_run_on_every_seed(hall: str) -> None:
    """A fault drawn past the end would leave a hall testing nothing (seeds 0-4: the ones the script runs)."""
    for seed in range(5):
        spec = load_scenario(HALLS / f"{hall}.yaml", seed=seed)
        labels = Twin(spec, hall).ground_truth
        assert all(0 <= f.start_s < spec.duration_s for f in labels), (hall, seed)
