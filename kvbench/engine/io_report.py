"""What ``kvbench io`` reports beside its summary, in fio's forms: the open-loop rate check, the full latency
bins of ``--output-format json+``, per-I/O latency logs (``--write_lat_log``) and the live status line.

Latency logs are fio's (``write_lat_log=PREFIX`` with ``log_offset=1``): one file per worker,
``PREFIX_lat.<worker>.log``, a line per I/O in completion order: ``time (ms from the start, at completion),
latency (ns, submitted to reaped), direction (0 read, 1 write, 2 trim), block size (bytes), offset (bytes),
priority (0)``, fields separated by ", ". The lines are laid out by the compiled CSV writer, never one Python
object per I/O.
"""

from __future__ import annotations

import numpy as np

from kvbench.metrics.histogram import LatencyHistogram, bucket_bounds

RATE_MET = 0.97          # an open-loop run held its rate when it completed >= 97% of the intended IOPS


def rate_check(intended_iops: float, summary: dict) -> dict:
    """Did an open-loop run keep its rate? Intended vs achieved IOPS and the issue-lag percentiles (us)."""
    achieved = summary.get("iops") or 0.0
    lag = summary.get("issue_lag_us") or {}
    n = lag.get("n") or 0
    return {"intended_iops": intended_iops, "achieved_iops": achieved,
            "achieved_share": achieved / intended_iops if intended_iops else None,
            "met": bool(achieved >= RATE_MET * intended_iops),
            "late_1ms_share": (lag.get("late_1ms") or 0) / n if n else None,
            "issue_lag_us": {k: lag.get(k) for k in ("p50", "p90", "p99", "p99.9", "max", "mean")}}


def rate_line(check: dict) -> str:
    """The text output's line about an open-loop rate: held, or MISSED with the lag percentiles."""
    lag = " ".join(f"{k}={v:.0f}" for k, v in check["issue_lag_us"].items() if v is not None)
    late = check.get("late_1ms_share")
    late_s = f"; {late:.1%} of I/Os issued > 1 ms late" if late is not None else ""
    if check["met"]:
        return f"  rate: held {check['achieved_iops']:,.0f} of {check['intended_iops']:,.0f} IOPS; issue lag (us): {lag}{late_s}"
    return (f"  rate: MISSED: {check['achieved_iops']:,.0f} of {check['intended_iops']:,.0f} IOPS "
            f"({check['achieved_share']:.0%}): the target fell behind the schedule; issue lag (us): {lag}{late_s}")


def bins(h: LatencyHistogram) -> dict:
    """fio json+'s ``bins``: {bucket value in ns (its midpoint, as percentiles report it): count}, non-empty only."""
    idx = np.flatnonzero(h.counts)
    low, width = bucket_bounds(idx)
    mid = low + (width - 1) // 2
    return dict(zip(map(str, mid.tolist()), h.counts[idx].tolist()))


def json_plus(result) -> dict:
    """Every latency histogram of a run as full bins (fio's ``--output-format=json+``), per direction."""
    from kvbench.metrics.histogram import RELATIVE_ERROR

    ops = [op for op, n in result.ios_by_op().items() if n]
    out = {"bin_value": "bucket midpoint, ns", "relative_error": RELATIVE_ERROR}
    for kind in ("lat", "clat", "slat"):
        per = {}
        for op in (None, *ops):
            h = result.latency(op, kind=kind)
            if h.count:
                per[op or "all"] = {"count": h.count, "bins": bins(h)}
        out[f"{kind}_ns"] = per
    if result.pacing == "open":
        out["issue_lag_ns"] = {"count": result.lag.count, "bins": bins(result.lag)}
    return out


def write_lat_logs(prefix: str, result, plan: np.ndarray, workers: int) -> list[str]:
    """fio's per-I/O latency logs of the I/Os the result holds (see the module docstring); returns the paths.
    A time-based closed loop reuses its plan, and its result holds each plan row's last issue: the log then
    holds the run's last pass (the caller says so)."""
    from kvbench.engine.safety import atomic_output
    from kvbench.metrics.csvout import format_csv

    done = np.flatnonzero((result.submit_ns >= 0) & (result.complete_ns >= 0))
    worker = done % max(1, workers)              # io plans are split round-robin (runner._split)
    paths = []
    for w in range(max(1, workers)):
        rows = done[worker == w]
        rows = rows[np.argsort(result.complete_ns[rows], kind="stable")]
        text = format_csv({"t": result.complete_ns[rows] // 1_000_000,
                           "lat": result.complete_ns[rows] - result.submit_ns[rows],
                           "dir": plan["op"][rows].astype(np.int64), "bs": plan["length"][rows].astype(np.int64),
                           "off": plan["offset"][rows].astype(np.int64), "prio": np.zeros(len(rows), np.int64)},
                          header=False, sep=",")
        path = f"{prefix}_lat.{w + 1}.log"
        with atomic_output(path) as tmp:
            with open(tmp, "wb") as fh:
                fh.write(text.replace(b",", b", "))
        paths.append(path)
    return paths


class IoStatus:
    """The live status line of ``kvbench io`` (kvbench.progress), fio's ``--eta`` line: bandwidth and IOPS per
    direction over the last ``interval_s``, done / total (seconds of a time-based run, else I/Os) and the ETA."""

    def __init__(self, desc: str, *, runtime_s: float | None, ios: int, interval_s: float = 1.0):
        from kvbench.progress import Line

        self.timed = bool(runtime_s)
        self.line = Line(desc, runtime_s if self.timed else ios, "s" if self.timed else "I/Os")
        self.interval = max(1.0, float(interval_s))      # the engine's rows are per second
        self.acc: dict = {}
        self.since = 0.0
        self.ios = 0.0

    def row(self, r: dict) -> None:
        from kvbench.units import format_rate

        dt = float(r.get("interval_s") or 1.0)
        for k in ("read_iops", "write_iops", "read_bw_bytes_per_s", "write_bw_bytes_per_s"):
            self.acc[k] = self.acc.get(k, 0.0) + float(r.get(k) or 0.0) * dt
        self.since += dt
        self.ios += float(r.get("iops") or 0.0) * dt
        end = float(r.get("t_s", 0)) + dt
        if self.since + 1e-9 < self.interval:
            return
        a, t = self.acc, self.since
        note = (f"r={format_rate(a['read_bw_bytes_per_s'] / t)},w={format_rate(a['write_bw_bytes_per_s'] / t)} "
                f"r={a['read_iops'] / t:,.0f},w={a['write_iops'] / t:,.0f} IOPS, p99 {r.get('lat_p99_us') or 0:.0f} us")
        # a time-based run ends at its runtime: the ETA is the time left (the line's own clock began before
        # the workers started)
        self.line.update(end if self.timed else self.ios, note=note,
                         eta_s=max(0.0, self.line.total - end) if self.timed else None)
        self.acc, self.since = {}, 0.0

    def close(self) -> None:
        self.line.close()
