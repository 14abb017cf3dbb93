"""Speculative decoding: expected tokens per step and never-faster-at-zero-acceptance."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twinloop.errors import InputError
from twinloop.hardware.gpu import get_gpu
from twinloop.model.arch import load_model
from twinloop.plan.serve import build_request, plan_serve
from twinloop.plan.serve_roofline import build_roofline
from twinloop.plan.speculative import SpeculativeDecoder, expected_tokens_per_step

TARGET = build_roofline(load_model("llama-3-70b"), get_gpu("h100-sxm"), tp=8)
DRAFT = build_roofline(load_model("llama-3-8b"), get_gpu("h100-sxm"), tp=8)


def test_expected_tokens_formula() -> None:
    assert expected_tokens_per_step(4, 0.0) == 1.0
    assert expected_tokens_per_step(4, 1.0) == 5.0
    assert expected_tokens_per_step(3, 0.5) == pytest.approx(1 + 0.5 + 0.25 + 0.125)
    assert expected_tokens_per_step(4, 0.8) == pytest.approx((1 - 0.8**5) / 0.2)
    with pytest.raises(InputError):
        expected_tokens_per_step(4, 1.5)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 16), st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_expected_tokens_monotone(k: int, a: float, b: float) -> None:
    lo, hi = sorted((a, b))
    assert 1.0 <= expected_tokens_per_step(k, lo) <= expected_tokens_per_step(k, hi) + 1e-12 <= k + 1 + 1e-9


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 8), st.integers(1, 256), st.integers(16, 8000))
def test_zero_acceptance_is_never_faster(k: int, batch: int, context: int) -> None:
    spec = SpeculativeDecoder(TARGET, DRAFT, k, 0.0)
    assert float(spec.decode(batch, context).time_s) >= float(TARGET.decode(batch, context).time_s)


def test_high_acceptance_speeds_up_memory_bound_decode() -> None:
    spec = SpeculativeDecoder(TARGET, DRAFT, 4, 0.8)
    assert float(spec.decode(4, 1024).time_s) < 0.7 * float(TARGET.decode(4, 1024).time_s)


def test_plan_with_draft_model() -> None:
    base = dict(model="llama-3-70b", gpus=8, tp=8, rate_req_per_s=1.0)
    plain = plan_serve(build_request(**base))
    zero = plan_serve(build_request(**base, draft_model="llama-3-8b", spec_tokens=4, acceptance=0.0))
    good = plan_serve(build_request(**base, draft_model="llama-3-8b", spec_tokens=4, acceptance=0.8))
    assert zero.tpot_s >= plain.tpot_s
    assert good.tpot_s < plain.tpot_s
    # the draft's weights and KV take memory
    assert good.max_concurrent_sequences < plain.max_concurrent_sequences
    assert good.speculative is not None and good.speculative["tokens_per_step"] == pytest.approx(3.3616)
    with pytest.raises(InputError, match="--spec-tokens"):
        plan_serve(build_request(**base, draft_model="llama-3-8b", spec_tokens=0))
