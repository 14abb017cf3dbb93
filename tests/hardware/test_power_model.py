import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from twinloop.hardware.gpu import get_gpu, gpu_catalog
from twinloop.hardware.power import GpuPowerModel, relative_speed

H100 = GpuPowerModel(get_gpu("h100-sxm"))


def test_idle_at_reference_temperature_is_catalog_idle() -> None:
    assert H100.power_w(345, 0, 0, 0, 40.0) == get_gpu("h100-sxm").idle_power_w


def test_dense_gemm_exceeds_tdp_at_full_clock_and_is_capped_below() -> None:
    assert H100.power_w(1980, 1, 1, 0.3, 60) > 700
    f = H100.max_clock_for_power(700, 1, 1, 0.3, 60)
    assert 1500 < f < 1980
    assert abs(H100.power_w(f, 1, 1, 0.3, 60) - 700) < 1.0


def test_decode_draws_well_below_tdp() -> None:
    assert H100.power_w(1980, 0.05, 0.5, 0.8, 50) < 0.6 * 700


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
