"""DRAM hot-row cache for Engram tables: static top-k (from a profiling pass), LRU and LFU, and the row hit
ratio as a function of DRAM capacity.

The access stream is the unique rows of each step, in step order (one fetch serves every token of a step that
needs the row). Rows are cached individually (a row is 160-264 B; DRAM holds rows, the SSD holds pages).
Static top-k and LRU give exact curves for every capacity from one pass: a row hits in a cache of k rows iff
its profile rank (static) or its LRU stack distance (Mattson) is below k. LFU has no inclusion property and is
simulated per capacity. Warm-up: accesses where ``measure`` is False warm the cache but are not counted.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from kvbench.errors import UsageError

INF = np.iinfo(np.int64).max


def sorted_unique(x: np.ndarray) -> np.ndarray:
    """Sorted distinct values by sort + compare (numpy 2.4's hash-based ``np.unique`` is ~100x slower on int64)."""
    a = np.sort(np.asarray(x).ravel())
    if a.size < 2:
        return a
    keep = np.empty(a.size, dtype=bool)
    keep[0] = True
    np.not_equal(a[1:], a[:-1], out=keep[1:])
    return a[keep]


def unique_inverse(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted distinct values, index of each element's value among them), by one stable argsort."""
    x = np.asarray(x).ravel()
    order = np.argsort(x, kind="stable")
    a = x[order]
    new = np.empty(a.size, dtype=bool)
    if a.size:
        new[0] = True
        np.not_equal(a[1:], a[:-1], out=new[1:])
    inv = np.empty(a.size, dtype=np.int64)
    inv[order] = np.cumsum(new) - 1
    return a[new], inv


def dense_ids(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(unique rows, dense id of each access): rows renumbered 0..U-1 so kernels can use flat arrays."""
    return unique_inverse(np.asarray(rows, dtype=np.int64))


def stack_distances(ids: np.ndarray, n_ids: int | None = None) -> np.ndarray:
    """Exact LRU stack distances of dense ids (an access hits an LRU cache of k rows iff its distance < k)."""
    ids = np.asarray(ids, dtype=np.int64)
    if ids.size == 0:
        return np.zeros(0, dtype=np.int64)
    from kvbench.analysis.curves.kernels import stack_distances as engine   # the one per-reference engine

    return engine(ids, int(n_ids if n_ids is not None else ids.max() + 1))


def profile_ranks(ids: np.ndarray, profile: np.ndarray, n_ids: int) -> np.ndarray:
    """Rank of each access's id in the profiling pass's popularity order (0 = hottest; INF = never profiled).
    Ties are broken by id so the order is deterministic."""
    counts = np.bincount(ids[profile], minlength=n_ids)
    order = np.lexsort((np.arange(n_ids), -counts))
    rank = np.empty(n_ids, dtype=np.int64)
    rank[order] = np.arange(n_ids)
    rank[counts == 0] = INF
    return rank[ids]


@numba.njit(cache=True)
def _lfu_hits(ids, n_ids, capacity):
    """In-cache LFU (ties: least recently used first) with a lazy min-heap ordered by (count, last time).

    The heap holds one entry per access (its row, the row's count then, the access's time); an entry is live while
    its time is the row's latest push. Count and time are two words, not one packed key: a packed
    ``count << 40 | t`` overflowed int64 once a row had 2^23 hits, and the most frequent row went first."""
    n = ids.size
    hits = np.zeros(n, dtype=np.bool_)
    count = np.zeros(n_ids, dtype=np.int64)
    cached = np.zeros(n_ids, dtype=np.bool_)
    pushed = np.zeros(n_ids, dtype=np.int64)          # time of each row's latest heap entry
    heap_c = np.empty(n, dtype=np.int64)             # one push per access: never more than n entries
    heap_t = np.empty(n, dtype=np.int64)
    heap_v = np.empty(n, dtype=np.int64)
    size = 0
    used = 0
    for t in range(n):
        x = ids[t]
        if cached[x]:
            hits[t] = True
            count[x] += 1
        else:
            if used >= capacity:
                while True:             # pop until a live entry: that is the victim
                    pt, v = heap_t[0], heap_v[0]
                    size -= 1
                    heap_c[0], heap_t[0], heap_v[0] = heap_c[size], heap_t[size], heap_v[size]
                    j = 0
                    while True:
                        c = 2 * j + 1
                        if c >= size:
                            break
                        d = c + 1
                        if d < size and (heap_c[d] < heap_c[c] or (heap_c[d] == heap_c[c] and heap_t[d] < heap_t[c])):
                            c = d
                        if heap_c[c] < heap_c[j] or (heap_c[c] == heap_c[j] and heap_t[c] < heap_t[j]):
                            heap_c[c], heap_c[j] = heap_c[j], heap_c[c]
                            heap_t[c], heap_t[j] = heap_t[j], heap_t[c]
                            heap_v[c], heap_v[j] = heap_v[j], heap_v[c]
                            j = c
                        else:
                            break
                    if cached[v] and pushed[v] == pt:
                        cached[v] = False
                        count[v] = 0
                        used -= 1
                        break
            cached[x] = True
            count[x] = 1
            used += 1
        cx = count[x]
        pushed[x] = t
        heap_c[size], heap_t[size], heap_v[size] = cx, t, x
        j = size
        size += 1
        while j > 0:
            p = (j - 1) // 2
            if heap_c[j] < heap_c[p] or (heap_c[j] == heap_c[p] and heap_t[j] < heap_t[p]):
                heap_c[j], heap_c[p] = heap_c[p], heap_c[j]
                heap_t[j], heap_t[p] = heap_t[p], heap_t[j]
                heap_v[j], heap_v[p] = heap_v[p], heap_v[j]
                j = p
            else:
                break
    return hits


def lfu_hits(ids: np.ndarray, capacity: int, n_ids: int | None = None) -> np.ndarray:
    ids = np.asarray(ids, dtype=np.int64)
    if capacity <= 0 or ids.size == 0:
        return np.zeros(ids.size, dtype=bool)
    return _lfu_hits(ids, int(n_ids if n_ids is not None else ids.max() + 1), int(capacity))


POLICIES = ("static", "lru", "lfu")


@dataclass(frozen=True)
class RowStream:
    """The accesses of one run in dense ids, with what each policy needs precomputed once."""

    ids: np.ndarray            # dense row id per access
    rows: np.ndarray           # unique global rows (ids index this)
    measure: np.ndarray        # bool per access: counted (False = profiling / warm-up part)
    distances: np.ndarray      # LRU stack distance per access
    ranks: np.ndarray          # static profile rank per access

    @classmethod
    def build(cls, rows: np.ndarray, measure: np.ndarray) -> "RowStream":
        uniq, ids = dense_ids(rows)
        measure = np.asarray(measure, dtype=bool)
        return cls(ids, uniq, measure, stack_distances(ids, uniq.size), profile_ranks(ids, ~measure, uniq.size))

    def hits(self, policy: str, capacity_rows: int) -> np.ndarray:
        """Hit flag of every access for one policy and capacity (in rows)."""
        if policy not in POLICIES:
            raise UsageError(f"unknown DRAM cache policy {policy!r}", f"use one of {', '.join(POLICIES)}")
        if capacity_rows <= 0:
            return np.zeros(self.ids.size, dtype=bool)
        if policy == "lru":
            return self.distances < capacity_rows
        if policy == "static":
            return self.ranks < capacity_rows
        return lfu_hits(self.ids, capacity_rows, self.rows.size)

    def hot_rows(self, k: int | None = None) -> np.ndarray:
        """Global rows of the profiling pass, hottest first (the static cache's contents, the hot-first layout)."""
        prof = ~self.measure
        counts = np.bincount(self.ids[prof], minlength=self.rows.size)
        order = np.lexsort((np.arange(self.rows.size), -counts))
        order = order[counts[order] > 0]
        return self.rows[order[:k] if k is not None else order]

    def curve(self, capacities_rows, policies=POLICIES) -> dict[str, np.ndarray]:
        """Hit ratio over the measured accesses for each capacity (rows), per policy."""
        m = self.measure
        total = max(int(m.sum()), 1)
        caps = np.asarray(capacities_rows, dtype=np.int64)
        out = {}
        for p in policies:
            if p == "lru":
                d = np.sort(self.distances[m])
                out[p] = np.searchsorted(d, caps, side="left") / total
            elif p == "static":
                r = np.sort(self.ranks[m])
                out[p] = np.searchsorted(r, caps, side="left") / total
            else:
                out[p] = np.array([self.hits(p, int(c))[m].sum() / total for c in caps])
        return out
