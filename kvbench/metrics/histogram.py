"""Log-linear latency histograms (HdrHistogram style), mergeable across workers.

Values are integer nanoseconds. Values below 2**SUB_BITS (128 ns) get one bucket each (exact). Above, each
power-of-two octave [2**k, 2**(k+1)) is split into 2**SUB_BITS = 128 equal buckets of width 2**(k-7); a
value is reported as its bucket's midpoint, so the relative error of any percentile is at most
1/256 = 0.39% (stated bound: RELATIVE_ERROR). Range: 0 ns to 2**44 ns (~4.9 h; larger values are clamped
into the top bucket, while max stays exact). Memory: 4,864 int64 buckets = 38 KiB dense; to_dict() stores
only non-empty buckets. count, sum (exact int), min and max are kept exactly, so mean and max are exact.
Merging adds bucket counts: merged percentiles equal those of one histogram fed all values.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

SUB_BITS = 7
SUB = 1 << SUB_BITS
MAX_BITS = 44
N_BUCKETS = SUB + (MAX_BITS - SUB_BITS) * SUB
RELATIVE_ERROR = 1.0 / (2 * SUB)
PERCENTILES = (("p50", 50.0), ("p90", 90.0), ("p99", 99.0), ("p99.9", 99.9), ("p99.99", 99.99))


def bucket_index(values_ns: np.ndarray) -> np.ndarray:
    """Bucket index of each value (vectorised; negative values count as 0)."""
    v = np.clip(np.asarray(values_ns, dtype=np.int64), 0, (1 << MAX_BITS) - 1)
    _, exp = np.frexp(v.astype(np.float64))           # v = m * 2**exp, m in [0.5, 1): bit_length = exp
    k = exp.astype(np.int64) - 1                       # v in [2**k, 2**(k+1))
    shift = np.maximum(k - SUB_BITS, 0)
    sub = (v >> shift) - np.where(k >= SUB_BITS, SUB, 0)
    return np.where(k >= SUB_BITS, SUB + (k - SUB_BITS) * SUB + sub, v).astype(np.int64)


def bucket_bounds(index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lowest value and width of each bucket index."""
    i = np.asarray(index, dtype=np.int64)
    octave = np.maximum((i - SUB) // SUB, 0)
    linear = i >= SUB
    width = np.where(linear, np.left_shift(1, octave), 1)
    low = np.where(linear, (SUB + (i - SUB) % SUB) << octave, i)
    return low.astype(np.int64), width.astype(np.int64)


@dataclass
class LatencyHistogram:
    """Latency histogram in ns; percentiles() reports microseconds."""

    counts: np.ndarray = field(default_factory=lambda: np.zeros(N_BUCKETS, dtype=np.int64))
    count: int = 0
    total_ns: int = 0
    min_ns: int | None = None
    max_ns: int | None = None

    def record(self, ns) -> None:
        """Add an array (or scalar) of latencies in nanoseconds."""
        v = np.asarray(ns, dtype=np.int64).ravel()
        if v.size == 0:
            return
        self.counts += np.bincount(bucket_index(v), minlength=N_BUCKETS)
        self._add_moments(int(v.size), int(v.sum()), int(v.min()), int(v.max()))

    def record_buckets(self, idx: np.ndarray, values_sum: int, vmin: int, vmax: int) -> None:
        """Add pre-computed bucket indices (hot path: the caller already has them)."""
        if idx.size == 0:
            return
        self.counts += np.bincount(idx, minlength=N_BUCKETS)
        self._add_moments(int(idx.size), values_sum, vmin, vmax)

    def _add_moments(self, n: int, s: int, lo: int, hi: int) -> None:
        self.count += n
        self.total_ns += s
        self.min_ns = lo if self.min_ns is None else min(self.min_ns, lo)
        self.max_ns = hi if self.max_ns is None else max(self.max_ns, hi)

    def merge(self, other: "LatencyHistogram") -> "LatencyHistogram":
        """Add another histogram into this one (exact); returns self."""
        if other.count:
            self.counts += other.counts
            self._add_moments(other.count, other.total_ns, other.min_ns, other.max_ns)
        return self

    def copy(self) -> "LatencyHistogram":
        return LatencyHistogram(self.counts.copy(), self.count, self.total_ns, self.min_ns, self.max_ns)

    def value_at(self, q: float) -> float | None:
        """Value (ns) at percentile q (0..100): the rank-ceil(q/100*n) value's bucket midpoint, clamped to
        the exact min and max."""
        if self.count == 0:
            return None
        rank = max(1, int(np.ceil(q / 100.0 * self.count - 1e-9)))
        i = int(np.searchsorted(np.cumsum(self.counts), rank))
        low, width = bucket_bounds(np.array([i]))
        mid = float(low[0]) + (float(width[0]) - 1.0) / 2.0
        return min(max(mid, float(self.min_ns)), float(self.max_ns))

    @property
    def mean_ns(self) -> float | None:
        return self.total_ns / self.count if self.count else None

    def percentiles(self) -> dict:
        """{"p50","p90","p99","p99.9","p99.99","max","mean"} in microseconds (None when empty)."""
        if self.count == 0:
            return {**{k: None for k, _ in PERCENTILES}, "max": None, "mean": None}
        out = {name: self.value_at(q) / 1e3 for name, q in PERCENTILES}
        out["max"] = self.max_ns / 1e3
        out["mean"] = self.total_ns / self.count / 1e3
        return out

    def to_dict(self) -> dict:
        nz = np.flatnonzero(self.counts)
        return {"unit": "ns", "sub_bits": SUB_BITS, "max_bits": MAX_BITS, "relative_error": RELATIVE_ERROR,
                "count": self.count, "sum_ns": self.total_ns, "min_ns": self.min_ns, "max_ns": self.max_ns,
                "buckets": nz.tolist(), "counts": self.counts[nz].tolist(),
                "percentiles_us": self.percentiles()}

    @classmethod
    def from_dict(cls, d: dict) -> "LatencyHistogram":
        if d.get("sub_bits", SUB_BITS) != SUB_BITS or d.get("max_bits", MAX_BITS) != MAX_BITS:
            raise ValueError("histogram layout differs from this kvbench version's")
        counts = np.zeros(N_BUCKETS, dtype=np.int64)
        counts[np.asarray(d["buckets"], dtype=np.int64)] = np.asarray(d["counts"], dtype=np.int64)
        return cls(counts, int(d["count"]), int(d["sum_ns"]), d.get("min_ns"), d.get("max_ns"))

    def __len__(self) -> int:
        return self.count


def merged(hists) -> LatencyHistogram:
    """One histogram holding all of the given ones."""
    out = LatencyHistogram()
    for h in hists:
        out.merge(h)
    return out
