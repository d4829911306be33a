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
from kvbench.stream.traces import Trace, read_trace
from kvbench.analysis.curves.profile import ReuseProfile
from kvbench.analysis.curves.profile import sampled_trace
from collections import OrderedDict
from hypothesis import given
from hypothesis import strategies as st
from kvbench.analysis.curves.profile import reference_stream
from tests.conftest import TTL_S, TTL_HITS, TTL_REFS, TTL_HITS_NO_TTL
from kvbench.stream.generators import GenSpec
from kvbench.stream.generators import generate
from kvbench.stream.generators import write_trace
from tests.conftest import FIXTURES
from tests.conftest import REPO


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


# --- SHARDS' spatial sample against a pure-Python oracle (the splitmix64 finaliser written out here, its constants
# from Steele et al., "Fast splittable pseudorandom number generators", OOPSLA 2014), and the ReuseProfile
# fields the other curve tests do not pin: defaults, clipping, no reuse.
M64 = (1 << 64) - 1


GOLDEN, M1, M2 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB


def splitmix(x: int) -> int:
    z = (x + GOLDEN) & M64
    z = ((z ^ (z >> 30)) * M1) & M64
    z = ((z ^ (z >> 27)) * M2) & M64
    return z ^ (z >> 31)


def _unshift(z: int, s: int) -> int:
    x = z
    for _ in range(64 // s + 1):
        x = z ^ (x >> s)
    return x


def unsplitmix(h: int) -> int:
    """The key whose splitmix64 is ``h`` (each step of the finaliser is a bijection)."""
    z = _unshift(h, 31)
    z = (z * pow(M2, -1, 1 << 64)) & M64
    z = _unshift(z, 27)
    z = (z * pow(M1, -1, 1 << 64)) & M64
    z = _unshift(z, 30)
    return (z - GOLDEN) & M64


KEYS = [[3, 17], [99], [3, 1 << 40], [12345, 17, 8], [99, 5]]


def _fixed_size_oracle(stream, size):
    """Fixed-size SHARDS' sampling decisions, written out: a reference is sampled when its key's hash fraction
    is below the threshold (1 at first); a new key joins the sample and, past ``size`` keys, the one of largest
    hash leaves and its hash becomes the threshold. Returns (sampled references, final threshold, the distinct
    keys estimated as the sum of 1 / threshold over the first references)."""
    import heapq

    frac = {k: (splitmix(k) >> 11) / 2.0**53 for k in set(stream)}
    thr, sample, heap, taken, distinct = 1.0, set(), [], 0, 0.0
    for k in stream:
        if frac[k] >= thr:
            continue
        taken += 1
        if k not in sample:
            distinct += 1.0 / thr
            sample.add(k)
            heapq.heappush(heap, (-frac[k], k))
            if len(sample) > size:
                f, out = heapq.heappop(heap)
                sample.discard(out)
                thr = -f
    return taken, thr, distinct


@pytest.mark.parametrize("rate", [0.25, 0.5, 0.75])
def test_the_sample_is_the_keys_whose_hash_is_below_the_rate(rate):
    """Unsalted by default; with a salt s the hash is of key XOR s. Requests keep their order, blocks theirs."""
    t = trace(KEYS)
    thr = int(rate * 2.0**64)
    for salt in (0, 0x5DEECE66D):
        want = [[k for k in ks if splitmix(k ^ salt) < thr] for ks in KEYS]
        sub, n = sampled_trace(t, rate, salt) if salt else sampled_trace(t, rate)
        got = [sub.keys[sub.offsets[r]:sub.offsets[r + 1]].tolist() for r in range(sub.n_requests)]
        assert got == want and n == sum(map(len, want)) and sub.n_requests == len(KEYS)


def test_rate_one_keeps_the_key_of_the_largest_admissible_hash():
    """At rate 1 the threshold is 2^64 - 1: the key hashing to 2^64 - 2 is sampled (the one hashing to
    2^64 - 1, 1 key in 2^64, is the only one a threshold below 2^64 cannot admit)."""
    top = unsplitmix(M64 - 1)
    assert splitmix(top) == M64 - 1
    sub, n = sampled_trace(trace([[top], [1]]), 1.0)
    assert sub.keys.tolist() == [top, 1] and n == 2


def test_profile_defaults_clipping_and_no_reuse():
    batched, _ = stream_profile([T.slice(0, 3), T.slice(3, 6)])
    assert batched.warmup == 0.0 and batched.sample_rate == 1.0 and batched.method == "exact"
    # an estimate above the references (SHARDS' correction can overshoot) is clipped to 1
    over = ReuseProfile(np.array([1.0, 4.0]), np.array([3.0, 12.0]), references=10, cold=0.0, distinct_blocks=4.0,
                        method="shards-fixed-rate")
    assert over.infinite_hit_ratio == 1.0 and over.hits_at([1, 4]).tolist() == [3.0, 10.0]
    none = exact_profile(trace([[1], [2], [3]]))
    assert none.max_distance == 0.0 and none.infinite_hit_ratio == 0.0 and none.hits_at([1, 5]).tolist() == [0, 0]


def test_default_capacities_are_256_log_spaced_points():
    p = ReuseProfile(np.array([1.0, 1e5]), np.array([1.0, 2.0]), references=4, cold=2.0, distinct_blocks=3.0,
                     method="exact")
    want = sorted({round(10 ** (5 * k / 255)) for k in range(256)})
    assert p.default_capacities().tolist() == want


def test_fixed_size_pre_filter_across_chunks_keeps_every_reference_of_the_sample():
    """65,536 distinct keys (one chunk of the candidate pre-filter), then all of them again in the same order
    (a second chunk). Fixed-size SHARDS of 4 keys ends with the 4 of smallest hash and the 5th smallest as its
    rate; the pre-filter, which drops later references at or above that bound, must keep the second reference
    of each of the 4: the sampled references are the oracle's, and every re-reference lies at sampled distance
    4 (the other three sampled keys come between), i.e. 4 / rate."""
    from kvbench.analysis.curves.profile import shards_profile

    n = 1 << 16
    keys = [k * 7919 + 11 for k in range(n)]
    t = trace([[k] for k in keys] * 2)
    taken, rate, distinct = _fixed_size_oracle(keys * 2, 4)
    assert rate == sorted((splitmix(k) >> 11) / 2.0**53 for k in keys)[4]
    p = shards_profile(t, size=4)
    assert p.sampled_references == taken and p.sample_rate == rate
    assert p.distinct_blocks == pytest.approx(distinct, rel=1e-12) and p.cold == pytest.approx(distinct, rel=1e-12)
    assert p.steps.tolist() == pytest.approx([4 / rate])
    assert p.hits_at([4 / rate * 0.999])[0] == 0.0 and p.hits_at([4 / rate * 1.001])[0] > 0


def test_a_request_longer_than_a_pre_filter_chunk():
    """One request of 70,000 blocks (more than a 65,536-reference chunk), then its deepest block again: the
    pre-filter steps over the long request whole; fixed-size SHARDS over all 70,000 keys samples everything
    and finds the re-reference at distance 70,000 (deepest-first touches put block 70,000 first)."""
    t = trace([list(range(1, 70_001)), [70_000]])
    from kvbench.analysis.curves.profile import shards_profile

    p = shards_profile(t, size=70_000)
    assert p.sample_rate == 1.0 and p.sampled_references == 70_001
    assert p.hits_at([69_999, 70_000]).tolist() == [0.0, 1.0]


# Keys 3, 4 hash below 0.5 (fractions 0.113, 0.431: sampled at rate 0.5), key 1 above (0.567): checked below.
def test_keys_of_the_hand_cases_fall_where_the_cases_need():
    frac = {k: (splitmix(k) >> 11) / 2.0**53 for k in (1, 3, 4)}
    assert frac[3] < 0.5 and frac[4] < 0.5 <= frac[1]


def test_fixed_rate_correction_with_one_reuse_distance():
    """[3] [3] [1] at rate 0.5: the sample holds 3, 3 (one reuse at sampled distance 1, estimated 2, weight 2);
    SHARDS_adj = 3 references - 2 sampled / 0.5 = -1, added at the smallest distance: 2 - 1 = 1 hit at 2."""
    from kvbench.analysis.curves.profile import shards_profile

    t = trace([[3], [3], [1]])
    for p in (shards_profile(t, rate=0.5), stream_profile([t], rate=0.5)[0]):
        assert p.hits_at([1, 2]).tolist() == [0.0, 1.0] and p.extra["adjustment"] == -1.0


def test_fixed_rate_correction_goes_to_the_smallest_of_two_distances():
    """[3] [3] [4] [3] [1] [1] at rate 0.5: sampled 3 3 4 3, reuses at sampled distances 1 and 2 (estimated 2
    and 4, weight 2 each); SHARDS_adj = 6 - 4 / 0.5 = -2 lands on distance 2's step: hits 0 at 2, 2 at 4."""
    from kvbench.analysis.curves.profile import shards_profile

    t = trace([[3], [3], [4], [3], [1], [1]])
    for p in (shards_profile(t, rate=0.5), stream_profile([t], rate=0.5)[0]):
        assert p.hits_at([2, 4]).tolist() == [0.0, 2.0]


def test_stream_profile_without_a_sampled_reuse_and_its_kernel_time():
    """No sampled key comes back: no correction to place, no hits (and no error). kernel_s is the stack's share
    of the call: between 0 and the call's own duration, whatever the machine's load."""
    import time

    t0 = time.perf_counter()
    p, meta = stream_profile([trace([[3], [1], [4], [1]])], rate=0.5)
    elapsed = time.perf_counter() - t0
    assert p.hits_at([1, 100]).tolist() == [0.0, 0.0] and p.references == 4
    assert 0.0 <= meta["kernel_s"] <= elapsed


def test_policy_warm_up_replays_the_first_requests():
    """FIFO on [1] [1] [2] with the first third as warm-up: the warm-up request loads block 1, so the measured
    [1] hits and [2] misses: 1/2 at any capacity."""
    from kvbench.analysis.curves.profile import policy_hit_ratios

    ratios, refs = policy_hit_ratios(trace([[1], [1], [2]]), "fifo", [1, 4], warmup=1 / 3)
    assert ratios.tolist() == [0.5, 0.5] and refs == 2


def test_curve_arguments_at_their_edges():
    from kvbench.analysis.curves.profile import capacity_blocks, hit_ratio_curve
    from kvbench.errors import UsageError

    with pytest.raises(UsageError, match=r"got -1\)"):
        capacity_blocks([5, 1, -1, -2], "blocks", None)          # names the first bad capacity (1 is fine)
    # half a second of retention is a retention: T's reuse gaps (2, 2 and 4 s) all expire; at 2 s the two
    # reuses of block 1 stay
    assert hit_ratio_curve(T, ttl_s=0.5, capacities=[1, 3]).hit_ratio.tolist() == [0.0, 0.0]
    assert hit_ratio_curve(T, ttl_s=2.0, capacities=[3]).hit_ratio.tolist() == [pytest.approx(1 / 3)]
    assert hit_ratio_curve(T, sample_size=2).method == "shards-fixed-size"
    assert hit_ratio_curve(T, sample=0.5).method == "shards-fixed-rate"


@pytest.mark.parametrize("size", [1, 3])
def test_fixed_size_shards_of_one_key_and_of_three_against_the_oracle(size):
    from kvbench.analysis.curves.profile import shards_profile



    t = _chain_trace()
    stream = t.keys[t.touch_order()].tolist()
    taken, rate, distinct = _fixed_size_oracle(stream, size)
    p = shards_profile(t, size=size)
    assert (p.sampled_references, p.sample_rate) == (taken, rate)
    assert p.distinct_blocks == pytest.approx(distinct, rel=1e-12)


def test_default_curve_has_256_log_spaced_capacities():
    """Block 1, 5,000 others, block 1 again: the largest distance is 5,001; the default curve spans 1..5,001
    in 256 geometric steps, rounded, repeats dropped."""
    from kvbench.analysis.curves.profile import hit_ratio_curve

    t = trace([[1]] + [[k] for k in range(2, 5002)] + [[1]])
    want = sorted({round(5001 ** (k / 255)) for k in range(256)})
    assert hit_ratio_curve(t).capacities.tolist() == want


def test_warm_up_of_a_compacted_key_sample_counts_the_whole_streams_requests():
    """Compacted, a trace keeps requests 0, 1, 4 and 5 of six: a warm-up of half the stream (3 requests) ends
    at the first kept request at or after request 3 (kept index 2); read whole it ends at request 3."""
    from kvbench.analysis.curves.profile import warmup_request
    from kvbench.stream.sampling import FULL_BLOCKS, compact
    from kvbench.stream.traces import Trace

    t = Trace(timestamp_s=np.arange(6.0), input_tokens=np.full(6, 10), output_tokens=np.ones(6, np.int64),
              offsets=np.array([0, 0, 2, 2, 2, 3, 3]), keys=np.array([7, 8, 9], dtype=np.uint64), block_tokens=16,
              fmt="x", path="x", extras={FULL_BLOCKS: np.array([3, 5, 2, 4, 6, 1])}, meta={"sample_rate": 0.5})
    c = compact(t)
    assert [warmup_request(t, w) for w in (0.0, 0.2, 0.5, 0.9)] == [0, 1, 3, 5]
    assert [warmup_request(c, w) for w in (0.0, 0.2, 0.5, 0.9)] == [0, 1, 2, 3]


def test_fixed_rate_shards_cold_and_distinct_are_the_samples_over_the_rate():
    """The cold references and distinct blocks a fixed-rate SHARDS profile states: the sample's own (counted
    by a plain LRU pass over the sampled trace) divided by the rate."""
    from kvbench.analysis.curves.profile import exact_profile, sampled_trace, shards_profile
    from kvbench.stream.traces import read_trace

    tr = read_trace("mooncake-sample")
    for rate in (0.1, 0.5):
        sub, _ = sampled_trace(tr, rate)
        keys = sub.keys.tolist()
        distinct = len(set(keys))
        p = shards_profile(tr, rate=rate)
        assert p.distinct_blocks == pytest.approx(distinct / rate)
        assert p.cold == pytest.approx(exact_profile(sub).cold / rate) and exact_profile(sub).cold == distinct


def test_fixed_size_shards_grows_its_tree_past_the_first_width():
    """70,000 distinct keys under a sample size above them: every key stays sampled (rate 1), so the estimate
    is the exact curve, while the Fenwick tree (first width 65,538 slots) and the key table grow under it."""
    from kvbench.analysis.curves.profile import shards_profile
    from kvbench.stream.traces import Trace

    rng = np.random.default_rng(9)
    keys = np.concatenate([np.arange(70_000), rng.integers(0, 70_000, 30_000)]).astype(np.uint64) + 1
    n = keys.size
    t = Trace(timestamp_s=np.arange(n, dtype=np.float64), input_tokens=np.full(n, 16),
              output_tokens=np.ones(n, np.int64), offsets=np.arange(n + 1), keys=keys, block_tokens=16, fmt="x",
              path="x")
    exact = exact_profile(t)
    est = shards_profile(t, size=100_000)
    caps = np.geomspace(1, 80_000, 40)
    assert est.sample_rate == 1.0
    np.testing.assert_allclose(est.hit_ratio(caps), exact.hit_ratio(caps), atol=1e-12)


def test_mrc_warns_when_the_sample_holds_no_reuse(cli, tmp_path):
    """Keys 3 and 4 fall in the 0.5 sample, 1 does not: [3] [1] [4] [1] samples 3, 4 - no reuse. The command
    says so (one line on stderr and in the JSON), names the fix, and still exits 0 with its (zero) curve;
    a sample with reuse, or the exact curve, warns of nothing."""
    import json

    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps({"timestamp": 1000 * i, "input_length": 512, "output_length": 1,
                                        "hash_ids": ids}) + "\n" for i, ids in enumerate([[3], [1], [4], [1]])))
    r = cli("mrc", str(path), "--sample", "0.5", "--json")
    assert r.exit_code == 0
    out = json.loads(r.stdout)
    assert out["warnings"] == ["the sample at rate 0.5 holds no reuse (2 sampled references, each a first touch): "
                               "its curve is 0 at every capacity and SHARDS_adj has no reuse to correct; raise "
                               "--sample (or --sample-size) or drop it for the exact curve"]
    assert r.stderr.count("warning: the sample at rate 0.5 holds no reuse") == 1
    assert json.loads(cli("mrc", str(path), "--json").stdout)["warnings"] == []
    path.write_text("".join(json.dumps({"timestamp": 1000 * i, "input_length": 512, "output_length": 1,
                                        "hash_ids": ids}) + "\n" for i, ids in enumerate([[3], [1], [3], [1]])))
    assert json.loads(cli("mrc", str(path), "--sample", "0.5", "--json").stdout)["warnings"] == []


