"""Device write amplification of the write stream a KV store really makes (DESIGN.md, "Write amplification").

Device WAF is a property of the LBA write/trim stream, not of a layout's name. This module runs the tier
simulation (:mod:`kvbench.sim.tiers`, compiled) for one L3 store at a capacity, policy, retention, layout and
write policy, keeps that store's own writes and trims (slot numbers), and feeds them through the FTL model
(:mod:`kvbench.analysis.ftl`, compiled) of a drive scaled to the store (:func:`~kvbench.analysis.placement.
store_ftl_config`: WAF depends on ratios - slot / erase unit, over-provisioning - not on absolute size).

Two stages, each reusable:
- :func:`store_writes`: the store's stream. Large stores are simulated on a key sample (a miniature at rate
  q = slots kept / slots: capacities scale by q, the order in which slots are written and freed is the
  miniature's). A stream must turn the store over several times for a steady-state WAF: a trace too short
  for that at this capacity is extended by a workload model fitted to it (:func:`kvbench.stream.fit.fit_model`,
  generated with :class:`kvbench.stream.synth.Generator`) and ``origin`` says so.
- :func:`store_waf`: the FTL model on that stream, preconditioned by a sequential fill, the WAF counted over
  the writes after the store's first full turnover past its first slot reuse (the warm-up is not steady).

Why a slot store under LRU is near 1: freed slots go to the back of a FIFO free list, and under LRU the block
evicted is mostly the oldest written, so slots are rewritten almost in the order they were written: the drive
sees a near-sequential overwrite and whole erase units die together. Random free-slot choice, a small spare,
TTL expiry out of order or a policy whose victims are not the oldest written break that order (README).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from kvbench.errors import SpecError

DEFAULT_MAX_SLOTS = 1 << 16        # miniature size: slots simulated (key sample above it)
DEFAULT_TURNOVERS = 2.0            # store turnovers measured after the warm-up turnover
MAX_EXTENSION_S = 400 * 86_400.0   # the longest stream a fitted model is asked to generate


@dataclass(frozen=True)
class StoreWrites:
    """One L3 store's write/trim stream in slots (``ops``: ftl.OP_WRITE / ftl.OP_TRIM), in the order issued."""

    ops: np.ndarray
    slots: np.ndarray
    nslots: np.ndarray
    request: np.ndarray            # request index of each event (in the simulated stream)
    slot_bytes: int
    capacity_blocks: int           # blocks the (miniature) store caches
    n_slots: int                   # the store's LBA span in slots (spare included)
    sample_rate: float             # key-sample rate of the miniature (1: the whole stream)
    layout: str
    policy: str
    trim: bool
    origin: str                    # "trace" | "fitted model"
    note: str
    warm_writes: int               # writes before the steady part (first slot reuse + one turnover)
    params: dict = field(default_factory=dict)

    @property
    def writes(self) -> int:
        return int(np.count_nonzero(self.ops == _op_write()))

    @property
    def turnovers(self) -> float:
        """Store turnovers in the steady part (writes after the warm-up / cached blocks)."""
        return max(0, self.writes - self.warm_writes) / max(1, self.capacity_blocks)


@dataclass(frozen=True)
class StoreWaf:
    """The FTL model's verdict on one store stream."""

    waf: float
    host_bytes: float              # steady-part host bytes in the model (miniature units)
    nand_bytes: float
    source: str                    # provenance, for answers: "trace-driven at C: <detail>"
    params: dict
    detail: str = ""               # the source after "trace-driven at C:" (a caller names its own C)

    def to_dict(self) -> dict:
        return {"waf": self.waf, "host_bytes": self.host_bytes, "nand_bytes": self.nand_bytes,
                "source": self.source, **self.params}


DEFAULT_OP = 0.07                  # a drive class that states no raw NAND: the 7% of a drive sold in TB on GiB


def class_op(cls, default: float = DEFAULT_OP) -> float:
    """A drive class's over-provisioning (raw NAND / user - 1) when it states one, else ``default``."""
    op = getattr(cls, "over_provisioning", None) if cls is not None else None
    return float(op) if op else float(default)


