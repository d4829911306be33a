"""psync: O_DIRECT pread/pwrite from a thread pool of ``qd`` threads (the fallback when libaio cannot load).

Threads release the GIL inside preadv/pwritev, so ``qd`` I/Os are really in flight; each thread stamps its
own completion time. Slower per I/O than libaio (a Python call per I/O), but portable.
"""

from __future__ import annotations

import errno
import os
import queue
import threading
import time

import numpy as np

from kvbench.engine.engines.base import CAP_ALIGNED, EMPTY, Engine


class PsyncEngine(Engine):
    name = "psync"
    caps = frozenset({CAP_ALIGNED})
    kinds = frozenset({"file", "block"})

    def __init__(self, targets, qd, buffers, buf_addr):
        super().__init__(targets, qd, buffers, buf_addr)
        self._work: queue.SimpleQueue = queue.SimpleQueue()
        self._done: queue.SimpleQueue = queue.SimpleQueue()
        self._mv = memoryview(buffers.reshape(-1)).cast("B")
        self._threads = [threading.Thread(target=self._loop, daemon=True) for _ in range(qd)]
        for t in self._threads:
            t.start()

    def _loop(self):
        mv, sb = self._mv, self.slot_bytes
        while True:
            item = self._work.get()
            if item is None:
                return
            slot, op, tgt, off, n = item
            fd = int(self.fds[tgt])
            try:
                if op == 0:
                    r = os.preadv(fd, [mv[slot * sb: slot * sb + n]], off)
                elif op == 1:
                    r = os.pwritev(fd, [mv[slot * sb: slot * sb + n]], off)
                else:
                    r = self.targets[tgt].trim(off, n)
                    r = n if r == 0 else r
            except OSError as e:
                r = -(e.errno or errno.EIO)
            self._done.put((slot, r, time.perf_counter_ns()))

    def submit(self, slots, ops, tgts, offsets, lengths):
        for item in zip(slots.tolist(), ops.tolist(), tgts.tolist(), offsets.tolist(), lengths.tolist()):
            self._work.put(item)

    def reap(self, min_nr, timeout_ns):
        out = []
        try:
            if min_nr > 0:
                out.append(self._done.get(timeout=None if timeout_ns is None else max(timeout_ns, 0) / 1e9))
        except queue.Empty:
            return EMPTY, EMPTY, None
        while True:
            try:
                out.append(self._done.get_nowait())
            except queue.Empty:
                break
        if not out:
            return EMPTY, EMPTY, None
        a = np.array(out, dtype=np.int64)
        return a[:, 0], a[:, 1], a[:, 2]

    def close(self) -> None:
        for _ in self._threads:
            self._work.put(None)
        for t in self._threads:
            t.join(timeout=5)
