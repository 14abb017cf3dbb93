"""`twinloop plan serve`: the serving planner (registers on the ``plan`` group of :mod:`twinloop.cli.plan_cmds`)."""

from __future__ import annotations

import math
from typing import Any

import typer

from twinloop.cli.app import plan_app
from twinloop.cli.completion import gpu_names, model_names
from twinloop.cli.output import JSON_OPTION, guarded, print_json, stdout
from twinloop.cli.tables import Cell, Col, print_pairs, print_table
from twinloop.plan.batching import BATCHING_STRATEGIES, DEFAULT_CHUNK_TOKENS
from twinloop.plan.efficiency import DEFAULT_PUE
from twinloop.plan.serve import DEFAULT_BLOCK_SIZE, DEFAULT_MAX_SEQS, ServePlan, build_request, plan_serve
from twinloop.plan.serve_stages import weight_label


def _s(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "unbounded"
    if seconds < 1.0:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds:.2f} s"


def _print_plan(p: ServePlan) -> None:
    title = f"{p.model} on {p.gpus} x {p.gpu} (tp={p.tp} pp={p.pp} ep={p.ep}, {p.replicas} replica(s)), {p.batching}"
    sat = " (SATURATED)" if p.saturated else ""
    rows = [
        ("parameters total / active", f"{p.params_total / 1e9:.1f} B / {p.params_active / 1e9:.1f} B"),
        ("weights per GPU", f"{p.weight_bytes_per_gpu / 1e9:.1f} GB ({weight_label(p.weight_dtype, p.expert_dtype)})"),
        ("KV cache per token", f"{p.kv_cache_bytes_per_token / 1e3:.1f} kB ({p.kv_dtype})"),
        ("KV free per GPU", f"{p.kv_free_bytes_per_gpu / 1e9:.1f} GB"),
        ("max concurrent sequences", f"{p.max_concurrent_sequences} (HBM {p.max_concurrent_sequences_hbm}, "
                                     f"offload {p.max_concurrent_sequences_offload})"),
        ("decode batch per replica", f"{p.decode_batch_per_replica:.1f}"),
        ("TTFT (mean)", _s(p.ttft_s)),
        ("TPOT (mean)", _s(p.tpot_s)),
        ("end-to-end latency", _s(p.e2e_latency_s)),
        ("throughput", f"{p.throughput_tokens_per_s:,.0f} output tok/s, {p.throughput_req_per_s:.2f} req/s"),
        ("capacity", f"{p.capacity_req_per_s:.2f} req/s{sat}"),
        ("power per GPU (average)", f"{p.power_per_gpu_w:.0f} W"),
        ("energy per output token", f"{p.energy_per_token_j:.3f} J"),
        ("cost per million output tokens", f"${p.cost_per_million_tokens_usd:.3f}"),
        ("warm-up without / with GDS", f"{_s(p.warmup.warmup_s_without_gds)} / {_s(p.warmup.warmup_s_with_gds)}"),
        ("CPU tokenize / detokenize per request",
         f"{_s(p.cpu_tokenize_s_per_request)} / {_s(p.cpu_detokenize_s_per_request)}"),
    ]  # fmt: skip
    print_pairs(stdout, title, rows)
    # Phases as columns, quantities as rows: three narrow columns fit any terminal.
    pre, dec = p.prefill, p.decode
    phases: list[list[Cell]] = [
        ["iteration", _s(pre.iteration_s), _s(dec.iteration_s), ""],
        ["bound", pre.bound, dec.bound, ""],
        ["FLOP/byte", f"{pre.arithmetic_intensity_flops_per_byte:.0f}",
         f"{dec.arithmetic_intensity_flops_per_byte:.0f}", ""],
        ["tensor active", f"{pre.tensor_active:.2f}", f"{dec.tensor_active:.2f}", "0"],
        ["SM active", f"{pre.sm_active:.2f}", f"{dec.sm_active:.2f}", "0"],
        ["DRAM active", f"{pre.dram_active:.2f}", f"{dec.dram_active:.2f}", "0"],
        ["clock MHz", f"{pre.clock_mhz:.0f}", f"{dec.clock_mhz:.0f}", ""],
        ["power W", f"{pre.power_w:.0f}", f"{dec.power_w:.0f}", f"{p.idle_power_w:.0f}"],
        ["time share", f"{pre.time_fraction:.0%}", f"{dec.time_fraction:.0%}", f"{p.idle_fraction:.0%}"],
    ]  # fmt: skip
    cols = [Col("per GPU", "left"), Col("prefill"), Col("decode"), Col("idle")]
    print_table(stdout, "Per phase", cols, phases)
    if p.moe_routing is not None:
        _print_routing(p.moe_routing)
    for w in p.warnings:
        stdout.print(f"[yellow]warning:[/yellow] {w}", highlight=False)
    if p.workload.get("attribution"):
        stdout.print(f"trace: {p.workload['source']} ({p.workload['attribution']})", highlight=False)


