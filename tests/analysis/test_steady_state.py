"""SNIA PTS steady-state detection on synthetic series that do and do not converge."""

from __future__ import annotations

import numpy as np
import pytest

from kvbench.analysis.steady_state import detect, window_stats
from kvbench.errors import UsageError
from kvbench.analysis.steady_state import MAX_EXCURSION
from kvbench.analysis.steady_state import MAX_RANGE
from kvbench.analysis.steady_state import WINDOW


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


# --- The SNIA PTS steady-state rule at its boundaries, on series made by hand: a 5-round window, a data excursion
# of at most 20% of the window's mean, a least-squares line moving at most 10% of it across the window's 4 steps.
# Every number below is worked out in the comments (values chosen so the arithmetic is exact in binary).
# range: [90, 110, 100, 100, 100] has mean 100 and max - min 20 (20%); the least-squares slope over x = -2..2 is
# sum(x * (y - 100)) / sum(x^2) = (20 - 10) / 10 = 1 per round, so the line moves 4 (4%): only the range is at stake
AT_RANGE = [90.0, 110.0, 100.0, 100.0, 100.0]


# [89.5, 110.5, 100, 100, 100]: mean 100, range 21 (21%); slope (21 - 10.5) / 10 = 1.05, excursion 4.2%
OVER_RANGE = [89.5, 110.5, 100.0, 100.0, 100.0]


# slope: the line 95, 97.5, 100, 102.5, 105 rises 2.5 a round, 10 across the window's 4 steps: 10% of the mean 100
# (its range is 10 too, well inside 20%); rising 2.625 a round it moves 10.5 (10.5%) and fails on the slope alone
AT_SLOPE = [95.0, 97.5, 100.0, 102.5, 105.0]


OVER_SLOPE = [94.75, 97.375, 100.0, 102.625, 105.25]


def test_the_pts_constants():
    assert (WINDOW, MAX_RANGE, MAX_EXCURSION) == (5, 0.20, 0.10)


def test_a_range_of_exactly_20_percent_passes_and_21_fails():
    st = window_stats(AT_RANGE)
    assert (st.mean[0], st.range_frac[0], st.slope[0], st.excursion_frac[0]) == (100.0, 0.2, 1.0, 0.04)
    assert detect(AT_RANGE).reached
    over = detect(OVER_RANGE)
    assert not over.reached
    assert over.range_frac == pytest.approx(0.21, abs=1e-12) and over.excursion_frac == pytest.approx(0.042)


def test_a_line_moving_exactly_10_percent_across_the_window_passes_and_10_5_fails():
    st = window_stats(AT_SLOPE)
    assert (st.mean[0], st.slope[0], st.excursion_frac[0], st.range_frac[0]) == (100.0, 2.5, 0.1, 0.1)
    assert detect(AT_SLOPE).reached
    over = detect(OVER_SLOPE)
    assert not over.reached
    assert over.excursion_frac == pytest.approx(0.105, abs=1e-12) and over.range_frac == pytest.approx(0.105)
    # falling just as fast is the same excursion: the rule takes |slope|
    down = detect(OVER_SLOPE[::-1])
    assert not down.reached and down.slope == pytest.approx(-2.625) and down.excursion_frac == pytest.approx(0.105)
    assert detect(AT_SLOPE[::-1]).reached


def test_the_window_is_five_rounds_and_the_earliest_qualifying_one_wins():
    # one outlier at round 4 spoils every 5-round window holding it (range 50 of a mean of 110: 45%); the first
    # clean 5 rounds are 5-9. (A 4-round window would pass at rounds 0-3; a 6-round one never fits after it.)
    y = [100.0, 100.0, 100.0, 100.0, 150.0, 100.0, 100.0, 100.0, 100.0, 100.0]
    ss = detect(y)
    assert ss.reached and (ss.first_round, ss.last_round) == (5, 9)
    assert (ss.mean, ss.range_frac, ss.excursion_frac, ss.slope) == (100.0, 0.0, 0.0, 0.0)
    st = window_stats(y)
    assert len(st.mean) == 6                                     # windows starting at rounds 0..5
    assert list(st.mean) == [110.0] * 5 + [100.0]
    # two clean windows: the earlier is reported, with its own mean (not the series')
    y2 = [50.0, 100.0, 100.0, 100.0, 100.0, 100.0, 104.0, 104.0, 104.0, 104.0, 104.0]
    ss2 = detect(y2)
    assert (ss2.first_round, ss2.last_round, ss2.mean) == (1, 5, 100.0)


def test_both_rules_at_their_limits_together_pass_and_either_over_fails():
    # [90, 105, 100, 95, 110]: mean 100, range 20 (20%); slope (20 - 5 + 0 - 5 + 20) / 10 = 3 -> 12% (over)
    y = [90.0, 105.0, 100.0, 95.0, 110.0]
    st = window_stats(y)
    assert (st.range_frac[0], st.slope[0], st.excursion_frac[0]) == (0.2, 3.0, 0.12)
    assert not detect(y).reached
    assert detect(y, max_excursion=0.12).reached                 # the limits are inclusive
    assert not detect(y, max_range=0.19, max_excursion=0.12).reached


def test_a_window_that_fails_is_reported_as_the_last_one_with_its_numbers():
    y = [100.0, 150.0, 100.0, 150.0, 100.0, 150.0]              # range 50 of means 120 and 130
    ss = detect(y)
    assert not ss.reached and (ss.first_round, ss.last_round) == (1, 5)
    assert ss.mean == 130.0 and ss.range_frac == pytest.approx(50 / 130)
    assert "not reached: rounds 2-6" in ss.describe()


def test_a_two_round_window_is_the_shortest_allowed():
    # [100, 110]: mean 105, range 10 (9.52%); slope 10 a round over the window's one step: 10 / 105 (9.52%)
    st = window_stats([100.0, 110.0], window=2)
    assert (st.mean[0], st.slope[0]) == (105.0, 10.0)
    assert st.range_frac[0] == pytest.approx(10 / 105) and st.excursion_frac[0] == pytest.approx(10 / 105)
    assert detect([100.0, 110.0], window=2).reached
    with pytest.raises(UsageError, match="window must be >= 2 rounds, got 1"):
        window_stats([100.0, 110.0], window=1)


def test_a_mean_below_one_is_judged_like_any_other():
    # 0.5 GB/s rounds: the rule is relative, units and scale do not matter (range 0.0625: 12.5% of 0.5)
    y = [0.46875, 0.53125, 0.5, 0.5, 0.5]
    ss = detect(y)
    assert ss.reached and (ss.mean, ss.range_frac) == (0.5, 0.125)
    assert detect([x * 1e6 for x in y]).reached
