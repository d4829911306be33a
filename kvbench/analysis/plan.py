"""``kvbench plan``'s answer: steady-state capacity, DWPD, residence time, drives per class and the bill (pure).

Every number is steady state (DESIGN.md, "Steady state"): a tier of capacity C is written at W(C) from its
first eviction on (:mod:`kvbench.analysis.curves.residence`), so its DWPD is 86,400 / T(C) with T(C) = C / W(C) the
residence time, whatever the trace's length or the test machine's speed. The trace's rate is scaled to what is
asked: ``--rate`` (compress: the same users faster; replicate: more users), or a deployment
(:mod:`kvbench.analysis.deployment`: the request rate G GPUs at utilization U produce, users replicated).

Per drive class (rated DWPD, reference WAF, price, drive size) the tier is the larger of
- the hit capacity: the smallest capacity reaching the hit-ratio target (and the retention, when asked), and
- the endurance capacity: the smallest capacity whose rating-equivalent DWPD (host DWPD x workload WAF /
  reference WAF) is within the rating. Since DWPD(C) = 86,400 / T(C), that is the capacity whose residence
  time reaches 86,400 x fill x WAF / (reference WAF x rated DWPD).
When endurance binds, the SSD is "x bytes for hits, y more so the drives last" (``ssd_per_dram`` = SSD bytes / hit
capacity is that over-sizing factor, not a DRAM:SSD ratio); the DRAM:SSD ratio is of the bytes bought.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from kvbench.analysis.curves import capacity as cap
from kvbench.analysis.curves import residence as res
from kvbench.analysis.curves.protocol import HitRatioCurve
from kvbench.analysis.endurance import (SECONDS_PER_DAY, bytes_per_day, drive_bill, dwpd, dwpd_at_residence,
                                        endurance_residence_s, residence_s)
from kvbench.analysis.cost import (Prices, dram_usd_per_day, gpu_usd_per_day, ssd_usd_per_day,
                                   usd_per_recomputed_token)
from kvbench.analysis.recompute import first_byte_text
from kvbench.errors import SpecError

RATE_MODELS = {
    "compress": "the trace's requests arrive faster (time scaled by rate / trace rate): residence times shrink, "
                "write rates grow by the same factor",
    "replicate": "rate / trace-rate independent copies of the trace's users: capacities and write rates scale "
                 "with the copies, residence times and hit ratios do not change",
}
LAYOUT_NAMES = ("slot", "log")
DEFAULT_SWEEP = (600.0, 3600.0, 6 * 3600.0, SECONDS_PER_DAY, 7 * SECONDS_PER_DAY)


@dataclass(frozen=True)
class PlanOptions:
    """What to plan for, and the stated assumptions the numbers rest on."""

    targets: tuple = (0.9, 0.95, 0.99)
    relative: bool = True                 # targets as fractions of the infinite-cache hit ratio
    retention_s: float | None = None      # keep KV at least this long (residence time)
    rate: float | None = None             # requests/s to plan for (default: the trace's own rate)
    rate_model: str = "compress"
    warmup: float = 0.0                   # fraction of requests that only warm the cache (hit ratios, writes, rates)
    layout: str = "slot"                  # L3 block-store layout for the device WAF model
    ssd_op: float = 0.07                  # drive over-provisioning for the FTL model
    erase_block_bytes: int = 256 << 20    # erase unit (superblock) for the FTL model
    gc: str = "greedy"
    store_fill: float = 1.0               # fraction of the SSD the store may occupy
    dram_bytes: int | None = None         # fixed L2 size (default: the knee, capped at the target's size)
    ssd_class: str | None = None          # default: the cheapest class per day
    sweep: tuple = DEFAULT_SWEEP          # retention values (s) for the sweep
    capacities: tuple = ()                # capacities (bytes) for capacity_curve (default: a log grid)
    waf: float | None = None              # a measured or given device WAF (skips the FTL model)
    waf_source: str = "given (--waf)"
    write_policies: bool = True           # simulate the tiers under write-through and write-back
    deployment: object = None             # kvbench.analysis.deployment.Deployment
    load_tier: object = None              # kvbench.analysis.recompute.Tier: the SSD tier's measured speed
    admission: tuple = ()                 # admission policies to trade off (kvbench.analysis.admission)
    placement: str | None = None          # FTL placement rule for the store's WAF with separation
    streams: int = 2
    fdp: object = None                    # kvbench.analysis.fdp.FdpSpec: WAF and DWPD with and without FDP

    def validate(self) -> "PlanOptions":
        if not self.targets:
            raise SpecError("no target hit ratio", "give --target-hit, e.g. 0.95")
        for t in self.targets:
            if not (0 < t <= 1):
                raise SpecError(f"target hit ratio {t} is outside (0, 1]", "give e.g. --target-hit 0.95")
        if self.rate_model not in RATE_MODELS:
            raise SpecError(f"unknown rate model {self.rate_model!r}", f"choose one of: {', '.join(RATE_MODELS)}")
        if self.rate is not None and not self.rate > 0:
            raise SpecError(f"--rate {self.rate} must be > 0 requests/s", "give e.g. --rate 50")
        if self.rate is not None and self.deployment is not None:
            raise SpecError("--rate and --deployment both set the request rate", "give one of them")
        if self.retention_s is not None and not self.retention_s > 0:
            raise SpecError(f"retention {self.retention_s} s must be > 0", "give e.g. --retention 1h")
        if not (0 < self.store_fill <= 1):
            raise SpecError(f"store fill {self.store_fill} is outside (0, 1]", "give e.g. --store-fill 0.9")
        if self.waf is not None and not (self.waf >= 1 and math.isfinite(self.waf)):
            raise SpecError(f"--waf {self.waf} is below 1", "a device WAF is NAND bytes / host bytes >= 1")
        from kvbench.analysis.ftl import MIN_PAGE_BYTES, erase_unit_pages

        erase_unit_pages(self.erase_block_bytes, MIN_PAGE_BYTES)     # a unit the FTL model holds exactly, or refused
        for c in self.capacities:
            if not c > 0:
                raise SpecError(f"capacity {c} B in --capacities must be > 0", "give e.g. --capacities 1TiB,4TiB")
        if self.admission:
            from kvbench.analysis.admission import parse_policies

            parse_policies(self.admission)
        if self.placement is not None:
            from kvbench.analysis.placement import get_placement

            get_placement(self.placement)
            if not 1 <= self.streams <= 64:
                raise SpecError(f"--streams {self.streams} is outside 1..64", "give e.g. --streams 2")
        return self


def _key(t: float) -> str:
    return f"{t:g}"


def _none(x):
    return None if x is None or not math.isfinite(float(x)) else float(x)


@dataclass(frozen=True)
class _Scale:
    """Trace units -> planned (wall) units: time runs ``time_scale`` x faster, users are ``copies`` x. A key-sampled
    trace (a miniature at rate r: every capacity and write rate r x the full workload's, hit ratios and residence
    the same) counts as r copies, so ``copies`` holds real copies / r."""

    time_scale: float
    copies: float
    block_bytes: int
    sample_rate: float = 1.0

    def blocks(self, capacity_bytes: float) -> float:      # wall bytes -> trace blocks (per copy)
        return capacity_bytes / (self.copies * self.block_bytes)

    def bytes(self, blocks: float) -> float:
        return blocks * self.block_bytes * self.copies


def steady_at(steady: res.SteadyCurve, capacity_bytes: float, sc: _Scale) -> dict:
    """W, residence and DWPD of a tier of ``capacity_bytes`` (planned units): measured where the tier turns over
    within the trace; elsewhere the write rate every steady answer uses there
    (:meth:`~kvbench.analysis.curves.residence.SteadyCurve.answer_write_blocks_per_s`: held, an upper bound), flagged."""
    c = sc.blocks(capacity_bytes)
    a = steady.at(c)
    w = float(steady.answer_write_blocks_per_s(c)[()])
    if not (math.isfinite(w) and w > 0):
        return {"write_bytes_per_s": None, "residence_s": None, "dwpd": None, "state": "unknown",
                "basis": "no capacity turns over within the trace: no steady state"}
    wb = w * sc.time_scale * sc.copies * sc.block_bytes
    if bool(a["turned_over"][()]):
        state, basis = "measured", "steady state measured on the trace (the tier turned over)"
    else:
        state = "extrapolated"
        held = "held at its value at the longest residence the trace shows, an upper bound"
        if bool(a["filled"][()]):
            short = float(a["write_blocks_per_s"][()]) * sc.time_scale * sc.copies * sc.block_bytes
            basis = (f"the tier fills at {float(a['fill_time_s'][()]) / sc.time_scale:,.0f} s but does not turn "
                     f"over before the trace ends: the write rate of its short window ({short / 1e9:,.4g} GB/s) "
                     f"sees only the trace's last part, so the write rate is {held}")
        else:
            basis = (f"the trace never fills {capacity_bytes / 1e12:,.4g} TB (it touches "
                     f"{sc.bytes(steady.distinct) / 1e12:,.4g} TB of distinct blocks): write rate {held}")
    return {"write_bytes_per_s": wb, "residence_s": residence_s(capacity_bytes, wb), "dwpd": dwpd(wb, capacity_bytes),
            "state": state,
            "basis": basis}


def capacity_curve(steady, hit_curve: HitRatioCurve, capacities_bytes, sc: _Scale) -> list[dict]:
    """The contract's ``capacity_curve``: hit ratio, steady write rate, DWPD, residence per capacity."""
    rows = []
    for cb in capacities_bytes:
        c = sc.blocks(cb)
        a = steady.at(c)
        filled = bool(a["filled"][()])
        w = float(a["write_blocks_per_s"][()]) * sc.time_scale * sc.copies * sc.block_bytes if filled else None
        row = {"capacity_bytes": float(cb), "hit_ratio": float(hit_curve.at(c)), "filled": filled,
               "turned_over": bool(a["turned_over"][()]), "write_bytes_per_s": w,
               "dwpd": dwpd(w, cb) if filled else None,
               "residence_s": residence_s(cb, w) if filled else None,
               "fill_time_s": _none(float(a["fill_time_s"][()]) / sc.time_scale) if filled else None}
        if filled:
            i = int(steady.index(c)[()])
            row["warmup_write_bytes"] = float(steady.warmup_writes[i]) * sc.copies * sc.block_bytes
        else:
            row["reason"] = ("the trace never evicts from a tier this large (it touches "
                             f"{sc.bytes(steady.distinct):,.0f} B of distinct blocks): no steady state")
        rows.append(row)
    return rows


