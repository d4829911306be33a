"""run_plan: validate a plan, split it over worker processes, drive it, and merge the results exactly."""

from __future__ import annotations

import errno as _errno
import math
import multiprocessing as mp
import os
import queue as _queue
import signal
import threading
import time

import numpy as np
import psutil

from kvbench import procs
from kvbench.engine.driver import Driver, DriverConfig, SecondStats, StopFlag
from kvbench.engine.engines import engine_class, engine_for
from kvbench.engine.faults import FaultSpec, parse_faults
from kvbench.engine.plan import FLAG_FENCE, OP_NAMES, validate_plan
from kvbench.engine.result import PlanResult
from kvbench.errors import EngineError, KvbenchError, UsageError
from kvbench.metrics.histogram import LatencyHistogram

PACINGS = ("closed", "open")
VERIFY_MODES = ("off", "sampled", "all")


def run_plan(plan: np.ndarray, targets, engine: str = "libaio", qd: int = 32, workers: int = 1,
             pacing: str = "closed", speed: float = 1.0, verify: str = "off", *, verify_every: int = 16,
             runtime_s: float | None = None, batch: int = 0, on_error: str = "stop",
             faults: FaultSpec | str | None = None, stamp: bool = True, on_second=None,
             handle_signals: bool = True, split: str = "auto", stop=None, loop: bool = False,
             hugepages: bool = True, reap_batch: int = 1) -> PlanResult:
    """Run ``plan`` (PLAN_DTYPE rows) against opened ``targets`` and return a PlanResult.

    ``loop=True`` (closed loop with ``runtime_s``) starts the plan over until the runtime is up; per-I/O
    arrays then hold the last pass, while histograms and counts cover every pass. ``workers`` processes each drive their share at queue depth ``qd`` (split by ``group`` when the plan
    has FENCE flags or ``split="group"``, else round-robin). ``pacing="open"`` issues each I/O at
    ``issue_ns / speed`` and records the issue lag; ``"closed"`` keeps the queue full. ``reap_batch`` is the
    most completions the compiled closed loop (libaio) takes per io_getevents, fio's
    iodepth_batch_complete_max: 1 (fio's default) reaps one and resubmits one, keeping ``qd`` in flight as fio
    does; 0 takes all that are ready. ``on_second(row)``
    receives each finished second's merged row (for incremental time series). SIGINT/SIGTERM stop issuing;
    in-flight I/O is drained and the result has status "interrupted". Errors do not raise here: the result
    carries them (status "failed"), so the caller writes what was measured, then ``raise_for_status()``.
    """
    targets = list(targets)
    if qd is None or int(qd) < 1:
        raise UsageError(f"queue depth must be >= 1, got {qd}", "pass --qd 1 or more")
    if int(workers) < 1:
        raise UsageError(f"workers must be >= 1, got {workers}", "pass --workers 1 or more")
    if reap_batch is None or int(reap_batch) < 0:
        raise UsageError(f"reap batch must be >= 0, got {reap_batch}", "pass --reap-batch 1 (fio's default) or more")
    if pacing not in PACINGS:
        raise UsageError(f"unknown pacing {pacing!r}", f"choose one of {PACINGS}")
    if verify not in VERIFY_MODES:
        raise UsageError(f"unknown verify mode {verify!r}", f"choose one of {VERIFY_MODES}")
    if not (speed > 0 and math.isfinite(speed)):
        raise UsageError(f"speed must be a positive number, got {speed}", "pass e.g. --speed 1 or --speed 2.5")
    validate_plan(plan, targets)
    if pacing == "open" and len(plan) > 1 and (np.diff(plan["issue_ns"]) < 0).any():
        raise UsageError("open-loop plan is not sorted by issue_ns", "sort the plan by issue_ns")
    if isinstance(faults, str):
        faults = parse_faults(faults)
    eng = engine_class(engine_for(engine, targets))
    eng.prepare()
    cfg = DriverConfig(qd=int(qd), pacing=pacing, speed=float(speed), verify=verify,
                       verify_every=max(1, int(verify_every)), batch=int(batch),
                       runtime_ns=int(runtime_s * 1e9) if runtime_s else 0, on_error=on_error, stamp=stamp,
                       faults=faults, loop=bool(loop), hugepages=bool(hugepages),
                       reap_batch=int(reap_batch))
    workers = max(1, min(int(workers), max(1, len(plan))))
    parts = _split(plan, workers, split)
    merger = _SecondsMerger(workers, on_second)
    psutil.cpu_percent(interval=None)
    if workers == 1:
        stop = stop or StopFlag()
        with _signals(stop, handle_signals):
            t0 = time.perf_counter_ns() + 1_000_000
            d = Driver(plan, np.arange(len(plan), dtype=np.int64), targets, eng, cfg, t0, stop,
                       lambda sts, wm: merger.add(0, sts, wm))
            outs = [d.run()]
        interrupted = bool(stop.value)
    else:
        outs, interrupted = _run_workers(plan, parts, targets, eng, cfg, merger, handle_signals, stop)
    end_rel = max((o["t_last"] for o in outs), default=0)
    merger.finish(end_rel)
    return _merge(plan, outs, eng.name, cfg, workers, interrupted, merger.rows)


