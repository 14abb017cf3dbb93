"""The planner's GEMM time at the published FP8 cells' training shapes, against a real H100 (predicted).

``tests/fixtures/h100_nvml/gemm_graphs_train.json`` (``tools/gpu/gemm_graphs.py OUT train``, CUDA graphs of 20
calls, NVML clock inside each cell) holds every linear-layer GEMM of Llama-3-8B at TP 1 and Llama-3-70B at TP 4 —
forward (T, out, in), data gradient (T, in, out), weight gradient (out, in, T) — at the tokens per GPU of the
published cells (``catalog/fp8_training.yaml``: 4,096 with CP 2, 8,192; 16,384 for torchtitan's micro-batch 2), in
BF16 and FP8 (per-tensor ``_scaled_mm``). Nothing here was fitted: the planner charges each GEMM at the cell's own
clock with the modern profiles' large-GEMM efficiency (0.89) × ``gemm.relative_efficiency`` of the forward shape.

Prints one row per (model, tokens, dtype): the layer's twelve GEMMs summed, measured vs planner, and the FP8/BF16
speed-up. Run: PYTHONPATH=src python benchmarks/validate_gemm_train_h100.py
"""

from __future__ import annotations

from pathlib import Path

from twinloop.lab import gemm_fit as gf
from twinloop.model.arch import load_model
from twinloop.plan.efficiency import H100_GEMM_EFFICIENCY

FILE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "h100_nvml" / "gemm_graphs_train.json"
#: (model, TP, tokens per GPU) of the measured layers.
LAYERS = (("llama-3-8b", 1, (4096, 8192, 16384)), ("llama-3-70b", 4, (4096, 8192)))

Shape = tuple[int, int, int]


def linears(model: str, tp: int) -> list[tuple[int, int]]:
    """(out, in) of QKV, attention output, FFN up+gate, FFN down on one TP rank."""
    m = load_model(model)
    q, kv = m.n_heads * m.head_dim, m.n_kv_heads * m.head_dim
    return [((q + 2 * kv) // tp, m.hidden), (m.hidden, q // tp), (2 * m.ffn_hidden // tp, m.hidden),
            (m.hidden, m.ffn_hidden // tp)]  # fmt: skip


def layer_gemms(model: str, tp: int, tokens: int) -> list[tuple[Shape, Shape]]:
    """Every GEMM of one layer's forward and backward: (its shape, the forward shape the planner times it by)."""
    out = []
    for o, i in linears(model, tp):
        fwd = (tokens, o, i)
        out += [(fwd, fwd), ((tokens, i, o), fwd), ((o, i, tokens), fwd)]
    return out


def rows() -> list[tuple[str, int, str, float, float, float]]:
    """(model, tokens, dtype, measured s, planner s at the measured clocks, mean clock MHz) per layer."""
    cells = {(c.dtype, c.m, c.n, c.k): c for c in gf.graph_cells(FILE, "h100-sxm")}
    out = []
    for model, tp, token_counts in LAYERS:
        for tokens in token_counts:
            for dtype in ("bf16", "fp8"):
                gemms = [(cells[(dtype, *s)], fwd) for s, fwd in layer_gemms(model, tp, tokens)]
                measured = sum(c.seconds for c, _ in gemms)
                planner = sum(gf.planner_seconds(c, H100_GEMM_EFFICIENCY, fwd) for c, fwd in gemms)
                clock = sum(c.clock_mhz for c, _ in gemms) / len(gemms)
                out.append((f"{model} TP {tp}", tokens, dtype, measured, planner, clock))
    return out


def main() -> None:
    table = rows()
    print("| layer | tokens/GPU | dtype | measured, ms | planner, ms | planner error (TFLOP/s) | mean clock, MHz |")
    print("|---|---:|---|---:|---:|---:|---:|")
    for name, tokens, dtype, meas, plan, clock in table:
        print(f"| {name} | {tokens} | {dtype} | {1e3 * meas:.2f} | {1e3 * plan:.2f} | {100 * (meas / plan - 1):+.1f} % "
              f"| {clock:.0f} |")  # fmt: skip
    print("\n| layer | tokens/GPU | FP8/BF16 speed-up, measured | planner (at the measured clocks) |")
    print("|---|---:|---:|---:|")
    for bf, fp in zip(table[0::2], table[1::2], strict=True):
        print(f"| {bf[0]} | {bf[1]} | {bf[3] / fp[3]:.3f} | {bf[4] / fp[4]:.3f} |")


if __name__ == "__main__":
    main()
