"""Conformance: every registered check family, on every tree, returns valid findings and never raises."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from twinloop.probe import CHECKS, STATUSES, Finding, run_probe
from twinloop.probe.context import build_context
from twinloop.probe.root import SysRoot

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "probe"
ROOTS = ["dgx-h100", "mi300x", "laptop", "<empty>"]


@pytest.mark.parametrize("name", sorted(CHECKS))
@pytest.mark.parametrize("machine", ROOTS)
def test_check_conformance(name: str, machine: str, tmp_path: Path) -> None:
    root = tmp_path if machine == "<empty>" else FIXTURES / machine
    ctx = build_context(SysRoot(root))
    first = CHECKS[name](ctx)
    assert first, "a check family always says something"
    assert all(isinstance(f, Finding) and f.status in STATUSES and f.check for f in first)
    assert CHECKS[name](ctx) == first  # reading twice gives the same answer
    assert pickle.loads(pickle.dumps(first)) == first


def test_report_pickles_and_is_frozen() -> None:
    report = run_probe(FIXTURES / "laptop")
    assert pickle.loads(pickle.dumps(report)) == report
    with pytest.raises(Exception, match="frozen"):
        report.findings[0].status = "absent"  # type: ignore[misc]
    with pytest.raises(KeyError):
        report.get("no.such.check")
