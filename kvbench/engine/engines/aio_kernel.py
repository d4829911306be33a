"""Compiled submission loop for the libaio engine: one iocb per io_submit, each stamped just before its call.

Why one iocb per call: io_submit plugs the block queue for more than two iocbs and releases them only when
the call returns, so one call for a batch of 20 holds the first I/O back for the whole call (~100 us on a
VM). fio submits one iocb per call by default; this does the same, without a Python call per I/O.
clock_gettime(CLOCK_MONOTONIC) is the clock of time.perf_counter_ns on Linux, so the stamps compare with the
driver's. The C functions are bound by symbol name (numba ExternalFunction), so the kernel is cached on disk.
"""

from __future__ import annotations

import ctypes.util

import llvmlite.binding as llb
import numba
import numpy as np
from numba import types

for _name in ("libaio.so.1t64", "libaio.so.1"):
    try:
        llb.load_library_permanently(_name)
        break
    except RuntimeError:
        continue
else:  # pragma: no cover - the engine checks libaio before importing this module
    raise OSError("cannot load libaio.so.1")
llb.load_library_permanently(ctypes.util.find_library("c") or "libc.so.6")

_io_submit = types.ExternalFunction("io_submit", types.intc(types.uint64, types.int64, types.uint64))
_clock_gettime = types.ExternalFunction("clock_gettime", types.intc(types.intc, types.uint64))
CLOCK_MONOTONIC = 1


@numba.njit(cache=True, nogil=True)
def submit_each(ctx, n, ptrs_addr, ts, stamps, returned):
    """Submit n iocbs (pointer array at ptrs_addr) one per call; stamps[j] = time iocb j was handed to io_submit,
    returned[j] = time that call returned (slat is the difference, as fio's).

    Returns the number submitted, or a negative errno when the first one was refused."""
    done = 0
    while done < n:
        _clock_gettime(CLOCK_MONOTONIC, ts.ctypes.data)
        stamps[done] = ts[0] * 1_000_000_000 + ts[1]
        r = _io_submit(ctx, 1, ptrs_addr + 8 * done)
        _clock_gettime(CLOCK_MONOTONIC, ts.ctypes.data)
        returned[done] = ts[0] * 1_000_000_000 + ts[1]
        if r != 1:
            return done if r == 0 else (r if done == 0 else done)
        done += 1
    return done


@numba.njit(cache=True, nogil=True)
def fill_submit(ctx, slots, ops, tgts, offsets, lengths, fds, f_op, f_fd, f_n, f_off, iocb_base, ptrs, ts, stamps,
                returned):
    """Fill the iocbs of a batch (reads and writes) and submit them one per call, stamping each.

    Returns the number submitted, or a negative errno when the first one was refused; the pointer array is
    filled for the whole batch either way, so the caller can resubmit the rest."""
    k = slots.shape[0]
    for j in range(k):
        s = slots[j]
        f_op[s] = ops[j]                 # plan op 0/1 = IO_CMD_PREAD/IO_CMD_PWRITE
        f_fd[s] = fds[tgts[j]]
        f_n[s] = lengths[j]
        f_off[s] = offsets[j]
        ptrs[j] = iocb_base + s * 64
    done = 0
    while done < k:
        _clock_gettime(CLOCK_MONOTONIC, ts.ctypes.data)
        stamps[done] = ts[0] * 1_000_000_000 + ts[1]
        r = _io_submit(ctx, 1, ptrs.ctypes.data + 8 * done)
        _clock_gettime(CLOCK_MONOTONIC, ts.ctypes.data)
        returned[done] = ts[0] * 1_000_000_000 + ts[1]
        if r != 1:
            return done if r == 0 else (r if done == 0 else done)
        done += 1
    return done


_io_getevents = types.ExternalFunction(
    "io_getevents", types.intc(types.uint64, types.int64, types.int64, types.uint64, types.uint64))
EINTR = 4
LOOP_WINDOW, LOOP_TIME, LOOP_ERROR, LOOP_LOG_FULL = 0, 1, 2, 3


