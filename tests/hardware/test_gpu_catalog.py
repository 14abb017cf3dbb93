import dataclasses
from pathlib import Path

import pytest

from twinloop.errors import InputError
from twinloop.hardware.gpu import get_gpu, gpu_catalog, load_gpu_catalog

ANCHORS = {  # shared/anchors/accelerators.md: TDP W, HBM GB, HBM TB/s, BF16, FP8
    "a100-sxm-80gb": (400, 80, 2.04, 312, None),
    "h100-sxm": (700, 80, 3.35, 989, 1979),
    "h800-sxm": (700, 80, 3.35, 989, 1979),
    "h200-sxm": (700, 141, 4.8, 989, 1979),
    "b200": (1000, 180, 8.0, 2250, 4500),
    "mi300x": (750, 192, 5.3, 1307, 2615),
    "gaudi3": (900, 128, 3.67, 1835, 1835),
}


@pytest.mark.parametrize("name", sorted(ANCHORS))
def test_catalog_matches_anchors(name: str) -> None:
    tdp, hbm_gb, tbps, bf16, fp8 = ANCHORS[name]
    g = get_gpu(name)
    assert g.tdp_w == tdp
    assert g.hbm_bytes / 1e9 == pytest.approx(hbm_gb, rel=0.01)
    assert g.hbm_bandwidth_bytes_per_s / 1e12 == pytest.approx(tbps, rel=0.01)
    assert g.tflops("bf16") == pytest.approx(bf16, rel=0.005)
    if fp8:
        assert g.tflops("fp8") == pytest.approx(fp8, rel=0.005)
    assert set(g.sources) >= {"tdp_w", "hbm_bytes", "dense_tflops"}


def test_missing_dtype_falls_back_to_wider() -> None:
    a100 = get_gpu("a100-sxm-80gb")
    assert a100.tflops("fp8") == a100.tflops("bf16")


def test_unknown_gpu_lists_close_names() -> None:
    with pytest.raises(InputError, match=r"did you mean h100-sxm"):
        get_gpu("h100-sxn")


def test_bad_catalog_names_file_and_field(tmp_path: Path) -> None:
    good = {k: v for k, v in dataclasses.asdict(gpu_catalog()["h100-sxm"]).items() if k != "name"}
    good["tdp_w"] = -5
    import yaml

    p = tmp_path / "gpus.yaml"
    p.write_text(yaml.safe_dump({"gpus": {"x": good}}))
    with pytest.raises(InputError) as exc:
        load_gpu_catalog(p)
    assert str(p) in str(exc.value) and "gpus.x.tdp_w" in str(exc.value)
    p.write_text("gpus: [unclosed")
    with pytest.raises(InputError, match="malformed YAML"):
        load_gpu_catalog(p)


def test_lookup_validates_the_entry_the_catalog_holds() -> None:
    """get_gpu/get_link check one entry on demand; the whole packaged catalogs still validate, the same objects."""
    from twinloop.hardware.link import get_link, link_catalog

    catalog = gpu_catalog()
    assert len(catalog) >= 10 and all(get_gpu(name) is spec for name, spec in catalog.items())
    links = link_catalog()
    assert {"ib-ndr", "nvlink4"} <= set(links) and all(get_link(n) is spec for n, spec in links.items())
    with pytest.raises(InputError, match=r"--scaleout: unknown link 'ib-xdr'.*did you mean"):
        get_link("ib-xdr", source="--scaleout")
