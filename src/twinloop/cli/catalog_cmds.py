"""`twinloop gpus` and `twinloop models`: list the catalogs."""

from __future__ import annotations

from rich.table import Table

from twinloop.cli.app import app
from twinloop.cli.output import JSON_OPTION, print_json, stdout
from twinloop.hardware.gpu import gpu_catalog


@app.command()
def gpus(json_out: bool = JSON_OPTION) -> None:
    """List the GPU catalog: power, memory, bandwidth, TFLOP/s, clocks and thermal limits."""
    catalog = gpu_catalog()
    if json_out:
        print_json({"gpus": [spec.model_dump() for spec in catalog.values()]})
        return
    table = Table(title="GPU catalog (dense TFLOP/s, no sparsity)")
    for col in ("name", "TDP W", "idle W", "HBM GB", "HBM TB/s", "BF16", "FP8", "clock MHz", "slowdown C"):
        table.add_column(col, justify="right" if col != "name" else "left")
    for s in catalog.values():
        table.add_row(
            s.name,
            f"{s.tdp_w:.0f}",
            f"{s.idle_power_w:.0f}",
            f"{s.hbm_bytes / 1e9:.0f}",
            f"{s.hbm_bandwidth_bytes_per_s / 1e12:.2f}",
            f"{s.tflops('bf16'):.0f}",
            f"{s.dense_tflops['fp8']:.0f}" if "fp8" in s.dense_tflops else "—",
            f"{s.sm_clock_min_mhz:.0f}-{s.sm_clock_max_mhz:.0f}",
            f"{s.slowdown_temp_c:.0f}",
        )
    stdout.print(table)
