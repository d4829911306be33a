"""Tier hierarchy on hand-built traces: write-through vs write-back counts, inclusive vs exclusive residency,
promotion on/off, retention expiry, log reclaim, prefix semantics and the single-tier LRU = Mattson identity."""

from __future__ import annotations

import numpy as np
import pytest

from kvbench.errors import SpecError
from kvbench.sim.policies import make_policy, simulate_prefix
from kvbench.sim.tiers import (CREATE_WRITE, DEMOTE_READ, DEMOTE_WRITE, HIT_READ, PROMOTE_WRITE, TRIM, Hierarchy,
                               HierarchySpec, TierSpec)
from tests.conftest import block_trace
from kvbench.sim.tiers import CREATE_WRITE as CW
from kvbench.sim.tiers import DEMOTE_READ as DR
from kvbench.sim.tiers import DEMOTE_WRITE as DW
from kvbench.sim.tiers import EV_READ as R
from kvbench.sim.tiers import EV_TRIM as T
from kvbench.sim.tiers import EV_WRITE as W
from kvbench.sim.tiers import HIT_READ as HR
from kvbench.sim.tiers import PROMOTE_WRITE as PW
from kvbench.sim.tiers import ReferenceHierarchy
from kvbench.sim.tiers import TRIM as TR
from kvbench.sim.tiers import TierCounters
from collections import OrderedDict
from hypothesis import given
from hypothesis import strategies as st
from kvbench.sim.tiers import EV_READ
from kvbench.sim.tiers import EV_TRIM
from kvbench.sim.tiers import EV_WRITE
from kvbench.sim.tiers import KIND_NAMES
from kvbench.sim.tiers import slot_bytes_for
from kvbench.stream.traces import Trace, read_trace
from kvbench.analysis.curves.profile import exact_profile
from tests.conftest import TTL_S
from tests.analysis.curves.test_profile import brute_lru_hits, gap_trace  # the OrderedDict oracle and the gap-trace builder

BB = 8192          # block bytes (already 4 KiB aligned: slot == block)


def _spec(*tiers, **kw):
    return HierarchySpec(tuple(tiers), BB, **kw)


def _trace(requests, times=None):
    """requests: list of key lists (keys used as given: callers pass prefix-chained keys)."""
    t = block_trace(requests, times)
    return t.timestamp_s, t.offsets, t.keys


def _kinds(ev, tier):
    sel = ev["tier"] == tier
    return np.bincount(ev["kind"][sel], minlength=6)


def test_write_through_vs_write_back_counts():
    reqs = [[1], [2], [3], [4]]
    wt = Hierarchy(_spec(TierSpec("l2", 2 * BB), TierSpec("l3", 10 * BB), write_policy="through"))
    _, ev = wt.run(*_trace(reqs))
    assert _kinds(ev, 1)[CREATE_WRITE] == 4 and _kinds(ev, 2)[CREATE_WRITE] == 4
    assert _kinds(ev, 1)[DEMOTE_READ] == 0 and _kinds(ev, 2)[DEMOTE_WRITE] == 0
    wb = Hierarchy(_spec(TierSpec("l2", 2 * BB), TierSpec("l3", 10 * BB), write_policy="back"))
    _, ev = wb.run(*_trace(reqs))
    # keys 1 and 2 are evicted from L2 by 3 and 4: each is read from the arena and written to L3
    assert _kinds(ev, 1)[CREATE_WRITE] == 4 and _kinds(ev, 2)[CREATE_WRITE] == 0
    assert _kinds(ev, 1)[DEMOTE_READ] == 2 and _kinds(ev, 2)[DEMOTE_WRITE] == 2
    assert wb.resident("l3") == {1, 2} and wb.resident("l2") == {3, 4}
    # the demotion read of a slot comes before the write that reuses it
    assert list(ev["kind"]) == [CREATE_WRITE, CREATE_WRITE, DEMOTE_READ, DEMOTE_WRITE, CREATE_WRITE,
                                DEMOTE_READ, DEMOTE_WRITE, CREATE_WRITE]


def test_hit_reads_come_first_and_are_served_by_the_tier_that_holds_the_block():
    h = Hierarchy(_spec(TierSpec("l2", 2 * BB), TierSpec("l3", 10 * BB), write_policy="through", promote=False))
    # request 3 = prefix [10, 11] resident (10 in L3 only, 11 in L3 and L2) + new block 12
    reqs, ev = h.run(*_trace([[10, 11], [20, 21], [10, 11, 12]]))
    assert list(reqs["hit_blocks"]) == [0, 0, 2]
    assert (reqs["hit_l2"][2], reqs["hit_l3"][2]) == (0, 2)          # L2 holds 20, 21 by then
    last = ev[ev["request"] == 2]
    assert list(last["kind"][:2]) == [HIT_READ, HIT_READ] and set(last["tier"][:2]) == {2}
    assert list(last["key"][:2]) == [10, 11]
    assert PROMOTE_WRITE not in last["kind"]                           # promotion off: L2 untouched by hits


@pytest.mark.parametrize("promote", [True, False])
def test_inclusive_promotion_copies(promote):
    h = Hierarchy(_spec(TierSpec("l2", 1 * BB), TierSpec("l3", 10 * BB), write_policy="through", promote=promote))
    reqs, ev = h.run(*_trace([[1], [2], [1]]))
    assert reqs["hit_l3"][2] == 1
    assert (1 in h.resident("l2")) == promote
    assert 1 in h.resident("l3")                                      # a copy: still in L3
    assert _kinds(ev, 1)[PROMOTE_WRITE] == (1 if promote else 0)


def test_exclusive_hierarchy_keeps_each_block_in_one_tier():
    spec = _spec(TierSpec("l1", 3 * BB), TierSpec("l2", 4 * BB), TierSpec("l3", 8 * BB),
                 write_policy="back", inclusion="exclusive")
    h = Hierarchy(spec)
    rng = np.random.default_rng(3)
    total_hits = 0
    for r in range(300):
        n = int(rng.integers(1, 5))
        base = int(rng.integers(0, 12)) * 100
        keys = [base + i for i in range(n)]            # chained: key base+i names prefix of length i+1
        hit, lv, _ = h.request(float(r), keys)
        total_hits += hit
        l1, l2, l3 = h.resident("l1"), h.resident("l2"), h.resident("l3")
        assert not (l1 & l2) and not (l1 & l3) and not (l2 & l3)
        assert len(l1) <= 3 and len(l2) <= 4 and len(l3) <= 8
    assert total_hits > 0
    c = h.counters()
    assert c["l3"].create_writes == 0 and c["l2"].create_writes == 0   # created in L1 only
    assert c["l2"].demote_writes > 0 and c["l3"].demote_writes > 0


def test_exclusive_needs_write_back():
    with pytest.raises(SpecError, match="exclusive.*write-policy back"):
        Hierarchy(_spec(TierSpec("l2", BB), TierSpec("l3", 4 * BB), inclusion="exclusive"))


def test_capacity_below_one_block_and_unknown_policy():
    with pytest.raises(SpecError, match="--l3-capacity 4 KiB cannot hold one KV block of 8 KiB"):
        Hierarchy(_spec(TierSpec("l3", 4096)))
    with pytest.raises(SpecError, match="unknown cache policy 'clock'"):
        Hierarchy(_spec(TierSpec("l2", 4 * BB, policy="clock")))


