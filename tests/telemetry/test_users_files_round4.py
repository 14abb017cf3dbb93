"""Users' own telemetry files, round 4: ``nvidia-smi dmon`` logs, and the labels of a MIG GPU in a dcgm-exporter
scrape.
"""

from __future__ import annotations

from pathlib import Path

from twinloop.telemetry.report import IngestReport
from twinloop.telemetry.sources.prometheus import read_saved_scrape

FIXTURES = Path(__file__).parents[1] / "fixtures"
MIG_SCRAPE = FIXTURES / "users_round3" / "dcgm_mig.prom"  # one A100 (gpu 2) split into two MIG instances


def _saved_page(tmp_path: Path, lines: list[str], name: str) -> Path:
    """The scrape as ``curl ... >> f.prom`` saves it from an exporter that writes exposition timestamps."""
    stamped = [line if line.startswith("#") else f"{line} 1714564800000" for line in lines]
    path = tmp_path / name
    path.write_text("\n".join(stamped) + "\n")
    return path


def test_a_merged_mig_gpu_keeps_its_own_labels_not_its_last_instances(tmp_path: Path) -> None:
    lines = MIG_SCRAPE.read_text().splitlines()
    gpu2 = "site0/row0/rack0/n1/gpu2"
    want = {"gpu": "2", "UUID": "GPU-c", "device": "nvidia2", "modelName": "NVIDIA A100-SXM4-80GB", "Hostname": "n1"}
    for name, order in (("as-scraped.prom", lines), ("instances-reversed.prom", _instances_reversed(lines))):
        frame, problems = read_saved_scrape(_saved_page(tmp_path, order, name), IngestReport())
        # Before: GPU_I_ID "2" and GPU_I_PROFILE of whichever instance came last, as if the GPU were that instance.
        assert frame.labels[gpu2] == want, (name, frame.labels[gpu2])
        _, _, fb = frame.to_dense("DCGM_FI_DEV_FB_USED")
        assert fb.tolist() == [[30000.0]] and problems.get("NaN", 0) <= 1
    # A GPU without MIG keeps its own (pod mapping) labels as before.
    assert frame.labels["site0/row0/rack0/n1/gpu0"]["UUID"] == "GPU-a"
    assert "pod" in frame.labels["site0/row0/rack0/n1/gpu0"]


def _instances_reversed(lines: list[str]) -> list[str]:
    """The scrape with the two instances' lines of each metric swapped (an exporter's series order is not fixed)."""
    out = list(lines)
    idx = [i for i, line in enumerate(lines) if 'GPU_I_ID="' in line]
    for a, b in zip(idx[::2], idx[1::2], strict=True):
        out[a], out[b] = lines[b], lines[a]
    return out