def _print_routing(r: dict[str, Any]) -> None:
    """The static-factor figures beside the routed p50/p99 over the routing steps."""
    st, ro = r["static"], r["routed"]
    rows: list[list[Cell]] = [
        [label, _s(st[key]), _s(ro[key]["p50"]), _s(ro[key]["p99"]), _s(ro[key]["max"])]
        for label, key in (("decode step", "decode_step_s"), ("TPOT", "tpot_s"),
                           ("prefill step", "prefill_step_s"), ("TTFT", "ttft_s"))
    ]  # fmt: skip
    for phase in ("decode", "prefill"):
        lf = r[phase]["load_factor_max"]
        rows.append([f"{phase} hottest-rank load", f"{st['moe_imbalance']:.2f}", f"{lf['p50']:.2f}",
                     f"{lf['p99']:.2f}", f"{lf['max']:.2f}"])  # fmt: skip
    cols = [Col("", "left"), Col("static"), Col("routed p50"), Col("routed p99"), Col("routed max")]
    title = (
        f"MoE routing: {r['router']}/{r['placement']}, {r['steps']} steps ({r['source']}; decode "
        f"{r['decode_tokens_per_step']}, prefill {r['prefill_tokens_per_step']} tokens per step)"
    )
    print_table(stdout, title, cols, rows)
    d = r["decode"]
    stdout.print(
        f"decode: dropped {100 * d['dropped_share']:.1f} %, redirected {100 * d['redirected_share']:.1f} %, "
        f"quality (true top-k recall) {d['quality']:.3f}; slowest rank's all-to-all per layer p99: "
        f"{d['a2a_intra_bytes_slowest_rank']['p99'] / 1e6:.2f} MB NVLink, "
        f"{d['a2a_inter_bytes_slowest_rank']['p99'] / 1e6:.2f} MB network",
        highlight=False,
    )


def _checkpoint_dtypes(
    model: str, weight_dtype: str | None, expert_dtype: str | None, quiet: bool
) -> tuple[str, str | None]:
    """``--weight-dtype`` / ``--expert-dtype``, or the format the model's checkpoint ships in (its config.json's
    ``quantization_config``: DeepSeek-V3 and Kimi K2 in FP8, gpt-oss with MXFP4 experts), else BF16.
    """
    if weight_dtype is not None:
        return weight_dtype, expert_dtype
    from twinloop.model.hf_quant import checkpoint_format_of

    fmt = checkpoint_format_of(model)
    if fmt is None:
        return "bf16", expert_dtype
    experts = expert_dtype if expert_dtype is not None else fmt.expert_dtype
    if not quiet:
        shown = fmt.weight_dtype + (f", experts {experts}" if experts else "")
        typer.echo(f"note: weights {shown} (the config's quantization_config)", err=True)
    return fmt.weight_dtype, experts


_ROUTER_HELP = "Simulate MoE routing with this router (topk, capacity, bias, adaptive, ...); with --routing: its row."
_ROUTING_HELP = (
    "Routing run saved by `plan moe --out` (moe_routing.json) instead of simulating; --router and --placement pick "
    "its row (needed when it holds several routers)."
)


