"""GPU specifications from ``catalog/gpus.yaml``: typed, frozen, validated at load."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from twinloop.catalog import CATALOG_DIR
from twinloop.errors import InputError, pydantic_error, unknown_name

Dtype = Literal["fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4"]


class GpuSpec(BaseModel):
    """One accelerator kind. Every number is per GPU; ``sources`` cites where each came from."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    display_name: str
    vendor: Literal["nvidia", "amd", "intel"]
    tdp_w: float = Field(gt=0, le=3000)
    idle_power_w: float = Field(gt=0, le=500)
    power_limit_min_w: float = Field(gt=0, le=3000)
    power_limit_max_w: float = Field(gt=0, le=3000)
    hbm_bytes: float = Field(gt=0)
    hbm_bandwidth_bytes_per_s: float = Field(gt=0)
    dense_tflops: dict[Dtype, float] = Field(description="dense tensor TFLOP/s per dtype, no sparsity")
    sm_clock_min_mhz: float = Field(gt=0)
    sm_clock_max_mhz: float = Field(gt=0)
    slowdown_temp_c: float = Field(gt=40, lt=130)
    shutdown_temp_c: float = Field(gt=40, lt=130)
    hbm_max_temp_c: float = Field(gt=40, lt=130)
    scaleup_link: str = Field(description="name of the scale-up link in links.yaml")
    scaleup_bandwidth_bytes_per_s: float = Field(gt=0, description="per GPU, both directions together")
    gpus_per_node: int = Field(ge=1, le=72)
    thermal_resistance_c_per_w: float = Field(gt=0, description="die to coolant, model parameter")
    thermal_capacitance_j_per_c: float = Field(gt=0, description="die + package + cold plate, model parameter")
    gemm_clock_at_tdp_mhz: float | None = Field(
        default=None, gt=0, description="SM clock a dense BF16 GEMM sustains at TDP (None: the H100's share of f_max)"
    )
    peak_tflops_clock_mhz: float | None = Field(
        default=None,
        gt=0,
        description="SM clock at which dense_tflops holds (None: sm_clock_max_mhz); H100 SXM: 989 TFLOP/s at 1,830 MHz",
    )
    sources: dict[str, str]

    @model_validator(mode="after")
    def _consistent(self) -> GpuSpec:
        if not self.power_limit_min_w <= self.tdp_w <= self.power_limit_max_w:
            raise ValueError("need power_limit_min_w <= tdp_w <= power_limit_max_w")
        if not self.idle_power_w < self.power_limit_min_w:
            raise ValueError("need idle_power_w < power_limit_min_w")
        if not self.sm_clock_min_mhz < self.sm_clock_max_mhz:
            raise ValueError("need sm_clock_min_mhz < sm_clock_max_mhz")
        if not self.slowdown_temp_c < self.shutdown_temp_c:
            raise ValueError("need slowdown_temp_c < shutdown_temp_c")
        if self.gemm_clock_at_tdp_mhz is not None and not (
            self.sm_clock_min_mhz < self.gemm_clock_at_tdp_mhz <= self.sm_clock_max_mhz
        ):
            raise ValueError("need sm_clock_min_mhz < gemm_clock_at_tdp_mhz <= sm_clock_max_mhz")
        if self.peak_tflops_clock_mhz is not None and not (
            self.sm_clock_min_mhz < self.peak_tflops_clock_mhz <= self.sm_clock_max_mhz
        ):
            raise ValueError("need sm_clock_min_mhz < peak_tflops_clock_mhz <= sm_clock_max_mhz")
        if "bf16" not in self.dense_tflops:
            raise ValueError("dense_tflops needs at least bf16")
        return self

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
    "fp8": ("fp8", "bf16"),
    "int8": ("int8", "fp8", "bf16"),
    "fp16": ("fp16", "bf16"),
    "bf16": ("bf16",),
    "tf32": ("tf32", "bf16"),
    "fp32": ("fp32", "tf32"),
}


def load_gpu_catalog(path: Path | None = None) -> dict[str, GpuSpec]:
    """Load and validate a GPU catalog YAML (the packaged one by default)."""
    path = path or CATALOG_DIR / "gpus.yaml"
    try:
        # libyaml when present: the pure-Python loader takes ~0.1 s of every `twinloop plan` start.
        raw = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        raise InputError(str(path), "", f"malformed YAML: {exc}".splitlines()[0]) from None
    if not isinstance(raw, dict) or not isinstance(raw.get("gpus"), dict):
        raise InputError(str(path), "gpus", "expected a mapping 'gpus: {name: {...}}'")
    out: dict[str, GpuSpec] = {}
    for name, body in raw["gpus"].items():
        try:
            out[name] = GpuSpec(name=name, **body)
        except ValidationError as exc:
            err = pydantic_error(str(path), exc)
            raise InputError(err.source, f"gpus.{name}.{err.field}".rstrip("."), err.message) from None
        except TypeError as exc:
            raise InputError(str(path), f"gpus.{name}", str(exc)) from None
    return out


@cache
def gpu_catalog() -> dict[str, GpuSpec]:
    """The packaged GPU catalog (cached)."""
    return load_gpu_catalog()


def get_gpu(name: str, source: str = "--gpu") -> GpuSpec:
    """Look up a GPU by catalog name; unknown names raise :class:`InputError` listing close ones."""
    catalog = gpu_catalog()
    if name not in catalog:
        raise unknown_name(source, "", "GPU", name, catalog)
    return catalog[name]
