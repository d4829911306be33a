"""Hit-ratio curves: the exact one-pass LRU curve equals a brute-force OrderedDict LRU over the same touch order
(1e-9), with retention and warm-up; SHARDS stays within its stated error; other policies through sim.policies."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest

from kvbench.analysis.curves.profile import (capacity_blocks, exact_profile, hit_ratio_curve, reference_stream,
                                     shards_profile)
from kvbench.analysis.curves.stack import LRUStack
from kvbench.errors import UsageError
from kvbench.stream.generators import GenSpec, generate, write_trace
from kvbench.stream.traces import Trace, read_trace

from tests.conftest import FIXTURES, REPO

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
