"""kvbench.analysis.curves.residence traced by hand on six one-block requests, one per second:

    t (s)   0  1  2  3  4  5
    block   1  2  1  1  3  2

Stack distances (distinct blocks since the previous use, itself included; cold = distinct + 1 = 4):
4, 4, 2, 1, 4, 3. First touches: block 1 at 0, 2 at 1, 3 at 4; so an LRU of 1 block first evicts at t = 1 (block
2 arrives), of 2 blocks at t = 4 (block 3), and 3 blocks never evict. W(C) is the miss ratio m(C) of the
references after the fill times the mean demand: 5 references after the first arrival in the 5-s span, 1/s.
  C = 1: after t = 1, 4 references, 3 misses: r2 (d 2), r4 (cold), r5 (d 3) -> m 3/4, W 0.75/s, T 4/3 s;
         warm-up misses r0, r1; 3 >= 1 written after filling: turned over.
  C = 2: after t = 4, r5 misses -> m 1, W 1/s, T 2 s; warm-up r0, r1, r4; 1 < 2: not turned over.
Compulsory writes over the second half of the references (r3..r5): block 3 is new, 1 of 3: 1/3 x 1/s.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from kvbench.analysis.curves.residence import residence_for, steady_curve, summary
from kvbench.errors import SpecError

from tests.conftest import make_trace

BB = 1000
TIMES = [0, 1, 2, 3, 4, 5]
BLOCKS = [[1], [2], [1], [1], [3], [2]]


@pytest.fixture
def curve():
    return steady_curve(make_trace(TIMES, BLOCKS), block_bytes=BB)


def test_the_curve_traced_by_hand(curve):
    nan = math.nan
    assert curve.distances.tolist() == [4, 4, 2, 1, 4, 3]
    assert (curve.distinct, curve.references, curve.span_s, curve.block_bytes) == (3, 6, 5.0, BB)
    np.testing.assert_array_equal(curve.fill_time_s, [nan, 1.0, 4.0, nan])
    assert curve.steady_writes.tolist() == [0.0, 3.0, 1.0, 0.0]
    assert curve.steady_references.tolist() == [0.0, 4.0, 1.0, 0.0] and curve.demand_blocks_per_s == 1.0
    np.testing.assert_allclose(curve.write_blocks_per_s, [nan, 0.75, 1.0, nan])
    np.testing.assert_array_equal(curve.warmup_writes, [nan, 2.0, 3.0, nan])
    assert curve.new_blocks_per_s == pytest.approx(1 / 3)
    assert curve.filled.tolist() == [False, True, True, False]
    assert curve.turned_over.tolist() == [False, True, False, False]
    np.testing.assert_allclose(curve.residence_s, [nan, 4 / 3, 2.0, nan])
    np.testing.assert_allclose(curve.observed_residence_s, [nan, 4 / 3, nan, nan])
    assert curve.max_residence_s == pytest.approx(4 / 3) and curve.extrapolation_base() == 1
    assert curve.held_write_blocks_per_s() == pytest.approx(0.75)           # C = 1's rate, held beyond
    assert curve.capacities.tolist() == [0, 1, 2, 3]


def test_hits_per_request_at_each_capacity(curve):
    assert curve.hit_blocks_per_request(1).tolist() == [0, 0, 0, 1, 0, 0]
    assert curve.hit_blocks_per_request(2.7).tolist() == [0, 0, 1, 1, 0, 0]        # whole blocks only
    assert curve.hit_blocks_per_request(3).tolist() == [0, 0, 1, 1, 0, 1]
    assert curve.hit_blocks_per_request(10).tolist() == [0, 0, 1, 1, 0, 1]         # cold misses stay misses


def test_at_between_below_and_beyond_the_curve(curve):
    a = curve.at([1, 2, 2.5, 3, 0, 0.5, 4, 100])
    nan = math.nan
    np.testing.assert_allclose(a["write_blocks_per_s"], [0.75, 1, 1, nan, nan, nan, nan, nan])
    np.testing.assert_allclose(a["residence_s"], [4 / 3, 2, 2.5, nan, nan, nan, nan, nan])
    np.testing.assert_allclose(a["dwpd"], [64_800, 43_200, 34_560, nan, nan, nan, nan, nan])
    np.testing.assert_allclose(a["fill_time_s"], [1, 4, 4, nan, nan, nan, nan, nan])
    np.testing.assert_allclose(a["steady_window_s"], [4, 1, 1, nan, nan, nan, nan, nan])
    assert a["filled"].tolist() == [True, True, True, False, False, False, False, False]
    assert a["turned_over"].tolist() == [True, False, False, False, False, False, False, False]
    one = curve.at(1.5)                                        # a scalar gives 0-d arrays
    assert float(one["write_blocks_per_s"][()]) == 0.75 and bool(one["turned_over"][()])   # 3 >= 1.5


def test_capacity_for_residence(curve):
    assert curve.capacity_for_residence(1.0) == 1
    assert curve.capacity_for_residence(4 / 3) == 1
    assert curve.capacity_for_residence(1.34) is None          # C = 2 has 2 s but has not turned over


def test_residence_for_measured_scaled_and_extrapolated(curve):
    r = residence_for(curve, 1.0)
    assert (r["capacity_blocks"], r["capacity_bytes"], r["extrapolated"]) == (1, BB, False)
    assert r["write_bytes_per_s"] == pytest.approx(0.75 * BB) and r["residence_s"] == pytest.approx(4 / 3)
    assert r["dwpd"] == pytest.approx(64_800)
    # twice as fast, three copies: 0.5 s of wall time is 1 s of trace time: C = 1 per copy
    r = residence_for(curve, 0.5, time_scale=2.0, copies=3.0)
    assert (r["capacity_blocks"], r["capacity_bytes"]) == (3, 3 * BB)
    assert r["write_bytes_per_s"] == pytest.approx(0.75 * 2 * 3 * BB)
    assert r["residence_s"] == pytest.approx(2 / 3) and r["dwpd"] == pytest.approx(129_600)
    # 1 s of wall time is 2 s of trace time, beyond the longest turned-over residence (4/3 s): W held at
    # C = 1's 0.75 blocks/s x 2 x 3 = 4.5 blocks/s; the lower bound counts compulsory writes, 1/3 x 6 = 2
    r = residence_for(curve, 1.0, time_scale=2.0, copies=3.0)
    assert r["extrapolated"] and r["capacity_blocks"] == pytest.approx(4.5)
    assert r["capacity_bytes"] == pytest.approx(4.5 * BB) and r["capacity_bytes_lower"] == pytest.approx(2.0 * BB)
    assert r["write_bytes_per_s"] == pytest.approx(4.5 * BB) and r["residence_s"] == 1.0
    assert r["dwpd"] == pytest.approx(86_400) and "1 s" in r["basis"]           # 4/3 s of trace = 2/3 s wall
    for bad in (0.0, -1.0):
        with pytest.raises(SpecError, match="must be > 0"):
            residence_for(curve, bad)


def test_a_trace_that_never_turns_a_tier_over():
    """Two blocks, one per second: C = 1 fills at the last arrival (no window after it), nothing to extrapolate
    from."""
    c = steady_curve(make_trace([0, 1], [[1], [2]]), block_bytes=BB)
    assert not c.filled.any() and c.max_residence_s == 0.0 and c.extrapolation_base() is None
    r = residence_for(c, 60.0)
    assert r["capacity_bytes"] is None and r["extrapolated"] and r["dwpd"] == pytest.approx(1440)
    assert c.new_blocks_per_s == pytest.approx(1.0)          # the second half, r1, is new: 1 of 1, at 1/s


def test_summary_and_bad_inputs(curve):
    s = summary(curve)
    assert (s["distinct_blocks"], s["references"], s["span_s"]) == (3, 6, 5.0)
    assert s["max_residence_s"] == pytest.approx(4 / 3) and s["new_block_bytes_per_s"] == pytest.approx(BB / 3)
    assert s["demand_bytes_per_s"] == pytest.approx(1.0 * BB) and "m(C) x demand" in s["model"]
    one_instant = steady_curve(make_trace([5, 5, 5], [[1], [2], [1]]), block_bytes=BB)
    assert summary(one_instant)["demand_bytes_per_s"] is None
    with pytest.raises(SpecError, match="block size"):
        steady_curve(make_trace(TIMES, BLOCKS), block_bytes=0)
    with pytest.raises(SpecError, match="no block references"):
        steady_curve(make_trace([0, 1], [[], []]), block_bytes=BB)


def test_residence_reached_within_float_noise_only(curve):
    """C = 1 shows 4/3 s: asked for 4/3 s plus 0.5e-12 of itself (float noise) it is reached; 1.5e-12 above, not."""
    assert curve.capacity_for_residence(4 / 3 * (1 + 0.5e-12)) == 1
    assert curve.capacity_for_residence(4 / 3 / (1 - 1.5e-12)) is None


def test_two_distinct_blocks():
    """[1] [2] [1] at 0, 1, 2 s: C = 1 first evicts at t = 1, then misses r2 (distance 2): 1 block in 1 s."""
    c = steady_curve(make_trace([0, 1, 2], [[1], [2], [1]]), block_bytes=BB)
    assert c.distinct == 2 and c.steady_writes.tolist() == [0.0, 1.0, 0.0]
    assert c.write_blocks_per_s[1] == 1.0 and c.turned_over.tolist() == [False, True, False]


def test_steady_hits_by_hand(curve):
    """h(C) = 1 - W(C) / demand, demand 1.2 blocks/s (6 references over the 5 s span): C = 1 -> 1 - 0.75/1.2;
    C = 2 fills at t = 4 but does not turn over (1 block written in its 1-s window, 1 < 2): its projected 1/s
    is not used, W is held at the longest residence shown (C = 1's 0.75/s); so is C = 3, which never fills;
    C = 0 holds nothing. The whole-trace curve at C = 3 would say 3/6 hits (the cold start counted as misses)."""
    from kvbench.analysis.curves.residence import SteadyHits

    hits = SteadyHits(curve, demand_blocks_per_s=6 / 5)
    np.testing.assert_allclose(hits.write_blocks_per_s([1, 2, 3, 50]), [0.75, 0.75, 0.75, 0.75])
    np.testing.assert_allclose(hits.at([0, 1, 2, 3, 50]), [0.0, 0.375, 0.375, 0.375, 0.375])
    assert hits.infinite_hit_ratio == pytest.approx(0.375)
    assert curve.at(2)["write_blocks_per_s"] == 1.0         # the projection is still reported
    assert SteadyHits(curve, demand_blocks_per_s=0.5).at(2) == 0.0          # writes above demand: clipped at 0
    assert SteadyHits(curve, demand_blocks_per_s=0.9).at(1) == pytest.approx(1 - 0.75 / 0.9)   # demand below 1/s


def test_steady_hits_without_a_steady_state_count_every_block_missed():
    """Two blocks, 1 then 2 then 2, 2: a 1-block tier fills at t = 1 and never misses again, so it is never
    rewritten (W = 0: no steady state, no turned-over tier to hold a rate from). The deployment then counts every
    block as missed (h = 0), the pessimistic reading, rather than a hit ratio of 1 from no evidence."""
    from kvbench.analysis.curves.residence import SteadyHits

    c = steady_curve(make_trace([0, 1, 2, 3], [[1], [2], [2], [2]]), block_bytes=BB)
    assert c.steady_writes[1] == 0 and c.extrapolation_base() is None and c.held_write_blocks_per_s() is None
    hits = SteadyHits(c, demand_blocks_per_s=1.0)
    assert hits.at([1, 2, 5]).tolist() == [0.0, 0.0, 0.0] and hits.infinite_hit_ratio == 0.0


def test_steady_hits_best_at_one_block_when_the_held_rate_is_higher():
    """t 0..12: blocks 1, 2, 2, 2, 2, 2, 3, then 1, 2, 3 twice. C = 1 fills at t = 1 and misses t = 6..12 (7 in
    11 s: W 7/11); C = 2 fills at t = 6 and misses t = 7..12 (6 in 6 s: W 1). Both turn over; residences 11/7 and
    2 s, so the held rate is C = 2's, 1 block/s, above C = 1's. Demand 13 blocks / 12 s. The best steady hit ratio
    is C = 1's, 1 - (7/11) / (13/12), not the held one's."""
    from kvbench.analysis.curves.residence import SteadyHits

    c = steady_curve(make_trace(list(range(13)), [[b] for b in (1, 2, 2, 2, 2, 2, 3, 1, 2, 3, 1, 2, 3)]),
                     block_bytes=BB)
    np.testing.assert_allclose(c.write_blocks_per_s[1:3], [7 / 11, 1.0])
    assert c.extrapolation_base() == 2 and c.held_write_blocks_per_s() == pytest.approx(1.0)
    hits = SteadyHits(c, demand_blocks_per_s=13 / 12)
    np.testing.assert_allclose(hits.at([1, 2, 3]), [1 - (7 / 11) / (13 / 12), 1 - 12 / 13, 1 - 12 / 13])
    assert hits.infinite_hit_ratio == pytest.approx(1 - (7 / 11) / (13 / 12))


def test_the_same_trace_starting_at_100_s():
    """The six requests at t = 100..105: every figure is relative to the first arrival (span 5 s, fills at 1 s
    and 4 s, compulsory writes over the second half, 1 of 3 references), and a retention of 2 s beyond the
    trace's 4/3 s holds C = 1's 0.75 blocks/s: 1.5 blocks, at least 1/3 x 2 blocks of never-seen ones."""
    late = steady_curve(make_trace([t + 100 for t in TIMES], BLOCKS), block_bytes=BB)
    assert late.span_s == 5.0 and late.new_blocks_per_s == pytest.approx(1 / 3)
    np.testing.assert_allclose(late.fill_time_s[1:3], [1.0, 4.0])
    r = residence_for(late, 2.0)
    assert r["extrapolated"] and r["capacity_bytes"] == pytest.approx(1.5 * BB)
    assert r["capacity_bytes_lower"] == pytest.approx(2 / 3 * BB)


def test_compulsory_writes_count_first_touches_in_the_second_half_of_the_references():
    """t 0, 1, 2, 3 with blocks 1, 2, 1, 3: the second half of the references is r2, r3, of which block 3 is new:
    1 of 2, at the mean demand of 3 references in 3 s, 0.5 blocks/s."""
    c = steady_curve(make_trace([0, 1, 2, 3], [[1], [2], [1], [3]]), block_bytes=BB)
    assert c.new_blocks_per_s == 0.5
    # an odd count: of 3 references the second half is the last 2 (3 - 3 // 2), both new, at 1/s
    assert steady_curve(make_trace([0, 1, 2], [[1], [2], [3]]), block_bytes=BB).new_blocks_per_s == 1.0


def test_a_trace_at_one_instant_has_no_compulsory_write_rate():
    """Every request at t = 5: the second half has no length, so no rate (0, not a division by zero)."""
    c = steady_curve(make_trace([5, 5, 5], [[1], [2], [1]]), block_bytes=BB)
    assert c.span_s == 0.0 and c.new_blocks_per_s == 0.0


def test_answers_hold_the_write_rate_where_a_tier_does_not_turn_over(curve):
    """C = 2 fills at t = 4 and writes 1 block in its 1-s window (its projection: 1 block/s, T 2 s), fewer than
    its 2 blocks: the window is shorter than the residence it would show. The plan's answer there is the held
    rate (C = 1's 0.75 blocks/s: T = 2 / 0.75 s), flagged, with the projection named; C = 1 is measured; C = 3
    never fills. Twice the time scale doubles every rate, two copies double the capacity per block."""
    from kvbench.analysis.plan import _Scale, steady_at

    np.testing.assert_allclose(curve.answer_write_blocks_per_s([0.5, 1, 1.9, 2, 3, 80]),
                               [np.nan, 0.75, 0.75, 0.75, 0.75, 0.75])
    sc = _Scale(time_scale=1.0, copies=1.0, block_bytes=BB)
    one, two, three = (steady_at(curve, c * BB, sc) for c in (1, 2, 3))
    assert (one["state"], one["write_bytes_per_s"], one["residence_s"]) == ("measured", 750.0, 4 / 3)
    assert (two["state"], two["write_bytes_per_s"]) == ("extrapolated", 750.0)
    assert two["residence_s"] == pytest.approx(2 / 0.75) and two["dwpd"] == pytest.approx(86400 * 0.75 / 2)
    assert "fills at 4 s but does not turn over" in two["basis"] and "(1e-06 GB/s)" in two["basis"]
    assert (three["state"], three["write_bytes_per_s"]) == ("extrapolated", 750.0)
    assert "never fills" in three["basis"]
    fast = steady_at(curve, 2 * 2 * BB, _Scale(time_scale=2.0, copies=2.0, block_bytes=BB))
    assert fast["write_bytes_per_s"] == 2 * 2 * 750.0 and "fills at 2 s" in fast["basis"]
    assert "(4e-06 GB/s)" in fast["basis"]                  # its window's rate, scaled the same way


def test_nothing_turned_over_leaves_no_steady_answer():
    """[1] [2] at 0, 1 s: C = 1 fills at the last arrival (no window after it) and C = 2 never fills: no tier
    turns over, so there is no rate to hold and no steady answer."""
    from kvbench.analysis.plan import _Scale, steady_at

    c = steady_curve(make_trace([0, 1], [[1], [2]]), block_bytes=BB)
    assert not c.turned_over.any()
    assert np.isnan(c.answer_write_blocks_per_s([1, 2])).all()
    st = steady_at(c, BB, _Scale(time_scale=1.0, copies=1.0, block_bytes=BB))
    assert st["state"] == "unknown" and st["write_bytes_per_s"] is None


def test_where_in_the_day_the_load_falls_does_not_change_w():
    """The six requests again, over the same 5-s span, but four in the first 0.6 s and two at the end: LRU sees the
    same order, so every window has the same references and misses, and W(C) = m(C) x 1/s is the even trace's
    (0.75 and 1 blocks/s). The window's own rate would say C = 1: 3 misses in 4.8 s = 0.625/s, C = 2: 1 in 0.1 s =
    10/s: a larger tier written 16 x faster, because it filled in the busy part."""
    warped = steady_curve(make_trace([0, 0.2, 0.4, 0.6, 4.9, 5], BLOCKS), block_bytes=BB)
    np.testing.assert_allclose(warped.fill_time_s[1:3], [0.2, 4.9])
    np.testing.assert_allclose(warped.write_blocks_per_s, [np.nan, 0.75, 1.0, np.nan])


def test_a_monotone_change_of_clock_keeps_every_w():
    """Any trace, any increasing re-timing with the same first and last arrival: the same W at every capacity
    (the miss ratios depend on the order alone, the mean demand on the count and the span)."""
    rng = np.random.default_rng(7)
    n = 400
    blocks = [list(rng.zipf(1.3, size=rng.integers(1, 5)) % 60) for _ in range(n)]
    even = np.arange(n, dtype=np.float64)
    bursty = np.sort(rng.uniform(0, n - 1, n)) + np.arange(n) * 1e-6        # strictly increasing
    bursty[0], bursty[-1] = 0.0, n - 1.0
    a = steady_curve(make_trace(even.tolist(), blocks), block_bytes=BB)
    b = steady_curve(make_trace(bursty.tolist(), blocks), block_bytes=BB)
    assert a.filled.sum() > 10
    np.testing.assert_allclose(b.write_blocks_per_s, a.write_blocks_per_s, rtol=1e-12)
    assert b.turned_over.tolist() == a.turned_over.tolist()
    assert b.new_blocks_per_s == pytest.approx(a.new_blocks_per_s, rel=1e-12) and a.new_blocks_per_s > 0


def test_the_six_requests_ten_times_faster():
    """t = 0, 0.1, ..., 0.5 s (a span under a second): the same misses per reference at ten times the demand
    (10 blocks/s), so W = 7.5 and 10 blocks/s, residence 2/15 and 0.2 s."""
    fast = steady_curve(make_trace([t / 10 for t in TIMES], BLOCKS), block_bytes=BB)
    assert fast.demand_blocks_per_s == pytest.approx(10.0)
    assert fast.new_blocks_per_s == pytest.approx(10 / 3)          # 1 new of the last 3 references, at 10/s
    np.testing.assert_allclose(fast.write_blocks_per_s, [np.nan, 7.5, 10.0, np.nan])
    np.testing.assert_allclose(fast.residence_s[1:3], [2 / 15, 0.2])


def test_demand_basis_by_hand():
    """References in requests after the first arrival, and the span to the last request (in order) holding a
    block: t 2, 0, 5, 9 with 3, 1, 0, 2 blocks -> 3 + 2 after t = 0, span 9 s; the trailing empty request at 12 s
    ends nothing. Given t0 = -1 the first request counts too. No block at all: (0, 0), no rate."""
    from kvbench.analysis.curves.residence import demand_basis, mean_demand

    assert demand_basis([2, 0, 5, 9, 12], [3, 1, 0, 2, 0]) == (5, 9.0)
    assert demand_basis([2, 0, 5, 9, 12], [3, 1, 0, 2, 0], t0=-1.0) == (6, 10.0)
    assert mean_demand([2, 0, 5, 9, 12], [3, 1, 0, 2, 0]) == pytest.approx(5 / 9)
    assert demand_basis([1, 2], [0, 0]) == (0, 0.0) and math.isnan(mean_demand([1, 2], [0, 0]))
    assert demand_basis([], []) == (0, 0.0)
    assert math.isnan(mean_demand([3, 3], [1, 1]))                  # one instant: no span


def test_a_tier_that_writes_nothing_after_its_fill_shows_no_residence():
    """Blocks 1 2 3 3 3 3, one a second: a 2-block tier first evicts at t = 2 (block 3 arrives) and then only
    re-touches block 3: W(2) = 0 writes/s. Nothing is written after the fill, so nothing turned over and no
    residence or DWPD is shown (not an infinite residence: the window saw no turnover at all)."""
    c = steady_curve(make_trace([0, 1, 2, 3, 4, 5], [[1], [2], [3], [3], [3], [3]]), block_bytes=BB)
    a = c.at(2)
    assert float(a["write_blocks_per_s"]) == 0.0 and not a["filled"] and not a["turned_over"]
    assert math.isnan(float(a["residence_s"])) and math.isnan(float(a["dwpd"]))
    assert c.filled.tolist()[2] is False


def test_a_warm_up_opens_every_window_at_its_end_and_sets_the_demand_at_its_requests():
    """The six requests at t = 0, 10, 12, 13, 15, 16 (a slow start), the first three a warm-up (from_request 3).
    C = 1 fills at r1 (t = 10); its window opens at r3 (the later of r2 and the warm-up's end): r3 hits (d 1),
    r4 (cold) and r5 (d 3) miss: m 2/3 over 3 references. The demand is the window's: 3 references arriving
    after r2 (t = 12) over 16 - 12 s = 0.75/s (from r1's time it would be 4 / 6 s, from r4's 1 / 1 s, the whole
    trace's 5 / 16 s), so W(1) = 2/3 x 0.75 per s. C = 2 fills at r4 (t = 15, after the warm-up): r5 misses,
    W(2) = 0.75/s. Warm-up misses at C = 1: all 5 of its misses less the window's 2. Compulsory: the second half
    of the window's references (r4, r5): block 3 new, 1/2 x 0.75/s."""
    tr = make_trace([0.0, 10.0, 12.0, 13.0, 15.0, 16.0], [[1], [2], [1], [1], [3], [2]])
    c = steady_curve(tr, block_bytes=1, from_request=3)
    assert c.demand_blocks_per_s == pytest.approx(0.75)
    assert c.write_blocks_per_s[1] == pytest.approx(2 / 3 * 0.75) and c.write_blocks_per_s[2] == pytest.approx(0.75)
    assert list(c.steady_references[1:3]) == [3, 1] and list(c.steady_writes[1:3]) == [2, 1]
    assert c.warmup_writes[1] == 3
    assert c.fill_time_s[1] == 10.0 and c.fill_time_s[2] == 15.0
    assert c.new_blocks_per_s == pytest.approx(0.5 * 0.75)
    cold = steady_curve(tr, block_bytes=1)        # no warm-up: the window after r1, the whole trace's demand
    assert cold.demand_blocks_per_s == pytest.approx(5 / 16)
    assert cold.write_blocks_per_s[1] == pytest.approx(3 / 4 * 5 / 16)


def test_a_warm_up_of_one_request_and_one_that_leaves_no_reference():
    """Five requests one a second, blocks 1 2 1 3 2, the first a warm-up: the window holds references 1..4, its
    second half r3, r4 (block 3 new: 1 of 2) at the demand of the 4 references after t = 0 over 4 s, 1/s: 0.5
    (counting from reference 0 the half would be r2..r4, 1 of 3). A warm-up that leaves only requests with no
    block measures no compulsory writes (and does not divide by the empty half)."""
    c = steady_curve(make_trace(None, [[1], [2], [1], [3], [2]]), block_bytes=1, from_request=1)
    assert c.demand_blocks_per_s == pytest.approx(1.0) and c.new_blocks_per_s == pytest.approx(0.5)
    assert steady_curve(make_trace(None, [[1], [2], [1], [3], [2]]), block_bytes=1).new_blocks_per_s == \
        pytest.approx(1 / 3)      # no warm-up: the second half is r2..r4 (floor(5 / 2) = 2 on)
    empty = steady_curve(make_trace(None, [[1], [2], []]), block_bytes=1, from_request=2)
    assert empty.new_blocks_per_s == 0.0
