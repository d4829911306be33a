"""The one driver loop: batching, time stamps, queue depth, closed/open-loop pacing, fences, verify.

One Driver runs in one process over its share of a plan. Engines only move bytes; this loop stamps
``perf_counter_ns`` once per submitted batch (just before the engine's submit call) and once per reaped
batch (just after reap returns, unless the engine stamped completions itself), so latency = completion
reaped - submitted, the same for every engine. Like fio, that total latency is split at the moment the submit
call returned: submission latency (slat = returned - submitted) and completion latency (clat = reaped -
returned); the mean number of I/Os in flight follows from Little's law (sum of latencies / elapsed). All bookkeeping is vectorised over batches: no Python object
per I/O. Completed I/Os are folded into histograms and per-second rows every ``flush_ns`` so that a long
run's time series is written as it goes.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import resource
import time
from dataclasses import dataclass, field

import numpy as np

from kvbench.engine import content
from kvbench.engine.faults import FaultSpec
from kvbench.engine.plan import FLAG_FENCE, OP_NAMES, OP_READ, OP_TRIM, OP_WRITE
from kvbench.metrics.histogram import N_BUCKETS, LatencyHistogram, bucket_index

PAGE = mmap.PAGESIZE


@dataclass(frozen=True)
class DriverConfig:
    qd: int = 32
    pacing: str = "closed"          # "closed": keep qd full; "open": issue at issue_ns / speed
    speed: float = 1.0
    verify: str = "off"             # "off" | "sampled" | "all"
    verify_every: int = 16          # sampled: one read in verify_every (by plan index)
    batch: int = 0                  # largest submit batch (0: qd)
    reap_batch: int = 1             # compiled closed loop: most completions per io_getevents (fio's
                                    # iodepth_batch_complete_max, default 1; 0: qd)
    runtime_ns: int = 0             # stop issuing after this long (0: run the whole plan)
    on_error: str = "stop"          # "stop": stop issuing at the first failed I/O; "continue"
    stamp: bool = True              # stamp written data with the content pattern
    flush_ns: int = 250_000_000
    faults: FaultSpec | None = None
    loop: bool = False              # closed loop: start the plan over until runtime_ns (time-based runs)
    hugepages: bool = True          # back I/O buffers with transparent huge pages (madvise)


class StopFlag:
    """A flag with ``.value`` (the same interface as multiprocessing.RawValue)."""

    def __init__(self):
        self.value = 0


@dataclass
class SecondStats:
    """One second of completions (by completion time) of one worker; merged across workers exactly."""

    second: int
    ios: np.ndarray = field(default_factory=lambda: np.zeros(3, dtype=np.int64))      # per op
    bytes: np.ndarray = field(default_factory=lambda: np.zeros(3, dtype=np.int64))
    errors: int = 0
    hist: LatencyHistogram = field(default_factory=LatencyHistogram)
    cpu_s: float = 0.0            # CPU time (user + system) the driver process used in this second


    def merge(self, o: "SecondStats") -> "SecondStats":
        self.ios += o.ios
        self.bytes += o.bytes
        self.errors += o.errors
        self.cpu_s += o.cpu_s
        self.hist.merge(o.hist)
        return self

    def compact(self) -> tuple:
        """A small picklable form for sending between processes."""
        nz = np.flatnonzero(self.hist.counts)
        h = self.hist
        return (self.second, self.ios, self.bytes, self.errors, nz, h.counts[nz], h.count, h.total_ns,
                h.min_ns, h.max_ns, self.cpu_s)

    @classmethod
    def expand(cls, t: tuple) -> "SecondStats":
        s, ios, by, err, nz, cnt, count, total, lo, hi, cpu = t
        counts = np.zeros(N_BUCKETS, dtype=np.int64)
        counts[nz] = cnt
        return cls(s, ios, by, err, LatencyHistogram(counts, count, total, lo, hi), cpu)


class Driver:
    def __init__(self, plan: np.ndarray, gidx: np.ndarray, targets, engine_cls, cfg: DriverConfig, t0_ns: int,
                 stop=None, on_second=None):
        self.plan, self.gidx, self.targets, self.engine_cls, self.cfg = plan, gidx, targets, engine_cls, cfg
        self.t0 = int(t0_ns)
        self.stop = stop if stop is not None else StopFlag()
        self.on_second = on_second
        n = len(plan)
        self.sub = np.full(n, -1, dtype=np.int64)
        self.sdone = np.full(n, -1, dtype=np.int64)     # the submit call returned
        self.comp = np.full(n, -1, dtype=np.int64)
        self.res = np.zeros(n, dtype=np.int64)
        self.hists: dict[tuple[int, str], LatencyHistogram] = {}
        self.slat: dict[tuple[int, str], LatencyHistogram] = {}     # submission latency
        self.clat: dict[tuple[int, str], LatencyHistogram] = {}     # completion latency
        self.seconds: dict[int, SecondStats] = {}
        self.errors: dict[int, int] = {}
        self.first_error = None
        self.short = 0
        self.failed = False
        self.verify_checked = 0
        self.verify_bad = 0
        self.verify_first = None
        self._done_log = np.empty(max(n, 4 * cfg.qd), dtype=np.int64)
        self._nd = 0
        self._flushed = 0
        self.counts: dict[tuple[int, str], list] = {}    # (target, op) -> [ios, bytes] of successful I/Os
        self.t_first = -1
        self.t_last = -1
        self.passes = 0
        self.n_issued = 0
        self.ring_reaped = 0         # completions the compiled loop took from the kernel's ring (no syscall)
        self._cpu_mark = sum(os.times()[:2])

    # ---- the loop ----------------------------------------------------------------------------------------
    def run(self) -> dict:
        cfg, plan = self.cfg, self.plan
        n = len(plan)
        qd = max(1, min(cfg.qd, max(n, 1)))
        ops = np.ascontiguousarray(plan["op"])
        tg = plan["target"].astype(np.int64)
        off = np.ascontiguousarray(plan["offset"])
        ln = plan["length"].astype(np.int64)
        tags = np.ascontiguousarray(plan["tag"])
        fences = np.flatnonzero(plan["flags"] & FLAG_FENCE)
        lbs = np.array([t.lbs for t in self.targets], dtype=np.int64)
        one_lbs = int(lbs[0]) if len(set(lbs.tolist())) == 1 else 0
        open_loop = cfg.pacing == "open"
        intended = (plan["issue_ns"].astype(np.float64) / cfg.speed).astype(np.int64) if open_loop else None
        batch = cfg.batch or qd
        slot_bytes = max(PAGE, -(-int(ln.max() if n else PAGE) // PAGE) * PAGE)
        mm = mmap.mmap(-1, qd * slot_bytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        if cfg.hugepages:  # fewer scatter-gather segments per large O_DIRECT I/O (virtio allows 254)
            try:
                mm.madvise(mmap.MADV_HUGEPAGE)
            except (AttributeError, OSError):
                pass
        buffers = np.frombuffer(mm, dtype=np.uint8).reshape(qd, slot_bytes)
        buffers[:, ::PAGE] = 0
        words = buffers.view(np.uint64)
        buf_addr = ctypes.addressof(ctypes.c_char.from_buffer(mm))
        engine = self.engine_cls(self.targets, qd, buffers, buf_addr)
        faults = cfg.faults if cfg.faults is not None and cfg.faults.active else None
        verify = cfg.verify != "off"
        stamp = cfg.stamp and bool((ops == OP_WRITE).any())
        sub, sdone, comp, res, done_log = self.sub, self.sdone, self.comp, self.res, self._done_log
        free = np.arange(qd - 1, -1, -1, dtype=np.int64)
        nfree = qd
        slot_pidx = np.zeros(qd, dtype=np.int64)
        pc = time.perf_counter_ns
        t0 = self.t0
        i = inflight = fp = 0
        nf = len(fences)
        stopping = False
        stop = self.stop
        deadline = t0 + cfg.runtime_ns if cfg.runtime_ns else 0
        loop = cfg.loop and n >= 2 * qd and deadline and not open_loop
        half = n // 2
        ru0 = resource.getrusage(resource.RUSAGE_SELF)
        while pc() < t0:
            d = t0 - pc()
            if d > 2_000_000:
                time.sleep((d - 1_000_000) / 1e9)
        last_flush = t0
        pend = None   # the last reaped batch: its slots are reused first, its bookkeeping done after
        # compiled closed-loop fast path (libaio): used between fences and trims, when no per-batch Python
        # work (verify, fault injection, open-loop pacing, stamping over mixed block sizes) is needed
        fast = getattr(engine, "closed_loop", None)
        if open_loop or verify or faults is not None or (stamp and not one_lbs):
            fast = None
        stops = np.append(np.flatnonzero((plan["flags"] & FLAG_FENCE) | (ops == OP_TRIM)), n)
        st = np.zeros(6, dtype=np.int64)     # the compiled loop's state (aio_kernel.closed_loop)
        try:
            while True:
                now = pc()
                if not stopping and (stop.value or self.failed or (deadline and now >= deadline)):
                    stopping = True
                fence_blocked = due_wait = False
                if not stopping and i < n and nfree:
                    k = min(nfree, n - i, batch)
                    while fp < nf and fences[fp] < i:
                        fp += 1
                    if fp < nf:
                        f = int(fences[fp])
                        if f == i:
                            if inflight:
                                k, fence_blocked = 0, True
                            elif fp + 1 < nf:
                                k = min(k, int(fences[fp + 1]) - i)
                        elif f < i + k:
                            k = f - i
                    if open_loop and k:
                        k = int(np.searchsorted(intended[i:i + k], now - t0, side="right"))
                        due_wait = k == 0
                    if k:
                        sl = free[nfree - k:nfree].copy()
                        nfree -= k
                        j = i + k
                        slot_pidx[sl] = np.arange(i, j)
                        if stamp:
                            w = ops[i:j] == OP_WRITE
                            if w.any():
                                self._stamp(words, sl[w], tags[i:j][w], off[i:j][w], ln[i:j][w], tg[i:j][w],
                                            lbs, one_lbs)
                        t = pc()
                        ts = engine.submit(sl, ops[i:j], tg[i:j], off[i:j], ln[i:j])
                        if ts is None:
                            sub[i:j] = t - t0
                            sdone[i:j] = pc() - t0
                        else:
                            sub[i:j] = ts[0] - t0
                            sdone[i:j] = ts[1] - t0
                        inflight += k
                        self.n_issued += k
                        if faults is not None and faults.stalling(self.gidx[i:j]):
                            time.sleep(faults.stall_s)      # an injected stall: the I/Os in flight wait for it
                        if self.t_first < 0:
                            self.t_first = int(sub[i])
                        if loop and i < half <= j:
                            self._flush(ops, tg, ln, pc() - t0)
                        i = j
                        if loop and i == n:   # completions of this pass are folded in before reuse
                            self._flush(ops, tg, ln, pc() - t0)
                            i = fp = 0
                            self.passes += 1
                if pend is not None:
                    p, r, t = pend
                    pend = None
                    if faults is not None and not verify:
                        fe = faults.failing(self.gidx[p])
                        if fe.any():
                            r = np.where(fe > 0, -fe, r)
                    comp[p] = t - t0
                    res[p] = r
                    bad = r != ln[p]
                    if bad.any():
                        self._record_errors(p[bad], r[bad], ops, off, ln)
                    m = len(p)
                    done_log[self._nd:self._nd + m] = p
                    self._nd += m
                if fast is not None and not stopping and i < n:
                    e = int(stops[np.searchsorted(stops, i)])
                    if loop and i < half:
                        e = min(e, half)
                    if e > i:
                        now = pc()
                        until = min(now + 50_000_000, last_flush + cfg.flush_ns, deadline or now + 50_000_000)
                        i0, nd0 = i, self._nd
                        st[:5] = (i, nfree, inflight, nd0, 0)
                        why = fast(st, e, until, t0, stamp, one_lbs, ops, tg, off, ln, tags, words, free,
                                   slot_pidx, sub, sdone, comp, res, done_log, cfg.reap_batch or qd)
                        if why is None:
                            fast = None
                        elif why >= 0:
                            i, nfree, inflight, self._nd = int(st[0]), int(st[1]), int(st[2]), int(st[3])
                            if st[4]:   # a syscall failed: the Python path below handles (and reports) it
                                fast = None
                            self.n_issued += i - i0
                            if self.t_first < 0 and i > i0:
                                self.t_first = int(sub[i0])
                            if self._nd > nd0:
                                p = done_log[nd0:self._nd]
                                bad = res[p] != ln[p]
                                if bad.any():
                                    self._record_errors(p[bad], res[p][bad], ops, off, ln)
                            if loop and i0 < half <= i:
                                self._flush(ops, tg, ln, pc() - t0)
                            if loop and i == n:
                                self._flush(ops, tg, ln, pc() - t0)
                                i = fp = 0
                                self.passes += 1
                            now = pc()
                            if now - last_flush >= cfg.flush_ns or self._nd + qd > len(done_log):
                                self._flush(ops, tg, ln, now - t0)
                                last_flush = now
                            continue
                if inflight == 0:
                    if i >= n or stopping:
                        break
                    if open_loop:
                        d = int(intended[i]) - (pc() - t0)
                        if d > 2_000_000:
                            time.sleep(min(d - 1_000_000, 100_000_000) / 1e9)
                    continue
                if not stopping and i < n and nfree and not fence_blocked and not due_wait:
                    s, r, tc = engine.reap(0, 0)
                else:
                    timeout = 200_000_000
                    if due_wait and nfree:
                        timeout = max(0, int(intended[i]) - (pc() - t0))
                    s, r, tc = engine.reap(1, timeout)
                m = len(s)
                if m:
                    t = pc() if tc is None else tc
                    p = slot_pidx[s]
                    if verify:   # before the slots' buffers are reused
                        if faults is not None:
                            fe = faults.failing(self.gidx[p])
                            if fe.any():
                                r = np.where(fe > 0, -fe, r)
                        self._verify(words, s, p, r, ops, tags, off, ln, tg, lbs, faults)
                    pend = (p, r, t)
                    free[nfree:nfree + m] = s
                    nfree += m
                    inflight -= m
                if now - last_flush >= cfg.flush_ns or self._nd + qd > len(done_log):
                    self._flush(ops, tg, ln, now - t0)
                    last_flush = now
        finally:
            # drain whatever is still in flight (an exception above), so buffers outlive the kernel's use
            while inflight > 0:
                s, r, tc = engine.reap(1, 1_000_000_000)
                if len(s) == 0:
                    break
                inflight -= len(s)
            engine.close()
        self.ring_reaped = int(st[5])
        self._flush(ops, tg, ln, None)
        ru1 = resource.getrusage(resource.RUSAGE_SELF)
        del words, buffers
        try:
            mm.close()
        except BufferError:
            pass
        return self._result(i, open_loop, intended, ru1.ru_utime - ru0.ru_utime, ru1.ru_stime - ru0.ru_stime)

    # ---- helpers (off the per-I/O hot path or vectorised per batch) ---------------------------------------
    @staticmethod
    def _stamp(words, sl, tags, off, ln, tg, lbs, one_lbs):
        if one_lbs:
            content.stamp(words, sl, tags, off, ln, one_lbs)
            return
        for b in np.unique(lbs[tg]):
            sel = lbs[tg] == b
            content.stamp(words, sl[sel], tags[sel], off[sel], ln[sel], int(b))

    def _verify(self, words, s, p, r, ops, tags, off, ln, tg, lbs, faults):
        rd = (ops[p] == OP_READ) & (r == ln[p])
        if self.cfg.verify == "sampled":
            rd &= (self.gidx[p] % self.cfg.verify_every) == 0
        if not rd.any():
            return
        sl, pp = s[rd], p[rd]
        if faults is not None:
            c = faults.corrupting(self.gidx[pp])
            if c.any():
                words[sl[c], 0] ^= np.uint64(1)
        bad = np.zeros(len(pp), dtype=bool)
        for b in np.unique(lbs[tg[pp]]):
            sel = lbs[tg[pp]] == b
            bad[sel] = content.verify(words, sl[sel], tags[pp[sel]], off[pp[sel]], ln[pp[sel]], int(b))
        self.verify_checked += len(pp)
        if bad.any():
            nb = int(bad.sum())
            if self.verify_first is None:
                first = int(pp[bad][np.argmin(self.gidx[pp[bad]])])
                self.verify_first = {"index": int(self.gidx[first]), "tag": int(tags[first]),
                                     "target": int(tg[first]), "offset": int(off[first]),
                                     "length": int(ln[first])}
            self.verify_bad += nb

    def _record_errors(self, p, r, ops, off, ln):
        for e in np.unique(r[r < 0]):
            self.errors[int(-e)] = self.errors.get(int(-e), 0) + int((r == e).sum())
        self.short += int(((r >= 0) & (r < ln[p])).sum())
        if self.first_error is None:
            j = int(np.argmin(self.gidx[p]))
            self.first_error = {"index": int(self.gidx[p[j]]), "op": OP_NAMES[int(ops[p[j]])],
                                "offset": int(off[p[j]]), "length": int(ln[p[j]]), "result": int(r[j])}
        if self.cfg.on_error == "stop":
            self.failed = True

    def _flush(self, ops, tg, ln, now_rel):
        a, b = self._flushed, self._nd
        cpu = sum(os.times()[:2])
        cpu_sec = (now_rel if now_rel is not None else max(self.t_last, 0)) // 1_000_000_000
        cpu_st = self.seconds.get(int(cpu_sec))
        if cpu_st is None:
            cpu_st = self.seconds[int(cpu_sec)] = SecondStats(int(cpu_sec))
        cpu_st.cpu_s += cpu - self._cpu_mark
        self._cpu_mark = cpu
        if b > a:
            p = self._done_log[a:b]
            self._nd = self._flushed = 0
            r = self.res[p]
            ok = r == ln[p]
            lat = self.comp[p] - self.sub[p]
            self.t_last = max(self.t_last, int(self.comp[p].max()))
            bidx = bucket_index(lat)
            key = tg[p] * 3 + ops[p]
            for kv in np.unique(key[ok]):
                sel = ok & (key == kv)
                hk = (int(kv) // 3, OP_NAMES[int(kv) % 3])
                h = self.hists.get(hk)
                if h is None:
                    h = self.hists[hk] = LatencyHistogram()
                    self.counts[hk] = [0, 0]
                ls = lat[sel]
                h.record_buckets(bidx[sel], int(ls.sum()), int(ls.min()), int(ls.max()))
                ps = p[sel]
                self.slat.setdefault(hk, LatencyHistogram()).record(self.sdone[ps] - self.sub[ps])
                self.clat.setdefault(hk, LatencyHistogram()).record(self.comp[ps] - self.sdone[ps])
                self.counts[hk][0] += int(sel.sum())
                self.counts[hk][1] += int(r[sel].sum())
            sec = self.comp[p] // 1_000_000_000
            for sv in np.unique(sec):
                sel = sec == sv
                st = self.seconds.get(int(sv))
                if st is None:
                    st = self.seconds[int(sv)] = SecondStats(int(sv))
                so = sel & ok
                np.add.at(st.ios, ops[p[so]], 1)
                np.add.at(st.bytes, ops[p[so]], r[so])
                st.errors += int((sel & ~ok).sum())
                if so.any():
                    ls = lat[so]
                    st.hist.record_buckets(bidx[so], int(ls.sum()), int(ls.min()), int(ls.max()))
        wm = None if now_rel is None else now_rel // 1_000_000_000
        closed = [self.seconds.pop(s) for s in sorted(self.seconds) if wm is None or s < wm]
        if self.on_second is not None:
            self.on_second(closed, wm)

    def _result(self, issued, open_loop, intended, utime, stime) -> dict:
        lag = LatencyHistogram()
        lag_stats = None
        if open_loop:
            m = self.sub >= 0
            d = self.sub[m] - intended[m]
            lag.record(np.maximum(d, 0))
            lag_stats = {"n": int(m.sum()), "mean_us": float(d.mean() / 1e3) if d.size else None,
                         "max_us": float(d.max() / 1e3) if d.size else None,
                         "late_1ms": int((d > 1_000_000).sum())}
        return {"sub": self.sub, "comp": self.comp, "res": self.res, "gidx": self.gidx, "hists": self.hists,
                "slat": self.slat, "clat": self.clat,
                "lag": lag, "lag_stats": lag_stats, "issued": int(issued), "errors": self.errors,
                "short": self.short, "first_error": self.first_error, "failed": self.failed,
                "interrupted": bool(self.stop.value), "verify_checked": self.verify_checked,
                "verify_bad": self.verify_bad, "verify_first": self.verify_first,
                "cpu_user_s": utime, "cpu_sys_s": stime, "pid": os.getpid(), "counts": self.counts,
                "t_first": self.t_first, "t_last": self.t_last, "passes": self.passes, "issued_total": self.n_issued,
                "ring_reaped": self.ring_reaped}