def _split(plan, workers, split):
    if workers == 1:
        return [np.arange(len(plan), dtype=np.int64)]
    by_group = split == "group" or (split == "auto" and bool((plan["flags"] & FLAG_FENCE).any()))
    if by_group:
        g = plan["group"]
        w = np.where(g >= 0, g % workers, np.arange(len(plan)) % workers)
    else:
        w = np.arange(len(plan)) % workers
    return [np.flatnonzero(w == k) for k in range(workers)]


class _signals:
    """SIGINT/SIGTERM/SIGHUP set the stop flag (main thread only): the I/O drains; previous handlers restored
    on exit."""

    def __init__(self, stop, enabled):
        self.stop, self.enabled, self.old = stop, enabled and threading.current_thread() is threading.main_thread(), {}

    def __enter__(self):
        if self.enabled:
            def handler(signum, frame):
                procs.note(signum)              # the command's exit code (kvbench.procs): 130/143/129
                self.stop.value = 1
            for s in procs.STOP_SIGNALS:
                if s == signal.SIGHUP and signal.getsignal(s) == signal.SIG_IGN:
                    continue                    # nohup
                self.old[s] = signal.signal(s, handler)
        return self

    def __exit__(self, *exc):
        for s, h in self.old.items():
            signal.signal(s, h)


stop_on_signals = _signals      # for callers that run several plans at once under one stop flag


def _worker_main(wid, plan, gidx, targets, eng, cfg, t0, stop, q):
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C reaches the whole group: the parent decides
    procs.die_with_parent()   # the parent dies (even SIGKILL): SIGTERM, stop issuing instead of running on orphaned
    parent = os.getppid()
    if parent == 1:
        stop.value = 1

    def orphaned():
        if os.getppid() != parent:       # nobody will read the queue: leave without blocking on it
            q.cancel_join_thread()
            os._exit(1)

    def on_term(signum, frame):
        stop.value = 1
    signal.signal(signal.SIGTERM, on_term)
    try:
        d = Driver(plan, gidx, targets, eng, cfg, t0, stop,
                   lambda sts, wm: q.put(("sec", wid, [s.compact() for s in sts], wm)))
        out = d.run()
        orphaned()
        q.put(("done", wid, out))
    except KvbenchError as e:
        q.put(("error", wid, (type(e).__name__, e.problem, e.fix)))
    except BaseException as e:  # noqa: BLE001 - report any worker failure to the parent as one line
        q.put(("error", wid, ("EngineError", f"worker {wid}: {type(e).__name__}: {e}", "report this bug")))


