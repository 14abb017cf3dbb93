"""Parallel configs: validation messages and the vectorized enumeration against a brute-force check."""

from __future__ import annotations

import itertools

import pytest

from twinloop.errors import InputError
from twinloop.model.arch import load_model
from twinloop.plan.parallel import (
    MAX_INTERLEAVE,
    MAX_MICRO_BATCH,
    RECOMPUTE_MODES,
    ConfigArrays,
    ParallelConfig,
    enumerate_configs,
    validate_config,
)

ARCH = load_model("llama-3-8b")
MOE = load_model("mixtral-8x7b")


def _valid(cfg: ParallelConfig, arch: object, gpus: int, gb: int, seq: int) -> bool:
    try:
        validate_config(cfg, arch, 8, gpus, gb, seq)  # type: ignore[arg-type]
    except InputError:
        return False
    return True


@pytest.mark.parametrize(
    ("arch", "gpus", "gb", "seq"), [(ARCH, 16, 32, 4096), (MOE, 16, 16, 2048), (ARCH, 12, 24, 4096)]
)
def test_enumeration_matches_brute_force(arch: object, gpus: int, gb: int, seq: int) -> None:
    got = enumerate_configs(arch, 8, gpus, gb, seq)  # type: ignore[arg-type]
    got_set = {got.config(i) for i in range(len(got))}
    assert len(got_set) == len(got)
    divs = [d for d in range(1, gpus + 1) if gpus % d == 0]
    expected = set()
    mbs = [2**i for i in range(MAX_MICRO_BATCH.bit_length())]
    for tp, pp, dp, cp, ep in itertools.product(divs, divs, divs, divs, [1, 2, 4, 8]):
        if tp * pp * dp * cp != gpus:
            continue
        for z, r, sp, mb, v in itertools.product(range(4), RECOMPUTE_MODES, (False, True), mbs,
                                                  range(1, MAX_INTERLEAVE + 1)):  # fmt: skip
            cfg = ParallelConfig(tp, pp, dp, ep, cp, z, r, sp, mb, v)
            if _valid(cfg, arch, gpus, gb, seq):
                expected.add(cfg)
    assert got_set == expected


def test_fixed_choices_restrict_enumeration() -> None:
    got = enumerate_configs(ARCH, 8, 64, 128, 4096, fixed={"tp": 8, "recompute": "full", "zero": 1})
    assert len(got) > 0
    assert set(got.tp.tolist()) == {8} and set(got.recompute.tolist()) == {2} and set(got.zero.tolist()) == {1}


def test_config_arrays_round_trip() -> None:
    cfgs = [ParallelConfig(2, 2, 4, 1, 1, 1, "selective", True, 2, 2), ParallelConfig()]
    arrays = ConfigArrays.from_configs(cfgs)
    assert [arrays.config(i) for i in range(2)] == cfgs
    assert arrays.select(arrays.tp > 1).config(0) == cfgs[0]


@pytest.mark.parametrize(
    ("cfg", "gpus", "match"),
    [
        (ParallelConfig(tp=16), 16, "tp=16 exceeds gpus_per_node 8"),
        (ParallelConfig(tp=3, dp=2), 6, "heads 32 not divisible by tp 3"),
        (ParallelConfig(pp=2, interleave=32), 2, "pp·interleave = 64 exceeds the 32 layers"),
        (ParallelConfig(interleave=2), 1, "needs pp > 1"),
        (ParallelConfig(cp=3, dp=1), 3, "not divisible by 2·cp"),
        (ParallelConfig(sequence_parallel=True), 1, "needs tp > 1"),
        (ParallelConfig(zero=5), 1, "ZeRO stage must be 0, 1, 2 or 3"),
        (ParallelConfig(micro_batch=0), 1, "must be a positive integer"),
        (ParallelConfig(dp=3, micro_batch=1), 3, "global batch 32 not divisible by dp·micro_batch"),
    ],
)
def test_validation_names_the_reason(cfg: ParallelConfig, gpus: int, match: str) -> None:
    with pytest.raises(InputError, match=match):
        validate_config(cfg, ARCH, 8, gpus, 32, 4096)


def test_moe_expert_parallel_rules() -> None:
    validate_config(ParallelConfig(dp=8, ep=8), MOE, 8, 8, 32, 4096)
    with pytest.raises(InputError, match="8 experts not divisible by ep 3"):
        validate_config(ParallelConfig(dp=3, ep=3), MOE, 8, 3, 33, 4096)
    with pytest.raises(InputError, match="must divide dp·cp"):
        validate_config(ParallelConfig(dp=2, ep=4), MOE, 8, 2, 32, 4096)