def default_capacities(steady, sc: _Scale, points: int = 24) -> list[float]:
    """A log grid from one block to 1.25 x the trace's footprint (the last points never fill: shown as such)."""
    top = sc.bytes(max(2, steady.distinct) * 1.25)
    return [float(x) for x in np.unique(np.round(np.geomspace(sc.bytes(1), top, points)))]


def retention_row(steady, hit_curve: HitRatioCurve, retention_s: float, sc: _Scale) -> dict:
    """The contract's ``retention``: the smallest tier keeping KV for ``retention_s``, its DWPD and hit ratio."""
    r = res.residence_for(steady, retention_s, time_scale=sc.time_scale, copies=sc.copies)
    cb = r["capacity_bytes"]
    r["hit_ratio"] = float(hit_curve.at(sc.blocks(cb))) if cb is not None else None
    if r["extrapolated"] and cb is not None:
        r["hit_ratio_note"] = "at least this: the curve at the trace's footprint (longer retention can only add)"
    return r


def flat_retention_note(rows: list[dict]) -> str | None:
    """Where a longer retention buys no hits: the first sweep row from which the hit ratio stays within 0.001 to
    the last while the capacity at least doubles (None: every longer retention still buys something)."""
    from kvbench.units import format_bytes, format_duration

    rows = [r for r in rows if r.get("hit_ratio") is not None and r.get("capacity_bytes")]
    for i, a in enumerate(rows[:-1]):
        b = rows[-1]
        if b["hit_ratio"] - a["hit_ratio"] <= 1e-3 and b["capacity_bytes"] >= 2 * a["capacity_bytes"]:
            return (f"Keeping KV longer than {format_duration(a['retention_s'])} buys no hits here: the hit ratio stays "
                    f"{a['hit_ratio']:.3f} up to {format_duration(b['retention_s'])} while the capacity grows "
                    f"{format_bytes(a['capacity_bytes'])} -> {format_bytes(b['capacity_bytes'])}, because the "
                    "workload shows no reuse that far apart (a trace shorter than the retention cannot; a model "
                    "without returns does not), and DWPD there is 86,400 / retention by construction; a longer "
                    "trace, or returns fitted beyond the window (kvbench trace fit reports its censored fit), says "
                    "what it would buy.")
    return None


def loading_wins(steady, trace, capacity_blocks: float, inequality, tier, sample_rate: float = 1.0) -> dict:
    """Of the prompt tokens an LRU tier of ``capacity_blocks`` serves, those whose request loads its hit prefix
    faster than recomputing it (kvbench check's inequality at that prefix length). On a key-sampled trace a
    request's hit blocks are scaled by 1 / rate."""
    hits = steady.hit_blocks_per_request(capacity_blocks) / sample_rate
    tokens = np.minimum(hits * trace.block_tokens, trace.input_tokens).astype(np.float64)
    wins = (tokens > 0) & (inequality.margin(tier, tokens) > 0)
    total = float(tokens.sum())
    return {"hit_tokens": total, "winning_tokens": float(tokens[wins].sum()),
            "fraction": float(tokens[wins].sum()) / total if total > 0 else 1.0,
            "requests_with_hits": int(np.count_nonzero(tokens > 0)), "requests_loading_wins": int(wins.sum())}


