"""The Slurm adapter's hold_admission / release_admission: partitions set ``State=DOWN`` (jobs queue, none is allocated
nodes, running jobs go on) and back to ``State=UP``, only the ones the loop itself held.

The fake ``scontrol`` answers ``show partition`` in the two JSON layouts Slurm has had: ``partitions[].state`` a
string (openapi v0.0.38, Slurm 22.05: SchedMD/slurm ``src/plugins/openapi/v0.0.38/partitions.c``) and
``partitions[].partition.state`` a list such as ``["UP"]`` (data_parser v0.0.39+, Slurm 23.02+). Partition names
and states are synthetic.
"""

import json
import subprocess
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twinloop.ops.respond.actions import ActionKind, ActionRequest
from twinloop.ops.respond.adapters.base import AdapterReply
from twinloop.ops.respond.adapters.commands import SlurmAdapter, partitions_admitting

HOLD = ActionRequest(ActionKind.HOLD_ADMISSION, "dc")
RELEASE = ActionRequest(ActionKind.RELEASE_ADMISSION, "dc")
LISTING = ["scontrol", "--all", "--json", "show", "partition"]


def _show(partitions: dict[str, str], layout: str) -> str:
    if layout == "v0.0.38":
        entries = [{"name": n, "state": s, "total_nodes": 4} for n, s in partitions.items()]
    else:
        entries = [{"name": n, "partition": {"state": [s]}, "nodes": {"total": 4}} for n, s in partitions.items()]
    return json.dumps({"partitions": entries, "errors": [], "warnings": []})


