"""``kvbench replay kv``: trace -> tier simulation -> I/O plan per target -> engine -> load times and metrics.

Pipeline, per window of requests (memory is bounded by resident keys and one window's plan, not by the trace):

1. :class:`kvbench.sim.tiers.Hierarchy` simulates the window (Python loop over blocks: the only per-block
   Python code) and emits block events (hit reads, creation/promotion/demotion writes, trims).
2. :func:`events_to_plan` turns events into engine rows, vectorised: each block is split into chunk I/Os
   (``chunk_bytes``, default 1 MiB) at ``base + slot * slot_bytes``; tags are ``f(key, version)`` so that
   every read can be verified against the exact content its block was last written with; requests issue at
   trace time / speed; FENCE marks an I/O whose range an earlier, possibly in-flight I/O writes (or reads,
   for a write) since the last fence (:func:`add_fences`).
3. The engine runs the L2 rows (DRAM arena, ``dram`` engine, one copy at a time: a CPU copy is serial, so
   an L2 latency is one block-chunk copy) and the L3/L4 rows (files or block devices, O_DIRECT, libaio, at
   ``qd``) concurrently. Content is synthetic (stamped from the tag), so
   the two domains share no data dependency; hazards only exist within a target.
4. Per request: load time = first issue to last completion of its hit reads (per tier and overall; an L4
   link model adds latency + bytes / bandwidth). Per tier: hit ratio, bytes, bandwidth over the run's wall
   time, read latency histograms. Application write amplification = bytes written to L3 / KV bytes produced.

Results: ``results/<run>/`` with run.json, summary.json, timeseries.csv (per second and tier), requests.csv
(arrival, hit blocks per tier, load times), histograms.json.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from kvbench import procs
from kvbench.errors import KvbenchError, SpecError, TargetError, UsageError, VerifyError
from kvbench.metrics.results import stamp
from kvbench.metrics.smart import DeviceWatch
from kvbench.sim.tiers import (DEMOTE_READ, EVENT_DTYPE, HIT_READ, KIND_NAMES, REQUEST_DTYPE, TIER_MEDIA,
                               TIER_NAMES, Hierarchy, HierarchySpec, TierSpec)
from kvbench.units import format_bytes

MiB = 1 << 20
PLAN_META_DTYPE = np.dtype([("tier", "u1"), ("kind", "u1"), ("key", "u8"), ("version", "i8")])
L4_FILE = "kvbench-l4.store"


# --- configuration --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ReplayConfig:
    """Everything ``kvbench replay kv`` takes; ``validate()`` runs before any I/O."""

    trace: str
    model: str
    fmt: str = "auto"
    tp: int | None = None
    l1: int = 0
    l2: int = 0
    l3: str | None = None
    l3_capacity: int = 0
    l3_region: int = 0                     # the most the L3 store may occupy (a test region); 0: no limit
    l4: str | None = None
    l4_capacity: int = 0
    l4_link_bw: float | None = None        # bytes/s of a modelled link in front of L4 (None: no model)
    l4_link_latency_s: float = 0.0
    policy: str = "lru"
    ttl_s: float | None = None
    write_policy: str = "through"
    inclusion: str = "inclusive"
    promote: bool = True
    layout: str = "slot"
    trim: bool = False
    segment_bytes: int = 64 * MiB
    chunk_bytes: int = 1 * MiB
    speed: float = 1.0
    closed_loop: bool = False
    duration_s: float | None = None
    max_requests: int | None = None
    verify: str = "sampled"
    qd: int = 32
    engine: str = "libaio"
    dry_run: bool = False
    export_iolog: str | None = None
    destroy_data: str | None = None
    results: str = "results"
    window_ios: int = 262144
    sample_keys: float | None = None       # miniature simulation: keep keys hashing under this rate
    sample_seed: int = 0
    admission: str = "all"                 # L3 admission policy (kvbench.sim.admission)
    l4_admission: str | None = None        # L4's (default: the same as L3's)

    @property
    def sample_rate(self) -> float:
        return 1.0 if self.sample_keys is None else float(self.sample_keys)

    def modelled_capacities(self) -> dict:
        """Capacity per tier as given (the full-size cache being modelled), bytes; absent tiers left out."""
        caps = {"l1": self.l1, "l2": self.l2, "l3": self.l3_capacity, "l4": self.l4_capacity}
        return {k: int(v) for k, v in caps.items() if v}

    def validate(self) -> None:
        if self.l3 and self.l3_capacity <= 0 and self.l3_region <= 0:
            raise UsageError(f"--l3 {self.l3} needs --l3-capacity", "give e.g. --l3-capacity 64GiB")
        if (self.l3_capacity > 0 or self.l3_region > 0) and not self.l3:
            raise UsageError(f"{'--l3-capacity' if self.l3_capacity > 0 else '--l3-region'} without --l3 PATH",
                             "give the store file or block device with --l3")
        if self.l3_region > 0 and self.sample_keys is not None:
            raise UsageError("--l3-region with --sample-keys: the region bounds the device store, the capacity "
                             "is the modelled full-size cache", "give --l3-capacity (the store's overhead is on top)")
        if self.l4 and self.l4_capacity <= 0:
            raise UsageError(f"--l4 {self.l4} needs --l4-capacity", "give e.g. --l4-capacity 1TiB")
        if self.l4_capacity > 0 and not self.l4:
            raise UsageError("--l4-capacity without --l4 DIR", "give a directory on the remote filesystem")
        if self.l4 and not self.dry_run and not os.path.isdir(self.l4):     # a dry run writes nothing there
            raise TargetError(f"--l4 {self.l4} is not a directory", "give an existing directory (NFS, FUSE, ...)")
        if not (self.speed > 0 and math.isfinite(self.speed)):
            raise UsageError(f"--speed must be > 0, not {self.speed}", "give e.g. --speed 10")
        if self.chunk_bytes < 4096 or self.chunk_bytes % 4096:
            raise UsageError(f"--chunk {self.chunk_bytes} is not a multiple of 4 KiB", "give e.g. --chunk 1MiB")
        if self.verify not in ("off", "sampled", "all"):
            raise UsageError(f"unknown --verify {self.verify!r}", "use sampled, all or off")
        if self.qd < 1:
            raise UsageError(f"--qd must be >= 1, not {self.qd}", "give e.g. --qd 32")
        if self.duration_s is not None and self.duration_s <= 0:
            raise UsageError("--duration must be > 0", "give e.g. --duration 60s")
        if self.l4_link_bw is not None and self.l4_link_bw <= 0:
            raise UsageError("--l4-link-bw must be > 0", "give e.g. --l4-link-bw 10GB/s")
        if self.sample_keys is not None:
            from kvbench.stream.sampling import check_rate
            check_rate(self.sample_keys)
        from kvbench.sim.admission import parse_admission
        parse_admission(self.admission)
        if self.l4_admission is not None:
            parse_admission(self.l4_admission)


def hierarchy_spec(cfg: ReplayConfig, block_bytes: int, block_desc: str = "") -> HierarchySpec:
    """The simulated hierarchy: every given tier at its capacity x the key sample rate (1 when not sampled)."""
    tiers = []
    rate = cfg.sample_rate
    for name, cap in cfg.modelled_capacities().items():
        if cap:
            adm = {"l3": cfg.admission, "l4": cfg.l4_admission or cfg.admission}.get(name, "all")
            tiers.append(TierSpec(name, int(cap * rate) if rate < 1.0 else int(cap), cfg.policy, cfg.ttl_s,
                                  layout=cfg.layout if name == "l3" else "slot", trim=cfg.trim, admission=adm))
    return HierarchySpec(tuple(tiers), int(block_bytes), write_policy=cfg.write_policy, inclusion=cfg.inclusion,
                         promote=cfg.promote, segment_bytes=cfg.segment_bytes, block_desc=block_desc,
                         spare_slots=store_spare_slots(cfg, block_bytes))


def fit_region(cfg: ReplayConfig, block_bytes: int) -> ReplayConfig:
    """With ``--l3-region``: the L3 cache is the largest capacity (at most ``--l3-capacity`` when given) whose
    store, spare slots included, fits the region (a test region must not be written past)."""
    if cfg.l3_region <= 0:
        return cfg
    from kvbench.sim.blockstore import capacity_within, slot_bytes_for

    slot = slot_bytes_for(block_bytes)
    cap = capacity_within(cfg.layout, cfg.l3_region, slot, segment_bytes=cfg.segment_bytes,
                          spare_slots=store_spare_slots(cfg, block_bytes))
    if cap < slot:
        raise UsageError(f"--l3-region {format_bytes(cfg.l3_region)} cannot hold one {format_bytes(slot)} block and "
                         "its store's overhead", "give a larger region")
    return replace(cfg, l3_capacity=min(cap, cfg.l3_capacity) if cfg.l3_capacity > 0 else cap)


def store_spare_slots(cfg: ReplayConfig, block_bytes: int) -> int:
    """Spare slots of the L3/L4 slot stores, on top of their capacity: about the reads in flight at ``qd``
    (:func:`kvbench.sim.blockstore.spare_slots_for`); none for a dry run, which issues no I/O."""
    from kvbench.sim.blockstore import slot_bytes_for, spare_slots_for

    return 0 if cfg.dry_run else spare_slots_for(cfg.qd, cfg.chunk_bytes, slot_bytes_for(block_bytes))


# --- plan building (vectorised) -------------------------------------------------------------------------
def block_tags(keys: np.ndarray, versions: np.ndarray) -> np.ndarray:
    """Content tag of a block's version: splitmix64(key * golden + version), never 0."""
    with np.errstate(over="ignore"):
        z = keys.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15) + versions.astype(np.uint64) + np.uint64(1)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return np.where(z == 0, np.uint64(1), z)


