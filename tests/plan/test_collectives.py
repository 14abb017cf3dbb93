"""α–β collective costs: exact formulas, tier selection, vectorization and invariants."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from twinloop.errors import InputError
from twinloop.hardware.gpu import get_gpu
from twinloop.plan import collectives as coll

LINK = coll.LinkTier("test", bandwidth_per_direction_bytes_per_s=100e9, latency_s=10e-6, efficiency=1.0)
SLOW = coll.LinkTier("net", bandwidth_per_direction_bytes_per_s=25e9, latency_s=5e-6, efficiency=0.8)
TOPO = coll.Topology(intra=LINK, inter=SLOW, gpus_per_node=8)


def test_ring_all_reduce_exact() -> None:
    expected = 2 * 7 * 10e-6 + 2 * 7 / 8 * 1e9 / 100e9
    assert coll.ring_all_reduce_s(1e9, 8, LINK) == pytest.approx(expected, rel=1e-12)


def test_tree_all_reduce_exact() -> None:
    expected = 2 * math.ceil(math.log2(12)) * 10e-6 + 2 * 1e6 / 100e9
    assert coll.tree_all_reduce_s(1e6, 12, LINK) == pytest.approx(expected, rel=1e-12)


def test_reduce_scatter_all_gather_and_all_to_all_exact() -> None:
    expected = 3 * 10e-6 + 3 / 4 * 4e8 / 100e9
    assert coll.reduce_scatter_s(4e8, 4, LINK) == pytest.approx(expected)
    assert coll.all_gather_s(4e8, 4, LINK) == pytest.approx(expected)
    assert coll.all_to_all_s(4e8, 4, LINK) == pytest.approx(expected)


def test_efficiency_scales_bandwidth_term() -> None:
    assert SLOW.effective_bytes_per_s == pytest.approx(20e9)
    assert coll.p2p_s(2e9, SLOW) == pytest.approx(5e-6 + 0.1)


def test_single_rank_costs_nothing() -> None:
    for fn in (coll.ring_all_reduce_s, coll.tree_all_reduce_s, coll.reduce_scatter_s, coll.all_to_all_s):
        assert fn(1e9, 1, LINK) == 0.0
    assert coll.hierarchical_all_reduce_s(1e9, 1, 1, TOPO) == 0.0


def test_ring_plus_gather_equals_ring_all_reduce() -> None:
    rs_ag = coll.reduce_scatter_s(3e8, 16, LINK) + coll.all_gather_s(3e8, 16, LINK)
    assert rs_ag == pytest.approx(coll.ring_all_reduce_s(3e8, 16, LINK))


def test_all_reduce_picks_tree_for_small_messages_and_ring_for_large() -> None:
    small, large = 1e3, 1e10
    assert coll.all_reduce_s(small, 1024, SLOW) == pytest.approx(coll.tree_all_reduce_s(small, 1024, SLOW))
    assert coll.all_reduce_s(large, 8, LINK) == pytest.approx(coll.ring_all_reduce_s(large, 8, LINK))


def test_hierarchical_limits() -> None:
    # All ranks inside one node: a plain NVLink all-reduce; one rank per node: a plain network one.
    assert coll.hierarchical_all_reduce_s(1e9, 8, 8, TOPO) == pytest.approx(coll.all_reduce_s(1e9, 8, LINK))
    assert coll.hierarchical_all_reduce_s(1e9, 64, 1, TOPO) == pytest.approx(coll.all_reduce_s(1e9, 64, SLOW))


def test_hierarchical_two_tier_exact() -> None:
    s, n, k = 8e8, 32, 8
    expected = coll.reduce_scatter_s(s, k, LINK) + coll.all_reduce_s(s / k, n / k, SLOW) + coll.all_gather_s(s, k, LINK)
    assert expected < coll.all_reduce_s(s, n, SLOW)
    assert coll.hierarchical_all_reduce_s(s, n, k, TOPO) == pytest.approx(expected)


def test_hierarchical_falls_back_to_flat_for_tiny_messages() -> None:
    # 1 kB over 2 nodes: the two intra-node latency-bound steps cost more than a flat network all-reduce.
    assert coll.hierarchical_all_reduce_s(1e3, 16, 8, TOPO) == pytest.approx(coll.all_reduce_s(1e3, 16, SLOW))


def test_hierarchical_all_to_all_takes_the_slower_tier() -> None:
    s, n, k = 1e9, 32, 8
    intra = 7 * LINK.latency_s + 7 / 32 * s / LINK.effective_bytes_per_s
    inter = 24 * SLOW.latency_s + 24 / 32 * s / SLOW.effective_bytes_per_s
    assert coll.hierarchical_all_to_all_s(s, n, k, TOPO) == pytest.approx(max(intra, inter))


def test_vectorized_matches_scalar() -> None:
    sizes = np.array([1e3, 1e6, 1e9, 5e9])
    ns = np.array([2.0, 8.0, 64.0, 512.0])
    ks = np.array([2.0, 8.0, 8.0, 4.0])
    vec = coll.hierarchical_all_reduce_s(sizes, ns, ks, TOPO)
    for i in range(4):
        assert vec[i] == pytest.approx(
            coll.hierarchical_all_reduce_s(float(sizes[i]), float(ns[i]), float(ks[i]), TOPO)
        )


def test_ranks_per_node() -> None:
    assert TOPO.ranks_per_node(8, 1) == 8
    assert TOPO.ranks_per_node(64, 2) == 4
    assert TOPO.ranks_per_node(64, 8) == 1
    assert TOPO.ranks_per_node(2, 1) == 2
    assert list(TOPO.ranks_per_node(np.array([16.0, 4.0]), np.array([4.0, 16.0]))) == [2.0, 1.0]


def test_default_topology_per_generation() -> None:
    assert coll.default_topology(get_gpu("a100-sxm-80gb")).inter.name == "ib-hdr"
    h100 = coll.default_topology(get_gpu("h100-sxm"))
    assert (h100.intra.name, h100.inter.name, h100.gpus_per_node) == ("nvlink4", "ib-ndr", 8)
    with pytest.raises(InputError, match="unknown link"):
        coll.default_topology(get_gpu("h100-sxm"), "ib-xyz")


@given(
    st.floats(1.0, 1e11),
    st.floats(1.0, 1e11),
    st.integers(2, 4096),
)
def test_costs_grow_with_size(a: float, b: float, n: int) -> None:
    lo, hi = sorted((a, b))
    for fn in (coll.ring_all_reduce_s, coll.tree_all_reduce_s, coll.all_reduce_s, coll.reduce_scatter_s):
        assert 0 < fn(lo, n, LINK) <= fn(hi, n, LINK)


@given(st.floats(1e8, 1e11), st.sampled_from([16, 64, 256, 1024]))
def test_hierarchical_beats_flat_network_for_large_messages(size: float, n: int) -> None:
    # NVLink carries 7/8 of the reduction, so each NIC moves only S/8: strictly faster than flat.
    assert coll.hierarchical_all_reduce_s(size, n, 8, TOPO) < coll.all_reduce_s(size, n, SLOW)


@given(
    st.floats(1e3, 1e10),
    st.floats(1e3, 1e10),
    st.sampled_from([8, 16, 64, 256]),
    st.sampled_from([1, 2, 4, 8]),
    st.sampled_from([0, 2, 4]),
)
def test_dedup_all_to_all_grows_with_size_and_never_beats_its_limit(
    a: float, b: float, n: int, copies: int, limit: int
) -> None:
    """Node-limited, per-node deduplicated MoE dispatch (DeepSeek-V3): time grows with the tokens' bytes, a
    node limit never adds time, and for bandwidth-bound messages deduplication never costs more than sending
    every copy (for tiny ones it can: every copy is forwarded over NVLink, a few ns more than the plain
    all-to-all's NVLink share)."""
    lo, hi = sorted((a, b))
    k = 8.0
    t_lo = coll.dedup_all_to_all_s(lo, float(copies), float(n), k, TOPO, node_limit=limit)
    assert 0 <= t_lo <= coll.dedup_all_to_all_s(hi, float(copies), float(n), k, TOPO, node_limit=limit)
    unlimited = coll.dedup_all_to_all_s(hi, float(copies), float(n), k, TOPO)
    assert coll.dedup_all_to_all_s(hi, float(copies), float(n), k, TOPO, node_limit=limit) <= unlimited * (1 + 1e-12)
    if hi >= 1e6:
        plain = coll.hierarchical_all_to_all_s(hi * copies, float(n), k, TOPO)
        assert unlimited <= plain * (1 + 1e-9)
