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
    with pytest.raises(SpecError, match="malformed parameter 'ghost'"):
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


# mutation survivors: the registry's flags, the sketch's layout, hashing and saturation, the parameters' bounds

_SEEDS = (0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0xD6E8FEB86659FD93)


def _oracle_slots(key, bits):
    """Multiply-shift hashing by hand: the top ``bits`` bits of hash(key) x seed mod 2^64, one seed per row."""
    k = hash(key) % 2**64
    return tuple(((k * s) % 2**64) >> (64 - bits) for s in _SEEDS)


def test_the_base_policy_admits_everything_and_only_all_is_trivial():
    from kvbench.sim.admission import Admission, is_trivial

    a = Admission(3)
    assert a.capacity == 3 and a.admit(1, 0.0, 0, 1, None) is True
    assert a.begin_request([1], 0.0) is None and a.observe(1, 0.0, 0) is None
    assert not (a.trivial or a.needs_victim or a.needs_request) and a.describe() == "base"
    with pytest.raises(SpecError, match="at least 1 block, not 0"):
        Admission(0)
    assert Admission(1).capacity == 1
    assert is_trivial(None) and is_trivial("all") and is_trivial(" ALL ")
    for spec in ("second-access", "tinylfu", "prefix-depth:depth=2", "threshold:min_blocks=2"):
        a = make_admission(spec, 10)
        assert not is_trivial(spec) and not a.trivial
        assert a.needs_victim == (a.name == "tinylfu")
        assert a.needs_request is False
    assert make_admission("prefix-depth:beyond_shared=0", 10).needs_request is True
    with pytest.raises(NotImplementedError, match="all admission has no compiled form"):
        make_admission("all", 10).kernel_params()


def test_describe_and_kernel_params_by_hand():
    assert make_admission("all", 4).describe() == "all"
    a = make_admission("second-access:ghost=2.5", 4)           # 2.5 x 4 = 10 keys remembered
    assert a.describe() == "second-access:ghost=2.5" and a.kernel_params() == {"code": 1, "ghosts": (10,)}
    assert make_admission("second-access", 4).kernel_params() == {"code": 1, "ghosts": (4,)}
    assert make_admission("second-access:ghost=0.01", 4).kernel_params()["ghosts"] == (1,)   # at least one key
    t = make_admission("tinylfu", 100)          # width 100 -> 128 counters (7 bits), sample 10 x 100
    assert t.describe() == "tinylfu:width=1:sample=10"
    assert t.kernel_params() == {"code": 2, "sketch": (128, 57, 1000)}
    p = make_admission("prefix-depth:depth=3:beyond_shared=1", 5)
    assert p.describe() == "prefix-depth:depth=3:beyond_shared=1"
    assert p.kernel_params() == {"code": 3, "ghosts": (20, 20), "depth": 3, "beyond": 1, "limit": 3}
    assert make_admission("prefix-depth:depth=2", 5).kernel_params() == {
        "code": 3, "ghosts": (0, 20), "depth": 2, "beyond": None, "limit": 2}
    assert make_admission("prefix-depth:beyond_shared=0:ghost=1", 5).kernel_params() == {
        "code": 3, "ghosts": (5, 20), "depth": None, "beyond": 0, "limit": 0}
    th = make_admission("threshold:min_blocks=4:window=10m", 5)
    assert th.describe() == "threshold:min_blocks=4:window=600"
    assert th.kernel_params() == {"code": 4, "ghosts": (20,), "min_blocks": 4, "window": 600.0}
    assert make_admission("threshold:min_blocks=4", 5).kernel_params() == {
        "code": 4, "ghosts": (0,), "min_blocks": 4, "window": None}


def test_multiples_of_the_capacity_are_rounded_and_positive():
    from kvbench.sim.admission import _multiple

    assert _multiple(1.0, 7, "ghost") == 7 and _multiple(0.5, 7, "ghost") == 4 and _multiple(2.0, 3, "ghost") == 6
    assert _multiple(0.01, 7, "ghost") == 1 and _multiple(1e-9, 1, "ghost") == 1
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(SpecError, match="must be > 0"):
            _multiple(bad, 7, "ghost")


def test_ghost_is_a_bounded_fifo_that_refreshes_a_put_key():
    from kvbench.sim.admission import _Ghost

    g = _Ghost(2)
    g.put(1, "a")
    g.put(2, "b")
    assert len(g) == 2 and 1 in g and g.get(1) == "a"
    g.put(1, "c")                       # refreshed: now the newest, 2 the oldest
    g.put(3)
    assert list(g.od) == [1, 3] and 2 not in g and g.get(1) == "c" and g.get(2, "none") == "none"
    assert g.pop(1) == "c" and g.pop(1, "gone") == "gone" and len(g) == 1
    g.put(4)
    assert list(g.od) == [3, 4]         # exactly ``size`` keys are kept


