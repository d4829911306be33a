"""The shared L4 pool's bandwidth: per-node links and the pool's aggregate bandwidth, shared over time (pure).

Each link (one per node, ``--l4-link-bw``) and the pool (``--l4-pool-bw``) is a :class:`Calendar`: bandwidth in
use as a piecewise-constant function of time. A transfer of B bytes starting at t takes, at every moment, what
is left on both its node's link and the pool: ``rate(t) = min(link_bw - link_used(t), pool_bw - pool_used(t))``,
until its bytes are moved; it then holds that rate in both calendars. Transfers are placed in request arrival
order, so an earlier request keeps the bandwidth it took and a later one runs in what is left (first come,
first served, like the node queues). A load's time is ``link latency + that transfer``; with one node and no
pool limit it is ``latency + B / link_bw``, the link model of ``replay kv``.

Hand check: pool 10 GB/s, links 8 GB/s, two nodes each loading 8 GB at t = 0: the first runs at 8 GB/s and
ends at 1 s; the second gets 2 GB/s for 1 s, then 8 GB/s for the last 6 GB: 1.75 s.
"""

from __future__ import annotations

import bisect
import math

import numpy as np


class Calendar:
    """Bandwidth in use over time on one shared resource of ``capacity`` bytes/s (None: unlimited)."""

    def __init__(self, capacity: float | None):
        self.capacity = capacity
        self.t = [0.0]          # segment k is [t[k], t[k+1]) (the last one runs to infinity)
        self.u = [0.0]          # bandwidth in use on segment k
        self.peak = 0.0
        self._past: dict = {}       # segments pruned away: seconds spent at each use level (to 0.1% of capacity)

    def free_at(self, k: int) -> float:
        return math.inf if self.capacity is None else self.capacity - self.u[k]

    def segment(self, when: float) -> int:
        return max(0, bisect.bisect_right(self.t, when) - 1)

    def next_change(self, when: float) -> float:
        k = bisect.bisect_right(self.t, when)
        return self.t[k] if k < len(self.t) else math.inf

    def _split(self, when: float) -> int:
        """Make ``when`` a breakpoint; returns its segment index."""
        k = self.segment(when)
        if self.t[k] == when:
            return k
        self.t.insert(k + 1, when)
        self.u.insert(k + 1, self.u[k])
        return k + 1

    def add(self, t0: float, t1: float, rate: float) -> None:
        """``rate`` bytes/s more in use on [t0, t1)."""
        if self.capacity is None or t1 <= t0 or rate <= 0:
            return
        a = self._split(t0)
        b = self._split(t1)
        for k in range(a, b):
            self.u[k] += rate
            if self.u[k] > self.peak:
                self.peak = self.u[k]

    def prune(self, before: float) -> None:
        """Forget segments that end before ``before`` (no transfer starts earlier any more)."""
        k = self.segment(before)
        if k > 0:
            if self.capacity is not None:     # bounded memory: at most 1,001 levels whatever the transfers
                for j in range(k):
                    level = round(self.u[j] / self.capacity, 3)
                    self._past[level] = self._past.get(level, 0.0) + self.t[j + 1] - self.t[j]
            del self.t[:k]
            del self.u[:k]

    @property
    def peak_utilisation(self) -> float | None:
        return None if self.capacity is None else self.peak / self.capacity

    def segments(self, until: float | None = None):
        """(durations, utilisation) from 0 to ``until`` (default: the last change), idle after the last transfer;
        pruned segments as the seconds spent at each use level (to 0.1% of capacity). None without a bandwidth
        model."""
        if self.capacity is None:
            return None
        dt = np.array(list(self._past.values()) + [self.t[j + 1] - self.t[j] for j in range(len(self.t) - 1)],
                      np.float64)
        use = np.array(list(self._past) + [u / self.capacity for u in self.u[:-1]], np.float64)
        if until is not None and until > self.t[-1]:
            dt, use = np.append(dt, until - self.t[-1]), np.append(use, 0.0)
        return dt, use

    def utilisation(self, until: float | None = None) -> dict | None:
        """Time-weighted utilisation over [0, until] (:func:`utilisation_stats`)."""
        seg = self.segments(until)
        return None if seg is None else utilisation_stats(*seg)


def utilisation_stats(dt: np.ndarray, use: np.ndarray) -> dict:
    """Mean, p99 (the level the resource stays at or below 99% of the time) and the fraction of time saturated
    (>= 99.9% in use) of a time-weighted utilisation series. A peak says only that some transfer once took the
    whole link (first come, first served always lets one); these size it."""
    total = float(dt.sum())
    if total <= 0:
        return {"mean": 0.0, "p99": 0.0, "saturated_fraction": 0.0, "seconds": 0.0}
    order = np.argsort(use, kind="stable")
    cum = np.cumsum(dt[order])
    p99 = float(use[order][min(int(np.searchsorted(cum, 0.99 * total, side="left")), use.size - 1)])
    return {"mean": float((dt * use).sum() / total), "p99": p99,
            "saturated_fraction": float(dt[use >= 0.999].sum() / total), "seconds": total}


def transfer(start: float, nbytes: float, link: Calendar, pool: Calendar) -> float:
    """Place a transfer of ``nbytes`` from ``start`` on ``link`` and ``pool``; returns its end time."""
    if nbytes <= 0:
        return start
    if link.capacity is None and pool.capacity is None:
        return start                       # no bandwidth model: the move is free (as in replay kv)
    now, left = start, float(nbytes)
    while True:
        rate = min(link.free_at(link.segment(now)), pool.free_at(pool.segment(now)))
        nxt = min(link.next_change(now), pool.next_change(now))
        if rate <= 1e-9 * (link.capacity or pool.capacity):
            if math.isinf(nxt):            # cannot happen: reservations end; guard against a stuck loop
                raise RuntimeError("L4 bandwidth calendar is saturated forever")
            now = nxt
            continue
        end = now + left / rate
        if end <= nxt:
            link.add(now, end, rate)
            pool.add(now, end, rate)
            return end
        link.add(now, nxt, rate)
        pool.add(now, nxt, rate)
        left -= rate * (nxt - now)
        now = nxt
