"""Fault injection for tests: make chosen I/Os fail with an errno, or corrupt chosen reads' data.

Spec strings (``--inject-fault``, comma separated): ``eio@N`` (plan index N fails with EIO), ``eio-every=N``
(every N-th I/O fails), ``enospc@N``, ``corrupt@N`` / ``corrupt-every=N`` (flip a bit in what read N
returned, so verify must catch it), ``stall@N:DUR`` / ``stall-every=N:DUR`` (the driver really stops for DUR
right after submitting I/O N, so that I/O and those in flight with it complete that much later: a stalled host).
"""

from __future__ import annotations

import errno
from dataclasses import dataclass

import numpy as np

from kvbench.errors import UsageError


@dataclass(frozen=True)
class FaultSpec:
    fail_at: tuple = ()           # (plan index, errno) pairs
    fail_every: int = 0
    fail_errno: int = errno.EIO
    corrupt_at: tuple = ()
    corrupt_every: int = 0
    stall_at: tuple = ()
    stall_every: int = 0
    stall_s: float = 0.0

    @property
    def active(self) -> bool:
        return bool(self.fail_at or self.fail_every or self.corrupt_at or self.corrupt_every or self.stalls)

    @property
    def stalls(self) -> bool:
        return self.stall_s > 0 and bool(self.stall_at or self.stall_every)

    def stalling(self, gidx: np.ndarray) -> bool:
        """True when a stall is injected after submitting any of these global plan indices."""
        if not self.stalls:
            return False
        m = np.isin(gidx, np.array(self.stall_at, dtype=np.int64)) if self.stall_at else np.zeros(len(gidx), bool)
        if self.stall_every:
            m |= (gidx % self.stall_every) == self.stall_every - 1
        return bool(m.any())

    def failing(self, gidx: np.ndarray) -> np.ndarray:
        """errno (0 = none) injected for each global plan index."""
        out = np.zeros(len(gidx), dtype=np.int64)
        if self.fail_every:
            out[(gidx % self.fail_every) == self.fail_every - 1] = self.fail_errno
        for i, e in self.fail_at:
            out[gidx == i] = e
        return out

    def corrupting(self, gidx: np.ndarray) -> np.ndarray:
        m = np.zeros(len(gidx), dtype=bool)
        if self.corrupt_every:
            m |= (gidx % self.corrupt_every) == self.corrupt_every - 1
        if self.corrupt_at:
            m |= np.isin(gidx, np.array(self.corrupt_at, dtype=np.int64))
        return m


def parse_faults(text: str | None) -> FaultSpec | None:
    if not text:
        return None
    fail_at, corrupt_at, fail_every, corrupt_every = [], [], 0, 0
    stall_at, stall_every, stall_s = [], 0, 0.0
    codes = {"eio": errno.EIO, "enospc": errno.ENOSPC}
    for part in text.split(","):
        part = part.strip()
        if part.startswith("stall"):
            n, stall_s = _stall(part, stall_s)
            if part.startswith("stall@"):
                stall_at.append(n)
            else:
                stall_every = n
            continue
        try:
            if "@" in part:
                kind, n = part.split("@", 1)
                if kind == "corrupt":
                    corrupt_at.append(int(n))
                else:
                    fail_at.append((int(n), codes[kind]))
            elif "-every=" in part:
                kind, n = part.split("-every=", 1)
                if kind == "corrupt":
                    corrupt_every = int(n)
                elif kind == "eio":
                    fail_every = int(n)
                else:
                    raise KeyError(kind)
            else:
                raise KeyError(part)
        except (KeyError, ValueError):
            raise UsageError(f"--inject-fault: cannot parse {part!r}",
                             "use eio@N, enospc@N, eio-every=N, corrupt@N, corrupt-every=N, stall@N:DUR or "
                             "stall-every=N:DUR") from None
        n_given = int(part.split("=" if "-every=" in part else "@", 1)[1])
        if n_given < (1 if "-every=" in part else 0):
            raise UsageError(f"--inject-fault {part}: N must be >= 1 in KIND-every=N and >= 0 in KIND@N",
                             "e.g. eio-every=100 or eio@0")
    return FaultSpec(tuple(fail_at), fail_every, errno.EIO, tuple(corrupt_at), corrupt_every, tuple(stall_at),
                     stall_every, stall_s)


def _stall(part: str, before: float) -> tuple[int, float]:
    """``stall@N:DUR`` or ``stall-every=N:DUR`` -> (N, seconds); every stall of one spec lasts the same DUR."""
    from kvbench.errors import UnitError
    from kvbench.units import parse_duration

    head, sep, dur = part.partition(":")
    every = head.startswith("stall-every=")
    n = head[len("stall-every="):] if every else head[len("stall@"):] if head.startswith("stall@") else ""
    try:
        n_given, secs = int(n), parse_duration(dur, what="stall") if sep else 0.0
    except (ValueError, UnitError):
        n_given, secs = -1, 0.0
    if n_given < (1 if every else 0) or not secs > 0 or (before and secs != before):
        raise UsageError(f"--inject-fault: cannot parse {part!r} (a stall is stall@N:DUR or stall-every=N:DUR, "
                         "N >= 0 (>= 1 for every), DUR > 0, one DUR for all stalls)", "e.g. stall-every=4:1.5s")
    return n_given, float(secs)
