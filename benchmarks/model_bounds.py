"""Time `plan train --search` on the largest model config the loader accepts (issue 19: bounded cost).

    .venv/bin/python benchmarks/model_bounds.py

Writes Qwen3-30B-A3B's config with every size raised to its bound (model/hf_fields.py) to a temporary file
and times the search on 1,024 H100s next to DeepSeek-V3's (both are refused or answered; only time counts).
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from typer.testing import CliRunner

from twinloop.cli.main import app
from twinloop.model.hf_fields import EXPERTS_MAX, HEADS_MAX, LAYERS_MAX, TOP_K_MAX, VOCAB_MAX, WIDTH_MAX

QWEN = Path(__file__).resolve().parent.parent / "tests" / "model" / "fixtures" / "qwen3-30b-a3b.json"


def _time(model: str) -> tuple[float, int]:
    start = time.perf_counter()
    result = CliRunner().invoke(
        app, ["plan", "train", "--model", model, "--gpu", "h100-sxm", "--gpus", "1024", "--search", "throughput"]
    )
    return time.perf_counter() - start, result.exit_code


def main() -> None:
    cfg = json.loads(QWEN.read_text())
    cfg.update(
        num_hidden_layers=LAYERS_MAX, hidden_size=WIDTH_MAX, vocab_size=VOCAB_MAX, num_experts=EXPERTS_MAX,
        num_experts_per_tok=TOP_K_MAX, moe_intermediate_size=WIDTH_MAX, num_attention_heads=HEADS_MAX,
        num_key_value_heads=HEADS_MAX, head_dim=WIDTH_MAX,
    )  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bounds.json"
        path.write_text(json.dumps(cfg))
        for label, model in (("largest accepted config", str(path)), ("deepseek-v3", "deepseek-v3")):
            seconds, code = _time(model)
            print(f"{label}: plan train --gpus 1024 --search throughput: {seconds:.1f} s (exit {code})")


if __name__ == "__main__":
    main()
