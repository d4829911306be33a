"""What every engine shares: the slot buffers and the (slots, results, completion times) reap contract."""

from __future__ import annotations

import numpy as np

CAP_ASYNC = "async"          # completions arrive later, through reap()
CAP_DISKLESS = "diskless"    # touches no device (dram, null)
CAP_ALIGNED = "aligned"      # needs lbs-aligned buffers, offsets and lengths (O_DIRECT)

EMPTY = np.zeros(0, dtype=np.int64)


class Engine:
    """Base class. ``buffers`` is a (qd, slot_bytes) uint8 view of page-aligned memory; slot s owns row s.

    submit(slots, ops, tgts, offsets, lengths) starts the I/Os (all of them: an engine that cannot take a
    whole batch at once keeps the rest itself) and returns, when it stamped them one by one, a (2, k) array of
    per-I/O times (perf_counter_ns clock): handed to the kernel, and the submit call returned; else None (the
    driver's stamps just before and after the call hold). Their difference is the submission latency (slat);
    reap(min_nr, timeout_ns) returns (slots, results, t_ns):
    results are bytes done or -errno, t_ns the completion times (perf_counter_ns) or None when the driver
    should stamp them at return.
    """

    name = "base"
    caps: frozenset = frozenset()
    kinds: frozenset = frozenset()   # the Target kinds it runs on (Target.kind: "file", "block", "dram")

    def __init__(self, targets, qd: int, buffers: np.ndarray, buf_addr: int):
        self.targets, self.qd, self.buffers, self.buf_addr = targets, qd, buffers, buf_addr
        self.slot_bytes = buffers.shape[1]
        self.fds = np.array([t.fd for t in targets], dtype=np.int32)

    @classmethod
    def check_available(cls) -> None:
        """Raise OSError/ImportError when this engine cannot run here."""

    @classmethod
    def prepare(cls) -> None:
        """One-time set-up in the parent before worker processes fork (e.g. compiling kernels)."""

    def close(self) -> None:
        pass
