"""kvbench.analysis.curves.stack: ``LRUStack``, the exact streaming LRU stack-distance histogram, against a brute-force
OrderedDict LRU and independently computed distances: batches, compactions, a large slot space, chain anchors,
retention."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest

from kvbench.analysis.curves.profile import exact_profile, reference_stream, shards_profile
from kvbench.analysis.curves.stack import LRUStack
from kvbench.stream.traces import Trace, read_trace
from tests.analysis.curves.test_profile import _gen, brute_lru  # noqa: F401  (the OrderedDict oracle)
from tests.conftest import TTL_REFS, TTL_S


def _stack_distances(keys, times, ttl_s, count_from):
    """Independent reference: per reference, 1 + distinct keys touched since the key's last touch (set of the
    keys in between), as a histogram; cold and (idle > ttl_s) references and those before count_from skipped."""
    last: dict = {}
    hist: dict = {}
    for i, (k, t) in enumerate(zip(keys, times)):
        j = last.get(k)
        if j is not None and i >= count_from and (ttl_s is None or t - times[j] <= ttl_s):
            d = len(set(keys[j + 1:i])) + 1
            hist[d] = hist.get(d, 0) + 1
        last[k] = i
    out = np.zeros(max(hist, default=0) + 1, dtype=np.int64)
    for d, c in hist.items():
        out[d] = c
    return out


def test_stack_grows_and_streams_in_batches(tmp_path):
    """Tiny initial tables force every growth path; feeding batches equals feeding the whole trace."""
    t = _gen(tmp_path, "agent", n=150)
    whole = LRUStack(expected_keys=1)
    whole.feed(t)
    parts = LRUStack(expected_keys=1)
    for a in range(0, t.n_requests, 7):
        parts.feed(t.slice(a, a + 7))
    assert np.array_equal(whole.counts(), parts.counts())
    assert whole.distinct == np.unique(t.keys).size and whole.cold == whole.distinct
    big = LRUStack(expected_keys=1 << 16)
    big.feed(t)
    assert np.array_equal(whole.counts(), big.counts())


def test_large_slot_space_cross_checked():
    """More than 262,144 slots (every level of the mark counts in play): the exact curve equals the independent
    Fenwick-tree kernel (fixed-size SHARDS that never samples) everywhere, and brute force at two sizes."""
    rng = np.random.default_rng(7)
    n_req = 12000
    counts = np.full(n_req, 50)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    keys = rng.integers(0, 160_000, int(offsets[-1])).astype(np.uint64)
    t = Trace(np.arange(n_req, dtype=float), counts * 16, counts, offsets, keys, 16, "test", "-")
    stack = LRUStack(expected_keys=1)
    stack.feed(t)
    assert stack.owner.shape[0] > 262144
    exact = exact_profile(t)
    fenwick = shards_profile(t, size=10**9)
    full = np.arange(1, 160_001, 97)
    assert np.allclose(exact.hit_ratio(full), fenwick.hit_ratio(full), rtol=0, atol=1e-12)
    assert np.allclose(exact.hit_ratio([70_000, 150_000]), brute_lru(t, [70_000, 150_000]), rtol=0, atol=1e-9)


@pytest.mark.parametrize("ttl_s, count_from", [(None, 0), (40.0, 1500)])
def test_chain_anchor_equals_independent_distances(ttl_s, count_from):
    """Re-touched prefix chains (the kernel counts them from the previous reference's answer), chains listed
    backwards (the anchor moves down), random far keys (counted from scratch) and slot compactions (the anchor is
    dropped): every stack distance equals the independent count, with retention and warm-up."""
    rng = np.random.default_rng(11)
    reqs = []
    for _ in range(260):
        c = int(rng.integers(0, 12))
        length = int(rng.integers(1, 40))
        chain = [c * 1000 + j for j in range(length)]
        kind = rng.random()
        if kind < 0.6:
            reqs.append(chain)
        elif kind < 0.8:
            reqs.append(chain[::-1])
        else:
            reqs.append([int(x) for x in rng.integers(20_000, 20_600, length)])
    counts = np.array([len(r) for r in reqs])
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    keys = np.array([k for r in reqs for k in r], dtype=np.uint64)
    t = Trace(np.cumsum(rng.exponential(1.0, len(reqs))), counts * 16, counts, offsets, keys, 16, "test", "-")
    stack = LRUStack(ttl_s=ttl_s, count_from=count_from, expected_keys=1)     # tiny: compactions and growth
    for a in range(0, t.n_requests, 50):
        stack.feed(t.slice(a, a + 50))
    rk, rt = reference_stream(t)
    want = _stack_distances(rk.tolist(), rt.tolist(), ttl_s, count_from)
    got = stack.counts()
    assert want.sum() > 1000 and np.array_equal(got[1:], want[1:])


def test_stack_counts_the_expired_references(ttl_trace_file):
    """Of the 7 references, 2 are cold (first touches of blocks 1 and 2) and 2 find their block expired
    (block 1 idle 8.5 s at t=16.5, block 2 idle 16.5 s at t=24.5)."""
    from kvbench.analysis.curves.stack import LRUStack

    s = LRUStack(ttl_s=TTL_S)
    s.feed(read_trace(ttl_trace_file))
    assert (s.references, s.cold, s.expired) == (TTL_REFS, 2, 2)


def test_counts_end_at_the_largest_distance_seen():
    """Blocks 1 2 1 1, one a request: reuses at distance 2 (1, with 2 between) and 1 (1 again): hist [0, 1, 1],
    trimmed there (no trailing zero); a stream without reuse counts one zero."""
    from tests.conftest import make_trace

    s = LRUStack()
    s.feed(make_trace([0, 1, 2, 3], [[1], [2], [1], [1]]))
    assert s.counts().tolist() == [0, 1, 1] and (s.references, s.cold, s.distinct) == (4, 2, 2)
    none = LRUStack()
    none.feed(make_trace([0, 1], [[1], [2]]))
    assert none.counts().tolist() == [0]
