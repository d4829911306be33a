"""Hit-ratio-vs-capacity curves of a trace: exact LRU (Mattson, one pass), SHARDS, retention, other policies.

The reference stream is the trace's block keys in touch order (requests by arrival, each request's blocks
deepest-first: DESIGN.md "Prefix hits"), so for prefix-chained keys block hits are prefix hits. One pass of
LRU stack distances gives the hit ratio at every capacity; retention (TTL) is exact too, because under LRU a
block idle longer than the TTL is also the least recent (it is a miss iff its distance > C or its idle gap >
TTL). SHARDS (Waldspurger et al., FAST'15) samples keys by hash, fixed-rate or fixed-size, for traces too large
for the exact pass. Other policies (FIFO, S3-FIFO) come from ``kvbench.sim.policies``, simulated per size.

Capacities are in blocks internally; ``unit="bytes"`` converts through a model preset's block size (a block
occupies a full slot of ``block_tokens * bytes_per_token``, even when partial).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import time

import numpy as np

from kvbench.errors import UsageError
from kvbench.stream.traces import Trace

UNITS = ("blocks", "bytes")


# --- the reference stream ------------------------------------------------------------------------------
def reference_stream(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """Keys in touch order and each reference's arrival time (seconds)."""
    order = trace.touch_order()
    times = np.repeat(trace.timestamp_s, trace.blocks_per_request)
    return trace.keys[order], times


def dense_ids(keys: np.ndarray) -> tuple[np.ndarray, int]:
    """Map uint64 keys to 0..n_keys-1 (hash-based, first-seen order)."""
    import pandas as pd

    codes, uniques = pd.factorize(keys, sort=False)
    return codes.astype(np.int64, copy=False), int(len(uniques))


@dataclass(frozen=True)
class WarmupTime:
    """A warm-up given as a time (``--warmup 136.3s``): the requests before it, on the trace's clock (seconds
    from its first request), warm the cache and are not measured; :func:`warmup_fraction` turns it into the
    fraction of requests every warm-up consumer takes."""

    seconds: float

    def __str__(self) -> str:
        """As ``--warmup`` reads it back (a step of ``kvbench run`` is handed its options as text)."""
        return f"{self.seconds!r}s"


def warmup_fraction(trace: Trace, warmup: "float | WarmupTime") -> float:
    """The warm-up as the fraction of requests :func:`warmup_request` takes: a fraction as it is; a time as the
    fraction that selects exactly the requests arriving before it (k requests of n: (k + 1/2) / n, which the
    floor in :func:`warmup_request` brings back to k whatever the rounding)."""
    if not isinstance(warmup, WarmupTime):
        return float(warmup)
    ts = np.asarray(trace.timestamp_s, dtype=np.float64)
    t = float(warmup.seconds)
    k = int(np.searchsorted(ts, t, side="left"))
    n = len(trace.offsets) - 1
    if "whole" in (getattr(trace, "meta", None) or {}):       # compacted: count the whole stream's requests
        from kvbench.stream.sampling import request_index, whole

        idx = request_index(trace)
        n = int(whole(trace)["requests"])
        k = int(idx[k]) if k < idx.size else n
    if k >= n:
        raise UsageError(f"warm-up {warmup.seconds:g} s covers every request (the last arrives at "
                         f"{float(ts[-1]) if ts.size else 0.0:g} s)", "give a warm-up inside the trace, e.g. "
                         "its stationary tail's start (kvbench trace stats)")
    return (k + 0.5) / n if k else 0.0


def warmup_request(trace: Trace, warmup: float) -> int:
    """The first request after the warm-up fraction (of the whole stream's requests when compacted)."""
    if not 0.0 <= warmup < 1.0:
        raise UsageError(f"warm-up fraction must be in [0, 1), got {warmup}", "give e.g. --warmup 0.1")
    if "whole" not in (getattr(trace, "meta", None) or {}):
        return int(np.floor(warmup * (len(trace.offsets) - 1)))
    from kvbench.stream.sampling import request_index, whole     # compacted: count the whole stream's requests

    return int(np.searchsorted(request_index(trace), int(np.floor(warmup * whole(trace)["requests"]))))