# A reuse gap exactly at the retention time is a hit, just over it a miss: the TTL boundary trace, tests/conftest.py


def test_exact_curve_keeps_a_block_idle_exactly_the_ttl(ttl_trace_file):
    tr = read_trace(ttl_trace_file)
    assert tr.timestamp_s.tolist() == [0.0, 8.0, 16.5, 24.5]
    p = exact_profile(tr, ttl_s=TTL_S)
    assert p.hit_ratio([2, 100]).tolist() == [TTL_HITS / TTL_REFS, TTL_HITS / TTL_REFS]
    assert exact_profile(tr).hit_ratio([100])[0] == TTL_HITS_NO_TTL / TTL_REFS
    # just under the gap of 8 s: every reuse expires
    assert exact_profile(tr, ttl_s=7.999).hit_ratio([100])[0] == 0.0


def test_shards_at_full_rate_and_fixed_size_agree_at_the_boundary(ttl_trace_file):
    tr = read_trace(ttl_trace_file)
    assert shards_profile(tr, rate=1.0, ttl_s=TTL_S).hit_ratio([100])[0] == pytest.approx(TTL_HITS / TTL_REFS, abs=1e-12)
    assert shards_profile(tr, size=1000, ttl_s=TTL_S).hit_ratio([100])[0] == pytest.approx(TTL_HITS / TTL_REFS, abs=1e-12)


