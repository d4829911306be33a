"""The L1..L4 tier hierarchy: which block lives where, and the block I/O every request causes (pure).

Per request (DESIGN.md prefix semantics), at arrival time ``now``:

1. Retention: every tier drops keys idle longer than its TTL (handled like evictions, below).
2. Blocks are touched deepest-first. A block resident in some tier is looked up there (recency updated); a
   missing block is *produced* (prefill) with a new version and written to its creation tiers. The
   request's hit blocks are the leading run of blocks found resident; for a single LRU tier this is exactly
   the Mattson stack-distance count of ``kvbench mrc`` at the same capacity.
3. Load phase: each hit block is read from the tier it was found in (L1 is simulated HBM: no I/O). Reads
   are issued before the request's writes, except for a block that a demotion cascade of this same request
   moved into the slot it is read from: that read follows the write.
4. Promotion, deepest-first: a hit below the top tier is copied into every present tier above it
   (``promote=True``) or only into L1 (the GPU holds what it uses; ``promote=False``). Exclusive
   hierarchies move it to the top tier instead (removed below).

Write policy: write-through writes a new block to every present tier at creation; write-back writes it to
the volatile tiers (L1, L2; the top present tier if neither) and a block reaches L3/L4 when evicted from the
tier above (demotion: read from the evicting tier, write to the next). Exclusive hierarchies (a block lives
in one tier only) create in the top tier, demote on eviction and move on promotion; they need write-back.
An evicted block whose next tier already holds a copy (inclusive) is dropped without a write.

Admission (:mod:`kvbench.sim.admission`, L3/L4 only): a tier with a non-trivial admission policy sees the
request's keys first when it asks (``begin_request``), then every lookup that reaches it (``observe``, in
:meth:`Hierarchy.request`'s lookup loop) and decides, in
:meth:`Hierarchy._insert` before anything is evicted, whether a block about to be written (created, promoted
or demoted) is written at all; a rejected block is counted (``admission_rejects``) and left out of the tier.
``admit-all`` installs no hook (``_Tier.admission`` is None), so results are those of write-through exactly.

:class:`Hierarchy` runs the per-block loop compiled (numba), admission policies included (their ghost lists and
sketches are compiled state: each registered policy carries its kernel code and parameters,
``kernel_code``/``kernel_params()`` in :mod:`kvbench.sim.policies` and :mod:`kvbench.sim.admission`);
:class:`ReferenceHierarchy` is the same simulation in Python, the reference it is tested against. A policy
registered without a compiled form would make ``Hierarchy(spec)`` the reference (same results, Python speed).
A cluster's nodes that share an L4 pool are the members of one :class:`kvbench.sim.shared_pool.SharedPool`: the
same kernel over one state whose last tier is the pool (the layout functions here are shared with it).

The output is a stream of block events (``EVENT_DTYPE``): one row per block read/write/trim on L2..L4, in an
order that is safe to issue (each request: its hit reads first, then writes, demotions, trims in simulation
order). The planner (:mod:`kvbench.replay.plan`) turns them into chunked I/O with content tags and fences.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kvbench.errors import SpecError
from kvbench.sim.admission import ADMISSIONS, is_trivial, make_admission, parse_admission
from kvbench.sim.blockstore import fit_store, make_store, slot_bytes_for
from kvbench.sim.policies import POLICIES, make_policy
from kvbench.units import format_bytes

TIER_NAMES = ("l1", "l2", "l3", "l4")
TIER_MEDIA = {"l1": "HBM (simulated)", "l2": "DRAM arena", "l3": "NVMe block store", "l4": "remote directory"}

# event kinds
HIT_READ, CREATE_WRITE, PROMOTE_WRITE, DEMOTE_READ, DEMOTE_WRITE, TRIM = range(6)
KIND_NAMES = ("hit_read", "create_write", "promote_write", "demote_read", "demote_write", "trim")
EV_READ, EV_WRITE, EV_TRIM = 0, 1, 2

EVENT_DTYPE = np.dtype([
    ("request", "i8"),    # global request index
    ("tier", "u1"),       # 0..3 = l1..l4 (only l2..l4 carry I/O)
    ("op", "u1"),         # 0 read, 1 write, 2 trim
    ("kind", "u1"),       # HIT_READ .. TRIM
    ("slot", "i8"),       # first slot on the tier's store
    ("nslots", "i4"),     # slots covered (1 except segment trims)
    ("key", "u8"),        # block key (0 for trims)
    ("version", "i8"),    # production number of the block's content (-1 for trims)
])

REQUEST_DTYPE = np.dtype([
    ("request", "i8"), ("arrival_s", "f8"), ("blocks", "i4"), ("hit_blocks", "i4"),
    ("hit_l1", "i4"), ("hit_l2", "i4"), ("hit_l3", "i4"), ("hit_l4", "i4"), ("produced", "i4"),
])

WRITE_POLICIES = ("through", "back")
INCLUSIONS = ("inclusive", "exclusive")


@dataclass(frozen=True)
class TierSpec:
    """One tier: name (l1..l4), capacity in bytes, policy, retention (idle TTL) and L3/L4 store layout."""

    name: str
    capacity_bytes: int
    policy: str = "lru"
    ttl_s: float | None = None
    layout: str = "slot"
    trim: bool = False
    admission: str = "all"        # admission policy spec (kvbench.sim.admission), L3/L4 only


@dataclass(frozen=True)
class HierarchySpec:
    """Present tiers (top-down), KV block size and the hierarchy's write/promotion/inclusion rules."""

    tiers: tuple
    block_bytes: int
    write_policy: str = "through"
    inclusion: str = "inclusive"
    promote: bool = True
    segment_bytes: int = 64 << 20
    spare_slots: int = 0          # L3/L4 slot stores' spare slots, on top of the capacity (blockstore.spare_slots_for)
    block_desc: str = ""          # e.g. "llama-3.1-8b, 512 tokens" for messages

    @property
    def slot_bytes(self) -> int:
        return slot_bytes_for(self.block_bytes)

    def capacity_blocks(self, tier: TierSpec) -> int:
        """Blocks the tier caches: L1 is simulated (its bytes / block); a stored tier caches its capacity in
        slots, and its store's overhead goes on top (:func:`fit_store`)."""
        if tier.name == "l1":
            return tier.capacity_bytes // self.block_bytes
        if tier.capacity_bytes < self.slot_bytes:
            return 0
        return self.store_fit(tier)[0]

    def store_fit(self, tier: TierSpec) -> tuple[int, dict, str]:
        """(cache blocks, store keyword arguments, note) of a stored tier. L2 is a DRAM arena whose copies are
        synchronous (no read is in flight when a slot is reused): no spare slots."""
        layout = "slot" if tier.name == "l2" else tier.layout
        return fit_store(layout, tier.capacity_bytes, self.slot_bytes, segment_bytes=self.segment_bytes,
                         spare_slots=0 if tier.name == "l2" else self.spare_slots)

    def validate(self) -> None:
        if not self.tiers:
            raise SpecError("no cache tier is present", "give at least one of --l1, --l2, --l3, --l4 a capacity")
        if self.block_bytes <= 0:
            raise SpecError("KV block size must be > 0", "check the model preset and block_tokens")
        names = [t.name for t in self.tiers]
        if len(set(names)) != len(names) or any(n not in TIER_NAMES for n in names) or \
                names != sorted(names, key=TIER_NAMES.index):
            raise SpecError(f"tiers must be distinct names among {TIER_NAMES}, top-down, not {names}",
                            "list tiers as l1, l2, l3, l4")
        if self.write_policy not in WRITE_POLICIES:
            raise SpecError(f"unknown write policy {self.write_policy!r}", "use --write-policy through or back")
        if self.inclusion not in INCLUSIONS:
            raise SpecError(f"unknown inclusion {self.inclusion!r}", "use inclusive or exclusive")
        if self.inclusion == "exclusive" and self.write_policy != "back":
            raise SpecError("an exclusive hierarchy cannot write through (a new block would live in two tiers)",
                            "use --write-policy back with --exclusive")
        for t in self.tiers:
            if t.policy not in POLICIES:
                raise SpecError(f"{t.name}: unknown cache policy {t.policy!r}", f"use one of {', '.join(POLICIES)}")
            need = self.block_bytes if t.name == "l1" else self.slot_bytes
            if self.capacity_blocks(t) < 1:
                raise SpecError(f"--{t.name}{'' if t.name in ('l1', 'l2') else '-capacity'} "
                                f"{format_bytes(t.capacity_bytes)} cannot hold one KV block of "
                                f"{format_bytes(need)}{' (' + self.block_desc + ')' if self.block_desc else ''}",
                                f"give at least {format_bytes(need)} or 0 to drop the tier")
            if t.ttl_s is not None and not t.ttl_s > 0:
                raise SpecError(f"{t.name}: retention must be > 0 s", "give a positive --ttl")
            parse_admission(t.admission)
            if t.name in ("l1", "l2") and not is_trivial(t.admission):
                raise SpecError(f"{t.name}: admission policy {t.admission!r} applies to the L3/L4 tiers only",
                                "set --admission for the SSD (L3) and remote (L4) tiers")


