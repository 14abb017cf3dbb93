"""Each rank's own step time as live per-GPU telemetry (issue 14: a straggler must be named down to its GPU from the
job's per-rank step times, in the twin and in `twinloop watch`, including one slow from the job's first step).
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from twinloop.cli.main import app
from twinloop.errors import InputError
from twinloop.ops.live.rank_progress import RankProgress
from twinloop.ops.respond.adapters.heartbeat_lines import RANK_STEP_FIELDS, rank_step_values
from twinloop.ops.respond.adapters.heartbeats import record, record_rank
from twinloop.telemetry.frame import Frame
from twinloop.telemetry.store.duckdb_store import DuckDBStore

T0 = 1_795_430_000.0
# Two nodes of 4 GPUs, one job over all 8.
GPUS = tuple(f"dc/row0/rack0/node0{n}/gpu{g}" for n in (1, 2) for g in range(4))
# A third node of 4 GPUs, for a job over two GPU models with more of one than the other.
GPUS_3 = (*GPUS, *(f"dc/row0/rack0/node03/gpu{g}" for g in range(4)))
UUIDS = tuple(f"GPU-{k:08x}-aaaa-bbbb-cccc-{k:012x}" for k in range(len(GPUS_3)))
LABELS = {g: {"UUID": UUIDS[k]} for k, g in enumerate(GPUS)}
ALL_IN_JOB = np.zeros(len(GPUS), dtype=np.int64)


def _rank(directory: Path, ts: float, step: int, step_time_s: float, gpu: int, job: str = "7", **where: Any) -> None:
    ident = where or {"gpu_uuid": UUIDS[gpu]}
    record_rank(directory, job, {"step": step, "step_time_s": step_time_s}, ts=ts, **ident)


def _times(progress: RankProgress, ts: float, job_index: np.ndarray = ALL_IN_JOB) -> np.ndarray:
    out = progress.step_times(GPUS, LABELS, ("dc/jobs/7",), job_index, ts)
    assert out is not None
    return out


def test_each_gpu_gets_its_ranks_latest_step_time_at_or_before_the_sample(tmp_path: Path) -> None:
    for step in range(1, 4):
        for g in range(len(GPUS)):
            _rank(tmp_path, T0 + step, step, 1.0 + 0.01 * step + (0.25 if g == 5 else 0.0), g)
    progress = RankProgress(tmp_path)
    assert progress.step_times(GPUS, LABELS, ("7",), ALL_IN_JOB, T0 + 0.5) is not None  # lines read, none due
    assert np.isnan(_times(progress, T0 + 0.5)).all()
    got = _times(progress, T0 + 2.5)
    assert got[0] == pytest.approx(1.02) and got[5] == pytest.approx(1.27)
    assert _times(progress, T0 + 9)[3] == pytest.approx(1.03)
    # A GPU that is not the job's now (the job map moved it) gets no value of the job's.
    assert np.isnan(_times(progress, T0 + 9, np.array([0, 0, 0, 0, 0, -1, 0, 0]))[5])


def test_nothing_is_added_until_a_rank_reports(tmp_path: Path) -> None:
    progress = RankProgress(tmp_path)
    assert progress.step_times(GPUS, LABELS, ("7",), ALL_IN_JOB, T0) is None


def test_host_and_gpu_index_name_the_gpu_where_there_are_no_uuid_labels(tmp_path: Path) -> None:
    _rank(tmp_path, T0, 1, 1.5, 0, host="node02", gpu_index=1)
    _rank(tmp_path, T0, 1, 1.7, 0, host="node01.cluster.example", gpu_index=3)  # a full name: its short name matches
    progress = RankProgress(tmp_path)
    got = progress.step_times(GPUS, {}, ("7",), ALL_IN_JOB, T0 + 1)
    assert got is not None and got[5] == 1.5 and got[3] == 1.7
    assert int(np.isfinite(got).sum()) == 2


def test_the_files_are_read_as_they_grow(tmp_path: Path) -> None:
    ranks = tmp_path / "7.ranks"
    ranks.mkdir()
    path = ranks / "r0.jsonl"
    line = json.dumps({"ts": T0, "event": "rank_step", "step": 1, "step_time_s": 1.0, "gpu_uuid": UUIDS[2]}) + "\n"
    path.write_text(line + line[:25])  # the second line is still being written
    progress = RankProgress(tmp_path)
    assert _times(progress, T0 + 1)[2] == 1.0
    with path.open("a") as f:
        f.write(line[25:].replace('"step_time_s": 1.0', '"step_time_s": 2.0').replace(str(T0), str(T0 + 1)))
    assert _times(progress, T0 + 2)[2] == 2.0
    (ranks / "r1.jsonl").write_text(line.replace(UUIDS[2], UUIDS[4]))  # a rank that starts later
    path.write_text(line.replace('"step_time_s": 1.0', '"step_time_s": 3.0').replace(str(T0), str(T0 + 3)))  # rotated
    got = _times(progress, T0 + 4)
    assert got[2] == 3.0 and got[4] == 1.0


def test_bad_lines_and_unknown_gpus_are_skipped_and_each_file_named_once(tmp_path: Path) -> None:
    ranks = tmp_path / "7.ranks"
    ranks.mkdir()
    good = {"ts": T0, "event": "rank_step", "step": 1, "step_time_s": 1.0, "gpu_uuid": UUIDS[0]}
    lines = [good,
             {**good, "step_time_s": 0.0},  # not > 0
             {k: v for k, v in good.items() if k != "gpu_uuid"},  # no GPU
             {**good, "event": "step"},  # a job step line has no place here
             {**good, "gpu_uuid": "GPU-ffffffff-0000-0000-0000-000000000000"}]  # fmt: skip
    (ranks / "0.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines) + "{oops\n")
    (ranks / "1.jsonl").write_text(json.dumps({**good, "gpu_uuid": "GPU-dead", "ts": T0 + 1}) + "\n")
    said: list[str] = []
    progress = RankProgress(tmp_path, said.append)
    got = _times(progress, T0 + 5)
    assert got[0] == 1.0 and int(np.isfinite(got).sum()) == 1
    assert progress.bad_lines == 4 and progress.unknown_gpu_lines == 2
    first = ranks / "0.jsonl"
    assert said == [
        f"rank heartbeats: {first}: line 2: field step_time_s: 0.0 (allowed: a finite number > 0) (skipped)",
        f"rank heartbeats: {first}: line 5: field gpu_uuid: 'GPU-ffffffff-0000-0000-0000-000000000000' (allowed: the"
        " UUID label of one of the topology's 8 GPUs) (skipped)",
        f"rank heartbeats: {ranks / '1.jsonl'}: line 1: field gpu_uuid: 'GPU-dead' (allowed: the UUID label of one of"
        " the topology's 8 GPUs) (skipped)",
    ]
    _times(progress, T0 + 6)
    assert len(said) == 3  # said once


@pytest.mark.parametrize(
    ("values", "where", "field"),
    [
        ({"step": 1}, {"gpu_uuid": UUIDS[0]}, "step_time_s"),
        ({"step_time_s": 1.0}, {"gpu_uuid": UUIDS[0]}, "step"),
        ({"step": 1, "step_time_s": 1.0}, {}, "gpu_uuid"),
        ({"step": 1, "step_time_s": 1.0}, {"host": "node01"}, "gpu_index"),
        ({"step": 1, "step_time_s": 1.0}, {"gpu_uuid": "GPU-../x"}, "gpu_uuid"),
        ({"step": 1, "step_time_s": 1.0}, {"host": "a/b", "gpu_index": 0}, "host"),
        ({"step": 1, "step_time_s": 1.0, "loss": 2.0}, {"gpu_uuid": UUIDS[0]}, "loss"),
    ],
)
def test_recording_a_bad_rank_step_names_the_field(
    tmp_path: Path, values: dict[str, float], where: dict[str, Any], field: str
) -> None:
    with pytest.raises(InputError, match=f"job-event: {field}"):
        record_rank(tmp_path, "7", values, ts=T0, **where)
    assert not (tmp_path / "7.ranks").exists()


_VALUE = st.one_of(st.floats(), st.integers(-5, 10**20), st.booleans(), st.none(), st.text(max_size=8),
                   st.just(10**400), st.lists(st.integers(), max_size=2))  # fmt: skip
_KEYS = st.sampled_from(["ts", "event", "step", "step_time_s", "gpu_uuid", "host", "gpu_index", "loss"])


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_KEYS, _VALUE | st.sampled_from(["rank_step", UUIDS[1], "node01"]), max_size=8))
def test_the_rank_line_parser_never_crashes_and_keeps_only_values_in_range(doc: dict[str, Any]) -> None:
    values, gpu, why = rank_step_values(doc)
    if why is not None:
        assert why.startswith("field ") and "(allowed: " in why and "\n" not in why
        assert values == {} and gpu is None
        return
    assert gpu is not None and set(values) == {name for name, _, _ in RANK_STEP_FIELDS.values()}
    for key, (name, low, strict) in RANK_STEP_FIELDS.items():
        v = values[name]
        assert math.isfinite(v) and (v > low if strict else v >= low)
        assert v == float(doc[key]) or doc[key] >= 2**1023


_LINES = st.lists(st.tuples(st.integers(0, 7), st.floats(0, 50, allow_nan=False), st.floats(1e-3, 100)), max_size=40)


@settings(max_examples=60, deadline=None)
@given(lines=_LINES, reads=st.lists(st.tuples(st.integers(0, 40), st.floats(0, 60)), max_size=5))
def test_any_interleaving_of_writes_and_samples_gives_each_gpu_its_latest_due_line(
    tmp_path_factory: pytest.TempPathFactory, lines: list[tuple[int, float, float]], reads: list[tuple[int, float]]
) -> None:
    """Ranks write in time order, each to its own file; samples come in time order, between any two writes."""
    directory = tmp_path_factory.mktemp("ranks")
    ordered = sorted(lines, key=lambda x: x[1])
    progress = RankProgress(directory)
    samples = sorted(reads, key=lambda r: r[1])
    written = 0
    for upto, at in [*samples, (len(ordered), 61.0)]:
        upto = max(min(upto, len(ordered)), written)
        for g, t, d in ordered[written:upto]:
            _rank(directory, T0 + t, 1, d, g)
        written = upto
        got = progress.step_times(GPUS, LABELS, ("7",), ALL_IN_JOB, T0 + at)
        want = np.full(len(GPUS), np.nan)
        for g, t, d in ordered[:written]:
            if T0 + t <= T0 + at:  # compared as written: in Unix seconds
                want[g] = d
        assert (got is None and written == 0) or np.array_equal(got, want, equal_nan=True)


# ---------------------------------------------------------------- end to end: twinloop watch on a recording

runner = CliRunner()
H100, A100 = "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"


def _store(path: Path, seconds: float, models: tuple[str, ...]) -> Path:
    """A recording of the GPUs (busy, at their model's clock) with their NVML labels (UUID, model), 1 s apart: the
    first ``len(models)`` of :data:`GPUS_3`.
    """
    gpus = GPUS_3[: len(models)]
    ts, ent, fld, val = [], [], [], []
    for t in np.arange(0.0, seconds, 1.0):
        for g, model in zip(gpus, models, strict=True):
            clock, limit = (1410.0, 400.0) if model == A100 else (1980.0, 700.0)
            for name, v in (("DCGM_FI_DEV_POWER_USAGE", 0.85 * limit), ("DCGM_FI_DEV_GPU_TEMP", 60.0),
                            ("DCGM_FI_DEV_SM_CLOCK", clock), ("DCGM_FI_DEV_POWER_MGMT_LIMIT", limit)):  # fmt: skip
                ts.append(T0 + t)
                ent.append(g)
                fld.append(name)
                val.append(v)
    labels = {g: {"UUID": UUIDS[k], "modelName": m} for k, (g, m) in enumerate(zip(gpus, models, strict=True))}
    with DuckDBStore(path) as store:
        store.append(Frame.from_long(ts, ent, fld, val, labels=labels))
    return path


def _csv(path: Path, seconds: float) -> Path:
    """The same recording as a CSV (no labels: the ranks name their GPU by host and index)."""
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["ts", "entity", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_SM_CLOCK",
                    "DCGM_FI_DEV_POWER_MGMT_LIMIT"])  # fmt: skip
        for t in np.arange(0.0, seconds, 1.0):
            w.writerows([T0 + t, g, 600.0, 60.0, 1980.0, 700.0] for g in GPUS)
    return path


def _ranks(beats: Path, seconds: float, own_s: np.ndarray, by_host: bool = False) -> None:
    """Every rank's line after each step: its own compute time ``own_s`` (0.5 % noise); the step's wall time is
    the slowest rank's (the others wait in the all-reduce), from the job's first step on.
    """
    rng = np.random.default_rng(5)
    t, step = 0.0, 0
    while t < seconds:
        times = own_s * (1.0 + 0.005 * rng.standard_normal(own_s.shape[0]))
        t += float(times.max()) + 0.02
        step += 1
        for g, d in enumerate(times):
            node, index = GPUS_3[g].split("/")[-2:]
            where = {"host": node, "gpu_index": int(index[3:])} if by_host else {}
            _rank(beats, T0 + t, step, float(d), g, **where)


def _watch(tmp: Path, recording: Path) -> dict[str, Any]:
    (tmp / "jobs.yaml").write_text("'7': [node01, node02, node03]\n")
    res = runner.invoke(app, ["watch", f"replay:{recording}", "--jobs", str(tmp / "jobs.yaml"), "--job-heartbeats",
                              str(tmp / "beats"), "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)  # type: ignore[no-any-return]


def _stragglers(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [i for i in doc["incidents"] if i["class"] == "straggler"]


@pytest.mark.parametrize("by_host", [False, True])
def test_a_rank_slow_from_the_jobs_first_step_is_named_down_to_its_gpu(tmp_path: Path, by_host: bool) -> None:
    # GPU 6 (node02/gpu2) computes its step in 1.25 s, the others in 1.0 s, from step 1: nothing to compare with
    # but its peers at the same time. Its clocks and power are its peers': only its rank's own time shows it.
    own = np.where(np.arange(len(GPUS)) == 6, 1.25, 1.0)
    _ranks(tmp_path / "beats", 180.0, own, by_host=by_host)
    rec = _csv(tmp_path / "gpus.csv", 180.0) if by_host else _store(tmp_path / "gpus.duckdb", 180.0, (H100,) * 8)
    (slow,) = _stragglers(_watch(tmp_path, rec))
    assert slow["root"] == GPUS[6]
    assert slow["opened_ts"] - T0 <= 30.0


def test_ranks_all_alike_or_a_job_over_two_gpu_models_open_no_straggler(tmp_path: Path) -> None:
    _ranks(tmp_path / "beats", 180.0, np.ones(len(GPUS)))
    assert _stragglers(_watch(tmp_path, _store(tmp_path / "same.duckdb", 180.0, (H100,) * 8))) == []
    # Node 1 A100s, nodes 2 and 3 H100s: the A100s' ranks take 1.25 s, their model's normal pace, not a straggler's
    # (against the whole job's median, 1.0 s, they would be four).
    beats = tmp_path / "beats"
    for f in (beats / "7.ranks").iterdir():
        f.unlink()
    _ranks(beats, 180.0, np.repeat([1.25, 1.0, 1.0], 4))
    mixed = _store(tmp_path / "mixed.duckdb", 180.0, (A100,) * 4 + (H100,) * 8)
    assert _stragglers(_watch(tmp_path, mixed)) == []
    # The same GPUs all labelled H100: the four slow ranks are stragglers, their node (the test can fail).
    same = _store(tmp_path / "h100s.duckdb", 180.0, (H100,) * 12)
    assert [i["root"] for i in _stragglers(_watch(tmp_path, same))] == ["dc/row0/rack0/node01"]


def test_job_event_records_a_ranks_step(tmp_path: Path) -> None:
    res = runner.invoke(app, ["job-event", "rank-step", "--dir", str(tmp_path), "--job", "7", "--ts", str(T0),
                              "--step", "3", "--step-time-s", "0.9", "--gpu-uuid", UUIDS[4], "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["event"] == "rank_step" and doc["gpu_uuid"] == UUIDS[4] and doc["file"].startswith(str(tmp_path))
    assert _times(RankProgress(tmp_path), T0)[4] == 0.9
    res = runner.invoke(app, ["job-event", "rank-step", "--dir", str(tmp_path), "--job", "7", "--step", "3",
                              "--step-time-s", "0.9", "--host", "node01", "--gpu-index", "2"])  # fmt: skip
    assert res.exit_code == 0, res.output
    for args, where in ((["--step", "3", "--step-time-s", "0.9"], "job-event: gpu_uuid: missing"),
                        (["--step", "3", "--gpu-uuid", UUIDS[0]], "job-event: step_time_s: missing"),
                        (["--step", "3", "--step-time-s", "1", "--gpu-uuid", UUIDS[0], "--loss", "2"],
                         "job-event: loss: not a rank-step value")):  # fmt: skip
        res = runner.invoke(app, ["job-event", "rank-step", "--dir", str(tmp_path), "--job", "7", *args])
        assert res.exit_code == 2 and where in res.stderr and res.stderr.count("\n") == 1, res.output
    res = runner.invoke(app, ["job-event", "step", "--dir", str(tmp_path), "--job", "7", "--step", "3",
                              "--gpu-uuid", UUIDS[0]])  # fmt: skip
    assert res.exit_code == 2 and "rank-step" in res.stderr, res.output


# ---------------------------------------------------------------- a rank that stops writing while the job steps on


def _job_steps(*steps: float) -> np.ndarray:
    return np.array(steps, dtype=np.float64)


def test_a_rank_far_behind_the_jobs_step_counter_expires_and_its_file_is_named_once(tmp_path: Path) -> None:
    """Before, a rank whose writer stopped kept its last step time for as long as the job ran."""
    for step in range(1, 11):
        for g in range(len(GPUS)):
            if g != 6 or step <= 4:  # GPU 6's writer stops after step 4
                _rank(tmp_path, T0 + step, step, 1.25 if g == 6 else 1.0, g)
    said: list[str] = []
    progress = RankProgress(tmp_path, said.append)

    def at(job_step: float, ts: float = T0 + 10) -> np.ndarray:
        out = progress.step_times(GPUS, LABELS, ("7",), ALL_IN_JOB, ts, _job_steps(job_step))
        assert out is not None
        return out

    assert at(7.0)[6] == 1.25  # 3 steps behind: the job's line may lead the ranks' by a step or two
    assert np.isnan(at(8.0)[6]) and at(8.0)[5] == 1.0  # 4 behind: expired; the others are at 10
    assert np.isnan(at(30.0)[6]) and np.isnan(at(30.0)[0])  # the job far ahead of every rank: all expired
    path = tmp_path / "7.ranks" / f"{UUIDS[6]}.jsonl"
    assert said[0] == (
        f"rank heartbeats: {path}: last step 4 is 4 steps behind the job's 8 (a synchronous job's ranks step together:"
        " its writer stopped): its step time expired until it writes again"
    )
    assert sum(str(path) in m for m in said) == 1  # named once
    _rank(tmp_path, T0 + 11, 31, 1.3, 6)  # it writes again
    assert at(31.0, T0 + 11)[6] == 1.3
    # No step counter from the job (no step lines, or none due yet): the latest value stands, as before.
    assert at(math.nan, T0 + 11)[0] == 1.0
    got = progress.step_times(GPUS, LABELS, ("7",), ALL_IN_JOB, T0 + 11)
    assert got is not None and got[0] == 1.0


def test_a_rank_that_writes_every_few_steps_is_allowed_as_many(tmp_path: Path) -> None:
    for step in (5, 10, 15):
        _rank(tmp_path, T0 + step, step, 1.0, 2)
    progress = RankProgress(tmp_path)
    for job_step, expired in ((30.0, False), (31.0, True)):  # stride 5: up to 15 behind
        got = progress.step_times(GPUS, LABELS, ("7",), ALL_IN_JOB, T0 + 20, _job_steps(job_step))
        assert got is not None and bool(np.isnan(got[2])) is expired
    # A restart from a checkpoint: the job's counter drops below the ranks' last steps; nothing is behind.
    got = progress.step_times(GPUS, LABELS, ("7",), ALL_IN_JOB, T0 + 21, _job_steps(3.0))
    assert got is not None and got[2] == 1.0


def test_in_watch_a_rank_whose_writer_stopped_in_the_slow_first_steps_is_no_straggler_later(tmp_path: Path) -> None:
    """Every rank computes its first steps slowly (1.25 s: warm-up) and 1.0 s from 40 s on; GPU 6's writer stops at
    30 s while the job steps on to 180 s. Before, its last value (1.25 s) stood against its peers' 1.0 s: a straggler
    opened on a GPU nothing measured any more."""
    beats = tmp_path / "beats"
    rng = np.random.default_rng(5)
    t, step = 0.0, 0
    while t < 180.0:
        times = (1.25 if t < 40.0 else 1.0) * (1.0 + 0.005 * rng.standard_normal(len(GPUS)))
        t += float(times.max()) + 0.02
        step += 1
        record(beats, "7", "step", T0 + t, {"step": step, "step_time_s": float(times.max()) + 0.02})
        for g, d in enumerate(times):
            if g != 6 or t < 30.0:
                _rank(beats, T0 + t, step, float(d), g)
    assert _stragglers(_watch(tmp_path, _store(tmp_path / "gpus.duckdb", 180.0, (H100,) * 8))) == []


_STEPPED = st.lists(
    st.tuples(st.integers(0, 7), st.floats(0, 50, allow_nan=False), st.integers(1, 6)),
    max_size=40,
    unique_by=lambda x: x[1],
)


@settings(max_examples=80, deadline=None)
@given(lines=_STEPPED, reads=st.lists(st.tuples(st.integers(0, 40), st.floats(0, 60), st.integers(0, 120)), max_size=6))
def test_any_interleaving_expires_exactly_the_ranks_too_far_behind_the_jobs_counter(
    tmp_path_factory: pytest.TempPathFactory,
    lines: list[tuple[int, float, int]],
    reads: list[tuple[int, float, int]],
) -> None:
    """Each GPU's value is its latest due line's, NaN where that line's step is more than 3 strides (its step less
    the step of the GPU's line before it; 1 with none) behind the job's counter."""
    directory = tmp_path_factory.mktemp("ranks")
    ordered = sorted(lines, key=lambda x: x[1])
    steps, count = [], [0] * len(GPUS)
    for g, _, delta in ordered:
        count[g] += delta
        steps.append(count[g])
    progress = RankProgress(directory)
    written = 0
    for upto, at, job_step in [*sorted(reads, key=lambda r: r[1]), (len(ordered), 61.0, 0)]:
        upto = max(min(upto, len(ordered)), written)
        for (g, t, _), step in zip(ordered[written:upto], steps[written:upto], strict=True):
            _rank(directory, T0 + t, step, 1.0 + g, g)
        written = upto
        got = progress.step_times(GPUS, LABELS, ("7",), ALL_IN_JOB, T0 + at, _job_steps(job_step))
        want = np.full(len(GPUS), np.nan)
        for g in range(len(GPUS)):
            mine = [
                s
                for (h, t, _), s in zip(ordered[:written], steps[:written], strict=True)
                if h == g and T0 + t <= T0 + at
            ]
            if mine:
                stride = max(mine[-1] - mine[-2], 1) if len(mine) > 1 else 1
                want[g] = np.nan if job_step - mine[-1] > 3 * stride else 1.0 + g
        assert (got is None and written == 0) or np.array_equal(got, want, equal_nan=True)
