"""Weight loading SSD → DRAM → HBM with and without GPUDirect Storage."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from twinloop.errors import InputError
from twinloop.hardware.gpu import get_gpu
from twinloop.plan.serve import build_request, plan_serve
from twinloop.plan.warmup import BOUNCE_COPY_BYTES_PER_S, plan_warmup


def test_gds_never_slower_and_skips_bounce() -> None:
    gpu = get_gpu("h100-sxm")
    for gpus in (1, 2, 8):
        w = plan_warmup(140e9, gpus, gpus, gpu)
        assert w.warmup_s_with_gds <= w.warmup_s_without_gds
        assert w.shard_bytes_per_gpu == pytest.approx(140e9 / gpus)
    one = plan_warmup(16e9, 1, 1, gpu)
    # one GPU alone: 8 NVMe drives outrun the single-thread bounce copy, which GDS skips
    assert one.bottleneck_without_gds == "DRAM bounce copy"
    assert one.warmup_s_without_gds == pytest.approx(8e-5 + 16e9 / BOUNCE_COPY_BYTES_PER_S)
    assert one.bottleneck_with_gds != "DRAM bounce copy"


def test_more_gpus_share_node_storage() -> None:
    gpu = get_gpu("h100-sxm")
    assert (
        plan_warmup(140e9, 8, 8, gpu).storage_read_bytes_per_s_per_gpu
        < plan_warmup(140e9, 1, 1, gpu).storage_read_bytes_per_s_per_gpu
    )


def test_node_profile_storage_rate(tmp_path: Path) -> None:
    profile = tmp_path / "probe.json"
    profile.write_text(json.dumps({"node_profile": {"storage_read_bytes_per_s": 2.0e9}}))
    base = dict(model="llama-3-8b", gpus=1, tp=1)
    measured = plan_serve(build_request(**base, node_profile=str(profile)))
    assert measured.warmup.storage_source.startswith("node profile")
    assert measured.warmup.warmup_s_with_gds == pytest.approx(measured.weight_bytes_total / 2.0e9)
    gds = plan_serve(build_request(**base, node_profile=str(profile), gds=True))
    assert gds.warmup_s == gds.warmup.warmup_s_with_gds <= measured.warmup_s

    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"node_profile": {}}))
    with pytest.raises(InputError, match="storage_read_bytes_per_s"):
        plan_serve(build_request(**base, node_profile=str(empty)))
    with pytest.raises(InputError, match="not JSON"):
        bad = tmp_path / "bad.json"
        bad.write_text("{")
        plan_serve(build_request(**base, node_profile=str(bad)))