@plan_app.command("serve")
def serve(
    model: str = typer.Option(
        ..., "--model", help="Catalog model name or path to a Hugging Face config.json.", autocompletion=model_names
    ),
    gpu: str = typer.Option(
        "h100-sxm", "--gpu", help="Catalog GPU name (see `twinloop gpus`).", autocompletion=gpu_names
    ),
    gpus: int = typer.Option(8, "--gpus", help="GPUs of the whole deployment."),
    tp: int = typer.Option(8, "--tp", help="Tensor parallel degree of one replica."),
    pp: int = typer.Option(1, "--pp", help="Pipeline parallel degree of one replica."),
    ep: int = typer.Option(1, "--ep", help="Expert parallel degree (MoE; divides tp)."),
    weight_dtype: str | None = typer.Option(
        None,
        "--weight-dtype",
        help="Weight dtype: bf16, fp16, fp8, int8, fp4, mxfp4 (default: the config's quantization_config, else bf16).",
    ),
    expert_dtype: str | None = typer.Option(
        None, "--expert-dtype", help="MoE experts' weight dtype (default: --weight-dtype); gpt-oss ships mxfp4."
    ),
    kv_dtype: str = typer.Option("bf16", "--kv-dtype", help="KV-cache dtype: bf16, fp16, fp8, ..."),
    batching: str = typer.Option("continuous", "--batching", help=" | ".join(BATCHING_STRATEGIES)),
    prompt_tokens: int = typer.Option(1024, "--prompt-tokens", help="Prompt length (without --trace)."),
    output_tokens: int = typer.Option(256, "--output-tokens", help="Output length (without --trace)."),
    trace: str | None = typer.Option(None, "--trace", help="Azure-format trace CSV (TIMESTAMP, ContextTokens, ...)."),
    rate: float | None = typer.Option(None, "--rate", help="Total request rate, req/s (default: offline capacity)."),
    block_size: int = typer.Option(DEFAULT_BLOCK_SIZE, "--block-size", help="Paged-KV block size, tokens."),
    max_seqs: int = typer.Option(DEFAULT_MAX_SEQS, "--max-seqs", help="Scheduler cap on sequences per batch."),
    chunk_tokens: int = typer.Option(DEFAULT_CHUNK_TOKENS, "--chunk-tokens", help="Token budget (chunked)."),
    kv_offload: str = typer.Option("none", "--kv-offload", help="KV offload tier: none, dram, cxl, nvme."),
    kv_offload_gb: float = typer.Option(0.0, "--kv-offload-gb", help="Offload tier capacity, GB (deployment)."),
    draft_model: str | None = typer.Option(None, "--draft-model", help="Draft model for speculative decoding."),
    spec_tokens: int = typer.Option(4, "--spec-tokens", help="Draft tokens proposed per step."),
    acceptance: float = typer.Option(0.7, "--acceptance", help="Per-token acceptance probability 0..1."),
    gds: bool = typer.Option(False, "--gds/--no-gds", help="Load weights with GPUDirect Storage."),
    node_profile: str | None = typer.Option(None, "--node-profile", help="`twinloop probe --json` output file."),
    price_gpu_hour: float = typer.Option(2.0, "--price-gpu-hour", help="USD per GPU-hour."),
    price_kwh: float = typer.Option(0.10, "--price-kwh", help="USD per kWh of facility energy."),
    pue: float = typer.Option(DEFAULT_PUE, "--pue", help="Facility PUE applied to GPU energy."),
    moe_imbalance: float = typer.Option(
        1.0, "--moe-imbalance", help="Static MoE factor: hottest EP rank's routed load / balanced (ep > 1)."
    ),
    router: str | None = typer.Option(None, "--router", help=_ROUTER_HELP),
    placement: str = typer.Option("contiguous", "--placement", help="Expert placement: contiguous or affinity."),
    routing_steps: int = typer.Option(32, "--routing-steps", help="Routing steps to simulate."),
    routing: str | None = typer.Option(None, "--routing", help=_ROUTING_HELP),
    routing_seed: int = typer.Option(0, "--routing-seed", help="Seed of the routed token stream."),
    routing_burst_share: float = typer.Option(
        0.2, "--routing-burst-share", help="Share of tokens in the hot-expert burst, 0..1 (0: none)."
    ),
    json_out: bool = JSON_OPTION,
) -> None:
    """Plan LLM serving: KV cache, concurrency, prefill/decode roofline, TTFT, TPOT, throughput, power, cost."""

    def run() -> None:
        weights, experts = _checkpoint_dtypes(model, weight_dtype, expert_dtype, json_out)
        request = build_request(
            model=model, gpu=gpu, gpus=gpus, tp=tp, pp=pp, ep=ep, weight_dtype=weights, expert_dtype=experts,
            kv_dtype=kv_dtype,
            batching=batching, prompt_tokens=prompt_tokens, output_tokens=output_tokens, trace=trace,
            rate_req_per_s=rate, block_size=block_size, max_seqs=max_seqs, chunk_tokens=chunk_tokens,
            kv_offload=kv_offload, kv_offload_gb=kv_offload_gb, draft_model=draft_model, spec_tokens=spec_tokens,
            acceptance=acceptance, gds=gds, node_profile=node_profile, price_gpu_hour_usd=price_gpu_hour,
            price_kwh_usd=price_kwh, pue=pue, moe_imbalance=moe_imbalance, router=router, placement=placement,
            routing_steps=routing_steps, routing_file=routing, routing_seed=routing_seed,
            routing_burst_share=routing_burst_share,
        )  # fmt: skip
        plan = plan_serve(request)
        if json_out:
            print_json(plan)
        else:
            _print_plan(plan)

    guarded(run)
