"""Fault injection for tests: make chosen I/Os fail with an errno, or corrupt chosen reads' data.

Spec strings (``--inject-fault``, comma separated): ``eio@N`` (plan index N fails with EIO), ``eio-every=N``
(every N-th I/O fails), ``enospc@N``, ``corrupt@N`` / ``corrupt-every=N`` (flip a bit in what read N
returned, so verify must catch it).
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

    @property
    def active(self) -> bool:
        return bool(self.fail_at or self.fail_every or self.corrupt_at or self.corrupt_every)

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
    codes = {"eio": errno.EIO, "enospc": errno.ENOSPC}
    for part in text.split(","):
        part = part.strip()
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
                             "use eio@N, enospc@N, eio-every=N, corrupt@N or corrupt-every=N") from None
    return FaultSpec(tuple(fail_at), fail_every, errno.EIO, tuple(corrupt_at), corrupt_every)
