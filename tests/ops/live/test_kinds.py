"""Every live source kind builds a cluster that honours the port: a topology, per-GPU samples at the source's
cadence, reads of recent values, and END at the end of a recording (conformance over ``LIVE_KINDS``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from twinloop.ops.live.actuators import NoActuator
from twinloop.ops.live.cluster import LiveOptions, SourceCluster
from twinloop.ops.live.kinds import LIVE_KINDS, build_source
from twinloop.ops.ports import END, Cluster, Sample
from twinloop.telemetry.exporter import Exporter, LatestValues
from twinloop.telemetry.frame import Frame
from twinloop.telemetry.report import IngestReport
from twinloop.telemetry.sources.files import FileConfig, FileSource
from twinloop.telemetry.store.duckdb_store import DuckDBStore

TEL = Path(__file__).resolve().parents[2] / "telemetry" / "data"
H100 = Path(__file__).resolve().parents[2] / "fixtures" / "h100"


def drain(cluster: SourceCluster, limit: int = 50) -> list[Sample]:
    out: list[Sample] = []
    while len(out) < limit:
        s = cluster.poll()
        if s is END:
            break
        if isinstance(s, Sample):
            out.append(s)
    cluster.close()
    return out


def cluster_for(spec: str, **kw: float) -> SourceCluster:
    b = build_source(spec, **kw)  # type: ignore[arg-type]
    return SourceCluster(b.source, NoActuator(), LiveOptions(cadence_s=b.cadence_s, whole_sweeps=b.whole_sweeps))


def check(cluster: SourceCluster, n_gpus: int, cadence_s: float, limit: int = 50, live: bool = False) -> list[Sample]:
    assert isinstance(cluster, Cluster)
    topo = cluster.topology()
    assert len(topo.gpu_ids) == n_gpus and all(g.count("/") == 4 for g in topo.gpu_ids)
    samples = drain(cluster, limit)
    assert len(samples) >= 3
    for s in samples:
        assert all(v.shape == (n_gpus,) for v in s.gpu.values())
        assert "DCGM_FI_DEV_POWER_USAGE" in s.gpu
    steps = np.diff([s.ts for s in samples])
    assert np.all(steps > 0)
    if live:  # a loaded machine may skip ticks of a live schedule, never add any
        assert np.all(steps >= 0.95 * cadence_s)
    else:
        assert np.median(steps) == pytest.approx(cadence_s, rel=0.05)
    p = cluster.read("DCGM_FI_DEV_POWER_USAGE", topo.gpu_ids[0])
    assert p is not None and np.isfinite(p)
    return samples


def test_every_kind_is_tested() -> None:
    assert set(LIVE_KINDS) == {"nvml", "nvidia-smi", "dcgm", "prometheus", "replay"}


def test_nvml_through_the_fake_library() -> None:
    check(cluster_for(f"nvml:{TEL / 'nvml_h100_synthetic.json'}", duration_s=8.0), 2, 1.0)


def test_nvidia_smi_file_aligns_per_gpu_rows() -> None:
    check(cluster_for(f"nvidia-smi:{TEL / 'nvidia_smi_h100.csv'}"), 2, 1.0)


def test_dcgm_scrape_of_an_exporter() -> None:
    latest = LatestValues()
    gpus = [f"dc/r0/k0/n{i // 4}/gpu{i % 4}" for i in range(8)]
    latest.update(Frame.from_dense(1.0, gpus, {"DCGM_FI_DEV_POWER_USAGE": np.linspace(100, 800, 8)}))
    with Exporter(latest, listen="127.0.0.1:0") as exporter:
        samples = check(cluster_for(f"dcgm:http://127.0.0.1:{exporter.port}", period_s=0.5, duration_s=5.0), 8,
                        0.5, limit=4, live=True)  # fmt: skip
    np.testing.assert_allclose(np.sort(samples[0].gpu["DCGM_FI_DEV_POWER_USAGE"]), np.linspace(100, 800, 8))


@pytest.mark.parametrize("suffix", [".duckdb", ".parquet", ".csv", "sampler"])
def test_replay_of_recordings(tmp_path: Path, suffix: str) -> None:
    src = H100 / "nvml_1hz_idle_to_caps.csv"
    if suffix == "sampler":
        check(cluster_for(f"replay:{H100 / 'samples_20hz_cap600.csv'}"), 1, 0.05)
        return
    if suffix == ".csv":
        check(cluster_for(f"replay:{src}"), 1, 1.0)
        return
    frame = Frame.concat(list(FileSource(FileConfig(path=str(src))).frames(IngestReport())))
    path = tmp_path / f"rec{suffix}"
    if suffix == ".duckdb":
        with DuckDBStore(path) as store:
            store.append(frame)
    else:
        import pyarrow.parquet as pq

        pq.write_table(frame.to_arrow(), path)
    check(cluster_for(f"replay:{path}"), 1, 1.0)


def test_nvidia_smi_rows_written_ms_apart_are_one_sweep(tmp_path: Path) -> None:
    """nvidia-smi writes each GPU's row a few ms after the previous one: 8 GPUs, 20 sweeps, 20 full samples."""
    lines = ["timestamp, index, uuid, name, power.draw [W], power.limit [W], temperature.gpu, clocks.sm [MHz]"]
    rng = np.random.default_rng(0)
    for k in range(20):
        for g in range(8):
            ms = 1000 * k + 3 * g + int(rng.integers(0, 3))
            lines.append(f"2026/11/23 10:00:{ms // 1000:02d}.{ms % 1000:03d}, {g}, GPU-{g}, NVIDIA H100 80GB HBM3, "
                         f"{300 + g:.2f} W, 700.00 W, 50, 1755 MHz")  # fmt: skip
    path = tmp_path / "smi.csv"
    path.write_text("\n".join(lines) + "\n")
    samples = check(cluster_for(f"nvidia-smi:{path}"), 8, 1.0)
    assert len(samples) == 20 and all(s.warnings == () for s in samples)
    assert all(np.isfinite(s.gpu["DCGM_FI_DEV_POWER_USAGE"]).all() for s in samples)
