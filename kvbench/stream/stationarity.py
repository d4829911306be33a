"""Is a trace stationary? Per-window new-block share, request rate and infinite-cache hit ratio, and a trend test.

DESIGN.md, "Stationarity": a steady-state figure needs a window across which the share of never-seen blocks,
the request rate and the infinite-cache hit ratio do not trend. The trace is cut into ``windows`` equal spans
of time; each series is tested with the Mann-Kendall trend test (two-sided, normal approximation with the tie
correction) and its change across the trace estimated by Sen's slope (the median of the pairwise slopes).
A series *trends* when both hold: p < ``ALPHA`` and the change over the trace, |Sen slope| x (windows tested - 1),
is at least ``MIN_CHANGE`` of the series' scale (absolute for the shares and hit ratios, relative to the median
for the rate), so that a significant but negligible drift on a long trace is not called a trend. The trace
is stationary when no series trends. The new-block share is tested from the second window when the first has
no history (the span starts at the trace's first arrival): every block that window references is new to the
trace, however often the workload reuses it, so its share is the cold start's, not the workload's (a suffix's
first window has the history before it and is tested). Pure numpy.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from kvbench.errors import UsageError

ALPHA = 0.05
DEFAULT_WINDOWS = 10
# the smallest change across the trace that counts as a trend: (scale kind, threshold)
SERIES = {"new_block_share": ("absolute", 0.10), "request_rate": ("relative", 0.20),
          "window_hit_ratio": ("absolute", 0.10)}
TEST = (f"Mann-Kendall trend test (two-sided, normal approximation with tie correction) on each per-window series, "
        f"p < {ALPHA:g}, and a change across the trace (Sen's slope x (windows tested - 1)) of at least "
        + ", ".join(f"{v:g}{'x the median' if k == 'relative' else ''} for {n}" for n, (k, v) in SERIES.items())
        + "; new_block_share from the second window when the first has no history (the trace's start)")


def mann_kendall(x: np.ndarray) -> tuple[float, float, float]:
    """(S, Z, two-sided p) of the Mann-Kendall test on ``x`` (NaNs dropped; fewer than 3 points: p = 1)."""
    x = np.asarray(x, dtype=np.float64)
    x = x[np.isfinite(x)]
    n = x.size
    if n < 3:
        return 0.0, 0.0, 1.0
    i, j = np.triu_indices(n, k=1)
    s = float(np.sign(x[j] - x[i]).sum())
    _, ties = np.unique(x, return_counts=True)
    var = (n * (n - 1) * (2 * n + 5) - float(np.sum(ties * (ties - 1) * (2 * ties + 5)))) / 18.0
    if var <= 0:
        return s, 0.0, 1.0
    z = (s - math.copysign(1.0, s)) / math.sqrt(var) if s != 0 else 0.0
    return s, z, math.erfc(abs(z) / math.sqrt(2.0))


def sen_slope(x: np.ndarray) -> float:
    """Median of the pairwise slopes (x_j - x_i) / (j - i), per window (NaN windows skipped)."""
    x = np.asarray(x, dtype=np.float64)
    idx = np.flatnonzero(np.isfinite(x))
    if idx.size < 2:
        return 0.0
    i, j = np.triu_indices(idx.size, k=1)
    return float(np.median((x[idx[j]] - x[idx[i]]) / (idx[j] - idx[i])))


@dataclass(frozen=True)
class Trend:
    """One series' trend test."""

    series: str
    values: tuple
    s: float
    z: float
    p: float
    slope_per_window: float
    change: float              # Sen's slope x (windows tested - 1)
    threshold: float           # the change that counts, in the series' own units
    trends: bool
    first_window: int          # the first window tested (1: a cold first window left out)


