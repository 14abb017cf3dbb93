"""GPU names people type and drivers report resolve to catalog keys (``--gpu H100``, dcgm's ``modelName``)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from twinloop.errors import InputError
from twinloop.hardware.gpu import get_gpu, gpu_catalog, gpu_key
from twinloop.ops.live.site import _catalog_name
from twinloop.report.levels import gpu_spec_of
from twinloop.twin.scenario import NodeSpec


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("h100-sxm", "h100-sxm"),
        ("H100-SXM", "h100-sxm"),
        ("H100", "h100-sxm"),  # a family name: the SXM part
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),  # nvidia-smi --query-gpu=name on an HGX H100
        ("NVIDIA H100 PCIe", "h100-pcie"),
        ("NVIDIA H100 NVL", "h100-nvl"),
        ("NVIDIA A100-SXM4-80GB", "a100-sxm-80gb"),
        ("a100", "a100-sxm-80gb"),
        ("NVIDIA H200", "h200-sxm"),
        ("GH200", "gh200"),  # not an H200
        ("NVIDIA H100 SXM5 80GB", "h100-sxm"),  # the catalog's display name
        ("h100 sxm5", "h100-sxm"),  # the form factor's name without the memory size (a new user's first try)
        ("H100-SXM5", "h100-sxm"),
        ("mi300x", "mi300x"),
    ],
)
def test_names_resolve(name: str, key: str) -> None:
    assert gpu_key(name) == key
    assert get_gpu(name).name == key


@pytest.mark.parametrize("name", ["", "xyz", "H1000", "nvidia"])
def test_unknown_names_stay_unknown(name: str) -> None:
    assert gpu_key(name) is None
    with pytest.raises(InputError, match="known: a100-sxm-80gb"):
        get_gpu(name)


@given(st.text(max_size=30))
def test_any_text_resolves_to_a_key_or_none(name: str) -> None:
    key = gpu_key(name)
    assert key is None or key in gpu_catalog()


def test_telemetry_labels_and_live_placement_use_the_same_names() -> None:
    spec = gpu_spec_of({"modelName": "NVIDIA H100 PCIe"})
    assert spec is not None and spec.name == "h100-pcie"
    assert _catalog_name("NVIDIA GH200 480GB") == "gh200"
    assert _catalog_name("NVIDIA H100 80GB HBM3e") == "h100-sxm"  # a name no table holds: its family
    assert _catalog_name(None) == "h100-sxm"


def test_a_scenario_may_name_its_gpu_as_people_do() -> None:
    assert NodeSpec(gpu="H100").gpu == "h100-sxm"
    assert NodeSpec(gpu="nonsense").gpu == "nonsense"  # check_scenario names it with the close keys
