"""NVML source against the fake NVML replaying a recording (and a real GPU when there is one)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from telemetry_helpers import NVML_RECORDING, T0

from twinloop.errors import InputError
from twinloop.hardware.power import CLOCK_EVENT_SW_POWER_CAP
from twinloop.telemetry.frame import Frame
from twinloop.telemetry.ingest import validated_frames
from twinloop.telemetry.report import IngestReport
from twinloop.telemetry.sources import nvml as nvml_mod
from twinloop.telemetry.sources.nvml import NvmlConfig, NvmlSource

REC = json.loads(NVML_RECORDING.read_text())


def _run(**kw: object) -> tuple[Frame, IngestReport]:
    cfg = NvmlConfig(replay_file=str(NVML_RECORDING), start_ts_s=T0, node_prefix="s/r/k/n0", **kw)  # type: ignore[arg-type]
    report = IngestReport()
    return Frame.concat(list(validated_frames(NvmlSource(cfg), report))), report


def _series(frame: Frame, field: str, gpu: int) -> np.ndarray:
    _, ents, grid = frame.to_dense(field)
    return grid[:, ents.index(f"s/r/k/n0/gpu{gpu}")]


def test_units_are_converted_from_nvml() -> None:
    frame, report = _run(samples=12)
    assert report.ok, report.to_dict()
    raw = REC["devices"][0]["samples"]
    assert np.allclose(_series(frame, "DCGM_FI_DEV_POWER_USAGE", 0), [s["power_mw"] / 1000 for s in raw])
    assert np.allclose(_series(frame, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 0), [s["energy_mj"] / 1000 for s in raw])
    assert np.allclose(_series(frame, "DCGM_FI_DEV_POWER_MGMT_LIMIT", 0), 700.0)
    assert np.allclose(_series(frame, "DCGM_FI_DEV_FB_USED", 0), [s["fb_used_bytes"] / 2**20 for s in raw])
    assert np.allclose(
        _series(frame, "DCGM_FI_DEV_MEMORY_TEMP", 1), [s["memory_temp_c"] for s in REC["devices"][1]["samples"]]
    )
    reasons = _series(frame, "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", 1).astype(int)
    assert (reasons[:7] & CLOCK_EVENT_SW_POWER_CAP).all()
    assert frame.labels["s/r/k/n0/gpu1"]["UUID"] == REC["devices"][1]["uuid"]


def test_energy_counter_matches_power_over_time() -> None:
    frame, _ = _run(samples=12)
    energy = _series(frame, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 0)
    power = _series(frame, "DCGM_FI_DEV_POWER_USAGE", 0)
    # 1 s samples: the counter grows by the sampled power (the recording integrates it that way).
    assert np.allclose(np.diff(energy), power[1:], rtol=1e-6)


def test_xid_event_and_ecc_show_up_on_the_right_gpu_and_sample() -> None:
    frame, _ = _run(samples=12)
    xid = _series(frame, "DCGM_FI_DEV_XID_ERRORS", 1)
    assert xid[:8].tolist() == [0] * 8 and (xid[8:] == 94).all()
    assert (_series(frame, "DCGM_FI_DEV_XID_ERRORS", 0) == 0).all()
    assert _series(frame, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", 1)[8] == 1
    assert _series(frame, "DCGM_FI_DEV_ROW_REMAP_PENDING", 1)[8] == 1


def test_recording_loops_with_a_monotonic_energy_counter() -> None:
    frame, _ = _run(samples=30, gpus=(0,))
    energy = _series(frame, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 0)
    assert len(energy) == 30 and (np.diff(energy) > 0).all()
    assert np.allclose(np.diff(frame.to_dense("DCGM_FI_DEV_GPU_TEMP")[0]), 1.0)


def test_unsupported_reading_is_counted_once_and_skipped(tmp_path: Path) -> None:
    rec = json.loads(NVML_RECORDING.read_text())
    rec["devices"][1]["unsupported"] = ["nvmlDeviceGetRemappedRows"]
    path = tmp_path / "rec.json"
    path.write_text(json.dumps(rec))
    cfg = NvmlConfig(replay_file=str(path), samples=5, start_ts_s=T0, node_prefix="s/r/k/n0")
    report = IngestReport()
    frame = Frame.concat(list(validated_frames(NvmlSource(cfg), report)))
    assert report.problems == {"unavailable": 1}
    _, ents, _ = frame.to_dense("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS")
    assert ents == ("s/r/k/n0/gpu0",)


def test_framebuffer_used_leaves_out_the_drivers_reserved_memory(tmp_path: Path) -> None:
    # A real H100 (tests/fixtures/h100_nvml): NVML v1 "used" = total - free was 476 MiB above nvidia-smi's.
    rec = json.loads(NVML_RECORDING.read_text())
    reserved = 476 * 2**20
    for s in rec["devices"][0]["samples"]:
        s["fb_reserved_bytes"] = reserved
    path = tmp_path / "rec.json"
    path.write_text(json.dumps(rec))
    cfg = NvmlConfig(replay_file=str(path), samples=3, start_ts_s=T0, node_prefix="s/r/k/n0")
    frame = Frame.concat(list(validated_frames(NvmlSource(cfg), IngestReport())))
    raw = rec["devices"][0]["samples"][:3]
    total = rec["devices"][0]["memory_total_bytes"]
    assert np.allclose(_series(frame, "DCGM_FI_DEV_FB_USED", 0), [s["fb_used_bytes"] / 2**20 for s in raw])
    free = [(total - s["fb_used_bytes"] - reserved) / 2**20 for s in raw]
    assert np.allclose(_series(frame, "DCGM_FI_DEV_FB_FREE", 0), free)


def test_missing_gpu_index_is_reported() -> None:
    frame, report = _run(samples=2, gpus=(1, 5))
    assert report.problems == {"source_error": 1} and "GPU index 5" in report.examples["source_error"][0]
    assert set(frame.entities) == {"s/r/k/n0/gpu1"}


def test_period_is_validated_and_bad_recording_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"greater than or equal to 0\.1"):
        NvmlConfig(period_s=0.05)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(InputError, match="not an NVML recording"):
        list(NvmlSource(NvmlConfig(replay_file=str(bad), samples=1)).frames(IngestReport()))


def test_no_nvml_library_is_an_input_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import pynvml

    class Broken:
        NVMLError = pynvml.NVMLError

        def nvmlInit(self) -> None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)

    monkeypatch.setattr(nvml_mod, "_default_lib", Broken)
    with pytest.raises(InputError, match="NVML is not available"):
        list(NvmlSource(NvmlConfig(samples=1)).frames(IngestReport()))


def _real_gpu() -> bool:
    try:
        import pynvml

        pynvml.nvmlInit()
        n = pynvml.nvmlDeviceGetCount()
        pynvml.nvmlShutdown()
        return n > 0
    except Exception:
        return False


@pytest.mark.skipif(not _real_gpu(), reason="no NVIDIA GPU / driver on this machine")
def test_real_gpu_readings_are_plausible() -> None:
    cfg = NvmlConfig(samples=5, period_s=0.1, node_prefix="s/r/k/local")
    report = IngestReport()
    frame = Frame.concat(list(validated_frames(NvmlSource(cfg), report)))
    power = frame.to_dense("DCGM_FI_DEV_POWER_USAGE")[2]
    limit = frame.to_dense("DCGM_FI_DEV_POWER_MGMT_LIMIT")[2]
    assert (power > 0).all() and (power <= limit * 1.2).all()
    assert np.all(np.diff(frame.to_dense("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")[2], axis=0) >= 0)