def size_drive_class(cls, *, steady, hit_curve: HitRatioCurve, sc: _Scale, need_bytes: float, need_reason: str, waf: float,
                     store_fill: float, dram_bytes: float, prices: Prices, tokens_per_day: float,
                     hit_tokens_per_day_at, tokens_per_s: float, wins_at=None) -> dict:
    """One drive class: the capacity that meets the need and the rating, which binds, DWPD, lifetime, the bill."""
    ref = cls.reference_waf if cls.reference_waf is not None else waf
    ref_note = (f"reference WAF {cls.reference_waf:g} (the rating's workload)" if cls.reference_waf is not None
                else "no reference WAF given: the rating is taken at this workload's WAF")
    need_residence = endurance_residence_s(cls.dwpd, waf=waf, reference_waf=ref, store_fill=store_fill)
    r_end = res.residence_for(steady, need_residence, time_scale=sc.time_scale, copies=sc.copies)
    end_bytes = r_end["capacity_bytes"] or 0.0
    store = max(need_bytes, end_bytes)
    bound = "endurance" if end_bytes > need_bytes else "hit"
    if bound == "endurance" and r_end["extrapolated"]:
        st = {"write_bytes_per_s": r_end["write_bytes_per_s"], "residence_s": need_residence,
              "dwpd": dwpd_at_residence(need_residence), "state": "extrapolated", "basis": r_end["basis"]}
    else:
        st = steady_at(steady, store, sc)
    ssd = store / store_fill
    wb = st["write_bytes_per_s"]
    hit = float(hit_curve.at(sc.blocks(store)))
    bill = drive_bill(cls, ssd_bytes=ssd, write_bytes_per_s=wb, waf=waf, dram_bytes=dram_bytes,
                      recomputed_tokens_per_day=tokens_per_day - hit_tokens_per_day_at(hit),
                      tokens_per_s=tokens_per_s, prices=prices)
    dwpd_host, dwpd_eq, lifetime, usd = (bill.dwpd_host, bill.dwpd_rating_equivalent, bill.lifetime_years,
                                         dict(bill.usd_per_day))
    wins = None
    if wins_at is not None:
        # the conservative bill: a hit saves prefill only where loading that prefix beats recomputing it
        wins = wins_at(sc.blocks(store))
        gpu_cons = gpu_usd_per_day(max(0.0, tokens_per_day - hit_tokens_per_day_at(hit) * wins["fraction"]),
                                   tokens_per_s, prices)
        usd["total_loading_wins"] = usd["total"] - usd["gpu"] + gpu_cons
    n = ssd / need_bytes if need_bytes > 0 else None
    if bound == "endurance":
        why = (f"endurance: a {cls.dwpd:g}-DWPD drive must be large enough that KV stays "
               f"{need_residence / 3600:,.3g} h before it is rewritten (86400 x fill {store_fill:g} x WAF "
               f"{waf:.3g} / (reference WAF {ref:.3g} x {cls.dwpd:g} DWPD)), {n:,.3g}x the capacity of the {need_reason}")
    else:
        why = (f"{need_reason} binds; the rating holds there" +
               (f"; fill factor {store_fill:g} adds 1/{store_fill:g}" if store_fill < 1 else ""))
    drives = bill.drives
    return {
        "class": cls.name, "label": cls.label, "rated_dwpd": cls.dwpd, "capacity_bytes": ssd,
        "store_bytes": store, "hit_capacity_bytes": need_bytes, "endurance_capacity_bytes": end_bytes or None,
        "endurance_residence_s": need_residence, "bound": bound, "hit_ratio": hit,
        "residence_s": st["residence_s"], "write_bytes_per_s": wb, "dwpd_host": dwpd_host,
        "dwpd_rating_equivalent": dwpd_eq, "workload_waf": waf, "reference_waf": ref, "reference_note": ref_note,
        "reference_waf_source": cls.reference_waf_source or ref_note, "raw_nand_bytes": cls.raw_nand_bytes,
        "over_provisioning": cls.over_provisioning, "pe_cycles": cls.pe_cycles,
        "warranty_years": cls.warranty_years,
        "lifetime_years": lifetime, "ssd_per_dram": n, "ssd_per_dram_reason": why,
        "drive_capacity_bytes": cls.drive_capacity_bytes, "drives": drives, "usd_per_day": usd,
        "steady_state": st["state"], "basis": st["basis"], "loading_wins": wins,
    }


def simulate_write_policies(trace, *, block_bytes: int, l2_blocks: int, l3_blocks: int, layout: str,
                            sc: _Scale, ftl_op: float, erase_block_bytes: int, gc: str,
                            policies=("through", "back"), model_ftl: bool = True, max_refs: int = 1 << 20,
                            batch: int = 1 << 16, from_request: int = 0) -> dict:
    """Steady-state L3 writes under each write policy from the tier simulation (:mod:`kvbench.sim.tiers`):
    writes per block reference in requests after L3's first slot reuse (its first eviction) times the trace's
    mean demand (:mod:`kvbench.analysis.curves.residence`'s W), and the device WAF of each policy's own L3 write/trim
    stream through the FTL model. ``from_request``: the requests before it only warm the tiers (a warm-up): the
    window opens at the later of the reuse and that request, and the demand is the window's, as ``steady_curve``'s."""
    from kvbench.analysis import ftl
    from kvbench.sim.tiers import EV_TRIM, EV_WRITE, Hierarchy, HierarchySpec, TierSpec

    out = {}
    q = 1.0
    if trace.n_blocks > max_refs:        # the per-block simulation runs on a key sample (miniature) of large traces
        from kvbench.analysis.curves.profile import sampled_trace

        q = max_refs / trace.n_blocks
        trace, _ = sampled_trace(trace, q)
        l2_blocks, l3_blocks = int(round(l2_blocks * q)), max(1, int(round(l3_blocks * q)))
    # only requests holding a (sampled) block change the tiers: simulate those (memory follows the sample)
    busy = np.flatnonzero(np.diff(trace.offsets) > 0)
    t = np.asarray(trace.timestamp_s, dtype=np.float64)[busy]
    offsets = np.concatenate([np.asarray(trace.offsets[:1], dtype=np.int64),
                              np.asarray(trace.offsets, dtype=np.int64)[busy + 1]])
    refs = np.diff(offsets)
    # references/s, as W's: from the first arrival, or from the last warm-up one
    t0 = float(trace.timestamp_s[from_request - 1]) if from_request > 0 else float(np.min(trace.timestamp_s))
    demand = res.mean_demand(t, refs, t0=t0)
    first_measured = int(np.searchsorted(busy, from_request))     # the first busy request the window may hold
    for wp in policies:
        probe = HierarchySpec(tiers=(TierSpec("l3", 1),), block_bytes=block_bytes)
        slot = probe.slot_bytes
        tiers = ((TierSpec("l2", max(1, l2_blocks) * slot),) if l2_blocks > 0 else ()) + \
            (TierSpec("l3", max(1, l3_blocks) * slot, layout=layout, trim=True),)
        h = Hierarchy(HierarchySpec(tiers=tiers, block_bytes=block_bytes, write_policy=wp))
        parts = []
        for a in range(0, t.size, batch):      # in batches, keeping only L3's writes and trims
            b = min(t.size, a + batch)
            _, ev = h.run(t[a:b], offsets[a:b + 1] - offsets[a], trace.keys[offsets[a]:offsets[b]], first_request=a)
            parts.append(ev[(ev["tier"] == 2) & ((ev["op"] == EV_WRITE) | (ev["op"] == EV_TRIM))])
        l3 = np.concatenate(parts)
        w = l3[l3["op"] == EV_WRITE]
        row = {"l3_write_blocks": int(w.size), "produced_blocks": int(h.produced),
               "l3_trim_slots": int(l3["nslots"][l3["op"] == EV_TRIM].astype(np.int64).sum())}
        _, first = np.unique(w["slot"], return_index=True)
        reuse = np.setdiff1d(np.arange(w.size), first)
        if reuse.size:
            req = max(int(w["request"][reuse.min()]), first_measured - 1)
            after = int(np.count_nonzero(w["request"] > req))
            seen = int(refs[req + 1:].sum())
            wb = after / seen * demand * slot * sc.time_scale * sc.copies / q if seen and demand > 0 else None
        else:
            wb = None
        cap_bytes = max(1, l3_blocks) * slot * sc.copies / q
        row.update({"write_bytes_per_s": wb, "dwpd": dwpd(wb, cap_bytes) if wb is not None else None,
                    "l2_bytes": l2_blocks * slot * sc.copies / q, "l3_bytes": cap_bytes, "key_sample_rate": q,
                    "steady_state": wb is not None,
                    "note": None if wb is not None else "L3 never evicts within the trace: no steady state"})
        if model_ftl and w.size:
            from kvbench.analysis.placement import store_ftl_config
            from kvbench.units import format_bytes

            top = int((l3["slot"] + l3["nslots"]).max()) * slot
            cfg = store_ftl_config(top, slot, op=ftl_op, erase_block_bytes=erase_block_bytes, gc=gc)
            page, block_pages = cfg.page_size, cfg.block_pages
            ops = np.where(l3["op"] == EV_WRITE, ftl.OP_WRITE, ftl.OP_TRIM).astype(np.uint8)
            ext = ftl.bytes_to_pages(ops, l3["slot"].astype(np.int64) * slot,
                                     l3["nslots"].astype(np.int64) * slot, page)
            r = ftl.simulate(cfg, extents=ext, writes=3.0, warmup=0.5)
            row["waf"] = r.waf
            row["waf_source"] = (f"FTL model fed this policy's L3 writes and trims ({layout} store), op {ftl_op:g}, "
                                 f"{format_bytes(block_pages * page)} erase units")
        out[wp] = row
    return out