@numba.njit(cache=True, nogil=True)
def closed_loop(ctx, state, iend, until, t0, stamp, lbs,
                ops, tgts, offsets, lengths, tags, fds, f_op, f_fd, f_n, f_off, iocb_base, ptrs,
                ev_data, ev_res, ev_addr, words, free, slot_pidx, sub, sdone, comp, res, done_log, ts, tmo,
                reap_max, ring_hdr, ring_ev):
    """The closed loop of the driver for plan entries [state[0], iend) (reads/writes, no fence among them).

    Keeps the queue full: each freed slot gets the next plan entry at once (stamped with its write content,
    submitted one iocb per call with its submit time), completions are reaped with io_getevents, at most
    ``reap_max`` per call, and stamped once per reaped batch, like the driver does; sdone[i] is when io_submit
    returned (slat = sdone - sub, clat = comp - sdone, as fio splits them).

    ``reap_max`` is fio's iodepth_batch_complete_max (fio's default: 1). Reaping one completion and resubmitting
    one keeps the queue full as fio does: completions the device returned meanwhile wait in the kernel's ring
    and count as in flight, as they do in fio. Reaping all that are ready (``reap_max`` = qd) takes them in
    bursts that are resubmitted one io_submit each, so slots stand empty during the resubmission: measured at
    4 KiB QD32 on a virtio disk, 27 of 32 in flight (fio: 32.0) and a correspondingly lower clat. Completions
    already in the kernel's ring (``ring_hdr``/``ring_ev``, the context's mapped struct aio_ring; an empty
    ``ring_ev`` when not used) are taken from it without a system call, as fio's userspace_reap does: the same
    events io_getevents would return, minus the syscall; io_getevents waits only when the ring is empty.

    state = [i, nfree, inflight, nd, io_submit error, completions taken from the ring (added to)] is read and
    written back. Returns why it stopped: LOOP_WINDOW (plan entries up to iend submitted), LOOP_TIME
    (``until`` passed: the driver flushes and checks its stop flag), LOOP_ERROR (a result other than the
    length, or a syscall error in state[4]) or LOOP_LOG_FULL (done_log needs a flush)."""
    i, nfree, inflight, nd = state[0], state[1], state[2], state[3]
    state[4] = 0
    qd = slot_pidx.shape[0]
    wpb = lbs // 8
    ulbs = np.uint64(lbs)
    why = LOOP_WINDOW
    while True:
        while nfree > 0 and i < iend:
            s = free[nfree - 1]
            op = ops[i]
            f_op[s] = op                 # plan op 0/1 = IO_CMD_PREAD/IO_CMD_PWRITE
            f_fd[s] = fds[tgts[i]]
            f_n[s] = lengths[i]
            f_off[s] = offsets[i]
            if stamp and op == 1:
                first = offsets[i] // ulbs   # all uint64: numba turns uint64 mixed with int64 into float
                tag = tags[i]
                for b in range(lengths[i] // lbs):
                    v = tag ^ (first + np.uint64(b))
                    for w in range(b * wpb, (b + 1) * wpb):
                        words[s, w] = v
            ptrs[0] = iocb_base + s * 64
            _clock_gettime(CLOCK_MONOTONIC, ts.ctypes.data)
            t = ts[0] * 1_000_000_000 + ts[1]
            r = _io_submit(ctx, 1, ptrs.ctypes.data)
            if r != 1:                   # EAGAIN or a refused iocb: the driver's own path deals with it
                state[4] = r if r < 0 else -11
                why = LOOP_ERROR
                break
            _clock_gettime(CLOCK_MONOTONIC, ts.ctypes.data)
            sdone[i] = ts[0] * 1_000_000_000 + ts[1] - t0
            sub[i] = t - t0
            slot_pidx[s] = i
            nfree -= 1
            inflight += 1
            i += 1
        if why == LOOP_ERROR or i >= iend or inflight == 0:
            break
        if nd + qd > done_log.shape[0]:
            why = LOOP_LOG_FULL
            break
        _clock_gettime(CLOCK_MONOTONIC, ts.ctypes.data)
        now = ts[0] * 1_000_000_000 + ts[1]
        if now >= until:
            why = LOOP_TIME
            break
        left = until - now
        tmo[0] = left // 1_000_000_000
        tmo[1] = left % 1_000_000_000
        m = 0
        if ring_ev.shape[0] > 0:        # completions already in the ring: taken without a system call
            nr = ring_hdr[1]
            head = ring_hdr[2]
            while m < reap_max and head != ring_hdr[3]:
                ev_data[m] = ring_ev[head, 0]
                ev_res[m] = ring_ev[head, 2]
                head += 1
                if head >= nr:
                    head = 0
                m += 1
            if m:
                ring_hdr[2] = head      # after the events were copied: the kernel may then reuse their slots
                state[5] += m
        if m == 0:
            m = _io_getevents(ctx, 1, reap_max, ev_addr, tmo.ctypes.data)
        if m < 0:
            if m == -EINTR:
                continue
            state[4] = m
            why = LOOP_ERROR
            break
        if m == 0:
            continue
        _clock_gettime(CLOCK_MONOTONIC, ts.ctypes.data)
        tc = ts[0] * 1_000_000_000 + ts[1] - t0
        bad = False
        for e in range(m):
            s = ev_data[e]
            p = slot_pidx[s]
            comp[p] = tc
            res[p] = ev_res[e]
            if ev_res[e] != lengths[p]:
                bad = True
            done_log[nd] = p
            nd += 1
            free[nfree] = s
            nfree += 1
        inflight -= m
        if bad:
            why = LOOP_ERROR
            break
    state[0], state[1], state[2], state[3] = i, nfree, inflight, nd
    return why
