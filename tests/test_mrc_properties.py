"""Property tests against brute-force oracles (hypothesis; derandomized in CI, see conftest):

- the exact one-pass curve (Mattson stack distances, compiled kernel) equals an OrderedDict LRU simulated at
  every capacity, with and without retention, on random traces;
- SHARDS at rate 1 is the exact curve;
- the tier simulation's accounting: its block events agree with its counters kind by kind, every read finds
  in its slot the content (key, version) last written there, hits per tier add up, and a single LRU tier's
  hits equal the exact curve at that capacity.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from kvbench.analysis.curves.profile import exact_profile, reference_stream, shards_profile
from kvbench.sim.tiers import (EV_READ, EV_TRIM, EV_WRITE, KIND_NAMES, Hierarchy, HierarchySpec, TierSpec,
                               slot_bytes_for)
from kvbench.stream.traces import Trace

BLOCK = 4096

requests = st.lists(
    st.tuples(st.sampled_from([0.0, 0.0, 0.5, 1.0, 2.0, 3.5]),                       # gap to the previous request
              st.lists(st.integers(1, 12), min_size=1, max_size=5)),                  # block keys
    min_size=1, max_size=40)
# prefix-chained, as real traces are (a key names its whole prefix): request = the first n blocks of a chain
chained = st.lists(
    st.tuples(st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.5]),
              st.builds(lambda c, n: [100 * c + i for i in range(1, n + 1)], st.integers(0, 3), st.integers(1, 5))),
    min_size=1, max_size=40)


def make_trace(reqs) -> Trace:
    times = np.cumsum([g for g, _ in reqs]).astype(np.float64)
    counts = np.array([len(k) for _, k in reqs], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    keys = np.array([k for _, ks in reqs for k in ks], dtype=np.uint64)
    return Trace(times, counts * 16, counts, offsets, keys, 16, "prop", "-")


def brute_lru_hits(trace: Trace, capacity: int, ttl_s=None, count_from: int = 0) -> int:
    keys, times = reference_stream(trace)
    od: OrderedDict = OrderedDict()
    hits = 0
    for i, (k, t) in enumerate(zip(keys.tolist(), times.tolist())):
        last = od.pop(k, None)
        hits += i >= count_from and last is not None and (ttl_s is None or t - last <= ttl_s)
        od[k] = t
        if len(od) > capacity:
            od.popitem(last=False)
    return hits


@given(requests, st.sampled_from([None, 0.5, 1.0, 2.5]), st.sampled_from([0.0, 0.3, 0.5]))
def test_exact_curve_equals_bruteforce_lru_at_every_capacity(reqs, ttl, warmup):
    tr = make_trace(reqs)
    caps = list(range(1, 14))
    start = int(tr.offsets[int(np.floor(warmup * tr.n_requests))])     # warm-up: whole requests, then count
    p = exact_profile(tr, ttl_s=ttl, warmup=warmup)
    want = [brute_lru_hits(tr, c, ttl, start) for c in caps]
    assert np.allclose(p.hits_at(caps), want, rtol=0, atol=1e-9), (p.hits_at(caps), want)
    assert p.references == tr.n_blocks - start
    if p.references:
        assert np.allclose(p.hit_ratio(caps), np.array(want) / p.references, rtol=0, atol=1e-12)
        assert p.infinite_hit_ratio == want[-1] / p.references          # 13 slots hold all 12 keys
    assert p.hits_at([0, 0.5])[0] == 0.0 and p.hits_at([0.5])[0] == 0.0          # no block fits in < 1 slot
    s = shards_profile(tr, rate=1.0, ttl_s=ttl, warmup=warmup)
    assert np.allclose(s.hits_at(caps), want, rtol=0, atol=1e-9)
    # fixed-size SHARDS keeping more keys than the trace has never lowers its rate: exact too
    f = shards_profile(tr, size=64, ttl_s=ttl, warmup=warmup)
    assert np.allclose(f.hits_at(caps), want, rtol=0, atol=1e-9) and f.sample_rate == 1.0
    assert f.cold == p.cold and f.distinct_blocks == len(set(tr.keys.tolist()))
    distinct = len(set(tr.keys.tolist()))
    assert p.distinct_blocks == distinct and p.max_distance <= distinct


@given(chained, st.sampled_from(["through", "back"]), st.booleans(), st.integers(1, 6), st.integers(1, 10),
       st.sampled_from(["slot", "log"]), st.booleans())
def test_tier_simulation_accounting(reqs, write_policy, promote, l2_blocks, l3_blocks, layout, l1):
    tr = make_trace(reqs)
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
    tr = make_trace(reqs)
    h = Hierarchy(HierarchySpec((TierSpec("l2", cap * slot_bytes_for(BLOCK), ttl_s=ttl),), block_bytes=BLOCK))
    out, _ = h.run(tr.timestamp_s, tr.offsets, tr.keys)
    assert int(out["hit_blocks"].sum()) == round(float(exact_profile(tr, ttl_s=ttl).hits_at([cap])[0]))
    assert int(out["hit_blocks"].sum()) == brute_lru_hits(tr, cap, ttl)
    assert (out["produced"] == out["blocks"] - out["hit_blocks"]).all()