@dataclass(frozen=True)
class Stationarity:
    """Per-window series of a trace (or of its part from ``start_s``) and the verdict."""

    windows: int
    start_s: float
    end_s: float
    edges_s: tuple
    requests: tuple
    references: tuple
    new_block_share: tuple         # first-ever references of a block / references, per window
    request_rate: tuple            # requests/s per window
    window_hit_ratio: tuple        # an infinite cache emptied at the window's start: 1 - distinct / references
    infinite_hit_ratio: float      # 1 - first-ever references / references over the whole span tested
    trends: tuple                  # Trend per series
    stationary: bool
    test: str = TEST

    @property
    def verdict(self) -> str:
        if self.stationary:
            return "stationary"
        return "not stationary: " + "; ".join(
            f"{t.series} {t.values[0]:.3g} -> {t.values[-1]:.3g}" + (" from the second window" if t.first_window else "")
            + f" (Sen change {t.change:+.3g}, p={t.p:.2g})" for t in self.trends if t.trends)

    @property
    def steady_ceiling(self) -> float:
        """The highest hit ratio a steady-state figure drawn from this span may claim: an infinite cache's.

        Stationary: 1 - the median window's new-block share (the median leaves out the cold first window).
        Not stationary: no window stands for the others, so the whole span's infinite-cache hit ratio, the most
        any cache of this trace achieved over the span its request rate is measured on."""
        share = np.asarray(self.new_block_share, dtype=np.float64)
        share = share[np.isfinite(share)]
        if self.stationary and share.size:
            return float(1.0 - np.median(share))
        return self.infinite_hit_ratio

    def to_dict(self) -> dict:
        d = asdict(self)
        d["trends"] = [asdict(t) for t in self.trends]
        d["verdict"] = self.verdict
        d["steady_ceiling"] = self.steady_ceiling
        return d


def _trend(name: str, values: np.ndarray, first_window: int = 0) -> Trend:
    """The trend test of one series from window ``first_window`` on."""
    values = values[first_window:]
    kind, tol = SERIES[name]
    s, z, p = mann_kendall(values)
    slope = sen_slope(values)
    change = slope * (values.size - 1)
    finite = values[np.isfinite(values)]
    threshold = tol * (abs(float(np.median(finite))) if finite.size else 0.0) if kind == "relative" else tol
    return Trend(name, tuple(float(v) for v in values), s, z, p, slope, change, threshold,
                 bool(p < ALPHA and abs(change) >= threshold and threshold > 0), first_window)


def first_reference(trace) -> np.ndarray:
    """Per block reference (request order): is it the first reference ever of its key in the trace?"""
    first = np.zeros(trace.n_blocks, dtype=bool)
    if trace.n_blocks:
        _, idx = np.unique(trace.keys, return_index=True)
        first[idx] = True
    return first


def stationarity(trace, windows: int = DEFAULT_WINDOWS, start_s: float | None = None) -> Stationarity:
    """The per-window series of ``trace`` from ``start_s`` (default: its first arrival) to its last arrival,
    cut into ``windows`` equal spans of time, and the stationarity verdict (see the module's docstring).

    A block is *new* when no earlier request of the whole trace referenced it (history before ``start_s``
    counts), so the new-block share is the miss ratio of an infinite cache warmed by everything before."""
    if windows < 3:
        raise UsageError(f"--windows {windows}: a trend needs at least 3 windows", "give --windows 3 or more")
    ts = np.asarray(trace.timestamp_s, dtype=np.float64)
    if ts.size < 2 or not ts[-1] > ts[0]:
        raise UsageError(f"trace {trace.path} spans no time ({ts.size} request(s))",
                         "give a trace with requests at two or more different times")
    start = float(ts[0] if start_s is None else start_s)
    end = float(ts[-1])
    if not start < end:
        raise UsageError(f"window start {start:g} s is at or after the trace's last arrival ({end:g} s)",
                         "start earlier")
    edges = np.linspace(start, end, windows + 1)
    win = np.clip(np.searchsorted(edges, ts, side="right") - 1, 0, windows - 1)
    inside = ts >= start
    counts = trace.blocks_per_request
    bwin = np.repeat(np.where(inside, win, -1), counts)
    first = first_reference(trace)
    keep = bwin >= 0
    refs = np.bincount(bwin[keep], minlength=windows).astype(np.float64)
    new = np.bincount(bwin[keep], weights=first[keep], minlength=windows)
    # distinct keys per window: the (window, key) pairs that differ from their predecessor in sorted order
    w_in, k_in = bwin[keep], trace.keys[keep]
    order = np.lexsort((k_in, w_in))
    w_s, k_s = w_in[order], k_in[order]
    head = np.ones(w_s.size, dtype=bool)
    head[1:] = (w_s[1:] != w_s[:-1]) | (k_s[1:] != k_s[:-1])
    distinct = np.bincount(w_s[head], minlength=windows).astype(np.float64)
    reqs = _requests_per_window(trace, win, inside, windows)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(refs > 0, new / refs, np.nan)
        whr = np.where(refs > 0, 1.0 - distinct / refs, np.nan)
    rate = reqs / np.diff(edges)
    cold = start <= float(ts[0])              # the first window has no history: its share is the cold start's
    trends = (_trend("new_block_share", share, 1 if cold else 0), _trend("request_rate", rate),
              _trend("window_hit_ratio", whr))
    total = refs.sum()
    return Stationarity(windows=windows, start_s=start, end_s=end, edges_s=tuple(map(float, edges)),
                        requests=tuple(int(round(r)) for r in reqs), references=tuple(int(r) for r in refs),
                        new_block_share=tuple(map(float, share)), request_rate=tuple(map(float, rate)),
                        window_hit_ratio=tuple(map(float, whr)),
                        infinite_hit_ratio=float(1.0 - new.sum() / total) if total else 0.0,
                        trends=trends, stationary=not any(t.trends for t in trends))