def events_to_plan(events: np.ndarray, issue_ns_of_request, slot_bytes: int, chunk_bytes: int,
                   tier_target: dict, tier_base: dict | None = None):
    """Block events -> (PLAN_DTYPE rows, PLAN_META_DTYPE rows), one row per chunk I/O, in event order.

    ``issue_ns_of_request(request_ids) -> int64 ns``; ``tier_target`` maps tier level (1..3) to target index;
    ``tier_base`` to the byte offset of that tier's store in its target (default 0). Trims stay whole.
    """
    from kvbench.engine.plan import PLAN_DTYPE

    ev = events[events["tier"] > 0]
    n = len(ev)
    if n == 0:
        return np.zeros(0, PLAN_DTYPE), np.zeros(0, PLAN_META_DTYPE)
    tier_base = tier_base or {}
    base_of = np.zeros(4, dtype=np.uint64)
    tgt_of = np.zeros(4, dtype=np.uint16)
    for lvl, t in tier_target.items():
        tgt_of[lvl] = t
        base_of[lvl] = tier_base.get(lvl, 0)
    sb, cb = int(slot_bytes), int(chunk_bytes)
    per_block = -(-sb // cb)
    is_trim = ev["op"] == 2
    nch = np.where(is_trim, 1, per_block).astype(np.int64)
    rep = np.repeat(np.arange(n), nch)
    starts = np.cumsum(nch) - nch
    j = (np.arange(rep.size) - starts[rep]).astype(np.uint64)
    e = ev[rep]
    ev_off = base_of[e["tier"]] + e["slot"].astype(np.uint64) * np.uint64(sb)
    plan = np.zeros(rep.size, dtype=PLAN_DTYPE)
    plan["op"] = e["op"]
    plan["target"] = tgt_of[e["tier"]]
    plan["offset"] = ev_off + j * np.uint64(cb)
    trim_rows = is_trim[rep]
    plan["length"] = np.where(trim_rows, e["nslots"].astype(np.int64) * sb,
                              np.minimum(cb, sb - j.astype(np.int64) * cb))
    plan["issue_ns"] = issue_ns_of_request(e["request"])
    plan["tag"] = np.where(trim_rows, np.uint64(0), block_tags(e["key"], e["version"]))
    plan["group"] = e["request"]
    meta = np.zeros(rep.size, dtype=PLAN_META_DTYPE)
    meta["tier"], meta["kind"], meta["key"], meta["version"] = e["tier"], e["kind"], e["key"], e["version"]
    return plan, meta


def add_fences(plan: np.ndarray, grain: int) -> int:
    """Set FENCE on each I/O that may race an earlier in-flight I/O of an overlapping range of its target.

    Ranges are compared in units of ``grain`` bytes (every offset and length of the plan is a multiple of it,
    e.g. gcd(slot, chunk)). A read races an earlier write/trim of a unit it covers; a write/trim races any
    earlier I/O of such a unit (a pending read would see new data, a pending write could land last). The
    earlier I/O can only still be in flight if no FENCE was issued after it, so one sequential pass over the
    candidates places the fewest fences that keep the plan exact. Returns the number of fences.
    """
    from kvbench.engine.plan import FLAG_FENCE

    n = len(plan)
    if n < 2:
        return 0
    g = np.uint64(grain)
    first = plan["offset"] // g
    last = (plan["offset"] + plan["length"].astype(np.uint64) - np.uint64(1)) // g
    span = (last - first + np.uint64(1)).astype(np.int64)
    row = np.repeat(np.arange(n, dtype=np.int64), span)
    k = np.arange(row.size, dtype=np.int64) - np.repeat(np.cumsum(span) - span, span)
    unit = (plan["target"][row].astype(np.uint64) << np.uint64(48)) | (first[row] + k.astype(np.uint64))
    is_w = plan["op"][row] != 0
    order = np.lexsort((row, unit))
    u, r, w = unit[order], row[order], is_w[order]
    same = np.empty(u.size, dtype=bool)
    same[0] = False
    same[1:] = u[1:] == u[:-1]
    prev_any = np.where(same, np.roll(r, 1), -1)
    # last write/trim strictly before, within the same unit: segmented running max
    gid = np.cumsum(~same) - 1
    big = np.int64(n + 1)
    val = gid * big + np.where(w, r + 1, 0)
    incl = np.maximum.accumulate(val) - gid * big - 1          # last write at or before this position
    prev_w = np.where(same, np.roll(incl, 1), -1)
    conflict = np.where(w, prev_any, prev_w)
    per_row = np.full(n, -1, dtype=np.int64)
    np.maximum.at(per_row, r, conflict)
    cand = np.flatnonzero(per_row >= 0)
    if cand.size == 0:
        return 0
    prevs = per_row[cand].tolist()
    fences = []
    last_fence = -1
    for i, p in zip(cand.tolist(), prevs):
        if p >= last_fence:
            fences.append(i)
            last_fence = i
    if fences:
        plan["flags"][np.asarray(fences)] |= FLAG_FENCE
    return len(fences)


# --- device counters ------------------------------------------------------------------------------------
def diskstats(device: str | None) -> dict | None:
    """Bytes read/written/discarded by a block device so far (/proc/diskstats, 512-byte sectors)."""
    if not device:
        return None
    try:
        with open("/proc/diskstats") as fh:
            for line in fh:
                f = line.split()
                if len(f) >= 10 and f[2] == device:
                    disc = int(f[16]) * 512 if len(f) > 16 else 0
                    return {"read_bytes": int(f[5]) * 512, "write_bytes": int(f[9]) * 512, "discard_bytes": disc}
    except OSError:
        return None
    return None


# --- the run --------------------------------------------------------------------------------------------
@dataclass
class _Targets:
    dram: list = field(default_factory=list)        # [l2 target]
    dev: list = field(default_factory=list)         # [l3?, l4?]
    tier_domain: dict = field(default_factory=dict)  # level -> ("dram"|"dev", target index)
    notes: dict = field(default_factory=dict)

    def close(self):
        for t in self.dram + self.dev:
            try:
                t.close()
            except Exception:  # noqa: BLE001 - closing is best effort
                pass


def _open_targets(cfg: ReplayConfig, hier: Hierarchy) -> _Targets:
    """Open L2 arena, L3 store, L4 file; refuse a store that does not fit its target (before any I/O)."""
    from kvbench.engine.targets import check_memory, open_target

    out = _Targets()
    try:
        for t in hier.tiers:
            name = t.spec.name
            if name == "l1":
                continue
            need = t.store.footprint_bytes
            if name == "l2":
                check_memory(need, f"--l2 {format_bytes(cfg.l2)}", "give a smaller --l2 or free memory")
                tgt = open_target(f"dram:{need}", shared=False)     # one worker: private memory faults faster
                out.dram.append(tgt)
                out.tier_domain[t.level] = ("dram", 0)
                continue
            path = cfg.l3 if name == "l3" else os.path.join(cfg.l4, L4_FILE)
            if name == "l3" and os.path.exists(path) and not os.path.isfile(path):
                tgt = open_target(path, write=True, destroy_data=cfg.destroy_data)
            else:
                try:
                    tgt = open_target(path, size=need, write=True)
                    mode = "O_DIRECT"
                except TargetError as e:
                    if name != "l4" or "O_DIRECT" not in str(e):
                        raise
                    tgt = open_target(path, size=need, write=True, direct=False)
                    mode = f"buffered (no O_DIRECT on this filesystem: {e.problem})"
                out.notes[name] = {"io_mode": mode}
            if tgt.size < need:
                tgt.close()
                over = need - t.store.capacity_blocks * t.store.slot_bytes
                fit = max(0, tgt.size - over) // t.store.slot_bytes * t.store.slot_bytes
                raise TargetError(f"the {name} store needs {format_bytes(need)} ({t.store.n_slots} slots of "
                                  f"{format_bytes(t.store.slot_bytes)}: the cache and {format_bytes(over)} of "
                                  f"store overhead on top) but {tgt.path} holds {format_bytes(tgt.size)}",
                                  f"give --{name}-capacity {format_bytes(fit)} or less, or a larger target")
            out.dev.append(tgt)
            out.tier_domain[t.level] = ("dev", len(out.dev) - 1)
    except BaseException:
        out.close()
        raise
    return out


def _batches(cfg: ReplayConfig, trace=None, batch_requests: int = 65536):
    """The trace as batches: read from ``cfg.trace``, or cut from ``trace`` when the caller has it loaded already
    (``kvbench run``'s job: the same requests, the same batches, no second read)."""
    if trace is None:
        from kvbench.stream.traces import iter_trace

        yield from iter_trace(cfg.trace, cfg.fmt, batch_requests=batch_requests)
        return
    for a in range(0, max(trace.n_requests, 1), batch_requests):
        yield trace.slice(a, a + batch_requests) if trace.n_requests > batch_requests else trace


def _load_trace_meta(cfg: ReplayConfig, trace=None):
    """Validate the whole trace (line/field errors before any I/O); return (block_tokens, requests, blocks,
    blocks of the longest request)."""
    bt, nreq, nblk, most = None, 0, 0, 0
    for b in _batches(cfg, trace):
        bt = b.block_tokens
        nreq += b.n_requests
        nblk += int(b.offsets[-1] - b.offsets[0])
        if b.n_requests:
            most = max(most, int(np.diff(b.offsets).max()))
    if bt is None or nreq == 0:
        raise UsageError(f"trace {cfg.trace} has no requests", "give a non-empty trace")
    return bt, nreq, nblk, most


class _Windows:
    """Cut the simulation into windows of whole requests with about ``window_ios`` chunk I/Os each."""

    # windows that plan no I/O (a dry run's) take at least this many blocks: their size sets only the per-window
    # Python overhead (Hierarchy.run's calls, the progress line), never a result. Not more: a window's event rows
    # are laid out and first touched as it runs (64k blocks cost the 122k-block shipped trace ~18% more
    # simulation CPU time; 16k blocks nothing measurable)
    SIM_ONLY_BLOCKS = 1 << 14

    def __init__(self, cfg: ReplayConfig, hier: Hierarchy, ios_per_block: int, plans: bool = True, trace=None):
        self.cfg, self.hier, self.trace = cfg, hier, trace
        self.block_limit = max(64, cfg.window_ios // max(1, ios_per_block))
        self.plans = plans              # False: windows yield their events counted (run_counted), not as rows
        if not plans:
            self.block_limit = max(self.block_limit, self.SIM_ONLY_BLOCKS)
        self.sim_s = 0.0
        self.sim_cpu_s = 0.0            # the simulating thread's CPU time (a loaded machine's waits left out)
        self.sim_blocks = 0
        self.full_blocks = None         # sampled runs: each yielded request's block count before sampling

    def __iter__(self):
        from kvbench.stream.sampling import FULL_BLOCKS, sample_keys

        cfg = self.cfg
        done = 0
        for b in _batches(cfg, self.trace, batch_requests=8192):
            if cfg.sample_keys is not None:
                b = sample_keys(b, cfg.sample_keys, seed=cfg.sample_seed)
            ts, offs, keys = b.timestamp_s, b.offsets - b.offsets[0], b.keys
            n = b.n_requests
            if cfg.max_requests is not None:
                n = min(n, cfg.max_requests - done)
            if cfg.duration_s is not None and not cfg.closed_loop:
                n = min(n, int(np.searchsorted(ts, cfg.duration_s * cfg.speed, side="left")))
            r = 0
            while r < n:
                # grow the window until ~block_limit block touches
                stop = int(np.searchsorted(offs, offs[r] + self.block_limit, side="right")) - 1
                stop = min(max(stop, r + 1), n)
                t0, c0 = time.perf_counter(), time.thread_time()
                run = self.hier.run if self.plans else self.hier.run_counted
                reqs, ev = run(ts[r:stop], offs[r:stop + 1] - offs[r], keys[offs[r]:offs[stop]],
                               first_request=done + r)
                self.sim_s += time.perf_counter() - t0
                self.sim_cpu_s += time.thread_time() - c0
                self.sim_blocks += int(offs[stop] - offs[r])
                if cfg.sample_keys is not None:
                    self.full_blocks = b.extras[FULL_BLOCKS][r:stop]
                yield reqs, ev
                r = stop
            done += n
            if n < b.n_requests:
                return


def _first_per_group(groups: np.ndarray, values: np.ndarray, fn) -> tuple[np.ndarray, np.ndarray]:
    """Reduce ``values`` per run of equal ``groups`` (groups sorted): returns (group ids, reduced)."""
    if groups.size == 0:
        return groups, values
    starts = np.flatnonzero(np.r_[True, groups[1:] != groups[:-1]])
    return groups[starts], fn.reduceat(values, starts)


class _Accumulator:
    """Run-wide metrics gathered window by window (fixed memory: histograms and per-second bins)."""

    def __init__(self, levels):
        from kvbench.metrics.histogram import LatencyHistogram

        self.levels = levels
        self.hist = {(lvl, op): LatencyHistogram() for lvl in levels for op in ("read", "write")}
        self.load_hist = LatencyHistogram()
        self.full_load_hist = LatencyHistogram()        # sampled runs: estimated full-request load times
        self.full_hit_blocks_est = 0.0
        self.full_blocks = 0                            # sampled runs: block references before sampling
        self.tier_load_hist = {lvl: LatencyHistogram() for lvl in levels}
        self.lag_hist = LatencyHistogram()
        self.lag_max_ns = 0
        self.bytes = {(lvl, op): 0 for lvl in levels for op in (0, 1, 2)}
        self.ios = {(lvl, op): 0 for lvl in levels for op in (0, 1, 2)}
        self.first_ns = None
        self.last_ns = None
        self.verify_checked = 0
        self.verify_errors = 0
        self.first_mismatch = None
        self.errors = []
        self.status = "complete"
        self.sec_bytes: dict = {}          # (second, lvl, op) -> bytes
        self.sec_ios: dict = {}            # (second, lvl, op) -> completed I/Os


class LiveProgress:
    """``progress.json`` in the run folder, rewritten at most every ``every_s`` while a window's I/O runs (a
    window can be minutes of I/O, and summary.json only changes between windows): requests done (those of
    finished windows plus the running window's share by I/Os completed), the trace's total, bytes moved per
    domain (``dram`` = L2, ``dev`` = L3/L4) and seconds since the first I/O. Fed by the engine's per-second
    rows (``run_plan(on_second=...)``), which the compiled fast path emits too."""

    FILE = "progress.json"

    def __init__(self, path: Path, trace_requests: int, every_s: float = 1.0):
        self.path, self.total, self.every = Path(path) / self.FILE, int(trace_requests), every_s
        self.lock = threading.Lock()
        self.t0 = time.perf_counter()
        self.done = 0                       # requests of finished windows
        self.win_requests = self.win_ios = 0
        self.win_done_ios = 0.0
        self.bytes = {"dram": 0.0, "dev": 0.0}
        self.last = 0.0

    def window(self, requests_done: int, window_requests: int, window_ios: int) -> None:
        with self.lock:
            self.done, self.win_requests, self.win_ios, self.win_done_ios = (int(requests_done),
                                                                            int(window_requests), int(window_ios), 0.0)
        self.write(force=True)

    def on_second(self, domain: str):
        def row(r: dict) -> None:
            dt = float(r.get("interval_s") or 1.0)
            with self.lock:
                self.win_done_ios += float(r.get("iops") or 0.0) * dt
                self.bytes[domain] += float(r.get("bw_bytes_per_s") or 0.0) * dt
            self.write()
        return row

    def write(self, force: bool = False) -> None:
        now = time.perf_counter()
        with self.lock:
            if not force and now - self.last < self.every:
                return
            self.last = now
            share = min(1.0, self.win_done_ios / self.win_ios) if self.win_ios else 0.0
            doc = {"requests_done": int(self.done + share * self.win_requests), "trace_requests": self.total,
                   "seconds": now - self.t0, "bytes": dict(self.bytes)}
        tmp = self.path.with_suffix(".tmp")
        try:
            tmp.write_text(json.dumps(doc))
            os.replace(tmp, self.path)
        except OSError:          # progress is a courtesy: a full disk must not fail the replay here
            pass


def _run_domain(plan, targets, cfg, verify, runtime_s, results, key, stop, live=None):
    from kvbench.engine import run_plan

    try:
        results[key] = run_plan(plan, targets, engine=cfg.engine,     # run_plan picks the memory engine for DRAM
                                qd=1 if key == "dram" else cfg.qd,
                                workers=1, pacing="closed" if cfg.closed_loop else "open", speed=1.0,
                                verify=verify, runtime_s=runtime_s, handle_signals=False, stop=stop,
                                on_second=None if live is None else live.on_second(key))
    except BaseException as e:  # noqa: BLE001 - reported by the caller
        results[key] = e


def keyed_stream(cfg: ReplayConfig) -> ReplayConfig:
    """A key-sampled ``gen:...,sample=F`` stream is a miniature: replay it as ``--sample-keys F`` (tiers at
    capacity x F, volumes and hit estimates at full size), never as a full-size trace. Re-sampling it at F with
    the same hash keeps every key, so the stream's own sample is what runs."""
    from kvbench.stream.synth import gen_sample_rate

    rate = gen_sample_rate(cfg.trace)
    if rate is None:
        return cfg
    if cfg.sample_keys is not None:
        raise UsageError(f"{cfg.trace} is already a key sample at rate {rate:g}; --sample-keys samples it again",
                         "give the rate once: sample= in the gen: argument or --sample-keys")
    if cfg.sample_seed:
        raise UsageError(f"--sample-seed {cfg.sample_seed} would sample the key-sampled stream {cfg.trace} again "
                         "with another hash", "drop --sample-seed (the stream's sample uses seed 0)")
    return replace(cfg, sample_keys=rate)


def replay_kv(cfg: ReplayConfig, *, progress=None, trace=None) -> dict:
    """Run (or with ``dry_run`` only simulate) a KV replay; returns the summary (also in summary.json).
    ``trace``: ``cfg.trace`` already read whole (a ``Trace``), so it is not read again."""
    from kvbench.spec.models import load_model

    cfg = keyed_stream(cfg)
    cfg.validate()
    if cfg.export_iolog:            # before any store is created: the log is written as the replay goes
        from kvbench.engine.iolog import check_iolog_names

        check_iolog_names([p for p in (cfg.l3, cfg.l4 and os.path.join(cfg.l4, L4_FILE)) if p])
    model = load_model(cfg.model, tp=cfg.tp)
    block_tokens, n_requests, n_blocks, most = _load_trace_meta(cfg, trace)
    if cfg.max_requests is not None:       # the requests asked for: coverage is issued / these
        n_requests = min(n_requests, int(cfg.max_requests))
    block_bytes = model.block_bytes(block_tokens)
    cfg = fit_region(cfg, block_bytes)
    spec = hierarchy_spec(cfg, block_bytes, f"{model.name}, {block_tokens} tokens")
    if cfg.sample_keys is not None:
        _check_sampled_capacities(cfg, spec)
    hier = Hierarchy(spec, max_request_blocks=most)     # validates capacities / policy / combos
    slot_bytes = spec.slot_bytes
    ios_per_block = -(-slot_bytes // cfg.chunk_bytes)
    levels = [t.level for t in hier.tiers]
    config = {**asdict(cfg), "block_tokens": block_tokens, "block_bytes": block_bytes, "slot_bytes": slot_bytes,
              "bytes_per_token": model.bytes_per_token, "stored_bytes_per_token": model.stored_bytes_per_token(block_tokens),
              "tiers": {t.spec.name: {"capacity_bytes": t.spec.capacity_bytes, "capacity_blocks":
                                      t.policy.capacity, "policy": t.spec.policy, "ttl_s": t.spec.ttl_s,
                                      "medium": TIER_MEDIA[t.spec.name],
                                      **({"layout": t.store.layout, "slots": t.store.n_slots,
                                          "footprint_bytes": t.store.footprint_bytes,
                                          "store": spec.store_fit(t.spec)[2]} if t.store else {})}
                        for t in hier.tiers},
              "sample_rate": cfg.sample_rate, "modelled_capacity_bytes": cfg.modelled_capacities()}
    targets = _Targets() if cfg.dry_run else _open_targets(cfg, hier)
    from kvbench.metrics.run import RunDir

    try:
        rd = RunDir.create("replay-kv", config, root=cfg.results, targets=[t.path for t in targets.dev])
        if targets.notes:
            rd.update_run(tier_io=targets.notes)
        return _replay(cfg, hier, spec, targets, rd, levels, n_requests, n_blocks, block_bytes, slot_bytes,
                       ios_per_block, progress, trace)
    finally:
        targets.close()


@dataclass(frozen=True)
class SimulatedIOs:
    """What :func:`simulate_tier_ios` found: the replay's tiers as it would build them, and its I/O counts."""

    capacity_blocks: dict          # tier name -> blocks the cache holds (L3: the region less its spare slots)
    block_bytes: int
    slot_bytes: int
    ios_per_block: int             # chunk I/Os per block read or written (the latency histograms count these)
    trace_requests: int            # requests the replay would run (the trace, cut by --max-requests)
    requests: int                  # requests simulated (fewer when every need was met early)
    ios: dict                      # (tier, "read"|"write") -> chunk I/Os in the requests simulated
    reached: dict                  # (tier, op) -> the fewest requests giving its need, None when never


def simulate_tier_ios(cfg: ReplayConfig, needs: dict) -> SimulatedIOs:
    """The replay's tier simulation alone, before any I/O (no target opened, nothing written): the tiers at
    the capacities the replay would give them (``--l3-region`` fitted as :func:`replay_kv` does) and, per
    ``(tier, "read"|"write")`` of ``needs`` (-> chunk I/Os wanted), the fewest leading requests whose plan
    issues that many I/Os of that op on that tier (the rows :func:`events_to_plan` makes: ``ios_per_block`` per
    block). Stops simulating once every need is met."""
    from kvbench.spec.models import load_model

    cfg = keyed_stream(cfg)
    cfg.validate()
    model = load_model(cfg.model, tp=cfg.tp)
    block_tokens, n_requests, _n_blocks, most = _load_trace_meta(cfg)
    if cfg.max_requests is not None:
        n_requests = min(n_requests, int(cfg.max_requests))
    block_bytes = model.block_bytes(block_tokens)
    cfg = fit_region(cfg, block_bytes)
    spec = hierarchy_spec(cfg, block_bytes)
    if cfg.sample_keys is not None:
        _check_sampled_capacities(cfg, spec)
    hier = Hierarchy(spec, max_request_blocks=most)
    ios_per_block = -(-spec.slot_bytes // cfg.chunk_bytes)
    level = {t.spec.name: t.level for t in hier.tiers}
    opcode = {"read": 0, "write": 1}
    ios = {k: 0 for k in needs}
    reached = {k: None for k in needs}
    done = 0
    for reqs, ev in _Windows(cfg, hier, ios_per_block):
        for (tier, op), want in needs.items():
            if tier not in level:
                continue
            sel = ev["request"][(ev["tier"] == level[tier]) & (ev["op"] == opcode[op])]
            before = ios[(tier, op)]
            ios[(tier, op)] = before + sel.size * ios_per_block
            if reached[(tier, op)] is None and ios[(tier, op)] >= want:
                k = -(-(int(want) - before) // ios_per_block) - 1      # the event that brings the count to want
                reached[(tier, op)] = int(sel[max(k, 0)]) + 1
        done = int(reqs["request"][-1]) + 1 if len(reqs) else done
        if all(reached[k] is not None for k in needs):
            break
    return SimulatedIOs({t.spec.name: int(t.policy.capacity) for t in hier.tiers}, int(block_bytes),
                        int(spec.slot_bytes), int(ios_per_block), int(n_requests), done, ios, reached)


def _check_sampled_capacities(cfg: ReplayConfig, spec: HierarchySpec) -> None:
    """A tier scaled by the sample rate must still hold a block: say which and how to fix it (before I/O)."""
    modelled = cfg.modelled_capacities()
    for t in spec.tiers:
        unit = spec.block_bytes if t.name == "l1" else spec.slot_bytes
        if t.capacity_bytes < unit:
            flag = f"--{t.name}" if t.name in ("l1", "l2") else f"--{t.name}-capacity"
            raise UsageError(f"{flag} {format_bytes(modelled[t.name])} x --sample-keys {cfg.sample_keys:g} = "
                             f"{format_bytes(t.capacity_bytes)} cannot hold one KV block of {format_bytes(unit)}",
                             f"raise --sample-keys to at least {unit / modelled[t.name]:.3g} or the capacity")


def _full_estimates(reqs, load_ms, full_blocks, rate: float):
    """Sampled run: estimated full hit blocks and full-request load times per request.

    Full hits = sampled hits / rate, clipped to [sampled hits, the request's full blocks] (unbiased over the
    hash in total, an estimate per request). Full load time = measured load time x full hits / sampled hits:
    each block is ``slot_bytes / chunk`` chunk I/Os already, so a load is bandwidth-bound and scales with its
    blocks. Undefined (NaN) where the request had no sampled hit or no measured load.
    """
    h = reqs["hit_blocks"].astype(np.float64)
    full = np.minimum(np.maximum(h / rate, h), np.asarray(full_blocks[: len(reqs)], dtype=np.float64))
    with np.errstate(invalid="ignore", divide="ignore"):
        est = np.where(h > 0, load_ms * full / h, np.nan)
    return full, est


def _replay(cfg, hier, spec, targets, rd, levels, n_requests, n_blocks, block_bytes, slot_bytes,
            ios_per_block, progress, trace=None):
    acc = _Accumulator(levels)
    io_levels = [lvl for lvl in levels if lvl > 0]
    # device targets in a fixed order (L3 then L4), the same whether opened (real run) or only planned
    dev_levels = [lvl for lvl in io_levels if lvl >= 2]
    dev_index = {lvl: i for i, lvl in enumerate(dev_levels)}
    dev_files = {i: (cfg.l3 if lvl == 2 else os.path.join(cfg.l4, L4_FILE)) for lvl, i in dev_index.items()}
    from kvbench.engine.iolog import IologWriter

    iolog = IologWriter(cfg.export_iolog, dev_files) if cfg.export_iolog and dev_files else None
    dev_name = None
    for lvl in io_levels:
        dom = targets.tier_domain.get(lvl)
        if dom and dom[0] == "dev" and lvl == 2:
            dev_name = targets.dev[dom[1]].device
    disk0 = diskstats(dev_name) if not cfg.dry_run else None
    # NVMe SMART / OCP counters before and after (device WAF for plan); None where the store is not on NVMe
    watch = DeviceWatch({"l3": cfg.l3}) if cfg.l3 and not cfg.dry_run else None
    windows = _Windows(cfg, hier, ios_per_block, plans=not cfg.dry_run or iolog is not None, trace=trace)
    fences_total = planned_ios = 0
    planned_bytes = {(lvl, op): 0 for lvl in levels for op in (0, 1, 2)}
    totals = {"requests": 0, "blocks": 0, "hit_blocks": 0, "produced": 0, "not_issued": 0}
    lvl_hits = np.zeros(4, dtype=np.int64)
    # a dry run's windows are a few requests each: their rows go out (and into the totals) in large batches
    req_rows = _RequestRows(rd.path / "requests.csv", totals, lvl_hits, batch=_RequestRows.BATCH if cfg.dry_run else 0)
    run_t0 = time.perf_counter_ns()
    live = None if cfg.dry_run else LiveProgress(rd.path, n_requests)
    scale = 1e9 / cfg.speed
    interrupted = False
    try:
        for reqs, ev in windows:
            cut = False
            arrivals = reqs["arrival_s"]
            first_req = int(reqs["request"][0])

            def issue_ns(req_ids, _a=arrivals, _f=first_req):
                if cfg.closed_loop:
                    return np.zeros(len(req_ids), dtype=np.int64)
                return (_a[req_ids - _f] * scale).astype(np.int64)

            load_ms = np.full(len(reqs), np.nan)
            tier_ms = {lvl: np.full(len(reqs), np.nan) for lvl in (1, 2, 3)}
            planned_ios += _plan_counts(ev, io_levels, ios_per_block, slot_bytes, planned_bytes)
            if not cfg.dry_run or iolog is not None:      # a dry run only simulates, unless asked for the plan
                tier_target = {lvl: dev_index.get(lvl, 0) for lvl in io_levels}     # L2: index 0 of its arena
                plan, meta = events_to_plan(ev, issue_ns, slot_bytes, cfg.chunk_bytes, tier_target)
                dram_rows = meta["tier"] == 1
                parts = {}
                if dram_rows.any():
                    parts["dram"] = np.flatnonzero(dram_rows)
                if (~dram_rows).any():
                    parts["dev"] = np.flatnonzero(~dram_rows)
                subplans = {}
                for dom, rows in parts.items():
                    sp = plan[rows]
                    fences_total += add_fences(sp, math.gcd(slot_bytes, cfg.chunk_bytes))
                    subplans[dom] = sp
                if iolog is not None and "dev" in subplans:
                    iolog.write(subplans["dev"])
                if not cfg.dry_run and subplans:
                    live.window(totals["requests"], len(reqs), len(plan))
                    issued = _execute(cfg, subplans, parts, plan, meta, targets, acc, run_t0, reqs, load_ms,
                                      tier_ms, slot_bytes, live)
                    if issued < len(reqs):         # stopped early (--duration, error, Ctrl-C)
                        # the window was simulated whole (the tier counters count all of it), so the summary
                        # counts it whole too; requests not fully issued have no load time
                        load_ms[issued:] = np.nan
                        for v in tier_ms.values():
                            v[issued:] = np.nan
                        totals["not_issued"] += len(reqs) - issued
                        cut = True
            extra_cols = None
            if cfg.sample_keys is not None and windows.full_blocks is not None:
                full_hits, full_ms = _full_estimates(reqs, load_ms, windows.full_blocks, cfg.sample_rate)
                extra_cols = {"full_blocks": np.asarray(windows.full_blocks[: len(reqs)]),
                              "full_hits_est": full_hits, "full_load_ms_est": full_ms}
                acc.full_hit_blocks_est += float(full_hits.sum())
                acc.full_blocks += int(extra_cols["full_blocks"].sum())
                ok = np.isfinite(full_ms)
                if ok.any():
                    acc.full_load_hist.record((full_ms[ok] * 1e6).astype(np.int64))
            req_rows.add(reqs, load_ms, tier_ms, extra_cols)
            if not cfg.dry_run:
                _flush_timeseries(rd, acc, final=False)
                rd.write_summary(_summary(cfg, hier, acc, totals, lvl_hits, levels, block_bytes, slot_bytes,
                                          fences_total, planned_ios, planned_bytes, windows, n_requests, None,
                                          None, targets.notes), status="partial")
            if live is not None:
                live.window(totals["requests"], 0, 0)
            if progress:
                progress(totals["requests"], n_requests)
            if acc.status in ("failed", "interrupted"):
                interrupted = acc.status == "interrupted"
                break
            if cut:
                break
            if cfg.duration_s is not None and not cfg.dry_run and \
                    (time.perf_counter_ns() - run_t0) / 1e9 >= cfg.duration_s:
                break
    except procs.WRAPPED_STOP as e:
        if procs.stop_from(e) is None:
            if iolog is not None:    # a failed replay's log is no plan of anything: the output guard deletes it
                iolog.discard()
                iolog = None
            raise
        interrupted = True
        acc.status = "interrupted"
    except BaseException:            # a failed replay's log is no plan of anything: the output guard deletes it
        if iolog is not None:
            iolog.discard()
            iolog = None
        raise
    finally:
        req_rows.flush()             # the rows of every window simulated, whatever stopped the replay
        if iolog is not None:        # complete, or what an interrupted replay issued
            iolog.close()
    disk1 = diskstats(dev_name) if disk0 is not None else None
    host = None
    if disk0 and disk1:
        host = {k: disk1[k] - disk0[k] for k in disk0}
        host["device"] = dev_name
    if not cfg.dry_run:
        _flush_timeseries(rd, acc, final=True)
        hists = {f"{TIER_NAMES[lvl]}.{op}": h for (lvl, op), h in acc.hist.items() if len(h)}
        hists["load_time"] = acc.load_hist
        hists["issue_lag"] = acc.lag_hist
        rd.write_histograms(hists)
    summary = _summary(cfg, hier, acc, totals, lvl_hits, levels, block_bytes, slot_bytes, fences_total,
                       planned_ios, planned_bytes, windows, n_requests, host, time.perf_counter_ns() - run_t0,
                       targets.notes)
    if watch is not None:
        summary["device_counters"] = watch.stop()
    status = acc.status
    if acc.verify_errors:
        status = "failed"
    unvouched = _counters_disagree(host, acc.bytes.get((2, 0), 0))
    if unvouched:
        summary["not_measured"] = unvouched
        if status == "complete":
            status = "not-measured"
    rd.write_summary(summary, status=status)
    summary = stamp("summary", {"kind": "replay-kv", "status": status, "run_dir": str(rd.path), **summary})
    err = None
    if interrupted:
        from kvbench.errors import Interrupted
        err = Interrupted(f"interrupted after {totals['requests']} requests; results so far in {rd.path}",
                          "rerun to completion")
    elif acc.errors:
        err = acc.errors[0]
    elif acc.verify_errors:
        f = acc.first_mismatch or {}
        err = VerifyError(f"verify: {acc.verify_errors} of {acc.verify_checked} checked reads returned wrong data; "
                          f"first: {f.get('tier')} block key {f.get('key')} version {f.get('version')} at "
                          f"offset {f.get('offset')} of {f.get('target')} (results in {rd.path})",
                          "check the device and the write path")
    if err is not None:
        err.summary = {**summary, "status": "interrupted" if interrupted else "failed"}   # for --json
        raise err
    return summary


def _counters_disagree(host: dict | None, engine_read: int) -> str | None:
    """Why the L3 device's own counters do not vouch for the engine's reads (None when they do, or when there
    are none to compare): fewer bytes reached the device than the engine read means holes or a cache answered."""
    if not host or not engine_read or host.get("read_bytes") is None:
        return None
    if host["read_bytes"] >= 0.98 * engine_read:
        return None
    return (f"the O_DIRECT bypass check failed: /dev/{host.get('device')} read {host['read_bytes']:,} bytes where "
            f"the engine read {engine_read:,} from the L3 store (holes or a cache answered the rest)")


def _execute(cfg, subplans, parts, plan, meta, targets, acc, run_t0, reqs, load_ms, tier_ms, slot_bytes, live=None):
    """Run one window's sub-plans (DRAM and devices concurrently); fold results into ``acc`` and load times."""
    elapsed = time.perf_counter_ns() - run_t0
    runtime_s = None
    if cfg.duration_s is not None:              # both pacings: stop issuing when the replay time is up
        runtime_s = max(0.001, cfg.duration_s - elapsed / 1e9)
    for dom, sp in subplans.items():
        if not cfg.closed_loop:
            sp["issue_ns"] = np.maximum(sp["issue_ns"].astype(np.int64) - elapsed, 0)
    from kvbench.engine.driver import StopFlag
    from kvbench.engine.runner import stop_on_signals

    results: dict = {}
    threads = []
    t_call = time.perf_counter_ns()
    stop = StopFlag()       # one flag for both domains: Ctrl-C stops the arena copies and the device I/O at once
    with stop_on_signals(stop, True):
        if "dram" in subplans and "dev" in subplans:      # the arena in a thread, the devices here
            th = threading.Thread(target=_run_domain, args=(subplans["dram"], targets.dram, cfg, cfg.verify,
                                                            runtime_s, results, "dram", stop, live))
            th.start()
            threads.append(th)
        if "dev" in subplans:
            _run_domain(subplans["dev"], targets.dev, cfg, cfg.verify, runtime_s, results, "dev", stop, live)
        elif "dram" in subplans:
            _run_domain(subplans["dram"], targets.dram, cfg, cfg.verify, runtime_s, results, "dram", stop, live)
        for th in threads:
            th.join()
    if stop.value:
        acc.status = "interrupted"
    n = len(plan)
    sub_abs = np.full(n, -1, dtype=np.int64)
    comp_abs = np.full(n, -1, dtype=np.int64)
    ok = np.zeros(n, dtype=bool)
    offset_ns = t_call - run_t0 + 1_000_000           # the engine's clock starts ~1 ms after the call
    for dom, rows in parts.items():
        res = results.get(dom)
        if isinstance(res, BaseException):
            if isinstance(res, KeyboardInterrupt):
                acc.status = "interrupted"
                continue
            if isinstance(res, KvbenchError):
                acc.errors.append(res)
                acc.status = "failed"
                continue
            raise res
        if res is None:
            continue
        sub = res.submit_ns.astype(np.int64)
        comp = res.complete_ns.astype(np.int64)
        sub_abs[rows] = np.where(sub >= 0, sub + offset_ns, -1)
        comp_abs[rows] = np.where(comp >= 0, comp + offset_ns, -1)
        ok[rows] = res.ok
        for (tidx, op), h in res.histograms.items():
            lvl = next((lv for lv, (d, i) in targets.tier_domain.items() if d == dom and i == tidx), None)
            if lvl is not None and op in ("read", "write"):
                acc.hist[(lvl, op)].merge(h)
        v = res.verify or {}
        acc.verify_checked += int(v.get("checked", 0) or 0)
        bad = int(v.get("mismatches", 0) or 0)
        if bad:
            acc.verify_errors += bad
            f = v.get("first") or {}
            idx = f.get("index")
            if acc.first_mismatch is None and idx is not None:
                g = rows[int(idx)]
                tg = (targets.dram if dom == "dram" else targets.dev)[int(plan["target"][g])]
                acc.first_mismatch = {"tier": TIER_NAMES[int(meta["tier"][g])], "key": int(meta["key"][g]),
                                      "version": int(meta["version"][g]), "offset": int(plan["offset"][g]),
                                      "target": tg.path, "kind": KIND_NAMES[int(meta["kind"][g])]}
        if res.status == "interrupted":
            acc.status = "interrupted"
        elif res.status == "failed":
            acc.status = "failed"
            try:
                res.raise_for_status()
            except KvbenchError as e:
                acc.errors.append(e)
    # requests whose every I/O was issued: the leading ones (the engine issues in plan order)
    first_req = int(reqs["request"][0])
    not_issued = plan["group"][sub_abs < 0]
    issued_reqs = len(reqs) if not_issued.size == 0 else int(not_issued.min()) - first_req
    done = ok & (comp_abs >= 0)
    if done.any():
        acc.first_ns = int(sub_abs[done].min()) if acc.first_ns is None else min(acc.first_ns, int(sub_abs[done].min()))
        acc.last_ns = max(acc.last_ns or 0, int(comp_abs[done].max()))
    lengths = plan["length"].astype(np.int64)
    for lvl in acc.levels:
        if lvl == 0:
            continue
        for op in (0, 1, 2):
            sel = done & (meta["tier"] == lvl) & (plan["op"] == op)
            acc.bytes[(lvl, op)] += int(lengths[sel].sum())
            acc.ios[(lvl, op)] += int(sel.sum())
            if sel.any():
                sec = comp_abs[sel] // 1_000_000_000
                us, inv = np.unique(sec, return_inverse=True)
                sums = np.bincount(inv, weights=lengths[sel])
                counts = np.bincount(inv)
                for s, b, c in zip(us.tolist(), sums.tolist(), counts.tolist()):
                    acc.sec_bytes[(s, lvl, op)] = acc.sec_bytes.get((s, lvl, op), 0) + b
                    acc.sec_ios[(s, lvl, op)] = acc.sec_ios.get((s, lvl, op), 0) + c
    # issue lag (open loop): achieved - intended
    if not cfg.closed_loop:
        issued = sub_abs >= 0
        if issued.any():
            # plan["issue_ns"] still holds intended times from run start (the sub-plans are copies)
            lag = np.maximum(sub_abs[issued] - plan["issue_ns"][issued].astype(np.int64), 0)
            acc.lag_hist.record(lag)
            acc.lag_max_ns = max(acc.lag_max_ns, int(lag.max()))
    # per-request load times from hit reads
    hit = done & (meta["kind"] == HIT_READ)
    if hit.any():
        g = plan["group"][hit]
        first_req = int(reqs["request"][0])
        ids, lo = _first_per_group(g, sub_abs[hit], np.minimum)
        _, hi = _first_per_group(g, comp_abs[hit], np.maximum)
        load_ms[ids - first_req] = (hi - lo) / 1e6
        for lvl in (1, 2, 3):
            sel = hit & (meta["tier"] == lvl)
            if sel.any():
                gi = plan["group"][sel]
                tid, tlo = _first_per_group(gi, sub_abs[sel], np.minimum)
                _, thi = _first_per_group(gi, comp_abs[sel], np.maximum)
                t_ms = (thi - tlo) / 1e6
                if lvl == 3 and (cfg.l4_link_bw or cfg.l4_link_latency_s):
                    nbytes = reqs["hit_l4"][tid - first_req].astype(np.float64) * slot_bytes
                    t_ms = t_ms + 1e3 * (cfg.l4_link_latency_s + (nbytes / cfg.l4_link_bw if cfg.l4_link_bw else 0))
                tier_ms[lvl][tid - first_req] = t_ms
                acc.tier_load_hist[lvl].record((t_ms * 1e6).astype(np.int64))
        if cfg.l4_link_bw or cfg.l4_link_latency_s:
            l4 = tier_ms[3]
            has = ~np.isnan(l4)
            load_ms[has] = np.fmax(load_ms[has], l4[has])
    # a request whose hits all came from L1 (HBM, simulated) loads nothing from storage: 0 ms
    l1_only = np.isnan(load_ms) & (reqs["hit_blocks"] > 0) & (reqs["hit_blocks"] == reqs["hit_l1"])
    load_ms[l1_only] = 0.0
    got = ~np.isnan(load_ms)
    if got.any():
        acc.load_hist.record((load_ms[got] * 1e6).astype(np.int64))
    return issued_reqs


def _plan_counts(ev, io_levels, ios_per_block: int, slot_bytes: int, planned_bytes: dict) -> int:
    """A window's planned I/O: adds each (tier, op)'s bytes to ``planned_bytes`` and returns its chunk I/Os
    (``ios_per_block`` per block read or written, one per trim), from one count of the events by tier and op.
    ``ev``: the window's event rows, or their counts already made (``Hierarchy.run_counted``: shape (2, 12))."""
    from kvbench.sim.tiers import EVENT_DTYPE
    from kvbench.sim.tiers_kernel import event_counts

    if ev.dtype == EVENT_DTYPE:
        if len(ev) == 0:
            return 0
        n, slots = np.zeros(12, np.int64), np.zeros(12, np.int64)
        event_counts(ev, n, slots)
    else:
        n, slots = ev
    for lvl in io_levels:
        for op in (0, 1, 2):
            planned_bytes[(lvl, op)] += int(slots[lvl * 3 + op]) * slot_bytes
    io = int(n[3:].sum())           # tier 0 (L1, simulated) carries no I/O
    trims = int(n[5::3].sum())
    return (io - trims) * ios_per_block + trims


class _RequestRows:
    """requests.csv and the run's request totals, window by window: rows are kept until ``batch`` of them are
    waiting (0: every window is written as it comes), then written in one CSV call and added to ``totals``
    (requests, blocks, hit_blocks, produced) and ``lvl_hits`` (hits per tier level). ``totals["requests"]`` is
    counted as windows arrive (the progress line's); the rest once a batch is flushed, as the file."""

    BATCH = 1 << 16

    def __init__(self, path: Path, totals: dict, lvl_hits: np.ndarray, batch: int):
        self.path, self.totals, self.lvl_hits, self.batch = path, totals, lvl_hits, batch
        self.header = True
        self.waiting: list = []
        self.rows = 0

    def add(self, reqs, load_ms, tier_ms, extra=None) -> None:
        self.totals["requests"] += len(reqs)
        self.waiting.append((reqs, load_ms, tier_ms, extra))
        self.rows += len(reqs)
        if self.rows >= self.batch:
            self.flush()

    def flush(self) -> None:
        if not self.waiting:
            return
        w, self.waiting, self.rows = self.waiting, [], 0
        if len(w) == 1:
            reqs, load_ms, tier_ms, extra = w[0]
        else:
            reqs = np.concatenate([x[0] for x in w])
            load_ms = np.concatenate([x[1] for x in w])
            tier_ms = {lvl: np.concatenate([x[2][lvl] for x in w]) for lvl in w[0][2]}
            extra = None if w[0][3] is None else {k: np.concatenate([np.asarray(x[3][k]) for x in w])
                                                  for k in w[0][3]}
        t = self.totals
        t["blocks"] += int(reqs["blocks"].sum(dtype=np.int64))
        t["hit_blocks"] += int(reqs["hit_blocks"].sum(dtype=np.int64))
        t["produced"] += int(reqs["produced"].sum(dtype=np.int64))
        for i, name in enumerate(TIER_NAMES):
            self.lvl_hits[i] += int(reqs[f"hit_{name}"].sum(dtype=np.int64))
        _write_requests(self.path, reqs, load_ms, tier_ms, self.header, extra)
        self.header = False


def _write_requests(path: Path, reqs, load_ms, tier_ms, header: bool, extra=None) -> None:
    """requests.csv rows; a sampled run adds ``full_blocks``, ``full_hits_est``, ``full_load_ms_est`` (the
    other hit and load columns cover the request's sampled blocks only)."""
    from kvbench.metrics.csvout import write_csv

    write_csv(path, {
        "request": reqs["request"], "arrival_s": reqs["arrival_s"], "blocks": reqs["blocks"],
        "hit_blocks": reqs["hit_blocks"], "hit_l1": reqs["hit_l1"], "hit_l2": reqs["hit_l2"],
        "hit_l3": reqs["hit_l3"], "hit_l4": reqs["hit_l4"], "produced": reqs["produced"],
        "load_ms": load_ms, "l2_load_ms": tier_ms[1], "l3_load_ms": tier_ms[2], "l4_load_ms": tier_ms[3],
        **(extra or {}),
    }, mode="w" if header else "a", header=header, decimals=4)


def _flush_timeseries(rd, acc: _Accumulator, final: bool) -> None:
    """Write finished seconds: per tier and op, bytes per second and I/Os per second."""
    if not acc.sec_bytes:
        return
    secs = sorted({s for s, _, _ in acc.sec_bytes})
    if not final:
        secs = secs[:-1]            # the last second may still grow in the next window
    if not secs:
        return
    rows = []
    for s in secs:
        row = {"t_s": s}
        for lvl in acc.levels:
            if lvl == 0:
                continue
            for op, name in ((0, "read"), (1, "write")):
                row[f"{TIER_NAMES[lvl]}_{name}_bw_bytes_per_s"] = acc.sec_bytes.pop((s, lvl, op), 0)
                row[f"{TIER_NAMES[lvl]}_{name}_iops"] = acc.sec_ios.pop((s, lvl, op), 0)
            acc.sec_bytes.pop((s, lvl, 2), None)
            acc.sec_ios.pop((s, lvl, 2), None)
        rows.append(row)
    rd.append_timeseries(rows)


def _pcts(h, keys=("p50", "p99", "p99.9")) -> dict:
    p = h.percentiles() if len(h) else {}
    return {k: p.get(k) for k in keys}


def replayed_fraction(issued: int, trace_requests: int) -> float | None:
    """Requests issued / requests in the trace: how much of the trace the timed I/O covered."""
    return issued / trace_requests if trace_requests else None


def coverage_line(issued: int, trace_requests: int, seconds: float | None = None) -> str:
    """``1,182 of 3,993 requests replayed (30%) in 60 s``: the replay's coverage in words."""
    f = replayed_fraction(issued, trace_requests)
    pct = "n/a" if f is None else f"{f:.0%}" if f >= 0.01 or f == 0 else "<1%"
    return (f"{issued:,} of {trace_requests:,} requests replayed ({pct})"
            + (f" in {seconds:g} s" if seconds is not None else ""))


# a sample whose references differ from rate x the full stream's by more than this factor is dominated (or
# depleted) by a few popular keys, and its per-block hit ratio is not representative
UNREPRESENTATIVE = 1.5


def _hit_estimates(lvl_hits, levels, sampled_blocks: int, full_blocks: int, rate: float) -> dict | None:
    """A key-sampled run's full-size hit ratios, total and per tier level.

    Two estimators: the miniature's own per-block hit ratio (``ratio``: Waldspurger et al., ATC'17), and
    SHARDS_adj's (``adjusted``: hits / rate, with the full references minus the sample's / rate counted in the
    first tier, so the total is 1 - (sampled misses / rate) / full references). The ratio is the better one while
    the sample is representative (its references near rate x the full stream's: it does not carry their count
    noise); when a popular key (a shared system prompt) falls in the sample, it counts that key's hits 1 / rate
    times over and the sample holds several times the references its rate implies: then misses, spread over many
    keys, are the robust basis, and the adjusted estimate is used. None when not sampled (or nothing replayed)."""
    if rate >= 1.0 or full_blocks <= 0 or not levels or sampled_blocks <= 0:
        return None
    adj = full_blocks - sampled_blocks / rate
    hits = {lvl: int(lvl_hits[lvl]) / rate for lvl in levels}
    hits[levels[0]] += adj
    adjusted = {lvl: float(min(1.0, max(0.0, h / full_blocks))) for lvl, h in hits.items()}
    misses = sampled_blocks - sum(int(lvl_hits[lvl]) for lvl in levels)
    total_adj = float(min(1.0, max(0.0, 1.0 - misses / rate / full_blocks)))
    excess = sampled_blocks / (rate * full_blocks)
    use = "adjusted" if not 1 / UNREPRESENTATIVE <= excess <= UNREPRESENTATIVE else "ratio"
    ratio = {lvl: int(lvl_hits[lvl]) / sampled_blocks for lvl in levels}
    return {"tiers": adjusted if use == "adjusted" else ratio,
            "total": total_adj if use == "adjusted" else 1.0 - misses / sampled_blocks,
            "adjusted_tiers": adjusted, "adjusted_total": total_adj, "adjustment": adj,
            "estimator": use, "reference_excess": excess}


def _summary(cfg, hier, acc, totals, lvl_hits, levels, block_bytes, slot_bytes, fences, planned_ios,
             planned_bytes, windows, n_requests, host, wall_ns, io_notes=None) -> dict:
    io_notes = io_notes or {}
    wall_s = None
    if acc.first_ns is not None and acc.last_ns is not None and acc.last_ns > acc.first_ns:
        wall_s = (acc.last_ns - acc.first_ns) / 1e9
    blocks = max(1, totals["blocks"])
    tiers = {}
    counters = hier.counters()
    rate = cfg.sample_rate
    modelled = cfg.modelled_capacities()
    est = _hit_estimates(lvl_hits, [t.level for t in hier.tiers], totals["blocks"], acc.full_blocks, rate)
    for t in hier.tiers:
        lvl, name, c = t.level, t.spec.name, counters[t.spec.name]
        if cfg.dry_run or lvl == 0:
            rb = c.reads * (block_bytes if lvl == 0 else slot_bytes)
            wb = c.writes * (block_bytes if lvl == 0 else slot_bytes)
        else:
            rb, wb = acc.bytes[(lvl, 0)], acc.bytes[(lvl, 1)]
        entry = {
            "hit_ratio": est["tiers"][lvl] if est else int(lvl_hits[lvl]) / blocks,
            **({"sampled_hit_ratio": int(lvl_hits[lvl]) / blocks} if est else {}),
            "hit_blocks": int(lvl_hits[lvl]),
            "read_bytes": rb, "write_bytes": wb,
            "trim_bytes": (acc.bytes[(lvl, 2)] if not cfg.dry_run and lvl else c.trims_slots * slot_bytes),
            "read_bw_bytes_per_s": rb / wall_s if (wall_s and lvl) else None,     # L1 is simulated: no rate
            "write_bw_bytes_per_s": wb / wall_s if (wall_s and lvl) else None,
            "read_lat_us": _pcts(acc.hist[(lvl, "read")]) if lvl else {"p50": None, "p99": None, "p99.9": None},
            "write_lat_us": _pcts(acc.hist[(lvl, "write")]) if lvl else {"p50": None, "p99": None, "p99.9": None},
            "load_ms": {k: (v / 1e3 if v is not None else None) for k, v in _pcts(acc.tier_load_hist[lvl]).items()}
            if lvl else None,
            "blocks": {"hit_reads": c.hit_reads, "demote_reads": c.demote_reads, "create_writes": c.create_writes,
                       "promote_writes": c.promote_writes, "demote_writes": c.demote_writes,
                       "evictions": c.evictions, "expirations": c.expirations, "reclaim_drops": c.reclaim_drops,
                       "trimmed_slots": c.trims_slots, "peak_resident": c.peak_resident,
                       "admission_rejects": c.admission_rejects},
            "admission": t.admission.describe() if t.admission is not None else "all",
            "capacity_blocks": t.policy.capacity, "policy": t.spec.policy, "medium": TIER_MEDIA[name],
            # the cache modelled (as given) and the one simulated/allocated (x the key sample rate)
            "capacity_bytes": modelled.get(name, t.spec.capacity_bytes),
            "simulated_capacity_bytes": t.spec.capacity_bytes,
        }
        # byte volumes of the full-size cache: measured / sample rate (= measured when not sampled);
        # ``kvbench plan --run`` takes its DWPD from ``full_write_bytes``
        for k in ("read_bytes", "write_bytes", "trim_bytes"):
            entry[f"full_{k}"] = entry[k] / rate if rate < 1.0 else entry[k]
        if t.store is not None:
            entry["layout"] = t.store.layout
            entry["footprint_bytes"] = t.store.footprint_bytes
            entry["store"] = hier.spec.store_fit(t.spec)[2]      # what the spare room cost, in words
        if name in io_notes:
            entry.update(io_notes[name])
        if name == "l4" and (cfg.l4_link_bw or cfg.l4_link_latency_s):
            entry["link_model"] = {"bw_bytes_per_s": cfg.l4_link_bw, "latency_s": cfg.l4_link_latency_s,
                                   "note": "load_ms adds latency + bytes / bw per request (modelled)"}
        tiers[name] = entry
    produced_bytes = hier.produced * block_bytes
    l3 = next((t for t in hier.tiers if t.spec.name == "l3"), None)
    l3_written = (counters["l3"].writes * slot_bytes) if l3 is not None else 0
    load = _pcts(acc.load_hist, ("p50", "p90", "p99", "p99.9", "max", "mean"))
    out = {
        "trace": cfg.trace, "model": cfg.model, "requests": totals["requests"], "trace_requests": n_requests,
        # requests simulated (what the tier counters count) whose I/O was not all issued: the run stopped
        "requests_not_issued": totals["not_issued"],
        # coverage: requests whose I/O was issued over the requests in the trace (a dry run issues none but
        # simulates all: its coverage is the simulated requests')
        "requests_issued": totals["requests"] - totals["not_issued"],
        "replayed_fraction": replayed_fraction(totals["requests"] - totals["not_issued"], n_requests),
        "blocks": totals["blocks"], "hit_blocks": totals["hit_blocks"],
        "hit_ratio": est["total"] if est else totals["hit_blocks"] / blocks,
        **({"sampled_hit_ratio": totals["hit_blocks"] / blocks} if est else {}),
        "produced_blocks": hier.produced, "block_bytes": block_bytes, "slot_bytes": slot_bytes,
        "chunk_bytes": cfg.chunk_bytes, "dry_run": cfg.dry_run,
        "load_time_ms": {k: (v / 1e3 if v is not None else None) for k, v in load.items()},
        "app_write_amplification": (l3_written / produced_bytes) if (l3 is not None and produced_bytes) else None,
        "verify": cfg.verify, "verify_checked": acc.verify_checked, "verify_errors": acc.verify_errors,
        "first_mismatch": acc.first_mismatch,
        "tiers": tiers,
        "write_policy": cfg.write_policy, "inclusion": cfg.inclusion, "promote": cfg.promote,
        "pacing": "closed" if cfg.closed_loop else "open", "speed": None if cfg.closed_loop else cfg.speed,
        "qd": cfg.qd, "engine": cfg.engine,
        "wall_s": wall_s, "elapsed_s": wall_ns / 1e9 if wall_ns else None,
        "planned_ios": planned_ios, "fences": fences if (not cfg.dry_run or cfg.export_iolog) else None,
        "planned_bytes": {f"{TIER_NAMES[lvl]}_{('read', 'write', 'trim')[op]}": v
                          for (lvl, op), v in planned_bytes.items() if lvl and v},
        "simulation": {"blocks": windows.sim_blocks, "seconds": windows.sim_s,
                       "blocks_per_s": windows.sim_blocks / windows.sim_s if windows.sim_s else None,
                       "cpu_seconds": windows.sim_cpu_s,
                       "blocks_per_cpu_s": windows.sim_blocks / windows.sim_cpu_s if windows.sim_cpu_s else None},
        "host_bytes": host,
    }
    if not cfg.closed_loop and not cfg.dry_run:
        out["issue_lag_us"] = {**_pcts(acc.lag_hist, ("p50", "p99", "max")),
                               "note": "achieved - intended issue time (trace time / speed)"}
    out["sample_rate"] = rate
    if rate < 1.0:
        fl = _pcts(acc.full_load_hist, ("p50", "p90", "p99", "p99.9", "max", "mean"))
        out["sampling"] = {
            "method": "spatial key sampling (miniature simulation, Waldspurger et al. ATC'17): block references "
                      "whose splitmix64 key hash is under the rate; every tier simulated and allocated at "
                      "capacity x rate",
            "rate": rate, "seed": cfg.sample_seed,
            "modelled_capacity_bytes": modelled,
            "simulated_capacity_bytes": {t.spec.name: t.spec.capacity_bytes for t in hier.tiers},
            "hit_ratios": "estimates of the full-size cache (per-block hit ratios of the sample)" if not est else
            ("estimates of the full-size cache: per-block hit ratios of the sample (its references are "
             f"{est['reference_excess']:.3g} x rate x the full stream's: representative)" if est["estimator"] == "ratio"
             else "estimates of the full-size cache by SHARDS_adj: 1 - (sampled misses / rate) / the full "
                  f"stream's references, the difference counted as first-tier hits (the sample holds "
                  f"{est['reference_excess']:.3g} x the references its rate implies: popular keys such as a "
                  "shared system prompt fell in it, and its own per-block ratio, sampled_hit_ratio, counts their "
                  "hits 1 / rate times over)"),
            "hit_ratio_estimator": est["estimator"] if est else "ratio",
            "reference_excess": est["reference_excess"] if est else None,
            "hit_ratio_adjusted": est["adjusted_total"] if est else None,
            "tier_hit_ratios_adjusted": ({t.spec.name: est["adjusted_tiers"][t.level] for t in hier.tiers}
                                         if est else None),
            "full_blocks": acc.full_blocks or None,
            "adjustment_blocks": est["adjustment"] if est else None,
            "bytes": "tiers.<t>.read/write/trim_bytes are measured on the sample; full_*_bytes = measured / rate",
            "load_time_ms": "per-request load times cover each request's sampled blocks only",
            "full_load_time_ms_est": {k: (v / 1e3 if v is not None else None) for k, v in fl.items()},
            "full_load_time_note": "estimated full-request load time = measured x (sampled hits / rate) / sampled "
                                   "hits per request with a sampled hit (a block is many chunk I/Os, so a load "
                                   "is bandwidth-bound and scales with its blocks; fixed latency is "
                                   "over-counted by the same factor); requests.csv column full_load_ms_est",
            "full_hit_blocks_est": acc.full_hit_blocks_est,
            "full_produced_blocks_est": hier.produced / rate,
        }
    if host and l3_written:
        out["host_write_amplification"] = host["write_bytes"] / max(1, acc.bytes.get((2, 1), 0)) \
            if acc.bytes.get((2, 1)) else None
    return out
