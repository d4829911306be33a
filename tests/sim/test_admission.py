"""Admission policies (kvbench.sim.admission): exact counts on hand-built traces, the TinyLFU sketch, the tier
simulation's hook (admit-all equal to today's results, L4 and the replay's mapping) and bad specs. The sweep
simulator's and the plan's side: tests/analysis/test_admission.py."""

from __future__ import annotations

import numpy as np
import pytest

from kvbench.analysis.admission import simulate_tier, simulate_tier_reference
from kvbench.errors import SpecError
from kvbench.sim.admission import ADMISSIONS, TinyLFU, make_admission, parse_admission
from kvbench.sim.tiers import DEMOTE_WRITE, EV_WRITE, Hierarchy, HierarchySpec, TierSpec
from tests.conftest import block_trace

BB = 8192


def _l3(requests, cap, admission, times=None, **kw):
    """One L3 tier under ``admission``: (hierarchy, per-request rows, events)."""
    tr = block_trace(requests, times)
    h = Hierarchy(HierarchySpec((TierSpec("l3", cap * BB, admission=admission),), BB, **kw))
    reqs, ev = h.run(tr.timestamp_s, tr.offsets, tr.keys)
    return h, reqs, ev, tr


def _counts(h, reqs, ev):
    c = h.tier("l3").c
    return int(reqs["hit_blocks"].sum()), int((ev["op"] == EV_WRITE).sum()), c.admission_rejects


def _cached_blocks(h, name="l3"):
    """Blocks a tier caches: its capacity in slots (a store's spare slots are on top)."""
    t = next(x for x in h.spec.tiers if x.name == name)
    return h.spec.capacity_blocks(t)


def _check_sweep_agrees(tr, cap, spec, h, reqs):
    """The Python loop (the oracle) agrees with the tier simulation with its spare slots; the compiled sweep
    equals the Python loop (``test_compiled_sweep_equals_the_python_loop``)."""
    run = simulate_tier_reference(tr, _cached_blocks(h), spec)
    c = h.tier("l3").c
    assert (run.hit_blocks, run.written, run.rejected) == (int(reqs["hit_blocks"].sum()), c.writes,
                                                          c.admission_rejects)
    assert _fields(simulate_tier(tr, _cached_blocks(h), spec)) == _fields(run)


def _fields(run):
    """A TierRun as a tuple whose NaNs compare equal (never-filled runs)."""
    return tuple("nan" if isinstance(v, float) and v != v else v for v in vars(run).values())


def test_second_access_counts_and_bounded_ghost():
    # capacity 2, ghost 1 x capacity = 2 keys. 1: remembered, 2: remembered, 1: seen -> written (and still
    # remembered), 3: remembered (ghost {2, 3}: 1 pushed out), 1: hit, 2: seen -> written
    reqs = [[1], [2], [1], [3], [1], [2]]
    h, r, ev, tr = _l3(reqs, 2, "second-access")
    assert _counts(h, r, ev) == (1, 2, 3)
    assert h.resident("l3") == {1, 2}
    _check_sweep_agrees(tr, 2, "second-access", h, r)
    # ghost of one key: 1 is forgotten when 2 arrives, so its second miss is a first sighting again
    h, r, ev, tr = _l3([[1], [2], [1], [1]], 2, "second-access:ghost=0.5")
    assert _counts(h, r, ev) == (0, 1, 3)       # 1, 2, 1 rejected; the 4th (1 seen just before) written


def test_tinylfu_sketch_counts_ages_and_compares_with_the_victim():
    a = TinyLFU(1, sample=4)                    # halve after 4 x 1 increments
    for _ in range(3):
        a.observe(7, 0.0, 0)
    assert a.estimate(7) == 3 and a.resets == 0
    a.observe(7, 0.0, 0)                        # 4th increment: counters 4 -> 2
    assert a.estimate(7) == 2 and a.resets == 1
    a.observe(7, 0.0, 0)
    assert a.estimate(7) == 3
    # capacity 1: 1 is admitted into the empty tier; 2 (estimate 1, then 2) loses to 1 (2); 2 at 3 wins
    reqs = [[1], [1], [2], [2], [2], [1]]
    h, r, ev, tr = _l3(reqs, 1, "tinylfu:sample=100")
    adm = h.tier("l3").admission
    assert adm.estimate(1) == 3 and adm.estimate(2) == 3
    # 1 written, 1 hit, 2 rejected twice, 2 written (evicting 1), 1 (3 vs 3: not strictly more) rejected
    assert _counts(h, r, ev) == (1, 2, 3)
    assert h.resident("l3") == {2}
    _check_sweep_agrees(tr, 1, "tinylfu:sample=100", h, r)


