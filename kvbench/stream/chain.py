"""Prefix chaining of block ids, vectorised over requests.

Some traces (the LMBench/GMI trace) list per-block content hashes that are *not* prefix-chained: the same id
can follow different predecessors. Prefix-cache semantics need a key that identifies the whole prefix, so the
reader chains them: ``key[0] = mix(SEED, id[0])``, ``key[i] = mix(key[i-1], id[i])`` (DESIGN.md). Chaining ids
that already are prefix-chained keeps exactly the same equality classes (up to 64-bit hash collisions), so it
is always safe; it only makes keys opaque.
"""

from __future__ import annotations

import numpy as np

SEED = np.uint64(0x6B76_6265_6E63_6821)          # "kvbench!"
_GOLDEN = np.uint64(0x9E37_79B9_7F4A_7C15)
_M1 = np.uint64(0xBF58_476D_1CE4_E5B9)
_M2 = np.uint64(0x94D0_49BB_1331_11EB)


def splitmix64(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser, elementwise on a uint64 array (wrapping arithmetic)."""
    x = np.asarray(x, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = x + _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        return z ^ (z >> np.uint64(31))


def mix(prev: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Key of a block from the key of its parent and its own id."""
    with np.errstate(over="ignore"):
        return splitmix64(splitmix64(prev) ^ (np.asarray(ids, dtype=np.uint64) * _GOLDEN))


def chain_ids(ids: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Prefix-chain CSR block ids: one vectorised step per block position (max blocks per request)."""
    ids = np.asarray(ids, dtype=np.uint64)
    offsets = np.asarray(offsets, dtype=np.int64)
    keys = np.empty_like(ids)
    if ids.size == 0:
        return keys
    counts = np.diff(offsets)
    starts = offsets[:-1]
    # requests sorted by length descending, so the active set at position j is a prefix of that order
    order = np.argsort(-counts, kind="stable")
    sorted_counts = counts[order]
    sorted_starts = starts[order]
    maxlen = int(sorted_counts[0])
    # number of requests with count > j, for every j
    active = len(order) - np.searchsorted(sorted_counts[::-1], np.arange(maxlen), side="right")
    idx = sorted_starts[: active[0]].copy()
    keys[idx] = mix(np.full(idx.size, SEED, dtype=np.uint64), ids[idx])
    for j in range(1, maxlen):
        idx = sorted_starts[: active[j]] + j
        keys[idx] = mix(keys[idx - 1], ids[idx])
    return keys
