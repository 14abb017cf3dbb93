"""GPU specifications from ``catalog/gpus.yaml``: typed, frozen, validated at load."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal

from twinloop.catalog import CATALOG_DIR
from twinloop.checked import FieldError, Range, build, check_fields
from twinloop.errors import InputError, unknown_name
from twinloop.hardware.gpu_names import catalog_key, family_guess
from twinloop.hardware.yaml_cache import load_yaml

Dtype = Literal["fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4"]
_TEMP = Range(gt=40, lt=130)


@dataclass(frozen=True, kw_only=True)  # kw_only: fields in the catalog's order, defaults or not
class GpuSpec:
    """One accelerator kind. Every number is per GPU; ``sources`` cites where each came from.

    A frozen dataclass checked at construction (:mod:`twinloop.checked`, not pydantic: see there why).
    """

    name: str
    display_name: str
    vendor: Literal["nvidia", "amd", "intel"]
    tdp_w: Annotated[float, Range(gt=0, le=3000)]
    idle_power_w: Annotated[float, Range(gt=0, le=500)]
    power_limit_min_w: Annotated[float, Range(gt=0, le=3000)]
    power_limit_max_w: Annotated[float, Range(gt=0, le=3000)]
    hbm_bytes: Annotated[float, Range(gt=0)]
    hbm_bandwidth_bytes_per_s: Annotated[float, Range(gt=0)]
    #: dense tensor TFLOP/s per dtype, no sparsity
    dense_tflops: dict[Dtype, Annotated[float, Range(gt=0)]]
    sm_clock_min_mhz: Annotated[float, Range(gt=0)]
    sm_clock_max_mhz: Annotated[float, Range(gt=0)]
    slowdown_temp_c: Annotated[float, _TEMP]
    shutdown_temp_c: Annotated[float, _TEMP]
    hbm_max_temp_c: Annotated[float, _TEMP]
    #: name of the scale-up link in links.yaml
    scaleup_link: str
    #: per GPU, both directions together
    scaleup_bandwidth_bytes_per_s: Annotated[float, Range(gt=0)]
    gpus_per_node: Annotated[int, Range(ge=1, le=72)]
    #: die to coolant, model parameter
    thermal_resistance_c_per_w: Annotated[float, Range(gt=0)]
    #: die + package + cold plate, model parameter
    thermal_capacitance_j_per_c: Annotated[float, Range(gt=0)]
    #: SM clock a dense BF16 GEMM sustains at TDP (None: the H100's share of f_max)
    gemm_clock_at_tdp_mhz: Annotated[float, Range(gt=0)] | None = None
    #: SM clock at which dense_tflops holds (None: sm_clock_max_mhz); H100 SXM: 989 TFLOP/s at 1,830 MHz
    peak_tflops_clock_mhz: Annotated[float, Range(gt=0)] | None = None
    sources: dict[str, str]

    def __post_init__(self) -> None:
        check_fields(self)
        problems = [
            (self.power_limit_min_w <= self.tdp_w <= self.power_limit_max_w,
             "need power_limit_min_w <= tdp_w <= power_limit_max_w"),
            (self.idle_power_w < self.power_limit_min_w, "need idle_power_w < power_limit_min_w"),
            (self.sm_clock_min_mhz < self.sm_clock_max_mhz, "need sm_clock_min_mhz < sm_clock_max_mhz"),
            (self.slowdown_temp_c < self.shutdown_temp_c, "need slowdown_temp_c < shutdown_temp_c"),
            (self.gemm_clock_at_tdp_mhz is None
             or self.sm_clock_min_mhz < self.gemm_clock_at_tdp_mhz <= self.sm_clock_max_mhz,
             "need sm_clock_min_mhz < gemm_clock_at_tdp_mhz <= sm_clock_max_mhz"),
            (self.peak_tflops_clock_mhz is None
             or self.sm_clock_min_mhz < self.peak_tflops_clock_mhz <= self.sm_clock_max_mhz,
             "need sm_clock_min_mhz < peak_tflops_clock_mhz <= sm_clock_max_mhz"),
            ("bf16" in self.dense_tflops, "dense_tflops needs at least bf16"),
        ]  # fmt: skip
        for ok, message in problems:
            if not ok:
                raise FieldError(type(self).__name__, "", message)

    @property
    def peak_clock_mhz(self) -> float:
        """SM clock at which ``dense_tflops`` holds; the tensor rate scales with the clock from there."""
        return self.peak_tflops_clock_mhz if self.peak_tflops_clock_mhz is not None else self.sm_clock_max_mhz

    def tflops(self, dtype: str) -> float:
        """Dense TFLOP/s for ``dtype``; a dtype the GPU lacks runs at the next wider one it has."""
        for candidate in _WIDER.get(dtype, (dtype,)):
            if candidate in self.dense_tflops:
                return self.dense_tflops[candidate]  # type: ignore[index]
        return self.dense_tflops["bf16"]

    @property
    def scaleup_bandwidth_per_direction_bytes_per_s(self) -> float:
        """Per-direction scale-up bandwidth: half the published bidirectional figure."""
        return self.scaleup_bandwidth_bytes_per_s / 2


_WIDER: dict[str, tuple[str, ...]] = {
    "fp4": ("fp4", "fp8", "bf16"),
    # MXFP4 weights: native on FP4 tensor cores (Blackwell); elsewhere (Hopper) kernels upcast them to BF16
    "mxfp4": ("fp4", "bf16"),
    "fp8": ("fp8", "bf16"),
    "int8": ("int8", "fp8", "bf16"),
    "fp16": ("fp16", "bf16"),
    "bf16": ("bf16",),
    "tf32": ("tf32", "bf16"),
    "fp32": ("fp32", "tf32"),
}


def _entries(path: Path) -> dict[str, Any]:
    """The ``gpus`` mapping of a catalog file as parsed, not yet validated."""
    raw = load_yaml(path)
    if not isinstance(raw, dict) or not isinstance(raw.get("gpus"), dict):
        raise InputError(str(path), "gpus", "expected a mapping 'gpus: {name: {...}}'")
    gpus: dict[str, Any] = raw["gpus"]
    return gpus


def _spec(path: Path, name: str, body: Any) -> GpuSpec:
    if not isinstance(body, dict):
        raise InputError(str(path), f"gpus.{name}", "expected a mapping of fields")
    return build(GpuSpec, {"name": name, **body}, str(path), f"gpus.{name}.")


def load_gpu_catalog(path: Path | None = None) -> dict[str, GpuSpec]:
    """Load and validate a GPU catalog YAML (the packaged one by default)."""
    path = path or CATALOG_DIR / "gpus.yaml"
    return {name: _spec(path, name, body) for name, body in _entries(path).items()}


@cache
def _packaged_entries() -> dict[str, Any]:
    return _entries(CATALOG_DIR / "gpus.yaml")


@cache
def _packaged_gpu(name: str) -> GpuSpec:
    return _spec(CATALOG_DIR / "gpus.yaml", name, _packaged_entries()[name])


@cache
def gpu_catalog() -> dict[str, GpuSpec]:
    """The packaged GPU catalog, every entry validated (cached)."""
    return {name: _packaged_gpu(name) for name in _packaged_entries()}


def gpu_key(name: str) -> str | None:
    """The packaged catalog key a GPU name means (``h100-sxm``, ``H100``, ``NVIDIA H100 80GB HBM3``), or None
    (:mod:`~twinloop.hardware.gpu_names`).
    """
    return catalog_key(name, _packaged_entries())


def gpu_family_key(name: str) -> str | None:
    """The packaged catalog key of the GPU family named somewhere in ``name`` (a guess for driver names no table
    holds yet; :func:`~twinloop.hardware.gpu_names.family_guess`), or None.
    """
    return family_guess(name, _packaged_entries())


def get_gpu(name: str, source: str = "--gpu") -> GpuSpec:
    """Look up a GPU by catalog name, or a name that means one (:func:`gpu_key`: ``H100``, the driver's name);
    unknown names raise :class:`InputError` listing close ones.

    Only this entry is validated (the same object :func:`gpu_catalog` holds): a command that plans on one GPU
    does not pay for checking the other catalog entries (start-up time, issue 15). The tests validate the
    whole packaged catalog.
    """
    key = gpu_key(name)
    if key is None:
        raise unknown_name(source, "", "GPU", name, _packaged_entries())
    return _packaged_gpu(key)