def test_curve_api_with_ttl(ttl_trace_file):
    c = hit_ratio_curve(read_trace(ttl_trace_file), capacities=[1, 2, 100], ttl_s=TTL_S)
    assert c.hit_ratio.tolist()[1:] == [TTL_HITS / TTL_REFS, TTL_HITS / TTL_REFS]


# --- Property tests against brute-force oracles (hypothesis; derandomized in CI, see conftest):
# 
# - the exact one-pass curve (Mattson stack distances, compiled kernel) equals an OrderedDict LRU simulated at
#   every capacity, with and without retention, on random traces;
# - SHARDS at rate 1 is the exact curve;
# - the tier simulation's accounting: its block events agree with its counters kind by kind, every read finds
#   in its slot the content (key, version) last written there, hits per tier add up, and a single LRU tier's
#   hits equal the exact curve at that capacity.
requests = st.lists(
    st.tuples(st.sampled_from([0.0, 0.0, 0.5, 1.0, 2.0, 3.5]),                       # gap to the previous request
              st.lists(st.integers(1, 12), min_size=1, max_size=5)),                  # block keys
    min_size=1, max_size=40)


def gap_trace(reqs) -> Trace:
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
    tr = gap_trace(reqs)
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


# --- from test_mrc.py: Hit-ratio curves: the exact one-pass LRU curve equals a brute-force OrderedDict LRU over the same touch order
# (1e-9), with retention and warm-up; SHARDS stays within its stated error; other policies through sim.policies.
SAMPLE = REPO / "workloads" / "traces" / "mooncake-sample.jsonl"


