"""Cluster nodes without a shared L4 run the compiled Hierarchy: every router's per-request table, per-node
summary and residency equal those of nodes running the Python ReferenceHierarchy on the same trace; nodes with
the shared L4 pool run one compiled SharedPool (below)."""

from __future__ import annotations

import numpy as np
import pytest

import kvbench.cluster.nodes as nodes_mod
from kvbench.cluster.nodes import Node
from kvbench.cluster.routers import ROUTERS, make_router
from kvbench.cluster.sim import TimingModel, simulate_router, summarise
from kvbench.sim.tiers import Hierarchy, HierarchySpec, ReferenceHierarchy, TierSpec
from kvbench.stream.traces import read_trace
from kvbench.cluster.nodes import LOCAL_TIERS
from kvbench.cluster.nodes import node_hierarchies
from kvbench.cluster.nodes import share_tier
from kvbench.sim.shared_pool import SharedPool
from kvbench.errors import SpecError
import itertools

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
        return cols, summarise(cols, nodes, pool, spec, router, drive=None, op=0.07, from_request=0), [n.held() for n in nodes], kinds


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


# --- Cluster nodes sharing an L4 pool run compiled (one kvbench.sim.shared_pool.SharedPool) with the results of
# Python :class:`~kvbench.sim.tiers.ReferenceHierarchy` nodes whose L4 is one object (``share_tier``): per request
# hits per tier, every block event in order, per-node counters (promotions, admissions, evictions, writes),
# residency, production; the router's ``cached_prefix``; and every router's table and summary end to end.
POOL_BB = 8192


WP_INCL = [("through", "inclusive"), ("back", "inclusive"), ("back", "exclusive")]


# every admission policy, small enough for tiny tiers to reach the ghost lists' bound, the sketch's ageing, both
# thresholds
ADMISSIONS = {
    "second-access": ("second-access", "second-access:ghost=0.5"),
    "tinylfu": ("tinylfu", "tinylfu:width=0.5:sample=2"),
    "prefix-depth": ("prefix-depth:depth=3", "prefix-depth:beyond_shared=1:ghost=0.5"),
    "threshold": ("threshold:min_blocks=3", "threshold:window=1.5:ghost=0.5"),
}


def _random_trace(seed: int, n_req: int = 200):
    """Conversations sharing prefixes (hits), random lengths, float arrival gaps; a few long requests."""
    rng = np.random.default_rng(seed)
    convs = [list(rng.integers(1, 2**63, 3)) for _ in range(8)]
    reqs, times, t = [], [], 0.0
    for _ in range(n_req):
        c = convs[rng.integers(len(convs))]
        c.extend(rng.integers(1, 2**64 - 1, int(rng.integers(0, 4)), dtype=np.uint64).tolist())
        keys = list(c[:int(rng.integers(1, len(c) + 1))])
        if rng.random() < 0.04:
            keys += rng.integers(1, 2**64 - 1, 40, dtype=np.uint64).tolist()
        reqs.append(keys)
        t += float(rng.exponential(1.0))
        times.append(t)
        if rng.random() < 0.1:
            convs[rng.integers(len(convs))] = list(rng.integers(1, 2**63, 2))
    offsets = np.cumsum([0] + [len(r) for r in reqs]).astype(np.int64)
    return np.array(times), offsets, np.array([int(k) for r in reqs for k in r], dtype=np.uint64)