@dataclass(frozen=True, eq=False)
class DeviceWaf:
    """The device WAF each drive class's store sees: one given or measured figure (--waf, a replay's SMART), else
    the FTL model fed the store's own write/trim stream at the capacity the class sizes
    (:class:`kvbench.analysis.trace_waf.WafModel`), never an assumed pattern."""

    given: float | None
    given_source: str
    model: object = None           # kvbench.analysis.trace_waf.WafModel
    sc: object = None              # _Scale: planned bytes -> the trace's blocks per copy
    default_op: float = 0.07

    def op(self, cls) -> float:
        """A class's over-provisioning: its own (raw / user - 1) when stated, else the plan's --ssd-op."""
        from kvbench.analysis.trace_waf import class_op

        return class_op(cls, self.default_op)

    def at(self, capacity_bytes: float, cls=None, layout: str | None = None) -> tuple[float, str]:
        """(WAF, where it came from) of a store of ``capacity_bytes`` (planned units) on a drive of ``cls``."""
        from kvbench.units import format_bytes

        if self.given is not None:
            return float(self.given), self.given_source
        op = self.op(cls)
        r = self.model.at(self.sc.blocks(capacity_bytes), op, layout)
        return r.waf, f"trace-driven at {format_bytes(capacity_bytes)}: {r.detail}"


def device_waf(opt: PlanOptions, trace, block_bytes: int, from_request: int) -> DeviceWaf:
    """The plan's device WAF: given or measured, else trace-driven (``DeviceWaf.sc`` is set once the rate is),
    measured from ``from_request`` (the warm-up's end) as every steady figure of the plan."""
    from kvbench.analysis.trace_waf import WafModel

    if opt.waf is not None:
        return DeviceWaf(float(opt.waf), opt.waf_source, default_op=opt.ssd_op)
    return DeviceWaf(None, "", WafModel(trace, block_bytes=block_bytes, layout=opt.layout, gc=opt.gc,
                                        erase_block_bytes=opt.erase_block_bytes, from_request=from_request),
                     default_op=opt.ssd_op)


def size_at_own_waf(cls, wafs: DeviceWaf, need_bytes: float, size, rounds: int = 4) -> dict:
    """Size one class with the WAF of the store it sizes: the endurance capacity depends on the WAF and the WAF
    on the capacity, so iterate (WAF at the need first) until the WAF holds within 1% (a few rounds: WAF
    changes slowly with capacity). ``size(waf) -> row`` is :func:`size_drive_class` bound to the class."""
    waf, src = wafs.at(need_bytes, cls)
    row = size(waf)
    for _ in range(rounds):
        w2, s2 = wafs.at(row["store_bytes"], cls)
        if abs(w2 - waf) <= 0.01 * waf:
            src = s2
            break
        waf, src = w2, s2
        row = size(waf)
    row["workload_waf_source"] = src
    return row


@dataclass(frozen=True, eq=False)
class _Ctx:
    """What every target's sizing shares: the curves, the scale, the bill's rates."""

    trace: object
    steady: res.SteadyCurve
    hit_curve: HitRatioCurve
    sc: _Scale
    opt: PlanOptions
    prices: Prices
    waf: DeviceWaf
    tokens_per_s: float
    tokens_per_day: float
    refs_per_day: float
    knee_blocks: float
    retention: dict | None
    wins_at: object = None

    def hit_tokens_per_day(self, h: float) -> float:
        return self.refs_per_day * h * self.trace.block_tokens


def plan_target(ctx: _Ctx, t: float) -> tuple[dict, list | None, list | None]:
    """One hit-ratio target: its need (hit capacity or retention), every drive class sized for it, the bill."""
    opt, sc, hit_curve, prices = ctx.opt, ctx.sc, ctx.hit_curve, ctx.prices
    cb = cap.capacity_for_target(hit_curve, t, relative=opt.relative)
    ret_bytes = (ctx.retention or {}).get("capacity_bytes")
    if cb is None and not ret_bytes:
        return ({"reachable": False, "target_hit_ratio": cap.target_hit(hit_curve, t, relative=opt.relative),
                 "infinite_hit_ratio": hit_curve.infinite_hit_ratio}, None, None)
    # the need: the hit target's capacity and the retention's, whichever is larger (a target the trace cannot
    # reach leaves the retention alone)
    hit_bytes = sc.bytes(cb) if cb is not None else None
    what = (f"hit-ratio target {t:g} x the infinite-cache {hit_curve.infinite_hit_ratio:.3f}" if opt.relative
            else f"hit-ratio target {t:g}")
    need, reason = (hit_bytes, what) if cb is not None else (0.0, "")
    if ret_bytes and ret_bytes > need:
        need, reason = ret_bytes, f"retention {opt.retention_s:g} s"
    cb = cb if cb is not None else sc.blocks(need)
    l2 = min(float(opt.dram_bytes) if opt.dram_bytes is not None else sc.bytes(min(ctx.knee_blocks, cb)), need)
    st = steady_at(ctx.steady, need, sc)
    def sizer(c):
        return lambda waf: size_drive_class(
            c, steady=ctx.steady, hit_curve=hit_curve, sc=sc, need_bytes=need, need_reason=reason, waf=waf,
            store_fill=opt.store_fill, dram_bytes=l2, prices=prices, tokens_per_day=ctx.tokens_per_day,
            hit_tokens_per_day_at=ctx.hit_tokens_per_day, tokens_per_s=ctx.tokens_per_s, wins_at=ctx.wins_at)

    rows = [size_at_own_waf(c, ctx.waf, need, sizer(c)) for c in prices.ssd.values()]
    chosen = opt.ssd_class or min(rows, key=lambda r: r["usd_per_day"]["total"])["class"]
    pick = next(r for r in rows if r["class"] == chosen)
    hit = float(hit_curve.at(sc.blocks(need)))
    recompute_day = gpu_usd_per_day(ctx.tokens_per_day, ctx.tokens_per_s, prices)
    gpu_hit = gpu_usd_per_day(max(0.0, ctx.tokens_per_day - ctx.hit_tokens_per_day(hit)), ctx.tokens_per_s, prices)
    dram_only = {"dram": dram_usd_per_day(need, prices), "ssd": 0.0, "gpu": gpu_hit}
    dram_only["total"] = sum(dram_only.values())
    plans = [
        {"name": "recompute", "dram_bytes": 0, "ssd_bytes": 0, "hit_ratio": 0.0,
         "usd_per_day": {"dram": 0.0, "ssd": 0.0, "gpu": recompute_day, "total": recompute_day}},
        {"name": "dram-only", "dram_bytes": need, "ssd_bytes": 0, "hit_ratio": hit, "usd_per_day": dram_only},
    ] + [{"name": f"dram+ssd:{r['class']}", "dram_bytes": l2, "ssd_bytes": r["capacity_bytes"],
          "hit_ratio": r["hit_ratio"], "ssd_class": r["class"], "usd_per_day": r["usd_per_day"]} for r in rows]
    for p in plans:
        p["gpu_hours_per_day"] = p["usd_per_day"]["gpu"] / prices.gpu_usd_per_hour
    value_per_hit = ctx.trace.block_tokens * usd_per_recomputed_token(ctx.tokens_per_s, prices)
    entry = {
        "reachable": hit_bytes is not None, "target_hit_ratio": cap.target_hit(hit_curve, t, relative=opt.relative),
        "hit_ratio": hit, "hit_capacity_bytes": hit_bytes, "need_bytes": need, "need": reason,
        "l2_bytes": l2, "l3_bytes": pick["capacity_bytes"], "write_bytes_per_s": st["write_bytes_per_s"],
        "l3_write_bytes_per_day": bytes_per_day(st["write_bytes_per_s"] or 0.0),
        "residence_s": st["residence_s"], "dwpd": st["dwpd"], "steady_state": st["state"],
        "ssd_class": chosen, "bound": pick["bound"], "ssd_bytes": pick["capacity_bytes"],
        "dwpd_host": pick["dwpd_host"], "dwpd_rating_equivalent": pick["dwpd_rating_equivalent"],
        "lifetime_years": pick["lifetime_years"], "ssd_per_dram_gb": pick["ssd_per_dram"],
        # where one more GB stops paying for itself (marginal hits x a hit's prefill value vs its daily cost)
        "pays_until_bytes": {
            name: sc.bytes(cap.pays_until(hit_curve, value_per_hit_per_day=value_per_hit,
                                          refs_per_day=ctx.refs_per_day / (sc.copies * sc.sample_rate),
                                          cost_per_block_per_day=cost / sc.sample_rate))
            for name, cost in (("dram", dram_usd_per_day(sc.block_bytes, prices)),
                               ("ssd", ssd_usd_per_day(sc.block_bytes, prices.ssd[chosen], None)))},
    }
    return entry, plans, rows


