"""What the benchmark scripts share: the fastest of a few runs in process CPU time (a shared machine's load does
not count). A script run as ``python benchmarks/x.py`` has this folder on its path."""

from __future__ import annotations

import time


def fastest_cpu(fn, repeat: int = 3):
    """(the last result of ``fn()``, the fewest process CPU seconds of ``repeat`` calls)."""
    best, out = float("inf"), None
    for _ in range(repeat):
        c = time.process_time()
        out = fn()
        best = min(best, time.process_time() - c)
    return out, best