def _requests_per_window(trace, win, inside, windows) -> np.ndarray:
    """Requests per window. A key-sampled trace (``gen:...,sample=F``) counts the requests that hold a sampled
    block, scaled to the whole stream's request count: its compacted form has dropped the others (their times
    are gone), so both forms read the same series; a constant scale changes neither trend test."""
    from kvbench.stream.sampling import FULL_BLOCKS, whole

    if FULL_BLOCKS not in trace.extras:
        return np.bincount(win[inside], minlength=windows).astype(np.float64)
    held = inside & (trace.blocks_per_request > 0)
    counted = np.bincount(win[held], minlength=windows).astype(np.float64)
    n_held = int(np.count_nonzero(trace.blocks_per_request > 0))
    return counted * (whole(trace)["requests"] / n_held) if n_held else counted


SUFFIX_STARTS = (0.0, 0.25, 0.5)     # the tails tried, as fractions of the span cut off: whole, last 3/4, last half


def stationary_suffix(trace, windows: int = DEFAULT_WINDOWS, starts=SUFFIX_STARTS) -> Stationarity | None:
    """The longest stationary tail of the trace among those starting at ``starts`` (fractions of its span;
    the last half is the shortest tried), each tested on ``windows`` windows of its own; None if none is."""
    ts = np.asarray(trace.timestamp_s, dtype=np.float64)
    for f in starts:
        st = stationarity(trace, windows, start_s=float(ts[0] + f * (ts[-1] - ts[0])))
        if st.stationary:
            return st
    return None


def stat_share(trace, start_s: float) -> float:
    """The share of the trace's span from ``start_s`` to its last arrival (a trace that spans time: every caller's
    has passed :func:`stationarity`, which refuses one that does not)."""
    ts = np.asarray(trace.timestamp_s, dtype=np.float64)
    return float(ts[-1] - start_s) / float(ts[-1] - ts[0])


def suffix_report(trace, st: Stationarity, after_s: float | None = None) -> dict:
    """What ``trace stats`` says of a trace's stationary tails: those tried (``SUFFIX_STARTS`` past the whole
    trace, when the whole is not stationary) and the longest that passes, with its start and the share of the
    span it covers (None when none does, or when the whole trace is stationary and nothing was cut).
    ``after_s``: only tails starting after it (a plan measured from a warm-up names none it already covers)."""
    ts = np.asarray(trace.timestamp_s, dtype=np.float64)
    tried = [f for f in SUFFIX_STARTS if f > 0.0
             and (after_s is None or float(ts[0] + f * (ts[-1] - ts[0])) > after_s)]
    if st.stationary or not tried:
        return {"tried": [], "found": None}
    found = stationary_suffix(trace, st.windows, starts=tuple(tried))
    if found is None:
        return {"tried": tried, "found": None}
    return {"tried": tried, "found": {"start_s": found.start_s, "share_of_span": stat_share(trace, found.start_s),
                                      "verdict": found.verdict,
                                      "steady_ceiling": found.steady_ceiling}}


def suffix_line(rep: dict) -> str | None:
    """The line ``trace stats`` prints for :func:`suffix_report` (None: the whole trace is stationary)."""
    if not rep["tried"]:
        return None
    if rep["found"] is None:
        return ("neither " + " nor ".join(f"its last {1 - f:.0%}" for f in rep["tried"]) + " is stationary: size on "
                "a model fitted to it (kvbench trace fit TRACE -o m.toml, then --trace gen:m.toml,duration=1h)")
    f = rep["found"]
    return (f"its last {f['share_of_span']:.0%} (from {f['start_s']:,.4g} s) is stationary (steady ceiling "
            f"{f['steady_ceiling']:.3f}): size on that window (kvbench run|plan|cluster ... --warmup "
            f"{f['start_s']:.6g}s: the requests before it warm the cache) or on a fitted model")