def _run_workers(plan, parts, targets, eng, cfg, merger, handle_signals, stop):
    private = [t.path for t in targets if t.kind == "dram" and not t.shared]
    if private:          # a forked worker's writes into a private arena would stay in its own copy
        raise UsageError(f"{', '.join(private)}: a process-private DRAM arena cannot be shared by {len(parts)} "
                         "worker processes", "open it with open_target(..., shared=True) or run one worker")
    ctx = mp.get_context("fork")
    stop = stop if stop is not None else ctx.RawValue("i", 0)
    q = ctx.Queue()
    outs: dict[int, dict] = {}
    err = None
    with _signals(stop, handle_signals):
        t0 = time.perf_counter_ns() + 30_000_000 + 10_000_000 * len(parts)
        procs = [ctx.Process(target=_worker_main, args=(w, plan[idx], idx, targets, eng, cfg, t0, stop, q),
                             daemon=True) for w, idx in enumerate(parts)]
        for p in procs:
            p.start()
        try:
            while len(outs) < len(procs) and err is None:
                try:
                    kind, wid, payload, *rest = q.get(timeout=0.5)
                except _queue.Empty:
                    dead = [w for w, p in enumerate(procs) if p.exitcode is not None and w not in outs]
                    if dead:
                        time.sleep(0.2)
                        if q.empty():
                            err = EngineError(f"worker {dead[0]} died (exit code {procs[dead[0]].exitcode})",
                                              "check dmesg (out of memory?) and rerun")
                    continue
                if kind == "sec":
                    merger.add(wid, [SecondStats.expand(t) for t in payload], rest[0])
                elif kind == "done":
                    outs[wid] = payload
                    merger.add(wid, [], None)
                else:
                    import kvbench.errors as E
                    name, problem, fix = payload
                    err = getattr(E, name, EngineError)(problem, fix)
        finally:
            if err is not None:
                stop.value = 1
            for p in procs:
                p.join(timeout=30)
                if p.is_alive():
                    p.kill()
    if err is not None:
        raise err
    return [outs[w] for w in sorted(outs)], bool(stop.value)


class _SecondsMerger:
    """Merge per-second stats of all workers; emit a row once every worker has closed that second."""

    def __init__(self, workers, on_row):
        self.wm = [0] * workers
        self.pending: dict[int, SecondStats] = {}
        self.on_row = on_row
        self.rows: list[dict] = []
        self._end_rel = None

    def add(self, wid, sts, wm):
        for st in sts:
            cur = self.pending.get(st.second)
            self.pending[st.second] = st if cur is None else cur.merge(st)
        self.wm[wid] = math.inf if wm is None else wm
        if min(self.wm) < math.inf:      # the last seconds wait for finish(), which knows the end time
            self._emit(min(self.wm))

    def finish(self, end_rel_ns):
        self._end_rel = end_rel_ns
        self._emit(math.inf)

    def _emit(self, upto):
        for s in sorted(k for k in self.pending if k < upto):
            st = self.pending.pop(s)
            interval = 1.0
            if self._end_rel is not None and upto == math.inf:
                interval = min(1.0, max(1e-3, self._end_rel / 1e9 - s))
            p = st.hist.percentiles()
            row = {"t_s": s, "interval_s": interval,
                   "iops": int(st.ios.sum()) / interval,
                   **{f"{OP_NAMES[o]}_iops": int(st.ios[o]) / interval for o in OP_NAMES},
                   "bw_bytes_per_s": int(st.bytes[:2].sum()) / interval,
                   "read_bw_bytes_per_s": int(st.bytes[0]) / interval,
                   "write_bw_bytes_per_s": int(st.bytes[1]) / interval,
                   "lat_p50_us": p["p50"], "lat_p99_us": p["p99"], "lat_max_us": p["max"],
                   "lat_mean_us": p["mean"], "errors": st.errors,
                   "cpu_pct": psutil.cpu_percent(interval=None), "kvbench_cpu_pct": 100.0 * st.cpu_s / interval}
            self.rows.append(row)
            if self.on_row is not None:
                self.on_row(row)