def _op_write():
    from kvbench.analysis import ftl

    return ftl.OP_WRITE


def _hierarchy(block_bytes: int, blocks: int, *, layout, policy, ttl_s, trim, write_policy, l2_blocks,
               admission, spare_slots):
    """A hierarchy whose L3 store caches exactly ``blocks`` blocks (and an L2 of ``l2_blocks`` in front)."""
    from kvbench.sim.tiers import Hierarchy, HierarchySpec, TierSpec

    base = HierarchySpec(tiers=(TierSpec("l3", 1),), block_bytes=block_bytes, write_policy=write_policy,
                         spare_slots=spare_slots)
    slot = base.slot_bytes

    def tier(name, n, **kw):      # the capacity in bytes whose store caches n blocks, whatever the spare rule
        cap = n * slot
        for _ in range(4):
            t = TierSpec(name, cap, **kw)
            got = base.capacity_blocks(t)
            if got == n:
                return t
            cap += (n - got) * slot
        raise SpecError(f"cannot size a store of {n} blocks", "report this with the capacity used")

    l3 = tier("l3", blocks, policy=policy, ttl_s=ttl_s, layout=layout, trim=trim, admission=admission)
    tiers = ((tier("l2", l2_blocks),) if l2_blocks > 0 else ()) + (l3,)
    spec = HierarchySpec(tiers=tiers, block_bytes=block_bytes, write_policy=write_policy, spare_slots=spare_slots)
    spec.validate()
    return Hierarchy(spec), slot


class _Collector:
    """Feeds request batches through a hierarchy and keeps the L3 store's writes and trims."""

    def __init__(self, h, target_writes: int | None):
        self.h, self.target, self.parts, self.n_req, self.writes = h, target_writes, [], 0, 0

    def feed(self, times, offsets, keys, batch: int = 1 << 15) -> bool:
        """Simulate; True once ``target_writes`` writes were collected (the stream can stop)."""
        from kvbench.sim.tiers import EV_TRIM, EV_WRITE

        for a in range(0, len(times), batch):
            b = min(len(times), a + batch)
            _, ev = self.h.run(times[a:b], offsets[a:b + 1] - offsets[a], keys[offsets[a]:offsets[b]],
                               first_request=self.n_req)
            self.n_req += b - a
            ev = ev[(ev["tier"] == 2) & ((ev["op"] == EV_WRITE) | (ev["op"] == EV_TRIM))]
            self.parts.append(ev)
            self.writes += int(np.count_nonzero(ev["op"] == EV_WRITE))
            if self.target is not None and self.writes >= self.target:
                return True
        return False

    def events(self):
        from kvbench.sim.tiers import EVENT_DTYPE

        return np.concatenate(self.parts) if self.parts else np.zeros(0, EVENT_DTYPE)


def first_reuse(slots: np.ndarray) -> int | None:
    """Index of the first write (of ``slots``, in order) to a slot already written: where a store starts turning
    over; None when no slot is written twice."""
    if slots.size == 0:
        return None
    _, first = np.unique(slots, return_index=True)
    seen_before = np.ones(slots.size, bool)
    seen_before[first] = False
    reuse = np.flatnonzero(seen_before)
    return int(reuse[0]) if reuse.size else None


def _warm_writes(ev, capacity_blocks: int) -> int:
    """Writes before the steady part: up to the first write of an already written slot, plus one turnover."""
    from kvbench.sim.tiers import EV_WRITE

    w = ev[ev["op"] == EV_WRITE]
    reuse = first_reuse(w["slot"])
    return int(w.size if reuse is None else min(w.size, reuse + capacity_blocks))


def _warm_writes_from(ev, capacity_blocks: int, from_request: int) -> int:
    """:func:`_warm_writes` under a warm-up (``from_request``: the requests before it only warm the store): no
    fewer than those requests' writes (writes come in request order), the steady curve's rule."""
    from kvbench.sim.tiers import EV_WRITE

    before = (ev["op"] == EV_WRITE) & (ev["request"] < from_request)
    return max(_warm_writes(ev, capacity_blocks), int(np.count_nonzero(before)))