def warmup_window(trace: Trace, warmup: "float | WarmupTime") -> int:
    """The first request measured after a warm-up (a fraction of the requests or a :class:`WarmupTime`; 0: none),
    refused in one line when what it leaves cannot be measured: the window's own arrivals must span some time
    (its request rate and the stationarity test's windows are over it). What ``plan`` and ``run`` check first."""
    from kvbench.errors import SpecError
    from kvbench.stream.sampling import request_index, whole

    # k is a request of the trace: a fraction below 1 leaves one at least, and a compacted key sample keeps the
    # whole stream's last request (kvbench.stream.sampling.compact)
    k = warmup_request(trace, warmup_fraction(trace, warmup)) if warmup else 0
    if k == 0:
        return 0
    ts = np.asarray(trace.timestamp_s, dtype=np.float64)
    span = float(ts[-1] - ts[k])
    if not span > 0:
        left = int(whole(trace)["requests"]) - int(request_index(trace)[k])
        raise SpecError(f"the warm-up leaves {left:,} request(s) arriving over {span:g} s to measure (from "
                        f"{float(ts[k]):g} s on the trace's clock)",
                        "give a shorter --warmup (kvbench trace stats names a stationary tail's start)")
    return k


def _warmup_refs(trace: Trace, warmup: float) -> int:
    return int(trace.offsets[warmup_request(trace, warmup)])


# --- stack-distance profiles ----------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class ReuseProfile:
    """Weighted histogram of (estimated) LRU stack distances: hits(C) = weight of references with distance <= C.

    ``steps`` are ascending distances in blocks (estimated, so possibly fractional, when sampled);
    ``cum_hits[i]`` is the hit weight at capacity ``steps[i]``. ``references`` counts the references measured
    (after warm-up); ``cold`` the first references among them (estimated when sampled).

    A :class:`~kvbench.analysis.curves.protocol.HitRatioCurve` (``at`` = :meth:`hit_ratio`, listed at ``steps``).
    Not merged with :class:`Curve` or :class:`~kvbench.analysis.curves.capacity.HitCurve`, which are built from
    it: it alone keeps the sample (weights, SHARDS_adj, sampled references) an estimate needs, at every distance.
    """

    steps: np.ndarray
    cum_hits: np.ndarray
    references: int
    cold: float
    distinct_blocks: float
    method: str
    sample_rate: float = 1.0
    ttl_s: float | None = None
    warmup: float = 0.0
    sampled_references: int = 0
    extra: dict = field(default_factory=dict)
    capacity_scale: float = 1.0          # whole-stream blocks per block of ``steps`` (protocol.HitRatioCurve)

    @property
    def capacities_blocks(self) -> np.ndarray:
        return self.steps

    def at(self, capacity_blocks) -> np.ndarray:
        """Hit ratio at capacities (blocks): :meth:`hit_ratio` (the protocol's name)."""
        return self.hit_ratio(capacity_blocks)

    def hits_at(self, capacities_blocks) -> np.ndarray:
        c = np.asarray(capacities_blocks, dtype=np.float64)
        idx = np.searchsorted(self.steps, c, side="right") - 1
        out = np.where(idx >= 0, self.cum_hits[np.maximum(idx, 0)] if self.cum_hits.size else 0.0, 0.0)
        return np.clip(out, 0.0, float(self.references))

    def hit_ratio(self, capacities_blocks) -> np.ndarray:
        if self.references == 0:
            return np.zeros(np.shape(capacities_blocks))
        return self.hits_at(capacities_blocks) / self.references

    @property
    def infinite_hit_ratio(self) -> float:
        if self.references == 0 or self.cum_hits.size == 0:
            return 0.0
        return float(np.clip(self.cum_hits[-1] / self.references, 0.0, 1.0))

    @property
    def max_distance(self) -> float:
        return float(self.steps[-1]) if self.steps.size else 0.0

    def default_capacities(self, points: int = 256) -> np.ndarray:
        """Log-spaced capacities (blocks) from 1 to the largest distance: the whole curve in ``points``."""
        top = max(1.0, np.ceil(self.max_distance))
        caps = np.unique(np.round(np.geomspace(1.0, top, max(2, points))).astype(np.int64))
        return caps[caps >= 1]