def test_ttl_expiry_drops_or_demotes():
    times = [0.0, 5.0, 16.0]
    # single tier, 10 s idle retention: the third access is 11 s after the second -> miss
    h = Hierarchy(_spec(TierSpec("l3", 10 * BB, ttl_s=10.0, trim=True)))
    reqs, ev = h.run(*_trace([[1], [1], [1]], times))
    assert list(reqs["hit_blocks"]) == [0, 1, 0]
    assert h.tier("l3").c.expirations == 1 and _kinds(ev, 2)[TRIM] == 1   # expired slot freed and trimmed
    # write-back: expiry from L2 demotes to L3 (no TTL there): the third access hits in L3
    h = Hierarchy(_spec(TierSpec("l2", 10 * BB, ttl_s=10.0), TierSpec("l3", 10 * BB), write_policy="back"))
    reqs, ev = h.run(*_trace([[1], [1], [1]], times))
    assert list(reqs["hit_l2"]) == [0, 1, 0] and list(reqs["hit_l3"]) == [0, 0, 1]


def test_slot_vs_log_write_patterns():
    reqs = [[k] for k in range(40)] + [[k] for k in range(30, 40)]
    slot = Hierarchy(_spec(TierSpec("l3", 8 * BB, trim=True, layout="slot"), spare_slots=2))
    _, ev_s = slot.run(*_trace(reqs))
    w = ev_s[ev_s["op"] == 1]
    # the cache holds its 8 blocks; the 2 spare slots are the store's overhead on top: 10 slots, all used
    assert slot.tier("l3").policy.capacity == 8 and w["slot"].max() == 9
    assert slot.tier("l3").store.footprint_bytes == 10 * BB
    # 32 evictions by the first 40 keys, then a 10-key scan over 8 slots misses all: 10 more, each trimmed
    assert (ev_s["kind"] == TRIM).sum() == 42 and (ev_s["nslots"][ev_s["kind"] == TRIM] == 1).all()

    log = Hierarchy(_spec(TierSpec("l3", 8 * BB, trim=True, layout="log"), segment_bytes=4 * BB))
    st = log.tier("l3").store
    # an 8-block cache = 2 segments, and 1 spare segment on top: 12 blocks of footprint
    assert (st.segment_slots, st.n_segments, log.tier("l3").policy.capacity) == (4, 3, 8)
    assert st.footprint_bytes == 12 * BB
    _, ev_l = log.run(*_trace(reqs))
    w = ev_l[ev_l["op"] == 1]
    seq = w["slot"]
    # appends: each write is the next slot of the head segment; segments are taken whole
    assert ((seq % 4 == 0) | (np.diff(seq, prepend=-1) == 1)).all()
    trims = ev_l[ev_l["kind"] == TRIM]
    assert len(trims) > 0 and (trims["nslots"] == 4).all() and (trims["slot"] % 4 == 0).all()
    assert log.tier("l3").c.trims_slots == 40              # whole segments freed by LRU, trimmed once each


def test_log_reclaim_drops_live_blocks_as_evictions():
    # 4-block LRU on 3 segments of 2 slots. Hits keep 1 (segment 0) and 3 (segment 1) alive while the
    # policy evicts 2, 4 and then 5: every segment holds a live block when the head needs a new one, so
    # the oldest segment (0) is reclaimed and key 1 is dropped although LRU would keep it.
    log = Hierarchy(_spec(TierSpec("l3", 4 * BB, layout="log"), segment_bytes=2 * BB))
    assert log.tier("l3").policy.capacity == 4
    for r, k in enumerate([1, 2, 3, 4, 1, 3, 5, 6, 1, 3, 7]):
        log.request(float(r), [k])
        assert len(log.resident("l3")) <= 4
        assert log.tier("l3").store.used == len(log.resident("l3"))
    assert log.tier("l3").c.reclaim_drops == 1
    assert log.resident("l3") == {3, 6, 7}


def test_single_tier_lru_equals_prefix_simulation_on_sample_trace():
    from kvbench.stream.traces import read_trace
    tr = read_trace("mooncake-sample")
    for cap in (50, 400, 3000):
        h = Hierarchy(HierarchySpec((TierSpec("l2", cap * 262144),), 262144))
        reqs, ev = h.run(tr.timestamp_s, tr.offsets, tr.keys)
        held = h.tier("l2").policy.capacity           # a tier of cap blocks' bytes caches cap blocks
        assert held == cap
        ref = simulate_prefix([tr], make_policy("lru", held))
        assert int(reqs["hit_blocks"].sum()) == ref.hit_blocks
        assert len(ev) == tr.n_blocks                     # one hit read or one create write per block


@pytest.mark.parametrize("policy", ["fifo", "s3fifo"])
def test_hits_are_leading_runs_for_every_policy(policy):
    h = Hierarchy(_spec(TierSpec("l2", 6 * BB, policy=policy), TierSpec("l3", 12 * BB, policy=policy),
                        write_policy="back"))
    rng = np.random.default_rng(5)
    for r in range(200):
        n = int(rng.integers(1, 6))
        base = int(rng.integers(0, 8)) * 100
        keys = [base + i for i in range(n)]
        hit, lv, produced = h.request(float(r), keys)
        assert sum(lv) == hit and hit + produced <= n


def _shadow_check(ev):
    """Replay events on a shadow store: every read must find the (key, version) the plan last wrote there."""
    content = {}
    for e in ev.tolist():
        _, tier, op, kind, slot, nslots, key, version = e
        if op == 1:
            content[(tier, slot)] = (key, version)
        elif op == 2:
            for s in range(slot, slot + nslots):
                content.pop((tier, s), None)
        else:
            assert content.get((tier, slot)) == (key, version), e


@pytest.mark.parametrize("cfg", [
    dict(write_policy="back", inclusion="inclusive", promote=True, layout="slot", policy="lru", ttl=None),
    dict(write_policy="back", inclusion="exclusive", promote=True, layout="log", policy="s3fifo", ttl=None),
    dict(write_policy="through", inclusion="inclusive", promote=False, layout="log", policy="fifo", ttl=30.0),
    dict(write_policy="back", inclusion="inclusive", promote=True, layout="log", policy="lru", ttl=20.0),
])
def test_event_order_is_consistent_for_every_configuration(cfg):
    """Hit reads are hoisted to the front of their request; a shadow store proves no read ever sees data that
    a demotion/creation/trim of the same request (or before) replaced."""
    from kvbench.stream.traces import read_trace

    tr = read_trace("mooncake-sample").slice(0, 300)
    bb = 262144
    tiers = (TierSpec("l1", 4 << 20, cfg["policy"], cfg["ttl"]), TierSpec("l2", 8 << 20, cfg["policy"], cfg["ttl"]),
             TierSpec("l3", 16 << 20, cfg["policy"], cfg["ttl"], layout=cfg["layout"], trim=True),
             TierSpec("l4", 64 << 20, cfg["policy"], cfg["ttl"], trim=True))
    h = Hierarchy(HierarchySpec(tiers, bb, write_policy=cfg["write_policy"], inclusion=cfg["inclusion"],
                                promote=cfg["promote"], segment_bytes=1 << 20))
    reqs, ev = h.run(tr.timestamp_s, tr.offsets, tr.keys)
    assert reqs["hit_blocks"].sum() > 0 and (ev["kind"] == HIT_READ).sum() > 0
    _shadow_check(ev)


