"""DRAM row cache: exact LRU stack distances and LFU against reference simulations, static top-k, curves."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest

from kvbench.errors import UsageError
from kvbench.sim.rowcache import (INF, RowStream, dense_ids, lfu_hits, profile_ranks, sorted_unique, stack_distances,
                                  unique_inverse)


def _stream(n=3000, seed=1):
    return np.random.default_rng(seed).zipf(1.3, n) % 200


def _lru_ref(ids, cap):
    od, out = OrderedDict(), []
    for x in ids.tolist():
        if x in od:
            od.move_to_end(x)
            out.append(True)
        else:
            out.append(False)
            od[x] = 1
            if len(od) > cap:
                od.popitem(last=False)
    return np.array(out)


def _lfu_ref(ids, cap):
    cnt, last, out = {}, {}, []
    for t, x in enumerate(ids.tolist()):
        if x in cnt:
            cnt[x] += 1
            out.append(True)
        else:
            out.append(False)
            if len(cnt) >= cap:
                victim = min(cnt, key=lambda y: (cnt[y], last[y]))
                del cnt[victim]
            cnt[x] = 1
        last[x] = t
    return np.array(out)


def test_unique_helpers():
    x = np.array([5, 3, 5, 9, 3, 3])
    assert sorted_unique(x).tolist() == [3, 5, 9]
    u, inv = unique_inverse(x)
    assert u.tolist() == [3, 5, 9] and inv.tolist() == [1, 0, 1, 2, 0, 0]


def test_stack_distances_hand_computed():
    # a b c a b b d a : distances inf inf inf 2 2 0 inf 2
    d = stack_distances(np.array([0, 1, 2, 0, 1, 1, 3, 0]))
    big = np.iinfo(np.int64).max
    assert d.tolist() == [big, big, big, 2, 2, 0, big, 2]


@pytest.mark.parametrize("cap", [1, 4, 17, 60])
def test_lru_and_lfu_match_reference(cap):
    ids = _stream()
    assert np.array_equal(stack_distances(ids) < cap, _lru_ref(ids, cap))
    assert np.array_equal(lfu_hits(ids, cap), _lfu_ref(ids, cap))


def test_static_topk_and_curves():
    rows = np.array([10, 10, 10, 20, 20, 30, 10, 20, 30, 40, 10]) * 1000
    measure = np.arange(rows.size) >= 6                    # first 6 accesses profile: 10 x3, 20 x2, 30 x1
    rs = RowStream.build(rows, measure)
    assert rs.hot_rows().tolist() == [10000, 20000, 30000]
    # measured: 10 20 30 40 10 -> static k=1 hits the two 10s; k=2 adds 20; k=3 adds 30; 40 never profiled
    assert rs.hits("static", 1)[measure].tolist() == [True, False, False, False, True]
    curve = rs.curve([1, 2, 3, 100], ("static", "lru", "lfu"))
    assert curve["static"].tolist() == [0.4, 0.6, 0.8, 0.8]
    for p in ("lru", "lfu", "static"):
        for i, c in enumerate([1, 2, 3, 100]):
            assert curve[p][i] == pytest.approx(rs.hits(p, c)[measure].mean())
    assert not rs.hits("lru", 0).any()
    with pytest.raises(UsageError):
        rs.hits("mru", 4)


def test_lru_curve_is_monotone_on_a_long_stream():
    ids = np.random.default_rng(2).zipf(1.1, 200_000) % 50_000
    rs = RowStream.build(ids, np.arange(ids.size) >= 100_000)
    c = rs.curve([10, 100, 1000, 10_000, 100_000], ("lru", "static"))
    assert np.all(np.diff(c["lru"]) >= 0) and np.all(np.diff(c["static"]) >= 0)
    assert 0 < c["lru"][0] < c["lru"][-1] <= 1


# mutation survivors: the helpers' edges, the static ranks and hot rows by hand, empty and zero-capacity cases

def test_unique_helpers_edges():
    assert sorted_unique(np.array([], dtype=np.int64)).tolist() == []
    assert sorted_unique(np.array([7])).tolist() == [7]
    assert sorted_unique(np.array([3, 3])).tolist() == [3] and sorted_unique(np.array([4, 2])).tolist() == [2, 4]
    assert sorted_unique(np.array([[2, 1], [2, 5]])).tolist() == [1, 2, 5]      # raveled
    u, inv = unique_inverse(np.array([], dtype=np.int64))
    assert u.tolist() == [] and inv.tolist() == []
    u, inv = unique_inverse(np.array([9]))
    assert u.tolist() == [9] and inv.tolist() == [0]
    u, ids = dense_ids([2**40, 5, 2**40, 7])
    assert u.tolist() == [5, 7, 2**40] and ids.tolist() == [2, 0, 2, 1] and ids.dtype == np.int64


def test_stack_distances_edges():
    assert stack_distances(np.array([], dtype=np.int64)).tolist() == []
    big = np.iinfo(np.int64).max
    # ids need not start at 0: n_ids counts them all
    assert stack_distances(np.array([3, 3, 1, 3]), 4).tolist() == [big, 0, big, 1]
    assert stack_distances(np.array([3, 3, 1, 3])).tolist() == [big, 0, big, 1]


def test_profile_ranks_by_hand():
    ids = np.array([0, 1, 1, 2, 2, 3, 0])
    prof = np.arange(7) < 5                  # profiled: 0 once, 1 twice, 2 twice; 3 never
    # popularity: 1 and 2 (2 each, the lower id first), then 0; 3 unranked
    assert profile_ranks(ids, prof, 4).tolist() == [2, 0, 0, 1, 1, INF, 2]


def test_lfu_edges_and_ties_by_hand():
    assert lfu_hits(np.array([1, 1, 1]), 0).tolist() == [False] * 3
    assert lfu_hits(np.array([1, 1, 1]), -2).tolist() == [False] * 3
    assert lfu_hits(np.array([], dtype=np.int64), 4).tolist() == []
    # capacity 2: a b a c (c evicts b: count 1 < a's 2) b (evicts c: counts tie at 1, c used later? no: b's
    # newcomer evicts the least frequent, least recent: c at 1 used at t=3) a (hit)
    ids = np.array([0, 1, 0, 2, 1, 0])
    assert lfu_hits(ids, 2).tolist() == [False, False, True, False, False, True]
    assert lfu_hits(ids, 2, 3).tolist() == _lfu_ref(ids, 2).tolist()
    # equal counts: the least recently used goes first
    ids = np.array([0, 1, 2, 0, 1])            # capacity 2: 2 evicts 0 (count 1, older than 1); 0 evicts 1
    assert lfu_hits(ids, 2).tolist() == [False, False, False, False, False] == _lfu_ref(ids, 2).tolist()
    ids = np.array([0, 1, 1, 2, 1, 0])         # 2 evicts 0 (1 < 2); 0 evicts 2 (1, older than 1's 3 uses)
    assert lfu_hits(ids, 2).tolist() == [False, False, True, False, True, False] == _lfu_ref(ids, 2).tolist()


def test_row_stream_hot_rows_zero_capacities_and_an_unmeasured_stream():
    rows = np.array([10, 10, 10, 20, 20, 30, 10, 20, 30, 40, 10]) * 1000
    measure = np.arange(rows.size) >= 6
    rs = RowStream.build(rows, measure)
    assert rs.hot_rows(1).tolist() == [10000] and rs.hot_rows(2).tolist() == [10000, 20000]
    assert rs.hot_rows(0).tolist() == [] and rs.hot_rows(9).tolist() == [10000, 20000, 30000]
    for p in ("static", "lru", "lfu"):
        assert not rs.hits(p, 0).any() and not rs.hits(p, -1).any()
    assert rs.hits("lru", 1).tolist() == [False, True, True, False, True, False, False, False, False, False, False]
    assert rs.hits("lfu", 4).tolist() == _lfu_ref(rs.ids, 4).tolist()
    # measured: 10 20 30 40 10 at LRU distances 2, 2, 2, (new), 3
    assert rs.curve([3, 4], ("lru",))["lru"].tolist() == [0.6, 0.8]
    # nothing measured: every ratio is 0 (not 0/0)
    cold = RowStream.build(rows, np.zeros(rows.size, dtype=bool))
    c = cold.curve([1, 100])
    assert all(v.tolist() == [0.0, 0.0] for v in c.values())


def test_lfu_keeps_a_row_with_more_than_2_to_the_23_hits():
    # the heap's key was count << 40 | time in one int64: at 2^23 hits it overflowed to a negative key and the
    # most frequent row became the first victim. Capacity 2: row 0 hit 2^23 + 1 times, then 1 and 2 arrive: 2
    # must evict 1 (count 1), so the last access to 0 hits
    ids = np.zeros((1 << 23) + 5, dtype=np.int64)
    ids[-3:-1] = [1, 2]
    h = lfu_hits(ids, 2, 3)
    assert h[-1] and not h[-2] and not h[-3] and h[1:-3].all()


def test_curve_of_one_measured_access():
    rs = RowStream.build(np.array([5, 5]), np.array([False, True]))      # one profiling access, one measured
    assert {p: v.tolist() for p, v in rs.curve([1]).items()} == {"static": [1.0], "lru": [1.0], "lfu": [1.0]}


def test_sorted_unique_keeps_the_first_value_whatever_memory_it_is_given():
    # keep is allocated uninitialised: zero the small buffer numpy will hand out again (its small-block cache),
    # so a first flag left unset shows (the smallest value dropped)
    for n in (2, 3, 5):
        x = np.array([9] * (n - 1) + [1])
        z = np.zeros(n, dtype=bool)
        del z
        assert sorted_unique(x).tolist() == [1, 9]