def test_tinylfu_layout_and_hashing_by_hand():
    for cap, width, bits in ((1, 16, 4), (16, 16, 4), (17, 32, 5), (100, 128, 7), (128, 128, 7), (129, 256, 8)):
        t = TinyLFU(cap)
        assert (t.width, t._shift, t.sample_size) == (width, 64 - bits, 10 * cap)
        assert [len(r) for r in t.rows] == [width] * 4
    assert TinyLFU(100, width=2.0).width == 256 and TinyLFU(2).sample_size == 20
    assert TinyLFU(100, sample=0.5).sample_size == 50
    t = TinyLFU(100)
    for key in (0, 1, 2, 7, 12345, 2**63 + 5, -3, None, "block"):
        assert t._slots(key) == _oracle_slots(key, 7)
    # a fresh sketch's estimate reads the rows at the key's own slots (no lookup to reuse yet)
    for r, row in enumerate(t.rows):
        for j in range(t.width):
            row[j] = (3 * j + 5 * r) % 16
    for key in (None, 0, 1, 99, -3):
        want = min(t.rows[r][s] for r, s in enumerate(_oracle_slots(key, 7)))
        assert TinyLFU.estimate(t, key) == want


def test_tinylfu_counters_saturate_at_15_in_every_row_and_age_by_halving():
    t = TinyLFU(100, sample=10)         # 1000 increments before the first halving
    for _ in range(20):
        t.observe(42, 0.0, 0)
    slots = _oracle_slots(42, 7)
    assert [t.rows[r][s] for r, s in enumerate(slots)] == [15] * 4
    assert sum(map(sum, t.rows)) == 60 and t.estimate(42) == 15 and t.increments == 20
    # an odd sample: the count of increments halves to a whole number
    a = TinyLFU(1, sample=5)
    for _ in range(5):
        a.observe(1, 0.0, 0)
    assert a.resets == 1 and a.increments == 2 and isinstance(a.increments, int) and a.estimate(1) == 2


def test_prefix_depth_bounds_by_hand():
    assert make_admission("prefix-depth:depth=1", 10).depth == 1
    assert make_admission("prefix-depth:beyond_shared=0", 10).beyond_shared == 0
    for bad in ("depth=1.5", "depth=0.5", "beyond_shared=-1", "beyond_shared=0.5"):
        with pytest.raises(SpecError, match="whole number of blocks"):
            make_admission(f"prefix-depth:{bad}", 10)


def test_prefix_depth_policy_by_hand():
    from kvbench.sim.admission import PrefixDepth

    p = PrefixDepth(10, depth=2)
    assert (p.depth, p.beyond_shared, p._limit, p._deep.size, p._seen) == (2, None, 2, 40, None)
    p.observe(7, 0.0, 0)
    p.observe(8, 0.0, 1)
    p.observe(9, 0.0, 2)                        # at the limit: deep
    assert [p.admit(k, 0.0, d, 5, None) for k, d in ((7, 0), (8, 1), (9, 2), (9, 3))] == [True, True, False, False]
    assert p.admit(9, 0.0, 0, 5, None)          # a request's own block: by its depth now, not its last lookup's
    # demotions (depth -1): by the depth of the key's last lookup; an unknown key counts as shallow
    assert [p.admit(k, 0.0, -1, 5, None) for k in (7, 8, 9, 99)] == [True, True, False, True]
    p.observe(9, 1.0, 1)                        # looked up shallow again: forgotten as deep
    assert p.admit(9, 1.0, -1, 5, None) and 9 not in p._deep
    small = PrefixDepth(1, depth=1)             # remembers 4 x 1 deep keys
    for k in range(1, 6):
        small.observe(k, 0.0, 1)
    assert list(small._deep.od) == [2, 3, 4, 5] and small.admit(1, 0.0, -1, 1, None)
    assert not small.admit(2, 0.0, -1, 1, None)


def test_prefix_depth_shared_prefix_by_hand():
    from kvbench.sim.admission import PrefixDepth

    p = PrefixDepth(10, beyond_shared=1, ghost=0.5)          # remembers 5 keys
    assert p._seen.size == 5 and p._limit == 0 and p.needs_request
    p.begin_request([1, 2, 3], 0.0)
    assert p._limit == 1                                      # nothing shared: the first block only
    p.begin_request([1, 2, 3, 4], 1.0)
    assert p._limit == 4                                      # 3 shared + 1
    p.begin_request([1, 9, 3], 2.0)
    assert p._limit == 2                                      # the run stops at the first unseen key (9)
    assert list(p._seen.od) == [2, 4, 1, 9, 3]
    p.begin_request([5, 6], 3.0)                              # pushes 2 and 4 out
    p.begin_request([2, 1], 4.0)
    assert p._limit == 1
    both = PrefixDepth(10, depth=2, beyond_shared=1)
    both.begin_request([1, 2, 3, 4], 0.0)
    both.begin_request([1, 2, 3, 4], 1.0)
    assert both._limit == 2                                   # min(4 + 1, 2)
    both.begin_request([8], 2.0)
    assert both._limit == 1                                   # min(0 + 1, 2)