@dataclass
class TierCounters:
    """Block counts per tier (bytes = blocks x slot size; L1 counts blocks only)."""

    hit_blocks: int = 0
    hit_reads: int = 0
    create_writes: int = 0
    promote_writes: int = 0
    demote_reads: int = 0
    demote_writes: int = 0
    trims_slots: int = 0
    evictions: int = 0
    expirations: int = 0
    reclaim_drops: int = 0
    admission_rejects: int = 0     # blocks the admission policy kept out (not written)
    peak_resident: int = 0

    @property
    def writes(self) -> int:
        return self.create_writes + self.promote_writes + self.demote_writes

    @property
    def reads(self) -> int:
        return self.hit_reads + self.demote_reads


@dataclass
class _Tier:
    level: int                     # 0..3
    spec: TierSpec
    policy: object
    store: object | None           # None for L1 (simulated)
    meta: dict = field(default_factory=dict)     # key -> (slot, version)
    c: TierCounters = field(default_factory=TierCounters)
    admission: object | None = None                # kvbench.sim.admission policy; None admits all


class _Inspect:
    """Inspection both hierarchies share: tiers by name, resident keys, counters."""

    tiers: list

    def tier(self, name: str):
        for t in self.tiers:
            if t.spec.name == name:
                return t
        raise KeyError(name)

    def resident(self, name: str) -> set:
        return set(self.tier(name).meta)

    def counters(self) -> dict:
        return {t.spec.name: t.c for t in self.tiers}

    def _present(self, names) -> list:
        return [i for i, t in enumerate(self.tiers) if t.spec.name in names]

    def run_one(self, now: float, keys, request: int) -> tuple[list, np.ndarray]:
        """One request (``keys``: its uint64 block keys) as request number ``request``: ([hit blocks, hits in
        l1, l2, l3, l4], its events), what :meth:`run` gives for a batch of one (a cluster runs requests one at
        a time, routed in between)."""
        reqs, ev = self.run(np.array([now], np.float64), np.array([0, len(keys)]), keys, first_request=request)
        r = reqs[0]
        return [int(r["hit_blocks"]), int(r["hit_l1"]), int(r["hit_l2"]), int(r["hit_l3"]), int(r["hit_l4"])], ev


