"""libaio: Linux native AIO through libaio.so.1, with the iocb and io_event arrays as numpy structured arrays.

python-libaio (0.9.5) wraps every I/O in an ``AIOBlock`` object; measured on this 2-core VM that path tops
out near 27k IOPS at 4 KiB QD32 (DESIGN.md). Here the iocbs live in one numpy array (64 bytes each, the
kernel ABI layout of ``struct iocb``), a batch is prepared with a few vectorised field assignments and
submitted with one ``io_submit`` call on an array of iocb pointers, and completions are reaped as a whole
``io_event`` array: no Python object per I/O. Trims are done synchronously (fallocate punch-hole /
BLKDISCARD) since AIO has no discard command; they complete through the same reap path.
"""

from __future__ import annotations

import ctypes
import errno
import platform

import numpy as np

from kvbench.engine.engines.base import CAP_ALIGNED, CAP_ASYNC, EMPTY, Engine
from kvbench.errors import EngineError

IOCB_DTYPE = np.dtype([
    ("data", "u8"), ("key", "u4"), ("rw_flags", "u4"), ("opcode", "i2"), ("reqprio", "i2"), ("fildes", "i4"),
    ("buf", "u8"), ("nbytes", "u8"), ("offset", "i8"), ("pad3", "i8"), ("flags", "u4"), ("resfd", "u4"),
])
EVENT_DTYPE = np.dtype([("data", "u8"), ("obj", "u8"), ("res", "i8"), ("res2", "i8")])
assert IOCB_DTYPE.itemsize == 64 and EVENT_DTYPE.itemsize == 32
IO_CMD_PREAD, IO_CMD_PWRITE = 0, 1
_OP_TO_CMD = np.array([IO_CMD_PREAD, IO_CMD_PWRITE, -1], dtype=np.int16)


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_int64), ("tv_nsec", ctypes.c_long)]


_lib = None
_submit_each = None
_closed_loop = None


def _load():
    global _lib
    if _lib is None:
        last = None
        for name in ("libaio.so.1t64", "libaio.so.1"):
            try:
                lib = ctypes.CDLL(name)
                break
            except OSError as e:
                last = e
        else:
            raise OSError(f"cannot load libaio.so.1 ({last})")
        vp, cl = ctypes.c_void_p, ctypes.c_long
        lib.io_setup.argtypes, lib.io_setup.restype = [ctypes.c_int, ctypes.POINTER(ctypes.c_ulong)], ctypes.c_int
        lib.io_destroy.argtypes, lib.io_destroy.restype = [ctypes.c_ulong], ctypes.c_int
        lib.io_submit.argtypes, lib.io_submit.restype = [ctypes.c_ulong, cl, vp], ctypes.c_int
        lib.io_getevents.argtypes = [ctypes.c_ulong, cl, cl, vp, vp]
        lib.io_getevents.restype = ctypes.c_int
        _lib = lib
    return _lib


def _warm_iocbs():
    """An iocb array whose field views have the layout the engine's have: a field of a structured array of two or
    more records is strided ('A' to numba), of one record contiguous ('C'). Warming the kernels on a one-record
    array compiled the 'C' specialisation, and the engine's own call then compiled the 'A' one inside the timed
    window: on a fresh machine a 0.6 s run completed 4 I/Os."""
    return np.zeros(2, dtype=IOCB_DTYPE)


def submit_each_kernel():
    """The compiled one-iocb-per-call submission loop (see aio_kernel); compiled once, then cached on disk."""
    global _submit_each
    if _submit_each is None:
        import numpy as _np

        from kvbench.engine.engines.aio_kernel import fill_submit, submit_each
        submit_each(0, 0, 0, _np.zeros(2, _np.int64), _np.zeros(1, _np.int64), _np.zeros(1, _np.int64))
        iocbs = _warm_iocbs()
        z = _np.zeros(0, _np.int64)
        fill_submit(0, z, _np.zeros(0, _np.uint8), z, _np.zeros(0, _np.uint64), z, _np.zeros(1, _np.int32),
                    iocbs["opcode"], iocbs["fildes"], iocbs["nbytes"], iocbs["offset"], 0,
                    _np.zeros(1, _np.uint64), _np.zeros(2, _np.int64), _np.zeros(1, _np.int64),
                    _np.zeros(1, _np.int64))
        _submit_each = (submit_each, fill_submit)
    return _submit_each


def closed_loop_kernel():
    """The compiled closed-loop fast path (aio_kernel.closed_loop), compiled for the driver's array types."""
    global _closed_loop
    if _closed_loop is None:
        from kvbench.engine.engines.aio_kernel import closed_loop
        i64, u8 = np.int64, np.uint64
        iocbs, events = _warm_iocbs(), np.zeros(2, dtype=EVENT_DTYPE)
        z = np.zeros(1, i64)
        closed_loop(0, np.zeros(6, i64), 0, 0, 0, True, 512, np.zeros(1, np.uint8), z, np.zeros(1, u8), z,
                    np.zeros(1, u8), np.zeros(1, np.int32), iocbs["opcode"], iocbs["fildes"], iocbs["nbytes"],
                    iocbs["offset"], 0, np.zeros(1, u8), events["data"], events["res"], 0,
                    np.zeros((1, 64), u8), z, z, z, z, z, z, z, np.zeros(2, i64), np.zeros(2, i64), 1,
                    np.zeros(8, np.uint32), np.zeros((0, 4), i64))
        _closed_loop = closed_loop
    return _closed_loop


