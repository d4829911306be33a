"""SNIA PTS steady-state detection on synthetic series that do and do not converge."""

from __future__ import annotations

import numpy as np
import pytest

from kvbench.analysis.steady_state import detect, window_stats
from kvbench.errors import UsageError


def test_converging_series_reaches_steady_state_at_the_first_qualifying_window():
    # FOB burst decaying to a plateau (the classic random-write preconditioning shape) plus 2% noise
    rng = np.random.default_rng(1)
    rounds = np.arange(30)
    y = 20_000 + 80_000 * np.exp(-rounds / 3.0)
    y = y * (1 + rng.uniform(-0.02, 0.02, rounds.size))
    ss = detect(y)
    assert ss.reached
    # the answer by brute force over windows, straight from the rule's definition
    for start in range(rounds.size - 4):
        w = y[start:start + 5]
        m = w.mean()
        slope = np.polyfit(np.arange(5), w, 1)[0]
        if (w.max() - w.min()) <= 0.2 * m and abs(slope) * 4 <= 0.1 * m:
            break
    assert ss.first_round == start and ss.last_round == start + 4
    assert ss.range_frac <= 0.2 and ss.excursion_frac <= 0.1
    assert ss.mean == pytest.approx(y[start:start + 5].mean())
    assert "reached" in ss.describe()


def test_steady_decline_never_converges_on_slope_although_the_range_rule_passes():
    # 4% drop per round: range over 5 rounds ~16% (< 20%) but the fitted line moves ~16% (> 10%)
    y = 100_000 * 0.96 ** np.arange(25)
    ss = detect(y)
    assert not ss.reached
    assert ss.range_frac < 0.2 and ss.excursion_frac > 0.1
    assert ss.first_round == 20 and ss.last_round == 24     # the last window is reported


def test_oscillation_fails_on_range_although_the_slope_is_flat():
    y = np.tile([100.0, 70.0], 10)        # range 30/85 = 35% of the mean
    ss = detect(y)
    assert not ss.reached
    assert ss.range_frac > 0.2


def test_exact_thresholds_are_inclusive_and_hand_checked():
    # window [90, 110, 100, 90, 110]: mean 100, range 20 -> exactly 20%; slope 2/round -> excursion 8%
    y = [90.0, 110.0, 100.0, 90.0, 110.0]
    st = window_stats(y)
    assert st.range_frac[0] == pytest.approx(0.2)
    assert st.excursion_frac[0] == pytest.approx(0.08)
    assert detect(y).reached
    assert not detect(y, max_range=0.19).reached


def test_too_few_rounds_and_bad_values():
    ss = detect([1.0, 2.0, 3.0])
    assert not ss.reached and ss.first_round is None and "not assessed" in ss.describe()
    assert not detect([0.0] * 6).reached                    # zero mean: relative rules cannot hold
    assert not detect([100, 100, np.nan, 100, 100]).reached
    with pytest.raises(UsageError):
        detect([1.0] * 10, window=1)