@pytest.mark.parametrize("cfg", [
    dict(write_policy="back", inclusion="inclusive", promote=True, layout="slot", policy="lru", ttl=None),
    dict(write_policy="back", inclusion="exclusive", promote=True, layout="log", policy="s3fifo", ttl=None),
    dict(write_policy="through", inclusion="inclusive", promote=False, layout="log", policy="fifo", ttl=30.0),
])
def test_counted_runs_count_the_events_a_run_returns(cfg):
    """run_counted (a dry run's windows) gives the requests run gives, and per (tier level, op) cell the number of
    events and the slots they cover, counted here with bincount from run's rows, window after window."""
    from kvbench.stream.traces import read_trace

    tr = read_trace("mooncake-sample").slice(0, 300)
    tiers = (TierSpec("l1", 4 << 20, cfg["policy"], cfg["ttl"]), TierSpec("l2", 8 << 20, cfg["policy"], cfg["ttl"]),
             TierSpec("l3", 16 << 20, cfg["policy"], cfg["ttl"], layout=cfg["layout"], trim=True),
             TierSpec("l4", 64 << 20, cfg["policy"], cfg["ttl"], trim=True))
    spec = HierarchySpec(tiers, 262144, write_policy=cfg["write_policy"], inclusion=cfg["inclusion"],
                         promote=cfg["promote"], segment_bytes=1 << 20)
    rows, counted = Hierarchy(spec), Hierarchy(spec)
    seen_trims = 0
    for a in range(0, 300, 40):
        b = min(a + 40, 300)
        offs = tr.offsets[a:b + 1] - tr.offsets[a]
        keys = tr.keys[tr.offsets[a]:tr.offsets[b]]
        r1, ev = rows.run(tr.timestamp_s[a:b], offs, keys, first_request=a)
        r2, counts = counted.run_counted(tr.timestamp_s[a:b], offs, keys, first_request=a)
        assert np.array_equal(r1, r2)
        cell = ev["tier"].astype(np.int64) * 3 + ev["op"]
        assert counts.tolist() == [np.bincount(cell, minlength=12).tolist(),
                                   np.bincount(cell, weights=ev["nslots"], minlength=12).astype(np.int64).tolist()]
        seen_trims += int((ev["op"] == 2).sum())
    assert seen_trims > 0 and counts[0].sum() > 0


def test_a_counted_run_of_no_requests_counts_nothing():
    h = Hierarchy(_spec(TierSpec("l1", 4 * BB), TierSpec("l2", 8 * BB)))
    t, o, k = _trace([[1, 2, 3], [1, 2, 4]])
    h.run(t, o, k)                                   # events left in the state from the last batch
    reqs, counts = h.run_counted(np.zeros(0), np.zeros(1, np.int64), np.zeros(0, np.uint64))
    assert len(reqs) == 0 and not counts.any()


# --- The tier simulation on small traces worked out by hand: every block event (order, tier, slot, key, version),
# every counter, the residency and the request rows, for both the compiled Hierarchy and the Python reference.
# 
# The expected values come from the rules in kvbench/sim/tiers.py's docstring and DESIGN.md, applied step by step
# in the comments (LRU order, the slot store's FIFO free list, the log store's segments); they are not read back
# from either implementation, so a bug the two share fails here even though the equivalence tests pass.
IMPLS = [pytest.param(Hierarchy, id="compiled"), pytest.param(ReferenceHierarchy, id="reference")]


def run(cls, spec, requests, times=None, first_request=0):
    offsets = np.cumsum([0] + [len(r) for r in requests]).astype(np.int64)
    keys = np.array([k for r in requests for k in r], dtype=np.uint64)
    times = np.arange(len(requests), dtype=float) if times is None else np.asarray(times, float)
    h = cls(spec)
    reqs, ev = h.run(times, offsets, keys, first_request=first_request)
    return h, reqs, [tuple(int(x) for x in e) for e in ev.tolist()]


def rows(reqs):
    """(blocks, hit blocks, hits in l1..l4, produced) per request."""
    return [(r["blocks"], r["hit_blocks"], r["hit_l1"], r["hit_l2"], r["hit_l3"], r["hit_l4"], r["produced"])
            for r in reqs]


def ev(r, tier, op, kind, slot, key, version, nslots=1):
    return (r, tier, op, kind, slot, nslots, key, version)


def trim(r, tier, slot, nslots=1):
    return (r, tier, T, TR, slot, nslots, 0, -1)


def _bad(*tiers, **kw):
    return HierarchySpec(tuple(tiers), kw.pop("block_bytes", BB), **kw)


@pytest.mark.parametrize("cls", IMPLS)
def test_write_back_demotes_promotes_and_reads_a_block_moved_this_request_after_its_write(cls):
    spec = HierarchySpec((TierSpec("l2", 2 * BB), TierSpec("l3", 4 * BB, trim=True)), BB, write_policy="back")
    h, reqs, events = run(cls, spec, [[1], [2], [3], [1], [3, 9]])
    assert events == [
        # r0, r1: new blocks are written to the volatile tier only (L2), slots 0 and 1 of its free list
        ev(0, 1, W, CW, 0, 1, 0),
        ev(1, 1, W, CW, 1, 2, 1),
        # r2: L2 is full; LRU evicts 1: read from L2 slot 0, written to L3 (slot 0); 3 reuses L2 slot 0
        ev(2, 1, R, DR, 0, 1, 0), ev(2, 2, W, DW, 0, 1, 0), ev(2, 1, W, CW, 0, 3, 2),
        # r3: 1 is found in L3 (read first), then copied up to L2, which evicts its LRU block 2 to L3 slot 1
        ev(3, 2, R, HR, 0, 1, 0), ev(3, 1, R, DR, 1, 2, 1), ev(3, 2, W, DW, 1, 2, 1), ev(3, 1, W, PW, 1, 1, 0),
        # r4 = [3, 9], deepest first: 9 is new; creating it in L2 evicts 3 (LRU: 3 at r2, 1 at r3) into L3 slot 2.
        # Then 3 is found in L3 - in the slot this request just wrote, so its read follows that write.
        # Promoting 3 back into L2 evicts 1, which L3 already holds: dropped without I/O.
        ev(4, 1, R, DR, 0, 3, 2), ev(4, 2, W, DW, 2, 3, 2), ev(4, 1, W, CW, 0, 9, 3),
        ev(4, 2, R, HR, 2, 3, 2),
        ev(4, 1, W, PW, 1, 3, 2),
    ]
    assert rows(reqs) == [(1, 0, 0, 0, 0, 0, 1), (1, 0, 0, 0, 0, 0, 1), (1, 0, 0, 0, 0, 0, 1),
                          (1, 1, 0, 0, 1, 0, 0), (2, 1, 0, 0, 1, 0, 1)]
    assert reqs["request"].tolist() == [0, 1, 2, 3, 4] and reqs["arrival_s"].tolist() == [0, 1, 2, 3, 4]
    c = h.counters()
    assert c["l2"] == TierCounters(create_writes=4, promote_writes=2, demote_reads=3, evictions=4, peak_resident=2)
    assert c["l3"] == TierCounters(hit_blocks=2, hit_reads=2, demote_writes=3, peak_resident=3)
    assert (c["l2"].writes, c["l2"].reads, c["l3"].writes, c["l3"].reads) == (6, 3, 3, 2)
    assert h.resident("l2") == {9, 3} and h.resident("l3") == {1, 2, 3}
    assert h.produced == 4
    assert h.tier("l2").meta == {3: (1, 2), 9: (0, 3)}
    assert h.tier("l3").meta == {1: (0, 0), 2: (1, 1), 3: (2, 2)}
    assert (h.tier("l2").store.used, h.tier("l3").store.used) == (2, 3)