def _merge(plan, outs, engine, cfg, workers, interrupted, rows) -> PlanResult:
    n = len(plan)
    sub = np.full(n, -1, dtype=np.int64)
    comp = np.full(n, -1, dtype=np.int64)
    res = np.zeros(n, dtype=np.int64)
    hists: dict = {}
    slat: dict = {}
    clat: dict = {}
    lag = LatencyHistogram()
    errors: dict = {}
    firsts, vfirsts = [], []
    short = vchecked = vbad = 0
    failed = False
    cpu_u = cpu_s = 0.0
    lag_parts = []
    counts: dict = {}
    t_first = [o["t_first"] for o in outs if o["t_first"] >= 0]
    t_last = [o["t_last"] for o in outs if o["t_last"] >= 0]
    issued = ring_reaped = 0
    for o in outs:
        issued += o["issued_total"]
        ring_reaped += o["ring_reaped"]
        g = o["gidx"]
        sub[g], comp[g], res[g] = o["sub"], o["comp"], o["res"]
        for k, h in o["hists"].items():
            hists.setdefault(k, LatencyHistogram()).merge(h)
        for mine, theirs in ((slat, o["slat"]), (clat, o["clat"])):
            for k, h in theirs.items():
                mine.setdefault(k, LatencyHistogram()).merge(h)
        for k, c in o["counts"].items():
            cur = counts.setdefault(k, [0, 0])
            cur[0] += c[0]
            cur[1] += c[1]
        lag.merge(o["lag"])
        for e, c in o["errors"].items():
            errors[e] = errors.get(e, 0) + c
        short += o["short"]
        failed |= o["failed"]
        if o["first_error"]:
            firsts.append(o["first_error"])
        vchecked += o["verify_checked"]
        vbad += o["verify_bad"]
        if o["verify_first"]:
            vfirsts.append(o["verify_first"])
        cpu_u += o["cpu_user_s"]
        cpu_s += o["cpu_sys_s"]
        if o["lag_stats"]:
            lag_parts.append(o["lag_stats"])
    lag_stats = None
    if lag_parts:
        nn = sum(p["n"] for p in lag_parts)
        lag_stats = {"n": nn,
                     "mean_us": sum((p["mean_us"] or 0) * p["n"] for p in lag_parts) / nn if nn else None,
                     "max_us": max((p["max_us"] for p in lag_parts if p["max_us"] is not None), default=None),
                     "late_1ms": sum(p["late_1ms"] for p in lag_parts)}
    first = min(firsts, key=lambda f: f["index"]) if firsts else None
    status, error, code = "complete", None, None
    if failed and first is not None:
        status = "failed"
        r = first["result"]
        code = -r if r < 0 else None
        what = (f"{_errno.errorcode.get(code, code)} ({os.strerror(code)})" if code
                else f"short {first['op']} ({r} of {first['length']} bytes)")
        error = (f"{what} on {first['op']} at offset {first['offset']} (plan index {first['index']}); "
                 f"{sum(errors.values()) + short} failed I/O(s); results so far were written")
    elif interrupted:
        status = "interrupted"
    wall = (max(t_last) - min(t_first)) / 1e9 if t_first and t_last else 0.0
    verify = {"mode": cfg.verify, "checked": vchecked, "mismatches": vbad,
              "first": min(vfirsts, key=lambda f: f["index"]) if vfirsts else None}
    return PlanResult(submit_ns=sub, complete_ns=comp, result=res, histograms=hists, slat=slat, clat=clat, lag=lag,
                      lag_stats=lag_stats, ops=plan["op"].copy(), lengths=plan["length"].copy(),
                      targets=plan["target"].copy(), engine=engine, qd=cfg.qd, workers=workers,
                      reap_batch=cfg.reap_batch or cfg.qd,
                      pacing=cfg.pacing, speed=cfg.speed, status=status, error=error, errno=code,
                      errors=errors, short=short, first_error=first, verify=verify,
                      cpu={"user_s": cpu_u, "sys_s": cpu_s,
                           "utilisation": (cpu_u + cpu_s) / wall if wall > 0 else None},
                      timeseries=rows, counts=counts, t_first_ns=min(t_first) if t_first else -1,
                      t_last_ns=max(t_last) if t_last else -1, passes=min(o["passes"] for o in outs),
                      issued_total=issued, ring_reaped=ring_reaped)