def _profile_from(dist_est: np.ndarray, weights: np.ndarray, references: int, cold: float,
                  distinct: float, method: str, **kw) -> ReuseProfile:
    """Build a profile from the (estimated) distances of reuse references (dist > 0) and their weights."""
    order = np.argsort(dist_est, kind="stable")
    d, w = dist_est[order], weights[order]
    steps, first = np.unique(d, return_index=True)
    cum = np.cumsum(w)
    last = np.append(first[1:], d.size) - 1
    return ReuseProfile(steps.astype(np.float64), cum[last] if d.size else cum, references, cold, distinct,
                        method, **kw)


def _profile_from_hist(hist: np.ndarray, weight: float, references: int, cold: float, distinct: float,
                       method: str, **kw) -> ReuseProfile:
    steps = np.flatnonzero(hist)
    cum = np.cumsum(hist[steps]).astype(np.float64) * weight
    return ReuseProfile(steps.astype(np.float64) / (1.0 if kw.get("sample_rate", 1.0) == 1.0 else
                                                    kw["sample_rate"]), cum, references, cold, distinct, method,
                        **kw)


def _shards_adjusted(stack, references: int, rate: float, method: str, **kw) -> ReuseProfile:
    """A fixed-rate sample's profile at full scale: distances and weights / ``rate``, with the SHARDS_adj
    correction (Waldspurger et al., FAST'15): the full stream's ``references`` minus their estimate from the
    sample, added at the smallest distance. A popular key that falls in the sample (a shared system prompt)
    would otherwise count every one of its hits 1/rate times over."""
    hist = stack.counts().astype(np.float64)
    adj = references - stack.references / rate
    if hist.size > 1:
        hist[np.flatnonzero(hist)[0] if hist.any() else 1] += adj * rate
    return _profile_from_hist(hist, 1.0 / rate, int(references), stack.cold / rate, stack.distinct / rate, method,
                              sample_rate=rate, sampled_references=stack.references, extra={"adjustment": adj},
                              **kw)