class ReferenceHierarchy(_Inspect):
    """The tier simulation in plain Python: the readable definition of its semantics.

    :class:`Hierarchy` (compiled, :mod:`kvbench.sim.tiers_kernel`) must give identical requests, events,
    counters and residency for every spec; the tests hold the two together on randomized traces.
    """

    def __init__(self, spec: HierarchySpec):
        spec.validate()
        self.spec = spec
        self.tiers: list[_Tier] = []
        for t in spec.tiers:
            cap = spec.capacity_blocks(t)
            store = None
            if t.name != "l1":
                layout = "slot" if t.name == "l2" else t.layout
                _, kw, _ = spec.store_fit(t)
                store = make_store(layout, cap, spec.slot_bytes, trim=t.trim and t.name != "l2", **kw)
            adm = None if is_trivial(t.admission) else make_admission(t.admission, cap)
            self.tiers.append(_Tier(TIER_NAMES.index(t.name), t, make_policy(t.policy, cap, t.ttl_s), store,
                                    admission=adm))
        self._adm = [t.admission for t in self.tiers]
        self._adm_requests = [a for a in self._adm if a is not None and a.needs_request]
        self.demote = spec.write_policy == "back" or spec.inclusion == "exclusive"
        self.exclusive = spec.inclusion == "exclusive"
        if self.exclusive:
            self.create_at = [0]
        elif spec.write_policy == "through":
            self.create_at = list(range(len(self.tiers)))
        else:
            vol = [i for i, t in enumerate(self.tiers) if t.level <= 1]
            self.create_at = vol or [0]
        self.produced = 0
        self._seq = 0
        self._req = 0
        self._now = 0.0
        self._blocks = 0              # blocks of the request being simulated (admission context)
        self._ev: list = []           # events of the request being simulated
        self._out: list = []          # events of the batch, in issue order

    # --- events ----------------------------------------------------------------------------------------
    def _emit(self, t: _Tier, op: int, kind: int, slot: int, key: int, version: int, nslots: int = 1):
        self._ev.append((self._req, t.level, op, kind, slot, nslots, key, version))

    def _trims(self, t: _Tier, trims: list):
        for first, n in trims:
            self._emit(t, EV_TRIM, TRIM, first, 0, -1, n)
            t.c.trims_slots += n

    @property
    def admission_active(self) -> bool:
        """True when some tier has a non-trivial admission policy."""
        return any(a is not None for a in self._adm)

    def cached_prefix(self, keys, now: float, names=TIER_NAMES) -> int:
        """Leading blocks of ``keys`` that some tier in ``names`` holds (and has not let expire at ``now``),
        by the policies' side-effect-free ``contains``: recency untouched (what a cache-aware router knows)."""
        pols = [self.tiers[i].policy for i in self._present(names)]
        n = 0
        for k in keys:
            if not any(p.contains(k, now) for p in pols):
                break
            n += 1
        return n

    # --- tier operations -------------------------------------------------------------------------------
    def _insert(self, ti: int, key, version: int, kind: int, depth: int = -1) -> None:
        """Write ``key`` into tier ``ti`` (``depth``: its position in the request's prefix, -1 for demotions)."""
        t = self.tiers[ti]
        if key in t.meta:               # already resident (same content): refresh only
            t.policy.insert(key, self._now)
            return
        adm = t.admission               # the admission hook: decide before anything is evicted
        if adm is not None:
            pol = t.policy
            victim = pol.victim() if adm.needs_victim and len(pol) >= pol.capacity else None
            if not adm.admit(key, self._now, depth, self._blocks, victim):
                t.c.admission_rejects += 1
                return
        for victim in t.policy.insert(key, self._now):
            t.c.evictions += 1
            self._evict(ti, victim)
        if t.store is None:
            t.meta[key] = (-1, version)
        else:
            slot, dropped, trims = t.store.alloc(key)
            for victim in dropped:           # log reclaim: demote (read) before the segment is trimmed/reused
                t.policy.remove(victim)
                t.c.reclaim_drops += 1
                self._evict(ti, victim, freed=True)
            self._trims(t, trims)
            t.meta[key] = (slot, version)
            self._emit(t, EV_WRITE, kind, slot, key, version)
        if kind == CREATE_WRITE:
            t.c.create_writes += 1
        elif kind == PROMOTE_WRITE:
            t.c.promote_writes += 1
        else:
            t.c.demote_writes += 1
        n = len(t.meta)
        if n > t.c.peak_resident:
            t.c.peak_resident = n

    def _evict(self, ti: int, key, freed: bool = False) -> None:
        """``key`` left tier ``ti`` (its policy already dropped it): demote it if asked, free its slot."""
        t = self.tiers[ti]
        slot, version = t.meta.pop(key)
        if self.demote and ti + 1 < len(self.tiers):
            u = self.tiers[ti + 1]
            if key not in u.meta:
                if t.store is not None:
                    self._emit(t, EV_READ, DEMOTE_READ, slot, key, version)
                    t.c.demote_reads += 1
                self._insert(ti + 1, key, version, DEMOTE_WRITE)
        if t.store is not None and not freed:
            self._trims(t, t.store.free(slot))

    def _remove(self, ti: int, key) -> None:
        """Take ``key`` out of tier ``ti`` without demotion (exclusive promotion)."""
        t = self.tiers[ti]
        t.policy.remove(key)
        slot, _ = t.meta.pop(key)
        if t.store is not None:
            self._trims(t, t.store.free(slot))

    # --- one request -----------------------------------------------------------------------------------
    def request(self, now: float, keys: list) -> tuple[int, list, int]:
        """Simulate one request; returns (hit blocks, hits per tier level [4], blocks produced)."""
        self._now = now
        tiers = self.tiers
        for ti, t in enumerate(tiers):
            for key in t.policy.expire(now):
                t.c.expirations += 1
                self._evict(ti, key)
        n = len(keys)
        self._blocks = n
        for a in self._adm_requests:
            a.begin_request(keys, now)
        found = [-1] * n
        produced = 0
        adms = self._adm
        for i in range(n - 1, -1, -1):
            key = keys[i]
            for ti, t in enumerate(tiers):
                if adms[ti] is not None:
                    adms[ti].observe(key, now, i)
                if t.policy.lookup(key, now):
                    found[i] = ti
                    break
            else:
                version = self._seq
                self._seq += 1
                produced += 1
                for ti in self.create_at:
                    self._insert(ti, key, version, CREATE_WRITE, i)
        h = 0
        while h < n and found[h] >= 0:
            h += 1
        loop_ev = self._ev
        self._ev = []
        # A hit block normally sat in its slot since before the request, so its read may go first. One
        # that a demotion cascade moved there during this request must be read after that write.
        moved = {(e[1], e[4]) for e in loop_ev if e[2] == EV_WRITE} if h and loop_ev else ()
        per_level = [0, 0, 0, 0]
        load, late = [], []
        versions = [0] * h
        for i in range(h):
            t = tiers[found[i]]
            slot, version = t.meta[keys[i]]
            versions[i] = version
            per_level[t.level] += 1
            t.c.hit_blocks += 1
            if t.store is not None:
                e = (self._req, t.level, EV_READ, HIT_READ, slot, 1, keys[i], version)
                (late if (t.level, slot) in moved else load).append(e)
                t.c.hit_reads += 1
        # promotion, deepest-first
        top_is_l1 = tiers[0].level == 0
        for i in range(h - 1, -1, -1):
            ti = found[i]
            if ti == 0:
                continue
            key, version = keys[i], versions[i]
            if self.exclusive:
                for tj in range(1, len(tiers)):
                    if key in tiers[tj].meta:
                        self._remove(tj, key)
                self._insert(0, key, version, PROMOTE_WRITE, i)
            else:
                ups = range(ti - 1, -1, -1) if self.spec.promote else ([0] if top_is_l1 else [])
                for tj in ups:
                    if key not in tiers[tj].meta:
                        self._insert(tj, key, version, PROMOTE_WRITE, i)
        out = self._out                 # the request's hit reads go first: they are its load time
        out.extend(load)
        out.extend(loop_ev)
        out.extend(late)
        out.extend(self._ev)            # promotions
        self._ev = []
        self.produced += produced
        self._req += 1
        return h, per_level, produced

    def run(self, timestamps, offsets, keys, first_request: int = 0):
        """Simulate a batch of requests (CSR arrays as in ``Trace``); returns (requests, events) arrays."""
        self._req = first_request
        times = np.asarray(timestamps, dtype=np.float64).tolist()
        offs = np.asarray(offsets).tolist()
        key_list = np.asarray(keys).tolist()
        rows = []
        self._out = []
        for r in range(len(times)):
            a, b = offs[r], offs[r + 1]
            h, lv, produced = self.request(times[r], key_list[a:b])
            rows.append((first_request + r, times[r], b - a, h, lv[0], lv[1], lv[2], lv[3], produced))
        reqs = np.array(rows, dtype=REQUEST_DTYPE) if rows else np.zeros(0, REQUEST_DTYPE)
        events = np.array(self._out, dtype=EVENT_DTYPE) if self._out else np.zeros(0, EVENT_DTYPE)
        self._out = []
        return reqs, events


