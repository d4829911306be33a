"""Steady state of an LRU KV tier: write rate W(C), residence time T(C) and DWPD(C) at every capacity (pure).

DESIGN.md, "Steady state". A tier of capacity C blocks under write-through writes every block it misses. Before
its first eviction it only fills (warm-up writes, reported apart); from the first eviction on it is written at

    W(C) = m(C) x demand,   m(C) = misses / references, both in requests arriving after the first eviction,
                            demand = references in requests after the first arrival / the trace's span

blocks per second of trace time: the steady miss ratio at the trace's mean load. The window's own rate (misses
over the time after the fill) would carry the load of the hours the window happens to cover: on a diurnal trace a
larger tier fills later, its window is the busy evening, and W would rise with C, so the tier's write rate, its
DWPD and the drives it needs would depend on where in the day the trace starts and ends. A full tier's long-run
write rate is its miss ratio times the load it sees, and over days the load it sees is the mean; for a stationary
trace the two estimates agree (both count the requests strictly after a window's opening instant over the time
after it: on one block a second, both say one block a second). Under LRU without a TTL nothing leaves before the
first eviction, so the first eviction is the first touch of the (C+1)-th distinct block: its time is read off the
first-touch times, no simulation per capacity. Residence time T(C) = C / W(C) is how long an idle block survives
(LRU acts as a TTL cache with that TTL); DWPD(C) = 86,400 W(C) / C = 86,400 / T(C) drive writes per day of the
tier's own capacity. A capacity the trace never fills (C >= distinct blocks, or filled only at the last arrival)
has no steady state: its W is NaN, ``filled`` False. A filled tier *shows* its residence time only once it has
turned over (written at least C blocks after filling: every block resident at the fill could have been evicted);
before that, T(C) is a projection of a window shorter than itself, reported (``turned_over`` False) but never used
to answer a retention.

Asked to keep KV for R seconds, the tier is the smallest C with T(C) >= R, written at 86,400 / R DWPD. The
trace cannot show residence times much beyond its span: such retentions are *beyond the trace* and are
extrapolated with a stated model (:meth:`SteadyCurve.for_residence`).

Per-reference stack distances come from one O(N log N) pass (a Fenwick tree over positions); the misses after
each capacity's first eviction from one more pass over capacities in descending order (a Fenwick tree over
distances), so every integer capacity is exact in O(N log N) total.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numba import njit

from kvbench.analysis.endurance import dwpd_at_residence
from kvbench.errors import SpecError


@njit(cache=True, nogil=True)
def _misses_after_fill(dist, start, n_keys):
    """For every capacity C in 1..n_keys-1: references at index >= start[C] with distance > C (misses at C).

    ``start`` is non-decreasing in C, so capacities are visited in descending order while the suffix grows."""
    n = dist.shape[0]
    size = n_keys + 2
    tree = np.zeros(size + 1, dtype=np.int64)
    out = np.zeros(n_keys, dtype=np.int64)
    added = 0
    pos = n
    for c in range(n_keys - 1, 0, -1):
        s = start[c]
        while pos > s:
            pos -= 1
            j = dist[pos]
            while j <= size:
                tree[j] += 1
                j += j & -j
            added += 1
        acc = 0
        j = c
        while j > 0:
            acc += tree[j]
            j -= j & -j
        out[c] = added - acc
    return out


@dataclass(frozen=True, eq=False)
class SteadyCurve:
    """Steady-state write rate, residence and DWPD of an LRU tier under write-through, at every capacity of
    1..``distinct`` blocks, in trace time. Arrays are indexed by capacity in blocks (index 0 unused).

    Not a :class:`~kvbench.analysis.curves.protocol.HitRatioCurve`: a curve of write rates (its :meth:`at` gives
    W, T and DWPD); :meth:`hits` is its steady hit-ratio curve. ``sample_rate``: the key sample rate of the trace
    (a ``gen:...,sample=r`` stream); capacities are its own blocks."""

    fill_time_s: np.ndarray          # trace time of the first eviction (NaN: never fills)
    steady_writes: np.ndarray        # blocks missed in requests after the first eviction
    write_blocks_per_s: np.ndarray   # W(C), NaN where not filled
    warmup_writes: np.ndarray        # blocks written before the steady window opens
    steady_references: np.ndarray    # block references in requests after the first eviction (0: none)
    demand_blocks_per_s: float       # the mean load W is set at: references after the first arrival / span (NaN:
                                     # a trace at one instant)
    distinct: int
    references: int
    span_s: float
    block_bytes: int
    new_blocks_per_s: float = 0.0    # compulsory writes: first touches per reference over the second half of the
                                     # references, times the mean demand (as W)
    distances: np.ndarray | None = None   # LRU stack distance of every reference (touch order; cold = distinct + 1)
    request_of_ref: np.ndarray | None = None
    n_requests: int = 0                       # requests of the trace (trailing ones may hold no reference)
    sample_rate: float = 1.0                  # the trace's key sample rate (capacities are the sample's blocks)

    def hits(self, demand_blocks_per_s: float | None = None) -> "SteadyHits":
        """The steady hit ratio 1 - W(C) / demand at every capacity (at the curve's own demand by default)."""
        return SteadyHits(self, self.demand_blocks_per_s if demand_blocks_per_s is None else demand_blocks_per_s)

    def hit_blocks_per_request(self, capacity_blocks: float) -> np.ndarray:
        """Blocks each request finds resident in an LRU tier of ``capacity_blocks`` (a prefix of its blocks)."""
        n_req = max(self.n_requests, int(self.request_of_ref[-1]) + 1 if self.request_of_ref.size else 0)
        hit = (self.distances <= np.floor(capacity_blocks)) & (self.distances <= self.distinct)   # cold: never
        return np.bincount(self.request_of_ref[hit], minlength=n_req)

    @property
    def capacities(self) -> np.ndarray:
        return np.arange(self.write_blocks_per_s.shape[0], dtype=np.int64)

    @property
    def filled(self) -> np.ndarray:
        return np.isfinite(self.write_blocks_per_s) & (self.write_blocks_per_s > 0)

    @property
    def turned_over(self) -> np.ndarray:
        """Filled and rewritten at least once after filling: the residence time is observed, not projected."""
        return self.filled & (self.steady_writes >= self.capacities)

    @property
    def residence_s(self) -> np.ndarray:
        """T(C) = C / W(C) (NaN where not filled)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            t = self.capacities / self.write_blocks_per_s
        return np.where(self.filled, t, np.nan)

    @property
    def observed_residence_s(self) -> np.ndarray:
        """T(C) where the tier turned over within the trace, NaN elsewhere."""
        return np.where(self.turned_over, self.residence_s, np.nan)

    @property
    def max_residence_s(self) -> float:
        """The longest residence time the trace shows (a turned-over tier)."""
        r = self.observed_residence_s
        return float(np.nanmax(r)) if np.isfinite(r).any() else 0.0

    def index(self, capacity_blocks) -> np.ndarray:
        """Integer capacities (floor) clipped to the curve; beyond the distinct blocks: the last index + 1."""
        c = np.floor(np.asarray(capacity_blocks, dtype=np.float64))
        return np.clip(c, 0, self.write_blocks_per_s.shape[0]).astype(np.int64)

    def at(self, capacity_blocks) -> dict:
        """W, T, DWPD, fill time and the steady window at capacities (blocks); NaN where the tier never fills."""
        i = self.index(capacity_blocks)
        n = self.write_blocks_per_s.shape[0]
        ok = (i >= 1) & (i < n)
        j = np.where(ok, i, 1) if n > 1 else np.zeros_like(i)

        def take(a):
            return np.where(ok, a[j], np.nan) if n > 1 else np.full(i.shape, np.nan)

        w = take(self.write_blocks_per_s)
        fill = take(self.fill_time_s)
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.asarray(capacity_blocks, dtype=np.float64) / w
        filled = np.isfinite(w) & (w > 0)
        steady = np.where(ok, self.steady_writes[np.minimum(j, n - 1)], 0.0) if n > 1 else np.zeros(i.shape)
        return {"turned_over": filled & (steady >= np.asarray(capacity_blocks, dtype=np.float64)),
                "write_blocks_per_s": w, "residence_s": np.where(filled, t, np.nan),
                "dwpd": np.where(filled, dwpd_at_residence(np.where(filled, t, 1.0)), np.nan),
                "fill_time_s": fill, "filled": filled,
                "steady_window_s": np.where(filled, self.span_s - fill, np.nan)}

    def capacity_for_residence(self, residence_s: float) -> int | None:
        """Smallest capacity (blocks) whose residence time is at least ``residence_s``; None when the trace
        shows no such capacity (the retention is beyond the trace)."""
        r = self.observed_residence_s
        ok = np.flatnonzero(np.nan_to_num(r, nan=-1.0) >= residence_s * (1 - 1e-12))
        return int(ok[0]) if ok.size else None

    def extrapolation_base(self) -> int | None:
        """The capacity with the longest residence the trace shows: its write rate is what extrapolation holds."""
        r = self.observed_residence_s
        if not np.isfinite(r).any():
            return None
        return int(np.nanargmax(r))

    def held_write_blocks_per_s(self) -> float | None:
        """The write rate every answer beyond the trace holds: W at the longest residence the trace shows (None
        when no tier turned over)."""
        return self._held

    @cached_property
    def _held(self) -> float | None:   # computed once: the deployment's bisection asks ~100 times, at O(distinct)
        base = self.extrapolation_base()
        return None if base is None else float(self.write_blocks_per_s[base])

    def answer_write_blocks_per_s(self, capacity_blocks) -> np.ndarray:
        """The steady write rate an answer uses at capacities (blocks): W(C) where the tier turned over within
        the trace, the held rate elsewhere (:meth:`held_write_blocks_per_s`: an upper bound, since W falls as C
        grows). Turning over is downward closed (a smaller tier fills no later and misses every reference a larger
        one misses, so it writes at least as much after its fill), so every capacity that did not turn over is
        beyond the held one. A tier that fills but does not turn over has only a window shorter than its own
        residence, which sees whatever part of the trace it covers (a time of day, the end of sessions): its
        projection is reported (:meth:`at`, ``turned_over`` False) but no answer rests on it. NaN below 1 block and
        where nothing turned over."""
        c = np.asarray(capacity_blocks, dtype=np.float64)
        a = self.at(c)
        held = self.held_write_blocks_per_s()
        return np.where(c >= 1, np.where(a["turned_over"], a["write_blocks_per_s"], np.nan if held is None else held),
                        np.nan)


def demand_basis(times, refs, t0: float | None = None) -> tuple[int, float]:
    """What the mean load every steady write rate is set at rests on (W = a window's writes per reference x
    references / span): the block references of the requests arriving after the first arrival ``t0`` (default
    the earliest of ``times``), and the span from it to the last request (in order) that holds a block (0 when
    none does). ``times``, ``refs``: per request."""
    times = np.asarray(times, dtype=np.float64)
    refs = np.asarray(refs, dtype=np.int64)
    busy = np.flatnonzero(refs > 0)
    if not busy.size:
        return 0, 0.0
    t0 = float(times.min()) if t0 is None else float(t0)
    return int(refs[times > t0].sum()), float(times[busy[-1]]) - t0


def mean_demand(times, refs, t0: float | None = None) -> float:
    """Block references per second that a steady write rate is set at (:func:`demand_basis`); NaN when the
    span is empty."""
    n, span = demand_basis(times, refs, t0)
    return n / span if span > 0 else float("nan")


def steady_curve(trace, *, block_bytes: int, from_request: int = 0) -> SteadyCurve:
    """The steady-state curve of a trace's reference stream (requests by arrival, blocks deepest-first).

    ``from_request``: the requests before it only warm the cache (a warm-up, ``--warmup``): each capacity's
    window opens at its first eviction or at that request, whichever is later, and the demand W is set at is
    that request's on (its arrival the span's start, as the whole trace's first arrival is); compulsory writes
    are counted over the second half of those references."""
    from kvbench.analysis.curves.profile import dense_ids, reference_stream
    from kvbench.stream.sampling import key_sample_rate

    if block_bytes <= 0:
        raise SpecError("block size must be > 0 bytes", "check the model preset and block_tokens")
    keys, times = reference_stream(trace)
    n = int(keys.shape[0])
    if n == 0:
        raise SpecError(f"trace {trace.path} has no block references", "give a trace whose requests have hash_ids")
    codes, d = dense_ids(keys)
    from kvbench.analysis.curves.kernels import STACK_COLD, stack_distances

    # stack distance counting the key itself (1 = re-touch of the most recent key), cold references d + 1
    s = stack_distances(np.ascontiguousarray(codes, dtype=np.int64), d)
    dist = np.where(s == STACK_COLD, d + 1, s + 1)
    # first touch of each distinct key, in order (codes are assigned in first-seen order)
    first = np.empty(d, dtype=np.int64)
    first[codes[::-1]] = np.arange(n - 1, -1, -1, dtype=np.int64)
    t_first = times[first]
    t0 = float(trace.timestamp_s.min())
    t_end = float(times[-1])
    # capacity C fills (first eviction) at the first touch of distinct key index C (the (C+1)-th)
    fill = np.full(d + 1, np.nan)
    fill[1:d] = t_first[1:d]
    start = np.full(d + 1, n, dtype=np.int64)
    start[1:d] = np.searchsorted(times, t_first[1:d], side="right")   # requests strictly after the fill
    r0 = int(trace.offsets[from_request]) if from_request > 0 else 0      # the warm-up's references
    np.maximum(start, r0, out=start)
    after = _misses_after_fill(dist, start[:d], d) if d > 1 else np.zeros(max(d, 1), dtype=np.int64)
    steady = np.zeros(d + 1, dtype=np.float64)
    steady[:d] = after[:d]
    # references in the requests of each steady window; W = the window's miss ratio x the trace's mean demand
    seen = np.zeros(d + 1, dtype=np.float64)
    seen[1:d] = n - start[1:d]
    span = t_end - t0
    if from_request > 0:       # the span opens at the last warm-up request, as the whole trace's at its first
        demand = mean_demand(trace.timestamp_s[from_request - 1:], trace.blocks_per_request[from_request - 1:],
                             float(trace.timestamp_s[from_request - 1]))
    else:
        demand = mean_demand(trace.timestamp_s, trace.blocks_per_request, t0)
    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.where(seen > 0, steady / seen * demand, np.nan)
    w[0] = np.nan
    # misses at C over the whole trace = references with distance > C; warm-up = misses before the window
    hist = np.bincount(np.minimum(dist, d + 1), minlength=d + 2)
    misses_total = n - np.cumsum(hist)[: d + 1]
    warm = np.where(np.isfinite(fill), misses_total - steady, np.nan)
    # compulsory writes: first touches among the second half of the references, per reference, at the mean demand
    h = r0 + (n - r0) // 2
    new_rate = float(np.count_nonzero(first >= h)) / (n - h) * demand if span > 0 and n > h else 0.0
    return SteadyCurve(fill_time_s=fill - t0, steady_writes=steady, write_blocks_per_s=w, warmup_writes=warm,
                       steady_references=seen, demand_blocks_per_s=float(demand), distinct=d, references=n,
                       span_s=t_end - t0, block_bytes=int(block_bytes),
                       new_blocks_per_s=new_rate, distances=dist,
                       request_of_ref=np.repeat(np.arange(trace.n_requests, dtype=np.int64),
                                                trace.blocks_per_request), n_requests=trace.n_requests,
                       sample_rate=key_sample_rate(trace))


def residence_for(curve: SteadyCurve, residence_s: float, *, time_scale: float = 1.0, copies: float = 1.0) -> dict:
    """The tier that keeps KV for ``residence_s`` (wall time): capacity, write rate, DWPD, and whether the trace
    shows it or it is extrapolated.

    ``time_scale`` > 1 replays the trace faster (wall time = trace time / scale); ``copies`` replicates its users
    (capacities and write rates x copies, residence unchanged). Beyond the trace the write rate is held at its
    value at the longest residence the trace shows: capacity = W x R is then an upper bound (W falls as C grows),
    and DWPD = 86,400 / R by definition."""
    if not residence_s > 0:
        raise SpecError(f"retention {residence_s} s must be > 0", "give e.g. --retention 1h")
    in_trace = residence_s * time_scale
    c = curve.capacity_for_residence(in_trace)
    bb = curve.block_bytes
    if c is not None:
        a = curve.at(c)
        w = float(a["write_blocks_per_s"][()]) * time_scale * copies
        return {"retention_s": residence_s, "capacity_blocks": c * copies, "capacity_bytes": c * bb * copies,
                "write_bytes_per_s": w * bb, "residence_s": float(a["residence_s"][()]) / time_scale,
                "dwpd": float(a["dwpd"][()]) * time_scale, "extrapolated": False, "basis": "measured on the trace"}
    base = curve.extrapolation_base()
    if base is None:
        return {"retention_s": residence_s, "capacity_blocks": None, "capacity_bytes": None, "write_bytes_per_s": None,
                "residence_s": None, "dwpd": dwpd_at_residence(residence_s), "extrapolated": True,
                "basis": "no capacity fills within the trace: no steady state to extrapolate from"}
    w = curve.held_write_blocks_per_s() * time_scale * copies
    w_low = curve.new_blocks_per_s * time_scale * copies
    cap_blocks = w * residence_s
    return {"retention_s": residence_s, "capacity_blocks": cap_blocks, "capacity_bytes": cap_blocks * bb,
            "capacity_bytes_lower": w_low * residence_s * bb,
            "write_bytes_per_s": w * bb, "residence_s": residence_s, "dwpd": dwpd_at_residence(residence_s),
            "extrapolated": True,
            "basis": (f"beyond the trace (the longest residence it shows is "
                      f"{curve.observed_residence_s[base] / time_scale:,.0f} s): write rate held at its value "
                      f"there ({w * bb / 1e9:,.4g} GB/s), so capacity = write rate x retention is an upper bound; "
                      f"capacity_bytes_lower counts only never-seen blocks ({w_low * bb / 1e9:,.4g} GB/s)")}


@dataclass(frozen=True, eq=False)
class SteadyHits:
    """The steady-state hit ratio of a write-through LRU tier, per capacity: h(C) = 1 - W(C) / demand.

    Under write-through every miss is written, so the steady write rate W(C) (blocks/s, from the first eviction
    on) is the steady miss rate; ``demand`` is the references/s the write rate is set against (the trace's
    mean, as W's own: at the curve's demand, h(C) is the steady window's hit ratio 1 - m(C)). Where the tier does
    not turn over within the trace, W is the one every steady-state answer uses there
    (:meth:`SteadyCurve.answer_write_blocks_per_s`: held at the longest residence the trace shows, as
    :func:`residence_for` and ``plan.steady_at`` hold it). The whole-trace hit-ratio curve
    counts the misses of the trace's cold start as well: a short trace's many first references would make a
    deployment's GPUs look busier per request than they are in steady state, and so depend on its length.
    A :class:`~kvbench.analysis.curves.protocol.HitRatioCurve` (what :func:`kvbench.analysis.deployment.scale`
    reads), listed at every whole block 1..distinct; the turn-over test compares a tier's writes with its own
    capacity, so at a fractional capacity ``at`` is that capacity's, not the whole block's below. Not merged with
    :class:`~kvbench.analysis.curves.capacity.HitCurve`: it is defined by the steady write rate rather than the
    whole trace's hits, and need not rise with capacity (a rate held beyond the trace can exceed a measured one)."""

    curve: SteadyCurve
    demand_blocks_per_s: float

    @property
    def capacities_blocks(self) -> np.ndarray:
        return np.arange(1, self.curve.distinct + 1, dtype=np.float64)

    @property
    def references(self) -> int:
        return int(self.curve.references)

    @property
    def sample_rate(self) -> float:
        return float(self.curve.sample_rate)

    @property
    def capacity_scale(self) -> float:
        """Capacities are the trace's own blocks: a key sample's stand for 1 / rate of the whole stream's."""
        return 1.0 / self.sample_rate

    def write_blocks_per_s(self, capacity_blocks) -> np.ndarray:
        return self.curve.answer_write_blocks_per_s(capacity_blocks)

    def at(self, capacity_blocks) -> np.ndarray:
        w = self.write_blocks_per_s(capacity_blocks)
        h = 1.0 - w / self.demand_blocks_per_s if self.demand_blocks_per_s > 0 else np.zeros_like(w)
        return np.clip(np.nan_to_num(h, nan=0.0), 0.0, 1.0)

    @property
    def infinite_hit_ratio(self) -> float:
        """The largest steady hit ratio at any capacity (a cache of every block: the held write rate)."""
        return float(self.at(np.arange(1, self.curve.distinct + 2, dtype=np.float64)).max())


def summary(curve: SteadyCurve) -> dict:
    """A few numbers for JSON: the trace's horizon and the longest residence it can show."""
    demand = curve.demand_blocks_per_s
    return {"distinct_blocks": curve.distinct, "references": curve.references, "span_s": curve.span_s,
            "max_residence_s": curve.max_residence_s,
            "new_block_bytes_per_s": curve.new_blocks_per_s * curve.block_bytes,
            "demand_bytes_per_s": demand * curve.block_bytes if np.isfinite(demand) else None,
            "model": "LRU write-through: W(C) = m(C) x demand, m(C) = misses / references in the requests after "
                     "the first eviction, demand = the trace's mean references/s; T(C) = C / W(C); "
                     "DWPD(C) = 86400 / T(C)"}
