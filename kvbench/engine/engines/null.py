"""null: every I/O completes at once, through the real driver path (the harness overhead baseline)."""

from __future__ import annotations

import numpy as np

from kvbench.engine.engines.base import CAP_DISKLESS, EMPTY, Engine


class NullEngine(Engine):
    name = "null"
    caps = frozenset({CAP_DISKLESS})
    kinds = frozenset({"file", "block", "dram"})   # touches nothing: any target

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self._slots, self._res = [], []

    def submit(self, slots, ops, tgts, offsets, lengths):
        self._slots.append(slots.copy())
        self._res.append(lengths.astype(np.int64))

    def reap(self, min_nr, timeout_ns):
        if not self._slots:
            return EMPTY, EMPTY, None
        s, r = np.concatenate(self._slots), np.concatenate(self._res)
        self._slots, self._res = [], []
        return s, r, None
