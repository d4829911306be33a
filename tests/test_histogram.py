"""Log-linear histogram: percentiles within the stated relative error of exact ones, exact merging."""

import numpy as np
import pytest

from kvbench.metrics.histogram import (N_BUCKETS, PERCENTILES, RELATIVE_ERROR, LatencyHistogram, bucket_bounds,
                                       bucket_index)


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