def _spec(seed, policy, ttl, wp_incl, promote, layout, admission="all"):
    """Random per-node tiers (some of L1-L3, maybe none) above an L4 pool larger than each of them."""
    rng = np.random.default_rng(seed)
    names = [n for n in ("l1", "l2", "l3") if rng.random() < 0.6]
    seg = int(rng.integers(2, 5)) * POOL_BB
    tiers = []
    for n in names + ["l4"]:
        cap = int(rng.integers(2, 12) if n != "l4" else rng.integers(8, 40)) * POOL_BB
        if layout == "log" and n in ("l3", "l4"):
            cap = max(cap, 2 * seg + int(rng.integers(0, 3)) * POOL_BB)
        adm = admission if n in ("l3", "l4") and (n == "l4" or rng.random() < 0.6) else "all"
        tiers.append(TierSpec(n, cap, policy, ttl_s=(ttl if rng.random() < 0.8 else None) if ttl else None,
                              layout=layout, trim=bool(rng.random() < 0.5), admission=adm))
    wp, incl = wp_incl
    return HierarchySpec(tuple(tiers), POOL_BB, write_policy=wp, inclusion=incl, promote=promote, segment_bytes=seg,
                         spare_slots=int(rng.integers(0, 3)))


def _reference(spec, n):
    hiers = [ReferenceHierarchy(spec) for _ in range(n)]
    share_tier(hiers, "l4")
    return hiers


def _same(spec, seed, n_nodes=3, n_req=200):
    """Route a random trace over ``n_nodes`` at random (a conversation visits several nodes: the pool serves
    them all); the compiled pool's members and the reference nodes agree at every step."""
    times, offsets, keys = _random_trace(seed, n_req)
    route = np.random.default_rng(seed + 1).integers(0, n_nodes, times.size)
    pool = SharedPool(spec, n_nodes, int(np.diff(offsets).max()))
    jit, ref = pool.members, _reference(spec, n_nodes)
    hits = np.zeros(5, np.int64)          # per level, then admission rejects
    for i in range(times.size):
        j, a, b = int(route[i]), int(offsets[i]), int(offsets[i + 1])
        if i % 7 == 0:          # the router's question, before the request: every node, its own tiers
            k = keys[a:b].tolist()
            want = [r.cached_prefix(k, times[i], LOCAL_TIERS) for r in ref]
            assert pool.cached_prefix(keys[a:b], times[i], LOCAL_TIERS) == want
            # every tier, the pool's too: each member's own answer (the pool's row made current for each)
            assert pool.cached_prefix(keys[a:b], times[i]) == [r.cached_prefix(k, times[i]) for r in ref]
            other = (j + 1) % n_nodes          # with the pool too (its row made current first)
            assert jit[other].cached_prefix(k, times[i]) == ref[other].cached_prefix(k, times[i])
        args = (times[i:i + 1], np.array([0, b - a]), keys[a:b])
        r_req, r_ev = ref[j].run(*args, first_request=i)
        j_req, j_ev = jit[j].run(*args, first_request=i)
        assert np.array_equal(r_req, j_req), i
        assert np.array_equal(r_ev, j_ev), i
        hits[:4] += [int(r_req[0][f"hit_l{x}"]) for x in range(1, 5)]
    for r, h in zip(ref, jit):
        assert r.produced == h.produced
        for rt, jt in zip(r.tiers, h.tiers):
            assert rt.c == jt.c, rt.spec.name
            assert rt.meta == jt.meta, rt.spec.name
            if rt.store is not None:
                assert rt.store.used == jt.store.used
                if rt.store.layout == "log":
                    assert (rt.store.reclaimed_segments, rt.store.dropped_blocks) == (
                        jt.store.reclaimed_segments, jt.store.dropped_blocks)
            hits[4] += rt.c.admission_rejects
    return hits


POOL_TIMING = TimingModel(l2_bw=20e9, l3_bw=5e9, l4_link_bw=4e9, l4_link_latency_s=20e-6, l4_pool_bw=10e9,
                     fit_a=0.01, fit_b=1e-4, fit_c=1e-9)


BIG = 262144