def brute_lru(trace: Trace, capacities, ttl_s=None, warmup_refs=0):
    """Reference: an OrderedDict LRU per capacity over keys in touch order; hits counted per reference."""
    keys, times = reference_stream(trace)
    keys, times = keys.tolist(), times.tolist()
    out = []
    for c in capacities:
        od: OrderedDict = OrderedDict()
        hits = 0
        for i, (k, t) in enumerate(zip(keys, times)):
            last = od.get(k)
            hit = last is not None and (ttl_s is None or t - last <= ttl_s)
            if last is not None:
                del od[k]
            od[k] = t
            if len(od) > c:
                od.popitem(last=False)
            if hit and i >= warmup_refs:
                hits += 1
        out.append(hits / (len(keys) - warmup_refs))
    return np.array(out)


def _gen(tmp_path, kind, n=300, seed=5, **kw):
    p = write_trace(generate(GenSpec(kind, requests=n, rate=2.0, seed=seed, **kw)), tmp_path / f"{kind}.jsonl")
    return read_trace(p)


CAPS = [1, 2, 3, 5, 8, 13, 50, 100, 333, 1000, 2500, 10000, 10**6]


@pytest.mark.parametrize("source", ["sample", "bailian", "lmbench", "chat", "agent", "docqa", "qa"])
def test_exact_equals_bruteforce(tmp_path, source):
    if source == "sample":
        t = read_trace(SAMPLE, limit=400)
    elif source in ("bailian", "lmbench"):
        t = read_trace(FIXTURES / "traces" / f"{source}_sample.jsonl")
    else:
        t = _gen(tmp_path, source, n=120 if source == "agent" else 300, block_tokens=64 if source == "qa" else 512)
    p = exact_profile(t)
    ref = brute_lru(t, CAPS)
    assert np.allclose(p.hit_ratio(CAPS), ref, rtol=0, atol=1e-9)
    assert p.references == t.n_blocks and p.distinct_blocks == np.unique(t.keys).size
    assert p.infinite_hit_ratio == pytest.approx(1 - np.unique(t.keys).size / t.n_blocks, abs=1e-12)
    # every capacity: the profile's step function is the full curve
    full = np.arange(1, int(p.max_distance) + 2)
    assert np.all(np.diff(p.hit_ratio(full)) >= 0)


