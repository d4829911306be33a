"""Hit-ratio curves on a trace small enough to trace by hand, and the paths the property tests leave open
(default capacities, byte units, other policies, argument checks, batch-wise vs whole-trace SHARDS).

Trace T, one block per request, touch order 1 2 1 3 1 2: reuses of 1 at distance 2 (only 2 between), of 1
again at distance 2 (only 3), of 2 at distance 3 (1 and 3). Hits: C=1: 0, C=2: 2, C>=3: 3, of 6 references;
3 cold, 3 distinct, largest distance 3, infinite hit ratio 1/2.
"""

from __future__ import annotations

import numpy as np
import pytest

from kvbench.analysis.curves.profile import (capacity_blocks, exact_profile, hit_ratio_curve, shards_profile,
                                     stream_profile)
from kvbench.errors import UsageError
from kvbench.stream.chain import splitmix64
from kvbench.stream.traces import Trace


def trace(keys_per_request, times=None) -> Trace:
    counts = np.array([len(k) for k in keys_per_request], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    keys = np.array([k for ks in keys_per_request for k in ks], dtype=np.uint64)
    t = np.arange(len(counts), dtype=np.float64) if times is None else np.asarray(times, dtype=np.float64)
    return Trace(t, counts * 16, counts, offsets, keys, 16, "hand", "-")


T = trace([[1], [2], [1], [3], [1], [2]])


def test_exact_profile_by_hand():
    p = exact_profile(T)
    assert p.hits_at([1, 2, 3, 100]).tolist() == [0, 2, 3, 3]
    assert (p.references, p.cold, p.distinct_blocks, p.max_distance) == (6, 3, 3, 3.0)
    assert p.infinite_hit_ratio == 0.5 and p.sample_rate == 1.0 and p.sampled_references == 6
    assert p.method == "exact" and p.ttl_s is None and p.warmup == 0.0


def test_one_reuse_after_warm_up():
    # [1] [1] with the first request as warm-up: 1 reference, 1 hit (one distance step)
    p = exact_profile(trace([[1], [1]]), warmup=0.5)
    assert (p.references, p.infinite_hit_ratio, p.hit_ratio([1]).tolist()) == (1, 1.0, [1.0])


def test_default_capacities_by_hand():
    p = exact_profile(T)
    assert p.default_capacities(4).tolist() == [1, 2, 3]          # geomspace(1, 3, 4) = 1, 1.44, 2.08, 3
    assert p.default_capacities(1).tolist() == [1, 3]             # at least two points: both ends
    assert exact_profile(trace([[1], [2]])).default_capacities().tolist() == [1]   # no reuse: one point


def test_curve_units_and_defaults():
    c = hit_ratio_curve(T)
    assert c.capacities.tolist() == [1, 2, 3] and c.capacities_blocks.tolist() == [1, 2, 3]
    assert c.hit_ratio.tolist() == [0.0, 1 / 3, 0.5] and c.sample_rate == 1.0 and c.method == "exact"
    b = hit_ratio_curve(T, unit="bytes", block_bytes=100)
    assert b.capacities.tolist() == [100, 200, 300] and b.capacities_blocks.tolist() == [1, 2, 3]
    assert hit_ratio_curve(T, capacities=[250], unit="bytes", block_bytes=100).capacities_blocks.tolist() == [2]
    f = hit_ratio_curve(T, policy="fifo")
    assert f.capacities.tolist() == [1, 2, 3] and f.method == "simulation" and f.sample_rate == 1.0
    assert f.infinite_hit_ratio == 0.5 and f.references == 6 and f.distinct_blocks == 3
    fb = hit_ratio_curve(T, policy="fifo", unit="bytes", block_bytes=100)
    assert fb.capacities.tolist() == [100, 200, 300] and fb.capacities_blocks.tolist() == [1, 2, 3]
    one = hit_ratio_curve(T, policy="fifo", capacities=[100], unit="bytes", block_bytes=100)
    assert one.capacities_blocks.tolist() == [1]                    # exactly one block is a valid size
    with pytest.raises(UsageError, match="smaller than one block"):
        hit_ratio_curve(T, policy="fifo", capacities=[99], unit="bytes", block_bytes=100)
    # a sampled profile handed in: the infinite-size ratio still comes from the exact curve
    s = hit_ratio_curve(T, policy="fifo", profile=shards_profile(T, rate=0.3))
    assert s.infinite_hit_ratio == 0.5


def test_simulated_policies_default_to_16_log_spaced_sizes():
    keys = [[k] for k in range(1, 101)] * 2                       # 100 distinct blocks, each reused once
    c = hit_ratio_curve(trace(keys), policy="fifo")
    want = np.unique(np.round(np.geomspace(1, 100, 16)).astype(np.int64))
    assert c.capacities.tolist() == want.tolist() and c.capacities[-1] == 100
    assert c.hit_ratio[-1] == 0.5 and c.hit_ratio[0] == 0.0


def test_argument_checks():
    with pytest.raises(UsageError, match="retention"):
        hit_ratio_curve(T, ttl_s=0)
    with pytest.raises(UsageError, match="got -1"):
        capacity_blocks([5, -1, 0], "blocks", None)
    with pytest.raises(UsageError, match="got none"):
        capacity_blocks([], "blocks", None)
    with pytest.raises(UsageError, match="unit"):
        capacity_blocks([5], "pages", None)
    with pytest.raises(UsageError, match="block size"):
        capacity_blocks([5], "bytes", None)
    for bad in (0.0, 1.5):
        with pytest.raises(UsageError, match="sampling rate"):
            shards_profile(T, rate=bad)
        with pytest.raises(UsageError, match="sampling rate"):
            stream_profile([T], rate=bad)
    with pytest.raises(UsageError, match="sample size"):
        shards_profile(T, size=0)
    assert shards_profile(T, size=1).references == 6
    with pytest.raises(UsageError, match="warm-up"):
        exact_profile(T, warmup=1.0)


def _chain_trace(n_requests=400, seed=2):
    rng = np.random.default_rng(seed)
    reqs = [[int(c) * 1000 + i for i in range(1, int(rng.integers(1, 6)) + 1)]
            for c in rng.zipf(1.3, n_requests) % 200]
    return trace(reqs)


@pytest.mark.parametrize("rate", [0.3, 0.5, 1.0])
def test_batchwise_shards_equals_whole_trace_shards(rate):
    """Two implementations of fixed-rate SHARDS (one over the whole trace, one batch by batch) must agree
    exactly: same sample, same distances, same correction."""
    t = _chain_trace()
    whole = shards_profile(t, rate=rate)
    batched, meta = stream_profile([t.slice(0, 150), t.slice(150, 400)], rate=rate)
    caps = [1, 2, 5, 10, 50, 100, 1000]
    assert np.allclose(batched.hits_at(caps), whole.hits_at(caps), rtol=0, atol=1e-9)
    assert (batched.references, batched.sample_rate) == (whole.references, rate) and meta["references"] == t.n_blocks
    assert batched.cold == pytest.approx(whole.cold) and batched.distinct_blocks == pytest.approx(whole.distinct_blocks)
    if rate == 1.0:
        assert np.allclose(whole.hits_at(caps), exact_profile(t).hits_at(caps), rtol=0, atol=1e-9)


def test_fixed_rate_shards_against_a_brute_force_sample():
    """SHARDS by hand: keep the references whose key hash is below rate * 2^64, take LRU stack distances among
    them, scale distances and weights by 1/rate, and add the SHARDS_adj correction (all references minus the
    sample's estimate of them) at the smallest distance."""
    t, rate = _chain_trace(), 0.5
    keys = t.keys[t.touch_order()]
    frac = (splitmix64(keys) >> np.uint64(11)).astype(np.float64) / 2.0**53
    keep = keys[frac < rate].tolist()
    stack, dists = [], []
    for k in keep:
        if k in stack:
            dists.append(len(stack) - stack.index(k))
            stack.remove(k)
        stack.append(k)
    adj = t.n_blocks - len(keep) / rate
    p = shards_profile(t, rate=rate)
    for c in (1, 2, 4, 10, 40, 100):
        want = sum(1 for d in dists if d / rate <= c) / rate + (adj if min(dists) / rate <= c else 0.0)
        assert p.hits_at([c])[0] == pytest.approx(max(0.0, min(want, t.n_blocks)), abs=1e-9), c
    assert p.sampled_references == len(keep) and p.cold == pytest.approx((len(keep) - len(dists)) / rate)


def test_fixed_size_shards_ends_at_the_hash_of_the_first_key_it_dropped():
    """Fixed-size SHARDS keeps the ``size`` keys of smallest hash and lowers its rate to the hash of each key it
    drops: the reported rate (the one in force at the last sampled reference) is the hash of a dropped key, at
    or above the (size+1)-th smallest."""
    t = _chain_trace()
    uniq = np.unique(t.keys)
    frac = np.sort((splitmix64(uniq) >> np.uint64(11)).astype(np.float64) / 2.0**53)
    for size in (5, 20, 60):
        p = shards_profile(t, size=size)
        assert p.sample_rate >= frac[size] and np.isclose(frac[size:], p.sample_rate, rtol=1e-12, atol=0).any()
    assert shards_profile(t, size=len(uniq)).sample_rate == 1.0


def test_first_key_survives_the_hash_table_growing():
    """Key 1 is touched first (slot 0), then 5,000 other keys make the exact kernel's key table grow (it
    starts at 1,024 entries) and rehash; key 1 comes back at stack distance 5,001."""
    t = trace([[1]] + [[k] for k in range(2, 5002)] + [[1]])
    p = exact_profile(t)
    assert p.hits_at([5000, 5001]).tolist() == [0, 1] and p.cold == 5001
    assert exact_profile(t, ttl_s=1e9).hits_at([5001]).tolist() == [1]


def test_one_request_larger_than_the_key_table():
    """A single 5,000-block request (more than the kernel's initial table holds) and its repeat: every block
    of the repeat is a hit at capacity 5,000, none at 4,999 (deepest-first touches put each at distance 5,000)."""
    t = trace([list(range(1, 5001)), list(range(1, 5001))])
    assert exact_profile(t).hits_at([4999, 5000]).tolist() == [0, 5000]
