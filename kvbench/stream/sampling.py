"""Spatial key sampling of a trace: a miniature of the cache that fits a test box's disk.

Miniature simulation (Waldspurger et al., ATC'17 "Cache Modeling and Optimization using Miniature
Simulations"): keep only the block references whose key hash falls under ``rate`` of the hash space (the
same splitmix64 threshold filter as SHARDS in :mod:`kvbench.analysis.curves`, so both pick the same keys),
and simulate every cache at ``rate`` times its capacity. A key is either always or never sampled, so the
sampled stream holds every reuse of a sampled key, and the LRU stack distance of a sampled reference in the
sampled stream is about ``rate`` times its distance in the full stream (SHARDS). Hence a cache of ``C * rate``
blocks fed the sample holds about the sampled part of what a cache of ``C`` blocks fed the full trace holds,
and per-block hit ratios (overall and per tier) of the miniature estimate the full ones at ``C``; byte
volumes of the miniature are ``rate`` times the full ones.

Why this is also right for *prefix* hits: a request touches its blocks deepest-first and keys are
prefix-chained (key i names the whole prefix up to block i), so every touch of a descendant is followed by
touches of all its ancestors: along a chain, ancestors are always at least as recent as descendants, and
under LRU the resident blocks of a chain form a prefix of it (residency is monotone along the chain). The
sampled sub-chain of a request is touched deepest-first too, so in the miniature its resident blocks are
also a prefix of the sub-chain; with each sampled key resident in the miniature iff (approximately) it is
resident in the full cache, the miniature's resident prefix is exactly the sampled blocks inside the full
cache's resident prefix. A request's sampled hit count therefore counts its sampled blocks before its
first full-cache miss, and the hit ratio of the sampled references estimates the full per-block hit ratio.
(A sampled request cannot see its unsampled blocks: its hit prefix in the full trace lies between its last
sampled hit and its first sampled miss, so per-request quantities are estimates; totals are unbiased.)

Requests are all kept (those with no sampled block keep zero blocks), so arrival times, request counts and
trace spans are those of the full trace; ``extras["full_blocks"]`` keeps each request's full block count.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from kvbench.errors import UsageError
from kvbench.stream.traces import Trace

FULL_BLOCKS = "full_blocks"


def check_rate(rate: float, what: str = "--sample-keys") -> float:
    """A sampling rate in (0, 1]; one-line error otherwise."""
    try:
        r = float(rate)
    except (TypeError, ValueError):
        raise UsageError(f"{what} {rate!r} is not a number", f"give a fraction in (0, 1], e.g. {what} 0.01") from None
    if not (0.0 < r <= 1.0):
        raise UsageError(f"{what} {rate} is outside (0, 1]", f"give a fraction in (0, 1], e.g. {what} 0.01")
    return r


def threshold(rate: float) -> np.uint64:
    """Hash threshold of a rate: keys whose splitmix64 hash is below it are sampled (as SHARDS in curves)."""
    return np.uint64(min(int(rate * 2.0**64), 2**64 - 1))


def key_mask(keys: np.ndarray, rate: float, seed: int = 0) -> np.ndarray:
    """Boolean mask of the keys in the sample: ``splitmix64(key ^ seed) < rate * 2**64``, vectorised.

    The same hash and threshold as :func:`kvbench.analysis.curves.sampled_trace` (``salt`` = ``seed``).
    """
    from kvbench.stream.chain import splitmix64

    keys = np.asarray(keys, dtype=np.uint64)
    if rate >= 1.0:
        return np.ones(keys.shape, dtype=bool)
    salted = keys ^ np.uint64(seed) if seed else keys
    return splitmix64(salted) < threshold(rate)


def sample_keys(trace: Trace, rate: float, seed: int = 0) -> Trace:
    """The trace restricted to the block references whose key hash falls under ``rate`` (all requests kept).

    Order within each request is kept, so requests still touch their sampled blocks deepest-first.
    ``extras["full_blocks"]`` is each request's block count before sampling (kept through slices and batches).
    """
    rate = check_rate(rate)
    full = trace.blocks_per_request.astype(np.int64)
    extras = dict(trace.extras)
    extras.setdefault(FULL_BLOCKS, full)
    if rate >= 1.0:
        return replace(trace, extras=extras)
    keep = key_mask(trace.keys, rate, seed)
    offsets = np.zeros(trace.n_requests + 1, dtype=np.int64)
    np.cumsum(np.bincount(trace.request_of_block()[keep], minlength=trace.n_requests), out=offsets[1:])
    return replace(trace, keys=trace.keys[keep], offsets=offsets, extras=extras)