def test_ttl_and_warmup_equal_bruteforce(tmp_path):
    t = _gen(tmp_path, "chat", n=400)
    for ttl in (5.0, 60.0, 600.0):
        p = exact_profile(t, ttl_s=ttl, warmup=0.25)
        start = int(t.offsets[100])
        ref = brute_lru(t, CAPS, ttl_s=ttl, warmup_refs=start)
        assert np.allclose(p.hit_ratio(CAPS), ref, rtol=0, atol=1e-9)
        assert p.references == t.n_blocks - start


def test_prefix_hits_are_block_hits(tmp_path):
    """Deepest-first touches: each request's hits are a leading run (sim.policies' prefix count agrees)."""
    t = _gen(tmp_path, "docqa", n=200)
    caps = [10, 100, 1000]
    exact = exact_profile(t).hit_ratio(caps)
    for c, e in zip(caps, exact):
        sim = hit_ratio_curve(t, capacities=[c], policy="lru").hit_ratio[0]
        from kvbench.sim.policies import make_policy, simulate_prefix

        assert simulate_prefix([t], make_policy("lru", c)).hit_ratio == pytest.approx(e, abs=1e-12)
        assert sim == pytest.approx(e, abs=1e-12)


def test_random_stream_many_compactions():
    """A long random stream over few keys: slot compaction happens thousands of times; still exact."""
    rng = np.random.default_rng(0)
    n_req = 3000
    counts = rng.integers(1, 6, n_req)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    keys = rng.integers(0, 700, int(offsets[-1])).astype(np.uint64)
    t = Trace(np.arange(n_req, dtype=float), counts * 16, counts, offsets, keys, 16, "test", "-")
    caps = [1, 7, 50, 200, 500, 699, 700]
    assert np.allclose(exact_profile(t).hit_ratio(caps), brute_lru(t, caps), rtol=0, atol=1e-9)