def test_prefix_depth_writes_only_the_leading_blocks():
    reqs = [[10, 11, 12, 13, 14], [10, 11, 12, 13, 14, 15]]
    h, r, ev, tr = _l3(reqs, 100, "prefix-depth:depth=2")
    # request 0: blocks at depth 0, 1 written, 3 rejected; request 1: 10, 11 hit, 4 deeper blocks rejected
    assert _counts(h, r, ev) == (2, 2, 7)
    assert h.resident("l3") == {10, 11}
    assert list(r["hit_blocks"]) == [0, 2]
    _check_sweep_agrees(tr, 100, "prefix-depth:depth=2", h, r)


def test_prefix_depth_rejects_deep_demotions_under_write_back():
    tr = block_trace([[1, 2, 3], [4], [5], [6]])
    h = Hierarchy(HierarchySpec((TierSpec("l2", 1 * BB), TierSpec("l3", 10 * BB, admission="prefix-depth:depth=1")),
                                BB, write_policy="back"))
    _, ev = h.run(tr.timestamp_s, tr.offsets, tr.keys)
    # L2 holds one block: request 0 creates 3, 2, 1 (deepest first), evicting 3 then 2 (deep: rejected);
    # 4, 5, 6 each evict the previous one (depth 0: demoted and written)
    w = ev[(ev["tier"] == 2) & (ev["kind"] == DEMOTE_WRITE)]
    assert sorted(w["key"].tolist()) == [1, 4, 5]
    assert h.tier("l3").c.admission_rejects == 2


def test_threshold_size_and_time():
    h, r, ev, tr = _l3([[1, 2], [3, 4, 5]], 100, "threshold:min_blocks=3")
    assert _counts(h, r, ev) == (0, 3, 2)
    _check_sweep_agrees(tr, 100, "threshold:min_blocks=3", h, r)
    # window 10 s: key 1 seen at 0 then 5 (gap 5: written); key 2 seen at 0 and 20 (gap 20: rejected)
    h, r, ev, tr = _l3([[1], [2], [1], [2]], 100, "threshold:window=10", times=[0, 0, 5, 20])
    assert sorted(ev[ev["op"] == EV_WRITE]["key"].tolist()) == [1]
    assert _counts(h, r, ev) == (0, 1, 3)
    _check_sweep_agrees(tr, 100, "threshold:window=10", h, r)


def test_admit_all_equals_todays_results_exactly():
    from kvbench.stream.traces import read_trace

    tr = read_trace("mooncake-sample")
    for wp in ("through", "back"):
        tiers = lambda adm: (TierSpec("l2", 300 * BB), TierSpec("l3", 2000 * BB, admission=adm),  # noqa: E731
                             TierSpec("l4", 5000 * BB, admission=adm))
        a = Hierarchy(HierarchySpec((TierSpec("l2", 300 * BB), TierSpec("l3", 2000 * BB),
                                     TierSpec("l4", 5000 * BB)), BB, write_policy=wp))
        b = Hierarchy(HierarchySpec(tiers("all"), BB, write_policy=wp))
        assert not b.admission_active
        ra, ea = a.run(tr.timestamp_s, tr.offsets, tr.keys)
        rb, eb = b.run(tr.timestamp_s, tr.offsets, tr.keys)
        assert np.array_equal(ra, rb) and np.array_equal(ea, eb)
        c = Hierarchy(HierarchySpec(tiers("second-access"), BB, write_policy=wp))
        assert c.admission_active
        rc, ec = c.run(tr.timestamp_s, tr.offsets, tr.keys)
        assert (ec["op"] == EV_WRITE).sum() < (ea["op"] == EV_WRITE).sum()