@pytest.mark.parametrize("cls", IMPLS)
def test_write_through_writes_every_tier_and_trims_an_evicted_slot(cls):
    spec = HierarchySpec((TierSpec("l2", 2 * BB), TierSpec("l3", 4 * BB, trim=True)), BB)
    h, reqs, events = run(cls, spec, [[1], [2], [3], [1], [4], [5]])
    assert events == [
        ev(0, 1, W, CW, 0, 1, 0), ev(0, 2, W, CW, 0, 1, 0),
        ev(1, 1, W, CW, 1, 2, 1), ev(1, 2, W, CW, 1, 2, 1),
        # L2 evicts 1 without demoting it (L3 already has it; write-through never demotes); L2 is not trimmed
        ev(2, 1, W, CW, 0, 3, 2), ev(2, 2, W, CW, 2, 3, 2),
        # 1 hits in L3 (its lookup makes it L3's most recent) and is copied into L2, evicting 2 there
        ev(3, 2, R, HR, 0, 1, 0), ev(3, 1, W, PW, 1, 1, 0),
        ev(4, 1, W, CW, 0, 4, 3), ev(4, 2, W, CW, 3, 4, 3),
        # L3 is full: LRU order 2, 3, 1, 4 -> 2 goes, its slot 1 is trimmed, then reused by 5
        ev(5, 1, W, CW, 1, 5, 4), trim(5, 2, 1), ev(5, 2, W, CW, 1, 5, 4),
    ]
    assert rows(reqs)[3] == (1, 1, 0, 0, 1, 0, 0)
    c = h.counters()
    assert c["l2"] == TierCounters(create_writes=5, promote_writes=1, evictions=4, peak_resident=2)
    assert c["l3"] == TierCounters(hit_blocks=1, hit_reads=1, create_writes=5, trims_slots=1, evictions=1,
                                   peak_resident=4)
    assert h.resident("l2") == {4, 5} and h.resident("l3") == {1, 3, 4, 5}


@pytest.mark.parametrize("cls", IMPLS)
@pytest.mark.parametrize("promote", [True, False])
def test_a_hit_below_l1_goes_to_every_tier_above_or_only_to_the_gpu(cls, promote):
    # L1 is simulated HBM: counted, no events; L1 holds one block, L2 one slot, L3 four
    spec = HierarchySpec((TierSpec("l1", BB), TierSpec("l2", BB), TierSpec("l3", 4 * BB)), BB, promote=promote)
    h, reqs, events = run(cls, spec, [[1], [2], [1]])
    want = [ev(0, 1, W, CW, 0, 1, 0), ev(0, 2, W, CW, 0, 1, 0),
            ev(1, 1, W, CW, 0, 2, 1), ev(1, 2, W, CW, 1, 2, 1),        # L2 evicts 1 and reuses slot 0
            ev(2, 2, R, HR, 0, 1, 0)]                                   # 1 is found in L3 only
    if promote:
        want.append(ev(2, 1, W, PW, 0, 1, 0))                          # copied into L2 (and L1: no event)
    assert events == want
    assert rows(reqs)[2] == (1, 1, 0, 0, 1, 0, 0)
    c = h.counters()
    assert (c["l1"].create_writes, c["l1"].promote_writes, c["l1"].evictions) == (2, 1, 2)
    assert c["l2"].promote_writes == int(promote)
    assert h.resident("l1") == {1} and h.resident("l2") == ({1} if promote else {2})
    assert h.tier("l1").meta == {1: (-1, 0)}                            # L1 has no slots


@pytest.mark.parametrize("cls", IMPLS)
def test_deepest_first_creation_can_evict_the_prefix_it_is_about_to_look_up(cls):
    spec = HierarchySpec((TierSpec("l1", 2 * BB), TierSpec("l2", 2 * BB)), BB, write_policy="back")
    h, reqs, events = run(cls, spec, [[1, 2], [1, 2, 3]])
    assert events == [
        # deepest first: 2 is produced first (version 0), then 1 (version 1); write-back creates in L1 and L2
        ev(0, 1, W, CW, 0, 2, 0), ev(0, 1, W, CW, 1, 1, 1),
        # 3 (version 2) evicts LRU block 2 from L1 (L2 holds it: no demotion) and from L2 (slot 0 reused);
        # then 2 is missing, produced again (version 3) and evicts 1 (slot 1); then 1 (version 4) evicts 3
        ev(1, 1, W, CW, 0, 3, 2), ev(1, 1, W, CW, 1, 2, 3), ev(1, 1, W, CW, 0, 1, 4),
    ]
    assert rows(reqs) == [(2, 0, 0, 0, 0, 0, 2), (3, 0, 0, 0, 0, 0, 3)]
    c = h.counters()
    assert (c["l1"].evictions, c["l2"].evictions, c["l2"].demote_reads, c["l1"].create_writes) == (3, 3, 0, 5)
    assert h.resident("l1") == {1, 2} and h.tier("l2").meta == {2: (1, 3), 1: (0, 4)}


@pytest.mark.parametrize("cls", IMPLS)
def test_hits_in_l1_count_at_level_one(cls):
    spec = HierarchySpec((TierSpec("l1", 4 * BB), TierSpec("l2", 4 * BB)), BB, write_policy="back")
    h, reqs, events = run(cls, spec, [[1, 2], [1, 2, 3]])
    assert events == [ev(0, 1, W, CW, 0, 2, 0), ev(0, 1, W, CW, 1, 1, 1), ev(1, 1, W, CW, 2, 3, 2)]
    assert rows(reqs)[1] == (3, 2, 2, 0, 0, 0, 1)
    c = h.counters()
    assert (c["l1"].hit_blocks, c["l1"].hit_reads, c["l2"].hit_blocks) == (2, 0, 0)


@pytest.mark.parametrize("cls", IMPLS)
def test_exclusive_promotion_moves_the_block_and_trims_its_old_slot(cls):
    spec = HierarchySpec((TierSpec("l2", 2 * BB), TierSpec("l3", 4 * BB, trim=True)), BB, write_policy="back",
                         inclusion="exclusive")
    h, reqs, events = run(cls, spec, [[1], [2], [3], [1]])
    assert events == [
        ev(0, 1, W, CW, 0, 1, 0), ev(1, 1, W, CW, 1, 2, 1),
        ev(2, 1, R, DR, 0, 1, 0), ev(2, 2, W, DW, 0, 1, 0), ev(2, 1, W, CW, 0, 3, 2),
        # 1 is read from L3, taken out of it (slot 0 trimmed and put back at the end of L3's free list),
        # then moved into L2, which demotes 2 to L3's next free slot (1)
        ev(3, 2, R, HR, 0, 1, 0), trim(3, 2, 0),
        ev(3, 1, R, DR, 1, 2, 1), ev(3, 2, W, DW, 1, 2, 1), ev(3, 1, W, PW, 1, 1, 0),
    ]
    assert h.resident("l2") == {3, 1} and h.resident("l3") == {2}
    c = h.counters()
    assert c["l3"] == TierCounters(hit_blocks=1, hit_reads=1, demote_writes=2, trims_slots=1, peak_resident=1)
    assert c["l2"].evictions == 2 and c["l3"].evictions == 0


