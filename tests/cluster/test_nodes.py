"""Cluster nodes without a shared L4 run the compiled Hierarchy: every router's per-request table, per-node
summary and residency equal those of nodes running the Python ReferenceHierarchy on the same trace; nodes with
the shared L4 pool run one compiled SharedPool (tests/cluster/test_shared_pool_compiled.py)."""

from __future__ import annotations

import numpy as np
import pytest

import kvbench.cluster.nodes as nodes_mod
from kvbench.cluster.nodes import Node
from kvbench.cluster.routers import ROUTERS, make_router
from kvbench.cluster.sim import TimingModel, simulate_router, summarise
from kvbench.sim.tiers import Hierarchy, HierarchySpec, ReferenceHierarchy, TierSpec
from kvbench.stream.traces import read_trace

BB = 262144
TIMING = TimingModel(l2_bw=20e9, l3_bw=5e9, l4_link_bw=None, l4_link_latency_s=0.0, l4_pool_bw=None,
                     fit_a=0.01, fit_b=1e-4, fit_c=1e-9)

SPECS = [            # the sample trace reuses little: tiers of thousands of blocks see hits
    HierarchySpec((TierSpec("l1", 300 * BB), TierSpec("l2", 1500 * BB), TierSpec("l3", 6000 * BB)), BB),
    HierarchySpec((TierSpec("l1", 300 * BB, "s3fifo", 60.0), TierSpec("l2", 1200 * BB, "s3fifo", 60.0),
                   TierSpec("l3", 5000 * BB, "s3fifo", 60.0, admission="tinylfu")), BB, write_policy="back"),
    HierarchySpec((TierSpec("l2", 1000 * BB, "fifo", 40.0), TierSpec("l3", 5000 * BB, "fifo", layout="log",
                                                                   admission="second-access")),
                  BB, write_policy="back", inclusion="exclusive", segment_bytes=64 * BB),
]


def _run(spec, router_name, reference: bool, monkeypatch):
    with monkeypatch.context() as m:
        if reference:
            m.setattr(nodes_mod, "Hierarchy", ReferenceHierarchy)
        tr = read_trace("mooncake-sample")
        router = make_router(router_name, 3, seed=1)
        cols, nodes, pool = simulate_router(tr, spec, 3, 2, router, TIMING, tr.block_tokens)
        kinds = {type(n.hier) for n in nodes}
        return cols, summarise(cols, nodes, pool, spec, router), [n.held() for n in nodes], kinds


@pytest.mark.parametrize("router", ROUTERS)
@pytest.mark.parametrize("spec", range(len(SPECS)))
def test_compiled_nodes_equal_reference_nodes(router, spec, monkeypatch):
    s = SPECS[spec]
    cols, summary, held, kinds = _run(s, router, False, monkeypatch)
    r_cols, r_summary, r_held, r_kinds = _run(s, router, True, monkeypatch)
    assert kinds == {Hierarchy} and r_kinds == {ReferenceHierarchy}
    assert cols.keys() == r_cols.keys()
    for c in cols:
        assert np.array_equal(cols[c], r_cols[c]), c
    assert summary == r_summary and held == r_held
    assert summary["global"]["hit_blocks"] > 0


def test_cached_prefix_is_contains_without_recency(monkeypatch):
    """The compiled cached_prefix equals the reference's at every request, TTL expiry included, and leaves
    the next request's hits unchanged (no recency update)."""
    spec = HierarchySpec((TierSpec("l1", 200 * BB, "lru", 5.0), TierSpec("l2", 800 * BB, "s3fifo", 5.0),
                          TierSpec("l3", 3000 * BB, "fifo")), BB)
    tr = read_trace("mooncake-sample")
    ref, jit = ReferenceHierarchy(spec), Hierarchy(spec)
    seen = 0
    for i in range(300):
        a, b = int(tr.offsets[i]), int(tr.offsets[i + 1])
        keys = tr.keys[a:b].tolist()
        now = float(tr.timestamp_s[i])
        for names in (("l1", "l2", "l3"), ("l1",), ("l2", "l3")):
            got = jit.cached_prefix(keys, now + 3.0, names)
            assert got == ref.cached_prefix(keys, now + 3.0, names)
            seen += got
        assert ref.request(now, keys) == jit.request(now, keys)
    assert seen > 0


def test_nodes_with_the_shared_pool_run_compiled():
    spec = HierarchySpec((TierSpec("l2", 10 * BB), TierSpec("l4", 50 * BB)), BB)
    hier = Node(0, spec, 1, None).hier
    assert isinstance(hier, Hierarchy) and hier.pool is not None
    assert type(Node(0, SPECS[0], 1, None).hier) is Hierarchy
