"""Batching strategies: shared conformance over the registry, queueing behaviour, invariants."""

from __future__ import annotations

import itertools
import math
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twinloop.errors import InputError
from twinloop.plan.batching import BATCHING_STRATEGIES, Workload, get_strategy
from twinloop.plan.serve import build_request, plan_serve


class ToySteps:
    """A linear step model: decode = a + b·batch, prefill = c·tokens (seconds)."""

    def decode_s(self, batch: float, context_tokens: float) -> float:
        return 0.01 + 1e-4 * batch + 1e-8 * batch * context_tokens

    def prefill_latency_s(self, prompt_tokens: np.ndarray) -> np.ndarray:
        return 0.002 + 2e-5 * np.asarray(prompt_tokens, dtype=float)

    def prefill_busy_s(self, prompt_tokens: np.ndarray) -> np.ndarray:
        return self.prefill_latency_s(prompt_tokens)

    def batch_prefill_s(self, n_prompts: float, prompt_tokens: float) -> float:
        return 0.002 + 2e-5 * n_prompts * prompt_tokens

    def mixed_s(self, batch: float, context_tokens: float, prefill_tokens: float) -> float:
        return self.decode_s(batch, context_tokens) + 1.5e-5 * prefill_tokens

    def kv_transfer_s(self, prompt_tokens: float) -> float:
        return 1e-6 * prompt_tokens


def _wl(rate: float | None, prompt: float = 500.0, output: float = 100.0) -> Workload:
    return Workload(np.array([prompt]), np.array([output]), rate)


@pytest.mark.parametrize("name", sorted(BATCHING_STRATEGIES))
def test_conformance(name: str) -> None:
    strategy = get_strategy(name)
    assert strategy.name == name
    clone = pickle.loads(pickle.dumps(strategy))
    steps = ToySteps()
    for rate in (None, 2.0, 1e6):
        wl = _wl(rate)
        r1 = strategy.plan(steps, wl, 64, 4)
        r2 = clone.plan(steps, wl, 64, 4)
        assert r1 == r2  # deterministic, same after pickling
        assert r1.strategy == name
        assert r1.prefill_fraction + r1.decode_fraction + r1.idle_fraction == pytest.approx(1.0)
        assert r1.throughput_req_per_s <= r1.capacity_req_per_s * (1 + 1e-9)
        assert r1.output_tokens_per_s == pytest.approx(r1.throughput_req_per_s * 100.0)
        assert 0 < r1.decode_batch <= 64 + 1e-9
        assert r1.tpot_s > 0
        if name == "disaggregated":
            assert r1.prefill_replicas + r1.decode_replicas == 4 and min(r1.prefill_replicas, r1.decode_replicas) >= 1
        else:
            assert r1.prefill_replicas == r1.decode_replicas == 4
        if rate is None:
            assert r1.offline and not r1.saturated and math.isfinite(r1.ttft_s)
        elif rate >= r1.capacity_req_per_s:
            assert r1.saturated and math.isinf(r1.ttft_s)
        else:
            assert not r1.saturated and math.isfinite(r1.ttft_s)
            assert r1.throughput_req_per_s == pytest.approx(rate)


def test_disaggregated_needs_two_replicas() -> None:
    with pytest.raises(InputError, match="at least 2 replicas"):
        get_strategy("disaggregated").plan(ToySteps(), _wl(1.0), 64, 1)


def test_unknown_strategy() -> None:
    with pytest.raises(InputError, match="unknown strategy"):
        get_strategy("bogus")


@pytest.mark.parametrize("name", ["continuous", "chunked", "dynamic", "disaggregated"])
def test_ttft_non_decreasing_in_rate(name: str) -> None:
    strategy = get_strategy(name)
    cap = strategy.plan(ToySteps(), _wl(None), 64, 2).capacity_req_per_s
    ttfts = [strategy.plan(ToySteps(), _wl(f * cap), 64, 2).ttft_s for f in (0.05, 0.3, 0.6, 0.9)]
    assert all(b >= a - 1e-12 for a, b in itertools.pairwise(ttfts))


def test_continuous_obeys_littles_law() -> None:
    r = get_strategy("continuous").plan(ToySteps(), _wl(20.0), 256, 1)
    assert r.decode_batch == pytest.approx(20.0 * 100.0 * r.tpot_s, rel=1e-6)


def test_static_waits_longer_than_continuous_at_low_load() -> None:
    static = get_strategy("static").plan(ToySteps(), _wl(1.0), 64, 1)
    cont = get_strategy("continuous").plan(ToySteps(), _wl(1.0), 64, 1)
    assert static.ttft_s > 10 * cont.ttft_s


@settings(max_examples=15, deadline=None)
@given(st.sampled_from(sorted(BATCHING_STRATEGIES)), st.floats(0.05, 50.0), st.sampled_from([64, 512, 2000]))
def test_energy_per_token_is_power_times_time_over_tokens(name: str, rate: float, prompt: int) -> None:
    p = plan_serve(
        build_request(model="llama-3-8b", gpus=2, tp=1, batching=name, rate_req_per_s=rate, prompt_tokens=prompt)
    )
    # one second of the deployment: gpus x average power joules for throughput tokens
    assert p.energy_per_token_j == pytest.approx(p.power_per_gpu_w * p.gpus * 1.0 / p.throughput_tokens_per_s)
    phases = (
        p.prefill.power_w * p.prefill.time_fraction
        + p.decode.power_w * p.decode.time_fraction
        + p.idle_power_w * p.idle_fraction
    )
    assert p.power_per_gpu_w == pytest.approx(phases)
    assert p.idle_power_w <= p.power_per_gpu_w <= 700 + 1e-6
    assert p.cost_per_million_tokens_usd > 0