def plan_note(st: Stationarity, *, capped: bool, uncapped_hit: float | None = None,
              uncapped_rate: float | None = None, suffix: dict | None = None,
              measured_from: dict | None = None) -> str | None:
    """The sentence a plan states about the stationarity of the window it measured and what it did about it
    (None: the whole trace, measured, is stationary and the ceiling did not bind); ``suffix``
    (:func:`suffix_report`) names a stationary tail where one exists, with the option that sizes on it;
    ``measured_from``: the plan measured from a warm-up (``--warmup``), which the sentence names first."""
    lead = ""
    if measured_from:
        lead = (f"Sized on the requests from {measured_from['start_s']:,.4g} s (the last "
                f"{measured_from['share_of_span']:.0%} of the span; the earlier ones only warm the cache)"
                + (f", a stationary window (no trend over {st.windows} windows; kvbench trace stats)" if st.stationary else "")
                + (f", where the whole trace is not stationary" if st.stationary
                   and not measured_from["whole_trace_stationary"] else "") + ". ")
    if st.stationary and not capped:
        return lead.strip() or None
    found = (suffix or {}).get("found")
    what = "The window measured" if measured_from else "The trace"
    head = (f"{what} is not stationary ({st.verdict.split(': ', 1)[1]}; {st.windows} windows): "
            + ("as a whole it is no steady state" if found else "no part of it is a steady state")
            + ", so every steady hit ratio is capped at its infinite-cache hit ratio "
            f"{st.steady_ceiling:.3f}" if not st.stationary else
            f"Steady hit ratios are capped at the stationary {'window' if measured_from else 'trace'}'s infinite-cache "
            f"hit ratio {st.steady_ceiling:.3f}")
    if capped and uncapped_hit is not None:
        head += (f" (uncapped, the deployment would claim {uncapped_hit:.3f}"
                 + (f" at {uncapped_rate:,.3g} requests/s" if uncapped_rate else "") + ")")
    if st.stationary:
        return lead + head + "."
    window = (f"its stationary last {found['share_of_span']:.0%} (kvbench run|plan ... --warmup "
              f"{found['start_s']:.6g}s: the requests before it warm the cache)" if found
              else "a stationary window (kvbench trace stats)")
    return lead + head + ("; the capacity and DWPD answers rest on a window whose new-block share falls: size on a "
                          "stationary workload, a model fitted to it (kvbench trace fit TRACE -o m.toml, then --trace "
                          f"gen:m.toml,duration=1h) or {window}.")


def whole_trace_report(trace, figures: str, start_s: float | None = None) -> dict:
    """What a command that measures a trace without a plan's caps (``cluster``) states of its stationarity: the
    verdict and test of the span it measured (from ``start_s``, a warm-up's end, when given; history before it
    counts), a stationary tail where one exists (:func:`suffix_report`) and the sentence (``note``): a warm-up
    left out, and when the span is not stationary, that ``figures`` are its window's and what to simulate
    instead (None: a stationary trace measured whole). A trace that spans no time is untested (``stationary``
    None)."""
    ts = np.asarray(trace.timestamp_s, dtype=np.float64)
    if ts.size < 2 or not ts[-1] > ts[0]:
        return {"stationary": None, "verdict": "untested: the trace spans no time", "test": TEST, "note": None}
    st = stationarity(trace, start_s=start_s)
    out = {"stationary": st.stationary, "verdict": st.verdict, "test": st.test, "windows": st.windows,
           "note": None, "suffix": None}
    lead = (f"Measured from {start_s:,.4g} s (the last {stat_share(trace, start_s):.0%} of the span; the earlier "
            "requests only warm the caches)" if start_s is not None else "")
    if st.stationary:
        if lead:
            out["note"] = f"{lead}, a stationary window (no trend over {st.windows} windows; kvbench trace stats)."
        return out
    found = suffix_report(trace, st, after_s=start_s)["found"]
    out["suffix"] = found
    tail = (f", or its stationary last {found['share_of_span']:.0%} (from {found['start_s']:.6g} s; --warmup "
            f"{found['start_s']:.6g}s measures it)" if found else "")
    what = "The window measured" if lead else "The trace"
    out["note"] = ((f"{lead}. " if lead else "")
                   + f"{what} is not stationary ({st.verdict.split(': ', 1)[1]}; {st.windows} windows): {figures} "
                   "are that window's, not a steady state's; simulate a stationary workload instead: a model fitted "
                   f"to it (kvbench trace fit TRACE -o m.toml, then gen:m.toml,duration=1h){tail}.")
    return out