def _profile(trace, warmup, exact=None):
    """The trace's exact curve in its own blocks (the plan's units, see ``_Scale``); a key sample's is the whole
    stream's SHARDS_adj estimate, its distances brought back to the sample's (integer) blocks. ``exact``: the
    trace's ``exact_profile`` when the caller has it (with no warm-up: the same profile)."""
    from dataclasses import replace

    from kvbench.analysis.curves.profile import exact_profile

    p = exact if exact is not None and not warmup else exact_profile(trace, warmup=warmup)
    if p.sample_rate < 1.0:
        p = replace(p, steps=np.rint(p.steps * p.sample_rate), capacity_scale=1.0 / p.sample_rate)
    return p


def build_plan(trace, *, block_bytes: int, prices: Prices, tokens_per_s: float, options: PlanOptions,
               bytes_per_token: float | None = None, compute: dict | None = None, model: str = "",
               measured: dict | None = None, profile=None, kv=None, step=None, exact=None) -> dict:
    """Steady-state capacity, DWPD, residence, drives per class and the bill for one trace. ``step(name)`` is
    told as each stage begins (the curves, then each hit-ratio target): a live line's ``Steps.start``.

    ``kv``: the model (its per-layer load bytes for the load-vs-recompute bill); ``measured``: what a replay run
    measured (``waf``, ``waf_source``, ``l3_write_bytes``...), reported beside
    the steady-state numbers; a run's device WAF replaces the FTL model's. ``exact``: the trace's
    ``exact_profile`` when the caller computed it already (``kvbench run``'s job): not computed again."""
    from kvbench.analysis.curves.profile import warmup_window
    from kvbench.stream.sampling import full_references_from, request_index, whole
    from kvbench.stream.stationarity import plan_note, stat_share, stationarity, suffix_report

    opt = options.validate()
    stream = whole(trace)           # the whole stream's totals (a compacted key sample holds fewer requests)
    n = int(stream["requests"])
    n_whole = n                     # the window's count replaces n under a warm-up
    span = float(trace.duration_s)
    if n < 2 or span <= 0:
        raise SpecError(f"trace {trace.path} spans {span:g} s over {n} request(s)",
                        "give a trace with at least two requests at different times")
    if opt.ssd_class is not None and opt.ssd_class not in prices.ssd:
        raise SpecError(f"unknown SSD class {opt.ssd_class!r}", f"choose one of: {', '.join(prices.ssd)}")
    # a warm-up (--warmup) is left out of every measured figure: hit ratios, steady writes, the rates they are set
    # at and the window whose stationarity bounds them; the requests before it only warm the cache
    warm = warmup_window(trace, opt.warmup)         # refused in one line when the window spans no time
    warm_s = float(trace.timestamp_s[warm]) if warm else None
    refs_measured = int(trace.offsets[-1] - trace.offsets[warm])
    measured_from = None
    if warm:
        # the window's own totals, its span from the last warm-up arrival (as the whole trace's from its first)
        whole_stat = stationarity(trace)
        t_last = float(trace.timestamp_s[warm - 1])
        k = int(request_index(trace)[warm])
        share = (n - k) / n
        stream = {"blocks": full_references_from(trace, warm),
                  "input_tokens": (int(np.asarray(trace.input_tokens[warm:], dtype=np.int64).sum())
                                   if "whole" not in trace.meta else stream["input_tokens"] * share)}
        n, span = n - k, float(trace.timestamp_s[-1]) - t_last    # > 0: warmup_window checked the window
        measured_from = {"start_s": warm_s, "request": warm, "share_of_span": stat_share(trace, warm_s),
                         "requests": n, "span_s": span, "whole_trace_stationary": whole_stat.stationary,
                         "whole_trace_verdict": whole_stat.verdict}
    trace_rate = n / span
    stat = stationarity(trace, start_s=warm_s)   # DESIGN.md, "Stationarity": steady figures capped at its ceiling
    stat_note = None
    suffix = suffix_report(trace, stat, after_s=warm_s)     # a stationary tail the note can name
    step = step or (lambda name: None)
    step("hit-ratio and steady-state curves")
    hit_curve = cap.HitCurve.from_profile(_profile(trace, opt.warmup, exact), block_bytes=block_bytes)
    steady_raw = res.steady_curve(trace, block_bytes=block_bytes, from_request=warm)
    # no steady write rate is below the compulsory (never-seen) rate of the window its demand is measured over:
    # on a trace whose new-block share falls, a large tier's window after its first eviction is the trace's last
    # minutes, whose few new blocks would otherwise claim hits no cache of this trace had (DESIGN.md, Stationarity)
    floor = steady_raw.demand_blocks_per_s * (1.0 - stat.steady_ceiling)    # W's own demand: exact at no reuse
    steady = replace(steady_raw, write_blocks_per_s=np.maximum(steady_raw.write_blocks_per_s,
                                                               floor if math.isfinite(floor) else 0.0))
    tokens_per_req = float(stream["input_tokens"]) / n
    sample = float((getattr(trace, "meta", None) or {}).get("sample_rate", 1.0) or 1.0)   # gen:...,sample=r
    # blocks per request: counted, or (key sample) the block counts before sampling, since a few very popular
    # blocks (shared system prompts) make a sampled count a noisy estimate
    blocks_per_req = refs_measured / n if sample == 1.0 else float(stream["blocks"]) / n
    bpt = float(bytes_per_token or block_bytes / trace.block_tokens)

    layout = opt.layout
    wafs = device_waf(opt, trace, block_bytes, from_request=warm)

    # the planned rate: given, a deployment's, or the trace's own
    deployment = None
    rate_model = opt.rate_model
    if opt.deployment is not None:
        from kvbench.analysis.deployment import against_rating, scale

        ref_cls = prices.ssd[opt.ssd_class] if opt.ssd_class else next(iter(prices.ssd.values()))
        # steady-state hits (1 - W(C) / demand), the same write rates every other steady answer uses: the
        # whole-trace curve would count the trace's cold start as GPU work
        steady_hits = res.SteadyHits(steady, demand_blocks_per_s=sample * blocks_per_req * trace_rate)
        kw = dict(tokens_per_s_per_gpu=tokens_per_s, hit_curve=steady_hits, trace_rate=trace_rate,
                  tokens_per_request=tokens_per_req, blocks_per_request=blocks_per_req,
                  block_tokens=trace.block_tokens, block_bytes=block_bytes, bytes_per_token=bpt,
                  store_fill=opt.store_fill, sample_rate=sample)
        # the WAF changes no rate: find the rate, then the WAF of the deployment's store at that rate
        copies = scale(opt.deployment, waf=1.0, reference_waf=1.0, **kw)["trace_copies"] / sample
        dep_store = opt.deployment.drives * opt.deployment.drive_capacity_bytes * opt.store_fill
        dep_waf, dep_src = replace(wafs, sc=_Scale(1.0, copies, block_bytes, sample)).at(dep_store, ref_cls)
        deployment = scale(opt.deployment, waf=dep_waf, reference_waf=ref_cls.reference_waf or dep_waf, **kw)
        deployment["workload_waf_source"] = dep_src
        deployment["reference_class"] = ref_cls.name
        deployment.update(against_rating(deployment, rated_dwpd=ref_cls.dwpd, warranty_years=ref_cls.warranty_years))
        deployment["steady_ceiling"] = stat.steady_ceiling
        deployment["hit_ratio_capped"] = deployment["hit_ratio"] >= stat.steady_ceiling - 1e-6
        if deployment["hit_ratio_capped"] or not stat.stationary:
            free = scale(opt.deployment, waf=1.0, reference_waf=1.0,
                         **{**kw, "hit_curve": replace(steady_hits, curve=steady_raw)})
            stat_note = plan_note(stat, capped=deployment["hit_ratio_capped"], uncapped_hit=free["hit_ratio"],
                                  uncapped_rate=free["requests_per_s"], suffix=suffix, measured_from=measured_from)
        rate, rate_model = deployment["requests_per_s"], "replicate"
    else:
        rate = opt.rate or trace_rate
    ratio = rate / trace_rate
    sc = _Scale(time_scale=ratio if rate_model == "compress" else 1.0,
                copies=(ratio if rate_model == "replicate" else 1.0) / sample, block_bytes=block_bytes,
                sample_rate=sample)
    wafs = replace(wafs, sc=sc)
    refs_per_day = blocks_per_req * n / span * ratio * SECONDS_PER_DAY
    tokens_per_day = tokens_per_req * rate * SECONDS_PER_DAY

    wins_at = None
    if opt.load_tier is not None:
        from kvbench.analysis.recompute import Inequality
        from kvbench.compute.profile import rate_profile

        # a hit loads what the model's layers hold for its prefix (a sliding window at most its window)
        ineq = Inequality(profile or rate_profile(tokens_per_s), bytes_per_token=bpt, layers=1, kv=kv)

        def wins_at(c_blocks):
            return loading_wins(steady, trace, c_blocks, ineq, opt.load_tier, sample_rate=sample)

    knee_blocks = cap.knee(hit_curve)
    curve_rows = capacity_curve(steady, hit_curve, list(opt.capacities) or default_capacities(steady, sc), sc)
    retention = retention_row(steady, hit_curve, opt.retention_s, sc) if opt.retention_s else None
    sweep = [retention_row(steady, hit_curve, r, sc)
             for r in sorted(set(opt.sweep) | ({opt.retention_s} if opt.retention_s else set()))]

    ctx = _Ctx(trace=trace, steady=steady, hit_curve=hit_curve, sc=sc, opt=opt, prices=prices, waf=wafs,
               tokens_per_s=tokens_per_s, tokens_per_day=tokens_per_day, refs_per_day=refs_per_day,
               knee_blocks=knee_blocks, retention=retention, wins_at=wins_at)
    per_target, plans, drives_by_target = {}, {}, {}
    capacity_bytes = {"l2": {}, "l3": {}}
    for t in opt.targets:
        k = _key(t)
        step(f"target {t:g}: drive classes at their own WAF")
        per_target[k], rows_plans, rows = plan_target(ctx, t)
        if rows is None:
            capacity_bytes["l2"][k] = capacity_bytes["l3"][k] = None
            continue
        plans[k], drives_by_target[k] = rows_plans, rows
        capacity_bytes["l2"][k], capacity_bytes["l3"][k] = per_target[k]["l2_bytes"], per_target[k]["ssd_bytes"]
    head = _key(opt.targets[0])
    drives = drives_by_target.get(head, [])
    primary = per_target[head]
    pick = next((r for r in drives if r["class"] == primary.get("ssd_class")), None)
    waf, waf_source = (pick["workload_waf"], pick["workload_waf_source"]) if pick else wafs.at(
        primary.get("need_bytes") or sc.bytes(knee_blocks))

    layouts = {}
    if pick and pick["write_bytes_per_s"] and wafs.given is None:
        # both layouts' own streams at the picked class's store: what the layout does to the NAND
        for name in LAYOUT_NAMES:
            w, src = wafs.at(pick["store_bytes"], prices.ssd[pick["class"]], layout=name)
            nand = bytes_per_day(pick["write_bytes_per_s"]) * w
            layouts[name] = {"waf": w, "model": src, "nand_bytes_per_day": nand,
                             "nand_writes_per_day": nand / pick["capacity_bytes"]}
    policies = None
    if opt.write_policies and primary.get("need_bytes"):
        l3_blocks = int(min(sc.blocks(primary["need_bytes"]), steady.distinct + 1))
        policies = simulate_write_policies(
            trace, block_bytes=block_bytes, l2_blocks=int(min(sc.blocks(primary["l2_bytes"]), l3_blocks)),
            l3_blocks=max(1, l3_blocks), layout=layout, sc=sc, ftl_op=opt.ssd_op,
            erase_block_bytes=opt.erase_block_bytes, gc=opt.gc, model_ftl=False, from_request=warm)

    admission = None
    if opt.admission:
        from kvbench.analysis.admission import admission_for_plan

        admission = admission_for_plan(trace, opt, primary=primary, prices=prices, sc=sc, block_bytes=block_bytes,
                                       waf=waf, tokens_per_day=tokens_per_day, refs_per_day=refs_per_day,
                                       tokens_per_s=tokens_per_s, distinct=steady.distinct)
    placement = None
    if opt.placement:
        from kvbench.analysis.admission import placement_for_plan

        placement = placement_for_plan(trace, opt, primary=primary, sc=sc, block_bytes=block_bytes,
                                       distinct=steady.distinct, from_request=warm)
    fdp = None
    if opt.fdp is not None and pick:
        from kvbench.analysis.fdp import fdp_for_plan

        fdp = fdp_for_plan(trace, opt.fdp, pick=pick, blocks=min(sc.blocks(pick["store_bytes"]), steady.distinct + 1),
                           block_bytes=block_bytes, layout=opt.layout, op=wafs.op(prices.ssd[pick["class"]]),
                           gc=opt.gc, measured=measured, from_request=warm)

    warnings = []
    stat_note = stat_note or plan_note(stat, capped=False, suffix=suffix, measured_from=measured_from)
    if stat_note and (not stat.stationary or (deployment or {}).get("hit_ratio_capped")):
        warnings.append(stat_note)      # a stationary window measured from a warm-up is said, not warned of
    flat = flat_retention_note(sweep)
    if flat:
        warnings.append(flat)
    for r in sweep + ([retention] if retention else []):
        if r and r["extrapolated"]:
            warnings.append(f"retention {r['retention_s']:g} s is beyond what the trace shows "
                            f"({steady.max_residence_s / sc.time_scale:,.0f} s of residence): {r['basis']}; "
                            "a longer trace or a fitted workload model (kvbench trace fit / gen:) shows it")
            break
    if pick and pick["steady_state"] != "measured":
        from kvbench.units import format_bytes

        warnings.append(f"the planned tier ({format_bytes(pick['capacity_bytes'])}): {pick['basis']}")
    if sample < 1.0 and primary.get("need_bytes") and sc.blocks(primary["need_bytes"]) < 100:
        warnings.append(f"the key sample resolves the planned tier in {sc.blocks(primary['need_bytes']):.3g} "
                        "sampled blocks per copy of the workload: too few for a faithful miniature; raise the "
                        "sample rate")
    if sample < 1.0:
        warnings.append(f"a key sample at rate {sample:g}: capacities and write rates are scaled by 1/{sample:g} "
                        "(residence and DWPD need no scaling); hit ratios are SHARDS estimates against the "
                        "whole stream's references (SHARDS_adj), but carry the sample's variance where a few "
                        "very popular blocks (shared system prompts) fall in or out of it: compare with a higher "
                        "rate or the full stream before acting on a hit ratio")
    if measured and ((measured.get("requests_replayed") is not None and measured["requests_replayed"] < n_whole)
                     or measured.get("run_status") in ("interrupted", "failed", "running")):
        # a replay runs from the trace's first request: under a warm-up, how much of it reached the window
        done = measured.get("requests_replayed") or 0
        k = n_whole - n
        warnings.append(f"the replay run ({measured.get('run_status') or 'status unknown'}) covered {done:,} of "
                        f"{n_whole:,} requests"
                        + (f" ({max(0, done - k):,} of them in the window measured from request {k:,})" if warm
                           else "")
                        + ": its measured WAF is from that part; hit ratios and write rates here are from "
                        + ("the window" if warm else "the whole trace"))

    out = {
        "model": model, "trace": str(trace.path), "block_tokens": trace.block_tokens, "block_bytes": block_bytes,
        "source": dict(getattr(trace, "meta", None) or {}) or {"source": "trace"},
        "bytes_per_token": bpt, "requests": n, "references": refs_measured, "span_s": span,
        "trace_rate": trace_rate, "rate": rate, "rate_scale": ratio, "rate_model": rate_model,
        "retention_s": opt.retention_s, "targets": list(opt.targets),
        "target_mode": "relative to infinite-cache hit ratio" if opt.relative else "absolute",
        "infinite_hit_ratio": hit_curve.infinite_hit_ratio, "knee_bytes": sc.bytes(knee_blocks),
        "steady_state": {**res.summary(steady), "max_residence_s": steady.max_residence_s / sc.time_scale},
        "capacity_curve": curve_rows, "retention": retention, "retention_sweep": sweep, "drives": drives,
        "capacity_bytes": capacity_bytes, "per_target": per_target, "plans": plans,
        "ssd_class": primary.get("ssd_class"), "bound": primary.get("bound"),
        "dwpd": pick["dwpd_host"] if pick else None,
        "dwpd_rating_equivalent": pick["dwpd_rating_equivalent"] if pick else None,
        "residence_s": pick["residence_s"] if pick else None,
        "lifetime_years": pick["lifetime_years"] if pick else None,
        "ssd_per_dram_gb": pick["ssd_per_dram"] if pick else None,
        "usd_per_day": pick["usd_per_day"]["total"] if pick else None,
        "usd_per_day_loading_wins": pick["usd_per_day"].get("total_loading_wins") if pick else None,
        "load_tier": ({"name": opt.load_tier.name, "bandwidth_bytes_per_s": opt.load_tier.bandwidth_bytes_per_s,
                       "latency_s": opt.load_tier.latency_s, "first_byte": first_byte_text(opt.load_tier)}
                      if opt.load_tier is not None else None),
        "l3_write_bytes_per_day": bytes_per_day(pick["write_bytes_per_s"] or 0.0) if pick else None,
        "nand_bytes_per_day": bytes_per_day(pick["write_bytes_per_s"] or 0.0) * waf if pick else None,
        "waf": waf, "waf_source": waf_source, "layouts": layouts, "write_policies": policies,
        "deployment": deployment, "measured": measured, "warnings": warnings, "admission": admission,
        "stationarity": stat.to_dict() | {"note": stat_note, "suffix": suffix, "measured_from": measured_from},
        "placement": placement, "fdp": fdp,
        "prices": prices.to_dict(), "compute": compute or {"tokens_per_s": tokens_per_s},
        "usd_per_recomputed_token": usd_per_recomputed_token(tokens_per_s, prices),
        "assumptions": [
            f"rate model '{rate_model}': {RATE_MODELS[rate_model]}",
            "steady state: an LRU tier under write-through writes every block it misses; W(C) counted from its "
            "first eviction on; residence T(C) = C / W(C); DWPD = 86400 / T(C)",
            "rating-equivalent DWPD = host DWPD x workload WAF / the class's reference WAF (the rating's workload)",
            "L2 DRAM sized at the curve's knee (or --dram); L3 SSD holds the whole working set (inclusive)",
            "a hit block saves block_tokens tokens of prefill; GPU cost is linear in recomputed tokens; "
            "usd_per_day counts every hit, usd_per_day_loading_wins (with --load-tier) only hits whose load beats "
            "recomputing that prefix",
            f"prices '{prices.name}' dated {prices.date}: {prices.status}",
        ],
    }
    mark_provenance(out)
    out["answer"] = answer(out)
    return out


