"""Log-linear histogram: percentiles within the stated relative error of exact ones, exact merging."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvbench.metrics.histogram import (N_BUCKETS, PERCENTILES, RELATIVE_ERROR, LatencyHistogram, bucket_bounds,
                                       bucket_index, merged)


def exact(values, q):
    """The rank-ceil(q/100 * n) smallest value (the definition the histogram implements)."""
    s = np.sort(values)
    return s[max(1, int(np.ceil(q / 100 * len(s) - 1e-9))) - 1]


def test_buckets_cover_every_value_once():
    v = np.concatenate([np.arange(0, 1 << 16), np.random.default_rng(0).integers(0, 1 << 43, 100000)])
    lo, w = bucket_bounds(bucket_index(v))
    assert (lo <= v).all() and (v < lo + w).all()
    assert bucket_index(np.array([(1 << 44) - 1])).max() == N_BUCKETS - 1
    # width / low <= 2**-7: the stated half-width relative error
    i = np.arange(N_BUCKETS)
    lo, w = bucket_bounds(i)
    assert ((w - 1) / 2 <= RELATIVE_ERROR * np.maximum(lo, 1) + 0.5).all()


@pytest.mark.parametrize("dist", ["lognormal", "uniform", "bimodal", "small"])
def test_percentiles_within_stated_error(dist):
    rng = np.random.default_rng(42)
    v = {"lognormal": lambda: rng.lognormal(11, 1.5, 300_000),
         "uniform": lambda: rng.uniform(50_000, 200_000, 300_000),
         "bimodal": lambda: np.concatenate([rng.normal(80_000, 5_000, 290_000), rng.normal(5e6, 1e5, 10_000)]),
         "small": lambda: rng.integers(1, 300, 10_000)}[dist]()
    v = np.maximum(v, 1).astype(np.int64)
    h = LatencyHistogram()
    h.record(v)
    p = h.percentiles()
    for name, q in PERCENTILES:
        e = exact(v, q)
        assert abs(p[name] * 1e3 - e) <= RELATIVE_ERROR * e + 0.5, (name, p[name], e)
    assert p["max"] * 1e3 == v.max()
    assert p["mean"] * 1e3 == pytest.approx(v.mean(), rel=1e-12)
    assert RELATIVE_ERROR <= 0.01


def test_merge_is_exact_and_roundtrips():
    rng = np.random.default_rng(1)
    parts = [rng.lognormal(10, 1, 50_000).astype(np.int64) for _ in range(4)]
    one = LatencyHistogram()
    one.record(np.concatenate(parts))
    m = LatencyHistogram()
    for p in parts:
        h = LatencyHistogram()
        h.record(p)
        m.merge(h)
    assert (m.counts == one.counts).all() and m.count == one.count and m.total_ns == one.total_ns
    assert m.percentiles() == one.percentiles()
    back = LatencyHistogram.from_dict(m.to_dict())
    assert back.percentiles() == m.percentiles() and back.min_ns == m.min_ns


def test_empty_histogram():
    p = LatencyHistogram().percentiles()
    assert p["p99"] is None and p["max"] is None


def test_percentile_table_of_a_known_sample():
    """10,000 values: 5,000 x 1 ns, 4,000 x 2, 900 x 3, 90 x 4, 9 x 5, 1 x 6 (all below 128 ns: exact buckets).
    p50 is the 5,000th value, p90 the 9,000th, p99 the 9,900th, p99.9 the 9,990th, p99.99 the 9,999th."""
    v = np.repeat([1, 2, 3, 4, 5, 6], [5000, 4000, 900, 90, 9, 1])
    h = LatencyHistogram()
    h.record(np.random.default_rng(3).permutation(v))
    assert h.percentiles() == {"p50": 0.001, "p90": 0.002, "p99": 0.003, "p99.9": 0.004, "p99.99": 0.005,
                               "max": 0.006, "mean": 16111 / 10000 / 1e3}
    assert [h.value_at(q) for q in (0, 50, 50.01, 90, 90.01, 100)] == [1.0, 1.0, 2.0, 2.0, 3.0, 6.0]
    assert h.count == len(h) == 10000 and h.total_ns == 16111 and (h.min_ns, h.max_ns) == (1, 6)


def test_bucket_layout_by_hand():
    # below 128 ns one bucket per ns; octave [2^k, 2^(k+1)) split into 128 buckets of 2^(k-7) ns
    idx = bucket_index(np.array([0, 1, 127, 128, 129, 255, 256, 257, 258, 1 << 20, (1 << 20) + 8191,
                                 (1 << 20) + 8192, -5, 1 << 50]))
    assert idx.tolist() == [0, 1, 127, 128, 129, 255, 256, 256, 257, 1792, 1792, 1793, 0, 4863]
    lo, w = bucket_bounds(np.array([0, 127, 128, 255, 256, 257, 1792, 1793, 4863]))
    assert lo.tolist() == [0, 127, 128, 255, 256, 258, 1 << 20, (1 << 20) + 8192, (1 << 43) + 127 * (1 << 36)]
    assert w.tolist() == [1, 1, 1, 1, 2, 2, 8192, 8192, 1 << 36]
    assert N_BUCKETS == 4864 and RELATIVE_ERROR == 1 / 256


def test_large_values_report_their_bucket_midpoint_clamped_to_min_max():
    h = LatencyHistogram()
    h.record([1_000_000, 1_000_000, 1_000_000, 9_961_472])
    # 1e6 ns lies in [999,424, 1,003,520) (width 4,096): midpoint 999,424 + 4,095/2
    assert h.value_at(50) == 1_001_471.5 and h.percentiles()["p50"] == 1001.4715
    # 9,961,472 opens its bucket [9,961,472, 10,027,008): the midpoint 9,994,239.5 is clamped to the exact max
    assert h.value_at(99) == 9_961_472.0 and h.percentiles()["max"] == 9961.472
    g = LatencyHistogram()
    g.record([9_961_472, 10_000_000, 20_000_000])                  # the median's midpoint lies inside [min, max]
    assert g.value_at(50) == 9_994_239.5
    one = LatencyHistogram()
    one.record(1_000_000)                                          # clamped to the exact min (= max) too
    assert one.value_at(50) == 1_000_000.0 and one.percentiles()["mean"] == 1000.0


def test_record_buckets_merge_and_layout_check():
    v = np.array([5, 300, 70_000, 70_000], dtype=np.int64)
    a = LatencyHistogram()
    a.record_buckets(bucket_index(v), int(v.sum()), int(v.min()), int(v.max()))
    b = LatencyHistogram()
    b.record(v)
    assert (a.counts == b.counts).all() and (a.count, a.total_ns, a.min_ns, a.max_ns) == (4, 140_305, 5, 70_000)
    a.record_buckets(np.array([], dtype=np.int64), 0, 0, 0)
    a.record([])
    assert a.count == 4
    c = a.copy()
    c.record([1])
    assert a.count == 4 and c.count == 5 and c.min_ns == 1 and a.min_ns == 5
    m = merged([LatencyHistogram(), a, LatencyHistogram(), c])
    assert m.count == 9 and m.min_ns == 1 and m.max_ns == 70_000 and m.total_ns == 2 * 140_305 + 1
    assert LatencyHistogram().merge(LatencyHistogram()).count == 0 and LatencyHistogram().value_at(50) is None
    assert LatencyHistogram().mean_ns is None and a.mean_ns == 140_305 / 4
    d = a.to_dict()
    assert d["buckets"] == bucket_index(np.array([5, 300, 70_000])).tolist() and d["counts"] == [1, 1, 2]
    with pytest.raises(ValueError, match="layout"):
        LatencyHistogram.from_dict({**d, "sub_bits": 6})
    with pytest.raises(ValueError, match="layout"):
        LatencyHistogram.from_dict({**d, "max_bits": 40})
    e = LatencyHistogram().percentiles()
    assert e == {"p50": None, "p90": None, "p99": None, "p99.9": None, "p99.99": None, "max": None, "mean": None}


@given(st.lists(st.lists(st.integers(0, (1 << 45)), max_size=40), min_size=1, max_size=5))
def test_property_merge_equals_histogram_of_concatenation(parts):
    """Oracle: one histogram fed every value. Merging per-worker histograms must match it exactly, and each
    percentile must be the bucket of the exact rank-ceil(q n) order statistic."""
    whole = LatencyHistogram()
    whole.record(np.array([x for p in parts for x in p], dtype=np.int64))
    m = LatencyHistogram()
    for p in parts:
        h = LatencyHistogram()
        h.record(np.array(p, dtype=np.int64))
        m.merge(h)
    assert (m.counts == whole.counts).all() and m.percentiles() == whole.percentiles()
    assert (m.count, m.total_ns, m.min_ns, m.max_ns) == (whole.count, whole.total_ns, whole.min_ns, whole.max_ns)
    flat = np.array([x for p in parts for x in p], dtype=np.int64)
    if flat.size:
        for _, q in PERCENTILES:
            e = min(int(exact(flat, q)), (1 << 44) - 1)
            assert bucket_index(np.array([int(whole.value_at(q))])) == bucket_index(np.array([e])) or \
                whole.value_at(q) in (float(whole.min_ns), float(whole.max_ns))