def store_writes(trace, *, block_bytes: int, capacity_bytes: float, layout: str = "slot", policy: str = "lru",
                 ttl_s: float | None = None, trim: bool = False, write_policy: str = "through",
                 l2_bytes: float = 0.0, admission: str = "all", spare_slots: int = 64,
                 max_slots: int = DEFAULT_MAX_SLOTS, turnovers: float = DEFAULT_TURNOVERS, extend: bool = True,
                 seed: int = 0, fitted=None, from_request: int = 0) -> StoreWrites:
    """The write/trim stream of an L3 store caching ``capacity_bytes`` of KV, driven by ``trace``.

    ``from_request``: the requests before it only warm the store (a plan's --warmup): the steady part opens at
    the later of the store's own warm-up end and that request's first write, as the steady hit curve's window
    does (:func:`kvbench.analysis.curves.residence.steady_curve`); the whole trace still fills the store.

    When the trace does not turn the store over ``turnovers`` times past its warm-up and ``extend`` is on, the
    stream comes from a workload model fitted to the trace instead, generated until it does (``origin``);
    ``fitted``: the :class:`Extension` to use (or a callable returning it, called only if needed), when the
    caller keeps one for several stores."""
    from kvbench.sim.blockstore import slot_bytes_for
    from kvbench.stream.sampling import sample_keys

    slot = slot_bytes_for(block_bytes)
    blocks = int(capacity_bytes // slot)
    if blocks < 1:
        raise SpecError(f"capacity {capacity_bytes:,.0f} B holds no KV block of {slot:,} B",
                        "give a capacity of at least one block")
    if not turnovers > 0:
        raise SpecError(f"turnovers {turnovers} must be > 0", "give e.g. 2")
    q = min(1.0, max_slots / blocks)
    mini = max(1, int(round(blocks * q)))
    l2 = int(round(l2_bytes / slot * q)) if l2_bytes else 0
    kw = dict(layout=layout, policy=policy, ttl_s=ttl_s, trim=trim, write_policy=write_policy, l2_blocks=l2,
              admission=admission, spare_slots=spare_slots)
    src = sample_keys(trace, q) if q < 1.0 else trace
    h, slot = _hierarchy(block_bytes, mini, **kw)
    col = _Collector(h, None)
    col.feed(np.asarray(src.timestamp_s, np.float64), np.asarray(src.offsets, np.int64),
             np.asarray(src.keys, np.uint64))
    ev = col.events()
    warm = _warm_writes_from(ev, mini, from_request)
    origin, note = "trace", f"the trace's own stream ({src.n_requests:,} requests)"
    if from_request > 0:
        note = (f"the trace's own stream ({src.n_requests:,} requests; measured from request {from_request:,}, "
                "the warm-up's end)")
    need = warm + int(math.ceil(turnovers * mini))
    params = {"from_request": from_request} if from_request > 0 else {}
    if col.writes < need and extend:
        ext = (fitted() if callable(fitted) else fitted) or extension_for(trace, seed)
        ev, note, params = _extended(block_bytes, mini, q, kw, turnovers, ext)
        origin = "fitted model" if ext.origin == "fitted" else "generating model"
        warm = _warm_writes(ev, mini)
    return _finish(ev, slot=slot, mini=mini, q=q, kw=kw, origin=origin, note=note, warm=warm, params=params,
                   spare_slots=spare_slots)


class Extension:
    """A workload model's stream, generated once and shared by every store that needs it (:class:`WafModel`).

    Batches are kept key-sampled at the largest rate any store asked for (a key sample at a lower rate is a
    subset of it: the sampling hash's threshold, :mod:`kvbench.stream.sampling`), and generated further only when
    a store needs a longer stream. A store asking for a higher rate restarts the stream at that rate."""

    def __init__(self, model, *, rate: float | None = None, seed: int = 0, origin: str = "fitted",
                 base_sample: float = 1.0):
        self.model, self.rate, self.seed, self.origin = model, rate, seed, origin
        self.base_sample = base_sample        # a key-sampled gen: trace's own rate: its blocks are a sample
        self.q = 0.0
        self.batches: list = []
        self._gen = None

    def stream(self, q: float):
        """Batches of the model's stream key-sampled at ``q`` (of the trace's blocks), as long as the caller keeps
        asking."""
        from kvbench.stream.sampling import sample_keys
        from kvbench.stream.synth import Generator

        q = q * self.base_sample

        if q > self.q:                                # a finer sample than kept: start over at it
            self.q, self.batches = q, []
            self._gen = Generator(self.model, duration_s=MAX_EXTENSION_S, rate=self.rate, seed=self.seed).batches()
        k = 0
        while True:
            if k == len(self.batches):
                b = next(self._gen, None)
                if b is None:
                    return
                self.batches.append(sample_keys(b, self.q) if self.q < 1.0 else b)
            b = self.batches[k]
            k += 1
            yield sample_keys(b, q) if q < self.q else b


def extension_for(trace, seed: int = 0) -> Extension:
    """The stream a short trace is extended with: the model that generated it (a ``gen:`` trace), else a
    workload model fitted to it (:func:`kvbench.stream.fit.fit_model`)."""
    meta = getattr(trace, "meta", None) or {}
    if meta.get("source") == "generated" and meta.get("generated_from"):
        from kvbench.stream.workload import load_model_file

        model = load_model_file(meta["generated_from"])
        if trace.block_tokens != model.block_tokens:
            model = replace(model, block_tokens=int(trace.block_tokens))
        return Extension(model, rate=meta.get("rate"), seed=int(meta.get("seed", 0)) + 1, origin="generating",
                         base_sample=float(meta.get("sample_rate") or 1.0))
    from kvbench.stream.fit import fit_model

    return Extension(fit_model(trace).model, seed=seed, origin="fitted")


def _extended(block_bytes: int, mini: int, q: float, kw: dict, turnovers: float, ext: Extension):
    """The store's stream under the trace's workload model (``ext``), generated until it turns the store over."""
    h, _ = _hierarchy(block_bytes, mini, **kw)
    # fill + warm-up turnover + the measured ones, and slack for the fill's hits
    target = int(math.ceil((2.0 + turnovers) * mini * 1.05))
    col = _Collector(h, target)
    span = 0.0
    for b in ext.stream(q):
        span = float(b.timestamp_s[-1]) if b.n_requests else span
        if col.feed(np.asarray(b.timestamp_s, np.float64), np.asarray(b.offsets, np.int64),
                    np.asarray(b.keys, np.uint64)):
            break
    ev = col.events()
    name = ext.model.name
    if _warm_writes(ev, mini) >= int(np.count_nonzero(ev["op"] == _op_write())):
        raise SpecError(f"a store of {mini:,} (sampled) blocks never turns over, even over "
                        f"{span / 86_400:,.0f} days of the workload model {name}",
                        "the store holds everything the workload ever reuses: its device WAF is that of its "
                        "fill (give a smaller capacity)")
    what = ("the model that generated the trace" if ext.origin == "generating"
            else "a workload model fitted to the trace")
    note = (f"{what} ({name}), {col.n_req:,} requests over {span / 3600:,.1f} h generated: the trace is too "
            "short to turn this store over")
    return ev, note, {"model": name, "generated_s": span, "generated_requests": col.n_req}


def _finish(ev, *, slot, mini, q, kw, origin, note, warm, params, spare_slots) -> StoreWrites:
    return stream_from_events(ev, slot_bytes=slot, capacity_blocks=mini, layout=kw["layout"], policy=kw["policy"],
                              trim=kw["trim"], origin=origin, note=note, sample_rate=q, warm_writes=warm,
                              params={"spare_slots": spare_slots, "write_policy": kw["write_policy"],
                                      "ttl_s": kw["ttl_s"], "l2_blocks": kw["l2_blocks"], **params})


def stream_from_events(ev, *, slot_bytes: int, capacity_blocks: int, layout: str = "slot", policy: str = "lru",
                       trim: bool = False, origin: str = "trace", note: str = "", sample_rate: float = 1.0,
                       warm_writes: int | None = None, params: dict | None = None,
                       from_request: int = 0) -> StoreWrites:
    """One store's :class:`StoreWrites` from its tier-simulation events (``EVENT_DTYPE``; reads are dropped), e.g.
    a cluster node's L3; the warm-up is found from the events (no earlier than request ``from_request``'s first
    write) unless given."""
    from kvbench.analysis import ftl
    from kvbench.sim.tiers import EV_TRIM, EV_WRITE

    ev = ev[(ev["op"] == EV_WRITE) | (ev["op"] == EV_TRIM)]
    is_w = ev["op"] == EV_WRITE
    ops = np.where(is_w, ftl.OP_WRITE, ftl.OP_TRIM).astype(np.uint8)
    nslots = ev["nslots"].astype(np.int64)
    top = int((ev["slot"] + nslots).max()) if ev.size else 0
    warm = _warm_writes_from(ev, capacity_blocks, from_request) if warm_writes is None else warm_writes
    return StoreWrites(ops=ops, slots=ev["slot"].astype(np.int64), nslots=nslots,
                       request=ev["request"].astype(np.int64), slot_bytes=int(slot_bytes),
                       capacity_blocks=int(capacity_blocks), n_slots=top, sample_rate=sample_rate, layout=layout,
                       policy=policy, trim=trim, origin=origin, note=note, warm_writes=warm, params=params or {})


def store_waf(sw: StoreWrites, *, op: float = 0.07, erase_block_bytes: int = 256 << 20, gc: str = "greedy",
              streams: int = 1, stream_of: np.ndarray | None = None, gc_stream: str = "same") -> StoreWaf:
    """Steady-state device WAF of ``sw`` on a drive with over-provisioning ``op`` (FTL model, compiled).

    ``stream_of``: a write stream (FDP reclaim-unit handle) per event of ``sw``, for ``streams`` > 1."""
    from kvbench.analysis import ftl
    from kvbench.analysis.placement import store_ftl_config

    if sw.writes == 0:
        raise SpecError("the store writes nothing under this workload", "give a smaller capacity or a longer trace")
    if sw.warm_writes >= sw.writes:
        raise SpecError(f"the store ({sw.capacity_blocks:,} blocks) never reuses a slot in its stream: no steady "
                        "state", "give a smaller capacity, or allow extension by a fitted workload model")
    top = sw.n_slots * sw.slot_bytes
    cfg = store_ftl_config(top, sw.slot_bytes, op=op, erase_block_bytes=erase_block_bytes, gc=gc, streams=streams,
                           gc_stream=gc_stream)
    o, s, c = ftl.bytes_to_pages(sw.ops, sw.slots * sw.slot_bytes, sw.nslots * sw.slot_bytes, cfg.page_size)
    w_pages = np.where(o == ftl.OP_WRITE, c, 0)
    total = int(w_pages.sum())
    # the warm-up cut at the same write the store's warm-up ends (its page count)
    wi = np.flatnonzero(o == ftl.OP_WRITE)
    warm_pages = int(w_pages[:wi[sw.warm_writes]].sum()) if sw.warm_writes < wi.size else total
    ext = (o, s, c) if stream_of is None else (o, s, c, np.asarray(stream_of, np.int64))
    # one pass over the stream, no looping: simulate takes the pass as a multiple of the capacity (+0.5 page so
    # that float rounding cannot drop the last write), the warm-up as a fraction of it (+0.5 so that it truncates
    # to the exact page count: tests/analysis/test_trace_waf.py compares with a page-by-page reference)
    r = ftl.simulate(cfg, extents=ext, writes=(total + 0.5) / cfg.user_pages,
                     warmup=(warm_pages + 0.5) / (total + 0.5))
    erase = cfg.block_pages * cfg.page_size
    cap_txt = f"{sw.capacity_blocks / sw.sample_rate * sw.slot_bytes / 2**40:,.4g} TiB"
    detail = (f"the {sw.layout} store's own writes{' and trims' if sw.trim else ''} "
              f"under {sw.policy} ({sw.origin}"
              + (f" from request {sw.params['from_request']:,}, the warm-up's end"
                 if sw.origin == "trace" and sw.params.get("from_request") else "")
              + (f", key sample {sw.sample_rate:.3g}" if sw.sample_rate < 1 else "")
              + f") through the FTL model, op {op:g}, {gc} GC, {erase / sw.slot_bytes:.3g} slots per erase unit"
              + (f", {streams} streams" if streams > 1 else ""))
    source = f"trace-driven at {cap_txt}: {detail}"
    params = {"origin": sw.origin, "origin_note": sw.note, "layout": sw.layout, "policy": sw.policy,
              "trim": sw.trim, "op": op, "gc": gc, "streams": streams, "sample_rate": sw.sample_rate,
              "store_blocks": sw.capacity_blocks, "store_slots": sw.n_slots, "slot_bytes": sw.slot_bytes,
              "erase_unit_bytes": erase, "page_bytes": cfg.page_size, "turnovers_measured": sw.turnovers,
              "store_writes": sw.writes, "warm_writes": sw.warm_writes, "model_seconds": r.seconds, **sw.params}
    return StoreWaf(waf=float(r.waf), host_bytes=float(r.measured.host_pages * cfg.page_size),
                    nand_bytes=float(r.measured.nand_pages * cfg.page_size), source=source, params=params,
                    detail=detail)


def trace_waf(trace, *, block_bytes: int, capacity_bytes: float, op: float = 0.07,
              erase_block_bytes: int = 256 << 20, gc: str = "greedy", **kw) -> StoreWaf:
    """:func:`store_writes` then :func:`store_waf`: the device WAF of this trace at this capacity."""
    return store_waf(store_writes(trace, block_bytes=block_bytes, capacity_bytes=capacity_bytes, **kw), op=op,
                     erase_block_bytes=erase_block_bytes, gc=gc)


class WafModel:
    """Trace-driven device WAF of one trace's L3 store at any capacity and over-provisioning, memoised.

    Capacities are rounded to a log grid (``per_decade`` points: within 7.5% at 16), since WAF changes slowly
    with capacity and every drive class of a plan asks at its own size; the workload model that extends a short
    trace is fitted once."""

    def __init__(self, trace, *, block_bytes: int, layout: str = "slot", policy: str = "lru", gc: str = "greedy",
                 erase_block_bytes: int = 256 << 20, trim: bool = False, max_slots: int = 1 << 13,
                 per_decade: int = 16, turnovers: float = 1.0, from_request: int = 0):
        self.turnovers = turnovers       # measured turnovers past the warm-up one (a plan asks at many sizes)
        self.from_request = int(from_request)    # a plan's warm-up: :func:`store_writes`
        self.trace, self.block_bytes, self.layout, self.policy = trace, int(block_bytes), layout, policy
        self.gc, self.erase, self.trim, self.max_slots, self.per_decade = gc, erase_block_bytes, trim, max_slots, \
            per_decade
        self._streams: dict = {}
        self._wafs: dict = {}
        self._fitted = None

    def _fit(self) -> Extension:
        if self._fitted is None:
            self._fitted = extension_for(self.trace)
        return self._fitted

    def grid_blocks(self, blocks: float) -> int:
        """``blocks`` rounded to the memo's log grid (at least one block)."""
        if not blocks >= 1:
            return 1
        k = round(math.log10(blocks) * self.per_decade)
        return max(1, int(round(10 ** (k / self.per_decade))))

    def at(self, blocks: float, op: float, layout: str | None = None) -> StoreWaf:
        """The WAF of a store caching ``blocks`` of the trace's blocks, on a drive with over-provisioning ``op``."""
        from kvbench.sim.blockstore import slot_bytes_for

        lay = layout or self.layout
        n = self.grid_blocks(blocks)
        key = (n, lay)
        if key not in self._streams:
            self._streams[key] = store_writes(self.trace, block_bytes=self.block_bytes,
                                              capacity_bytes=n * slot_bytes_for(self.block_bytes), layout=lay,
                                              policy=self.policy, trim=self.trim, max_slots=self.max_slots,
                                              turnovers=self.turnovers, fitted=self._fit,
                                              from_request=self.from_request)
        wkey = (n, lay, round(float(op), 6))
        if wkey not in self._wafs:
            self._wafs[wkey] = store_waf(self._streams[key], op=op, erase_block_bytes=self.erase, gc=self.gc)
        return self._wafs[wkey]