def _scontrol(calls: list[list[str]], partitions: dict[str, str], layout: str = "v0.0.40", fail: str = ""):  # type: ignore[no-untyped-def]
    """An ``scontrol`` that shows ``partitions`` (name -> State) and updates them; ``fail``'s update is refused."""

    def run(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        calls.append(list(argv))
        if list(argv) == LISTING:
            return subprocess.CompletedProcess(list(argv), 0, _show(partitions, layout), "")
        assert argv[:2] == ["scontrol", "update"], argv
        name = argv[2].removeprefix("PartitionName=")
        if name == fail:
            return subprocess.CompletedProcess(list(argv), 1, "", "slurm_update error: Access/permission denied")
        partitions[name] = argv[3].removeprefix("State=")
        return subprocess.CompletedProcess(list(argv), 0, "", "")

    return run


@pytest.mark.parametrize("layout", ["v0.0.38", "v0.0.40"])
def test_slurm_holds_admission_on_the_up_partitions_and_releases_only_those(layout: str) -> None:
    # Before: both kinds were refused on Slurm, so a facility power excursion's rule held no new work back there.
    calls: list[list[str]] = []
    parts = {"gpu": "UP", "debug": "DOWN", "maint": "DRAIN", "old": "INACTIVE", "cpu": "UP"}
    slurm = SlurmAdapter(dry_run=False, runner=_scontrol(calls, parts, layout))
    reply = slurm.apply(HOLD)
    assert reply.status == "applied" and reply.detail == "partitions held: gpu, cpu"
    assert calls == [
        LISTING,
        ["scontrol", "update", "PartitionName=gpu", "State=DOWN"],
        ["scontrol", "update", "PartitionName=cpu", "State=DOWN"],
    ]
    assert parts == {"gpu": "DOWN", "debug": "DOWN", "maint": "DRAIN", "old": "INACTIVE", "cpu": "DOWN"}
    assert slurm.held_partitions == ["gpu", "cpu"]
    calls.clear()
    reply = slurm.apply(RELEASE)
    assert reply.status == "applied" and reply.detail == "partitions released: gpu, cpu"
    # The operator's DOWN, DRAIN and INACTIVE stay theirs; the release reads nothing, it gives back what it held.
    assert parts == {"gpu": "UP", "debug": "DOWN", "maint": "DRAIN", "old": "INACTIVE", "cpu": "UP"}
    assert calls == [
        ["scontrol", "update", "PartitionName=gpu", "State=UP"],
        ["scontrol", "update", "PartitionName=cpu", "State=UP"],
    ]
    again = slurm.apply(RELEASE)
    assert again.status == "refused" and "held by the loop" in again.detail


def test_slurm_admission_hold_refuses_when_no_partition_is_up() -> None:
    calls: list[list[str]] = []
    slurm = SlurmAdapter(dry_run=False, runner=_scontrol(calls, {"maint": "DRAIN", "debug": "DOWN"}))
    reply = slurm.apply(HOLD)
    assert reply.status == "refused" and "nothing to hold" in reply.detail
    assert calls == [LISTING]  # nothing updated
    assert slurm.apply(RELEASE).status == "refused"


def test_slurm_admission_partial_failure_names_what_did_not_take_and_releases_exactly_what_it_held() -> None:
    calls: list[list[str]] = []
    parts = {"a": "UP", "b": "UP", "c": "UP"}
    slurm = SlurmAdapter(dry_run=False, runner=_scontrol(calls, parts, fail="b"))
    reply = slurm.apply(HOLD)
    assert reply.status == "failed"
    assert reply.detail.startswith("held 2 of 3; scontrol update PartitionName=b State=DOWN: exit 1:")
    assert "permission denied" in reply.detail
    assert len(calls) == 4  # c was still held after b failed
    assert slurm.held_partitions == ["a", "c"]
    calls.clear()
    assert slurm.apply(RELEASE).status == "applied"
    assert parts == {"a": "UP", "b": "UP", "c": "UP"}
    assert [c[2] for c in calls] == ["PartitionName=a", "PartitionName=c"]  # never b: the loop did not hold it


def test_slurm_admission_release_that_partly_fails_keeps_the_rest_held_for_the_next_release() -> None:
    calls: list[list[str]] = []
    parts = {"a": "UP", "b": "UP"}
    slurm = SlurmAdapter(dry_run=False, runner=_scontrol(calls, parts))
    assert slurm.apply(HOLD).status == "applied"
    slurm._runner = _scontrol(calls, parts, fail="a")
    reply = slurm.apply(RELEASE)
    assert reply.status == "failed" and reply.detail.startswith("released 1 of 2; scontrol update PartitionName=a")
    assert parts == {"a": "DOWN", "b": "UP"} and slurm.held_partitions == ["a"]
    slurm._runner = _scontrol(calls, parts)
    calls.clear()
    assert slurm.apply(RELEASE).status == "applied"
    assert calls == [["scontrol", "update", "PartitionName=a", "State=UP"]] and parts == {"a": "UP", "b": "UP"}


def test_slurm_admission_dry_run_shows_the_command_lines_and_runs_nothing() -> None:
    calls: list[list[str]] = []
    slurm = SlurmAdapter(runner=_scontrol(calls, {"gpu": "UP"}))
    shown = slurm.apply(HOLD)
    assert shown.status == "dry_run"
    assert shown.detail == "scontrol update 'PartitionName=<each partition admitting work>' State=DOWN"
    shown = slurm.apply(RELEASE)
    assert shown.status == "dry_run"
    assert shown.detail == "scontrol update 'PartitionName=<each partition the loop held>' State=UP"
    assert calls == [] and slurm.held_partitions == []


@pytest.mark.parametrize(
    ("stdout", "why"),
    [
        ("PartitionName=gpu State=UP", "not JSON"),
        ('{"errors": []}', "no `partitions` list"),
        ('{"partitions": {"gpu": "UP"}}', "no `partitions` list"),
        ('{"partitions": [{"partition": {"state": ["UP"]}}]}', "partitions[0].name"),
        ('{"partitions": [{"name": "gpu", "total_nodes": 4}]}', "partitions[0] (gpu): no state"),
        ('{"partitions": [{"name": "gpu", "partition": {"state": []}}]}', "partitions[0] (gpu): no state"),
        ('{"partitions": [{"name": "gpu", "partition": {"state": [3]}}]}', "partitions[0] (gpu): no state"),
    ],
)
def test_slurm_admission_hold_fails_clearly_on_output_it_cannot_read(stdout: str, why: str) -> None:
    calls: list[list[str]] = []

    def run(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        calls.append(list(argv))
        return subprocess.CompletedProcess(list(argv), 0, stdout, "")

    slurm = SlurmAdapter(dry_run=False, runner=run)
    reply = slurm.apply(HOLD)
    assert reply.status == "failed"
    assert reply.detail.startswith("scontrol --all --json show partition: ") and why in reply.detail
    assert calls == [LISTING]  # nothing updated on a listing it could not read


def test_slurm_admission_hold_says_why_when_scontrol_cannot_list_partitions() -> None:
    def old_scontrol(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(list(argv), 1, "", "scontrol: unrecognized option '--json'")

    reply = SlurmAdapter(dry_run=False, runner=old_scontrol).apply(HOLD)
    assert reply.status == "failed" and "unrecognized option" in reply.detail and "22.05" in reply.detail

    def missing(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        raise FileNotFoundError(2, "No such file or directory", "scontrol")

    reply = SlurmAdapter(dry_run=False, runner=missing).apply(HOLD)
    assert reply.status == "failed" and "No such file" in reply.detail


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)
_STATES = st.sampled_from(["UP", "DOWN", "DRAIN", "INACTIVE", "UNKNOWN"])


@settings(max_examples=300, deadline=None)
@given(
    doc=_JSON
    | st.fixed_dictionaries({"partitions": st.lists(_JSON, max_size=4)})
    | st.fixed_dictionaries(
        {"partitions": st.lists(st.fixed_dictionaries({"name": _JSON, "partition": _JSON, "state": _JSON}))}
    ),
    garbage=st.text(max_size=40),
)
def test_partition_listing_parser_never_raises_on_garbage(doc: object, garbage: str) -> None:
    for text in (json.dumps(doc), garbage):
        found = partitions_admitting(text)
        assert isinstance(found, str) or all(isinstance(n, str) and n for n in found)


@settings(max_examples=200, deadline=None)
@given(
    parts=st.dictionaries(st.from_regex(r"[a-z][a-z0-9_-]{0,9}", fullmatch=True), _STATES, max_size=6),
    layout=st.sampled_from(["v0.0.38", "v0.0.40"]),
)
def test_partition_listing_parser_finds_exactly_the_up_partitions_in_either_layout(
    parts: dict[str, str], layout: str
) -> None:
    assert partitions_admitting(_show(parts, layout)) == [n for n, s in parts.items() if s == "UP"]


def test_slurm_admission_held_twice_after_a_restart_is_released_once() -> None:
    # A slurmctld restart (without -R) puts the held partition back UP; the next hold holds it again, once.
    calls: list[list[str]] = []
    parts = {"gpu": "UP"}
    slurm = SlurmAdapter(dry_run=False, runner=_scontrol(calls, parts))
    assert slurm.apply(HOLD).status == "applied"
    parts["gpu"] = "UP"
    assert slurm.apply(HOLD).status == "applied" and slurm.held_partitions == ["gpu"]
    calls.clear()
    assert slurm.apply(RELEASE) == AdapterReply("applied", "partitions released: gpu")
    assert calls == [["scontrol", "update", "PartitionName=gpu", "State=UP"]]