PROVENANCE = {
    "trace": "measured on the trace",
    "model": "from a workload model preset (not fitted to a trace)",
    "fitted-span": "within the span of the trace the model was fitted on (the fit reproduces its curve there)",
    "extension": "beyond the span of the trace the model was fitted on: from the model's extension (returns hours "
                 "later, daily and weekly cycles), not from what the trace showed",
}


def provenance(source: dict, residence_s) -> str | None:
    """Where an answer at a residence time comes from (a key of ``PROVENANCE``): a measured trace, a preset's
    stream, or a fitted model's stream within or beyond the span of the trace it was fitted on (a tier that keeps
    KV longer than the trace lasted holds reuse the trace could not show). None: no residence to judge by."""
    if (source or {}).get("source") != "generated":
        return "trace"
    span = float(source.get("fitted_span_s") or 0.0)
    if not span:
        return "model"
    if residence_s is None or not math.isfinite(float(residence_s)):
        return None
    return "fitted-span" if float(residence_s) <= span else "extension"


def mark_provenance(out: dict) -> None:
    """``from`` on every capacity row, retention row and drive class: see :func:`provenance`."""
    src = out.get("source") or {}
    rows = list(out.get("capacity_curve") or []) + list(out.get("retention_sweep") or []) + \
        list(out.get("drives") or []) + ([out["retention"]] if out.get("retention") else [])
    for r in rows:
        r["from"] = provenance(src, r.get("residence_s"))
    out["from"] = provenance(src, out.get("residence_s"))


