"""Every hit-ratio curve type declares :class:`HitRatioCurve` and answers it alike, on a trace traced by hand.

Six one-block requests, one per second (tests/analysis/test_residence.py's trace):

    t (s)   0  1  2  3  4  5
    block   1  2  1  1  3  2

LRU stack distances (distinct blocks since the previous use, itself included): cold, cold, 2, 1, cold, 3. A cache
of C blocks hits the references with distance <= C: C = 1: r3; C = 2: r2, r3; C >= 3: r2, r3, r5. Hit ratio 1/6,
2/6, 3/6 (= the infinite cache's), 0 below one block.

Steady state (SteadyHits: 1 - W(C) / demand, at the curve's own demand 1 - m(C)): C = 1 first evicts at t = 1;
the requests after it, r2..r5, miss 3 of 4 (r3 hits): 1/4. C = 2 fills at t = 4 but does not turn over (1 write
< 2 blocks) and C = 3 never fills: both answer at C = 1's rate, held: 1/4.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest

from kvbench.analysis.admission import TierRun
from kvbench.analysis.curves import capacity as cap
from kvbench.analysis.curves.capacity import HitCurve
from kvbench.analysis.curves.profile import Curve, ReuseProfile, exact_profile, hit_ratio_curve
from kvbench.analysis.curves.protocol import HitRatioCurve
from kvbench.analysis.curves.residence import SteadyCurve, SteadyHits, steady_curve
from kvbench.errors import SpecError

from tests.conftest import make_trace

KEYS = [1, 2, 1, 1, 3, 2]
BY_HAND = {0.5: 0.0, 1: 1 / 6, 2: 2 / 6, 2.5: 2 / 6, 3: 3 / 6, 4: 3 / 6, 100: 3 / 6}


def lru_hits(keys, capacity: int, counted=None) -> tuple[int, int]:
    """(hits, references) of an OrderedDict LRU of ``capacity`` keys over ``keys``, counting the references
    whose index is in ``counted`` (all by default)."""
    cache: OrderedDict = OrderedDict()
    hits = refs = 0
    for i, k in enumerate(keys):
        count = counted is None or i in counted
        refs += count
        if k in cache:
            hits += count
            cache.move_to_end(k)
        else:
            cache[k] = True
            if len(cache) > capacity:
                cache.popitem(last=False)
    return hits, refs


@pytest.fixture
def trace():
    return make_trace([0, 1, 2, 3, 4, 5], [[k] for k in KEYS])


@pytest.fixture
def whole_trace_curves(trace):
    """The whole-trace LRU curve in each of its forms."""
    prof = exact_profile(trace)
    asked = hit_ratio_curve(trace, capacities=[4, 1, 3, 2])          # the user's order, not ascending
    return {"ReuseProfile": prof, "HitCurve": HitCurve.from_profile(prof, block_bytes=10), "Curve": asked,
            "HitCurve.of(Curve)": HitCurve.of(asked)}


def test_the_reference_lru_by_hand():
    assert [lru_hits(KEYS, c) for c in (1, 2, 3, 4)] == [(1, 6), (2, 6), (3, 6), (3, 6)]
    assert lru_hits(KEYS, 1, counted={2, 3, 4, 5}) == (1, 4)


def test_every_curve_type_declares_the_protocol_and_the_rest_do_not(trace, whole_trace_curves):
    steady = steady_curve(trace, block_bytes=10)
    curves = [*whole_trace_curves.values(), steady.hits()]
    assert {type(c) for c in curves} == {ReuseProfile, HitCurve, Curve, SteadyHits}
    for c in curves:
        assert isinstance(c, HitRatioCurve), type(c).__name__
    # a write-rate curve and one simulated tier are not hit-ratio curves
    assert isinstance(steady, SteadyCurve) and not isinstance(steady, HitRatioCurve)
    run = TierRun(admission="all", capacity_blocks=1, references=6, hit_blocks=1, written=5, rejected=0,
                  fill_time_s=1.0, steady_writes=3, steady_window_s=4.0)
    assert not isinstance(run, HitRatioCurve)


@pytest.mark.parametrize("form", ["ReuseProfile", "HitCurve", "Curve", "HitCurve.of(Curve)"])
def test_whole_trace_forms_give_the_hit_ratios_by_hand(whole_trace_curves, form):
    c = whole_trace_curves[form]
    caps = list(BY_HAND)
    np.testing.assert_allclose(c.at(np.array(caps)), list(BY_HAND.values()), atol=1e-12)
    for k in (1, 2, 3, 4):                                         # and the reference LRU's
        h, n = lru_hits(KEYS, k)
        assert float(c.at(np.array([k]))[0]) == pytest.approx(h / n)
    assert c.infinite_hit_ratio == pytest.approx(0.5)
    assert c.references == 6 and c.sample_rate == 1.0 and c.capacity_scale == 1.0
    listed = np.unique(np.asarray(c.capacities_blocks, dtype=np.float64))
    assert set(listed) <= {1.0, 2.0, 3.0, 4.0} and 3.0 in listed  # the curve's steps are among the capacities


def test_steady_hits_by_hand_and_from_the_reference_lru(trace):
    steady = steady_curve(trace, block_bytes=10)
    hits = steady.hits()
    assert hits.curve is steady and hits.demand_blocks_per_s == steady.demand_blocks_per_s == 1.0
    h1, n1 = lru_hits(KEYS, 1, counted={2, 3, 4, 5})                # the requests after C = 1's first eviction
    np.testing.assert_allclose(hits.at(np.array([1, 2, 3])), [h1 / n1, 0.25, 0.25])
    assert h1 / n1 == 0.25 and hits.infinite_hit_ratio == pytest.approx(0.25)
    assert hits.capacities_blocks.tolist() == [1.0, 2.0, 3.0]
    assert hits.references == 6 and hits.sample_rate == 1.0 and hits.capacity_scale == 1.0
    assert steady.hits(2.0).demand_blocks_per_s == 2.0                # another demand: the one given
    np.testing.assert_allclose(steady.hits(2.0).at(np.array([1])), [1 - 0.75 / 2])


def test_capacity_sizing_reads_any_curve(whole_trace_curves):
    for form, c in whole_trace_curves.items():
        # 100% of the infinite-cache 0.5 first at 3 blocks; 2/6 absolute at 2; 0.6 absolute never
        assert cap.capacity_for_target(c, 1.0) == 3.0, form
        assert cap.capacity_for_target(c, 2 / 6, relative=False) == 2.0, form
        assert cap.capacity_for_target(c, 0.6, relative=False) is None, form
        assert cap.target_hit(c, 0.5) == pytest.approx(0.25), form
        assert cap.knee(c) == cap.knee(whole_trace_curves["HitCurve"]), form


def test_a_curve_that_falls_is_refused_for_sizing():
    fifo_like = Curve("fifo", "simulation", "blocks", np.array([1, 2, 3]), np.array([1, 2, 3]),
                      np.array([0.3, 0.2, 0.4]), 0.5, 6, 3.0, None, None, 0.0)
    assert isinstance(fifo_like, HitRatioCurve)
    np.testing.assert_allclose(fifo_like.at(np.array([1, 2, 3, 9])), [0.3, 0.2, 0.4, 0.4])
    with pytest.raises(SpecError, match="non-decreasing"):
        cap.capacity_for_target(fifo_like, 0.5)


def test_a_key_sampled_curve_states_its_scale():
    """gen:...,sample=r: the SHARDS estimate is in the whole stream's blocks (scale 1); the plan's curve and the
    steady one are in the sample's own blocks (scale 1 / r), and say so."""
    from kvbench.analysis.plan import _profile
    from kvbench.stream.traces import read_trace

    t = read_trace("gen:chat,duration=20m,rate=2,seed=3,sample=0.25")
    prof = exact_profile(t)
    assert prof.sample_rate == 0.25 and prof.capacity_scale == 1.0
    own = _profile(t, 0.0)
    assert own.sample_rate == 0.25 and own.capacity_scale == 4.0
    assert HitCurve.from_profile(own, block_bytes=1).capacity_scale == 4.0
    hits = steady_curve(t, block_bytes=1).hits()
    assert hits.sample_rate == 0.25 and hits.capacity_scale == 4.0


