"""dram: the same plans against a DRAM arena (``dram:<size>`` targets), as block gathers and scatters.

Each submitted batch is executed as one vectorised gather (reads) or scatter (writes) of logical blocks and
its I/Os complete together when the batch is done: like a device serving a queue, an I/O's latency is the
time its batch took. At qd=1 that is exactly one block copy's latency.
"""

from __future__ import annotations

import time

import numpy as np

from kvbench.engine.engines.base import CAP_DISKLESS, EMPTY, Engine
from kvbench.errors import UsageError


class DramEngine(Engine):
    name = "dram"
    caps = frozenset({CAP_DISKLESS})

    def __init__(self, targets, qd, buffers, buf_addr):
        super().__init__(targets, qd, buffers, buf_addr)
        for t in targets:
            if t.arena is None:
                raise UsageError(f"the dram engine needs dram:<size> targets, got {t.path}",
                                 "use --engine libaio/psync for files and devices")
        self._blocks = [t.arena.reshape(-1, t.lbs) for t in targets]
        self._done = []

    def submit(self, slots, ops, tgts, offsets, lengths):
        res = lengths.astype(np.int64)
        for t in np.unique(tgts):
            sel_t = tgts == t
            blocks, lbs = self._blocks[t], self.targets[t].lbs
            for length in np.unique(lengths[sel_t]):
                sel = sel_t & (lengths == length)
                nblk = int(length) // lbs
                rows = (offsets[sel] // lbs).astype(np.int64)[:, None] + np.arange(nblk)
                bufs = self.buffers[slots[sel], :int(length)].reshape(-1, nblk, lbs)
                op = ops[sel]
                rd, wr = op == 0, op == 1
                if rd.any():
                    self.buffers[slots[sel][rd], :int(length)] = blocks[rows[rd].ravel()].reshape(-1, int(length))
                if wr.any():
                    blocks[rows[wr].ravel()] = bufs[wr].reshape(-1, lbs)
                tr = op == 2
                if tr.any():
                    blocks[rows[tr].ravel()] = 0
        self._done.append((slots.copy(), res, time.perf_counter_ns()))

    def reap(self, min_nr, timeout_ns):
        if not self._done:
            return EMPTY, EMPTY, None
        s = np.concatenate([d[0] for d in self._done])
        r = np.concatenate([d[1] for d in self._done])
        t = np.concatenate([np.full(len(d[0]), d[2], dtype=np.int64) for d in self._done])
        self._done = []
        return s, r, t
