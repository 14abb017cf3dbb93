"""Every GPU in the catalog: a source for every number, values in physically sane ranges, links that exist.
The entries added for issue 15 are checked against the datasheet figures their sources name."""

from __future__ import annotations

import pytest
import yaml

from twinloop.catalog import CATALOG_DIR
from twinloop.hardware.gpu import get_gpu, gpu_catalog
from twinloop.hardware.link import link_catalog

SOURCE_KEYS = {
    "tdp_w", "hbm_bytes", "hbm_bandwidth_bytes_per_s", "dense_tflops", "scaleup_bandwidth_bytes_per_s",
    "power_limit", "idle_power_w", "sm_clock", "temps",
}  # fmt: skip
DATASHEET_KEYS = ("tdp_w", "hbm_bytes", "hbm_bandwidth_bytes_per_s", "dense_tflops")
NAMES = sorted(gpu_catalog())

# name: (TDP W, memory GB, memory TB/s, dense BF16 TFLOP/s, dense FP8 TFLOP/s, scale-up GB/s both ways)
DATASHEETS = {
    "h100-pcie": (350, 80, 2.0, 756, 1513, 128),
    "h100-nvl": (400, 94, 3.9, 835, 1670.5, 128),
    "gh200": (1000, 96, 4.0, 989, 1979, 900),
    "gb200": (1200, 186, 8.0, 2500, 5000, 1800),
    "b300": (1100, 288, 8.0, 2250, 4500, 1800),
    "gb300": (1400, 288, 8.0, 2500, 5000, 1800),
    "l40s": (350, 48, 0.864, 362.05, 733, 64),
    "mi325x": (1000, 256, 6.0, 1307.4, 2614.9, 896),
    "mi355x": (1400, 288, 8.0, 2516.6, 5033.2, 1075.2),
}


@pytest.mark.parametrize("name", NAMES)
def test_every_number_has_a_source(name: str) -> None:
    g = get_gpu(name)
    assert set(g.sources) >= SOURCE_KEYS
    assert all(text.strip() for text in g.sources.values())
    for key in DATASHEET_KEYS:  # datasheet fields are never guesses
        assert "assumption" not in g.sources[key], (name, key)


@pytest.mark.parametrize("name", NAMES)
def test_values_in_sane_ranges(name: str) -> None:
    g = get_gpu(name)
    assert 150 <= g.tdp_w <= 2000 and 16e9 <= g.hbm_bytes <= 512e9
    assert 0.5e12 <= g.hbm_bandwidth_bytes_per_s <= 20e12
    assert 100 <= g.tflops("bf16") <= 20_000
    assert g.tflops("fp8") >= g.tflops("bf16") and g.tflops("fp4") >= g.tflops("fp8")
    ridge = g.tflops("bf16") * 1e12 / g.hbm_bandwidth_bytes_per_s  # FLOP per byte where compute binds
    assert 50 <= ridge <= 1000
    assert 300 <= g.sm_clock_max_mhz <= 3000 and g.hbm_max_temp_c >= 80
    assert g.idle_power_w < 0.3 * g.tdp_w


@pytest.mark.parametrize("name", NAMES)
def test_scaleup_link_exists_and_agrees(name: str) -> None:
    g = get_gpu(name)
    link = link_catalog()[g.scaleup_link]
    assert link.kind == "scale-up" or g.scaleup_link.startswith("pcie")
    assert g.scaleup_bandwidth_per_direction_bytes_per_s == pytest.approx(link.bandwidth_per_direction_bytes_per_s)


@pytest.mark.parametrize("name", sorted(DATASHEETS))
def test_new_entries_match_their_datasheets(name: str) -> None:
    tdp, mem_gb, tbps, bf16, fp8, scaleup_gbps = DATASHEETS[name]
    g = get_gpu(name)
    assert g.tdp_w == tdp and g.hbm_bytes == pytest.approx(mem_gb * 1e9)
    assert g.hbm_bandwidth_bytes_per_s == pytest.approx(tbps * 1e12)
    assert g.tflops("bf16") == pytest.approx(bf16) and g.tflops("fp8") == pytest.approx(fp8)
    assert g.scaleup_bandwidth_bytes_per_s == pytest.approx(scaleup_gbps * 1e9)


def test_nvl72_domains_and_new_entries_appended_last() -> None:
    assert get_gpu("gb200").gpus_per_node == get_gpu("gb300").gpus_per_node == 72
    order = list(yaml.safe_load((CATALOG_DIR / "gpus.yaml").read_text())["gpus"])
    assert order[-len(DATASHEETS) :] == list(DATASHEETS)  # appended after the entries other branches edit