CLUSTER_SPECS = [            # the sample trace reuses little: small node tiers over a pool of thousands of blocks
    HierarchySpec((TierSpec("l1", 50 * BIG), TierSpec("l2", 150 * BIG), TierSpec("l3", 400 * BIG),
                   TierSpec("l4", 4000 * BIG)), BIG),
    HierarchySpec((TierSpec("l2", 100 * BIG, "s3fifo", 60.0), TierSpec("l3", 300 * BIG, "s3fifo", 60.0,
                                                                      admission="tinylfu"),
                   TierSpec("l4", 6000 * BIG, "s3fifo", 600.0, admission="prefix-depth:depth=16")), BIG,
                  write_policy="back"),
    HierarchySpec((TierSpec("l2", 300 * BIG, "fifo", 40.0), TierSpec("l4", 3000 * BIG, "fifo", layout="log",
                                                                    admission="threshold:window=30")),
                  BIG, write_policy="back", inclusion="exclusive", segment_bytes=64 * BIG),
]


def _cluster(spec, router_name, reference: bool, monkeypatch):
    with monkeypatch.context() as m:
        if reference:
            m.setattr(nodes_mod, "pool_compiled", lambda s: False)
        tr = read_trace("mooncake-sample")
        router = make_router(router_name, 3, seed=1)
        cols, nodes, pool = simulate_router(tr, spec, 3, 2, router, POOL_TIMING, tr.block_tokens)
        kinds = {type(n.hier) for n in nodes}
        return cols, summarise(cols, nodes, pool, spec, router, drive=None, op=0.07, from_request=0), [n.held() for n in nodes], kinds


@pytest.mark.slow
@pytest.mark.parametrize("policy,ttl,wp_incl,promote,layout",
                         list(itertools.product(("lru", "fifo", "s3fifo"), (None, 3.0), WP_INCL, (True, False),
                                                ("slot", "log"))))
def test_pool_equals_shared_reference(policy, ttl, wp_incl, promote, layout):
    hits = np.zeros(5, np.int64)
    for seed in range(2):
        salt = sum(map(ord, f"{policy}{ttl}{wp_incl}{promote}{layout}"))
        hits += _same(_spec(seed * 7919 + salt, policy, ttl, wp_incl, promote, layout), seed + salt)
    assert hits[3] > 0                       # the pool served hits


@pytest.mark.slow
@pytest.mark.parametrize("admission,policy,wp_incl",
                         list(itertools.product(ADMISSIONS, ("lru", "fifo", "s3fifo"), WP_INCL)))
def test_pool_with_admission_equals_shared_reference(admission, policy, wp_incl):
    """Each node keeps its own admission policy in front of the pool (and of its L3), as the reference does."""
    hits = np.zeros(5, np.int64)
    for seed, variant in enumerate(ADMISSIONS[admission]):
        salt = sum(map(ord, f"{admission}{policy}{wp_incl}"))
        spec = _spec(seed * 104729 + salt, policy, 3.0 if seed else None, wp_incl, bool(seed % 2 == 0),
                     ("slot", "log")[seed], admission=variant)
        hits += _same(spec, seed + salt, n_nodes=2 + seed)
    assert hits[:4].sum() > 0 and hits[4] > 0          # hits, and the policies refused some blocks


