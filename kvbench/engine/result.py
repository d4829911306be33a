"""PlanResult: what a run of a plan did, per I/O (plan order) and aggregated."""

from __future__ import annotations

import errno as _errno
import os
from dataclasses import dataclass, field

import numpy as np

from kvbench.errors import DiskFullError, EngineError, Interrupted, VerifyError
from kvbench.engine.plan import OP_NAMES
from kvbench.metrics.histogram import LatencyHistogram, merged


@dataclass
class PlanResult:
    """Per-I/O arrays are in plan order: ``submit_ns``/``complete_ns`` from run start (-1: never issued /
    never completed), ``result`` bytes done or -errno. ``histograms`` maps (target index, op name) to
    latency histograms of successful I/Os (total: submitted to reaped); ``slat``/``clat`` split it where the
    submit call returned (fio's submission and completion latency); ``lag`` holds open-loop issue lag
    (achieved - intended)."""

    submit_ns: np.ndarray
    complete_ns: np.ndarray
    result: np.ndarray
    histograms: dict
    lag: LatencyHistogram
    lag_stats: dict | None
    ops: np.ndarray = field(repr=False)
    lengths: np.ndarray = field(repr=False)
    targets: np.ndarray = field(repr=False)
    engine: str = "libaio"
    qd: int = 32
    reap_batch: int = 1              # most completions per io_getevents in the compiled closed loop
    workers: int = 1
    pacing: str = "closed"
    speed: float = 1.0
    status: str = "complete"         # complete | interrupted | failed
    error: str | None = None
    errno: int | None = None
    errors: dict = field(default_factory=dict)   # errno -> count
    short: int = 0
    first_error: dict | None = None
    verify: dict = field(default_factory=dict)
    cpu: dict = field(default_factory=dict)
    timeseries: list = field(default_factory=list)
    counts: dict = field(default_factory=dict)    # (target, op) -> [ios, bytes] of successful I/Os
    t_first_ns: int = -1                          # first submit, from run start
    t_last_ns: int = -1                           # last completion
    passes: int = 0                               # full passes over the plan (time-based loops)
    issued_total: int = 0                         # I/Os submitted, over all passes
    ring_reaped: int = 0                          # completions read from the kernel's AIO ring without a syscall
    slat: dict = field(default_factory=dict)      # (target, op) -> submission latency histogram
    clat: dict = field(default_factory=dict)      # (target, op) -> completion latency histogram

    # ---- derived -----------------------------------------------------------------------------------------
    @property
    def issued(self) -> int:
        return int((self.submit_ns >= 0).sum())

    @property
    def ok(self) -> np.ndarray:
        return (self.complete_ns >= 0) & (self.result == self.lengths.astype(np.int64))

    @property
    def wall_s(self) -> float:
        """First submit to last completion, seconds."""
        if self.t_first_ns < 0 or self.t_last_ns < 0:
            return 0.0
        return (self.t_last_ns - self.t_first_ns) / 1e9

    def bytes_by_op(self, target: int | None = None) -> dict:
        return {name: sum(c[1] for (t, o), c in self.counts.items() if o == name and target in (None, t))
                for name in OP_NAMES.values()}

    def ios_by_op(self, target: int | None = None) -> dict:
        return {name: sum(c[0] for (t, o), c in self.counts.items() if o == name and target in (None, t))
                for name in OP_NAMES.values()}

    def latency(self, op: str | None = None, target: int | None = None, kind: str = "lat") -> LatencyHistogram:
        """Merged histogram of ``kind``: ``lat`` (total), ``slat`` (submission) or ``clat`` (completion)."""
        src = {"lat": self.histograms, "slat": self.slat, "clat": self.clat}[kind]
        return merged(h for (t, o), h in src.items() if (op is None or o == op) and (target is None or t == target))

    def inflight_mean(self, op: str | None = None) -> float | None:
        """Time-averaged I/Os in flight (submitted, not yet reaped) from first submit to last completion:
        by Little's law, the sum of total latencies over the elapsed time (fio: iops x mean lat)."""
        h = self.latency(op)
        wall_ns = self.wall_s * 1e9
        return h.total_ns / wall_ns if wall_ns > 0 and h.count else None

    def _lat_fields(self, op: str | None = None) -> dict:
        return {"lat_us": self.latency(op).percentiles(), "slat_us": self.latency(op, kind="slat").percentiles(),
                "clat_us": self.latency(op, kind="clat").percentiles(), "inflight_mean": self.inflight_mean(op)}

    def summary(self) -> dict:
        """JSON-ready aggregate numbers (io command fields: iops, bw_bytes_per_s, ios, runtime_s, lat_us)."""
        wall = self.wall_s
        ios, by = self.ios_by_op(), self.bytes_by_op()
        total_ios, total_bytes = sum(ios.values()), sum(by.values())
        out = {
            "status": self.status,
            "engine": self.engine, "qd": self.qd, "reap_batch": self.reap_batch, "workers": self.workers,
            "pacing": self.pacing,
            "ios": total_ios, "runtime_s": wall,
            "iops": total_ios / wall if wall > 0 else None,
            "bw_bytes_per_s": total_bytes / wall if wall > 0 else None,
            "bytes": by, **self._lat_fields(),
            "ops": {op: {"ios": ios[op], "bytes": by[op], "iops": ios[op] / wall if wall > 0 else None,
                         "bw_bytes_per_s": by[op] / wall if wall > 0 else None, **self._lat_fields(op)}
                    for op in ios if ios[op]},
            "issued": self.issued_total, "planned": int(len(self.submit_ns)), "passes": self.passes,
            "errors": {(_errno.errorcode.get(k, str(k))): v for k, v in self.errors.items()},
            "short_ios": self.short, "first_error": self.first_error, "verify": self.verify, "cpu": self.cpu,
        }
        tgts = sorted({t for t, _ in self.histograms})
        if len(tgts) > 1:
            out["per_target"] = {str(t): {op: {"ios": self.ios_by_op(t)[op], "bytes": self.bytes_by_op(t)[op],
                                               "lat_us": self.latency(op, t).percentiles()}
                                          for op in OP_NAMES.values() if self.ios_by_op(t)[op]}
                                 for t in tgts}
        if self.pacing == "open":
            out["speed"] = self.speed
            out["issue_lag_us"] = {**self.lag.percentiles(), **(self.lag_stats or {})}
        if self.error:
            out["error"] = self.error
        return out

    def raise_for_status(self) -> None:
        """Raise the run's error (after the caller wrote its results): disk full, I/O error, verify, Ctrl-C."""
        if self.status == "interrupted":
            raise Interrupted("interrupted: stopped issuing, drained in-flight I/O and wrote the results so far",
                              "rerun to completion")
        if self.status == "failed":
            cls = DiskFullError if self.errno == _errno.ENOSPC else EngineError
            raise cls(self.error or "the run failed", _fix_for(self.errno))
        if self.verify.get("mismatches"):
            f = self.verify.get("first") or {}
            raise VerifyError(f"verify: {self.verify['mismatches']} of {self.verify['checked']} reads returned "
                              f"wrong data; first at plan index {f.get('index')} (tag/key {f.get('tag')}, "
                              f"offset {f.get('offset')})", "check the device and the write path")


def _fix_for(code):
    if code == _errno.ENOSPC:
        return "free space on the target's filesystem or give a smaller --size"
    if code == _errno.EIO:
        return "the device reported an I/O error: check dmesg and the drive's health (SMART)"
    if code is None:
        return "check the target"
    return f"check the target ({os.strerror(code)})"
