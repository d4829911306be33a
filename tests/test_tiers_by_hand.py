"""The tier simulation on small traces worked out by hand: every block event (order, tier, slot, key, version),
every counter, the residency and the request rows, for both the compiled Hierarchy and the Python reference.

The expected values come from the rules in kvbench/sim/tiers.py's docstring and DESIGN.md, applied step by step
in the comments (LRU order, the slot store's FIFO free list, the log store's segments); they are not read back
from either implementation, so a bug the two share fails here even though the equivalence tests pass.
"""

from __future__ import annotations

import numpy as np
import pytest

from kvbench.errors import SpecError
from kvbench.sim.tiers import (CREATE_WRITE as CW, DEMOTE_READ as DR, DEMOTE_WRITE as DW, EV_READ as R,
                               EV_TRIM as T, EV_WRITE as W, HIT_READ as HR, PROMOTE_WRITE as PW, TRIM as TR,
                               Hierarchy, HierarchySpec, ReferenceHierarchy, TierSpec, TierCounters)

BB = 8192                      # block bytes = slot bytes (4 KiB aligned)
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


# --- write-back, inclusive: demotion on eviction, promotion copies -----------------------------------------
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


# --- exclusive: one tier per block ----------------------------------------------------------------------------
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


# --- retention at exactly the TTL ------------------------------------------------------------------------------
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


# --- the log layout ---------------------------------------------------------------------------------------------
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


# --- batches, request numbering ---------------------------------------------------------------------------------
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


# --- spec validation and sizing --------------------------------------------------------------------------------
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


def _bad(*tiers, **kw):
    return HierarchySpec(tuple(tiers), kw.pop("block_bytes", BB), **kw)


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