def test_by_hand_one_pool_for_two_nodes():
    """L2 of 2 blocks per node over an L4 pool of 4 (LRU, write-through). Node 0 asks [1, 2]: both made, in its
    L2 and the pool (the pool's order, oldest first: 2, 1: a request's blocks are made deepest first). Node 1
    asks [1, 2, 3]: 3 is made; 2 and 1 are pool hits (2 L4 hits; pool order 3, 2, 1). Node 0 asks [1, 2, 3]: 3
    from the pool, 2 and 1 from its L2 (pool order 2, 1, 3). Node 1 asks [5, 6]: both made, the pool evicts its
    oldest, 2 (node 1's eviction). Node 0 asks [2]: no longer in the pool, nor its L2 (which took 3 over 2): a
    miss, and the pool evicts 1 (node 0's)."""
    spec = HierarchySpec((TierSpec("l2", 2 * POOL_BB), TierSpec("l4", 4 * POOL_BB)), POOL_BB)
    reqs = [(0, [1, 2]), (1, [1, 2, 3]), (0, [1, 2, 3]), (1, [5, 6]), (0, [2])]
    want = [(0, 0, 0), (2, 0, 2), (3, 2, 1), (0, 0, 0), (0, 0, 0)]      # (hit blocks, L2 hits, L4 hits)
    for hiers in (SharedPool(spec, 2, 3).members, _reference(spec, 2)):
        got = []
        for i, (node, keys) in enumerate(reqs):
            r, _ = hiers[node].run(np.array([float(i)]), np.array([0, len(keys)]), np.array(keys, np.uint64), i)
            got.append((int(r[0]["hit_blocks"]), int(r[0]["hit_l2"]), int(r[0]["hit_l4"])))
        assert got == want
        c0, c1 = hiers[0].counters()["l4"], hiers[1].counters()["l4"]
        assert (c0.hit_blocks, c0.create_writes, c0.evictions) == (1, 3, 1)
        assert (c1.hit_blocks, c1.create_writes, c1.evictions) == (2, 3, 1)
        assert set(hiers[0].tier("l4").meta) == set(hiers[1].tier("l4").meta) == {2, 3, 5, 6}
        assert hiers[0].resident("l2") == {2, 3} and hiers[1].resident("l2") == {5, 6}


@pytest.mark.slow
@pytest.mark.parametrize("router", ROUTERS)
@pytest.mark.parametrize("spec", range(len(CLUSTER_SPECS)))
def test_cluster_with_compiled_pool_equals_reference(router, spec, monkeypatch):
    """Every router on the sample trace, 3 nodes over the pool with its links: the per-request table (TTFT and
    its inputs), the summary (per-node counters, wear from the L3/L4 write streams, links) and residency."""
    s = CLUSTER_SPECS[spec]
    cols, summary, held, kinds = _cluster(s, router, False, monkeypatch)
    r_cols, r_summary, r_held, r_kinds = _cluster(s, router, True, monkeypatch)
    assert len(kinds) == 1 and issubclass(kinds.pop(), Hierarchy) and r_kinds == {ReferenceHierarchy}
    for c in r_cols:
        assert np.array_equal(cols[c], r_cols[c]), c
    assert summary == r_summary and held == r_held
    assert summary["global"]["tier_hit_ratio"]["l4"] > 0


def test_dispatch_is_explicit(monkeypatch):
    """With the pool: one SharedPool's members (one state), unless pool_compiled says no: reference nodes that
    share one L4 policy object. Without it: separate compiled hierarchies."""
    spec = CLUSTER_SPECS[1]
    hiers = node_hierarchies(spec, 4, 10)
    assert all(isinstance(h, Hierarchy) for h in hiers) and len({id(h.pool) for h in hiers}) == 1
    assert all(h.pool.buf is hiers[0].pool.buf for h in hiers)
    monkeypatch.setattr(nodes_mod, "pool_compiled", lambda s: False)
    ref = node_hierarchies(spec, 3, 10)
    assert {type(h) for h in ref} == {ReferenceHierarchy}
    assert len({id(h.tier("l4").policy) for h in ref}) == 1 and len({id(h.tier("l3").policy) for h in ref}) == 3
    local = node_hierarchies(HierarchySpec(spec.tiers[:2], BIG, write_policy="back"), 2)
    assert {type(h) for h in local} == {Hierarchy} and local[0]._A is not local[1]._A


def test_request_longer_than_the_layout_is_refused():
    spec = HierarchySpec((TierSpec("l2", 2 * POOL_BB), TierSpec("l4", 4 * POOL_BB)), POOL_BB)
    pool = SharedPool(spec, 2, 300)
    keys = np.arange(1, 400, dtype=np.uint64)
    with pytest.raises(RuntimeError, match="more than 300 blocks"):
        pool.members[1].run(np.array([0.0]), np.array([0, keys.size]), keys)


