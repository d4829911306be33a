"""Spatial key sampling of a trace: a miniature of the cache that fits a test box's disk.

Miniature simulation (Waldspurger et al., ATC'17 "Cache Modeling and Optimization using Miniature
Simulations"): keep only the block references whose key hash falls under ``rate`` of the hash space (the
same splitmix64 threshold filter as SHARDS in :mod:`kvbench.analysis.curves.profile`, so both pick the same keys),
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

A whole-trace analysis of a long sampled stream need not hold the requests the sample left empty: at 1% a
week of chat is 11M requests but 6.6M sampled references. :func:`compact` drops them (keeping each batch's
first and last request, so the span is exact) and keeps the whole stream's totals in ``meta["whole"]``;
``extras["request"]`` is each kept request's index in the whole stream. Memory is then bounded by the sample.
:func:`whole` reads the totals of either form.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from kvbench.errors import UsageError
from kvbench.stream.trace import Trace

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
    """Hash threshold of a rate: keys whose splitmix64 hash is below it are sampled: the one sampling rule of
    kvbench (key_mask, sampled_indices; SHARDS in :mod:`kvbench.analysis.curves.profile` and ``gen:...,sample=`` use
    them)."""
    return np.uint64(min(int(rate * 2.0**64), 2**64 - 1))


def key_mask(keys: np.ndarray, rate: float, seed: int = 0) -> np.ndarray:
    """Boolean mask of the keys in the sample: ``splitmix64(key ^ seed) < rate * 2**64``, vectorised.

    The same hash and threshold as :func:`kvbench.analysis.curves.profile.sampled_trace` (``salt`` = ``seed``).
    """
    from kvbench.stream.chain import splitmix64

    keys = np.asarray(keys, dtype=np.uint64)
    if rate >= 1.0:
        return np.ones(keys.shape, dtype=bool)
    salted = keys ^ np.uint64(seed) if seed else keys
    return splitmix64(salted) < threshold(rate)


def sampled_indices(keys: np.ndarray, rate: float, seed: int = 0) -> np.ndarray:
    """Indices of the references in the sample, in order: ``np.flatnonzero(key_mask(keys, rate, seed))`` in one
    compiled pass (:mod:`kvbench.stream.sampling_kernel`; SHARDS' filter over a whole trace)."""
    keys = np.asarray(keys, dtype=np.uint64)
    if rate >= 1.0:
        return np.arange(keys.shape[0], dtype=np.int64)
    from kvbench.stream.sampling_kernel import below_threshold

    return below_threshold(keys, np.uint64(seed), threshold(rate))


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


REQUEST = "request"
FULL_BEFORE = "full_before"


def compact(trace: Trace, first_request: int = 0, full_before: int = 0) -> Trace:
    """The requests of a key-sampled batch that hold a sampled block (plus its first and last request, so the
    span is exact), with each kept request's whole-stream index in ``extras["request"]``, the whole stream's
    block references before it in ``extras["full_before"]`` (``first_request`` and ``full_before``: the
    stream before this batch) and the batch's totals in ``meta["whole"]`` (requests, input and output tokens,
    full block references)."""
    n = trace.n_requests
    full = trace.extras.get(FULL_BLOCKS)
    if full is None:
        raise UsageError("only a key-sampled trace can be compacted", "sample it first (sample_keys)")
    per = trace.blocks_per_request
    keep = per > 0
    if n:
        keep[0] = keep[-1] = True
    idx = np.flatnonzero(keep)
    offsets = np.zeros(idx.size + 1, dtype=np.int64)
    np.cumsum(per[idx], out=offsets[1:])
    offsets += int(trace.offsets[0])
    extras = {k: np.asarray(v)[idx] for k, v in trace.extras.items() if k not in (REQUEST, FULL_BEFORE)}
    extras[REQUEST] = np.asarray(trace.extras[REQUEST])[idx] if REQUEST in trace.extras else \
        idx.astype(np.int64) + first_request
    if FULL_BEFORE in trace.extras:
        extras[FULL_BEFORE] = np.asarray(trace.extras[FULL_BEFORE])[idx]
    else:
        before = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.asarray(full, dtype=np.int64), out=before[1:])
        extras[FULL_BEFORE] = before[idx] + full_before
    totals = {"requests": n, "input_tokens": int(np.asarray(trace.input_tokens, dtype=np.int64).sum()),
              "output_tokens": int(np.asarray(trace.output_tokens, dtype=np.int64).sum()),
              "blocks": int(np.asarray(full, dtype=np.int64).sum())}
    if "whole" in trace.meta:                        # compacting a compacted trace keeps its totals
        totals = dict(trace.meta["whole"])
    return replace(trace, timestamp_s=trace.timestamp_s[idx], input_tokens=trace.input_tokens[idx],
                   output_tokens=trace.output_tokens[idx], offsets=offsets, extras=extras,
                   meta={**trace.meta, "whole": totals})


def compact_batches(batches) -> Trace:
    """Join key-sampled batches into one compacted ``Trace`` (:func:`compact` each as it arrives), summing their
    totals: what a whole-trace analysis of a long sampled stream holds in memory."""
    parts, sums, first = [], None, 0
    for b in batches:
        c = compact(b, first, sums["blocks"] if sums else 0)
        first += b.n_requests
        sums = dict(c.meta["whole"]) if sums is None else {k: sums[k] + c.meta["whole"][k] for k in sums}
        parts.append(c)
    out = Trace.concat(parts)
    return replace(out, meta={**out.meta, "whole": sums})


def whole(trace: Trace) -> dict:
    """Totals of the whole stream behind a trace, compacted or not: requests, input and output tokens, block
    references before any key sampling (``extras["full_blocks"]``, else the trace's own)."""
    if "whole" in trace.meta:
        return dict(trace.meta["whole"])
    full = trace.extras.get(FULL_BLOCKS)
    return {"requests": trace.n_requests, "input_tokens": int(np.asarray(trace.input_tokens, dtype=np.int64).sum()),
            "output_tokens": int(np.asarray(trace.output_tokens, dtype=np.int64).sum()),
            "blocks": int(np.asarray(full if full is not None else trace.blocks_per_request, dtype=np.int64).sum())}


def request_index(trace: Trace) -> np.ndarray:
    """Each request's index in the whole stream (itself unless compacted)."""
    r = trace.extras.get(REQUEST)
    return np.asarray(r, dtype=np.int64) if r is not None else np.arange(trace.n_requests, dtype=np.int64)


def key_sample_rate(trace: Trace) -> float:
    """The key-sampling rate of a trace that is a key sample (``gen:...,sample=F``, :func:`sample_keys`), else 1."""
    if FULL_BLOCKS not in trace.extras:
        return 1.0
    return float((trace.meta or {}).get("sample_rate", 1.0) or 1.0)


def full_references_from(trace: Trace, request: int) -> int:
    """Block references of the whole stream (before key sampling) from the trace's request ``request`` on."""
    if FULL_BEFORE in trace.extras:
        total = int(whole(trace)["blocks"])
        before = trace.extras[FULL_BEFORE]
        return total - int(before[request]) if request < trace.n_requests else 0
    full = trace.extras.get(FULL_BLOCKS)
    return int(np.asarray(full if full is not None else trace.blocks_per_request, dtype=np.int64)[request:].sum())
