"""What the compiled (numba) kernels share."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True, inline="always")
def u(i):
    """An array index as uint64, for the kernels' hot subscripts (``a[u(i)]``).

    numba compiles a signed subscript with Python's negative-index wraparound: a shift and a mask before every
    load and store. The kernels never index from the end, so an unsigned index does the same work without
    them. Measured in-process, interleaved, same results: the tier simulation 1.15x faster on mooncake-synthetic,
    L1-L4; the exact LRU stack 1.4x; the FTL model 1.2-1.5x host pages/s (benchmarks/tier_sim.py, mrc_speed.py,
    ftl_speed.py). Not everywhere: the steady curve's Fenwick loops measured no faster (0.8-1.0x), so they keep
    signed subscripts.

    A kernel that inlines this is not recompiled when this changes (numba's cache keys on the kernel's own
    file): keep it as it is.
    """
    return np.uint64(i)


@njit(cache=True, nogil=True, inline="always")
def splitmix64(x):
    """The splitmix64 finaliser of one uint64 (wrapping arithmetic): the compiled form of
    :func:`kvbench.stream.chain.splitmix64` (the key-sampling hash, the generator's key chaining); the two are
    held equal by tests/stream/test_sampling.py."""
    z = x + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))
