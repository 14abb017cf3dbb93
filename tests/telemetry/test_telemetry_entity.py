"""Entity ids: building, levels, parents and prefix selection by whole components."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from twinloop.errors import InputError
from twinloop.telemetry.entity import gpu_entity, job_entity, level_of, parent, under


def test_build_and_take_apart() -> None:
    e = gpu_entity("site0", "row1", "rack3", "node12", 5)
    assert e == "site0/row1/rack3/node12/gpu5" and level_of(e) == "gpu"
    assert parent(e) == "site0/row1/rack3/node12" and level_of(parent(e) or "") == "node"
    assert parent("site0") is None and level_of("site0") == "site"
    j = job_entity("site0", "llama-70b")
    assert level_of(j) == "job" and parent(j) == "site0"
    with pytest.raises(InputError, match="without '/'"):
        gpu_entity("s", "r/1", "k", "n", 0)
    with pytest.raises(InputError, match="1-5 components"):
        level_of("a/b/c/d/e/f")


def test_prefix_matches_whole_components() -> None:
    ents = ["s/row1/k", "s/row10/k", "s/row1", "t/row1"]
    assert under(ents, "s/row1").tolist() == [True, False, True, False]
    assert under(ents, "").all()


names = st.text(alphabet="abcxyz019-_", min_size=1, max_size=6)


@given(parts=st.lists(names, min_size=1, max_size=5))
def test_parent_chain_walks_to_the_site(parts: list[str]) -> None:
    e = "/".join(parts)
    chain = [e]
    while (p := parent(chain[-1])) is not None:
        chain.append(p)
    assert chain[-1] == parts[0] and len(chain) == len(parts)
