"""twinloop's NVML source and nvidia-smi's own CSV on a real H100, side by side (``tests/fixtures/h100_nvml``).

Both read the same NVML counters for the same 60 s under a changing GEMM load, so what they report must agree to
the sensors' resolution; where they differ, the difference must be the documented one.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from twinloop.lab.source_agreement import Agreement, agreement, energy_vs_power, long_parquet_series, smi_series

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "h100_nvml"
TOTAL_MIB = 81559.0  # nvidia-smi -q: FB Memory Usage, Total


@pytest.fixture(scope="module")
def rows() -> dict[str, Agreement]:
    smi, report = smi_series(FIX / "smi.csv")
    assert report.ok and report.dropped == 0 and report.rows_in > 6000, report.to_dict()
    return {r.field: r for r in agreement(long_parquet_series(FIX / "nvml_10hz.parquet"), smi)}


def test_power_clocks_and_temperatures_agree(rows: dict[str, Agreement]) -> None:
    p = rows["DCGM_FI_DEV_POWER_USAGE"]
    assert p.matched > 500 and abs(p.mean_a - p.mean_b) < 5.0 and p.mean_abs_diff < 5.0  # W
    for name in ("DCGM_FI_DEV_POWER_MGMT_LIMIT", "DCGM_FI_DEV_MEM_CLOCK"):
        assert rows[name].equal_share == 1.0
    assert rows["DCGM_FI_DEV_CLOCKS_EVENT_REASONS"].equal_share > 0.99
    assert rows["DCGM_FI_DEV_SM_CLOCK"].equal_share > 0.8 and abs(rows["DCGM_FI_DEV_SM_CLOCK"].mean_a - 1266.8) < 1
    for name in ("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_MEMORY_TEMP"):
        assert abs(rows[name].mean_a - rows[name].mean_b) < 0.5


def test_nvml_v1_used_memory_counted_the_drivers_reserved_memory(rows: dict[str, Agreement]) -> None:
    # The recording predates the v2 query (telemetry/sources/nvml._memory_info): its "used" is total - free.
    used, free = rows["DCGM_FI_DEV_FB_USED"], rows["DCGM_FI_DEV_FB_FREE"]
    reserved = TOTAL_MIB - used.mean_b - free.mean_b
    assert 400 < reserved < 600
    assert used.mean_a - used.mean_b == pytest.approx(reserved, abs=15.0)


def test_the_energy_counter_matches_the_sampled_power() -> None:
    nvml = long_parquet_series(FIX / "nvml_10hz.parquet")
    ts, energy = nvml["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"]
    tp, power = nvml["DCGM_FI_DEV_POWER_USAGE"]
    assert np.array_equal(ts, tp)
    counter_j, integral_j = energy_vs_power(ts, energy, power)
    assert counter_j == pytest.approx(integral_j, rel=0.01)


def test_the_v2_query_reads_framebuffer_use_as_nvidia_smi_does_on_a_real_driver() -> None:
    # tools/gpu/check_preset_cap.sh on an idle H200 (driver 580.159.04), after the v2 query went in.
    preset = FIX.parent / "h200_preset_cap"
    smi = [line.split(", ") for line in (preset / "smi_memory.csv").read_text().splitlines()[1:]]
    total, used, free, reserved = (float(c.split()[0]) for c in smi[0][1:])
    assert reserved > 500 and total == pytest.approx(used + free + reserved, abs=1.0)
    (nvml_used,) = json.loads((preset / "query_fb_used.json").read_text())["rows"]
    (nvml_free,) = json.loads((preset / "query_fb_free.json").read_text())["rows"]
    assert nvml_used["mean"] == pytest.approx(used, abs=1.0) and nvml_free["mean"] == pytest.approx(free, abs=1.0)
