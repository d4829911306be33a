"""Capacity from hit-ratio curves: capacity-for-target against an exact (brute-force LRU) curve, knee, sizing."""

from __future__ import annotations

from collections import OrderedDict
from types import SimpleNamespace

import numpy as np
import pytest

from kvbench.analysis.curves.capacity import HitCurve, capacity_for_target, knee, pays_until, target_hit
from kvbench.errors import SpecError


def lru_hits(stream, capacity: int) -> int:
    """Brute-force LRU: hits of a reference stream at one capacity."""
    cache, hits = OrderedDict(), 0
    for k in stream:
        if k in cache:
            hits += 1
            cache.move_to_end(k)
        else:
            cache[k] = None
            if len(cache) > capacity:
                cache.popitem(last=False)
    return hits


def stack_profile(stream):
    """Exact stack-distance profile (steps, cum_hits, references) by brute force."""
    stack, dists = [], []
    for k in stream:
        if k in stack:
            i = stack.index(k)
            dists.append(i + 1)
            stack.pop(i)
        stack.insert(0, k)
    hist = np.bincount(np.asarray(dists, dtype=np.int64)) if dists else np.zeros(1, np.int64)
    steps = np.flatnonzero(hist)
    cum = np.cumsum(hist[steps]).astype(float)
    refs = len(stream)
    return SimpleNamespace(steps=steps.astype(float), cum_hits=cum, references=refs,
                           infinite_hit_ratio=(cum[-1] / refs if cum.size else 0.0))


@pytest.fixture(scope="module")
def zipf_stream():
    rng = np.random.default_rng(3)
    return (rng.zipf(1.3, 6000) % 800).tolist()


def test_capacity_for_target_is_exact_against_brute_force_lru(zipf_stream):
    prof = stack_profile(zipf_stream)
    curve = HitCurve.from_profile(prof, block_bytes=1000)
    refs = len(zipf_stream)
    for t in (0.5, 0.9, 0.95, 0.99, 1.0):
        c = capacity_for_target(curve, t)
        want = t * curve.infinite_hit_ratio
        assert lru_hits(zipf_stream, int(c)) / refs >= want - 1e-12          # reaches the target ...
        if c > 1:
            assert lru_hits(zipf_stream, int(c) - 1) / refs < want - 1e-12   # ... and one block less does not
        assert curve.at(c) == pytest.approx(lru_hits(zipf_stream, int(c)) / refs)
    # absolute targets: unreachable above the infinite-cache ratio
    assert capacity_for_target(curve, min(1.0, curve.infinite_hit_ratio + 0.01), relative=False) is None
    assert target_hit(curve, 0.5, relative=False) == 0.5


def test_curve_from_arrays_and_step_lookup():
    c = HitCurve.from_arrays([10, 100, 1000], [0.2, 0.5, 0.6], block_bytes=4096)
    assert c.at([5, 10, 99, 100, 5000]).tolist() == [0.0, 0.2, 0.2, 0.5, 0.6]
    assert capacity_for_target(c, 0.5 / 0.6) == 100
    with pytest.raises(SpecError):
        HitCurve.from_arrays([10, 5], [0.1, 0.2], block_bytes=1)
    with pytest.raises(SpecError):
        HitCurve.from_arrays([1, 2], [0.3, 0.2], block_bytes=1)
    with pytest.raises(SpecError):
        capacity_for_target(c, 1.5)


def test_knee_of_a_known_curve():
    # h(c) = 1 - exp(-c / 1000) up to c = 10000: the normalised gap h/h(top) - c/top peaks where
    # h'(c) / h(top) = 1/top, i.e. c = 1000 * ln(top / (1000 * h(top)))
    caps = np.arange(1, 10001)
    h = 1 - np.exp(-caps / 1000)
    curve = HitCurve.from_arrays(caps, h, block_bytes=1)
    expected = 1000 * np.log(10000 / (1000 * h[-1]))
    assert knee(curve) == pytest.approx(expected, rel=0.01)