@pytest.mark.parametrize("cls", IMPLS)
@pytest.mark.parametrize("policy", ["lru", "fifo", "s3fifo"])
def test_a_block_idle_exactly_the_ttl_stays_and_one_idle_longer_is_demoted(cls, policy):
    spec = HierarchySpec((TierSpec("l2", 10 * BB, policy=policy, ttl_s=10.0), TierSpec("l3", 10 * BB)), BB,
                         write_policy="back")
    # idle 10 s (exactly the TTL) twice: kept; then idle 10.5 s: expired from L2, demoted to L3, found there
    h, reqs, events = run(cls, spec, [[1], [1], [1], [1]], times=[0.0, 10.0, 20.0, 30.5])
    assert [r[3] for r in rows(reqs)] == [0, 1, 1, 0] and [r[4] for r in rows(reqs)] == [0, 0, 0, 1]
    assert events == [
        ev(0, 1, W, CW, 0, 1, 0), ev(1, 1, R, HR, 0, 1, 0), ev(2, 1, R, HR, 0, 1, 0),
        # the expiry demotes 1 into L3 slot 0, which this request then reads (after the write); the hit is
        # promoted back into L2's next free slot (1: slot 0 went to the back of the free list)
        ev(3, 1, R, DR, 0, 1, 0), ev(3, 2, W, DW, 0, 1, 0), ev(3, 2, R, HR, 0, 1, 0), ev(3, 1, W, PW, 1, 1, 0),
    ]
    c = h.counters()
    assert (c["l2"].expirations, c["l2"].evictions, c["l3"].demote_writes) == (1, 0, 1)


@pytest.mark.parametrize("cls", IMPLS)
@pytest.mark.parametrize("policy", ["lru", "fifo", "s3fifo"])
def test_an_expired_block_in_the_last_tier_is_dropped_and_trimmed(cls, policy):
    spec = HierarchySpec((TierSpec("l3", 4 * BB, policy=policy, ttl_s=5.0, trim=True),), BB)
    # 1 idle 5 s (kept), 2 never touched again: at t = 10.5 both are idle > 5 s and expire
    h, reqs, events = run(cls, spec, [[1], [2], [1], [3]], times=[0.0, 4.0, 5.0, 10.5])
    assert events == [ev(0, 2, W, CW, 0, 1, 0), ev(1, 2, W, CW, 1, 2, 1), ev(2, 2, R, HR, 0, 1, 0),
                      trim(3, 2, 1), trim(3, 2, 0), ev(3, 2, W, CW, 2, 3, 2)]
    c = h.counters()["l3"]
    assert (c.expirations, c.trims_slots, c.evictions, c.hit_blocks) == (2, 2, 0, 1)
    assert h.resident("l3") == {3}


@pytest.mark.parametrize("cls", IMPLS)
def test_log_store_appends_in_segments_and_frees_a_dead_sealed_segment(cls):
    # a 4-block LRU cache in segments of 2: 2 segments, and 1 spare on top (6 slots)
    spec = HierarchySpec((TierSpec("l3", 4 * BB, trim=True, layout="log"),), BB, segment_bytes=2 * BB)
    h, reqs, events = run(cls, spec, [[1], [2], [3], [4], [5], [6], [7], [4], [8], [9]])
    assert h.tier("l3").policy.capacity == 4
    assert events == [
        ev(0, 2, W, CW, 0, 1, 0), ev(1, 2, W, CW, 1, 2, 1),        # segment 0
        ev(2, 2, W, CW, 2, 3, 2), ev(3, 2, W, CW, 3, 4, 3),        # segment 0 sealed, segment 1
        ev(4, 2, W, CW, 4, 5, 4),                                  # 1 evicted (segment 0 keeps 2), segment 2
        trim(5, 2, 0, 2), ev(5, 2, W, CW, 5, 6, 5),                # 2 evicted: sealed segment 0 is dead, freed
        ev(6, 2, W, CW, 0, 7, 6),                                  # 3 evicted; segment 2 sealed, head = 0
        ev(7, 2, R, HR, 3, 4, 3),
        ev(8, 2, W, CW, 1, 8, 7),                                  # 5 evicted (LRU: 5, 6, 7, 4)
        trim(9, 2, 4, 2), ev(9, 2, W, CW, 4, 9, 8),                # 6 evicted: segment 2 dead; head -> 2
    ]
    c = h.counters()["l3"]
    assert (c.evictions, c.trims_slots, c.reclaim_drops, c.hit_blocks) == (5, 4, 0, 1)
    assert h.tier("l3").store.used == 4 and h.resident("l3") == {4, 7, 8, 9}


@pytest.mark.parametrize("cls", IMPLS)
def test_batches_carry_state_and_number_requests_from_first_request(cls):
    spec = HierarchySpec((TierSpec("l2", 4 * BB),), BB)
    h = cls(spec)
    off = np.array([0, 2, 3], np.int64)
    r1, e1 = h.run(np.array([0.0, 1.0]), off, np.array([5, 6, 5], np.uint64), first_request=100)
    r2, e2 = h.run(np.array([2.5]), np.array([0, 2], np.int64), np.array([5, 6], np.uint64), first_request=102)
    assert r1["request"].tolist() == [100, 101] and r2["request"].tolist() == [102]
    assert r2["arrival_s"].tolist() == [2.5]
    assert [tuple(int(x) for x in e) for e in e2.tolist()] == [ev(102, 1, R, HR, 1, 5, 1), ev(102, 1, R, HR, 0, 6, 0)]
    assert rows(r1) == [(2, 0, 0, 0, 0, 0, 2), (1, 1, 0, 1, 0, 0, 0)] and rows(r2) == [(2, 2, 0, 2, 0, 0, 0)]
    assert h.produced == 2
    r3, e3 = h.run(np.zeros(0), np.zeros(1, np.int64), np.zeros(0, np.uint64))
    assert r3.size == 0 and e3.size == 0


@pytest.mark.parametrize("cls", IMPLS)
def test_single_request_api_and_cached_prefix(cls):
    spec = HierarchySpec((TierSpec("l1", 2 * BB), TierSpec("l3", 4 * BB, ttl_s=5.0)), BB)
    h = cls(spec)
    assert h.request(0.0, [1, 2, 3]) == (0, [0, 0, 0, 0], 3)
    # deepest first: 3, 2, then 1 evicts 3 from the 2-block L1; L3 holds all three
    assert h.resident("l1") == {1, 2} and h.resident("l3") == {1, 2, 3}
    assert h.cached_prefix([1, 2, 3, 4], 1.0) == 3
    assert h.cached_prefix([1, 2, 3], 1.0, names=("l1",)) == 2
    assert h.cached_prefix([3, 1], 1.0, names=("l1",)) == 0
    assert h.cached_prefix([1, 2], 5.0, names=("l3",)) == 2        # idle exactly the TTL: still held
    assert h.cached_prefix([1, 2], 5.5, names=("l3",)) == 0
    assert h.cached_prefix([2], 1.0, names=("l1",)) == 1
    # contains() leaves recency alone: 2 is still L1's LRU block, so a new block evicts it (not 1)
    assert h.request(1.0, [4]) == (0, [0, 0, 0, 0], 1)
    assert h.resident("l1") == {1, 4}
    assert h.request(2.0, [1]) == (1, [1, 0, 0, 0], 0)


