"""The compute processes NVML lists per GPU: their count as a field, who they are as a label (issue 14: a co-tenant
doubled a real H200 job's step time while power and clock said nothing)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from telemetry_helpers import NVML_RECORDING, T0

from twinloop.telemetry.fields import TWINLOOP_FI_GPU_COMPUTE_PROCESSES
from twinloop.telemetry.frame import Frame
from twinloop.telemetry.ingest import validated_frames
from twinloop.telemetry.report import IngestReport
from twinloop.telemetry.sources.nvml import NvmlConfig, NvmlSource
from twinloop.telemetry.sources.nvml_processes import PROCESSES_LABEL, ComputeProcess, decode, encode

TRAINER = {"pid": 1001, "name": "/usr/bin/python3", "used_memory_bytes": 60 * 2**30}
NOTEBOOK = {"pid": 4242, "name": None, "used_memory_bytes": None}  # another user's: NVML may not name it


def _recording(tmp_path: Path, mutate: Any) -> Path:
    rec = json.loads(NVML_RECORDING.read_text())
    mutate(rec)
    path = tmp_path / "rec.json"
    path.write_text(json.dumps(rec))
    return path


def _frames(path: Path, samples: int) -> tuple[list[Frame], IngestReport]:
    cfg = NvmlConfig(replay_file=str(path), samples=samples, start_ts_s=T0, node_prefix="s/r/k/n0")
    report = IngestReport()
    return list(validated_frames(NvmlSource(cfg), report)), report


def _with_processes(rec: dict[str, Any]) -> None:
    for k, s in enumerate(rec["devices"][0]["samples"]):
        s["compute_processes"] = [TRAINER] + ([NOTEBOOK] if k >= 3 else [])
    # GPU 1 lists nothing on any sample: an idle GPU, 0 processes


def test_the_count_of_compute_processes_is_a_field_and_who_they_are_a_label(tmp_path: Path) -> None:
    frames, report = _frames(_recording(tmp_path, _with_processes), 5)
    assert report.ok, report.to_dict()
    _, ents, grid = Frame.concat(frames).to_dense(TWINLOOP_FI_GPU_COMPUTE_PROCESSES)
    assert grid[:, ents.index("s/r/k/n0/gpu0")].tolist() == [1, 1, 1, 2, 2]
    assert grid[:, ents.index("s/r/k/n0/gpu1")].tolist() == [0] * 5
    last = decode(frames[-1].labels["s/r/k/n0/gpu0"][PROCESSES_LABEL])
    assert last == (ComputeProcess(1001, 61440.0, "python3"), ComputeProcess(4242, None, None))
    assert decode(frames[0].labels["s/r/k/n0/gpu1"][PROCESSES_LABEL]) == ()


def test_a_binding_without_the_call_leaves_the_field_out_not_zero(tmp_path: Path) -> None:
    frames, report = _frames(NVML_RECORDING, 3)  # the recording has no processes: an older binding
    assert report.ok and TWINLOOP_FI_GPU_COMPUTE_PROCESSES not in Frame.concat(frames).fields
    assert all(PROCESSES_LABEL not in lab for f in frames for lab in f.labels.values())


def test_a_gpu_that_does_not_support_the_call_is_counted_once_and_left_out(tmp_path: Path) -> None:
    def unsupported(rec: dict[str, Any]) -> None:
        _with_processes(rec)
        rec["devices"][1]["unsupported"] = ["nvmlDeviceGetComputeRunningProcesses"]

    frames, report = _frames(_recording(tmp_path, unsupported), 4)
    assert report.problems == {"unavailable": 1}
    _, ents, grid = Frame.concat(frames).to_dense(TWINLOOP_FI_GPU_COMPUTE_PROCESSES)
    assert ents == ("s/r/k/n0/gpu0",) and np.isfinite(grid).all()


_procs = st.lists(
    st.builds(ComputeProcess, st.integers(0, 2**31), st.none() | st.floats(0, 1e6), st.none() | st.text(max_size=20)),
    max_size=5,
)


@given(_procs)
def test_a_label_round_trips(procs: list[ComputeProcess]) -> None:
    assert decode(encode(tuple(procs))) == tuple(sorted(procs, key=lambda p: p.pid))


@given(st.text(max_size=200))
def test_decoding_garbage_never_raises(text: str) -> None:
    assert isinstance(decode(text), tuple)
