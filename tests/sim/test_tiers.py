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
