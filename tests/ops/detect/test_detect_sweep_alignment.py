"""`detect` on per-GPU timestamps a few ms apart (nvidia-smi, some exports): a 30 s, 40 % power drop on one GPU.

Before the sweeps were aligned, every timestamp held one GPU and the others were missing, and this drop gave
no detection at all; it must be found on the right GPU, in the long layout and in nvidia-smi's own CSV.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from twinloop.ops.detect.offline import align_sweeps

T0 = 1_700_000_000.0
DROP_START, DROP_END = 150, 180  # s after T0; GPU 3 at 60 % of its power


def _readings(n_gpu: int = 8, seconds: int = 300) -> list[tuple[float, int, float]]:
    rng = np.random.default_rng(7)
    out = []
    for k in range(seconds):
        for g in range(n_gpu):
            ts = T0 + k + 0.003 * g + rng.uniform(0.0, 0.002)  # each GPU's line stamped a few ms later
            power = 690.0 + rng.normal(0.0, 4.0)
            if g == 3 and DROP_START <= k < DROP_END:
                power *= 0.6
            out.append((ts, g, power))
    return out


def _write_long(path: Path) -> None:
    lines = ["ts,entity,field,value"]
    lines += [f"{ts:.3f},site0/row0/rack0/node0/gpu{g},DCGM_FI_DEV_POWER_USAGE,{p:.2f}" for ts, g, p in _readings()]
    path.write_text("\n".join(lines) + "\n")


def _write_smi(path: Path) -> None:
    lines = ["timestamp, index, name, pstate, power.draw [W], clocks.sm [MHz]"]
    for ts, g, p in _readings():
        stamp = datetime.fromtimestamp(ts, UTC).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]
        lines.append(f"{stamp}, {g}, NVIDIA H100 80GB HBM3, P0, {p:.2f} W, 1980 MHz")
    path.write_text("\n".join(lines) + "\n")


def _drop_found(doc: dict[str, Any], shift_s: float = 0.0) -> list[dict[str, Any]]:
    return [
        d
        for d in doc["detections"]
        if d["entity"].endswith("/gpu3")
        and d["field"] == "DCGM_FI_DEV_POWER_USAGE"
        and T0 + DROP_START <= d["ts"] - shift_s <= T0 + DROP_START + 10
    ]


def test_drop_on_one_gpu_is_found_in_the_long_layout(tmp_path: Path, cli_json: Callable[..., Any]) -> None:
    path = tmp_path / "long.csv"
    _write_long(path)
    doc = cli_json("detect", str(path))
    assert doc["samples"] == 300 and doc["dt_s"] == 1.0  # 300 sweeps, not 2,400 one-GPU timestamps
    assert 0.014 < doc["aligned_max_shift_s"] < 0.03
    assert _drop_found(doc), doc["detections"]
    assert all(d["entity"].endswith("/gpu3") for d in doc["detections"])  # no other GPU flagged


def test_drop_is_found_in_nvidia_smi_csv_read_directly(tmp_path: Path, cli_json: Callable[..., Any]) -> None:
    path = tmp_path / "smi.csv"
    _write_smi(path)
    doc = cli_json("detect", str(path))
    assert doc["layout"] == "nvidia-smi" and doc["samples"] == 300
    assert doc["problems"] == {"unknown_column": 1}  # pstate: reported, skipped
    # The file is written in UTC and read as this machine's local time (nvidia-smi's convention).
    offset = datetime.fromtimestamp(T0).astimezone().utcoffset()
    assert _drop_found(doc, -offset.total_seconds() if offset else 0.0), doc["detections"]
    assert any(i["root"].endswith("/gpu3") for i in doc["incidents"])


def test_nvidia_smi_file_with_nothing_readable_is_exit_2(tmp_path: Path, cli: Callable[..., Any]) -> None:
    path = tmp_path / "smi.csv"
    path.write_text("timestamp, index, power.draw [W]\n2023/11/14 22:13:20.000, 0, lots\n")
    res = cli("detect", str(path))
    assert res.exit_code == 2 and "power.draw: not a number" in res.stderr


@settings(max_examples=80, deadline=None)
@given(
    n=st.integers(1, 12),
    steps=st.integers(2, 30),
    period=st.sampled_from([0.1, 1.0, 15.0]),
    jitter=st.floats(0.0, 0.2),
    seed=st.integers(0, 2**16),
)
def test_alignment_puts_each_sweep_on_one_time(n: int, steps: int, period: float, jitter: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    series = np.tile(np.arange(n), steps)
    sweep = np.repeat(np.arange(steps), n)
    offsets = rng.uniform(0.0, jitter * period, series.size)
    ts = T0 + sweep * period + offsets
    perm = rng.permutation(ts.size)  # entity order and row order must not matter
    aligned, shift = align_sweeps(ts[perm], series[perm].astype(np.int64))
    per_sweep = {int(s): set() for s in range(steps)}
    for s, t in zip(sweep[perm].tolist(), aligned.tolist(), strict=True):
        per_sweep[s].add(t)
    assert all(len(v) == 1 for v in per_sweep.values())
    assert len({next(iter(v)) for v in per_sweep.values()}) == steps
    # Timestamps near T0 (~1.7e9 s) resolve to ~2.4e-7 s: the shift may exceed the largest offset by a few of those
    # (hypothesis found 4 with a jitter of 6e-8 s).
    assert 0.0 <= shift <= jitter * period + 16 * np.spacing(T0)
    # Series that already share their timestamps come back unchanged.
    same, zero = align_sweeps(T0 + sweep * period, series.astype(np.int64))
    assert zero == 0.0 and np.array_equal(same, T0 + sweep * period)
