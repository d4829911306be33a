"""SHARDS' spatial sample against a pure-Python oracle (the splitmix64 finaliser written out here, its constants
from Steele et al., "Fast splittable pseudorandom number generators", OOPSLA 2014), and the ReuseProfile
fields the other curve tests do not pin: defaults, clipping, no reuse."""

from __future__ import annotations

import numpy as np
import pytest

from kvbench.analysis.curves.profile import ReuseProfile, exact_profile, sampled_trace, stream_profile

from tests.analysis.test_curves import T, trace

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

    from tests.analysis.test_curves import _chain_trace

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
