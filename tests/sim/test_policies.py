"""Cache policies: exact hit counts on hand-built sequences, LRU against a reference stack-distance count,
retention (TTL) expiry, S3-FIFO scan resistance, registry errors."""

from __future__ import annotations

import numpy as np
import pytest

from kvbench.errors import SpecError
from kvbench.sim.policies import POLICIES, make_policy, simulate_prefix
from tests.conftest import chained_trace
from hypothesis import example
from hypothesis import given
from hypothesis import strategies as st
from kvbench.analysis.curves.profile import policy_hit_ratios
from kvbench.stream.traces import read_trace
from tests.conftest import TTL_S, TTL_HITS, TTL_REFS


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




def test_simulate_prefix_lru_equals_mattson_on_deepest_first_stream():
    rng = np.random.default_rng(7)
    prompts = []
    for _ in range(150):
        base = int(rng.integers(0, 6))
        prompts.append([base] + rng.integers(0, 3, size=int(rng.integers(1, 12))).tolist())
    tr = chained_trace(prompts, np.arange(len(prompts), dtype=float))
    stream = []
    for r in range(len(prompts)):
        stream += tr.keys[tr.offsets[r]:tr.offsets[r + 1]][::-1].tolist()
    for cap in (2, 5, 17, 60):
        st = simulate_prefix([tr], make_policy("lru", cap))
        assert st.hit_blocks == _reference_lru_hits(stream, cap)
        assert st.block_refs == len(stream) and st.requests == 150


def test_prefix_hits_are_leading_run_only():
    # request 2 shares block 0 with request 1 and has a different block 1: hit 1 block out of 3
    tr = chained_trace([[1, 2], [1, 3, 4]], [0.0, 1.0])
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


# --- LRU and FIFO against list-based reference models (written from the definitions in the module docstring,
# not from its code) on random operation sequences, with and without retention (hypothesis).
class RefCache:
    """order: keys, oldest first (recency for LRU, insertion for FIFO); last: key -> last access time."""

    def __init__(self, policy, cap, ttl):
        self.policy, self.cap, self.ttl = policy, cap, ttl
        self.order, self.last, self.pending = [], {}, []

    def _alive(self, k, now):
        return self.ttl is None or now - self.last[k] <= self.ttl

    def _drop(self, k):
        self.order.remove(k)
        del self.last[k]

    def lookup(self, k, now):
        if k not in self.last:
            return False
        if not self._alive(k, now):
            self._drop(k)
            self.pending.append(k)
            return False
        self.last[k] = now
        if self.policy == "lru":
            self.order.remove(k)
            self.order.append(k)
        return True

    def contains(self, k, now):
        return k in self.last and self._alive(k, now)

    def insert(self, k, now):
        if k in self.last:
            self.last[k] = now
            if self.policy == "lru":
                self.order.remove(k)
                self.order.append(k)
            return []
        out = []
        while len(self.order) >= self.cap:
            v = self.order.pop(0)
            del self.last[v]
            out.append(v)
        self.order.append(k)
        self.last[k] = now
        return out

    def remove(self, k):
        if k not in self.last:
            return False
        self._drop(k)
        return True

    def expire(self, now):
        out, self.pending = self.pending, []
        if self.ttl is not None:
            for k in [k for k in self.order if now - self.last[k] > self.ttl]:
                self._drop(k)
                out.append(k)
        return out


ops = st.lists(st.tuples(st.sampled_from(["lookup", "insert", "insert", "contains", "expire", "remove"]),
                         st.integers(0, 6), st.sampled_from([0.0, 0.0, 0.5, 1.0, 1.5])), max_size=60)