def test_capacities_in_blocks_l1_by_block_bytes_stored_tiers_by_slots_spares_on_top():
    spec = HierarchySpec((TierSpec("l1", 3 * 5000), TierSpec("l2", 3 * 5000), TierSpec("l3", 32 * 8192),
                          TierSpec("l4", 32 * 8192)), 5000, spare_slots=1)
    t1, t2, t3, t4 = spec.tiers
    assert spec.slot_bytes == 8192
    assert spec.capacity_blocks(t1) == 3            # L1: 15000 // 5000 blocks (no 4 KiB rounding)
    assert spec.capacity_blocks(t2) == 1            # L2: 15000 // 8192 = 1 slot
    assert spec.capacity_blocks(t3) == 32           # 32 slots; the spare slot is the store's, on top
    assert spec.capacity_blocks(t4) == 32
    assert spec.capacity_blocks(TierSpec("l2", 8191)) == 0 and spec.capacity_blocks(TierSpec("l3", 8192)) == 1
    assert spec.capacity_blocks(TierSpec("l1", 4999)) == 0 and spec.capacity_blocks(TierSpec("l1", 5000)) == 1
    h = Hierarchy(spec)
    assert [t.policy.capacity for t in h.tiers] == [3, 1, 32, 32]
    assert h.tier("l3").store.n_slots == 33 and h.tier("l3").store.footprint_bytes == 33 * 8192
    assert h.tier("l2").store.n_slots == 1          # a DRAM arena copies synchronously: no spare
    ref = ReferenceHierarchy(spec)
    assert [t.policy.capacity for t in ref.tiers] == [3, 1, 32, 32]
    assert (ref.tier("l2").store.n_slots, ref.tier("l3").store.n_slots, ref.tier("l4").store.n_slots) == (1, 33, 33)


@pytest.mark.parametrize("spec, match", [
    (_bad(), "no cache tier is present"),
    (_bad(TierSpec("l2", BB), block_bytes=0), "KV block size must be > 0"),
    (_bad(TierSpec("l3", 4 * BB), TierSpec("l2", 4 * BB)), "tiers must be distinct names"),
    (_bad(TierSpec("l2", 4 * BB), TierSpec("l2", 4 * BB)), "tiers must be distinct names"),
    (_bad(TierSpec("l5", 4 * BB)), "tiers must be distinct names"),
    (_bad(TierSpec("l2", 4 * BB), write_policy="around"), "unknown write policy 'around'"),
    (_bad(TierSpec("l2", 4 * BB), inclusion="nine"), "unknown inclusion 'nine'"),
    (_bad(TierSpec("l2", 4 * BB, ttl_s=0.0)), "l2: retention must be > 0 s"),
    (_bad(TierSpec("l2", 4 * BB, ttl_s=-1.0)), "l2: retention must be > 0 s"),
    (_bad(TierSpec("l2", 4 * BB, admission="second-access")), "l2: admission policy .* L3/L4 tiers only"),
    (_bad(TierSpec("l1", 4 * BB, admission="tinylfu")), "l1: admission policy .* L3/L4 tiers only"),
    (_bad(TierSpec("l1", BB - 1)), "--l1 .* cannot hold one KV block of 8 KiB"),
    (_bad(TierSpec("l2", BB - 1)), "--l2 .* cannot hold one KV block"),
    (_bad(TierSpec("l4", BB - 1)), "--l4-capacity .* cannot hold one KV block"),
    (_bad(TierSpec("l3", BB - 1), block_desc="tiny-model, 16 tokens"), r"one KV block of 8 KiB \(tiny-model, 16 tokens\)"),
])
@pytest.mark.parametrize("cls", IMPLS)
def test_a_bad_spec_is_refused_with_its_reason(cls, spec, match):
    with pytest.raises(SpecError, match=match):
        cls(spec)


@pytest.mark.parametrize("cls", IMPLS)
def test_a_tiny_positive_ttl_and_admission_on_the_deep_tiers_are_accepted(cls):
    spec = HierarchySpec((TierSpec("l2", 4 * BB, ttl_s=1e-9), TierSpec("l3", 4 * BB, admission="second-access"),
                          TierSpec("l4", 4 * BB, admission="all")), BB)
    h = cls(spec)
    assert h.admission_active
    assert cls(HierarchySpec((TierSpec("l2", 4 * BB), TierSpec("l3", 4 * BB, admission="all")), BB)) \
        .admission_active is False


@pytest.mark.parametrize("cls", IMPLS)
def test_by_default_a_deep_tier_is_not_trimmed_and_a_log_segment_is_64_mib(cls):
    spec = HierarchySpec((TierSpec("l3", 2 * BB),), BB)
    assert (spec.segment_bytes, spec.spare_slots, spec.write_policy, spec.inclusion, spec.promote) == \
        (64 << 20, 0, "through", "inclusive", True)
    h, _, events = run(cls, spec, [[1], [2], [3]])
    assert events == [ev(0, 2, W, CW, 0, 1, 0), ev(1, 2, W, CW, 1, 2, 1), ev(2, 2, W, CW, 0, 3, 2)]   # no trim
    assert h.counters()["l3"].evictions == 1 and h.counters()["l3"].trims_slots == 0
    # 2 * 8192 blocks in two 64 MiB segments of 8 KiB slots, and one spare segment on top
    log = HierarchySpec((TierSpec("l3", 2 * (64 << 20), layout="log"),), BB)
    assert log.capacity_blocks(log.tiers[0]) == 16384
    st = cls(log).tier("l3").store
    assert (st.segment_slots, st.n_segments, st.n_slots) == (8192, 3, 3 * 8192)


@pytest.mark.parametrize("cls", IMPLS)
def test_tinylfu_counts_every_lookup_that_reaches_its_tier_and_halves_at_the_sample_size(cls):
    # a 4-block L3 with TinyLFU: the sample is 10 x 4 = 40 increments; one key looked up 40 times
    spec = HierarchySpec((TierSpec("l3", 4 * BB, admission="tinylfu"),), BB)
    h = cls(spec)
    adm = h.tier("l3").admission
    for r in range(3):
        h.request(float(r), [7])
    assert (adm.estimate(7), adm.increments, adm.resets) == (3, 3, 0)
    for r in range(3, 40):
        h.request(float(r), [7])
    # the counters stop at 15; the 40th increment halves them (15 >> 1 = 7) and the increment count (40 // 2)
    assert (adm.estimate(7), adm.increments, adm.resets) == (7, 20, 1)
    other = HierarchySpec((TierSpec("l3", 4 * BB, admission="second-access"),), BB)
    v = cls(other).tier("l3").admission
    for probe in (lambda: v.estimate(7), lambda: v.resets, lambda: v.increments):
        with pytest.raises(AttributeError):
            probe()