def test_shards_within_stated_error(tmp_path):
    """Stated error (mean absolute error over 100 capacities evenly spaced up to the largest reuse distance, as
    SHARDS reports it; capacities below ~1/rate blocks are not resolved): fixed-rate 10% <= 0.015, fixed-size
    4096 keys <= 0.01 on a chat trace. Rate 1.0 and a size above the distinct keys are exact."""
    t = _gen(tmp_path, "chat", n=3000, block_tokens=64)
    exact = exact_profile(t)
    caps = exact.default_capacities(64)
    for kw in ({"rate": 1.0}, {"size": 10**7}):
        assert np.allclose(shards_profile(t, **kw).hit_ratio(caps), exact.hit_ratio(caps), atol=1e-12)
    grid = np.linspace(1, exact.max_distance, 100)
    for kw, tol in (({"rate": 0.1}, 0.015), ({"size": 4096}, 0.01)):
        est = shards_profile(t, **kw)
        mae = np.mean(np.abs(est.hit_ratio(grid) - exact.hit_ratio(grid)))
        assert mae <= tol, (kw, mae)
        assert est.sampled_references < 0.5 * t.n_blocks
    fs = shards_profile(t, size=4096)
    assert fs.sample_rate < 1.0 and fs.method == "shards-fixed-size"
    # retention and warm-up carry through sampling exactly at rate 1
    a = shards_profile(t, rate=1.0, ttl_s=120, warmup=0.2).hit_ratio(caps)
    assert np.allclose(a, exact_profile(t, ttl_s=120, warmup=0.2).hit_ratio(caps), atol=1e-12)


def test_bytes_units_and_bad_capacities():
    t = read_trace(SAMPLE, limit=200)
    from kvbench.spec.models import load_model

    bb = load_model("llama-3.1-8b").block_bytes(512)
    assert bb == 131072 * 512
    c = hit_ratio_curve(t, capacities=[bb * 10, bb * 100 + 5], unit="bytes", block_bytes=bb)
    assert c.capacities_blocks.tolist() == [10, 100]
    assert np.allclose(c.hit_ratio, exact_profile(t).hit_ratio([10, 100]))
    with pytest.raises(UsageError, match="capacities must be > 0"):
        capacity_blocks([100, 0], "blocks", None)
    with pytest.raises(UsageError, match="need a block size"):
        capacity_blocks([100], "bytes", None)
    with pytest.raises(UsageError, match="warm-up"):
        exact_profile(t, warmup=1.0)


def test_other_policies_warmup_and_ordering(tmp_path):
    t = _gen(tmp_path, "agent", n=100)
    caps = [50, 500, 5000]
    lru = hit_ratio_curve(t, capacities=caps, policy="lru", warmup=0.1)
    fifo = hit_ratio_curve(t, capacities=caps, policy="fifo", warmup=0.1)
    s3 = hit_ratio_curve(t, capacities=caps, policy="s3fifo", warmup=0.1)
    assert fifo.references == lru.references == t.n_blocks - int(t.offsets[10])
    for c in (fifo, s3):
        assert np.all((c.hit_ratio >= 0) & (c.hit_ratio <= c.infinite_hit_ratio + 1e-12))
        assert c.infinite_hit_ratio == pytest.approx(lru.infinite_hit_ratio)
    # at a capacity holding every block no policy evicts: all equal the infinite-cache ratio
    big = [int(np.unique(t.keys).size)]
    for p in ("lru", "fifo", "s3fifo"):
        assert hit_ratio_curve(t, capacities=big, policy=p, warmup=0.1).hit_ratio[0] == \
            pytest.approx(lru.infinite_hit_ratio, abs=1e-12)