class RefS3FIFO:
    """S3-FIFO as the module docstring and SOSP'23 Algorithm 1 state it, on plain lists: S (10% of the
    capacity, at least 1), M, ghost G (as many keys as M's capacity); freq capped at 3; a key leaving S with
    freq > 1 moves to M (freq 0), else goes to G; M reinserts keys with freq > 0 (one less) and evicts the
    first with freq 0. Eviction takes from S while S holds its share (or M is empty)."""

    def __init__(self, cap):
        self.cap, self.small = cap, max(1, round(cap * 0.1))
        self.main = max(1, cap - self.small)
        self.s, self.m, self.g, self.freq = [], [], [], {}

    def lookup(self, k):
        if k in self.s or k in self.m:
            self.freq[k] = min(self.freq[k] + 1, 3)
            return True
        return False

    def _evict(self):
        while True:
            if self.s and (len(self.s) >= self.small or not self.m):
                k = self.s.pop(0)
                if self.freq[k] > 1:
                    self.m.append(k)
                    self.freq[k] = 0
                    continue
                del self.freq[k]
                self.g.append(k)
                self.g = self.g[-self.main:]
                return k
            k = self.m.pop(0)
            if self.freq[k] > 0:
                self.freq[k] -= 1
                self.m.append(k)
                continue
            del self.freq[k]
            return k

    def insert(self, k):
        if k in self.freq:
            return []
        ghost = k in self.g
        if ghost:
            self.g.remove(k)
        out = []
        while len(self.s) + len(self.m) >= self.cap:
            out.append(self._evict())
        (self.m if ghost else self.s).append(k)
        self.freq[k] = 0
        return out


@given(st.sampled_from(["lru", "fifo"]), st.integers(1, 4), st.sampled_from([None, 1.0, 2.0]), ops)
def test_lru_and_fifo_match_the_reference(policy, cap, ttl, seq):
    c, ref, now = make_policy(policy, cap, ttl_s=ttl), RefCache(policy, cap, ttl), 0.0
    for op, k, dt in seq:
        now += dt
        if op == "expire":
            assert sorted(c.expire(now)) == sorted(ref.expire(now))
        elif op == "remove":
            assert c.remove(k) == ref.remove(k)
        else:
            assert getattr(c, op)(k, now) == getattr(ref, op)(k, now), (op, k, now)
        assert c.keys() == ref.order and len(c) == len(ref.order) <= cap


def test_s3fifo_hand_traced():
    """Capacity 2: small FIFO 1 slot, main 1, ghost remembers 1 key (SOSP'23 Algorithm 1, traced by hand)."""
    c = make_policy("s3fifo", 2)
    assert (c.small_capacity, c.main_capacity) == (1, 1)
    assert c.insert("a") == [] and c.insert("b") == [] and c.keys() == ["a", "b"]      # both in S
    assert c.lookup("a") and c.lookup("a")                        # a: freq 2
    # full: S's head a (freq 2 > 1) moves to M; then b (freq 0) is evicted into the ghost
    assert c.insert("c") == ["b"] and c.keys() == ["c", "a"]
    # b was a ghost: it enters M; evicting S's c (freq 0) makes c the ghost (one key remembered)
    assert c.insert("b") == ["c"] and c.keys() == ["a", "b"]
    assert c.lookup("a")                                          # a: freq 1 in M
    # S is empty: M's head a (freq 1) is reinserted with freq 0, b (freq 0) is evicted
    assert c.insert("d") == ["b"] and c.keys() == ["d", "a"]
    assert c.insert("c") == ["d"] and c.keys() == ["a", "c"]      # c remembered as a ghost: straight into M
    assert c.lookup("c") and c.lookup("c") and c.lookup("c") and c.lookup("c")   # freq capped at 3
    assert c.insert("e") == ["a"] and c.insert("f") == ["e"]     # M evicts a (freq 0), not c; then S evicts e
    assert c.keys() == ["f", "c"]
    assert c.remove("c") and not c.remove("c") and c.keys() == ["f"]


def test_s3fifo_small_queue_is_a_tenth():
    c = make_policy("s3fifo", 100)
    assert (c.small_capacity, c.main_capacity) == (10, 90)
    assert make_policy("s3fifo", 14).small_capacity == 1 and make_policy("s3fifo", 15).small_capacity == 2