@pytest.mark.parametrize("cls", IMPLS)
def test_log_store_of_one_slot_segments(cls):
    # a 2-block cache in segments of 1 slot: 2 segments and 1 spare on top; each dead segment is freed at once
    spec = HierarchySpec((TierSpec("l3", 2 * BB, trim=True, layout="log"),), BB, segment_bytes=BB)
    h, _, events = run(cls, spec, [[1], [2], [3], [4]])
    assert h.tier("l3").policy.capacity == 2
    st = h.tier("l3").store
    assert (st.segment_slots, st.n_segments, st.n_slots) == (1, 3, 3)
    assert events == [ev(0, 2, W, CW, 0, 1, 0), ev(1, 2, W, CW, 1, 2, 1),
                      trim(2, 2, 0), ev(2, 2, W, CW, 2, 3, 2),      # 1 evicted: segment 0 dead; head -> 2
                      trim(3, 2, 1), ev(3, 2, W, CW, 0, 4, 3)]      # 2 evicted: segment 1 dead; head -> 0


@pytest.mark.parametrize("cls", IMPLS)
@pytest.mark.parametrize("policy, order", [("lru", [0, 1]), ("fifo", [1, 0]), ("s3fifo", [1, 0])])
def test_blocks_expiring_together_go_in_policy_order_keys_compared_unsigned(cls, policy, order):
    big = 2**63 + 1                    # negative as a signed int64: the order must treat keys as unsigned
    spec = HierarchySpec((TierSpec("l3", 4 * BB, policy=policy, ttl_s=1.0, trim=True),), BB)
    # [5, big] is created deepest first: big in slot 0, then 5 in slot 1, both at t = 0 (one deadline, t = 1).
    # LRU expires in recency order (big, then 5); FIFO and S3-FIFO pop the retention heap of (deadline, key),
    # where the tie goes to the smaller key: 5 (slot 1), then big (slot 0).
    h, _, events = run(cls, spec, [[5, big], [9]], times=[0.0, 5.0])
    assert events == [ev(0, 2, W, CW, 0, big, 0), ev(0, 2, W, CW, 1, 5, 1),
                      trim(1, 2, order[0]), trim(1, 2, order[1]), ev(1, 2, W, CW, 2, 9, 2)]
    assert h.counters()["l3"].expirations == 2


@pytest.mark.parametrize("cls", IMPLS)
def test_a_long_batch_of_short_requests_on_large_log_segments(cls):
    # a 128-block LRU cache: 2 segments of 64 slots and 1 spare on top. 3000 new blocks in one batch: 3000 creation
    # writes (more than the first event room the compiled side lays out), 2872 evictions; sequential keys die
    # in the order they were written, so the log keeps appending and reuses whole dead segments
    spec = HierarchySpec((TierSpec("l3", 128 * BB, layout="log"),), BB, segment_bytes=64 * BB)
    h, reqs, events = run(cls, spec, [[k] for k in range(1, 3001)])
    assert len(events) == 3000 and all(e[3] == CW for e in events)
    assert [e[4] for e in events[:130]] == list(range(128)) + [128, 129]
    c = h.counters()["l3"]
    assert (c.create_writes, c.evictions, c.reclaim_drops, c.peak_resident) == (3000, 2872, 0, 128)
    assert h.tier("l3").store.used == 128 and int(reqs["produced"].sum()) == 3000


@pytest.mark.parametrize("cls", IMPLS)
def test_one_long_request_then_its_repeat(cls):
    # 4096 blocks (no spare slots by default) hold the whole 3000-block prefix
    spec = HierarchySpec((TierSpec("l3", 4096 * BB),), BB)
    keys = list(range(1, 3001))
    h, reqs, events = run(cls, spec, [keys, keys])
    # created deepest first: key 3000 is version 0 in slot 0, key 1 version 2999 in slot 2999
    assert len(events) == 6000
    assert events[0] == ev(0, 2, W, CW, 0, 3000, 0) and events[2999] == ev(0, 2, W, CW, 2999, 1, 2999)
    # the repeat reads the prefix in order: key 1 first (slot 2999), key 3000 last (slot 0)
    assert events[3000] == ev(1, 2, R, HR, 2999, 1, 2999) and events[5999] == ev(1, 2, R, HR, 0, 3000, 0)
    assert rows(reqs) == [(3000, 0, 0, 0, 0, 0, 3000), (3000, 3000, 0, 0, 3000, 0, 0)]


@pytest.mark.parametrize("cls", IMPLS)
def test_s3fifo_tier_under_a_stream_of_new_blocks_keeps_its_ghosts(cls):
    # a 3936-block S3-FIFO tier under 12,000 blocks never seen twice: every block misses,
    # 12,000 - 3936 are evicted, and the ghost list of evicted keys grows to its bound alongside the cache
    spec = HierarchySpec((TierSpec("l3", 3936 * BB, policy="s3fifo"),), BB)
    h, reqs, events = run(cls, spec, [[k] for k in range(1, 12001)])
    c = h.counters()["l3"]
    assert (c.create_writes, c.evictions, c.hit_blocks, c.peak_resident) == (12000, 8064, 0, 3936)
    assert len(events) == 12000 and int(reqs["produced"].sum()) == 12000
    assert h.resident("l3") == set(range(8065, 12001))


@pytest.mark.parametrize("cls", IMPLS)
@pytest.mark.parametrize("policy", ["lru", "fifo", "s3fifo"])
def test_a_decimal_gap_equal_to_the_ttl_is_judged_one_way_everywhere(cls, policy):
    """Retention is ``now - last > ttl`` in float seconds, in lookup, contains and expiry alike. A decimal gap
    equal to the TTL (52.8 s -> 53.9 s at 1.1 s: 53.9 - 52.8 = 1.1000000000000014) is then past it, for every
    policy and in the exact curve. Before, expiry used ``last >= now - ttl`` (LRU) or ``last + ttl < now`` (the
    FIFO/S3-FIFO heap), kept the block that lookup expired, and the next hit found no slot: KeyError in the
    reference, 'a hit block has no slot' in the compiled kernel (found by the mutation work, issue 18)."""
    from kvbench.analysis.curves.profile import exact_profile
    from kvbench.stream.traces import Trace

    spec = HierarchySpec((TierSpec("l2", 4 * BB, policy=policy, ttl_s=1.1),), BB)
    h = cls(spec)
    times = (52.8, 53.9, 54.0, 54.2, 55.3)
    assert 53.9 - 52.8 > 1.1 and not 55.3 - 54.2 > 1.1          # the second gap of 1.1 s rounds the other way
    hits = [h.request(t, [1])[0] for t in times]
    assert hits == [0, 0, 1, 1, 1]
    assert h.resident("l2") == {1}
    tr = Trace(np.array(times), np.full(5, 16), np.zeros(5, np.int64), np.arange(6, dtype=np.int64),
               np.ones(5, np.uint64), 16, "gap", "-")
    assert exact_profile(tr, ttl_s=1.1).hits_at([1]).tolist() == [sum(hits)]      # the exact curve agrees