# mutation survivors: the pool's own fast checks (the slow lane above sweeps every policy and layout)

def test_pool_equals_shared_reference_on_a_few_specs():
    """A fast cut of the slow sweeps above: LRU/FIFO/S3-FIFO, TTL, both write policies, exclusive, the log store,
    and each admission policy in front of the pool, 120 requests each over 2-3 nodes."""
    cases = [("lru", None, WP_INCL[0], True, "slot", "all"),
             ("s3fifo", 3.0, WP_INCL[2], False, "log", "tinylfu:width=0.5:sample=2"),
             ("fifo", 3.0, WP_INCL[1], True, "slot", "prefix-depth:beyond_shared=1:ghost=0.5"),
             ("lru", None, WP_INCL[2], False, "slot", "second-access:ghost=0.5"),
             ("s3fifo", None, WP_INCL[1], True, "log", "threshold:min_blocks=3")]
    hits = np.zeros(5, np.int64)
    for seed, (policy, ttl, wp_incl, promote, layout, adm) in enumerate(cases):
        hits += _same(_spec(seed * 31 + 5, policy, ttl, wp_incl, promote, layout, admission=adm), seed + 5,
                      n_nodes=2 + seed % 2, n_req=120)
    assert hits[3] > 0 and hits[4] > 0                  # the pool served hits; admission refused some blocks


def test_pool_layout_bounds():
    spec = HierarchySpec((TierSpec("l2", 2 * POOL_BB), TierSpec("l4", 4 * POOL_BB)), POOL_BB)
    with pytest.raises(SpecError, match="at least one node"):
        SharedPool(spec, 0)
    assert SharedPool(spec, 1).most == 240 and SharedPool(spec, 2, 10).most == 240     # at least 256 - 16
    assert SharedPool(spec, 1, 241).most == 241 and SharedPool(spec, 1, -5).most == 240
    pool = SharedPool(spec, 2)
    keys = np.arange(1, 241, dtype=np.uint64)          # the longest request the layout takes runs
    r, _ = pool.members[1].run(np.array([0.0]), np.array([0, keys.size]), keys)
    assert int(r[0]["hit_blocks"]) == 0 and pool.owner == 1
    with pytest.raises(RuntimeError, match="more than 240 blocks"):
        pool.members[0].run(np.array([1.0]), np.array([0, 241]), np.arange(1, 242, dtype=np.uint64))


def test_pool_regions_hold_every_members_nodes_and_events():
    """The layout by hand: every tier instance's node records and free lists lie inside their regions (the pool's
    once, each node's own tiers side by side), and every member's event rows are the one region at the buffer's
    end, laid out for the longest request."""
    from kvbench.sim import tiers_kernel as K

    spec = HierarchySpec((TierSpec("l1", 3 * POOL_BB), TierSpec("l2", 5 * POOL_BB), TierSpec("l4", 9 * POOL_BB)),
                         POOL_BB)
    pool = SharedPool(spec, 3, 50)
    for i, m in enumerate(pool.members):
        off = i * pool.hdr
        G = m._G
        assert G[K.B_EV] + off + 8 * G[K.G_EVCAP] == pool.buf.size
        assert G[K.G_EVCAP] >= m._ev_need(pool.most)
        for t in range(3):
            row = m._I[t]
            assert G[K.B_NODE] + K.NW * (row[K.NB] + row[K.NN]) <= G[K.B_NFREQ]
            assert G[K.B_NFREQ] + row[K.NB] + row[K.NN] <= G[K.B_NFREE]
    rows = [m._I[t] for m in pool.members for t in range(2)] + [pool.members[0]._I[2]]
    spans = sorted((int(r[K.NB]), int(r[K.NN])) for r in rows)
    assert spans[0][0] == 0 and all(a + n == b for (a, n), (b, _) in zip(spans, spans[1:]))    # side by side