def test_repr_names_policy_capacity_retention_and_size():
    c = make_policy("lru", 4)
    c.insert(1)
    assert repr(c) == "LRUCache(capacity=4, size=1)"
    assert repr(make_policy("fifo", 8, ttl_s=2.5)) == "FIFOCache(capacity=8, ttl_s=2.5, size=0)"


def test_idle_heap_keeps_expiring_after_it_is_rebuilt():
    """Touching the same few keys many times grows the lazy heap past 2 x live + 64 entries and rebuilds it;
    the rebuilt deadlines (last access + ttl) must still expire the keys."""
    for policy in ("fifo", "s3fifo"):
        c = make_policy(policy, 10, ttl_s=1.0)
        for k in range(4):
            c.insert(k, 0.0)
        now = 0.0
        # the heap starts with 4 entries and is rebuilt when a touch makes it 73 (> 2 x 4 + 64): 69 rounds of 4
        # touches end on a rebuild, so only rebuilt deadlines are left to expire the keys
        for _ in range(69):
            now += 0.001
            for k in range(4):
                assert c.lookup(k, now)
        assert sorted(c.expire(now + 1.0)) == [] and sorted(c.expire(now + 1.0 + 1e-6)) == [0, 1, 2, 3]
        assert len(c) == 0


@given(st.integers(1, 25), st.lists(st.tuples(st.booleans(), st.integers(0, 30)), min_size=10, max_size=200))
@example(2, [(False, 1), (False, 2), (True, 1), (False, 3)])        # freq 1 at the head of S: to the ghost
# 1 (freq 2) moves from S to M with freq 0, 2 becomes a ghost and returns to M; S is then empty, so the next
# insert evicts from M: 1 (freq 0) goes, not 2
@example(2, [(False, 1), (False, 2), (True, 1), (True, 1), (False, 3), (False, 2), (False, 4)])
@example(20, [(False, k) for k in range(20)] + [(True, k) for k in range(0, 20, 3)] * 2 +
         [(False, k) for k in range(20, 40)] + [(True, k) for k in range(0, 40, 2)] + [(False, k) for k in range(40, 60)])
@example(2, [(False, 1), (False, 2), (True, 1), (True, 1), (False, 3), (True, 1), (False, 4), (False, 3),
             (False, 5), (True, 1), (True, 1), (True, 1), (True, 1), (False, 6), (False, 7), (False, 6),
             (False, 8)])                                            # M's second chances and the freq cap
def test_s3fifo_matches_the_reference(cap, seq):
    c, ref = make_policy("s3fifo", cap), RefS3FIFO(cap)
    for is_lookup, k in seq:
        if is_lookup:
            assert c.lookup(k) == ref.lookup(k)
        else:
            assert c.insert(k) == ref.insert(k)
        assert c.keys() == ref.s + ref.m
        assert c.contains(k) == (k in ref.s or k in ref.m) and not c.contains(-1)


def test_simulate_prefix_expires_idle_keys_before_each_request():
    """FIFO, 2 slots, TTL 1 s: a@0, b@0.1, a@0.9 (hit; FIFO keeps a oldest), c@1.5 (b idle 1.4 s has expired
    and frees its slot, so a is not evicted), a@1.6 (hit). Without the expiry pass c would evict a."""
    from kvbench.sim.policies import simulate_prefix
    from kvbench.stream.traces import Trace
    import numpy as np

    keys = np.array([1, 2, 1, 3, 1], dtype=np.uint64)
    tr = Trace(np.array([0.0, 0.1, 0.9, 1.5, 1.6]), np.full(5, 16), np.ones(5, dtype=np.int64),
               np.arange(6, dtype=np.int64), keys, 16, "t", "-")
    s = simulate_prefix([tr], make_policy("fifo", 2, ttl_s=1.0))
    assert (s.hit_blocks, s.block_refs, s.hit_ratio) == (2, 5, 0.4)
    empty = Trace(np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64),
                  np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.uint64), 16, "e", "-")
    assert simulate_prefix([empty], make_policy("lru", 2)).hit_ratio == 0.0