def test_bad_specs_are_one_line_errors():
    with pytest.raises(SpecError, match="unknown admission policy 'lfu'"):
        parse_admission("lfu")
    with pytest.raises(SpecError, match="not param=value"):
        parse_admission("second-access:ghost")
    with pytest.raises(SpecError, match="unknown parameter"):
        make_admission("tinylfu:depth=3", 10)
    with pytest.raises(SpecError, match="needs min_blocks or window"):
        make_admission("threshold", 10)
    with pytest.raises(SpecError, match="whole number of blocks"):
        make_admission("prefix-depth:depth=0", 10)
    with pytest.raises(SpecError, match="L3/L4 tiers only"):
        Hierarchy(HierarchySpec((TierSpec("l2", 4 * BB, admission="tinylfu"),), BB))
    assert set(ADMISSIONS) == {"all", "second-access", "tinylfu", "prefix-depth", "threshold"}


def test_l4_admission_and_the_replay_config_mapping():
    from kvbench.replay.kv import ReplayConfig, hierarchy_spec

    # write-back L2 -> L3 -> L4, L4 under second-access: a block evicted from L3 reaches L4 only the second time
    tr = block_trace([[1], [2], [3], [1], [2], [3], [4], [5], [6]])
    h = Hierarchy(HierarchySpec((TierSpec("l2", 1 * BB), TierSpec("l3", 1 * BB),
                                 TierSpec("l4", 10 * BB, admission="second-access:ghost=5")), BB,
                                write_policy="back"))
    _, ev = h.run(tr.timestamp_s, tr.offsets, tr.keys)
    l4 = ev[(ev["tier"] == 3) & (ev["op"] == EV_WRITE)]
    # L3 evicts 1, 2, 3 (first sightings at L4: kept out), then 1, 2, 3 again (seen: written), then 4 (first)
    assert l4["key"].tolist() == [1, 2, 3] and h.tier("l4").c.admission_rejects == 4
    assert h.tier("l3").admission is None
    cfg = ReplayConfig(trace="t", model="m", l3="x", l3_capacity=64 << 20, l4="/tmp", l4_capacity=1 << 30,
                       admission="tinylfu", l4_admission="all")
    spec = hierarchy_spec(cfg, BB)
    assert {t.name: t.admission for t in spec.tiers} == {"l3": "tinylfu", "l4": "all"}
    both = hierarchy_spec(ReplayConfig(trace="t", model="m", l3="x", l3_capacity=64 << 20, l4="/tmp",
                                       l4_capacity=1 << 30, admission="prefix-depth:depth=4"), BB)
    assert {t.name: t.admission for t in both.tiers} == {"l3": "prefix-depth:depth=4", "l4": "prefix-depth:depth=4"}


def test_prefix_depth_beyond_the_shared_prefix():
    # beyond_shared=1: request 0 shares nothing (only its first block is written, 2 and 3 kept out); request 1
    # shares 1, 2, 3 with request 0, so depths 0..3 are written (4, 3, 2; 1 hits; 5 kept out); request 2 shares
    # 1..5 (request 1 referenced 5), so every depth up to 5 is written (6, and 5 at last)
    reqs = [[1, 2, 3], [1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 6]]
    h, r, ev, tr = _l3(reqs, 100, "prefix-depth:beyond_shared=1")
    w = ev[ev["op"] == EV_WRITE]["key"].tolist()
    assert w == [1, 4, 3, 2, 6, 5]              # deepest first within each request
    assert list(r["hit_blocks"]) == [0, 1, 4] and h.tier("l3").c.admission_rejects == 3
    _check_sweep_agrees(tr, 100, "prefix-depth:beyond_shared=1", h, r)
    # combined with an absolute depth: the smaller limit wins
    h, r, ev, tr = _l3(reqs, 100, "prefix-depth:depth=2:beyond_shared=1")
    assert ev[ev["op"] == EV_WRITE]["key"].tolist() == [1, 2]
    with pytest.raises(SpecError, match="needs depth or beyond_shared"):
        make_admission("prefix-depth", 10)
