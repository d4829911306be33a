"""Cache policies: exact hit counts on hand-built sequences, LRU against a reference stack-distance count,
retention (TTL) expiry, S3-FIFO scan resistance, registry errors."""

from __future__ import annotations

import numpy as np
import pytest

from kvbench.errors import SpecError
from kvbench.sim.policies import POLICIES, make_policy, simulate_prefix
from tests.conftest import chained_trace


def _run(cache, seq, now=0.0):
    hits = 0
    for k in seq:
        if cache.lookup(k, now):
            hits += 1
        else:
            cache.insert(k, now)
    return hits


def test_registry_and_unknown_policy():
    assert {"lru", "fifo", "s3fifo"} <= set(POLICIES)
    with pytest.raises(SpecError, match="unknown cache policy 'mru'.*lru"):
        make_policy("mru", 10)
    with pytest.raises(SpecError, match="at least 1 block"):
        make_policy("lru", 0)
    with pytest.raises(SpecError, match="ttl"):
        make_policy("lru", 4, ttl_s=0)


def test_lru_and_fifo_exact_counts():
    seq = [1, 2, 3, 1, 4, 1, 2, 5, 1, 3]
    # LRU cap 3: 1m 2m 3m 1h 4m(ev2) 1h 2m(ev3) 5m(ev4) 1h 3m -> 3 hits
    lru = make_policy("lru", 3)
    assert _run(lru, seq) == 3
    assert sorted(lru.keys()) == [1, 3, 5]
    # FIFO cap 3: 1m 2m 3m 1h 4m(ev1) 1m(ev2) 2m(ev3) 5m(ev4) 1h 3m(ev1) -> 2 hits
    fifo = make_policy("fifo", 3)
    assert _run(fifo, seq) == 2
    assert sorted(fifo.keys()) == [2, 3, 5]


def test_insert_returns_evicted_and_contains_is_a_peek():
    c = make_policy("lru", 2)
    assert c.insert("a") == [] and c.insert("b") == []
    assert c.contains("a")                 # peek: a stays least recent
    assert c.insert("c") == ["a"]
    assert c.lookup("b") and c.insert("d") == ["c"]
    assert c.remove("b") and not c.remove("b") and len(c) == 1
    assert c.clone(5).capacity == 5 and len(c.clone()) == 0


def _reference_lru_hits(seq, capacity):
    """Mattson: a reference is a hit iff its stack distance (distinct keys since last use, +1) <= capacity."""
    last, hits = {}, 0
    for t, k in enumerate(seq):
        if k in last:
            distinct = len(set(seq[last[k] + 1:t]))
            hits += distinct + 1 <= capacity
        last[k] = t
    return hits


@pytest.mark.parametrize("capacity", [1, 3, 7, 20])
def test_lru_matches_stack_distance(capacity):
    rng = np.random.default_rng(capacity)
    seq = (rng.zipf(1.3, 600) % 40).tolist()
    assert _run(make_policy("lru", capacity), seq) == _reference_lru_hits(seq, capacity)


_chained_trace = chained_trace      # requests as lists of ids; each key names its whole prefix (tests/conftest.py)


def test_simulate_prefix_lru_equals_mattson_on_deepest_first_stream():
    rng = np.random.default_rng(7)
    prompts = []
    for _ in range(150):
        base = int(rng.integers(0, 6))
        prompts.append([base] + rng.integers(0, 3, size=int(rng.integers(1, 12))).tolist())
    tr = _chained_trace(prompts, np.arange(len(prompts), dtype=float))
    stream = []
    for r in range(len(prompts)):
        stream += tr.keys[tr.offsets[r]:tr.offsets[r + 1]][::-1].tolist()
    for cap in (2, 5, 17, 60):
        st = simulate_prefix([tr], make_policy("lru", cap))
        assert st.hit_blocks == _reference_lru_hits(stream, cap)
        assert st.block_refs == len(stream) and st.requests == 150


def test_prefix_hits_are_leading_run_only():
    # request 2 shares block 0 with request 1 and has a different block 1: hit 1 block out of 3
    tr = _chained_trace([[1, 2], [1, 3, 4]], [0.0, 1.0])
    st = simulate_prefix([tr], make_policy("fifo", 100))
    assert (st.hit_blocks, st.block_refs) == (1, 5)


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_ttl_idle_expiry(policy):
    c = make_policy(policy, 10, ttl_s=5.0)
    c.insert("a", 0.0)
    c.insert("b", 0.0)
    assert c.lookup("a", 4.0)                    # refreshes a's idle clock
    assert c.expire(5.0) == []                   # b idle exactly 5 s: still alive
    assert c.expire(5.5) == ["b"] and len(c) == 1
    assert c.contains("a", 9.0) and not c.contains("a", 9.5)
    assert not c.lookup("a", 9.5)                # expired: a miss, reported once by expire()
    assert c.expire(9.5) == ["a"] and c.expire(100.0) == [] and len(c) == 0


def test_ttl_infinite_cache_hits_reuse_within_ttl():
    c = make_policy("lru", 1000, ttl_s=10.0)
    gaps_hit = [(0.0, 9.0), (20.0, 31.0)]       # second gap 11 s > 10 s: a miss
    hits = 0
    for k, (t0, t1) in enumerate(gaps_hit):
        c.expire(t0)
        c.insert(k, t0)
        c.expire(t1)
        hits += c.lookup(k, t1)
    assert hits == 1


def test_s3fifo_resists_a_scan():
    hot = list(range(10))
    seq = []
    for r in range(30):
        seq += hot
        seq += [1000 + r * 50 + j for j in range(50)]   # one-hit wonders
    s3, lru = make_policy("s3fifo", 40), make_policy("lru", 40)
    h_s3, h_lru = _run(s3, seq), _run(lru, seq)
    assert h_lru == 0                                     # 60 distinct keys between reuses: LRU keeps none
    assert h_s3 >= 250                                    # hot set lives in main: ~29 x 10 hits
    assert len(s3) <= 40


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_capacity_is_never_exceeded(policy):
    rng = np.random.default_rng(1)
    c = make_policy(policy, 13)
    resident = set()
    for k in rng.integers(0, 60, 3000).tolist():
        if not c.lookup(k):
            ev = c.insert(k)
            resident -= set(ev)
            resident.add(k)
        assert len(c) <= 13
    assert resident == set(c.keys())
