"""Users' own model configs, round 4: Qwen3-VL (``qwen3_vl``, ``qwen3_vl_moe``), refused before as
"unsupported model_type 'qwen3_vl_text'".

The fixtures are the released ``config.json`` files of Qwen/Qwen3-VL-8B-Instruct and Qwen/Qwen3-VL-30B-A3B-Instruct
(tests/fixtures/users_round4/README.md says where they were read). The same public model reports list each
checkpoint's safetensors tensors and their total: 8,767,123,696 and 31,070,754,032 parameters (the Hub's "9B" and
"31B"). twinloop counts the language model only, as for Qwen2.5-VL: the reports' total less the ``model.visual.*``
tensors (patch embedding, position embedding, 27 ViT blocks, the merger and the three DeepStack mergers:
576,388,336 and 538,631,408) is the expected count, exactly.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from twinloop.model.arch import load_config_file
from twinloop.model.hf_config import parse_hf_config
from twinloop.model.params import param_counts

FIXTURES = Path(__file__).parents[1] / "fixtures" / "users_round4"

#: name → (safetensors total, of it the vision tower's tensors) from the public model reports (see the README).
CHECKPOINTS = {
    "qwen3-vl-8b-instruct": (8_767_123_696, 576_388_336),
    "qwen3-vl-30b-a3b-instruct": (31_070_754_032, 538_631_408),
}


@pytest.mark.parametrize("name", sorted(CHECKPOINTS))
def test_qwen3_vl_counts_its_language_model_exactly(name: str) -> None:
    total, vision = CHECKPOINTS[name]
    arch = load_config_file(FIXTURES / f"{name}.json")
    counts = param_counts(arch)
    assert arch.text_only_of == ("qwen3_vl_moe" if "a3b" in name else "qwen3_vl")
    assert arch.qk_norm and not arch.tied_embeddings and arch.n_kv_heads in (8, 4)
    # The language model, exactly; the vision tower (6.6 % of the 8B, 1.7 % of the 30B) is not counted.
    assert counts.total == total - vision, f"{counts.total:,}"


def test_qwen3_vl_moe_is_30b_with_3b_active() -> None:
    counts = param_counts(load_config_file(FIXTURES / "qwen3-vl-30b-a3b-instruct.json"))
    # "30B-A3B": 30.53B in all, 3.35B active per token (128 experts, 8 routed); Qwen3-30B-A3B's card: 30.5B / 3.3B.
    assert counts.total == 30_532_122_624 and counts.active == 3_353_032_704
    assert abs(counts.total / 30.5e9 - 1) < 0.02 and abs(counts.active / 3.3e9 - 1) < 0.02


def test_a_resaved_text_config_does_not_tie_the_embeddings_the_release_keeps_apart() -> None:
    """transformers 5 re-saves Qwen3-VL with the text config class's default ``tie_word_embeddings: true`` inside
    ``text_config`` under the top level's ``false`` (the checkpoint ships its own ``lm_head``): the top level wins.
    """
    cfg = json.loads((FIXTURES / "qwen3-vl-8b-instruct.json").read_text())
    cfg["text_config"] = {**cfg["text_config"], "tie_word_embeddings": True}
    total, vision = CHECKPOINTS["qwen3-vl-8b-instruct"]
    assert param_counts(parse_hf_config(cfg, "resaved")).total == total - vision
    # A text_config without its own model_type is read as the wrapper's language model.
    del cfg["text_config"]["model_type"]
    assert param_counts(parse_hf_config(cfg, "bare")).total == total - vision


def test_plan_serve_takes_a_qwen3_vl_config(cli_json: Callable[..., Any]) -> None:
    out = cli_json("plan", "serve", "--model", str(FIXTURES / "qwen3-vl-8b-instruct.json"), "--gpus", "1", "--tp", "1")
    # Before: exit 2, "unsupported model_type 'qwen3_vl_text'". The language model's bf16 weights, 16.4 GB.
    assert out["params_total"] == 8_190_735_360 and abs(out["weight_bytes_total"] / 16.38e9 - 1) < 1e-3
