"""Search: ranking by each objective, vectorized results equal one-by-one evaluation, MoE search."""

from __future__ import annotations

import numpy as np
import pytest

from twinloop.plan.parallel import ConfigArrays
from twinloop.plan.search import search
from twinloop.plan.train import evaluate_one
from twinloop.plan.train_request import make_request, resolve


def ctx(**kw: object):  # type: ignore[no-untyped-def]
    return resolve(make_request(model="llama-3-8b", gpu="h100-sxm", gpus=16, seq_len=4096, global_batch=64, **kw))


@pytest.mark.parametrize(
    ("objective", "key", "sign"),
    [("throughput", "tokens_per_s", -1), ("energy", "energy_per_token_j", 1), ("cost", "cost_per_token_usd", 1)],
)
def test_ranked_by_objective(objective: str, key: str, sign: int) -> None:
    r = search(ctx(), objective)  # type: ignore[arg-type]
    assert r.fitting > 10 and r.evaluated >= r.fitting
    values = sign * getattr(r.ranked, key)
    assert np.all(np.diff(values) >= -1e-12 * np.abs(values[:-1]))
    assert np.all(r.ranked.fits)


def test_vectorized_equals_one_by_one() -> None:
    c = ctx()
    r = search(c, "throughput")
    idx = np.array([0, 3, len(r.ranked.configs) // 2, len(r.ranked.configs) - 1])
    for i in idx:
        single = evaluate_one(c, ConfigArrays.from_configs([r.ranked.configs.config(int(i))]))
        assert float(single.time.step_s[0]) == pytest.approx(float(r.ranked.time.step_s[i]), rel=1e-12)
        assert float(single.memory.total[0]) == pytest.approx(float(r.ranked.memory.total[i]), rel=1e-12)
        assert float(single.power.average_power_w[0]) == pytest.approx(float(r.ranked.power.average_power_w[i]))


def test_rows_shape() -> None:
    rows = search(ctx(), "cost").rows(3)
    assert [row["rank"] for row in rows] == [1, 2, 3]
    assert set(rows[0]["config"]) == {"tp", "pp", "dp", "ep", "cp", "micro_batch", "zero", "recompute",
                                      "sequence_parallel", "interleave"}  # fmt: skip


def test_moe_search_covers_expert_parallelism() -> None:
    c = resolve(make_request(model="mixtral-8x7b", gpu="h100-sxm", gpus=16, seq_len=4096, global_batch=32))
    r = search(c, "throughput")
    assert set(np.unique(r.ranked.configs.ep)) > {1}
    assert np.all(r.ranked.imbalance >= 1.0)


def test_energy_search_prefers_no_more_energy_than_throughput_best() -> None:
    c = ctx()
    fast = search(c, "throughput").ranked
    frugal = search(c, "energy").ranked
    assert frugal.energy_per_token_j[0] <= fast.energy_per_token_j[0]
    assert fast.tokens_per_s[0] >= frugal.tokens_per_s[0]


@pytest.mark.parametrize(("seq_len", "cp", "dp"), [(8192, 1, 128), (131072, 16, 8)])
def test_search_finds_llama3_405b_published_layouts_feasible(seq_len: int, cp: int, dp: int) -> None:
    """Dubey et al. 2024, Table 4: Llama 3 405B on 16,384 H100 with TP 8, PP 16 and CP 1 (8K sequences,
    DP 128) or CP 16 (131K context, DP 8), 16M tokens per batch: the full search must keep them among the
    configurations that fit in 80 GB."""
    c = resolve(make_request(model="llama-3-405b", gpu="h100-sxm", gpus=16384, seq_len=seq_len,
                             tokens_per_batch=16_777_216))  # fmt: skip
    r = search(c, "throughput")
    cfg = r.ranked.configs
    published = (cfg.tp == 8) & (cfg.pp == 16) & (cfg.cp == cp) & (cfg.dp == dp)
    assert published.any()
    assert np.all(r.ranked.fits[published]) and np.all(r.ranked.memory.total[published] <= c.gpu.hbm_bytes)