# A reuse gap exactly at the retention time is a hit, just over it a miss: the TTL boundary trace, tests/conftest.py


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_every_policy_keeps_a_block_idle_exactly_the_ttl(ttl_trace_file, policy):
    tr = read_trace(ttl_trace_file)
    s = simulate_prefix([tr], make_policy(policy, 100, ttl_s=TTL_S))
    assert (s.hit_blocks, s.block_refs) == (TTL_HITS, TTL_REFS)
    ratios, refs = policy_hit_ratios(tr, policy, [100], ttl_s=TTL_S)
    assert ratios.tolist() == [TTL_HITS / TTL_REFS] and refs == TTL_REFS
    c = make_policy(policy, 100, ttl_s=TTL_S)
    c.insert(7, 1.0)
    assert c.contains(7, 9.0) and not c.contains(7, 9.0 + 1e-9)
# --- mutation survivors (issue 34 part 4): S3-FIFO's victim and M's second chance, the kernel codes ----------


def test_each_policy_names_the_kernels_code_for_it():
    """The compiled tier simulation picks its policy by ``kernel_code``: a FIFO tier that said POL_S3 would be
    simulated as S3-FIFO by the kernel and as FIFO by the Python reference."""
    from kvbench.sim import tiers_kernel

    assert {n: POLICIES[n].kernel_code for n in ("lru", "fifo", "s3fifo")} == {
        "lru": tiers_kernel.POL_LRU, "fifo": tiers_kernel.POL_FIFO, "s3fifo": tiers_kernel.POL_S3}
    assert (tiers_kernel.POL_LRU, tiers_kernel.POL_FIFO, tiers_kernel.POL_S3) == (0, 1, 2)


def test_s3fifo_victim_is_the_head_of_s_at_its_share_else_the_head_of_m():
    """Capacity 2: S's share is 1 block, M's 1, the ghost holds 1. By hand:
    insert 2, 0 -> S=[2,0]; insert 1 -> S at 2 >= 1: 2 (freq 0) leaves S for the ghost, S=[0,1];
    insert 2 (a ghost) -> 0 leaves S for the ghost, 2 enters M: S=[1], M=[2].
    S holds exactly its share, so the next eviction (and victim()) is S's head 1, not M's head 2."""
    c = make_policy("s3fifo", 2)
    assert c.victim() is None                      # empty: S and M both empty
    assert c.insert(2) == [] and c.insert(0) == []
    assert c.victim() == 2
    assert c.insert(1) == [2]
    assert c.insert(2) == [0]
    assert c.keys() == [1, 2]
    assert c.victim() == 1
    assert c.insert(3) == [1]                      # what victim() named is what goes
    for policy in ("lru", "fifo"):
        assert make_policy(policy, 3).victim() is None


def test_s3fifo_main_queue_evicts_the_first_key_of_freq_zero():
    """Capacity 2 (S 1, M 1, ghost 1). By hand:
    insert 2, 1 -> S=[2,1]; insert 3 -> 2 to the ghost, S=[1,3]; insert 2 (ghost) -> 1 to the ghost, M=[2];
    insert 1 (ghost) -> 3 to the ghost, S=[], M=[2,1]; insert 3 (ghost) -> S is empty: M's head 2 has freq 0
    and goes; M=[1,3]; lookup 1 -> freq 1; insert 2 (not a ghost: it left M, not S) -> M's head 1 has freq 1:
    reinserted with freq 0, then 3 (freq 0) goes. A key with freq 0 earns no second chance."""
    c = make_policy("s3fifo", 2)
    assert [c.insert(k) for k in (2, 1, 3, 2, 1)] == [[], [], [2], [1], [3]]
    assert c.keys() == [2, 1]
    assert c.insert(3) == [2]
    assert c.lookup(1)
    assert c.insert(2) == [3]
    assert c.keys() == [2, 1]