AIO_RING_MAGIC = 0xA10A10A1


def _ring_views(ctx, enabled=True):
    """The kernel's completion ring of an AIO context, mapped in this process at the context's address
    (struct aio_ring: id, nr, head, tail, magic, compat, incompat, header_length; then nr io_events): the header
    as uint32[8] and the events as int64[nr, 4] (data, obj, res, res2). fio reads it the same way (its
    userspace_reap). Only on x86-64, whose loads are not reordered with other loads or later stores (elsewhere
    reading the ring needs memory barriers); an empty events view when not used: io_getevents only."""
    none = np.zeros(8, np.uint32), np.zeros((0, 4), np.int64)
    if not enabled or platform.machine() not in ("x86_64", "AMD64"):
        return none
    hdr = np.ctypeslib.as_array((ctypes.c_uint32 * 8).from_address(ctx))
    if int(hdr[4]) != AIO_RING_MAGIC or int(hdr[6]) != 0 or int(hdr[7]) != 32:
        return none
    nr = int(hdr[1])
    ev = np.ctypeslib.as_array((ctypes.c_int64 * (4 * nr)).from_address(ctx + 32)).reshape(nr, 4)
    return hdr, ev


class LibaioEngine(Engine):
    name = "libaio"
    caps = frozenset({CAP_ASYNC, CAP_ALIGNED})
    kinds = frozenset({"file", "block"})

    @classmethod
    def check_available(cls) -> None:
        _load()

    @classmethod
    def prepare(cls) -> None:
        if cls.submit_mode == "each":
            try:
                submit_each_kernel()
                closed_loop_kernel()
            except Exception:  # noqa: BLE001 - the batch path is used instead
                pass

    submit_mode = "each"    # "each": one iocb per io_submit, stamped one by one; "batch": one call per batch
    user_reap = True        # compiled loop: take completions already in the kernel's ring without a system call

    def __init__(self, targets, qd, buffers, buf_addr):
        super().__init__(targets, qd, buffers, buf_addr)
        lib = _load()
        self._lib = lib
        self._each = None               # (submit_each, fill_submit) compiled kernels
        self._loop = None               # the compiled closed loop (driver fast path)
        if self.submit_mode == "each":
            try:
                self._each = submit_each_kernel()
                self._loop = closed_loop_kernel()
            except Exception:  # noqa: BLE001 - numba missing or failing: the batch path is still correct
                self._each = self._loop = None
        self._ctx = ctypes.c_ulong(0)
        r = lib.io_setup(qd, ctypes.byref(self._ctx))
        if r < 0:
            raise EngineError(f"io_setup({qd}) failed: {errno.errorcode.get(-r, r)}",
                              "lower --qd or raise /proc/sys/fs/aio-max-nr")
        # at least two records, so that the field views are strided at every depth, as in the warm-up
        # (_warm_iocbs): at --qd 1 one record gave contiguous views and a second compile on the first submit.
        # io_setup and io_getevents are told qd; the spare record is never submitted.
        nrec = max(qd, 2)
        self.iocbs = np.zeros(nrec, dtype=IOCB_DTYPE)
        self.iocbs["data"] = np.arange(nrec)
        self.iocbs["buf"] = buf_addr + np.arange(nrec, dtype=np.uint64) * np.uint64(self.slot_bytes)
        self._iocb_base = np.uint64(self.iocbs.ctypes.data)
        self.events = np.zeros(nrec, dtype=EVENT_DTYPE)
        self._ev_ptr = self.events.ctypes.data
        self._ptrs = np.zeros(qd, dtype=np.uint64)
        self._ptrs_addr = self._ptrs.ctypes.data
        self._stamps = np.zeros((2, qd), dtype=np.int64)    # [handed to io_submit; io_submit returned]
        self._tsbuf = np.zeros(2, dtype=np.int64)
        self._ts = _Timespec()
        self._ts_ptr = ctypes.addressof(self._ts)
        self._stash_s, self._stash_r = [], []   # completions reaped inside submit (partial io_submit, trims)
        self._f_op, self._f_fd = self.iocbs["opcode"], self.iocbs["fildes"]
        self._f_n, self._f_off = self.iocbs["nbytes"], self.iocbs["offset"]
        self._tmo = np.zeros(2, dtype=np.int64)
        self._ring_hdr, self._ring_ev = _ring_views(self._ctx.value, self.user_reap)

    def closed_loop(self, state, iend, until, t0, stamp, lbs, ops, tgts, offsets, lengths, tags, words, free,
                    slot_pidx, sub, sdone, comp, res, done_log, reap_max=1):
        """Run the driver's closed loop in compiled code (see aio_kernel.closed_loop), reaping at most
        ``reap_max`` completions per io_getevents (fio's iodepth_batch_complete_max); None when unavailable
        (no compiled kernel), -1 when not now (completions stashed by the Python path, e.g. trims, are
        still to be handed over through reap)."""
        if self._loop is None:
            return None
        if self._stash_s:
            return -1
        return self._loop(self._ctx.value, state, iend, until, t0, stamp, lbs, ops, tgts, offsets, lengths, tags,
                          self.fds, self._f_op, self._f_fd, self._f_n, self._f_off, int(self._iocb_base),
                          self._ptrs, self.events["data"], self.events["res"], self._ev_ptr, words, free,
                          slot_pidx, sub, sdone, comp, res, done_log, self._tsbuf, self._tmo,
                          max(1, min(int(reap_max), self.qd)), self._ring_hdr, self._ring_ev)

    def submit(self, slots, ops, tgts, offsets, lengths):
        """Start the I/Os; returns per-I/O [submit; submit-returned] times (perf_counter_ns clock), or None."""
        stamped = self._each is not None
        if (ops == 2).any():
            stamped = False
            trim = ops == 2
            for s, t, o, n in zip(slots[trim], tgts[trim], offsets[trim], lengths[trim]):
                r = self.targets[int(t)].trim(int(o), int(n))
                self._stash_s.append(np.array([s], dtype=np.int64))
                self._stash_r.append(np.array([n if r == 0 else r], dtype=np.int64))
            keep = ~trim
            slots, ops, tgts, offsets, lengths = slots[keep], ops[keep], tgts[keep], offsets[keep], lengths[keep]
        k = len(slots)
        if k == 0:
            return None
        ctx = self._ctx.value
        if self._each is not None:      # fill and submit in the compiled loop
            r = self._each[1](ctx, slots, ops, tgts, offsets, lengths, self.fds, self._f_op, self._f_fd,
                              self._f_n, self._f_off, int(self._iocb_base), self._ptrs, self._tsbuf, self._stamps[0],
                              self._stamps[1])
        else:                           # vectorised fill, one io_submit for the batch
            self._f_op[slots] = _OP_TO_CMD[ops]
            self._f_fd[slots] = self.fds[tgts]
            self._f_n[slots] = lengths
            self._f_off[slots] = offsets
            ptrs = self._ptrs[:k]
            np.multiply(slots, 64, out=ptrs, casting="unsafe")
            ptrs += self._iocb_base
            r = None
        done = 0
        while done < k:
            if r is None:
                if self._each is not None:
                    r = self._each[0](ctx, k - done, self._ptrs_addr + 8 * done, self._tsbuf,
                                      self._stamps[0, done:k], self._stamps[1, done:k])
                else:
                    r = self._lib.io_submit(ctx, k - done, self._ptrs_addr + 8 * done)
            if r > 0:
                done += r
            elif r == -errno.EAGAIN:
                self._reap_into_stash(1)
            else:  # the first remaining iocb was rejected: complete it with the error, go on with the rest
                self._stash_s.append(np.array([slots[done]], dtype=np.int64))
                self._stash_r.append(np.array([r if r < 0 else -errno.EIO], dtype=np.int64))
                done += 1
            r = None
        return self._stamps[:, :k].copy() if stamped else None

    def _getevents(self, min_nr, timeout_ns):
        if timeout_ns is None:
            tsp = None
        else:
            self._ts.tv_sec, self._ts.tv_nsec = divmod(max(int(timeout_ns), 0), 1_000_000_000)
            tsp = self._ts_ptr
        while True:
            n = self._lib.io_getevents(self._ctx.value, min_nr, self.qd, self._ev_ptr, tsp)
            if n >= 0:
                return n
            if n != -errno.EINTR:
                raise EngineError(f"io_getevents failed: {errno.errorcode.get(-n, n)}", "report this bug")
            if tsp is not None:
                return 0

    def _reap_into_stash(self, min_nr):
        n = self._getevents(min_nr, None)
        if n:
            self._stash_s.append(self.events["data"][:n].astype(np.int64))
            self._stash_r.append(self.events["res"][:n].copy())

    def reap(self, min_nr, timeout_ns):
        if self._stash_s:
            n = self._getevents(0, 0)
            s = self._stash_s + [self.events["data"][:n].astype(np.int64)]
            r = self._stash_r + [self.events["res"][:n].copy()]
            self._stash_s, self._stash_r = [], []
            return np.concatenate(s), np.concatenate(r), None
        n = self._getevents(min_nr, timeout_ns)
        if n == 0:
            return EMPTY, EMPTY, None
        ev = self.events[:n]
        return ev["data"].astype(np.int64), ev["res"].copy(), None

    def close(self) -> None:
        if self._ctx.value:
            self._lib.io_destroy(self._ctx.value)
            self._ctx = ctypes.c_ulong(0)
