"""`twinloop plan moe`: MoE routing over time, routers × placements side by side, with the planner's step time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from twinloop.cli.app import plan_app
from twinloop.cli.output import JSON_OPTION, guarded, output_dir, print_json, progress, stdout
from twinloop.cli.tables import Cell, Col, print_table

if TYPE_CHECKING:
    from twinloop.plan.moe_study import Study

_COLS = [Col("router", "left"), Col("placement", "left")] + [
    Col(h)
    for h in ("imbalance\nmax/mean", "dropped\n%", "redirected\n%", "a2a intra\nMB/step", "a2a inter\nMB/step",
              "step s\nworst", "step s\nmean", "quality\n(recall)", "served by\ntrue top-k %", "mean\nK")
]  # fmt: skip


def study_rows(s: Study) -> list[list[Cell]]:
    """Table cells, one row per (router, placement)."""
    rows: list[list[Cell]] = []
    for r in s.rows:
        m = r.summary
        rows.append(
            [
                r.router,
                r.placement,
                f"{m['imbalance_max']:.2f}/{m['imbalance_mean']:.2f}",
                f"{100 * m['dropped_share']:.1f}",
                f"{100 * m['redirected_share']:.1f}",
                f"{m['a2a_intra_bytes_mean'] / 1e6:.1f}",
                f"{m['a2a_inter_bytes_mean'] / 1e6:.1f}",
                f"{m['step_s_max']:.3g}",
                f"{m['step_s_mean']:.3g}",
                f"{m['quality']:.3f}",
                f"{100 * m['served_true']:.1f}",
                f"{m['mean_k']:.2f}",
            ]
        )
    return rows


def write_plot(s: Study, out: Path) -> Path:
    """A self-contained HTML report: imbalance and step time over the steps, one series per row."""
    import numpy as np

    from twinloop.report.html import Section, timeseries_chart, write_report

    steps = np.arange(s.steps, dtype=np.float64)
    burst = np.nonzero(s.rows[0].metrics.burst)[0] if s.rows else np.zeros(0)
    bands = [(float(burst[0]), float(burst[-1] + 1), "hot-expert burst", "#f5c2c2")] if burst.size else []
    label = {f"{r.router}/{r.placement}": r for r in s.rows}
    imb = timeseries_chart(
        "Load imbalance (hottest rank / mean)",
        steps,
        {k: r.metrics.imbalance for k, r in label.items()},
        "×",
        bands=bands,
    )
    step = timeseries_chart(
        "Step time, slowest rank (planner)", steps, {k: r.step_s for k, r in label.items()}, "s", bands=bands
    )
    quality = timeseries_chart(
        "Quality proxy (true top-k recall)", steps, {k: r.metrics.quality for k, r in label.items()}, "", bands=bands
    )
    note = f"{s.model} on {s.gpus} {s.gpu}, EP {s.ep}; x axis: router step; planner config {s.config}"
    return write_report(
        out / "moe_routing.html",
        f"MoE routing in motion: {s.model}",
        [Section("Imbalance", imb, note), Section("Step time", step), Section("Quality", quality)],
        subtitle=f"{s.steps} steps × {s.tokens_per_step} tokens, drifting topics with a hot-expert burst",
    )


@plan_app.command("moe")
def moe(
    model: str = typer.Option(
        ..., "--model", help="deepseek-v3, mixtral-8x7b, qwen3-30b-a3b, any MoE catalog name or a config.json."
    ),
    gpus: int = typer.Option(..., "--gpus", min=1, help="GPUs in the (training) cluster the step time is planned on."),
    ep: int = typer.Option(..., "--ep", min=1, help="Expert-parallel degree (divides the routed experts)."),
    gpu: str = typer.Option("h100-sxm", "--gpu", help="Catalog GPU."),
    router: list[str] = typer.Option([], "--router", help="Router(s) to compare (repeatable; default: all)."),
    placement: list[str] = typer.Option([], "--placement", help="contiguous and/or affinity (default: both)."),
    steps: int = typer.Option(64, "--steps", min=1, max=100_000, help="Router steps to simulate."),
    tokens: int = typer.Option(8192, "--tokens", min=1, max=1_048_576, help="Tokens per step (one MoE layer)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the token stream."),
    out: Path | None = typer.Option(
        None,
        "--out",
        help="Directory for moe_routing.html (imbalance and step time over time) and moe_routing.json "
        "(the --json document, which `plan serve --routing` reads).",
    ),
    json_out: bool = JSON_OPTION,
) -> None:
    """Simulate MoE routing over time: routers x placements, imbalance, drops, all-to-all, step time, quality."""
    from twinloop.model.routing import DriftSpec, router_names
    from twinloop.model.routing.placement import PLACEMENTS
    from twinloop.plan.moe_study import run_study, study_json
    from twinloop.plan.search import describe

    if out is not None:
        guarded(lambda: output_dir(out))  # before the study: a bad --out must not cost the whole run
    n_runs = len(router or router_names()) * len(placement or PLACEMENTS)
    drift = DriftSpec(
        tokens_per_step=tokens, drift_period_steps=steps, burst_start_step=steps // 2, burst_steps=max(1, steps // 4)
    )
    with progress("routing", steps * n_runs, enabled=not json_out) as advance:
        study = guarded(
            lambda: run_study(
                model,
                gpus,
                ep,
                gpu,
                list(router) or None,
                list(placement) or None,
                steps,
                drift,
                seed=seed,
                on_step=lambda i: advance(1),
            )
        )
    html = write_plot(study, out) if out is not None else None
    doc = study_json(study)
    if out is not None:
        (out / "moe_routing.json").write_text(json.dumps(doc) + "\n")
    if json_out:
        doc["html"] = str(html) if html else None
        print_json(doc)
        return
    title = f"MoE routing: {study.model} on {study.gpus} {study.gpu}, EP {study.ep}, {steps} steps × {tokens} tokens"
    print_table(stdout, title, _COLS, study_rows(study), keys=2)
    stdout.print(
        "imbalance: hottest EP rank / mean; step s: the training planner's step with the hottest rank's load "
        f"(config {describe({'config': study.config})}); quality: share of each token's true top-k experts that "
        "served it."
    )
    if html:
        stdout.print(f"wrote {html} and {html.parent / 'moe_routing.json'}")