# A reuse gap exactly at the retention time is a hit, just over it a miss: the TTL boundary trace, tests/conftest.py
TTL_BLOCK = 262144                       # tiny-gqa: 512 B/token x 512-token blocks


def test_tier_simulation_keeps_a_block_idle_exactly_the_ttl(ttl_trace_file):
    tr = read_trace(ttl_trace_file)
    for tiers in ([TierSpec("l2", 100 * TTL_BLOCK, ttl_s=TTL_S)],
                  [TierSpec("l1", 100 * TTL_BLOCK, ttl_s=TTL_S), TierSpec("l2", 100 * TTL_BLOCK, ttl_s=TTL_S)]):
        h = Hierarchy(HierarchySpec(tuple(tiers), block_bytes=TTL_BLOCK))
        reqs, _ = h.run(tr.timestamp_s, tr.offsets, tr.keys)
        assert reqs["hit_blocks"].tolist() == [0, 2, 0, 1]


# --- Property tests against brute-force oracles (hypothesis; derandomized in CI, see conftest):
# 
# - the exact one-pass curve (Mattson stack distances, compiled kernel) equals an OrderedDict LRU simulated at
#   every capacity, with and without retention, on random traces;
# - SHARDS at rate 1 is the exact curve;
# - the tier simulation's accounting: its block events agree with its counters kind by kind, every read finds
#   in its slot the content (key, version) last written there, hits per tier add up, and a single LRU tier's
#   hits equal the exact curve at that capacity.
BLOCK = 4096


# prefix-chained, as real traces are (a key names its whole prefix): request = the first n blocks of a chain
chained = st.lists(
    st.tuples(st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.5]),
              st.builds(lambda c, n: [100 * c + i for i in range(1, n + 1)], st.integers(0, 3), st.integers(1, 5))),
    min_size=1, max_size=40)


@given(chained, st.sampled_from(["through", "back"]), st.booleans(), st.integers(1, 6), st.integers(1, 10),
       st.sampled_from(["slot", "log"]), st.booleans())
def test_tier_simulation_accounting(reqs, write_policy, promote, l2_blocks, l3_blocks, layout, l1):
    tr = gap_trace(reqs)
    slot = slot_bytes_for(BLOCK)
    tiers = ([TierSpec("l1", 2 * BLOCK)] if l1 else []) + [
        TierSpec("l2", l2_blocks * slot), TierSpec("l3", l3_blocks * slot + (64 << 20) * (layout == "log"),
                                                   layout=layout, trim=True)]
    h = Hierarchy(HierarchySpec(tuple(tiers), block_bytes=BLOCK, write_policy=write_policy, promote=promote,
                                segment_bytes=4 * slot))
    reqs_out, ev = h.run(tr.timestamp_s, tr.offsets, tr.keys)
    c = h.counters()
    levels = {"l1": 0, "l2": 1, "l3": 2}
    for name, tc in c.items():
        mine = ev[ev["tier"] == levels[name]]
        if name == "l1":                    # simulated HBM: counted, never I/O
            assert mine.size == 0
            continue
        by_kind = {k: int(mine["nslots"][mine["kind"] == i].sum()) for i, k in enumerate(KIND_NAMES)}
        assert by_kind["hit_read"] == tc.hit_reads and by_kind["demote_read"] == tc.demote_reads
        assert by_kind["create_write"] == tc.create_writes and by_kind["promote_write"] == tc.promote_writes
        assert by_kind["demote_write"] == tc.demote_writes and by_kind["trim"] == tc.trims_slots
        assert int((mine["op"] == EV_WRITE).sum()) == tc.writes and int((mine["op"] == EV_READ).sum()) == tc.reads
    # every read finds the content last written to its slot (no read of a freed, trimmed or reused slot)
    held: dict = {}
    for e in ev.tolist():
        _, tier, op, _, first, n, key, version = e
        if op == EV_WRITE:
            held[(tier, first)] = (key, version)
        elif op == EV_TRIM:
            for s in range(first, first + n):
                held.pop((tier, s), None)
        else:
            assert held.get((tier, first)) == (key, version), e
    hits = reqs_out["hit_l1"] + reqs_out["hit_l2"] + reqs_out["hit_l3"] + reqs_out["hit_l4"]
    assert (hits == reqs_out["hit_blocks"]).all()
    # a block below a broken prefix may still sit in a lower tier (upper-tier hits do not refresh it there):
    # neither a hit nor produced again; every other block beyond the hit prefix is produced
    assert (reqs_out["produced"] <= reqs_out["blocks"] - reqs_out["hit_blocks"]).all()
    assert sum(t.hit_blocks for t in c.values()) == int(reqs_out["hit_blocks"].sum())
    if write_policy == "through":               # a produced block is written to every tier it is not in
        assert c["l3"].create_writes <= int(reqs_out["produced"].sum())


@given(chained, st.integers(1, 12), st.sampled_from([None, 1.0, 2.5]))
def test_single_lru_tier_equals_the_exact_curve(reqs, cap, ttl):
    """Prefix-chained keys touched deepest-first: block hits are prefix hits (DESIGN.md), so one LRU tier's
    hits equal the exact curve at its capacity, with and without retention."""
    tr = gap_trace(reqs)
    h = Hierarchy(HierarchySpec((TierSpec("l2", cap * slot_bytes_for(BLOCK), ttl_s=ttl),), block_bytes=BLOCK))
    out, _ = h.run(tr.timestamp_s, tr.offsets, tr.keys)
    assert int(out["hit_blocks"].sum()) == round(float(exact_profile(tr, ttl_s=ttl).hits_at([cap])[0]))
    assert int(out["hit_blocks"].sum()) == brute_lru_hits(tr, cap, ttl)
    assert (out["produced"] == out["blocks"] - out["hit_blocks"]).all()


def test_run_one_equals_a_batch_through_growth():
    """Hierarchy.run_one (a cluster's one request at a time, buffers kept) gives what run gives for the same
    requests in one batch, while its pools grow past their first layout (more keys than POOL_START) and a longer
    request than any before arrives (the state laid out again)."""
    from kvbench.sim.tiers import POOL_START

    rng = np.random.default_rng(5)
    lens = rng.integers(1, 40, 4600)
    lens[2000] = 700
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    keys = rng.integers(1, 2**64 - 1, int(offsets[-1]), dtype=np.uint64)
    keys[offsets[1500]:offsets[1500] + 30] = keys[:30]          # some hits
    times = np.arange(lens.size, dtype=np.float64)
    spec = HierarchySpec((TierSpec("l2", 64 * 8192), TierSpec("l3", (POOL_START + 20000) * 8192)), 8192)
    assert int(offsets[-1]) > POOL_START + 20000
    want, want_ev = Hierarchy(spec).run(times, offsets, keys)
    one = Hierarchy(spec)
    got, events = [], []
    for i in range(lens.size):
        hits, ev = one.run_one(float(times[i]), keys[offsets[i]:offsets[i + 1]], i)
        got.append(hits)
        events.append(ev)
    cols = ("hit_blocks", "hit_l1", "hit_l2", "hit_l3", "hit_l4")
    assert got == [[int(r[c]) for c in cols] for r in want]
    assert np.array_equal(np.concatenate(events), want_ev)
    assert sum(g[0] for g in got) >= 30 and one.produced == int(want["produced"].sum())
