"""Properties of the shared power model; the bands are the H100 readings (shared/data/h100, README figures)."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from twinloop.hardware.gpu import get_gpu, gpu_catalog
from twinloop.hardware.power import T_REF_C, GpuPowerModel, clock_scale, relative_speed

H100 = GpuPowerModel(get_gpu("h100-sxm"))
GEMM = (0.91, 1.0, 0.33)  # tensor, sm, dram of a square BF16 GEMM (measured clock-normalised throughput, NVML)


def test_cold_idle_at_reference_temperature_is_catalog_idle() -> None:
    assert H100.power_w(345, 0, 0, 0, T_REF_C, context=0.0) == get_gpu("h100-sxm").idle_power_w


def test_idle_with_a_context_draws_what_the_h100_drew() -> None:
    assert 115.0 <= H100.power_w(1980, 0, 0, 0, 34.0) <= 125.0


def test_dense_gemm_is_power_bound_at_the_measured_clock() -> None:
    assert H100.power_w(1980, *GEMM, 66.0) > 700
    f = H100.max_clock_for_power(700, *GEMM, 66.0)
    assert 1230 <= f <= 1455  # measured: 1,230-1,455 MHz at 696 W
    assert abs(H100.power_w(f, *GEMM, 66.0) - 700) < 1.0


def test_decode_like_work_draws_what_the_h100_drew() -> None:
    for tensor in (0.04, 0.08):  # batch 1-32, padded to 16 rows
        assert 440 <= H100.power_w(1980, tensor, 1.0, 1.0, 48.0) <= 530


def test_memory_power_does_not_shrink_with_the_sm_clock() -> None:
    idle_drop = H100.power_w(1980, 0, 0, 0, 50.0) - H100.power_w(990, 0, 0, 0, 50.0)
    copy_drop = H100.power_w(1980, 0, 0, 1.0, 50.0) - H100.power_w(990, 0, 0, 1.0, 50.0)
    assert abs(copy_drop - idle_drop) < 1e-9


def test_voltage_floor_makes_low_limits_cost_more_speed_per_watt() -> None:
    limits = np.array([700.0, 600.0, 400.0, 300.0])
    f = H100.max_clock_for_power(limits, *(np.full(4, v) for v in GEMM), np.full(4, 55.0))
    mhz_per_w_high = (f[0] - f[1]) / 100.0
    mhz_per_w_low = (f[2] - f[3]) / 100.0
    assert mhz_per_w_low > 2.0 * mhz_per_w_high


def test_fp8_gemm_delivers_about_1_8x_bf16_at_the_same_power() -> None:
    bf16_f = H100.max_clock_for_power(700, *GEMM, 66.0)
    fp8_tensor = 0.89 * H100.tensor_weight(1.0)
    fp8_f = H100.max_clock_for_power(700, fp8_tensor, 1.0, 0.30, 66.0)
    ratio = 2.0 * 0.89 * fp8_f / (0.91 * bf16_f)
    assert 1.7 <= ratio <= 1.9  # measured 1,217 vs 674 TFLOP/s = 1.81


@given(x=st.floats(0.0, 1.0), dx=st.floats(1e-4, 1.0))
def test_clock_scale_increases_with_clock(x: float, dx: float) -> None:
    assert clock_scale(min(1.0, x + dx)) >= clock_scale(x)
    assert clock_scale(1.0) == 1.0


@given(
    limit=st.floats(100, 1000),
    tensor=st.floats(0, 1),
    dram=st.floats(0, 1),
    temp=st.floats(25, 90),
)
def test_dvfs_clock_fits_the_limit_or_is_the_minimum(limit: float, tensor: float, dram: float, temp: float) -> None:
    for gpu in gpu_catalog().values():
        m = GpuPowerModel(gpu)
        f = m.max_clock_for_power(limit, tensor, 1.0, dram, temp)
        assert gpu.sm_clock_min_mhz <= f <= gpu.sm_clock_max_mhz
        if f > gpu.sm_clock_min_mhz:
            assert m.power_w(f, tensor, 1.0, dram, temp) <= limit + 0.5


def test_vectorized_matches_scalar() -> None:
    limits = np.array([300.0, 500.0, 700.0])
    f = H100.max_clock_for_power(limits, np.ones(3), np.ones(3), np.full(3, 0.3), np.full(3, 55.0))
    for i, lim in enumerate(limits):
        assert f[i] == H100.max_clock_for_power(float(lim), 1.0, 1.0, 0.3, 55.0)


def test_compute_bound_work_slows_with_clock_memory_bound_does_not() -> None:
    assert relative_speed(990, 1980, 1.0) == 0.5
    assert relative_speed(990, 1980, 0.0) == 1.0
    assert 0.5 < relative_speed(990, 1980, 0.5) < 1.0
