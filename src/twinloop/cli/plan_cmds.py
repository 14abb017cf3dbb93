"""`twinloop plan train`: the training planner. The ``plan`` group itself (:data:`plan_app`) lives in
:mod:`twinloop.cli.app` so that it can list its commands without importing them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

from twinloop.cli.app import plan_app
from twinloop.cli.completion import gpu_names, model_names
from twinloop.cli.output import JSON_OPTION, busy, guarded, print_json, stdout
from twinloop.cli.tables import Col, duration, energy, print_pairs, print_table

if TYPE_CHECKING:
    from twinloop.plan.power_sweep import PowerSweep
    from twinloop.plan.search import SearchResult
    from twinloop.plan.train import TrainPlan
    from twinloop.plan.train_flow import TrainOutcome

OBJECTIVES = ("throughput", "energy", "cost")  # twinloop.plan.search.OBJECTIVES; checked by tests/cli/test_lazy.py
#: twinloop.plan.frameworks.FRAMEWORKS, default first; checked by tests/cli/test_lazy.py.
FRAMEWORKS = ("megatron-core-2024", "megatron-2022", "megatron-bridge-2025", "deepseek-v3")

GB = 1e9


def _print_plan(plan: TrainPlan) -> None:
    c = plan.config
    stdout.print(
        f"[bold]{plan.model}[/] on {plan.gpus} × {plan.gpu} ({plan.precision}), seq {plan.seq_len}, "
        f"global batch {plan.global_batch} ({plan.tokens_per_step:,} tokens), config chosen by {plan.chosen_by}: "
        f"tp {c.tp} pp {c.pp} dp {c.dp} cp {c.cp} ep {c.ep} micro-batch {c.micro_batch} "
        f"ZeRO {c.zero} recompute {c.recompute} SP {'on' if c.sequence_parallel else 'off'} "
        f"interleave {c.interleave}"
    )
    mem = [[k, f"{v / GB:.2f}"] for k, v in plan.memory_per_gpu_bytes.items()]
    mem += [["headroom", f"{plan.headroom_bytes / GB:.2f}"], ["fits", "yes" if plan.fits else "[red]NO[/]"]]
    print_table(stdout, f"Memory per GPU (HBM {plan.hbm_bytes / GB:.0f} GB)", [Col("part", "left"), Col("GB")], mem)
    step = []
    for k, v in plan.step_breakdown_s.items():
        share = f"{100 * v / plan.step_time_s:.1f} %" if k not in ("dp_sync_total", "overlapped") else "hidden"
        step.append([k, duration(v), share])
    print_table(
        stdout,
        f"Step time {duration(plan.step_time_s)} ({plan.micro_batches} micro-batches)",
        [Col("part", "left"), Col("time"), Col("share")],
        step,
    )
    rows = [
        ("tokens/s", f"{plan.tokens_per_s:,.0f}"),
        ("TFLOP/s per GPU (model)", f"{plan.tflops_per_gpu:.0f}"),
        ("MFU / HFU (vs BF16 peak)", f"{100 * plan.mfu:.1f} % / {100 * plan.hfu:.1f} %"),
        ("power limit / compute clock", f"{plan.power_limit_w:.0f} W / {plan.compute_clock_mhz:.0f} MHz"),
        ("power per GPU avg / peak", f"{plan.power_per_gpu_w:.0f} W / {plan.peak_power_per_gpu_w:.0f} W"),
        ("energy per token", f"{plan.energy_per_token_j:.3f} J"),
        ("train tokens", f"{plan.train_tokens:.3g}"),
        ("train time", f"{plan.train_days:.1f} days"),
        ("GPU-hours", f"{plan.gpu_hours:,.0f}"),
        ("facility energy", f"{plan.train_energy_mwh:,.1f} MWh (PUE {plan.prices['pue']})"),
        ("cost", f"${plan.cost_usd:,.0f}"),
    ]
    print_pairs(stdout, "Throughput, power, energy and cost", rows)


def _print_search(result: SearchResult, top: int) -> None:
    from twinloop.plan.search import describe

    cols = [Col("#"), Col("config", "left", wrap=True), Col("mem\nGB"), Col("step"), Col("tokens/s"), Col("MFU"),
            Col("W/GPU"), Col("J/token"), Col("$/Mtok")]  # fmt: skip
    rows = [
        [
            str(row["rank"]),
            describe(row),
            f"{row['memory_per_gpu_bytes'] / GB:.1f}",
            duration(row["step_time_s"]),
            f"{row['tokens_per_s']:,.0f}",
            f"{100 * row['mfu']:.1f} %",
            f"{row['power_per_gpu_w']:.0f}",
            f"{row['energy_per_token_j']:.3f}",
            f"{row['cost_per_million_tokens_usd']:.2f}",
        ]
        for row in result.rows(top)
    ]
    title = (
        f"Top {min(top, result.fitting)} of {result.fitting} fitting configurations "
        f"({result.evaluated} evaluated), by {result.objective}"
    )
    print_table(stdout, title, cols, rows, keys=2)


def _print_sweep(sweep: PowerSweep) -> None:
    cols = [Col("limit\nW"), Col("clock\nMHz"), Col("step"), Col("avg\nW/GPU"), Col("energy\nper step"), Col("")]
    rows = [
        [
            f"{row['power_limit_w']:.0f}",
            f"{row['compute_clock_mhz']:.0f}",
            duration(float(row["step_time_s"])),
            f"{row['average_power_w']:.0f}",
            energy(float(row["energy_per_step_j"])),
            "← knee" if row["knee"] else "",
        ]
        for row in sweep.rows()
    ]
    print_table(stdout, f"Power sweep (knee at {sweep.knee_power_limit_w:.0f} W)", cols, rows)


@plan_app.command("train")
def train(
    model: str = typer.Option(
        ..., "--model", help="Catalog model name or path to a Hugging Face config.json.", autocompletion=model_names
    ),
    gpu: str = typer.Option(..., "--gpu", help="Catalog GPU name (see `twinloop gpus`).", autocompletion=gpu_names),
    gpus: int = typer.Option(..., "--gpus", help="Number of GPUs."),
    tp: int | None = typer.Option(None, "--tp", help="Tensor parallel degree (default: chosen)."),
    pp: int | None = typer.Option(None, "--pp", help="Pipeline parallel degree (default: chosen)."),
    dp: int | None = typer.Option(None, "--dp", help="Data parallel degree (default: chosen)."),
    ep: int | None = typer.Option(None, "--ep", help="Expert parallel degree, MoE only (default: chosen)."),
    cp: int | None = typer.Option(None, "--cp", help="Context parallel degree (default: chosen)."),
    zero: int | None = typer.Option(None, "--zero", help="ZeRO stage 0-3 (default: chosen)."),
    recompute: str | None = typer.Option(None, "--recompute", help="none | selective | full (default: chosen)."),
    sequence_parallel: bool | None = typer.Option(
        None, "--sequence-parallel/--no-sequence-parallel", help="Sequence parallelism (default: chosen)."
    ),
    micro_batch: int | None = typer.Option(None, "--micro-batch", help="Sequences per micro-batch."),
    global_batch: int | None = typer.Option(None, "--global-batch", help="Sequences per optimizer step."),
    tokens_per_batch: int | None = typer.Option(None, "--tokens-per-batch", help="Tokens per optimizer step."),
    seq_len: int | None = typer.Option(None, "--seq-len", help="Sequence length (default min(8192, max position))."),
    interleave: int | None = typer.Option(None, "--interleave", help="Virtual pipeline stages per device."),
    precision: str = typer.Option("bf16", "--precision", help="Precision policy: bf16, fp16, fp8-mixed, ..."),
    price_gpu_hour: float = typer.Option(2.0, "--price-gpu-hour", help="USD per GPU-hour."),
    price_kwh: float = typer.Option(0.10, "--price-kwh", help="USD per kWh of facility energy."),
    pue: float = typer.Option(1.2, "--pue", help="Facility PUE applied to GPU energy."),
    train_tokens: float | None = typer.Option(None, "--train-tokens", help="Tokens to train (default 20/param)."),
    power_limit: float | None = typer.Option(None, "--power-limit", help="Per-GPU power limit in W (default TDP)."),
    scaleout: str | None = typer.Option(None, "--scaleout", help="Network link (default ib-hdr A100, else ib-ndr)."),
    attention: str | None = typer.Option(
        None, "--attention", help="Attention kernel: flash | unfused (default: the framework's)."
    ),
    framework: str = typer.Option(FRAMEWORKS[0], "--framework", help=f"Framework profile: {' | '.join(FRAMEWORKS)}."),
    dropout: bool = typer.Option(False, "--dropout/--no-dropout", help="Train with dropout (stores masks)."),
    search_by: str | None = typer.Option(None, "--search", help=f"Rank all configurations: {'|'.join(OBJECTIVES)}."),
    top: int = typer.Option(10, "--top", help="Rows to show with --search."),
    use_ray: bool = typer.Option(False, "--ray", help="Run --search's evaluation as Ray tasks (same ranking)."),
    sweep: bool = typer.Option(False, "--power-sweep", help="Sweep power limits and mark the knee."),
    moe_imbalance: float | None = typer.Option(
        None, "--moe-imbalance", help="MoE: hottest EP rank's routed load / balanced (default: drawn from Zipf)."
    ),
    routing: str | None = typer.Option(
        None, "--routing", help="MoE: routing run saved by `plan moe --out` (moe_routing.json); needs --ep."
    ),
    router: str | None = typer.Option(
        None, "--router", help="With --routing: the router's row (needed when the file holds several)."
    ),
    placement: str = typer.Option("contiguous", "--placement", help="With --routing: the placement's row."),
    json_out: bool = JSON_OPTION,
) -> None:
    """Plan LLM training: memory per GPU, step time, MFU, power, energy, time and cost to train."""

    def run() -> TrainOutcome:
        from twinloop.plan.train_flow import RoutingSource, plan_train_flow

        fields: dict[str, Any] = dict(
            model=model, gpu=gpu, gpus=gpus, tp=tp, pp=pp, dp=dp, ep=ep, cp=cp, zero=zero, recompute=recompute,
            sequence_parallel=sequence_parallel, micro_batch=micro_batch, global_batch=global_batch,
            tokens_per_batch=tokens_per_batch, seq_len=seq_len, interleave=interleave, precision=precision,
            price_per_gpu_hour=price_gpu_hour, price_per_kwh=price_kwh, pue=pue, train_tokens=train_tokens,
            power_limit_w=power_limit, scaleout=scaleout, attention_kernel=attention, dropout=dropout,
            framework=framework, moe_imbalance=moe_imbalance,
        )  # fmt: skip
        return plan_train_flow(
            fields,
            search=search_by,
            sweep=sweep,
            ray=use_ray,
            top=top,
            routing=RoutingSource(routing, router, placement) if routing is not None else None,
        )

    # The spinner runs while planning only: nothing may print on stdout while it is live on stderr.
    with busy("planning" + (f" (search by {search_by})" if search_by else ""), enabled=not json_out):
        outcome = guarded(run)
    if json_out:
        print_json(outcome.to_doc())
    else:
        _print_outcome(outcome, top)


def _print_outcome(outcome: TrainOutcome, top: int) -> None:
    """The plan's tables, then the routing it used, the search's ranking and the power sweep where asked for."""
    _print_plan(outcome.plan)
    r = outcome.routing
    if r is not None:
        stdout.print(
            f"MoE imbalance {r.mean_load_factor:.2f} (mean of {r.steps} routed steps, {r.router}/"
            f"{r.placement} from {r.source}; p99 {r.p99_load_factor:.2f}, max {r.max_load_factor:.2f})"
        )
    if outcome.search is not None:
        _print_search(outcome.search, top)
    if outcome.sweep is not None:
        _print_sweep(outcome.sweep)
