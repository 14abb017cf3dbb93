"""`twinloop plan compare`: the planner showcase table (dense/GQA vs MoE/MLA, H100 vs H200, BF16 vs FP8)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from twinloop.cli.app import plan_app
from twinloop.cli.output import JSON_OPTION, guarded, print_json, progress, stdout
from twinloop.cli.tables import Cell, Col, print_table

if TYPE_CHECKING:
    from twinloop.plan.showcase import ShowcaseRow

_KEYS = [Col("model", "left"), Col("gpu", "left"), Col("precision", "left")]


def showcase_rows(rows: list[ShowcaseRow]) -> tuple[list[Col], list[list[Cell]]]:
    """Columns and cells of the showcase table (training and serving figures per case)."""
    heads = ["params B\n(active)", "KV\nKB/tok", "train tp/pp/\ndp/ep/cp", "MFU", "train\ntok/s", "train\nW/GPU",
             "train\nJ/tok", "serve\nGPUs", "max\nseqs", "TPOT\nms", "serve\ntok/s", "serve\nW/GPU", "serve\nJ/tok",
             "serve\n$/Mtok"]  # fmt: skip
    cols = [*_KEYS, *(Col(h) for h in heads)]
    cells: list[list[Cell]] = []
    for r in rows:
        t, s, c = r.train, r.serve, r.train["config"]
        cells.append(
            [
                r.model,
                r.gpu,
                r.precision,
                f"{r.params_total / 1e9:.0f} ({r.params_active / 1e9:.0f})",
                f"{r.kv_cache_bytes_per_token / 1024:.0f}",
                f"{c['tp']}/{c['pp']}/{c['dp']}/{c['ep']}/{c['cp']}",
                f"{t['mfu']:.2f}",
                f"{t['tokens_per_s'] / 1e6:.2f}M",
                f"{t['power_per_gpu_w']:.0f}",
                f"{t['energy_per_token_j']:.2f}",
                f"{s['gpus']}",
                f"{s['max_concurrent_sequences']}",
                f"{s['tpot_s'] * 1e3:.1f}",
                f"{s['throughput_tokens_per_s']:.0f}",
                f"{s['power_per_gpu_w']:.0f}",
                f"{s['energy_per_token_j']:.2f}",
                f"{s['cost_per_million_tokens_usd']:.2f}",
            ]
        )
    return cols, cells


def run_showcase(json_out: bool, train_gpus: int = 2048) -> None:
    """Plan the showcase cases and print them (table or one JSON document)."""
    from twinloop.plan.showcase import DEFAULT_CASES, showcase

    with progress("planning", len(DEFAULT_CASES), enabled=not json_out) as advance:
        rows = guarded(lambda: showcase(train_gpus=train_gpus, on_case=lambda i: advance(1)))
    if json_out:
        print_json({"train_gpus": train_gpus, "cases": rows})
        return
    cols, cells = showcase_rows(rows)
    title = "Planner showcase: dense/GQA vs MoE/MLA, H100 vs H200, BF16 vs FP8"
    print_table(stdout, title, cols, cells, keys=3)
    stdout.print(
        f"Training: {train_gpus} GPUs, parallelism chosen by the planner's search for throughput. Serving: TP 8 "
        "per replica on the fewest GPUs that hold the weights, 1024 prompt / 256 output tokens, continuous "
        "batching. MFU is against the BF16 dense peak."
    )


@plan_app.command("compare")
def compare(
    train_gpus: int = typer.Option(2048, "--train-gpus", min=8, help="GPUs in the training cluster."),
    json_out: bool = JSON_OPTION,
) -> None:
    """Compare Llama-3-70B (dense, GQA) and DeepSeek-V3 (MoE, MLA) on H100/H200 in BF16 and FP8."""
    run_showcase(json_out, train_gpus)
