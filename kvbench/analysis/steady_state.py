"""Steady-state detection by the SNIA Solid State Storage PTS rule.

A drive is in steady state when, over a measurement window of ``window`` consecutive rounds (5 in the PTS),
the tracked variable (e.g. IOPS of each 4 KiB random-write round)

- has a data excursion ``max - min`` no larger than ``max_range`` (20%) of the window's mean, and
- has a best-fit (least-squares) line whose excursion across the window ``|slope| * (window - 1)`` is no larger
  than ``max_excursion`` (10%) of the window's mean.

The earliest window meeting both rules is the steady-state window. All windows are evaluated at once with
numpy so a long preconditioning history costs nothing.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from kvbench.errors import UsageError

WINDOW = 5
MAX_RANGE = 0.20
MAX_EXCURSION = 0.10


@dataclass(frozen=True)
class WindowStats:
    """The PTS statistics of every window of consecutive rounds (arrays indexed by the window's first round)."""

    mean: np.ndarray
    range_frac: np.ndarray       # (max - min) / mean
    excursion_frac: np.ndarray   # |slope| * (window - 1) / mean
    slope: np.ndarray            # best-fit slope per round


@dataclass(frozen=True)
class SteadyState:
    """The verdict for one series: whether and where steady state was reached, with the window's numbers."""

    reached: bool
    rounds: int                  # rounds in the series
    window: int
    first_round: int | None      # first round (0-based) of the steady-state window (or of the last window)
    last_round: int | None
    mean: float | None
    range_frac: float | None
    excursion_frac: float | None
    slope: float | None
    max_range: float = MAX_RANGE
    max_excursion: float = MAX_EXCURSION

    def to_dict(self) -> dict:
        return asdict(self)

    def describe(self) -> str:
        """One line for progress displays and reports."""
        if self.first_round is None:
            return f"steady state: not assessed ({self.rounds} of {self.window} rounds needed)"
        what = "reached" if self.reached else "not reached"
        return (f"steady state {what}: rounds {self.first_round + 1}-{self.last_round + 1}, mean {self.mean:.4g}, "
                f"range {100 * self.range_frac:.1f}% (<= {100 * self.max_range:.0f}%), "
                f"slope excursion {100 * self.excursion_frac:.1f}% (<= {100 * self.max_excursion:.0f}%)")


def window_stats(values, window: int = WINDOW) -> WindowStats:
    """PTS statistics for each run of ``window`` consecutive values (empty arrays if the series is shorter)."""
    y = np.asarray(values, dtype=np.float64)
    if y.ndim != 1:
        raise UsageError("steady-state series must be one-dimensional", "pass one value per round")
    if window < 2:
        raise UsageError(f"steady-state window must be >= 2 rounds, got {window}", "use the PTS window of 5")
    if y.size < window:
        empty = np.empty(0)
        return WindowStats(empty, empty, empty, empty)
    w = np.lib.stride_tricks.sliding_window_view(y, window)
    mean = w.mean(axis=1)
    rng = w.max(axis=1) - w.min(axis=1)
    x = np.arange(window, dtype=np.float64)
    xc = x - x.mean()
    slope = (w - mean[:, None]) @ xc / (xc @ xc)
    with np.errstate(divide="ignore", invalid="ignore"):
        ok_mean = mean > 0
        range_frac = np.where(ok_mean, rng / np.where(ok_mean, mean, 1.0), np.inf)
        excursion_frac = np.where(ok_mean, np.abs(slope) * (window - 1) / np.where(ok_mean, mean, 1.0), np.inf)
    bad = ~np.isfinite(w).all(axis=1)
    range_frac[bad] = np.inf
    excursion_frac[bad] = np.inf
    return WindowStats(mean, range_frac, excursion_frac, slope)


def detect(values, window: int = WINDOW, max_range: float = MAX_RANGE,
           max_excursion: float = MAX_EXCURSION) -> SteadyState:
    """The earliest PTS steady-state window of ``values``; when none, the last window's numbers."""
    y = np.asarray(values, dtype=np.float64)
    st = window_stats(y, window)
    n = int(y.size)
    if st.mean.size == 0:
        return SteadyState(False, n, window, None, None, None, None, None, None, max_range, max_excursion)
    ok = (st.range_frac <= max_range) & (st.excursion_frac <= max_excursion)
    hits = np.flatnonzero(ok)
    i = int(hits[0]) if hits.size else st.mean.size - 1

    def num(a):
        v = float(a[i])
        return v if np.isfinite(v) else None

    return SteadyState(bool(hits.size), n, window, i, i + window - 1, num(st.mean), num(st.range_frac),
                       num(st.excursion_frac), num(st.slope), max_range, max_excursion)