def test_one_listed_capacity_and_none():
    """A curve of one point is a step from 0 to its ratio there; an empty listing is 0 everywhere; a profile
    that states no scale (any object with steps and cum_hits) is a whole stream's, every key."""
    from types import SimpleNamespace

    from kvbench.analysis.curves.protocol import step_at

    one = Curve("lru", "exact", "blocks", np.array([5]), np.array([5]), np.array([0.4]), 0.5, 6, 3.0, None, None, 0.0)
    listed = HitCurve.of(one)
    assert listed.capacities_blocks.tolist() == [5.0] and listed.hit_ratio.tolist() == [0.4]
    np.testing.assert_allclose(listed.at(np.array([4, 5, 9])), [0.0, 0.4, 0.4])
    np.testing.assert_allclose(step_at(np.array([5.0]), np.array([0.4]), [4, 5]), [0.0, 0.4])
    np.testing.assert_array_equal(step_at(np.array([]), np.array([]), [1, 3]), [0.0, 0.0])
    bare = SimpleNamespace(steps=np.array([2.0]), cum_hits=np.array([3.0]), references=6, infinite_hit_ratio=0.5)
    c = HitCurve.from_profile(bare, block_bytes=1)
    assert (c.sample_rate, c.capacity_scale) == (1.0, 1.0) and c.at(np.array([2]))[0] == 0.5


def test_a_simulated_policy_on_a_key_sample_is_in_the_samples_blocks():
    from kvbench.stream.traces import read_trace

    t = read_trace("gen:chat,duration=20m,rate=2,seed=3,sample=0.25")
    c = hit_ratio_curve(t, policy="fifo", capacities=[10, 100])
    assert (c.method, c.sample_rate, c.capacity_scale) == ("simulation", 0.25, 4.0)


def test_curves_built_from_their_fields_state_a_whole_stream():
    """A curve made from arrays or fields (no sample stated) is every key's, in whole-stream blocks; a curve
    without a block size is listed at 1 byte a block; a curve listed only below one block is 0 from one block."""
    arrays = HitCurve.from_arrays([1, 2], [0.1, 0.2], block_bytes=8)
    direct = HitCurve(np.array([1.0]), np.array([0.3]), 0.3, 8)
    fields = Curve("lru", "exact", "blocks", np.array([2]), np.array([2]), np.array([0.2]), 0.5, 6, 3.0, None, None,
                   0.0)
    for c in (arrays, direct, fields):
        assert (c.sample_rate, c.capacity_scale) == (1.0, 1.0), type(c).__name__
    assert HitCurve.of(fields).block_bytes == 1 and HitCurve.of(fields, block_bytes=64).block_bytes == 64
    below = Curve("lru", "exact", "bytes", np.array([100]), np.array([0]), np.array([0.0]), 0.5, 6, 3.0, 512, None,
                  0.0)
    listed = HitCurve.of(below)
    assert listed.capacities_blocks.tolist() == [1.0] and listed.hit_ratio.tolist() == [0.0]
    assert listed.block_bytes == 512
