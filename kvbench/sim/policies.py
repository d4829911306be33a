"""Cache replacement policies for the tier simulation and size sweeps (registry, no if-chains).

Every policy holds up to ``capacity_blocks`` keys (uint64 block keys; any hashable works) and offers:
``lookup(key, now) -> bool`` (a hit updates recency/frequency), ``contains(key, now) -> bool`` (peek, no update),
``insert(key, now) -> list`` (admit a missing key; returns the keys evicted to make room), ``remove(key)``,
``expire(now) -> list`` (keys dropped by retention since the last call), ``__len__``, ``keys()`` and
``clone(capacity)`` for size sweeps.

Retention (``ttl_s``) is idle time: a key not looked up or inserted for more than ``ttl_s`` seconds is gone
(alive while ``now - last_access <= ttl_s``). An expired key is a miss for ``lookup``/``contains``; it is
reported once, by the next ``expire(now)``, so a tier can free and trim its slot. ``insert`` evicts by
capacity only; call ``expire(now)`` first to drop expired keys before they cost a capacity eviction.

Policies: ``lru`` (OrderedDict: C-level move_to_end), ``fifo`` (insertion order, hits do not reorder) and
``s3fifo`` (Yang et al., SOSP'23: a 10% probationary FIFO, a main FIFO with 2-bit frequency and lazy
promotion, a ghost FIFO of recently evicted keys; scan-resistant).
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Hashable, Iterable

from kvbench.errors import SpecError


class Cache:
    """Base of the policies: capacity, retention bookkeeping and the shared API."""

    name = "base"
    #: the compiled tier simulation's code for this policy (kvbench.sim.tiers_kernel ``POL_*``: the registry owns
    #: it, tests/sim/test_tiers_kernel.py checks the two agree); every registered policy has a compiled form
    kernel_code: int | None = None

    def __init__(self, capacity_blocks: int, ttl_s: float | None = None):
        capacity_blocks = int(capacity_blocks)
        if capacity_blocks < 1:
            raise SpecError(f"{self.name} cache: capacity must be at least 1 block, not {capacity_blocks}",
                            "give a capacity of at least one block")
        if ttl_s is not None and not ttl_s > 0:
            raise SpecError(f"{self.name} cache: retention (ttl) must be > 0 s, not {ttl_s}",
                            "give a positive --ttl or none")
        self.capacity = capacity_blocks
        self.ttl_s = None if ttl_s is None else float(ttl_s)
        self._expired: list = []          # keys found expired by lookup/contains, reported by expire()

    # --- API every policy implements -------------------------------------------------------------------
    def lookup(self, key: Hashable, now: float = 0.0) -> bool:
        raise NotImplementedError

    def contains(self, key: Hashable, now: float = 0.0) -> bool:
        raise NotImplementedError

    def insert(self, key: Hashable, now: float = 0.0) -> list:
        raise NotImplementedError

    def remove(self, key: Hashable) -> bool:
        raise NotImplementedError

    def expire(self, now: float) -> list:
        raise NotImplementedError

    def keys(self) -> list:
        raise NotImplementedError

    def victim(self):
        """The key ``insert`` would evict next if the cache is full (None when empty): what an admission
        policy (:mod:`kvbench.sim.admission`) weighs a newcomer against."""
        raise NotImplementedError

    def __len__(self) -> int:
        raise NotImplementedError

    def clone(self, capacity: int | None = None) -> "Cache":
        """A fresh, empty cache of the same policy and retention at ``capacity`` blocks (default: same)."""
        return type(self)(self.capacity if capacity is None else capacity, ttl_s=self.ttl_s)

    def __repr__(self) -> str:
        ttl = "" if self.ttl_s is None else f", ttl_s={self.ttl_s:g}"
        return f"{type(self).__name__}(capacity={self.capacity}{ttl}, size={len(self)})"


class LRUCache(Cache):
    """Least recently used: an OrderedDict key -> last access time, oldest first."""

    name = "lru"
    kernel_code = 0          # tiers_kernel.POL_LRU

    def __init__(self, capacity_blocks: int, ttl_s: float | None = None):
        super().__init__(capacity_blocks, ttl_s)
        self._od: OrderedDict = OrderedDict()

    def lookup(self, key, now=0.0):
        od = self._od
        last = od.get(key)
        if last is None:
            return False
        if self.ttl_s is not None and now - last > self.ttl_s:
            del od[key]
            self._expired.append(key)
            return False
        od[key] = now
        od.move_to_end(key)
        return True

    def contains(self, key, now=0.0):
        last = self._od.get(key)
        if last is None:
            return False
        return self.ttl_s is None or now - last <= self.ttl_s

    def insert(self, key, now=0.0):
        od = self._od
        if key in od:
            od[key] = now
            od.move_to_end(key)
            return []
        evicted = []
        while len(od) >= self.capacity:
            evicted.append(od.popitem(last=False)[0])
        od[key] = now
        return evicted

    def remove(self, key):
        return self._od.pop(key, None) is not None

    def expire(self, now):
        out, self._expired = self._expired, []
        if self.ttl_s is None:
            return out
        od, ttl = self._od, self.ttl_s
        while od:
            key, last = next(iter(od.items()))
            if now - last <= ttl:       # the one form lookup and contains use (float-exact agreement)
                break
            del od[key]
            out.append(key)
        return out

    def keys(self):
        return list(self._od)

    def victim(self):
        return next(iter(self._od), None)

    def __len__(self):
        return len(self._od)


class _IdleHeap:
    """Retention for policies whose order is not access order: a lazy min-heap of (deadline, key).

    Stale entries (the key was accessed again, or removed) are skipped when popped; the heap is rebuilt when
    it grows past twice the live keys, so memory stays bounded by resident keys.
    """

    def __init__(self, ttl_s: float):
        self.ttl_s = ttl_s
        self.last: dict = {}
        self.heap: list = []

    def touch(self, key, now):
        self.last[key] = now
        heapq.heappush(self.heap, (now + self.ttl_s, key))
        if len(self.heap) > 2 * len(self.last) + 64:
            self.heap = [(t + self.ttl_s, k) for k, t in self.last.items()]
            heapq.heapify(self.heap)

    def alive(self, key, now):
        last = self.last.get(key)
        return last is not None and now - last <= self.ttl_s

    def forget(self, key):
        self.last.pop(key, None)

    def pop_expired(self, now) -> list:
        """Keys idle longer than the TTL, judged as lookup judges them (``now - last > ttl``): the heap's order
        (deadline = last + ttl) is the order of ``last``, so the first live entry that is still alive ends the
        scan. A deadline test (``last + ttl < now``) would round differently for some decimal gaps equal to the
        TTL and keep a block that lookup then expires."""
        out, heap, last, ttl = [], self.heap, self.last, self.ttl_s
        while heap:
            deadline, key = heap[0]
            t = last.get(key)
            if t is None or t + ttl != deadline:        # stale: touched again since, or gone
                heapq.heappop(heap)
                continue
            if now - t <= ttl:
                break
            heapq.heappop(heap)
            del last[key]
            out.append(key)
        return out


class FIFOCache(Cache):
    """First in, first out: hits do not reorder (a baseline, and what a log with no cleaning does)."""

    name = "fifo"
    kernel_code = 1          # tiers_kernel.POL_FIFO

    def __init__(self, capacity_blocks: int, ttl_s: float | None = None):
        super().__init__(capacity_blocks, ttl_s)
        self._od: OrderedDict = OrderedDict()
        self._idle = _IdleHeap(self.ttl_s) if self.ttl_s is not None else None

    def _live(self, key, now):
        if key not in self._od:
            return False
        if self._idle is not None and not self._idle.alive(key, now):
            return False
        return True

    def lookup(self, key, now=0.0):
        if key not in self._od:
            return False
        if self._idle is not None:
            if not self._idle.alive(key, now):
                del self._od[key]
                self._idle.forget(key)
                self._expired.append(key)
                return False
            self._idle.touch(key, now)
        return True

    def contains(self, key, now=0.0):
        return self._live(key, now)

    def insert(self, key, now=0.0):
        od = self._od
        if key in od:
            if self._idle is not None:
                self._idle.touch(key, now)
            return []
        evicted = []
        while len(od) >= self.capacity:
            victim = od.popitem(last=False)[0]
            if self._idle is not None:
                self._idle.forget(victim)
            evicted.append(victim)
        od[key] = None
        if self._idle is not None:
            self._idle.touch(key, now)
        return evicted

    def remove(self, key):
        if self._idle is not None:
            self._idle.forget(key)
        return self._od.pop(key, 0) is None      # values are None: 0 means absent

    def expire(self, now):
        out, self._expired = self._expired, []
        if self._idle is not None:
            for key in self._idle.pop_expired(now):
                del self._od[key]
                out.append(key)
        return out

    def keys(self):
        return list(self._od)

    def victim(self):
        return next(iter(self._od), None)

    def __len__(self):
        return len(self._od)


class S3FIFOCache(Cache):
    """S3-FIFO (SOSP'23, Algorithm 1): small FIFO S (10%), main FIFO M, ghost G; frequency capped at 3.

    A new key enters S (or M if it is in G). Evicting from S moves a key with freq > ``move_threshold`` to M,
    otherwise drops it into G. Evicting from M reinserts keys with freq > 0 (decrementing) and drops the first
    with freq 0. G remembers as many keys as M holds.
    """

    name = "s3fifo"
    kernel_code = 2          # tiers_kernel.POL_S3
    small_fraction = 0.10
    move_threshold = 1

    def __init__(self, capacity_blocks: int, ttl_s: float | None = None):
        super().__init__(capacity_blocks, ttl_s)
        self.small_capacity = max(1, int(round(self.capacity * self.small_fraction)))
        self.main_capacity = max(1, self.capacity - self.small_capacity)
        self._s: OrderedDict = OrderedDict()     # key -> freq
        self._m: OrderedDict = OrderedDict()     # key -> freq
        self._g: OrderedDict = OrderedDict()     # key -> None
        self._idle = _IdleHeap(self.ttl_s) if self.ttl_s is not None else None

    def _where(self, key):
        if key in self._s:
            return self._s
        if key in self._m:
            return self._m
        return None

    def lookup(self, key, now=0.0):
        q = self._where(key)
        if q is None:
            return False
        if self._idle is not None:
            if not self._idle.alive(key, now):
                del q[key]
                self._idle.forget(key)
                self._expired.append(key)
                return False
            self._idle.touch(key, now)
        f = q[key]
        if f < 3:
            q[key] = f + 1
        return True

    def contains(self, key, now=0.0):
        if self._where(key) is None:
            return False
        return self._idle is None or self._idle.alive(key, now)

    def _evict_one(self) -> object:
        s, m = self._s, self._m
        while True:
            if s and (len(s) >= self.small_capacity or not m):
                key, f = s.popitem(last=False)
                if f > self.move_threshold:
                    m[key] = 0
                    continue
                self._g[key] = None
                while len(self._g) > self.main_capacity:
                    self._g.popitem(last=False)
                return key
            key, f = m.popitem(last=False)
            if f > 0:
                m[key] = f - 1
                continue
            return key

    def insert(self, key, now=0.0):
        if self._where(key) is not None:
            if self._idle is not None:
                self._idle.touch(key, now)
            return []
        was_ghost = self._g.pop(key, 0) is None
        evicted = []
        while len(self._s) + len(self._m) >= self.capacity:
            victim = self._evict_one()
            if self._idle is not None:
                self._idle.forget(victim)
            evicted.append(victim)
        if was_ghost:
            self._m[key] = 0
        else:
            self._s[key] = 0
        if self._idle is not None:
            self._idle.touch(key, now)
        return evicted

    def remove(self, key):
        q = self._where(key)
        if self._idle is not None:
            self._idle.forget(key)
        self._g.pop(key, None)
        if q is None:
            return False
        del q[key]
        return True

    def expire(self, now):
        out, self._expired = self._expired, []
        if self._idle is not None:
            for key in self._idle.pop_expired(now):
                q = self._where(key)
                if q is not None:
                    del q[key]
                    out.append(key)
        return out

    def keys(self):
        return list(self._s) + list(self._m)

    def victim(self):
        """The head of S when S is at its share (or M is empty), else the head of M: the first key the eviction
        scan examines (it may move on when that key's frequency earns a reprieve)."""
        s, m = self._s, self._m
        if s and (len(s) >= self.small_capacity or not m):
            return next(iter(s))
        return next(iter(m), None)

    def __len__(self):
        return len(self._s) + len(self._m)


POLICIES: dict[str, Callable[..., Cache]] = {
    "lru": LRUCache,
    "fifo": FIFOCache,
    "s3fifo": S3FIFOCache,
}


def make_policy(name: str, capacity_blocks: int, ttl_s: float | None = None) -> Cache:
    """Build a cache by policy name (``lru``, ``fifo``, ``s3fifo``); unknown names are a one-line SpecError."""
    try:
        cls = POLICIES[str(name).lower()]
    except KeyError:
        raise SpecError(f"unknown cache policy {name!r}", f"use one of {', '.join(POLICIES)}") from None
    return cls(capacity_blocks, ttl_s=ttl_s)


@dataclass(frozen=True)
class PolicyStats:
    """Result of :func:`simulate_prefix`: block references and prefix hits (reusable blocks)."""

    policy: str
    capacity_blocks: int
    ttl_s: float | None
    requests: int
    block_refs: int
    hit_blocks: int

    @property
    def hit_ratio(self) -> float:
        return self.hit_blocks / self.block_refs if self.block_refs else 0.0


def simulate_prefix(batches: Iterable, cache: Cache) -> PolicyStats:
    """Run traces (``Trace`` objects or batches from ``iter_trace``) through one cache with prefix semantics.

    Per request, blocks are touched deepest-first (DESIGN.md): each is looked up and inserted on a miss; the
    request's hits are the leading run of its blocks found resident. For LRU over prefix-chained keys every
    resident block is in that run, so the count equals the Mattson stack-distance hit count at this capacity.
    """
    refs = hits = requests = 0
    lookup, insert, expire = cache.lookup, cache.insert, cache.expire
    ttl = cache.ttl_s is not None
    for tr in batches:
        offsets = tr.offsets.tolist()
        keys = tr.keys.tolist()
        times = tr.timestamp_s.tolist()
        for r in range(len(offsets) - 1):
            a, b = offsets[r], offsets[r + 1]
            now = times[r]
            if ttl:
                expire(now)
            run = 0                      # leading run of resident blocks, counted deepest-first
            for i in range(b - 1, a - 1, -1):
                if lookup(keys[i], now):
                    run += 1
                else:
                    insert(keys[i], now)
                    run = 0
            hits += run
            refs += b - a
            requests += 1
    return PolicyStats(cache.name, cache.capacity, cache.ttl_s, requests, refs, hits)