def answer(out: dict) -> dict:
    """The few sentences that state the plan's answer, with the numbers they quote."""
    from kvbench.units import (MISSING, NEVER_REWRITTEN, format_bytes, format_duration, format_lasts as _lasts,
                               format_residence, format_years)

    def _kept(text: str) -> str:
        return text if text == NEVER_REWRITTEN else f"{text} before it is rewritten"

    head = _key(out["targets"][0])
    t = out["per_target"].get(head) or {}
    lines = []
    if not t.get("need_bytes"):
        lines.append(f"The hit-ratio target {head} is unreachable on this trace (the infinite-cache hit ratio is "
                     f"{out['infinite_hit_ratio']:.3f}).")
        return {"sentences": lines}
    d = next((r for r in out["drives"] if r["class"] == t["ssd_class"]), None)
    rate = f"{out['rate']:,.3g} requests/s" + (" (the deployment's)" if out.get("deployment") else
                                                 " (the trace's)" if out["rate_scale"] == 1 else "")
    src = out.get("source") or {}
    if src.get("source") == "generated":
        lines.append(f"From the workload model {src.get('generated_from')} (generated, "
                     f"{src.get('span_s', 0) / SECONDS_PER_DAY:.3g} "
                     "days" + (f", key sample {src['sample_rate']:g}" if (src.get("sample_rate") or 1) < 1 else "")
                     + "; not a measured trace):")
        if src.get("fitted_span_s") and out.get("residence_s"):
            where = out.get("from")
            lines.append(f"The planned tier keeps KV {format_residence(out['residence_s'])}, "
                         + ("within" if where == "fitted-span" else "beyond")
                         + f" the {format_duration(src['fitted_span_s'])} of trace the model was fitted on: "
                         + ("what that trace showed, reproduced by the fit." if where == "fitted-span" else
                            "this answer rests on the model's extension (returns hours later, daily and weekly "
                            "cycles), not on what the trace showed."))
    lines.append(f"At {rate}, a hit ratio of {t['hit_ratio']:.3f} ({t['need']}) needs "
                 f"{format_bytes(t['need_bytes'])} of KV tier, with {format_bytes(t['l2_bytes'])} of DRAM in front "
                 "(the curve's knee).")
    if d:
        life = d["lifetime_years"]
        lines.append(
            f"On {d['class']} drives ({d['rated_dwpd']:g} DWPD rated) that is {format_bytes(d['capacity_bytes'])}"
            + (f" ({d['drives']} x {format_bytes(d['drive_capacity_bytes'], binary=False)})" if d["drives"] else "")
            + f"; {d['bound']} binds. KV stays "
            + _kept(format_residence(d["residence_s"], d.get("write_bytes_per_s"))) + ": "
            + (f"{d['dwpd_host']:.3g} host DWPD, {d['dwpd_rating_equivalent']:.3g} rating-equivalent "
               f"(WAF {d['workload_waf']:.3g} vs the rating's {d['reference_waf']:.3g})" if d["dwpd_host"] is not None
               else "DWPD unknown")
            + (f", {format_years(life)} of life." if life is not None and math.isfinite(life) else
               f", lifetime {format_years(life)}." if life is not None else "."))
        if d.get("steady_state") == "extrapolated" and src.get("source") != "generated":
            shown = out["steady_state"]["max_residence_s"] / (out["rate_scale"] if out["rate_model"] == "compress"
                                                              else 1.0)
            lines.append(f"That residence is beyond the {format_duration(shown)} this trace shows: its write rate is "
                         "held at its value there, so the capacity is an upper bound (a longer trace, or a workload "
                         "model fitted to this one with kvbench trace fit, shows it).")
        ssd, hit_ssd = d["capacity_bytes"], d["hit_capacity_bytes"] / (d["store_bytes"] / d["capacity_bytes"])
        lines.append(f"DRAM:SSD bought 1:{ssd / t['l2_bytes']:.3g}" if t.get("l2_bytes") else "No DRAM in front")
        lines[-1] += (f"; {format_bytes(hit_ssd, binary=False)} of SSD for hits, "
                      f"{format_bytes(ssd - hit_ssd, binary=False)} more so the drives last "
                      f"({d['ssd_per_dram_reason']})." if d["bound"] == "endurance"
                      else f" ({d['ssd_per_dram_reason']}).")
        plans = out["plans"][head]
        rec = plans[0]["usd_per_day"]["total"]
        cons = d["usd_per_day"].get("total_loading_wins")
        w = d.get("loading_wins") or {}
        prices = f"({out['prices']['name']} prices, {out['prices']['status']})"
        if cons is not None:        # the cost line counts only the hits whose load beats recomputing them
            lines.append(f"Cost: ${cons:,.2f}/day (DRAM, SSD and the GPU time of every prompt token whose load does "
                         f"not beat recompute: {100 * w.get('fraction', 0):.0f}% of hit tokens load faster at "
                         f"{out['load_tier']['name']}'s measured speed) against ${rec:,.2f}/day recomputing every "
                         f"prompt {prices}" + (": the tier pays." if cons < rec else
                                              ": recompute; a KV tier on this device does not pay at this "
                                              "model/GPU."))
        else:
            lines.append(f"Cost: ${d['usd_per_day']['total']:,.2f}/day (DRAM, SSD and the GPU time of the misses) "
                         f"against ${rec:,.2f}/day recomputing every prompt {prices}; every hit counted as saved "
                         "prefill (give --load-tier to count only hits whose load beats recompute).")
    if (out.get("stationarity") or {}).get("note"):
        lines.append(out["stationarity"]["note"])
    dep = out.get("deployment")
    if dep:
        one_gpu, one_drive = dep["gpus"] == 1, dep["drives"] == 1
        drive = format_bytes(dep["drive_capacity_bytes"], binary=False)
        kept = format_residence(dep["residence_s"], dep.get("write_bytes_per_s_per_drive"))
        text = (f"Deployment: {dep['gpus']:g} GPU{'' if one_gpu else 's'} at utilization {dep['utilization']:g} "
                f"compute{'s' if one_gpu else ''} {dep['prefill_tokens_per_s']:,.0f} prefill tokens/s; under "
                f"write-through {'the one drive' if one_drive else 'each of the %g drives' % dep['drives']}"
                f" of {drive} is written at {dep['dwpd_host_per_drive']:.3g} host DWPD "
                f"({dep['dwpd_rating_equivalent_per_drive']:.3g} rating-equivalent), KV kept {kept}"
                + (f" ({dep['rate_note']})" if dep.get("rate_note") else ""))
        if dep.get("lifetime_years") is not None:
            text += (f"; a {dep['rated_dwpd']:g}-DWPD {dep['reference_class']} drive "
                     + _lasts(dep["lifetime_years"]) + f" (warranty {dep['warranty_years']:g})")
            if not dep["within_rating"]:
                text += (f": {dep['drives_within_rating']:,} such drives keep within the rating at the same GPU "
                         "work (its writes do not fall with more drives; the drive classes above size the store at "
                         "the planned request rate)")
        lines.append(text + ".")
    return {"sentences": lines, "target": head, "ssd_class": t.get("ssd_class"), "bound": t.get("bound")}
