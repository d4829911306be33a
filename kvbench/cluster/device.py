"""A node's L3 drive as measured, inside the cluster model: queueing at the device and latency under load.

``--l3-device RUN[,RUN...]`` names ``kvbench io`` run folders measured on the real drive (random reads at a few
queue depths, e.g. ``--qd 1``, ``4``, ``16``, ``64``, at about the block size). Each gives one point of the drive's
latency-vs-load curve: the bandwidth it sustained and its latency percentiles (p50 .. p99.99). In the cluster
simulation each node's drive is then a bandwidth calendar at the curve's highest bandwidth (:class:`~kvbench.
cluster.pool.Calendar`): an L3 load takes its bytes first come, first served behind the loads already queued on
that drive, and pays a first-byte latency drawn (seeded) from the measured distribution at the point whose
bandwidth matches the drive's utilisation when the load starts (the lightest point that sustains it). So a slow
or saturating drive reaches TTFT through both its transfer time and its tail, not through one bandwidth figure.

Quantiles between the measured ones are interpolated linearly (p0 is taken as half the p50: below the median the
histogram is not stored); above p99.99 the maximum is used.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kvbench.errors import UsageError

_QUANTILES = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p99.9", 0.999), ("p99.99", 0.9999), ("max", 1.0))


@dataclass(frozen=True)
class DevicePoint:
    qd: int
    bandwidth: float                # bytes/s sustained at this depth
    bs: int
    q: tuple                        # quantile levels
    lat_s: tuple                    # latency at each level (s)
    source: str


@dataclass(frozen=True)
class DeviceCurve:
    points: tuple                   # DevicePoint, by bandwidth
    source: str

    @property
    def max_bandwidth(self) -> float:
        return max(p.bandwidth for p in self.points)

    def point_at(self, utilisation: float) -> DevicePoint:
        """The lightest measured point that sustains ``utilisation`` x the highest bandwidth (the last if none)."""
        need = utilisation * self.max_bandwidth
        for p in self.points:
            if p.bandwidth >= need - 1e-9 * self.max_bandwidth:
                return p
        return self.points[-1]

    def latency_s(self, utilisation: float, u01: float) -> float:
        """A first-byte latency drawn at uniform ``u01`` from the distribution measured at that utilisation."""
        p = self.point_at(utilisation)
        return float(np.interp(u01, p.q, p.lat_s))

    def to_dict(self) -> dict:
        return {"source": self.source, "max_bandwidth_bytes_per_s": self.max_bandwidth,
                "points": [{"qd": p.qd, "bandwidth_bytes_per_s": p.bandwidth, "bs": p.bs,
                            "latency_s": dict(zip([f"q{q:g}" for q in p.q], p.lat_s)), "run": p.source}
                           for p in self.points]}


def point_from_summary(s: dict, source: str) -> DevicePoint:
    """One curve point from a ``kvbench io`` summary (read workload, complete)."""
    if s.get("kind") != "io":
        raise UsageError(f"--l3-device {source}: a {s.get('kind')!r} run, not kvbench io",
                         "give folders of kvbench io random-read runs on the drive (one per queue depth)")
    if "read" not in str(s.get("rw", "")) or s.get("status") != "complete":
        raise UsageError(f"--l3-device {source}: rw {s.get('rw')!r}, status {s.get('status')!r}",
                         "give complete kvbench io runs with --rw randread")
    lat = s.get("lat_us") or {}
    have = [(q, float(lat[k]) * 1e-6) for k, q in _QUANTILES if lat.get(k) is not None]
    bw = float(s.get("bw_bytes_per_s") or 0.0)
    if not have or not bw > 0:
        raise UsageError(f"--l3-device {source}: no latency percentiles or bandwidth in its summary",
                         "rerun kvbench io on the drive")
    qs = [0.0] + [q for q, _ in have]
    lats = [have[0][1] * 0.5] + [v for _, v in have]
    lats = list(np.maximum.accumulate(lats))                      # a quantile function never falls
    return DevicePoint(int(s.get("qd") or 1), bw, int(s.get("bs") or 0), tuple(qs), tuple(lats), source)


def read_curve(paths) -> DeviceCurve:
    """The curve from ``kvbench io`` run folders (the result contract's one reader)."""
    points = [point_from_summary(_io_summary(p), str(p)) for p in paths]
    if not points:
        raise UsageError("--l3-device names no run", "give kvbench io run folders, comma-separated")
    points.sort(key=lambda p: (p.bandwidth, p.qd))
    return DeviceCurve(tuple(points), ", ".join(f"qd {p.qd}: {p.bandwidth / 1e6:,.0f} MB/s" for p in points))


def _io_summary(path) -> dict:
    """A run folder's summary (the result contract's one reader); its errors name the option."""
    from kvbench.metrics.results import read_run

    try:
        return read_run(path, parts=False).summary.data
    except UsageError as e:
        raise UsageError(f"--l3-device: {e.problem}", e.fix) from None


def l3_load(curve: DeviceCurve, device, start: float, nbytes: float, u01: float) -> float:
    """Seconds an L3 load of ``nbytes`` starting at ``start`` takes on a node's drive ``device`` (a Calendar at the
    curve's highest bandwidth): the first byte at the latency measured for the drive's load at that moment, the
    bytes behind what is already queued there."""
    from kvbench.cluster.pool import Calendar, transfer

    util = device.u[device.segment(start)] / device.capacity
    first = curve.latency_s(util, u01)
    end = transfer(start, nbytes, device, Calendar(None))          # the drive alone limits it
    return first + (end - start)
