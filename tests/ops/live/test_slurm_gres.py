"""`--jobs slurm` on shared nodes: each job on the GPUs Slurm's `gres_detail` names (tests/fixtures/slurm/README.md)."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twinloop.ops.live.jobs import HostGpus, JobMap, SlurmJobs, assign_gpus, parse_gres_gpus, slurm_jobs

FIXTURE = Path(__file__).parents[2] / "fixtures" / "slurm" / "squeue_shared_node.json"
HOSTS = ("gpu-a01", "gpu-a02", "gpu-a03")
GPUS = tuple(f"dc1/row1/r1/{h}/gpu{i}" for h in HOSTS for i in range(8))


def _owner(jobs: JobMap) -> dict[str, str | None]:
    """``host/gpuN`` → job id (None: no job)."""
    return {
        "/".join(g.split("/")[-2:]): (jobs.job_ids[j] if j >= 0 else None)
        for g, j in zip(GPUS, jobs.job_index.tolist(), strict=True)
    }


def test_two_jobs_sharing_an_8_gpu_node_each_get_their_own_gpus() -> None:
    said: list[str] = []
    jobs = slurm_jobs(GPUS, runner=lambda argv: FIXTURE.read_text(), warn=said.append)
    owner = _owner(jobs)
    assert [owner[f"gpu-a01/gpu{i}"] for i in range(8)] == ["7001"] * 4 + ["7002"] * 4
    assert [owner[f"gpu-a02/gpu{i}"] for i in range(8)] == ["7003"] * 8
    # 7003's second node holds IDX 0-1, 7004 IDX 2; the CPU-only job 7005 holds none, GPUs 3-7 are free.
    assert [owner[f"gpu-a03/gpu{i}"] for i in range(8)] == ["7003", "7003", "7004"] + [None] * 5
    assert "7006" not in jobs.job_ids and said == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("gpu:h100:4(IDX:0-3)", {0, 1, 2, 3}),
        ("gpu:4(IDX:0-3)", {0, 1, 2, 3}),
        ("gpu:a100:4(IDX:0,2,4-5)", {0, 2, 4, 5}),
        ("gpu:2(IDX:0-1),nic:1(IDX:0)", {0, 1}),
        ("nic:1(IDX:0),gpu:1(IDX:7)", {7}),
        ("gpu:a100:2(IDX:0,2),gpu:v100:1(IDX:4),mps:10", {0, 2, 4}),  # two GPU types on one node
        ("gpu:h100:0(IDX:N/A)", set()),
        ("gpu:0(IDX:)", set()),
        ("nic:1(IDX:0)", set()),
        ("shard:2(IDX:0)", set()),  # a shard shares a GPU: it holds none of its own
        ("", set()),
        (None, set()),
        ("gpu(CNT:2)", None),  # a count without indices: which GPUs is not said
        ("gpu:h100:2", None),
    ],
)
def test_idx_forms(text: str | None, expected: set[int] | None) -> None:
    assert parse_gres_gpus(text) == (None if expected is None else frozenset(expected))


@pytest.mark.parametrize(
    "text",
    [
        "gpu:4(IDX:3-1)",
        "gpu:1(IDX:²)",
        "gpu:4(IDX:a-b)",
        "gpu:4(IDX:0-3",
        "gpu:4(IDX:0-999999999)",
        "gpu:4(S:0)",
        "gpu:4)(",
    ],
)
def test_bad_idx_is_a_clear_error(text: str) -> None:
    with pytest.raises(ValueError, match=r"IDX|parenthes|NAME"):
        parse_gres_gpus(text)


def _doc(*jobs: dict[str, Any]) -> str:
    return json.dumps({"jobs": [{"job_state": ["RUNNING"], **j} for j in jobs]})


def test_two_jobs_claiming_one_gpu_are_said_once_and_that_gpu_goes_to_no_job() -> None:
    doc = _doc({"job_id": 1, "nodes": "gpu-a01", "gres_detail": ["gpu:4(IDX:0-3)"]},
               {"job_id": 2, "nodes": "gpu-a01", "gres_detail": ["gpu:4(IDX:3-6)"]})  # fmt: skip
    said: list[str] = []
    source = SlurmJobs(runner=lambda argv: doc, warn=said.append)
    for _ in range(3):  # asked every refresh: said once
        owner = _owner(source(GPUS, {}))
    assert [owner[f"gpu-a01/gpu{i}"] for i in range(8)] == ["1", "1", "1", None, "2", "2", "2", None]
    assert said == ["--jobs slurm: jobs 1, 2 all claim GPU 3 of gpu-a01; left to no job"]


def test_without_indices_a_host_goes_whole_to_its_one_job_and_shared_hosts_to_none() -> None:
    # Slurm without GRES (or an older squeue): what --jobs slurm did before, unless two jobs share the host.
    doc = _doc({"job_id": 1, "nodes": "gpu-a[01-02]"}, {"job_id": 2, "nodes": "gpu-a02"},
               {"job_id": 3, "nodes": "gpu-a03", "gres_detail": ["gpu(CNT:2)"]})  # fmt: skip
    said: list[str] = []
    owner = _owner(slurm_jobs(GPUS, runner=lambda argv: doc, warn=said.append))
    assert {owner[f"gpu-a01/gpu{i}"] for i in range(8)} == {"1"}
    assert {owner[f"gpu-a02/gpu{i}"] for i in range(8)} == {None}
    assert {owner[f"gpu-a03/gpu{i}"] for i in range(8)} == {"3"}
    assert said == ["--jobs slurm: jobs 1, 2 share gpu-a02, no GPU index named; its GPUs left to no job"]


def test_unreadable_or_misaligned_gres_detail_is_said_and_not_guessed() -> None:
    doc = _doc({"job_id": 1, "nodes": "gpu-a[01-02]", "gres_detail": ["gpu:8(IDX:0-7)"]},  # 1 entry, 2 nodes
               {"job_id": 2, "nodes": "gpu-a03", "gres_detail": ["gpu:8(IDX:7-0)"]})  # fmt: skip
    said: list[str] = []
    owner = _owner(slurm_jobs(GPUS, runner=lambda argv: doc, warn=said.append))
    assert {owner[g] for g in owner} == {"1", "2"}  # whole hosts, as before: nothing else is known
    assert len(said) == 2 and "1 entries for 2 nodes" in said[0] and "jobs[1].gres_detail[0]" in said[1]


def test_watch_uses_the_gres_aware_slurm_source() -> None:
    from twinloop.cli.watch_cmd import _job_source

    assert isinstance(_job_source("slurm"), SlurmJobs)


# ---------------------------------------------------------------------------------------------------- properties
_INDEX = st.one_of(st.integers(0, 9).map(str), st.sampled_from(["", "N/A", "x", "-1", "3-1", "99999999"]))
_IDX_BODY = st.lists(st.one_of(_INDEX, st.tuples(_INDEX, _INDEX).map("-".join)), max_size=4).map(",".join)
_ENTRY = st.tuples(
    st.sampled_from(["gpu", "gpu:h100", "gpu:a100", "nic", "mps", "shard", "", "gp u"]),
    st.sampled_from(["", ":1", ":4", ":0"]),
    st.one_of(_IDX_BODY.map(lambda b: f"(IDX:{b})"), st.sampled_from(["", "(CNT:2)", "(", ")", "(S:0)"])),
).map("".join)
GRES_LIKE = st.one_of(st.lists(_ENTRY, max_size=3).map(",".join), st.text(max_size=40))


@given(GRES_LIKE)
def test_any_gres_detail_string_gives_indices_or_a_clear_error(text: str) -> None:
    with contextlib.suppress(ValueError):
        got = parse_gres_gpus(text)
        assert got is None or all(isinstance(g, int) and g >= 0 for g in got)


@settings(max_examples=200)
@given(
    st.dictionaries(
        st.sampled_from(["j1", "j2", "j3", "j4"]),
        st.dictionaries(st.sampled_from(HOSTS), st.lists(GRES_LIKE, min_size=1, max_size=1).map(lambda e: e[0])),
        max_size=4,
    )
)
def test_expanding_then_assigning_never_gives_a_gpu_to_two_jobs(detail: dict[str, dict[str, str]]) -> None:
    jobs = [{"job_id": j, "nodes": ",".join(hosts), "gres_detail": list(hosts.values())}
            for j, hosts in detail.items() if hosts]  # fmt: skip
    held: dict[str, dict[str, HostGpus]] = {}
    for job in jobs:
        entries: dict[str, HostGpus] = {}
        for host, text in zip(job["nodes"].split(","), job["gres_detail"], strict=True):
            try:
                entries[host] = parse_gres_gpus(text)
            except ValueError:
                entries[host] = None
        held[str(job["job_id"])] = entries
    names = assign_gpus(held, lambda _m: None)
    taken: dict[str, str] = {}
    for job, listed in names.items():
        for name in listed:
            host, _, gpu = name.partition("/")
            cover = [f"{host}/gpu{i}" for i in range(8)] if not gpu else [name]
            for g in cover:
                assert g not in taken, f"{g} named for {taken.get(g)} and {job}"
                taken[g] = job
                claim = held[job][host]
                assert claim is None or int(g.rsplit("gpu", 1)[1]) in claim  # only what the job claims
    mapped = SlurmJobs(runner=lambda argv: json.dumps({"jobs": jobs}))(GPUS)  # never raises on any gres text
    owner = _owner(mapped)
    assert {g: j for g, j in owner.items() if j is not None} == {g: j for g, j in taken.items() if g in owner}
    assert np.all(mapped.job_index < len(mapped.job_ids))