def test_threshold_policy_by_hand():
    from kvbench.sim.admission import Threshold

    t = Threshold(10, min_blocks=3)
    assert t._seen is None and t.window is None and t.min_blocks == 3
    assert [t.admit(1, 0.0, 0, b, None) for b in (2, 3, 4)] == [False, True, True]
    assert t.admit(1, 0.0, -1, 1, None)                      # a demotion is not a request's block
    t.observe(1, 0.0, 0)                                      # no window: nothing remembered
    assert t._seen is None
    w = Threshold(10, window=10.0, ghost=0.2)                 # remembers 2 keys
    assert w._seen.size == 2 and w.min_blocks == 0
    w.observe(1, 2.0, 0)
    assert w._gap == (1, float("inf")) and not w.admit(1, 2.0, 0, 1, None)
    w.observe(1, 12.0, 0)                                     # gap exactly the window: admitted
    assert w._gap == (1, 10.0) and w.admit(1, 12.0, 0, 1, None)
    w.observe(1, 22.5, 0)
    assert w._gap == (1, 10.5) and not w.admit(1, 22.5, 0, 1, None)
    # another key's write after 1's lookup: its own last lookup decides
    w.observe(2, 15.0, 0)
    w.observe(1, 23.0, 0)
    assert w.admit(2, 21.0, 0, 1, None) and not w.admit(2, 25.5, 0, 1, None)
    # demotions: the last lookup within the window
    assert w.admit(1, 33.0, -1, 1, None) and not w.admit(1, 33.5, -1, 1, None)
    assert not w.admit(77, 21.0, -1, 1, None)                # never seen
    w.observe(3, 24.0, 0)                                     # bound of 2 keys: 2 forgotten
    assert 2 not in w._seen and not w.admit(2, 24.0, -1, 1, None)
    both = Threshold(10, min_blocks=2, window=5.0)
    both.observe(4, 0.0, 0)
    both.observe(4, 1.0, 0)
    assert not both.admit(4, 1.0, 0, 1, None) and both.admit(4, 1.0, 0, 2, None)
    for kw, msg in (({"min_blocks": -1}, "whole number >= 0"), ({"min_blocks": 1.5}, "whole number >= 0"),
                    ({"window": 0.0}, "must be > 0 s"), ({"window": -2.0}, "must be > 0 s"),
                    ({"min_blocks": 0}, "needs min_blocks or window")):
        with pytest.raises(SpecError, match=msg):
            Threshold(10, **kw)
    assert Threshold(10, min_blocks=1).min_blocks == 1 and Threshold(10, window=0.001).window == 0.001


def test_parse_admission_by_hand():
    assert parse_admission("all") == ("all", {})
    assert parse_admission(" Threshold : window = 10m : min-blocks=2 ") == ("threshold",
                                                                           {"window": 600.0, "min_blocks": 2.0})
    assert parse_admission("prefix-depth:beyond-shared=1") == ("prefix-depth", {"beyond_shared": 1.0})
    assert parse_admission("threshold:window=1h") == ("threshold", {"window": 3600.0})
    for bad, match in (("second-access:=2", "malformed parameter '=2'"), ("second-access:ghost=", "has no value"),
                       ("second-access:ghost= ", "'ghost' has no value"), ("tinylfu:width=1:width=2", "given twice"),
                       ("tinylfu:depth=3", r"unknown parameter 'depth' \(fix: tinylfu takes width, sample\)")):
        with pytest.raises(SpecError, match=match):
            parse_admission(bad)
    assert parse_admission("tinylfu:width=1", "--l4-admission") == ("tinylfu", {"width": 1.0})
    with pytest.raises(SpecError, match=r"^--l4-admission 'all:x=1': unknown parameter 'x' \(fix: all takes no"):
        parse_admission("all:x=1", "--l4-admission")
    with pytest.raises(SpecError, match="window='abc' is not a number or duration"):
        parse_admission("threshold:window=abc")
    with pytest.raises(SpecError, match="all takes no parameters"):
        make_admission("all:ghost=1", 4)
    with pytest.raises(SpecError, match="tinylfu takes width, sample"):
        make_admission("tinylfu:depth=3", 10)
    with pytest.raises(SpecError, match=r"prefix-depth takes depth, beyond_shared, ghost"):
        make_admission("prefix-depth:ttl=3", 10)
    assert make_admission("second-access:ghost=3", 2).ghost.size == 6