def test_pays_until_matches_marginal_value():
    # linear curve: each block adds 1e-4 hit ratio up to 1000 blocks; 1e6 refs/day, $0.01 per hit ->
    # each block is worth $1/day: it pays when it costs less than $1/day, never when it costs more
    caps = np.arange(1, 1001)
    curve = HitCurve.from_arrays(caps, caps * 1e-4, block_bytes=1)
    assert pays_until(curve, value_per_hit_per_day=0.01, refs_per_day=1e6, cost_per_block_per_day=0.5) == 1000
    assert pays_until(curve, value_per_hit_per_day=0.01, refs_per_day=1e6, cost_per_block_per_day=2.0) == 0


def test_capacity_for_target_on_the_real_mooncake_trace(shared_dir):
    from kvbench.analysis.curves.profile import exact_profile, reference_stream
    from kvbench.stream.traces import read_trace

    trace = read_trace(shared_dir / "traces" / "mooncake-fast25" / "synthetic_trace.jsonl")
    curve = HitCurve.from_profile(exact_profile(trace), block_bytes=1)
    keys, _ = reference_stream(trace)
    stream = keys.tolist()
    c = capacity_for_target(curve, 0.95)
    want = 0.95 * curve.infinite_hit_ratio
    assert lru_hits(stream, int(c)) / len(stream) >= want - 1e-12 > lru_hits(stream, int(c) - 1) / len(stream)


# --- knee and pays_until by hand (mutation run survivors) ------------------------------------------------------
def _curve(caps, hits):
    from kvbench.analysis.curves.capacity import HitCurve

    return HitCurve.from_arrays(caps, hits, block_bytes=1)


def test_knee_by_hand():
    """Kneedle on normalised axes: max over the curve's steps of h(c) / h_max - c / c_full, by hand."""
    from kvbench.analysis.curves.capacity import knee

    # h/0.9 - c/100 at 1, 10, 100: 0.546, 0.789, 0 -> 10
    assert knee(_curve([1, 10, 100], [0.5, 0.8, 0.9])) == 10.0
    # the same shape a tenth as high: normalised, the same knee (unnormalised, 1 would win)
    assert knee(_curve([1, 10, 100], [0.05, 0.08, 0.09])) == 10.0
    # 0.5/0.9 - 0.01 = 0.546 beats 0.55/0.9 - 0.1 = 0.511: the knee is the first capacity
    assert knee(_curve([1, 10, 100], [0.5, 0.55, 0.9])) == 1.0
    # two capacities on a straight line: both ends score 0, the first wins
    assert knee(_curve([1, 2], [0.25, 0.5])) == 1.0
    # nothing reused: the full capacity (the first); a one-block curve: that block
    assert knee(_curve([1, 5], [0.0, 0.0])) == 1.0
    assert knee(_curve([1, 2], [0.5, 0.5])) == 1.0


def test_pays_until_by_hand():
    """Steps at 5 (+0.25) and 10 (+0.125) on a grid of every block: with 1,000 references a day at 1 a hit, the
    marginal block earns 250 and 125 a day there; a block costing c pays up to the last step earning >= c."""
    from kvbench.analysis.curves.capacity import pays_until

    c = _curve([1, 5, 10], [0.5, 0.75, 0.875])

    def pays(cost, value=1.0):
        return pays_until(c, value_per_hit_per_day=value, refs_per_day=1000.0, cost_per_block_per_day=cost)

    assert pays(100.0) == 10.0 and pays(125.0) == 10.0
    assert pays(200.0) == 5.0 and pays(250.0) == 5.0          # exactly break-even still pays
    assert pays(300.0) == 0.0
    assert pays(0.0) == 10.0 and pays(-1.0) == 10.0           # free capacity: all of it
    assert pays(0.5, value=1e-4) == 0.0                       # 0.025 and 0.0125 a day: nothing pays
    # a full capacity of one block is the answer whatever the cost; of two, only if it pays
    assert pays_until(_curve([1, 2], [0.5, 0.5]), value_per_hit_per_day=1.0, refs_per_day=1000.0,
                      cost_per_block_per_day=300.0) == 1.0
    assert pays_until(_curve([1, 2], [0.25, 0.5]), value_per_hit_per_day=1.0, refs_per_day=1000.0,
                      cost_per_block_per_day=300.0) == 0.0


