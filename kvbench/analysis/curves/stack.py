"""Streaming exact LRU stack-distance histogram (Mattson): feed trace batches, read the hit count per capacity.

Memory is bounded by the distinct keys (a hash table entry, two slots and a histogram bin per key), not by
the trace length, so a trace read with ``iter_trace`` never needs to be whole in memory. The sequential work is
in the compiled kernel ``kernels.lru_feed``; this class owns the arrays and grows them when it asks.
"""

from __future__ import annotations

import math

import numpy as np

_STATE = ("entries", "slot", "references", "cold", "expired", "scratch")


class LRUStack:
    """Exact LRU stack distances of the reference stream of trace batches (deepest-first touches).

    ``hist[d]`` counts counted references with stack distance ``d`` (a hit at every capacity >= d) and idle gap
    <= ``ttl_s``; references before global touch index ``count_from`` warm the stack but are not counted.
    """

    def __init__(self, ttl_s: float | None = None, count_from: int = 0, expected_keys: int = 1 << 16):
        self.ttl = math.inf if ttl_s is None else float(ttl_s)
        self.count_from = int(count_from)
        bits = max(10, int(math.ceil(math.log2(max(2, 2 * expected_keys)))))
        self._alloc_table(bits)
        self._alloc_slots(max(1 << 12, 2 * expected_keys))
        self.hist = np.zeros(max(1024, expected_keys + 2), dtype=np.int64)
        self.state = np.zeros(len(_STATE), dtype=np.int64)
        self.refs_seen = 0

    def _alloc_table(self, bits: int) -> None:
        size = 1 << bits
        self.shift = 64 - bits
        self.tab = np.zeros(2 * size, dtype=np.uint64)          # (key, slot + 1) per entry; 0 = empty
        self.ttime = np.zeros(size if self.ttl != math.inf else 0, dtype=np.float64)

    def _alloc_slots(self, width: int) -> None:
        width = int(-(-width // 64) * 64)
        self.owner = np.full(width, -1, dtype=np.int64)
        self.bits = np.zeros(width // 64, dtype=np.uint64)
        self.c2 = np.zeros(-(-width // 4096), dtype=np.int64)
        self.c3 = np.zeros(-(-width // 262144), dtype=np.int64)

    def _grow_table(self) -> None:
        from kvbench.analysis.curves.kernels import lru_rehash

        old = (self.tab, self.ttime)
        self._alloc_table(64 - self.shift + 1)
        lru_rehash(*old, self.tab, self.ttime, self.owner, self.shift, self.ttl != math.inf)

    def _grow_slots(self, need: int) -> None:
        from kvbench.analysis.curves.kernels import lru_compact_into

        old_owner, width = self.owner, self.owner.shape[0]
        self._alloc_slots(max(2 * width, 2 * need))
        self.state[1] = lru_compact_into(old_owner, self.tab, width, self.owner, self.bits, self.c2, self.c3)

    def feed(self, trace) -> None:
        """Process one ``Trace`` (or batch) in order."""
        from kvbench.analysis.curves.kernels import lru_feed

        keys = np.ascontiguousarray(trace.keys, dtype=np.uint64)
        offsets = np.ascontiguousarray(trace.offsets, dtype=np.int64)
        times = np.ascontiguousarray(trace.timestamp_s, dtype=np.float64)
        r = 0
        while True:
            r, code = lru_feed(keys, offsets, times, r, self.refs_seen, self.count_from, self.ttl, self.shift,
                               self.tab, self.ttime, self.owner, self.bits, self.c2, self.c3,
                               self.hist, self.state)
            if code == 0:
                break
            nb = int(offsets[r + 1] - offsets[r])
            need = int(self.state[0]) + nb
            if code == 1:
                while 2 * need > self.tab.shape[0] // 2:
                    self._grow_table()
            elif code == 2:
                self._grow_slots(need)
            else:
                grown = np.zeros(max(2 * self.hist.shape[0], need + 2), dtype=np.int64)
                grown[: self.hist.shape[0]] = self.hist
                self.hist = grown
        self.refs_seen += int(offsets[-1])

    @property
    def distinct(self) -> int:
        return int(self.state[0])

    @property
    def references(self) -> int:
        """References counted (after warm-up)."""
        return int(self.state[2])

    @property
    def cold(self) -> int:
        return int(self.state[3])

    @property
    def expired(self) -> int:
        return int(self.state[4])

    def counts(self) -> np.ndarray:
        """``hist`` trimmed to the largest distance seen."""
        nz = np.flatnonzero(self.hist)
        return self.hist[: int(nz[-1]) + 1] if nz.size else self.hist[:1]