def exact_profile(trace: Trace, *, ttl_s: float | None = None, warmup: float = 0.0) -> ReuseProfile:
    """Exact LRU stack-distance profile of the whole trace (optionally retention-limited), one pass.

    A key-sampled trace (``gen:...,sample=F``) is a fixed-rate SHARDS sample of its whole stream: its profile is
    the whole stream's estimate (distances in full-stream blocks, SHARDS_adj against the stream's references),
    the same as :func:`shards_profile` of the whole stream at that rate."""
    from kvbench.analysis.curves.stack import LRUStack
    from kvbench.stream.sampling import full_references_from, key_sample_rate

    first = warmup_request(trace, warmup)
    stack = LRUStack(ttl_s=ttl_s, count_from=int(trace.offsets[first]),
                     expected_keys=min(1 << 22, max(1024, trace.n_blocks // 8)))
    stack.feed(trace)
    r = key_sample_rate(trace)
    if r < 1.0:
        return _shards_adjusted(stack, full_references_from(trace, first), r, "key-sampled", ttl_s=ttl_s,
                                warmup=warmup)
    return _profile_from_hist(stack.counts(), 1.0, stack.references, stack.cold, stack.distinct, "exact",
                              ttl_s=ttl_s, warmup=warmup, sampled_references=stack.references)


def _salted(keys: np.ndarray, salt: int) -> np.ndarray:
    return keys ^ np.uint64(salt) if salt else keys


def _key_hash_fraction(keys: np.ndarray) -> np.ndarray:
    from kvbench.stream.chain import splitmix64

    return (splitmix64(keys) >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


def sampled_trace(trace: Trace, rate: float, salt: int = 0) -> tuple[Trace, int]:
    """The trace restricted to blocks whose key hash falls below ``rate`` (SHARDS' spatial sample).

    Returns the sampled Trace (same requests, fewer blocks, order kept) and the number of sampled references
    before the warm-up boundary is applied by the caller.
    """
    from dataclasses import replace

    from kvbench.stream.sampling import sampled_indices

    flat = sampled_indices(trace.keys, rate, salt)
    req = np.searchsorted(trace.offsets, flat, side="right") - 1
    offsets = np.zeros(trace.n_requests + 1, dtype=np.int64)
    np.cumsum(np.bincount(req, minlength=trace.n_requests), out=offsets[1:])
    return replace(trace, keys=trace.keys[flat], offsets=offsets), int(flat.size)


def _touch_stream(trace: Trace, flat: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Touch positions, keys and times of the references at flat indices ``flat``, in touch order."""
    req = np.searchsorted(trace.offsets, flat, side="right") - 1
    pos = trace.offsets[req] + trace.offsets[req + 1] - 1 - flat          # position in touch order
    order = np.argsort(pos, kind="stable")
    pos, flat, req = pos[order], flat[order], req[order]
    return pos, trace.keys[flat], trace.timestamp_s[req]


class FixedSizeShards:
    """Fixed-size SHARDS fed batch by batch (``shards_fs_feed``): memory bounded by the sample size, never the
    trace length. Each batch's references are pre-filtered by hash against the current threshold (which only
    falls), so the sequential kernel sees a small stream. The sampled references are kept as their estimated
    distances and weights, merged per distinct value after each batch."""

    def __init__(self, size: int, rate: float = 1.0, *, ttl_s: float | None = None, count_from: int = 0,
                 salt: int = 0):
        self.size, self.ttl_s, self.count_from, self.salt = int(size), ttl_s, int(count_from), int(salt)
        self.want = ttl_s is not None
        # everything starts small and grows with the keys actually sampled (a size above the keys the trace
        # holds allocates no more than they need)
        width = max(2 * min(self.size, 1 << 15) + 2, 1024)
        self.tree = np.zeros(width + 1, np.int64)
        self.owner = np.full(width, -1, np.int64)
        self.heap = np.empty(min(self.size, 1 << 15) + 2, np.int64)
        self.st = np.zeros(4, np.int64)                 # entries, next slot, live keys, heap size
        self.thr = np.array([float(rate)])
        self.last_rate = float(rate)    # the rate in force at the last sampled reference
        self.best = np.zeros(0, np.uint64)  # the size + 1 smallest distinct key hashes seen below the threshold
        self._alloc(max(1024, min(2 * self.size + 2, 1 << 16)))
        self.refs_seen = 0
        self.references = 0          # counted (past count_from)
        self.sampled = 0             # sampled references among them
        self.weight = 0.0            # their total weight (1 / rate each)
        self.cold = 0.0
        self.distinct = 0.0          # 1 / rate of every cold sampled reference, warm-up included
        self.est = np.zeros(0, np.float64)     # distinct estimated distances of reuses, merged ...
        self.w = np.zeros(0, np.float64)       # ... with their summed weights
        self._pend: list = []                  # (estimates, weights) of batches not merged yet
        self._npend = 0

    def _alloc(self, n: int) -> None:
        bits = max(10, int(np.ceil(np.log2(2 * n))))
        self.shift = 64 - bits
        self.tab = np.zeros(2 << bits, np.uint64)
        self.ekey = np.zeros(n, np.uint64)
        self.efrac = np.zeros(n, np.float64)
        self.eslot = np.full(n, -1, np.int64)
        self.etime = np.zeros(n if self.want else 0, np.float64)
        self.ein = np.zeros(n, np.bool_)

    def _make_room(self) -> None:
        from kvbench.analysis.curves.kernels import _rebuild

        n_ent, slot, live, hsize = (int(x) for x in self.st)
        if n_ent >= self.ekey.shape[0] or 2 * (n_ent + 1) > self.tab.shape[0] // 2:
            self._compact()
        if hsize + 1 >= self.heap.shape[0]:
            grown = np.empty(min(2 * self.heap.shape[0], self.size + 2), np.int64)
            grown[:hsize] = self.heap[:hsize]
            self.heap = grown
        width = self.owner.shape[0]
        if slot == width and 2 * live + 2 > width:
            owner = np.full(2 * width, -1, np.int64)
            owner[:width] = self.owner
            self.owner, self.tree = owner, np.zeros(2 * width + 1, np.int64)
            self.st[1] = _rebuild(self.tree, self.owner, self.eslot, 2 * width)

    def _compact(self) -> None:
        from kvbench.analysis.curves.kernels import shards_fs_compact

        live = int(self.st[2])
        old = (self.ekey, self.efrac, self.eslot, self.etime, self.ein)
        # room for twice the live keys (and never less than the entries in use, which may all be live)
        self._alloc(max(1024, 2 * max(live, int(self.st[0])) + 2))
        self.st[0] = shards_fs_compact(int(self.st[0]), *old, self.owner, self.heap, int(self.st[3]), self.tab,
                                       self.shift, self.ekey, self.efrac, self.eslot, self.etime, self.ein)

    def feed(self, trace: Trace) -> None:
        """Process one ``Trace`` (or batch) in order, in chunks of whole requests."""
        chunk = max(1 << 16, 4 * self.size)
        r = 0
        while r < trace.n_requests:
            r_end = int(np.searchsorted(trace.offsets, trace.offsets[r] + chunk, side="right"))
            r_end = min(max(r_end, r + 1), trace.n_requests)
            self._feed(trace.slice(r, r_end) if (r, r_end) != (0, trace.n_requests) else trace)
            r = r_end

    def _feed(self, trace: Trace) -> None:
        from kvbench.analysis.curves.kernels import shards_fs_feed
        from kvbench.stream.chain import splitmix64

        h = splitmix64(_salted(trace.keys, self.salt))
        # a superset of the references below the threshold (the kernel compares exactly, as fractions); once
        # size + 1 distinct keys were seen below it, the threshold is at most the (size+1)-th smallest of their
        # hashes (``best``), so references at or above that are dropped up front
        bound = np.uint64(min(int(self.thr[0] * 2.0**64) + (1 << 12), 2**64 - 1))
        if self.best.size > self.size:
            bound = min(bound, self.best[self.size])
        flat = np.flatnonzero(h < bound)
        self.best = np.unique(np.concatenate([self.best, h[flat]]))[: self.size + 1]
        pos, keys, times = _touch_stream(trace, flat)
        fr = _key_hash_fraction(_salted(keys, self.salt))
        n = len(keys)
        dist = np.zeros(n, np.int64)
        rates = np.zeros(n, np.float64)
        gaps = np.empty(n if self.want else 0, np.float64)
        taken = np.zeros(n, np.bool_)
        tms = np.ascontiguousarray(times if self.want else times[:0], dtype=np.float64)
        i = 0
        while True:
            i, code = shards_fs_feed(keys, fr, tms, self.want, self.size, self.shift, self.tab, self.ekey,
                                     self.efrac, self.eslot, self.etime, self.ein, self.tree, self.owner,
                                     self.heap, self.st, self.thr, dist, rates, gaps, taken, i)
            if code == 0:
                break
            self._make_room()
        self.distinct += float(np.sum(1.0 / rates[taken & (dist == 0)]))
        if taken.any():
            self.last_rate = float(rates[taken][-1])
        keep = taken & (pos + self.refs_seen >= self.count_from)
        self.references += max(0, self.refs_seen + trace.n_blocks - max(self.count_from, self.refs_seen))
        self.refs_seen += trace.n_blocks
        d, w = dist[keep], 1.0 / rates[keep]
        self.sampled += int(keep.sum())
        self.weight += float(w.sum())
        self.cold += float(w[d == 0].sum())
        if self.want:
            d = np.where(gaps[keep] <= self.ttl_s, d, 0)
        reuse = d > 0
        self._pend.append((d[reuse] * w[reuse], w[reuse]))
        self._npend += int(reuse.sum())
        if self._npend > max(1 << 16, self.est.size):      # merged when the pending part outgrows the merged
            self._merge()

    def _merge(self) -> None:
        est = np.concatenate([self.est, *(e for e, _ in self._pend)])
        wts = np.concatenate([self.w, *(w for _, w in self._pend)])
        self.est, inv = np.unique(est, return_inverse=True)
        self.w = np.bincount(inv.ravel(), weights=wts, minlength=self.est.size)
        self._pend, self._npend = [], 0

    def profile(self, warmup: float = 0.0) -> ReuseProfile:
        """The profile of what was fed; SHARDS_adj (references minus their estimate) at the smallest distance."""
        self._merge()
        adj = self.references - self.weight
        weights = self.w.copy()
        if weights.size:
            weights[0] += adj
        return _profile_from(self.est, weights, int(self.references), self.cold, self.distinct,
                             "shards-fixed-size", sample_rate=self.last_rate, ttl_s=self.ttl_s, warmup=warmup,
                             sampled_references=self.sampled, extra={"adjustment": adj})


def shards_profile(trace: Trace, *, rate: float | None = None, size: int | None = None,
                   ttl_s: float | None = None, warmup: float = 0.0, salt: int = 0) -> ReuseProfile:
    """SHARDS profile: fixed-rate (``rate``) or fixed-size (``size`` keys, starting at ``rate`` or 1.0).

    Estimated distance = sampled distance / rate; each sampled reference weighs 1/rate (the rate in force at
    that reference, for fixed-size); the SHARDS_adj correction (references minus their estimate from the
    sample) is added at the smallest distance.
    """
    if size is None and rate is None:
        raise UsageError("SHARDS needs a sampling rate or a sample size", "give --sample 0.01 or --sample-size 8192")
    if rate is not None and not 0.0 < rate <= 1.0:
        raise UsageError(f"sampling rate must be in (0, 1], got {rate}", "give e.g. --sample 0.01")
    if size is not None and size < 1:
        raise UsageError(f"sample size must be >= 1 key, got {size}", "give e.g. --sample-size 8192")
    from kvbench.stream.sampling import full_references_from, key_sample_rate

    n_warm = warmup_request(trace, warmup)
    start = int(trace.offsets[n_warm])
    references = trace.n_blocks - start
    r0 = 1.0 if rate is None else float(rate)
    keyed = key_sample_rate(trace)        # a key-sampled stream: sample its sample (references are full ones)
    if keyed < 1.0 and size is not None:
        raise UsageError("a key-sampled gen: stream cannot be sampled to a fixed size",
                         "drop sample= from the gen: argument, or use --sample RATE")
    if size is None:
        from kvbench.analysis.curves.stack import LRUStack

        sub, _ = sampled_trace(trace, r0, salt)
        # references before the warm-up boundary: count how many sampled ones fall before it
        stack = LRUStack(ttl_s=ttl_s, count_from=int(sub.offsets[n_warm]),
                         expected_keys=min(1 << 22, max(1024, sub.n_blocks // 8)))
        stack.feed(sub)
        if keyed < 1.0:                   # the same hash unsalted: the keys under the smaller rate
            references = full_references_from(trace, n_warm)
            r0 = r0 * keyed if salt else min(r0, keyed)
        return _shards_adjusted(stack, int(references), r0, "shards-fixed-rate", ttl_s=ttl_s, warmup=warmup)
    shards = FixedSizeShards(int(size), r0, ttl_s=ttl_s, count_from=start, salt=salt)
    shards.feed(trace)
    return shards.profile(warmup)


def stream_profile(batches, *, rate: float | None = None, size: int | None = None, ttl_s: float | None = None,
                   salt: int = 0) -> tuple[ReuseProfile, dict]:
    """Exact, fixed-rate (``rate``) or fixed-size (``size`` keys) SHARDS LRU profile of a trace read batch by
    batch (``iter_trace``).

    Memory is bounded by the distinct keys (exact), the sampled keys (fixed-rate) or the sample size
    (fixed-size), and one batch: never the whole trace. Returns the profile and what was read: requests,
    references, the first batch's path, format, block size.
    """
    from kvbench.analysis.curves.stack import LRUStack

    if rate is not None and not 0.0 < rate <= 1.0:
        raise UsageError(f"sampling rate must be in (0, 1], got {rate}", "give e.g. --sample 0.01")
    if size is not None and size < 1:
        raise UsageError(f"sample size must be >= 1 key, got {size}", "give e.g. --sample-size 8192")
    from kvbench.stream.sampling import full_references_from, key_sample_rate

    r0 = 1.0 if rate is None else float(rate)
    shards = FixedSizeShards(int(size), r0, ttl_s=ttl_s, salt=salt) if size is not None else None
    stack = LRUStack(ttl_s=ttl_s) if shards is None else None
    meta = {"requests": 0, "references": 0, "kernel_s": 0.0}      # kernel_s: stack updates, not trace reading
    keyed = 1.0                       # a key-sampled stream (gen:...,sample=F): its rate; references are full ones
    for b in batches:
        if not meta["requests"]:
            meta |= {"path": b.path, "format": b.fmt, "block_tokens": b.block_tokens}
            keyed = key_sample_rate(b)
        meta["requests"] += b.n_requests
        meta["references"] += full_references_from(b, 0) if keyed < 1.0 else b.n_blocks
        t0 = time.perf_counter()
        if shards is not None:
            if keyed < 1.0:
                raise UsageError("a key-sampled gen: stream cannot be sampled to a fixed size",
                                 "drop sample= from the gen: argument, or use --sample RATE")
            shards.feed(b)
        else:
            # the same key hash as the stream's own sample: unsalted, sampling both keeps the keys under the
            # smaller rate; salted, the two samples are independent
            stack.feed(sampled_trace(b, r0, salt)[0] if rate is not None and (r0 < keyed or salt) else b)
        meta["kernel_s"] += time.perf_counter() - t0
    references = meta["references"]
    if shards is not None:
        return shards.profile(), meta
    r = r0 * keyed if salt else min(r0, keyed)
    if r == 1.0:
        return _profile_from_hist(stack.counts(), 1.0, stack.references, stack.cold, stack.distinct, "exact",
                                  ttl_s=ttl_s, sampled_references=stack.references), meta
    return _shards_adjusted(stack, int(references), r, "shards-fixed-rate" if r0 < keyed else "key-sampled",
                            ttl_s=ttl_s), meta


# --- other policies: simulated per size ----------------------------------------------------------------
def policy_hit_ratios(trace: Trace, policy: str, capacities_blocks, *, ttl_s: float | None = None,
                      warmup: float = 0.0) -> tuple[np.ndarray, int]:
    """Prefix hit ratio of ``policy`` at each capacity (one simulation per size, warm-up requests excluded)."""
    from kvbench.sim.policies import make_policy, simulate_prefix

    n_warm = int(np.floor(warmup * trace.n_requests))
    _warmup_refs(trace, warmup)
    warm, measured = trace.slice(0, n_warm), trace.slice(n_warm, trace.n_requests)
    base = make_policy(policy, 1, ttl_s=ttl_s)
    out = []
    for c in np.asarray(capacities_blocks, dtype=np.int64):
        cache = base.clone(int(c))
        if n_warm:
            simulate_prefix([warm], cache)
        out.append(simulate_prefix([measured], cache).hit_ratio)
    return np.asarray(out, dtype=np.float64), measured.n_blocks


# --- the curve a user asks for ------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Curve:
    """Hit ratio at each capacity for one policy; capacities in the unit asked (blocks or bytes).

    What ``kvbench mrc`` prints: the capacities (in the user's order) and unit asked, the policy and how the curve
    was made. A :class:`~kvbench.analysis.curves.protocol.HitRatioCurve` (``at``: the step function through the
    listed capacities). Not merged with :class:`~kvbench.analysis.curves.capacity.HitCurve`: a simulated policy
    (FIFO, S3-FIFO) is not a stack algorithm, so its curve may fall as capacity grows, which capacity sizing
    refuses; and an LRU curve here holds only the capacities asked, not every step.
    """

    policy: str
    method: str
    unit: str
    capacities: np.ndarray
    capacities_blocks: np.ndarray
    hit_ratio: np.ndarray
    infinite_hit_ratio: float
    references: int
    distinct_blocks: float
    block_bytes: int | None
    ttl_s: float | None
    warmup: float
    sample_rate: float = 1.0
    sampled_references: int = 0
    capacity_scale: float = 1.0        # whole-stream blocks per block of ``capacities_blocks``

    def at(self, capacity_blocks) -> np.ndarray:
        """Hit ratio at capacities (blocks): the value at the largest listed capacity <= each, 0 below them all
        (exact at the listed capacities; between them, for a simulated policy, only the nearest one below)."""
        from kvbench.analysis.curves.protocol import step_at

        order = np.argsort(self.capacities_blocks, kind="stable")
        return step_at(np.asarray(self.capacities_blocks, dtype=np.float64)[order], self.hit_ratio[order],
                       capacity_blocks)

    def to_dict(self) -> dict:
        return {"policy": self.policy, "method": self.method, "unit": self.unit,
                "capacities": self.capacities.tolist(), "capacities_blocks": self.capacities_blocks.tolist(),
                "hit_ratio": self.hit_ratio.tolist(), "infinite_hit_ratio": self.infinite_hit_ratio,
                "references": self.references, "distinct_blocks": self.distinct_blocks,
                "block_bytes": self.block_bytes, "ttl_s": self.ttl_s, "warmup": self.warmup,
                "sample_rate": self.sample_rate, "sampled_references": self.sampled_references}


def capacity_blocks(capacities, unit: str, block_bytes: int | None) -> np.ndarray:
    """Capacities in the user's unit -> whole blocks (bytes round down to full slots)."""
    if unit not in UNITS:
        raise UsageError(f"unknown capacity unit {unit!r}", f"use one of {', '.join(UNITS)}")
    caps = np.asarray(capacities, dtype=np.int64)
    if caps.size == 0 or np.any(caps <= 0):
        bad = caps[caps <= 0][0] if caps.size else "none"
        raise UsageError(f"capacities must be > 0 (got {bad})", "give positive capacities, e.g. --capacities 1000,10000")
    if unit == "blocks":
        return caps
    if not block_bytes:
        raise UsageError("capacities in bytes need a block size", "pass --model NAME (and the trace's block size)")
    return caps // int(block_bytes)


def hit_ratio_curve(trace: Trace, *, capacities=None, unit: str = "blocks", block_bytes: int | None = None,
                    policy: str = "lru", ttl_s: float | None = None, sample: float | None = None,
                    sample_size: int | None = None, warmup: float = 0.0, points: int = 256,
                    profile: ReuseProfile | None = None) -> Curve:
    """The curve of one policy. LRU: exact or SHARDS profile; others: per-size simulation.

    Without ``capacities`` the curve covers 1 block .. the largest reuse distance, log-spaced (``points``;
    fewer for simulated policies, which cost one run per size).
    """
    if ttl_s is not None and not ttl_s > 0:
        raise UsageError(f"retention must be > 0 s, got {ttl_s}", "give e.g. --ttl 10m")
    if policy == "lru":
        if profile is None:
            profile = (shards_profile(trace, rate=sample, size=sample_size, ttl_s=ttl_s, warmup=warmup)
                       if (sample is not None or sample_size is not None)
                       else exact_profile(trace, ttl_s=ttl_s, warmup=warmup))
        if capacities is None:
            caps_b = profile.default_capacities(points)
            caps = caps_b * (block_bytes if unit == "bytes" else 1)
        else:
            caps = np.asarray(capacities, dtype=np.int64)
            caps_b = capacity_blocks(caps, unit, block_bytes)
        return Curve("lru", profile.method, unit, caps, caps_b, profile.hit_ratio(caps_b),
                     profile.infinite_hit_ratio, profile.references, float(profile.distinct_blocks), block_bytes,
                     ttl_s, warmup, profile.sample_rate, profile.sampled_references, profile.capacity_scale)
    if capacities is None:
        top = float(np.unique(trace.keys).size)
        caps_b = np.unique(np.round(np.geomspace(1, max(2.0, top), min(points, 16))).astype(np.int64))
        caps = caps_b * (block_bytes if unit == "bytes" else 1)
    else:
        caps = np.asarray(capacities, dtype=np.int64)
        caps_b = capacity_blocks(caps, unit, block_bytes)
    if np.any(caps_b < 1):
        raise UsageError(f"a capacity is smaller than one block ({block_bytes} B)", "give larger capacities")
    ratios, refs = policy_hit_ratios(trace, policy, caps_b, ttl_s=ttl_s, warmup=warmup)
    exact = profile if profile is not None and profile.method == "exact" else \
        exact_profile(trace, ttl_s=ttl_s, warmup=warmup)      # no evictions at infinite size: any policy
    from kvbench.stream.sampling import key_sample_rate

    keyed = key_sample_rate(trace)      # simulated on the stream as read: a key sample's own blocks
    return Curve(policy, "simulation", unit, caps, caps_b, ratios, exact.infinite_hit_ratio, refs,
                 float(exact.distinct_blocks), block_bytes, ttl_s, warmup, keyed, refs, 1.0 / keyed)
