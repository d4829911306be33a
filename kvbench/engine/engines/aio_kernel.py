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
def submit_each(ctx, n, ptrs_addr, ts, stamps):
    """Submit n iocbs (pointer array at ptrs_addr) one per call; stamps[j] = submit time of iocb j.

    Returns the number submitted, or a negative errno when the first one was refused."""
    done = 0
    while done < n:
        _clock_gettime(CLOCK_MONOTONIC, ts.ctypes.data)
        stamps[done] = ts[0] * 1_000_000_000 + ts[1]
        r = _io_submit(ctx, 1, ptrs_addr + 8 * done)
        if r != 1:
            return done if r == 0 else (r if done == 0 else done)
        done += 1
    return done


@numba.njit(cache=True, nogil=True)
def fill_submit(ctx, slots, ops, tgts, offsets, lengths, fds, f_op, f_fd, f_n, f_off, iocb_base, ptrs, ts, stamps):
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
        if r != 1:
            return done if r == 0 else (r if done == 0 else done)
        done += 1
    return done