def test_shared_traces_exact(shared_dir):
    caps = [10, 100, 1000, 4000, 16000, 40000]
    for rel in ("mooncake-fast25/synthetic_trace.jsonl", "lmbench-gmi/gmi_trace.jsonl"):
        t = read_trace(shared_dir / "traces" / rel)
        p = exact_profile(t)
        assert np.allclose(p.hit_ratio(caps), brute_lru(t, caps), rtol=0, atol=1e-9), rel
    t = read_trace(shared_dir / "traces" / "mooncake-fast25" / "synthetic_trace.jsonl")
    assert exact_profile(t).infinite_hit_ratio == pytest.approx(0.640, abs=5e-4)   # README: 1 - 43924/121877
    assert np.allclose(exact_profile(t, ttl_s=300).hit_ratio(caps), brute_lru(t, caps, ttl_s=300), atol=1e-9)


def test_stream_profile_equals_whole(tmp_path):
    from kvbench.analysis.curves.profile import stream_profile
    from kvbench.stream.traces import iter_trace

    t = read_trace(SAMPLE)
    caps = [10, 100, 1000, 10000]
    p, meta = stream_profile(iter_trace(SAMPLE, batch_requests=64), ttl_s=120)
    assert meta["requests"] == 1000 and meta["references"] == t.n_blocks and meta["format"] == "mooncake"
    assert np.allclose(p.hit_ratio(caps), exact_profile(t, ttl_s=120).hit_ratio(caps), atol=1e-12)
    s, _ = stream_profile(iter_trace(SAMPLE, batch_requests=64), rate=0.3)
    assert np.allclose(s.hit_ratio(caps), shards_profile(t, rate=0.3).hit_ratio(caps), atol=1e-12)


def test_fixed_size_shards_streamed_in_batches_equals_whole(tmp_path):
    """Fixed-size SHARDS fed batch by batch (stream_profile, what ``mrc --sample-size`` runs) equals the whole
    trace at once, with retention; a size above the distinct keys is the exact curve, reached through every
    growth path (entries, table, heap and slots start small and grow)."""
    from kvbench.analysis.curves.profile import stream_profile

    t = _gen(tmp_path, "chat", n=1500, block_tokens=64)
    caps = exact_profile(t).default_capacities(48)
    for kw in ({"size": 300}, {"size": 2000, "ttl_s": 60.0}, {"size": 400, "rate": 0.5}):
        whole = shards_profile(t, **kw)
        streamed, meta = stream_profile([t.slice(a, a + 97) for a in range(0, t.n_requests, 97)], **kw)
        assert meta["references"] == t.n_blocks
        assert np.allclose(streamed.hit_ratio(caps), whole.hit_ratio(caps), rtol=0, atol=1e-12)
        assert streamed.sample_rate == whole.sample_rate < 1.0
        assert streamed.sampled_references == whole.sampled_references
    rng = np.random.default_rng(3)
    n_req = 4000
    counts = np.full(n_req, 30)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    keys = rng.integers(0, 70_000, int(offsets[-1])).astype(np.uint64)       # > 2^15 + 2 keys: all arrays grow
    u = Trace(np.arange(n_req, dtype=float), counts * 16, counts, offsets, keys, 16, "test", "-")
    big, _ = stream_profile([u.slice(a, a + 500) for a in range(0, n_req, 500)], size=10**6)
    full = np.array([1, 10, 1000, 30_000, 69_000, 70_000])
    assert np.allclose(big.hit_ratio(full), exact_profile(u).hit_ratio(full), rtol=0, atol=1e-12)
    assert big.sample_rate == 1.0


def test_a_fixed_size_sample_as_large_as_the_key_set_fed_in_batches_is_exact():
    """Trace T's 3 keys all seen in the first batch (1 2 1 3), a sample of exactly 3 keys: the second batch's
    pre-filter has 3 hashes, none to bound by; the curve is T's (0, 2/6, 3/6 at 1, 2, 3 blocks)."""
    t = trace([[1], [2], [1], [3], [1], [2]])
    p, meta = stream_profile([t.slice(0, 4), t.slice(4, 6)], size=3)
    np.testing.assert_allclose(p.hit_ratio([1, 2, 3]), [0.0, 2 / 6, 3 / 6])
    assert p.sample_rate == 1.0 and meta["references"] == 6
    one, _ = stream_profile([t], size=1)                     # the smallest sample: one key
    assert one.method == "shards-fixed-size" and one.sample_rate < 1.0 and one.references == 6


def test_shards_of_a_key_sampled_stream_salted_or_not():
    """gen:...,sample=0.25 sampled again at 0.5: unsalted, the same hash keeps the keys under the smaller rate
    (0.25); salted, the two samples are independent: 0.25 x 0.5."""
    t = read_trace("gen:chat,duration=20m,rate=2,seed=3,sample=0.25")
    assert shards_profile(t, rate=0.5).sample_rate == 0.25
    assert shards_profile(t, rate=0.5, salt=7).sample_rate == 0.125


