"""A page-mapped flash translation layer model: what NAND writes a host write stream costs.

Used where a drive exposes no NAND counter (no OCP C0h log, and in CI): the device write amplification of a
write/trim stream (an I/O plan, a fio iolog, a synthetic pattern) on a drive with a stated capacity,
over-provisioning, erase-block size and garbage-collection policy.

Model: user space of ``U`` pages mapped page by page onto ``B`` erase blocks of ``block_pages`` pages
(``B * block_pages ~= U * (1 + op)``). Host and GC writes append at one write frontier; a full block is closed;
when fewer than ``min_free_blocks`` blocks are free, GC picks a victim (greedy: fewest valid pages, found in
O(1) through per-valid-count buckets; FIFO: the oldest closed block), copies its valid pages to the frontier
and erases it. Trim invalidates pages without writing. The kernel is one sequential numba loop over pages:
no Python object per write.

Write streams (NVMe FDP reclaim-unit handles, or streams): with ``streams`` K > 1 the drive keeps K open erase
blocks, one per stream; each host write names its stream, and an erase block only ever holds pages of one
stream. GC copies a victim's valid pages into the victim's own stream (``gc_stream="same"``: FDP's persistently
isolated reclaim units) or one stream up (``"age"``: a page that survived a clean is older, so colder; the
oldest stream keeps them). Which host write goes to which stream is the placement rule
(:mod:`kvbench.analysis.placement`). One stream is the model above, page for page.

Analytic reference (validated in tests/analysis/test_ftl.py): for uniform random single-page writes, the fraction of
valid pages ``u`` in a cleaned block satisfies ``u = exp(-alpha (1 - u))`` with ``alpha = physical / user =
1 + op``, so ``WAF = 1 / (1 - u) = alpha / (alpha + W0(-alpha exp(-alpha)))`` (W0: principal Lambert W).
Source: L. Xiang and B. M. Kurkoski, "An Improved Analytic Expression for Write Amplification in NAND Flash",
ICNC 2012 (arXiv:1110.4245), derived for greedy GC: WAF 2.36 at over-provisioning 0.3 against 2.35 simulated
(Agarwal and Marrow's earlier ``(1 + op) / (2 op)`` gives 2.17). The same expression is exact for FIFO (LRW)
cleaning (P. Desnoyers, "Analytic Modeling of SSD Write Performance", SYSTOR 2012); greedy with small erase
blocks lies a little below it (W. Bux and I. Iliadis, Performance Evaluation 67, 2010), by under 1% at 256
pages per block.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from kvbench.errors import SpecError

GC_POLICIES = {"greedy": 0, "fifo": 1}   # name -> kernel code
GC_STREAMS = {"same": 0, "age": 1}        # where GC copies go: the victim's stream, or one stream older
MAX_STREAMS = 64
OP_WRITE, OP_TRIM = 1, 2                 # same codes as kvbench.engine.plan.PLAN_DTYPE "op"; 0 (read) is skipped
_MAX_PAGES = 2**31 - 2                   # page numbers are int32 in the kernel

# counters[] slots
C_HOST, C_NAND, C_GC, C_ERASE, C_TRIM, C_ERROR = range(6)


@dataclass(frozen=True)
class FtlConfig:
    """A modelled drive: user capacity, page size, over-provisioning, erase-block size, GC policy."""

    user_bytes: int
    page_size: int = 4096
    op: float = 0.07                  # (physical - user) / user
    block_pages: int = 256            # pages per erase block
    gc: str = "greedy"
    min_free_blocks: int = 2          # GC runs when fewer blocks than this are free (>= 2 keeps GC able to copy)
    streams: int = 1                  # write streams / reclaim-unit handles (one open erase block each)
    gc_stream: str = "same"           # GC destination: the victim's stream, or one stream older ("age")

    @property
    def user_pages(self) -> int:
        return self.user_bytes // self.page_size

    @property
    def blocks(self) -> int:
        return int(self.user_pages * (1.0 + self.op)) // self.block_pages

    @property
    def physical_pages(self) -> int:
        return self.blocks * self.block_pages

    @property
    def effective_op(self) -> float:
        """Over-provisioning after rounding the physical space down to whole erase blocks."""
        return self.physical_pages / self.user_pages - 1.0

    def validate(self) -> "FtlConfig":
        if self.gc not in GC_POLICIES:
            raise SpecError(f"unknown GC policy {self.gc!r}", f"choose one of: {', '.join(GC_POLICIES)}")
        if self.page_size <= 0 or self.page_size % 512:
            raise SpecError(f"page size {self.page_size} is not a positive multiple of 512 bytes",
                            "give e.g. --page-size 4KiB or 16KiB")
        if self.user_bytes % self.page_size:
            raise SpecError(f"capacity {self.user_bytes} B is not a whole number of {self.page_size}-byte pages",
                            "give a capacity that is a multiple of the page size")
        if not (0.0 < self.op <= 10.0) or not math.isfinite(self.op):
            raise SpecError(f"over-provisioning {self.op} is outside (0, 10]",
                            "give --op as (physical - user) / user, e.g. 0.07 or 0.28")
        if self.block_pages < 2:
            raise SpecError(f"erase block of {self.block_pages} page(s) is too small", "give --block-pages >= 2")
        if self.min_free_blocks < 2:
            raise SpecError("min_free_blocks must be >= 2", "GC needs one free block to copy into")
        if not (1 <= int(self.streams) <= MAX_STREAMS):
            raise SpecError(f"--streams {self.streams} is outside 1..{MAX_STREAMS}", "give e.g. --streams 2")
        if self.gc_stream not in GC_STREAMS:
            raise SpecError(f"unknown GC stream rule {self.gc_stream!r}", f"choose one of: {', '.join(GC_STREAMS)}")
        if self.physical_pages > _MAX_PAGES:
            raise SpecError(f"{self.physical_pages} physical pages exceed the model's 2^31 page limit",
                            "use a larger --page-size or a scaled-down --capacity (WAF depends on ratios, "
                            "not on absolute size)")
        spare_blocks = self.blocks - -(-self.user_pages // self.block_pages)
        if spare_blocks < self.min_free_blocks + 1 + self.streams:
            raise SpecError(f"over-provisioning {self.op} leaves {spare_blocks} spare erase block(s) of "
                            f"{self.block_pages} pages; the model needs at least "
                            f"{self.min_free_blocks + 1 + self.streams} (one open per stream, {self.streams} stream(s))",
                            "raise --op or --capacity, or lower --block-pages or --streams")
        return self


@dataclass(frozen=True)
class FtlCounters:
    """Page counts since the model was created (or since a snapshot, by subtraction)."""

    host_pages: int
    nand_pages: int
    gc_pages: int
    erases: int
    trimmed_pages: int

    @property
    def waf(self) -> float:
        """NAND pages programmed / host pages written (NaN when nothing was written)."""
        return self.nand_pages / self.host_pages if self.host_pages else float("nan")

    def __sub__(self, other: "FtlCounters") -> "FtlCounters":
        return FtlCounters(self.host_pages - other.host_pages, self.nand_pages - other.nand_pages,
                           self.gc_pages - other.gc_pages, self.erases - other.erases,
                           self.trimmed_pages - other.trimmed_pages)

    def to_dict(self) -> dict:
        return {"host_pages": self.host_pages, "nand_pages": self.nand_pages, "gc_pages": self.gc_pages,
                "erases": self.erases, "trimmed_pages": self.trimmed_pages, "waf": self.waf}


def _kernel():
    """The compiled kernel (:mod:`kvbench.analysis.ftl_kernel`, cached on disk), imported on first use so that
    importing this module does not import numba."""
    global _KERNEL
    if _KERNEL is None:
        from kvbench.analysis.ftl_kernel import apply

        _KERNEL = apply
    return _KERNEL


_KERNEL = None


@dataclass
class FtlModel:
    """The state of one modelled drive; feed it write/trim extents in pages or bytes."""

    config: FtlConfig
    _arrays: dict = field(init=False, repr=False)

    def __post_init__(self):
        cfg = self.config.validate()
        B, bp, K = cfg.blocks, cfg.block_pages, int(cfg.streams)
        free = np.arange(B, dtype=np.int32)
        a = {
            "l2p": np.full(cfg.user_pages, -1, dtype=np.int32),
            "p2l": np.full(cfg.physical_pages, -1, dtype=np.int32),
            "valid": np.zeros(B, dtype=np.int32),
            "state": np.zeros(B, dtype=np.int8),
            "head": np.full(bp + 1, -1, dtype=np.int32),
            "nxt": np.full(B, -1, dtype=np.int32),
            "prv": np.full(B, -1, dtype=np.int32),
            "ring": np.full(B, -1, dtype=np.int32),
            "rmeta": np.zeros(3, dtype=np.int64),      # head, tail, count of closed blocks (FIFO)
            "free": free,
            "fmeta": np.array([K % B, 0, B - K], dtype=np.int64),  # head, tail, count; blocks 0..K-1 are open
            "cur": np.zeros(2 * K, dtype=np.int64),    # per stream: open block, write pointer
            "bstream": np.zeros(B, dtype=np.int64),    # stream of each erase block
            "counters": np.zeros(6, dtype=np.int64),
        }
        a["cur"][0::2] = np.arange(K)
        a["bstream"][:K] = np.arange(K)
        a["state"][:K] = 1
        self._arrays = a

    # --- feeding ------------------------------------------------------------------------------------------
    def apply_pages(self, ops, starts, counts, streams=None) -> None:
        """Apply extents in page units: ``ops`` (1 write, 2 trim, others skipped), first page, page count, and
        the write stream of each (default 0)."""
        ops = np.ascontiguousarray(ops, dtype=np.uint8)
        starts = np.ascontiguousarray(starts, dtype=np.int64)
        counts = np.ascontiguousarray(counts, dtype=np.int64)
        streams = np.zeros(len(ops), dtype=np.int64) if streams is None else \
            np.ascontiguousarray(streams, dtype=np.int64)
        if not (ops.shape == starts.shape == counts.shape == streams.shape):
            raise SpecError("ops, starts, counts and streams differ in length", "pass arrays of one length")
        if len(ops) == 0:
            return
        if streams.min() < 0 or streams.max() >= self.config.streams:
            raise SpecError(f"write stream {int(streams.max())} outside the drive's {self.config.streams} stream(s)",
                            "give --streams at least the number of placement classes")
        live = (ops == OP_WRITE) | (ops == OP_TRIM)
        if live.any():
            lo, hi = starts[live].min(), (starts[live] + counts[live]).max()
            if lo < 0 or hi > self.config.user_pages or counts[live].min() < 0:
                raise SpecError(f"extent outside the modelled capacity: pages [{lo}, {hi}) vs "
                                f"{self.config.user_pages} user pages",
                                "give a --capacity at least as large as the highest offset written")
        a, cfg = self._arrays, self.config
        _kernel()(ops, starts, counts, streams, a["l2p"], a["p2l"], a["valid"], a["state"], a["head"], a["nxt"],
                  a["prv"], a["ring"], a["rmeta"], a["free"], a["fmeta"], a["cur"], a["bstream"], a["counters"],
                  np.int64(cfg.block_pages), np.int64(GC_POLICIES[cfg.gc]), np.int64(cfg.min_free_blocks),
                  np.int64(GC_STREAMS[cfg.gc_stream]))
        if a["counters"][C_ERROR]:
            raise SpecError(f"FTL model ran out of free blocks (code {a['counters'][C_ERROR]})",
                            "raise --op or lower --block-pages")

    def warm(self) -> None:
        """Compile or load the kernel now (so that timings exclude it)."""
        a, e = self._arrays, np.zeros(0, np.int64)
        _kernel()(np.zeros(0, np.uint8), e, e, e, a["l2p"], a["p2l"], a["valid"], a["state"], a["head"], a["nxt"],
                  a["prv"], a["ring"], a["rmeta"], a["free"], a["fmeta"], a["cur"], a["bstream"], a["counters"],
                  np.int64(2), np.int64(0), np.int64(2), np.int64(0))

    def apply_bytes(self, ops, offsets, lengths) -> None:
        """Apply extents in bytes: a write touching part of a page programs the whole page (read-modify-write);
        a trim only drops pages it covers completely."""
        self.apply_pages(*bytes_to_pages(ops, offsets, lengths, self.config.page_size))

    def fill_sequential(self) -> None:
        """Write every user page once, in order (the usual preconditioning before a steady-state measurement)."""
        U = self.config.user_pages
        n = -(-U // 65536)
        starts = np.arange(n, dtype=np.int64) * 65536
        self.apply_pages(np.full(n, OP_WRITE, np.uint8), starts, np.minimum(65536, U - starts))

    # --- reading ------------------------------------------------------------------------------------------
    @property
    def counters(self) -> FtlCounters:
        c = self._arrays["counters"]
        return FtlCounters(int(c[C_HOST]), int(c[C_NAND]), int(c[C_GC]), int(c[C_ERASE]), int(c[C_TRIM]))

    def check(self) -> None:
        """Consistency (tests): l2p and p2l are inverse, valid counts match, every erase block accounted for."""
        a, bp = self._arrays, self.config.block_pages
        l2p, p2l = a["l2p"], a["p2l"]
        mapped = np.flatnonzero(l2p >= 0)
        assert np.array_equal(p2l[l2p[mapped]], mapped), "l2p/p2l disagree"
        assert int((p2l >= 0).sum()) == len(mapped), "stale physical pages"
        per_block = np.bincount(np.flatnonzero(p2l >= 0) // bp, minlength=self.config.blocks)
        assert np.array_equal(per_block, a["valid"]), "valid counts disagree"
        # every erase block is in exactly one place between calls: the free ring (state 0), open at one stream's
        # frontier (1), or closed (2) in the GC's order (greedy: the list of its valid count; fifo: the ring);
        # none is left mid-clean (3)
        state, B = a["state"], self.config.blocks
        assert not (state == 3).any(), "an erase block was left mid-clean"
        fh, _, fn = (int(x) for x in a["fmeta"])
        free = a["free"][(fh + np.arange(fn)) % B]
        assert sorted(free.tolist()) == np.flatnonzero(state == 0).tolist(), "free ring and free blocks disagree"
        assert sorted(a["cur"][0::2].tolist()) == np.flatnonzero(state == 1).tolist(), "open blocks disagree"
        if self.config.gc == "greedy":
            listed = []
            for v in range(bp + 1):
                blk, prev = int(a["head"][v]), -1
                while blk >= 0:
                    assert a["valid"][blk] == v and a["prv"][blk] == prev, f"block {blk} misfiled in bucket {v}"
                    listed.append(blk)
                    prev, blk = blk, int(a["nxt"][blk])
        else:
            rh, _, rn = (int(x) for x in a["rmeta"])
            listed = a["ring"][(rh + np.arange(rn)) % B].tolist()
        assert sorted(listed) == np.flatnonzero(state == 2).tolist(), "closed blocks and the GC's order disagree"


# --- analytic reference -----------------------------------------------------------------------------------
def lambert_w0(x: float) -> float:
    """Principal branch of Lambert W for x in [-1/e, inf) (Halley iteration; no scipy needed)."""
    if x < -1.0 / math.e - 1e-15:
        raise ValueError("lambert_w0 is real only for x >= -1/e")
    if x == 0.0:
        return 0.0
    # near the branch point; x down to 1e-15 below -1/e (rounding noise) starts at -1, the branch point itself
    w = math.log1p(x) if x > -0.3 else -1.0 + math.sqrt(max(0.0, 2.0 * (1.0 + math.e * x)))
    for _ in range(100):
        ew = math.exp(w)
        f = w * ew - x
        step = f / (ew * (w + 1.0) - (w + 2.0) * f / (2.0 * w + 2.0)) if w != -1.0 else 0.0
        w -= step
        if abs(step) < 1e-15 * (1.0 + abs(w)):
            break
    return w


def analytic_waf_uniform(op: float) -> float:
    """WAF of uniform random single-page writes with LRW/greedy cleaning, large blocks (see module docstring):
    ``alpha / (alpha + W0(-alpha e^-alpha))`` with ``alpha = 1 + op``."""
    alpha = 1.0 + op
    return alpha / (alpha + lambert_w0(-alpha * math.exp(-alpha)))


# --- driving: patterns, steady state --------------------------------------------------------------------
@dataclass(frozen=True)
class FtlResult:
    """Steady-state WAF of one run plus the per-window series (each window = ``window`` x user capacity)."""

    config: FtlConfig
    pattern: str
    waf: float                        # over host writes after the warm-up
    waf_all: float                    # over all host writes after the preconditioning fill
    measured: FtlCounters             # counters over the steady-state part
    total: FtlCounters                # everything, fill included
    window_waf: list[float]
    window_host_pages: list[int]
    warmup_fraction: float
    seconds: float

    @property
    def pages_per_s(self) -> float:
        return self.total.host_pages / self.seconds if self.seconds > 0 else float("nan")

    def to_dict(self) -> dict:
        cfg = self.config
        return {
            "waf": self.waf, "waf_all": self.waf_all, "pattern": self.pattern, "gc": cfg.gc,
            "capacity_bytes": cfg.user_bytes, "page_size": cfg.page_size, "op": cfg.op,
            "streams": cfg.streams, "gc_stream": cfg.gc_stream,
            "effective_op": cfg.effective_op, "block_pages": cfg.block_pages, "blocks": cfg.blocks,
            "host_bytes": self.measured.host_pages * cfg.page_size,
            "nand_bytes": self.measured.nand_pages * cfg.page_size,
            "measured": self.measured.to_dict(), "total": self.total.to_dict(),
            "warmup_fraction": self.warmup_fraction, "window_waf": self.window_waf,
            "window_host_pages": self.window_host_pages,
            "analytic_uniform_waf": analytic_waf_uniform(cfg.effective_op),
            "seconds": self.seconds, "host_pages_per_s": self.pages_per_s,
        }


def _uniform_chunks(user_pages: int, total: int, seed: int, io_pages: int = 1, chunk: int = 1 << 20):
    """Uniform random writes of ``io_pages`` pages at aligned offsets (seeded)."""
    rng = np.random.default_rng(seed)
    slots = user_pages // io_pages
    done = 0
    while done < total:
        n = min(chunk, -(-(total - done) // io_pages))
        starts = rng.integers(0, slots, n, dtype=np.int64) * io_pages
        yield np.full(n, OP_WRITE, np.uint8), starts, np.full(n, io_pages, np.int64), np.zeros(n, np.int64)
        done += n * io_pages


def _classes_chunks(user_pages: int, total: int, seed: int, io_pages: int, hot_lbas: float, hot_writes: float,
                    stream_of_class, chunk: int = 1 << 20):
    """Two lifetime classes: a ``hot_lbas`` share of the slots (the first ones) takes ``hot_writes`` of the
    writes, uniformly within each class; class 0 (hot) is rewritten sooner: the shorter expected lifetime.
    ``stream_of_class`` maps class labels to write streams (the placement rule)."""
    rng = np.random.default_rng(seed)
    slots = user_pages // io_pages
    n_hot = min(slots - 1, max(1, int(round(hot_lbas * slots))))
    done = 0
    while done < total:
        n = min(chunk, -(-(total - done) // io_pages))
        cls = (rng.random(n) >= hot_writes).astype(np.int64)          # 0 hot, 1 cold
        u = rng.random(n)
        slot = np.where(cls == 0, (u * n_hot).astype(np.int64), n_hot + (u * (slots - n_hot)).astype(np.int64))
        yield (np.full(n, OP_WRITE, np.uint8), slot * io_pages, np.full(n, io_pages, np.int64),
               stream_of_class(cls))
        done += n * io_pages


def _sequential_pass(user_pages: int, io_pages: int):
    """One pass over the user space in ``io_pages`` extents (the last one shorter when it does not divide)."""
    starts = np.arange(0, user_pages, io_pages, dtype=np.int64)
    return np.full(len(starts), OP_WRITE, np.uint8), starts, np.minimum(io_pages, user_pages - starts)


def _extent_chunks(ops, starts, counts, total: int, chunk: int = 1 << 20, streams=None):
    """Loop an extent stream (pages, with a write stream each) until ``total`` host pages were written."""
    streams = np.zeros(len(ops), np.int64) if streams is None else np.asarray(streams, dtype=np.int64)
    writes = ops == OP_WRITE
    per_pass = int(counts[writes].sum())
    if per_pass <= 0:
        raise SpecError("the write stream contains no writes", "give an iolog or plan with write operations")
    if len(ops) < chunk // 2:   # a short stream: tile it so each kernel call gets a large batch
        reps = max(1, min(chunk // max(1, len(ops)), -(-total // per_pass)))
        ops, starts, counts, streams = (np.tile(x, reps) for x in (ops, starts, counts, streams))
    done = 0
    while done < total:
        for i in range(0, len(ops), chunk):
            o, s, c = ops[i:i + chunk], starts[i:i + chunk], counts[i:i + chunk]
            st = streams[i:i + chunk]
            cum = np.cumsum(np.where(o == OP_WRITE, c, 0))
            if done + int(cum[-1]) >= total:     # the last batch: stop at the extent that reaches the total
                k = int(np.searchsorted(cum, total - done, side="left")) + 1
                yield o[:k], s[:k], c[:k], st[:k]
                return
            yield o, s, c, st
            done += int(cum[-1])


def simulate(config: FtlConfig, *, pattern: str = "uniform", writes: float = 10.0, warmup: float = 0.5,
             seed: int = 1, io_pages: int = 1, extents=None, precondition: bool = True,
             window: float = 0.25, hot_lbas: float = 0.2, hot_writes: float = 0.8,
             stream_of_class=None, progress=None) -> FtlResult:
    """Precondition (sequential fill), then write ``writes`` x user capacity with a pattern or an extent stream
    ``(ops, start_pages, page_counts[, streams])`` looped as needed; WAF over the part after ``warmup`` of the
    writes. The ``classes`` pattern's lifetime classes go to the streams ``stream_of_class`` gives (default 0).
    ``progress(host pages written, pages to write)`` is called before each chunk (a live line)."""
    import time

    cfg = config.validate()
    if pattern not in PATTERNS and extents is None:
        raise SpecError(f"unknown write pattern {pattern!r}", f"choose one of: {', '.join(PATTERNS)}, or --iolog")
    if not (0.0 <= warmup < 1.0):
        raise SpecError(f"warm-up fraction {warmup} is outside [0, 1)", "give e.g. --warmup 0.5")
    if writes <= 0:
        raise SpecError(f"--writes {writes} must be > 0", "give e.g. --writes 10x")
    model = FtlModel(cfg)
    model.warm()
    t0 = time.perf_counter()
    if precondition:
        model.fill_sequential()
    start = model.counters
    U = cfg.user_pages
    total = int(writes * U)
    if extents is not None:
        ops, starts, counts, *st = (np.asarray(x) for x in extents)
        chunks = _extent_chunks(ops.astype(np.uint8), starts.astype(np.int64), counts.astype(np.int64), total,
                                streams=st[0] if st else None)
        pattern = "extents"
    elif pattern == "uniform":
        chunks = _uniform_chunks(U, total, seed, io_pages)
    elif pattern == "classes":
        if not (0 < hot_lbas < 1 and 0 < hot_writes < 1):
            raise SpecError(f"hot LBA share {hot_lbas} and hot write share {hot_writes} must be in (0, 1)",
                            "give e.g. --hot-lbas 0.2 --hot-writes 0.8 (equal shares: one lifetime)")
        chunks = _classes_chunks(U, total, seed, io_pages, hot_lbas, hot_writes,
                                 stream_of_class or (lambda c: np.zeros_like(c)))
    elif pattern == "jesd219":
        mean_pages = sum(p * q for p, q in jesd219_pages(cfg.page_size))
        ops, starts, counts = jesd219_extents(U, max(1, int(total / mean_pages * 1.05) + 1), seed, cfg.page_size)
        chunks = _extent_chunks(ops, starts, counts, total)
    else:
        chunks = _extent_chunks(*_sequential_pass(U, io_pages), total)
    win = max(1, int(window * U))
    snaps = []
    warm_at = int(warmup * total)
    warm_snap = start if warm_at == 0 else None     # no warm-up: every write after the fill is measured
    next_mark = win
    for o, s, c, st in chunks:
        # split each chunk after the extents that cross a window boundary or the warm-up point, so that the
        # series and the warm-up cut are exact to one extent
        base = model.counters.host_pages - start.host_pages
        if progress is not None:
            progress(base, total)
        cum = base + np.cumsum(np.where(o == OP_WRITE, c, 0))
        points = list(range(next_mark, int(cum[-1]) + 1, win))
        if warm_snap is None and warm_at <= cum[-1]:
            points.append(warm_at)
        cuts = np.unique(np.searchsorted(cum, points, side="left") + 1).tolist() + [len(o)]
        prev = 0
        for cut in cuts:
            if cut <= prev:
                continue
            model.apply_pages(o[prev:cut], s[prev:cut], c[prev:cut], st[prev:cut])
            prev = cut
            done = model.counters.host_pages - start.host_pages
            if warm_snap is None and done >= warm_at:
                warm_snap = model.counters
            while done >= next_mark:
                snaps.append(model.counters)
                next_mark += win
    seconds = time.perf_counter() - t0
    end = model.counters
    warm_snap = warm_snap or start
    series, hosts, prev_snap = [], [], start
    for snap in snaps:
        d = snap - prev_snap
        series.append(d.waf)
        hosts.append(d.host_pages)
        prev_snap = snap
    return FtlResult(config=cfg, pattern=pattern, waf=(end - warm_snap).waf, waf_all=(end - start).waf,
                     measured=end - warm_snap, total=end, window_waf=series, window_host_pages=hosts,
                     warmup_fraction=warmup, seconds=seconds)


PATTERNS = {"uniform": "uniform random single-page writes", "sequential": "sequential writes, wrapping around",
            "classes": "two lifetime classes: --hot-lbas of the LBAs take --hot-writes of the writes (uniform within "
                       "each); equal shares are one lifetime",
            "jesd219": "JEDEC JESD219A enterprise endurance workload: 4 KiB-dominated random writes, 50% of them "
                       "to 5% of the LBAs, 30% to the next 15%, 20% to the rest (the workload DWPD ratings assume)"}

# JESD219A enterprise workload (JEDEC JESD219A; the table as published e.g. by Tom's Hardware, "SSD Endurance:
# Endurance Workloads", http://www.tomshardware.com/us/sponsored/Seagate-Solid_State_Drive-SSD_Endurance-120-4):
# transfer sizes in bytes and their shares (512 B 4%; 1, 1.5, 2, 2.5, 3 and 3.5 KiB 1% each - six sizes, so that
# the shares sum to 100%; 4 KiB 67%, 8 KiB 10%, 16 KiB 7%, 32 KiB 3%, 64 KiB 3%), each transfer aligned to its
# size, and the access skew over the user LBA range (fraction of accesses -> fraction of LBAs, in LBA order)
JESD219_SIZES = ((512, 0.04), (1024, 0.01), (1536, 0.01), (2048, 0.01), (2560, 0.01), (3072, 0.01), (3584, 0.01),
                 (4096, 0.67), (8192, 0.10), (16384, 0.07), (32768, 0.03), (65536, 0.03))
JESD219_SKEW = ((0.50, 0.05), (0.30, 0.15), (0.20, 0.80))


def jesd219_pages(page_size: int = 4096) -> tuple:
    """JESD219A's transfer sizes in whole pages of ``page_size`` and their shares: a transfer smaller than a
    page costs a whole page (read-modify-write)."""
    out: dict[int, float] = {}
    for size, share in JESD219_SIZES:
        p = -(-size // page_size)
        out[p] = out.get(p, 0.0) + share
    return tuple(sorted(out.items()))


def jesd219_page_bytes_per_host_byte(page_size: int = 4096) -> float:
    """Page bytes programmed per host byte by JESD219A's transfers alone (>= 1: sub-page transfers cost a page):
    the factor from a WAF in pages to one in host bytes, which a TBW rating counts."""
    pages = sum(p * q for p, q in jesd219_pages(page_size)) * page_size
    return pages / sum(size * q for size, q in JESD219_SIZES)


JESD219_PAGES = jesd219_pages(4096)    # ((1, 0.77), (2, 0.10), (4, 0.07), (8, 0.03), (16, 0.03))


def jesd219_extents(user_pages: int, n: int, seed: int = 1, page_size: int = 4096):
    """``n`` write extents of the JESD219A enterprise workload over ``user_pages`` pages (vectorised)."""
    rng = np.random.default_rng(seed)
    table = jesd219_pages(page_size)
    sizes = np.array([p for p, _ in table], dtype=np.int64)
    size = sizes[rng.choice(sizes.size, size=n, p=[q for _, q in table])]
    share = np.array([a for a, _ in JESD219_SKEW])
    span = np.array([b for _, b in JESD219_SKEW])
    lo = np.concatenate(([0.0], np.cumsum(span)[:-1]))
    region = rng.choice(share.size, size=n, p=share)
    first = ((lo[region] + rng.random(n) * span[region]) * user_pages).astype(np.int64)
    first = np.minimum(first - first % size, user_pages - size)       # aligned to the transfer size
    return np.full(n, OP_WRITE, dtype=np.uint8), first, size


# --- write streams from files ---------------------------------------------------------------------------
_IOLOG_OPS = {"write": OP_WRITE, "trim": OP_TRIM, "read": 0}


def read_iolog(path, *, target: str | None = None, largest: bool = False):
    """Writes and trims of a fio iolog (v2 or v3) as ``(ops, offsets, lengths)`` byte arrays.

    Reads and file actions (add/open/close/sync) are skipped. An iolog naming several files needs ``target``
    (the file whose writes the drive sees) or ``largest`` (the file written most). A malformed line raises
    TraceError naming the file and line."""
    import pandas as pd

    from kvbench.errors import TraceError

    try:
        with open(path, "r", encoding="utf-8", errors="replace") as fh:
            header = fh.readline().strip()
    except OSError as e:
        raise TraceError(f"cannot read iolog: {e.strerror}", "check the path", path=path) from None
    versions = {"fio version 2 iolog": 2, "fio version 3 iolog": 3}
    if header not in versions:
        raise TraceError(f"not a fio iolog (first line {header[:40]!r})",
                         "give a file written by fio --write_iolog or kvbench --export-iolog", path=path, line=1)
    names = (["time"] if versions[header] == 3 else []) + ["file", "action", "offset", "length"]
    df = pd.read_csv(path, sep=r"\s+", header=None, names=names, skiprows=1, dtype=str, engine="c",
                     on_bad_lines="error", skip_blank_lines=True)
    action = df["action"].map(_IOLOG_OPS)
    io = action.notna().to_numpy()
    df, action = df[io], action[io]
    if target is not None:
        df, action = df[df["file"] == target], action[df["file"] == target]
        if df.empty:
            raise TraceError(f"no I/O for file {target!r} in the iolog", "give one of its file names", path=path)
    files = df["file"].unique()
    if len(files) > 1 and target is None and largest:
        sizes = pd.to_numeric(df["length"], errors="coerce").where(action == OP_WRITE, 0).groupby(df["file"]).sum()
        pick = sizes.idxmax()
        df, action = df[df["file"] == pick], action[df["file"] == pick]
        files = [pick]
    if len(files) > 1:
        raise TraceError(f"the iolog writes {len(files)} files ({', '.join(map(str, files[:3]))}, ...)",
                         "choose one with --iolog-target NAME", path=path)
    offsets = pd.to_numeric(df["offset"], errors="coerce")
    lengths = pd.to_numeric(df["length"], errors="coerce")
    bad = (offsets.isna() | lengths.isna() | (offsets < 0) | (lengths < 0)).to_numpy()
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        line = int(df.index[i]) + 2   # +1 for the header, +1 for 1-based lines
        field_name = "offset" if pd.isna(offsets.iloc[i]) or offsets.iloc[i] < 0 else "length"
        raise TraceError("expected a byte count >= 0", "fix or regenerate the iolog", path=path, line=line,
                         field=field_name)
    return (action.to_numpy(dtype=np.uint8), offsets.to_numpy(dtype=np.int64), lengths.to_numpy(dtype=np.int64))


def read_plan(path, *, target: int | None = None):
    """Writes and trims of a saved I/O plan (``.npy`` with the engine's PLAN_DTYPE fields op/offset/length
    [/target]) as ``(ops, offsets, lengths)``."""
    from kvbench.errors import TraceError

    try:
        plan = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise TraceError(f"cannot read I/O plan: {e}", "give a .npy written with numpy.save", path=path) from None
    missing = {"op", "offset", "length"} - set(plan.dtype.names or ())
    if missing:
        raise TraceError(f"plan lacks field(s) {', '.join(sorted(missing))}", "save the engine's PLAN_DTYPE array",
                         path=path)
    if target is not None and "target" in plan.dtype.names:
        plan = plan[plan["target"] == target]
    return plan["op"].astype(np.uint8), plan["offset"].astype(np.int64), plan["length"].astype(np.int64)


def read_plan_tiers(path):
    """All targets of a saved I/O plan laid out back to back on one drive, with each write's target as its
    ``tier`` label: ``(ops, offsets, lengths, tiers)`` (tiers numbered 0.. in target order)."""
    ops, offsets, lengths = read_plan(path)
    plan = np.load(path, allow_pickle=False)
    tgt = plan["target"].astype(np.int64) if "target" in (plan.dtype.names or ()) else np.zeros(len(ops), np.int64)
    ids, tier = np.unique(tgt, return_inverse=True)
    live = (ops == OP_WRITE) | (ops == OP_TRIM)
    ends = np.zeros(len(ids), np.int64)
    if live.any():
        np.maximum.at(ends, tier[live], (offsets + lengths)[live])
    base = np.concatenate(([0], np.cumsum(-(-ends // 4096) * 4096)[:-1]))
    return ops, offsets + base[tier], lengths, tier.astype(np.int64)


def bytes_to_pages(ops, offsets, lengths, page_size: int):
    """Byte extents to page extents (writes round out to whole pages, trims round in)."""
    ops = np.asarray(ops, dtype=np.uint8)
    offsets = np.asarray(offsets, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    first = np.where(ops == OP_TRIM, -(-offsets // page_size), offsets // page_size)
    end = np.where(ops == OP_TRIM, (offsets + lengths) // page_size, -(-(offsets + lengths) // page_size))
    return ops, first, np.maximum(end - first, 0)


# --- an erase unit of the size asked, in pages ---------------------------------------------------------------
MIN_PAGE_BYTES = 4096


def erase_unit_pages(erase_bytes: int, page_bytes: int, *, too_many=None, max_page_bytes: int | None = None,
                     what: str = "--erase-block") -> tuple[int, int]:
    """(page size, pages per erase unit) whose product is exactly ``erase_bytes``: the models that coarsen their
    pages (to keep the page count small) never let a page reach the unit, which would model a unit of two such
    pages, twice the one asked. The page starts at ``page_bytes``, is halved (not below 4 KiB) until it divides
    the unit into at least two, then doubled while ``too_many(page)`` and the page is under ``max_page_bytes``, as
    long as the doubled page still divides the unit into at least two. A unit that is not a whole number of at
    least two 4 KiB pages is refused (one line, naming ``what``)."""
    from kvbench.units import format_bytes

    erase, page = int(erase_bytes), max(MIN_PAGE_BYTES, int(page_bytes))
    if erase < 2 * MIN_PAGE_BYTES or erase % MIN_PAGE_BYTES:
        raise SpecError(f"{what}: an erase unit of {format_bytes(erase)} ({erase:,} B) is not a whole number of at "
                        f"least two {MIN_PAGE_BYTES // 1024} KiB pages",
                        "give a multiple of 4 KiB of at least 8 KiB, e.g. 256MiB (a drive's superblock)")
    while (erase % page or erase // page < 2) and page // 2 >= MIN_PAGE_BYTES:
        page //= 2
    if erase % page or erase // page < 2:       # no halving of page_bytes fits: the 4 KiB page divides the unit
        page = MIN_PAGE_BYTES
    while (too_many is not None and too_many(page) and (max_page_bytes is None or page < max_page_bytes)
           and erase % (2 * page) == 0 and erase // (2 * page) >= 2):
        page *= 2
    return page, erase // page


# --- the WAF of a KV block-store layout ------------------------------------------------------------------
LAYOUTS = {"slot": "fixed slots, random overwrites", "log": "append in segments, reclaim the oldest"}


def layout_waf(layout: str, slot_bytes: int, *, erase_block_bytes: int = 256 << 20, op: float = 0.07,
               gc: str = "greedy", page_bytes: int = 16 << 10, segment_bytes: int = 64 << 20,
               max_pages: int = 1 << 22, min_blocks: int = 512, writes: float = 4.0,
               seed: int = 1) -> tuple[float, dict]:
    """Steady-state device WAF of a KV block store filling a drive: ``slot`` overwrites block-sized slots at
    random (a freed slot is reused wherever it is), ``log`` appends segments and reclaims the oldest.

    WAF depends on ratios (slot size / erase unit, over-provisioning), not on the drive's absolute size, so
    the drive is modelled scaled down: at least ``min_blocks`` erase blocks (so that the GC's free-block
    reserve is a small part of the spare, as on a real drive with thousands of erase units) and 256 slots,
    pages coarsened (>= 16 KiB) until the model holds at most ``max_pages`` pages. Returns the WAF and the
    model's parameters."""
    if layout not in LAYOUTS:
        raise SpecError(f"unknown store layout {layout!r}", f"choose one of: {', '.join(LAYOUTS)}")
    if slot_bytes <= 0 or erase_block_bytes <= 0:
        raise SpecError("slot and erase-block sizes must be > 0", "check the model preset and --erase-block")
    unit = segment_bytes if layout == "log" else slot_bytes
    n_units = max(256, -(-min_blocks * erase_block_bytes // unit))
    page, block_pages = erase_unit_pages(erase_block_bytes, page_bytes, max_page_bytes=unit,
                                         too_many=lambda pg: n_units * -(-unit // pg) * (1.0 + op) > max_pages)
    unit_pages = -(-unit // page)
    cfg = FtlConfig(user_bytes=n_units * unit_pages * page, page_size=page, op=op, block_pages=block_pages, gc=gc)
    pattern = "sequential" if layout == "log" else "uniform"
    r = simulate(cfg, pattern=pattern, writes=writes, warmup=0.5, seed=seed, io_pages=unit_pages)
    params = {"layout": layout, "model_capacity_bytes": cfg.user_bytes, "page_bytes": page,
              "unit_bytes": unit_pages * page, "erase_block_bytes": block_pages * page, "op": op, "gc": gc,
              "writes": writes, "model_seconds": r.seconds}
    return r.waf, params
