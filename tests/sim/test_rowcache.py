"""DRAM row cache: exact LRU stack distances and LFU against reference simulations, static top-k, curves."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest

from kvbench.errors import UsageError
from kvbench.sim.rowcache import (RowStream, lfu_hits, sorted_unique, stack_distances, unique_inverse)


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