def test_a_warm_up_by_time_selects_exactly_the_requests_before_it():
    """--warmup 2.5s on requests at 0..5 s warms with r0..r2 (3 of 6), as the fraction 0.5 does; a time equal to
    an arrival leaves that request measured; 0 s warms nothing; a time past the last arrival is a one-line error.
    The fraction it becomes lands on its request count whatever the float rounding (every k of n = 1,000).
    Compacted (requests 0, 1, 4, 5 kept), the warm-up ends at the first kept request at or after the time."""
    from kvbench.analysis.curves.profile import WarmupTime, warmup_fraction, warmup_request
    from kvbench.errors import UsageError
    from kvbench.stream.sampling import FULL_BLOCKS, compact
    from kvbench.stream.traces import Trace

    t = Trace(timestamp_s=np.arange(6.0), input_tokens=np.full(6, 10), output_tokens=np.ones(6, np.int64),
              offsets=np.array([0, 0, 2, 2, 2, 3, 3]), keys=np.array([7, 8, 9], dtype=np.uint64), block_tokens=16,
              fmt="x", path="x", extras={FULL_BLOCKS: np.array([3, 5, 2, 4, 6, 1])}, meta={"sample_rate": 0.5})
    req = [warmup_request(t, warmup_fraction(t, WarmupTime(s))) for s in (0.0, 0.5, 2.5, 3.0, 5.0)]
    assert req == [0, 1, 3, 3, 5]
    assert warmup_fraction(t, 0.25) == 0.25 and warmup_fraction(t, WarmupTime(0.0)) == 0.0
    with pytest.raises(UsageError, match="covers every request"):
        warmup_fraction(t, WarmupTime(5.5))
    c = compact(t)
    assert [warmup_request(c, warmup_fraction(c, WarmupTime(s))) for s in (0.5, 2.5, 4.0, 4.5)] == [1, 2, 2, 3]
    with pytest.raises(UsageError, match="covers every request"):
        warmup_fraction(c, WarmupTime(5.5))
    n = 1000
    big = Trace(timestamp_s=np.arange(float(n)), input_tokens=np.full(n, 10), output_tokens=np.ones(n, np.int64),
                offsets=np.arange(n + 1), keys=np.arange(n, dtype=np.uint64), block_tokens=16, fmt="x", path="x")
    assert all(warmup_request(big, warmup_fraction(big, WarmupTime(k - 0.5))) == k for k in range(1, n))


def test_a_warm_up_by_time_reads_back_from_its_text():
    """kvbench run hands --warmup to its steps as text: str(WarmupTime) is what --warmup parses back to the same
    time (repr keeps every digit of the float), and 0.5 stays a fraction."""
    from kvbench.analysis.curves.profile import WarmupTime
    from kvbench.cli._common import WARMUP

    for s in (136.3, 136.327, 0.001, 3600.5, 1 / 3):
        w = WarmupTime(s)
        assert WARMUP.convert(str(w), None, None) == w
    assert str(WarmupTime(136.3)) == "136.3s"
    assert WARMUP.convert(str(0.5), None, None) == 0.5


def test_the_window_a_warm_up_leaves_must_span_time():
    """warmup_window: the first measured request, or a one-line refusal when the window's own arrivals span no
    time. Eight requests; a warm-up of half leaves r4..r7 (floor(0.5 x 8) = 4): measurable from r4 at 3 s when
    the last arrives later (4 s); refused when r4..r7 all arrive at 3 s, even though r3 came earlier (2.5 s).
    By time: 2.5 s leaves r3.. (the requests before it, r0..r2). None: request 0 whatever the times."""
    from kvbench.analysis.curves.profile import WarmupTime, warmup_window
    from kvbench.errors import SpecError
    from tests.conftest import make_trace

    blocks = [[k] for k in range(1, 9)]
    ok = make_trace([0, 1, 2, 2.5, 3, 3, 3, 4], blocks)
    assert warmup_window(ok, 0.5) == 4 and warmup_window(ok, WarmupTime(2.5)) == 3 and warmup_window(ok, 0.0) == 0
    tied = make_trace([0, 1, 2, 2.5, 3, 3, 3, 3], blocks)
    with pytest.raises(SpecError) as e:
        warmup_window(tied, 0.5)
    assert str(e.value).splitlines()[0].startswith(
        "the warm-up leaves 4 request(s) arriving over 0 s to measure (from 3 s on the trace's clock)")
    assert warmup_window(tied, 3.5 / 8) == 3            # r3..r7: 2.5 s to 3 s
    with pytest.raises(SpecError, match="leaves 1 request"):
        warmup_window(ok, 7.5 / 8)
    assert warmup_window(make_trace([5, 5, 5], [[1], [2], [3]]), 0.0) == 0