def test_hit_curve_validation():
    from kvbench.analysis.curves.capacity import HitCurve
    from kvbench.errors import SpecError

    one = _curve([5], [0.3])                                   # one point is a curve
    assert one.references == 0 and one.infinite_hit_ratio == 0.3 and one.full_capacity_blocks == 5.0
    assert _curve([1, 2], [0.1, 0.2]).capacities_blocks.tolist() == [1.0, 2.0]
    for caps, hits in (([], []), ([1, 2], [0.1]), ([[1, 2]], [[0.1, 0.2]]), ([2, 1], [0.1, 0.2]),
                       ([0, 1], [0.1, 0.2]), ([1, 1], [0.1, 0.2]), ([1, 2], [0.2, 0.1]), ([1, 2], [0.1, 1.5])):
        with pytest.raises(SpecError):
            HitCurve.from_arrays(caps, hits, block_bytes=1)
    with pytest.raises(SpecError, match="block size"):
        HitCurve.from_arrays([1], [0.1], block_bytes=0)


def test_hit_curve_from_a_profile_by_hand():
    """Profiles written out (steps, cumulative hits, references) and the curves they give."""
    from types import SimpleNamespace as P

    from kvbench.analysis.curves.capacity import HitCurve

    def curve(steps, cum, refs, inf=None):
        c = HitCurve.from_profile(P(steps=np.array(steps, float), cum_hits=np.array(cum, float), references=refs,
                                    infinite_hit_ratio=inf if inf is not None else (cum[-1] / refs if cum and refs else 0.0)),
                                  block_bytes=1)
        return c.capacities_blocks.tolist(), c.hit_ratio.tolist()

    assert curve([], [], 4) == ([1.0], [0.0])                          # no reuse: 0 everywhere
    assert curve([3], [2], 4) == ([1.0, 3.0], [0.0, 0.5])             # a first step past 1 block: (1, 0) first
    assert curve([2], [2], 1) == ([1.0, 2.0], [0.0, 1.0])             # one reference is enough; over 1: clipped
    assert curve([1, 2], [1, 3], 4) == ([1.0, 2.0], [0.25, 0.75])     # a step at exactly 1 block is kept
    assert curve([0.5, 2], [1, 3], 4) == ([1.0, 2.0], [0.0, 0.75])    # below one block: dropped
    assert curve([0.5], [1], 4) == ([1.0], [0.0])
    # estimates round up (the last of a block kept), after the (1, 0) a first step past 1 block gets
    assert curve([1.2, 1.7, 2.5], [1, 2, 3], 4) == ([1.0, 2.0, 3.0], [0.0, 0.5, 0.75])
    assert curve([2, 3], [-1, 2], 4) == ([1.0, 2.0, 3.0], [0.0, 0.0, 0.5])     # SHARDS_adj below 0: clipped
    with pytest.raises(SpecError, match="no block references"):
        curve([1], [1], 0)


def test_targets_and_the_full_capacity_by_hand():
    c = _curve([1, 2, 4], [0.2, 0.4, 0.4])
    assert c.full_capacity_blocks == 2.0
    assert target_hit(c, 0.5) == pytest.approx(0.2) and target_hit(c, 0.5, relative=False) == 0.5
    with pytest.raises(SpecError):
        target_hit(c, 0.0)
    assert capacity_for_target(c, 1.0) == 2.0 and capacity_for_target(c, 0.5) == 1.0
    assert capacity_for_target(c, 0.5, relative=False) is None
    assert capacity_for_target(_curve([1, 2], [0.0, 0.5]), 1.0) == 2.0
    assert capacity_for_target(_curve([1, 2], [0.0, 0.0]), 0.5) is None           # nothing ever reused
    # a step at the second block pays when its block earns its cost (250 a day against 100)
    assert pays_until(_curve([1, 2], [0.25, 0.5]), value_per_hit_per_day=1.0, refs_per_day=1000.0,
                      cost_per_block_per_day=100.0) == 2.0