# --- the compiled hierarchy ----------------------------------------------------------------------------------
_HUGE_PAGE = 2 << 20


def _aligned_zeros(n: int) -> np.ndarray:
    """n zero int64s starting on a 2 MiB boundary (so on a cache line: the node records are lines), inside an
    allocation of at least 4 MiB, for which numpy asks transparent huge pages: the kernel reads the state at
    random, and a few 2 MiB pages (TLB entries, page faults) replace hundreds of 4 KiB ones."""
    raw = np.zeros(max(n + _HUGE_PAGE // 8, 2 * _HUGE_PAGE // 8), dtype=np.int64)
    off = (-raw.ctypes.data % _HUGE_PAGE) // 8
    return raw[off:off + n]


POOL_START = 1 << 16     # nodes a compiled tier's pool starts with at most (it grows when its tier needs more)
_STORE_CODES = {None: 0, "slot": 1, "log": 2}


def compiled(spec: HierarchySpec) -> bool:
    """True when the kernel has a compiled form of every tier's admission policy (else the reference runs)."""
    return all(is_trivial(t.admission) or ADMISSIONS[parse_admission(t.admission)[0]].kernel_code is not None
               for t in spec.tiers)


def _lay_tier(K, row, z: dict, nn: int, nmax: int, pec: int, size: dict) -> None:
    """Lay out one tier (``z``: its codes and sizes) with a node pool of ``nn`` nodes (at most ``nmax``) for
    requests of up to ``pec`` blocks: its row fields (``row``), its regions at the ends of ``size`` (name ->
    words so far), which grow by them."""
    hsize = 1 << max(4, int(2 * nn - 1).bit_length())
    heap = 2 * nn + 70 if z["ttl"] is not None and z["pol"] != 0 else 0
    row[K.POL], row[K.CAP], row[K.SCAP], row[K.MCAP] = z["pol"], z["cap"], z["scap"], z["mcap"]
    row[K.HASTTL] = z["ttl"] is not None
    row[K.STORE], row[K.TRIMF], row[K.LEVEL] = z["store"], z["trim"], z["level"]
    row[K.NB], row[K.NN], row[K.HB], row[K.HM] = size["NFREE"], nn, size["HT"], hsize - 1
    row[K.NNMAX] = nmax
    row[K.HPB], row[K.HPC], row[K.PEB], row[K.PEC] = size["HD"], heap, size["PEXP"], pec
    row[K.SLOTB], row[K.NSLOTS], row[K.SFB] = size["SFREE"], z["n_slots"], size["SFREE"]
    row[K.SEGS], row[K.NSEG], row[K.SEGB], row[K.DRB] = z["segs"], z["nseg"], size["SEGL"], size["DROP"]
    for q in range(3):
        row[K.QH0 + q] = row[K.QT0 + q] = -1
    row[K.SLH] = row[K.SLT] = -1
    for n in ("NFREQ", "NFREE"):
        size[n] += nn
    size["NODE"] += K.NW * nn          # node records
    size["HT"] += 2 * hsize            # (node + 1, key) pairs
    size["HD"] += heap
    size["HK"] += heap
    size["PEXP"] += pec
    for n in ("SFREE", "SKEY", "SLIVE", "SWR"):
        size[n] += z["n_slots"]
    for n in ("SEGL", "SPREV", "SNEXT", "SEALED", "FSEGS"):
        size[n] += z["nseg"]
    size["DROP"] += z["segs"]


def _init_tier(K, row, z: dict, arrs: dict) -> None:
    """A new tier's free lists: every node of its pool, every slot (slot store) or segment but the open one (log)."""
    nb, nn, sb, gb = row[K.NB], row[K.NN], row[K.SLOTB], row[K.SEGB]
    arrs["NFREE"][nb:nb + nn] = np.arange(nn - 1, -1, -1)
    row[K.FTOP] = nn
    if z["store"] == 1:
        arrs["SFREE"][sb:sb + z["n_slots"]] = np.arange(z["n_slots"])
        row[K.SFN] = z["n_slots"]
    elif z["store"] == 2:
        arrs["FSEGS"][gb:gb + z["nseg"] - 1] = np.arange(1, z["nseg"])
        row[K.FSN] = z["nseg"] - 1


def _region_spans(K, size: dict, base: int) -> tuple[dict, int]:
    """Each array region's (start, words) from ``base`` on, node records on cache-line boundaries; and the end."""
    spans = {}
    for n in K.INT_ARRAYS + K.FLOAT_ARRAYS:
        if n == "NODE":                    # records on cache-line boundaries (A's data is 64-byte aligned)
            base = -(-base // K.NW) * K.NW
        spans[n] = (base, size[n])
        base += size[n]
    return spans, base




class _StoreView:
    """Layout figures of a tier's block store (as SlotStore/LogStore report them) and its live counters."""

    def __init__(self, hier: "Hierarchy", t: int, layout: str, capacity: int, slot_bytes: int, n_slots: int,
                 segment_slots: int, n_segments: int, trim: bool):
        self._h, self._t = hier, t
        self.layout, self.capacity_blocks, self.slot_bytes = layout, capacity, slot_bytes
        self.n_slots, self.segment_slots, self.n_segments, self.trim_enabled = n_slots, segment_slots, n_segments, trim

    @property
    def footprint_bytes(self) -> int:
        return self.n_slots * self.slot_bytes

    def _i(self, f):
        from kvbench.sim import tiers_kernel as K

        self._h._sync()
        return int(self._h._I[self._t, getattr(K, f)])

    used = property(lambda self: self._i("USED"))
    reclaimed_segments = property(lambda self: self._i("RECLAIMED"))
    dropped_blocks = property(lambda self: self._i("DROPPED"))


class _AdmissionView:
    """A compiled tier's admission policy: its description and parameters from the reference object, its
    state (TinyLFU's sketch) read from the compiled state."""

    def __init__(self, hier: "Hierarchy", t: int, policy):
        self._h, self._t, self._p = hier, t, policy
        self.name, self.params = policy.name, policy.params

    def describe(self) -> str:
        return self._p.describe()

    def _tinylfu(self) -> None:
        if self.name != "tinylfu":
            raise AttributeError(f"{self.name} admission has no frequency sketch")

    def estimate(self, key) -> int:
        self._tinylfu()
        k = int(np.array(key, dtype=np.uint64).view(np.int64))
        return int(self._h._K.sketch_estimate(self._h._A, self._t, k))

    @property
    def resets(self) -> int:
        self._tinylfu()
        return int(self._h._I[self._t, self._h._K.SKRES])

    @property
    def increments(self) -> int:
        self._tinylfu()
        return int(self._h._I[self._t, self._h._K.SKINC])


class _TierView:
    """One tier of a compiled Hierarchy, with the attributes of the reference's tiers (level, spec, policy,
    store, c, meta), read from the compiled state."""

    def __init__(self, hier: "Hierarchy", t: int, level: int, spec: TierSpec, policy, store):
        self._h, self._t = hier, t
        self.level, self.spec, self.policy, self.store = level, spec, policy, store
        self.admission = None           # _AdmissionView of the tier's policy; None admits all

    @property
    def c(self) -> TierCounters:
        from kvbench.sim import tiers_kernel as K

        row = self._h._I[self._t]
        f = {"hit_blocks": K.C_HIT_BLOCKS, "hit_reads": K.C_HIT_READS, "create_writes": K.C_CREATE,
             "promote_writes": K.C_PROMOTE, "demote_reads": K.C_DEMOTE_READS, "demote_writes": K.C_DEMOTE_WRITES,
             "trims_slots": K.C_TRIMS, "evictions": K.C_EVICT, "expirations": K.C_EXPIRE,
             "reclaim_drops": K.C_RECLAIM, "peak_resident": K.C_PEAK, "admission_rejects": K.C_REJECT}
        return TierCounters(**{name: int(row[i]) for name, i in f.items()})

    @property
    def meta(self) -> dict:
        """key -> (slot, version) of the blocks this tier holds (built on each call: for inspection)."""
        from kvbench.sim.tiers_kernel import tier_keys

        self._h._sync()
        keys, slots, vers = tier_keys(self._h._A, self._t, True)
        return dict(zip(keys.view(np.uint64).tolist(), zip(slots.tolist(), vers.tolist())))


class Hierarchy(_Inspect):
    """Runs requests through the tiers; collects block events and per-request hit counts (compiled).

    Same interface and results as :class:`ReferenceHierarchy`: ``run`` (a batch), ``request`` (one),
    ``tiers`` (level, spec, policy, store, c, meta), ``tier``, ``resident``, ``counters``, ``produced``.
    """

    def __new__(cls, spec: HierarchySpec, max_request_blocks: int | None = None):
        # an admission policy the kernel has no compiled form of runs in the reference (same results)
        if not compiled(spec):
            return ReferenceHierarchy(spec)
        return super().__new__(cls)

    @property
    def admission_active(self) -> bool:
        """True when some tier has a non-trivial admission policy."""
        return any(t.admission is not None for t in self.tiers)

    def __init__(self, spec: HierarchySpec, max_request_blocks: int | None = None):
        """``max_request_blocks``: the longest request to come, when known (a trace's), so that the state is
        laid out for it at once rather than grown during the first requests (results are the same either way)."""
        self._describe(spec)
        K = self._K
        self._one = None                # run_one's buffers
        self._pec = 0
        self._A = None
        most = max(0, int(max_request_blocks or 0))
        pec = max(256, most + 16)
        need = 8 * most + 256 + 4 * max(self._segs)           # free nodes the kernel asks of a pool per request
        self._evcap = max(1024, 2 * self._ev_need(most))
        # a pool up to POOL_START nodes is laid out whole at once (its pages are touched only as it fills); a
        # larger one starts there and doubles as its tier fills (a relayout between requests, counted in the run)
        self._pools = [min(self._pool_max(z, pec), max(POOL_START, need)) for z in self._sizes]
        self._build(pec)
        self._set_globals(self._G)
        self._req = 0
        self._load_kernel()

    def _describe(self, spec: HierarchySpec) -> None:
        """The tiers as the kernel sees them (``_sizes``: codes and sizes per tier; ``_adm``: the admission
        arrays' layout) and their inspection views (``tiers``), before any state is laid out."""
        from kvbench.sim import tiers_kernel as K

        spec.validate()
        self.spec = spec
        self._K = K
        self.tiers: list[_TierView] = []
        sizes = []
        for t, ts in enumerate(spec.tiers):
            cap = spec.capacity_blocks(ts)
            pol = make_policy(ts.policy, cap, ts.ttl_s)        # validates; holds capacity/name for callers
            layout = None if ts.name == "l1" else ("slot" if ts.name == "l2" else ts.layout)
            segs = nseg = n_slots = 0
            if layout is not None:             # sized as the reference's make_store(.., **store_fit kwargs)
                _, kw, _ = spec.store_fit(ts)
                if layout == "slot":
                    n_slots = cap + max(0, int(kw.get("spare_slots", 0)))
                else:
                    segs = max(1, int(kw.get("segment_bytes", spec.segment_bytes)) // spec.slot_bytes)
                    nseg = -(-cap // segs) + max(1, int(kw.get("spare_segments", 1)))
                    n_slots = nseg * segs
            trim = bool(ts.trim and ts.name not in ("l1", "l2"))
            store = None if layout is None else _StoreView(self, t, layout, cap, spec.slot_bytes, n_slots, segs,
                                                           nseg, trim)
            view = _TierView(self, t, TIER_NAMES.index(ts.name), ts, pol, store)
            adm = {}
            if not is_trivial(ts.admission):
                policy = make_admission(ts.admission, cap)
                view.admission = _AdmissionView(self, t, policy)
                adm = policy.kernel_params()
            self.tiers.append(view)
            sizes.append(dict(pol=pol.kernel_code, cap=cap, adm=adm,
                              scap=getattr(pol, "small_capacity", 0), mcap=getattr(pol, "main_capacity", 0),
                              ttl=ts.ttl_s, store=_STORE_CODES[layout], trim=trim,
                              level=TIER_NAMES.index(ts.name), n_slots=n_slots, segs=segs, nseg=nseg))
        self._sizes = sizes
        self._segs = [z["segs"] for z in sizes]
        self._adm = self._adm_layout()
        self.exclusive = spec.inclusion == "exclusive"
        self.demote = spec.write_policy == "back" or self.exclusive
        if self.exclusive:
            self._create_at = [0]
        elif spec.write_policy == "through":
            self._create_at = list(range(len(self.tiers)))
        else:
            self._create_at = [i for i, t in enumerate(self.tiers) if t.level <= 1] or [0]

    def _set_globals(self, G) -> None:
        """The hierarchy's rules in a new state's globals: tiers, demotion, inclusion, promotion, creation tiers."""
        K = self._K
        G[K.G_NT] = len(self.tiers)
        G[K.G_DEMOTE], G[K.G_EXCL] = int(self.demote), int(self.exclusive)
        G[K.G_PROMOTE], G[K.G_TOPL1] = int(self.spec.promote), int(self.tiers[0].level == 0)
        G[K.G_NCREATE] = len(self._create_at)
        G[K.G_CREATE0:K.G_CREATE0 + len(self._create_at)] = self._create_at

    def _load_kernel(self) -> None:
        """Load the compiled kernel now (an empty batch), so that timing a run times the simulation."""
        K = self._K
        z, z1 = np.zeros(0, np.int64), np.zeros(1, np.int64)
        K.run_requests(self._A, np.zeros(0), z1, z, 0, np.zeros((0, 8), np.int64), self._xbuf, z1, z1.copy(),
                       np.zeros(4, np.int64))
        K.fill_requests(np.zeros((0, 8), np.int64), np.zeros(0), np.zeros(0, REQUEST_DTYPE))
        K.fill_events(self._A, np.zeros(0, EVENT_DTYPE))

    def _sync(self) -> None:
        """Bring the state's shared parts up to date before it is inspected (a pool member's: SharedPool)."""

    # --- state ---------------------------------------------------------------------------------------------
    def _adm_layout(self) -> dict:
        """Sizes of the admission arrays (fixed for the hierarchy's life) and each tier's row fields: ghost lists
        numbered in tier order (node pools of size + 1, tables of twice that, rounded up to a power of two)
        and TinyLFU sketches (4 rows of width / 16 words)."""
        K = self._K
        size = {n: 0 for n in K.FIXED_ARRAYS}
        size["GH"], size["ADMF"] = K.NGHOST * K.GHF, 8
        ghosts, rows = [], []
        for z in self._sizes:
            a = z["adm"]
            row = {K.ADM: a.get("code", 0), K.ADMG0: -1, K.ADMG1: -1, K.ADEPTH: -1, K.ABEYOND: -1}
            for j, g in enumerate(a.get("ghosts", ())):
                if g:
                    hsize = 1 << max(4, int(2 * (g + 1) - 1).bit_length())
                    ghosts.append((g, size["GKEY"], size["GHT"], hsize))
                    row[K.ADMG0 + j] = len(ghosts) - 1
                    size["GKEY"] += g + 1
                    size["GHT"] += hsize
            if "sketch" in a:
                width, shift, sample = a["sketch"]
                row.update({K.SKB: size["SK"], K.SKW: width // 16, K.SKSH: shift, K.SKSAMP: sample})
                size["SK"] += 4 * (width // 16)
            if a.get("depth") is not None:
                row[K.ADEPTH] = a["depth"]
            if a.get("beyond") is not None:
                row[K.ABEYOND] = a["beyond"]
            row[K.ALIMIT] = a.get("limit", 0)
            row[K.AMINB] = a.get("min_blocks", 0)
            row[K.AWIN] = int(a.get("window") is not None)
            rows.append((row, a.get("window") or 0.0))
        for n in ("GPREV", "GNEXT", "GFREE", "GVAL"):
            size[n] = size["GKEY"]
        return {"size": size, "ghosts": ghosts, "rows": rows}

    def _adm_init(self, I, arrs) -> None:
        """A new state's admission part: row fields, empty ghost lists (all nodes free), windows."""
        K = self._K
        lay = self._adm
        for t, (row, window) in enumerate(lay["rows"]):
            for f, v in row.items():
                I[t, f] = v
            arrs["ADMF"][2 * t] = window
        gh = arrs["GH"].reshape(K.NGHOST, K.GHF)
        for q, (g, nb, hb, hsize) in enumerate(lay["ghosts"]):
            gh[q, [K.GH_NB, K.GH_CAP, K.GH_HB, K.GH_HM, K.GH_HEAD, K.GH_TAIL, K.GH_LEN, K.GH_FTOP]] = \
                [nb, g, hb, hsize - 1, -1, -1, 0, g + 1]
            arrs["GFREE"][nb:nb + g + 1] = np.arange(g, -1, -1)

    def _ev_need(self, most: int) -> int:
        """Event rows one request of ``most`` blocks can write: per block a few per tier, plus log reclaims
        cascading down (the kernel checks the same bound before each request, for its own length)."""
        return (len(self._segs) + 1) * (8 * (most + 1) + 8 * sum(self._segs)) + 64

    @staticmethod
    def _pool_max(z: dict, pec: int) -> int:
        """Nodes a tier can need: keys in the policy, S3-FIFO's ghosts, and meta-only keys (expired, pending)."""
        return z["cap"] + (z["mcap"] if z["pol"] == 2 else 0) + 2 * pec + 256

    def _build(self, pec: int) -> None:
        """(Re)lay out the state for requests of up to ``pec`` blocks, node pools of ``self._pools`` and
        ``self._evcap`` event rows, keeping what an old state holds (its events of the batch included)."""
        K = self._K
        old, old_arrs = self._A, getattr(self, "_arrs", None)
        T = len(self._sizes)
        rows = np.zeros((4, K.NFIELDS), dtype=np.int64)
        size = {n: 0 for n in K.INT_ARRAYS + K.FLOAT_ARRAYS}
        size["TTL"] = 4
        size.update(self._adm["size"])
        for t, z in enumerate(self._sizes):
            nmax = self._pool_max(z, pec)
            _lay_tier(K, rows[t], z, min(nmax, self._pools[t]), nmax, pec, size)
        spans, ev_base = _region_spans(K, size, K.GB + K.NG)
        if old is not None:
            self._evcap = max(self._evcap, int(self._G[K.G_EVCAP]))
        A = _aligned_zeros(ev_base + 8 * self._evcap)
        I, G, arrs = self._bind(A, spans)
        for n, (b, _) in spans.items():
            G[getattr(K, "B_" + n)] = b
        G[K.B_EV], G[K.G_EVCAP] = ev_base, self._evcap
        G[K.G_SUMSEGS], G[K.G_MAXSEGS] = sum(self._segs), max(self._segs)
        arrs["TTL"][:T] = [z["ttl"] or 0.0 for z in self._sizes]
        if old is None:
            I[:] = rows
            for t, z in enumerate(self._sizes):
                _init_tier(K, I[t], z, arrs)
            self._adm_init(I, arrs)
        else:
            keep_g = list(range(K.G_CREATE0 + 4))            # globals and the creation tiers
            G[keep_g] = self._G[keep_g]
            self._relayout(old_arrs, self._I, I, rows, arrs)
            ne = 8 * int(self._G[K.G_NEV])
            ob = int(self._G[K.B_EV])
            A[ev_base:ev_base + ne] = old[ob:ob + ne]
        self._I, self._G, self._arrs, self._spans = I[:T], G, arrs, spans
        self._A = A
        self._pec = pec
        self._xbuf = np.zeros(int(I[:T, K.NN].max()) + pec + 16, np.int64)

    def _bind(self, A, spans: dict):
        """Views of a state: the tier rows, the globals and each array region (``spans``: name -> (base, size))."""
        K = self._K
        arrs = {}
        for n, (b, size) in spans.items():
            arrs[n] = A[b:b + size].view(np.float64) if n in K.FLOAT_ARRAYS else A[b:b + size]
        return A[:K.GB].reshape(4, K.NFIELDS), A[K.GB:K.GB + K.NG], arrs

    def _grow_events(self) -> None:
        """Room for ``self._evcap`` event rows: the event region is the state's last, so the state is copied as
        it is (up to the batch's events so far) into a longer array; nothing is laid out again."""
        K = self._K
        keep = int(self._G[K.B_EV]) + 8 * int(self._G[K.G_NEV])
        A = _aligned_zeros(int(self._G[K.B_EV]) + 8 * self._evcap)
        A[:keep] = self._A[:keep]
        I, G, self._arrs = self._bind(A, self._spans)
        G[K.G_EVCAP] = self._evcap
        self._I, self._G, self._A = I[:len(self._sizes)], G, A

    def _relayout(self, o, oI, I, rows, arrs) -> None:
        """Copy an old state into larger per-tier regions (node pools and pending lists grow; the rest keeps)."""
        K = self._K
        moved = (K.NB, K.NN, K.HB, K.HM, K.PEB, K.PEC, K.FTOP, K.HPB, K.HPC, K.NNMAX)
        for t in range(oI.shape[0]):
            r, orow = I[t], oI[t]
            r[:] = orow
            for f in moved:
                r[f] = rows[t, f]
            ob, nb, on, nn = orow[K.NB], r[K.NB], orow[K.NN], r[K.NN]
            arrs["NFREQ"][nb:nb + on] = o["NFREQ"][ob:ob + on]
            arrs["NODE"][K.NW * nb:K.NW * (nb + on)] = o["NODE"][K.NW * ob:K.NW * (ob + on)]
            top = orow[K.FTOP]
            arrs["NFREE"][nb:nb + top] = o["NFREE"][ob:ob + top]
            arrs["NFREE"][nb + top:nb + top + nn - on] = np.arange(nn - 1, on - 1, -1)
            r[K.FTOP] = top + nn - on
            K.rehash(o["HT"], orow[K.HB], orow[K.HM] + 1, arrs["HT"], r[K.HB], r[K.HM])
            pen = orow[K.PEN]
            arrs["PEXP"][r[K.PEB]:r[K.PEB] + pen] = o["PEXP"][orow[K.PEB]:orow[K.PEB] + pen]
            hn = orow[K.HPN]
            for f in ("HD", "HK"):
                arrs[f][r[K.HPB]:r[K.HPB] + hn] = o[f][orow[K.HPB]:orow[K.HPB] + hn]
        for f in ("SFREE", "SKEY", "SLIVE", "SWR", "SEGL", "SPREV", "SNEXT", "SEALED", "FSEGS", "DROP") + K.FIXED_ARRAYS:
            arrs[f][:] = o[f]

    # --- simulation ----------------------------------------------------------------------------------------
    @property
    def produced(self) -> int:
        return int(self._G[self._K.G_PRODUCED])

    def run(self, timestamps, offsets, keys, first_request: int = 0):
        """Simulate a batch of requests (CSR arrays as in ``Trace``); returns (requests, events) arrays."""
        reqs = self._simulate(timestamps, offsets, keys, first_request)
        events = np.empty(int(self._G[self._K.G_NEV]), EVENT_DTYPE)
        if len(reqs):
            self._K.fill_events(self._A, events)
        return reqs, events

    def run_counted(self, timestamps, offsets, keys, first_request: int = 0):
        """As :meth:`run`, with the events counted instead of returned: (requests, counts), ``counts[0]`` the events
        and ``counts[1]`` their slots per (tier level, op) cell ``level * 3 + op`` (``event_counts``'s cells)."""
        reqs = self._simulate(timestamps, offsets, keys, first_request)
        counts = np.zeros((2, 12), np.int64)
        if len(reqs):
            self._K.count_events(self._A, counts[0], counts[1])
        return reqs, counts

    def _simulate(self, timestamps, offsets, keys, first_request: int) -> np.ndarray:
        """Run the kernel over a batch; returns the request rows (the events stay in the state until the next)."""
        K = self._K
        self._sync()
        times = np.ascontiguousarray(timestamps, dtype=np.float64)
        offs = np.ascontiguousarray(offsets, dtype=np.int64)
        keys = np.ascontiguousarray(keys, dtype=np.uint64).view(np.int64)
        n = times.shape[0]
        self._req = first_request + n
        if n == 0:
            G = self._G
            G[K.G_NEV] = 0
            return np.zeros(0, REQUEST_DTYPE)
        most = int(np.diff(offs).max())
        if most + 16 > self._pec:
            self._build(max(2 * self._pec, most + 16))
        G = self._G
        G[K.G_NEV] = 0
        rows = np.zeros((n, 8), np.int64)
        found = np.zeros(most + 1, np.int64)
        versions = np.zeros(most + 1, np.int64)
        done = 0
        while True:
            done += K.run_requests(self._A, times[done:], offs[done:], keys, first_request + done, rows[done:],
                                   self._xbuf, found, versions, np.zeros(4, np.int64))
            if G[K.G_ERR] != K.NEED_GROW:
                break
            G[K.G_ERR] = 0
            if G[K.G_EVCAP] - G[K.G_NEV] < G[K.G_EVNEED]:      # the kernel's bound for the next request
                self._evcap = max(2 * int(G[K.G_EVCAP]), int(G[K.G_NEV] + 2 * G[K.G_EVNEED]))
                self._grow_events()
            else:
                for t in range(len(self._sizes)):
                    if self._I[t, K.FTOP] < G[K.G_NEED]:
                        self._pools[t] = max(2 * int(self._I[t, K.NN]), int(self._I[t, K.NN]) + int(G[K.G_NEED]))
                self._build(self._pec)
            G = self._G
        if G[K.G_ERR]:
            self._failed(first_request + done)
        reqs = np.empty(n, REQUEST_DTYPE)
        K.fill_requests(rows, times, reqs)
        return reqs

    def _failed(self, request: int) -> None:
        K = self._K
        what = {K.ERR_NODES: "a tier's node pool ran out", K.ERR_META: "a hit block has no slot",
                K.ERR_EVENTS: "a request wrote more events than its bound"}
        raise RuntimeError(f"tier simulation: {what.get(int(self._G[K.G_ERR]), 'failed')} at request "
                           f"{request}; the state is lost (rerun with ReferenceHierarchy)")

    def run_one(self, now: float, keys, request: int) -> tuple[list, np.ndarray]:
        """As :meth:`_Inspect.run_one`, without a batch's set-up: buffers kept from one request to the next
        (``keys``: a contiguous uint64 array). A state that must grow first takes :meth:`run`'s path."""
        K = self._K
        n = keys.shape[0]
        if n + 16 > self._pec or self._one is None or self._one[3].shape[0] < self._pec:
            if n + 16 > self._pec:
                self._build(max(2 * self._pec, n + 16))
            self._one = (np.zeros(1), np.zeros(2, np.int64), np.zeros((1, 8), np.int64),
                         np.zeros(self._pec, np.int64), np.zeros(self._pec, np.int64), np.zeros(4, np.int64))
        t1, o2, rows, found, versions, hitrow = self._one
        t1[0], o2[1] = now, n
        self._sync()
        G = self._G
        G[K.G_NEV] = 0
        K.run_requests(self._A, t1, o2, keys.view(np.int64), request, rows, self._xbuf, found, versions, hitrow)
        if G[K.G_ERR]:
            if G[K.G_ERR] != K.NEED_GROW:
                self._failed(request)
            G[K.G_ERR] = 0              # the kernel stopped before the request: run's path grows the state
            return super().run_one(now, keys, request)
        self._req = request + 1
        ev = np.empty(int(G[K.G_NEV]), EVENT_DTYPE)
        if ev.shape[0]:
            K.fill_events(self._A, ev)
        return rows[0, 2:7].tolist(), ev

    def cached_prefix(self, keys, now: float, names=TIER_NAMES) -> int:
        """As :meth:`ReferenceHierarchy.cached_prefix`, compiled."""
        k = np.asarray(keys, dtype=np.uint64).view(np.int64)
        return int(self._K.cached_prefix(self._A, np.array(self._present(names), np.int64), k, float(now)))

    def request(self, now: float, keys: list) -> tuple[int, list, int]:
        """Simulate one request; returns (hit blocks, hits per tier level [4], blocks produced)."""
        r = self._req
        k = np.asarray(keys, dtype=np.uint64)
        reqs, _ = self.run(np.array([now]), np.array([0, k.size]), k, first_request=r)
        row = reqs[0]
        return int(row["hit_blocks"]), [int(row[f"hit_l{i}"]) for i in range(1, 5)], int(row["produced"])

