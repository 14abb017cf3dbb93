"""`twinloop plan ...`: the planners. This module owns the ``plan`` group (:data:`plan_app`) and ``plan train``;
other planner commands (``plan serve``) register on :data:`plan_app` from their own modules."""

from __future__ import annotations

import dataclasses
from typing import Any

import typer
from rich.table import Table

from twinloop.cli.app import app
from twinloop.cli.output import JSON_OPTION, guarded, print_json, stdout
from twinloop.errors import InputError
from twinloop.plan.parallel import ConfigArrays, ParallelConfig
from twinloop.plan.power_sweep import power_sweep
from twinloop.plan.search import OBJECTIVES, SearchResult, describe, search
from twinloop.plan.train import TrainPlan, plan_train
from twinloop.plan.train_request import make_request, resolve

plan_app = typer.Typer(help="Plan training and serving: memory, time, power, energy and cost.", no_args_is_help=True)
app.add_typer(plan_app, name="plan")

GB = 1e9


def _fmt_s(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms" if seconds < 1 else f"{seconds:.3f} s"


def _print_plan(plan: TrainPlan) -> None:
    c = plan.config
    stdout.print(
        f"[bold]{plan.model}[/] on {plan.gpus} × {plan.gpu} ({plan.precision}), seq {plan.seq_len}, "
        f"global batch {plan.global_batch} ({plan.tokens_per_step:,} tokens), config chosen by {plan.chosen_by}: "
        f"tp {c['tp']} pp {c['pp']} dp {c['dp']} cp {c['cp']} ep {c['ep']} micro-batch {c['micro_batch']} "
        f"ZeRO {c['zero']} recompute {c['recompute']} SP {'on' if c['sequence_parallel'] else 'off'} "
        f"interleave {c['interleave']}"
    )
    mem = Table(title=f"Memory per GPU (HBM {plan.hbm_bytes / GB:.0f} GB)")
    mem.add_column("part")
    mem.add_column("GB", justify="right")
    for k, v in plan.memory_per_gpu_bytes.items():
        mem.add_row(k, f"{v / GB:.2f}")
    mem.add_row("headroom", f"{plan.headroom_bytes / GB:.2f}")
    mem.add_row("fits", "yes" if plan.fits else "[red]NO[/]")
    stdout.print(mem)
    step = Table(title=f"Step time {_fmt_s(plan.step_time_s)} ({plan.micro_batches} micro-batches)")
    step.add_column("part")
    step.add_column("time", justify="right")
    step.add_column("share", justify="right")
    for k, v in plan.step_breakdown_s.items():
        share = f"{100 * v / plan.step_time_s:.1f} %" if k not in ("dp_sync_total", "overlapped") else "hidden"
        step.add_row(k, _fmt_s(v), share)
    stdout.print(step)
    perf = Table(title="Throughput, power, energy and cost")
    perf.add_column("metric")
    perf.add_column("value", justify="right")
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
    for name, value in rows:
        perf.add_row(name, value)
    stdout.print(perf)


def _print_search(result: SearchResult, top: int) -> None:
    table = Table(
        title=f"Top {min(top, result.fitting)} of {result.fitting} fitting configurations "
        f"({result.evaluated} evaluated), by {result.objective}"
    )
    for col in ("#", "config", "mem GB", "step", "tokens/s", "MFU", "W/GPU", "J/token", "$/Mtok"):
        table.add_column(col, justify="left" if col == "config" else "right", no_wrap=col == "config")
    for row in result.rows(top):
        table.add_row(
            str(row["rank"]),
            describe(row),
            f"{row['memory_per_gpu_bytes'] / GB:.1f}",
            _fmt_s(row["step_time_s"]),
            f"{row['tokens_per_s']:,.0f}",
            f"{100 * row['mfu']:.1f} %",
            f"{row['power_per_gpu_w']:.0f}",
            f"{row['energy_per_token_j']:.3f}",
            f"{row['cost_per_million_tokens_usd']:.2f}",
        )
    stdout.print(table)


@plan_app.command("train")
def train(
    model: str = typer.Option(..., "--model", help="Catalog model name or path to a Hugging Face config.json."),
    gpu: str = typer.Option(..., "--gpu", help="Catalog GPU name (see `twinloop gpus`)."),
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
    framework: str = typer.Option(
        "megatron-core-2024", "--framework", help="Framework profile: megatron-2022 | megatron-core-2024 | deepseek-v3."
    ),
    dropout: bool = typer.Option(False, "--dropout/--no-dropout", help="Train with dropout (stores masks)."),
    search_by: str | None = typer.Option(None, "--search", help="Rank all configurations: throughput|energy|cost."),
    top: int = typer.Option(10, "--top", help="Rows to show with --search."),
    sweep: bool = typer.Option(False, "--power-sweep", help="Sweep power limits and mark the knee."),
    json_out: bool = JSON_OPTION,
) -> None:
    """Plan LLM training: memory per GPU, step time, MFU, power, energy, time and cost to train."""

    def run() -> None:
        if search_by is not None and search_by not in OBJECTIVES:
            raise InputError("--search", "", f"unknown objective {search_by!r} (allowed: {', '.join(OBJECTIVES)})")
        if top < 1:
            raise InputError("--top", "", f"must be >= 1, got {top}")
        fields: dict[str, Any] = dict(
            model=model, gpu=gpu, gpus=gpus, tp=tp, pp=pp, dp=dp, ep=ep, cp=cp, zero=zero, recompute=recompute,
            sequence_parallel=sequence_parallel, micro_batch=micro_batch, global_batch=global_batch,
            tokens_per_batch=tokens_per_batch, seq_len=seq_len, interleave=interleave, precision=precision,
            price_per_gpu_hour=price_gpu_hour, price_per_kwh=price_kwh, pue=pue, train_tokens=train_tokens,
            power_limit_w=power_limit, scaleout=scaleout, attention_kernel=attention, dropout=dropout,
            framework=framework,
        )  # fmt: skip
        request = make_request(**fields)
        out: dict[str, Any] = {}
        result = None
        if search_by is not None:
            ctx = resolve(request)
            result = search(ctx, search_by)  # type: ignore[arg-type]
            if result.fitting == 0:
                raise InputError(
                    "plan train",
                    "memory",
                    f"no configuration fits: the smallest needs {result.smallest_memory_bytes / GB:.1f} GB per GPU",
                )
            best = result.ranked.configs.config(0)
            request = make_request(**{**fields, **dataclasses.asdict(best)})
        plan = plan_train(request)
        out = dataclasses.asdict(plan)
        if result is not None:
            out["search"] = {
                "objective": result.objective,
                "evaluated": result.evaluated,
                "fitting": result.fitting,
                "results": result.rows(top),
            }
        sweep_result = None
        if sweep:
            ctx = resolve(request)
            cfg = ConfigArrays.from_configs([ParallelConfig(**plan.config)])
            sweep_result = power_sweep(ctx, cfg)
            out["power_sweep"] = {
                "knee_power_limit_w": sweep_result.knee_power_limit_w,
                "points": sweep_result.rows(),
            }
        if json_out:
            print_json(out)
            return
        _print_plan(plan)
        if result is not None:
            _print_search(result, top)
        if sweep_result is not None:
            table = Table(title=f"Power sweep (knee at {sweep_result.knee_power_limit_w:.0f} W)")
            for col in ("limit W", "clock MHz", "step", "avg W/GPU", "energy/step MJ", ""):
                table.add_column(col, justify="right")
            for row in sweep_result.rows():
                table.add_row(
                    f"{row['power_limit_w']:.0f}",
                    f"{row['compute_clock_mhz']:.0f}",
                    _fmt_s(float(row["step_time_s"])),
                    f"{row['average_power_w']:.0f}",
                    f"{float(row['energy_per_step_j']) / 1e6:.2f}",
                    "← knee" if row["knee"] else "",
                )
            stdout.print(table)

    guarded(run)
