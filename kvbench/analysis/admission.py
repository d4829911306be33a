"""Admission trade-off: hit ratio against steady-state writes and DWPD, per admission policy (pure).

DESIGN.md, "Steady state": a tier of capacity C is written at W(C) from its first eviction on. Under write-through
admit-all that is every miss, and :mod:`kvbench.analysis.curves.residence` gets every capacity in one pass; under an
admission policy the writes depend on the policy's memory, so each (policy, capacity) is simulated on its own
(:func:`simulate_tier`: one tier of the compiled tier simulation, prefix semantics). The
steady state is defined as :mod:`kvbench.analysis.curves.residence` defines it: in the requests arriving after the one
that caused the tier's first eviction, the blocks written (admitted) per block referenced, times the trace's mean
demand (references after the first arrival / span); DWPD = 86,400 W / C (:func:`kvbench.analysis.endurance.dwpd`).
Admit-all reproduces the one-pass curve exactly (tests/analysis/test_admission.py).

The per-capacity simulations are bounded: ``budget_refs`` block references in all (policies x capacities x
the trace's references); a grid that would exceed it is thinned, and says so, and the probes below a planned tier
that does not turn over get what the grid left.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from kvbench.analysis.endurance import drive_bill, dwpd, residence_s
from kvbench.analysis.curves.residence import demand_basis
from kvbench.errors import SpecError
from kvbench.sim.admission import make_admission, parse_admission
from kvbench.sim.policies import make_policy

DEFAULT_BUDGET_REFS = 120_000_000     # ~20-40 s of the compiled simulation on a 2-core VM


@dataclass(frozen=True)
class TierRun:
    """One tier, one policy, one capacity over a whole trace (counts in blocks, times in trace seconds).

    A point, not a curve: not a :class:`~kvbench.analysis.curves.protocol.HitRatioCurve` (the admission sweep's
    curve is its list of runs, one per capacity, each simulated under its policy)."""

    admission: str
    capacity_blocks: int
    references: int
    hit_blocks: int
    written: int                 # blocks admitted (written)
    rejected: int                # blocks the policy kept out
    fill_time_s: float           # trace time of the first eviction from t0 (NaN: never evicts)
    steady_writes: int           # blocks written in requests after the first eviction
    steady_window_s: float       # trace end - fill time (NaN: never evicts)
    span_s: float = 0.0          # first arrival to the last request with blocks
    steady_references: int = 0   # block references in requests after the first eviction
    demand_references: int = 0   # block references in requests after the first arrival: the mean demand's
    demand_span_s: float = 0.0   # the span that demand is over: span_s, or from the last warm-up arrival (0: span_s)

    @property
    def hit_ratio(self) -> float:
        return self.hit_blocks / self.references if self.references else 0.0

    @property
    def filled(self) -> bool:
        return math.isfinite(self.steady_window_s) and self.steady_window_s > 0 and self.steady_writes > 0

    @property
    def turned_over(self) -> bool:
        return self.filled and self.steady_writes >= self.capacity_blocks

    @property
    def write_blocks_per_s(self) -> float:
        """W = the steady window's writes per reference x the trace's mean demand (residence.py's W)."""
        span = self.demand_span_s or self.span_s
        if not (self.filled and self.steady_references > 0 and span > 0):
            return float("nan")
        return self.steady_writes / self.steady_references * self.demand_references / span


BATCH_REQUESTS = 8192      # requests per compiled-hierarchy call: bounds the block events held at once
_SLOT = 4096               # the simulated tier's block and slot size: any aligned size (capacity is in blocks)


def simulate_tier(trace, capacity_blocks: int, admission: str = "all", policy: str = "lru",
                  warmup: float = 0.0) -> TierRun:
    """One write-through tier of ``capacity_blocks`` under ``admission`` over a trace (prefix semantics,
    blocks deepest-first), run by the compiled :class:`kvbench.sim.tiers.Hierarchy` with that tier alone (an
    L3 slot store with no spare slots, so it caches exactly ``capacity_blocks``), in request batches whose
    block events are reduced as they come. Hits and references count from request floor(``warmup`` x
    requests) on, as the hit-ratio curves do; steady writes from the later of the first eviction and that
    request, at the demand from the last warm-up arrival (``steady_curve``'s window). The tier's first eviction
    is its (capacity + 1)-th write: no policy here evicts before it is full, and nothing else removes a block.
    :func:`simulate_tier_reference` is the same in Python (the tests' oracle)."""
    from kvbench.analysis.curves.profile import warmup_request
    from kvbench.sim.tiers import CREATE_WRITE, Hierarchy, HierarchySpec, TierSpec

    cap = int(capacity_blocks)
    spec = HierarchySpec((TierSpec("l3", cap * _SLOT, policy=policy, admission=admission),), _SLOT,
                         spare_slots=0)
    offs = np.asarray(trace.offsets, dtype=np.int64)
    nreq = offs.shape[0] - 1
    times = np.asarray(trace.timestamp_s, dtype=np.float64)
    keys = np.asarray(trace.keys, dtype=np.uint64)
    h = Hierarchy(spec, max_request_blocks=int(np.diff(offs).max()) if nreq else 0)
    writes = np.zeros(nreq, dtype=np.int64)
    hit_req = np.zeros(nreq, dtype=np.int64)
    produced = 0
    for r0 in range(0, nreq, BATCH_REQUESTS):
        r1 = min(nreq, r0 + BATCH_REQUESTS)
        reqs, ev = h.run(times[r0:r1], offs[r0:r1 + 1] - offs[r0], keys[offs[r0]:offs[r1]], first_request=r0)
        hit_req[r0:r1] = reqs["hit_blocks"]
        produced += int(reqs["produced"].sum())
        w = ev["request"][ev["kind"] == CREATE_WRITE]
        writes[r0:r1] = np.bincount(w - r0, minlength=r1 - r0)
    n_warm = warmup_request(trace, warmup)        # of the whole stream's requests when compacted
    cum = np.cumsum(writes)
    first = int(np.searchsorted(cum, cap + 1)) if nreq and cum[-1] > cap else -1
    with_blocks = np.flatnonzero(np.diff(offs) > 0)
    return _tier_run(admission, cap, offs, times, writes, int(hit_req[n_warm:].sum()), produced - int(cum[-1] if nreq
                     else 0), first, int(with_blocks[-1]) if with_blocks.size else -1, n_warm)


def _tier_run(admission, cap, offs, times, writes, hits, rejected, first, last_with_blocks, n_warm) -> TierRun:
    """The run's totals and steady state from per-request writes, the first eviction's request and the last
    request with blocks."""
    nreq = len(offs) - 1
    refs = int(offs[-1] - offs[min(n_warm, nreq)]) if nreq else 0
    t = np.asarray(times, dtype=np.float64)
    t0 = float(t.min()) if nreq else 0.0
    per_req = np.diff(np.asarray(offs, dtype=np.int64))
    # a warm-up's requests only warm the tier: the steady window opens at the later of the first eviction and
    # the warm-up's end, and its demand is the window's, from the last warm-up arrival (as steady_curve's)
    t_open = float(t[n_warm - 1]) if n_warm > 0 else t0
    if first >= 0 and last_with_blocks >= 0:
        t_fill = float(t[first])
        after = t > t_fill
        after[:n_warm] = False
        steady, seen = int(writes[after].sum()), int(per_req[after].sum())
        window = float(t[last_with_blocks]) - max(t_fill, t_open)
        fill = t_fill - t0
    else:
        steady, seen, window, fill = 0, 0, float("nan"), float("nan")
    _, span = demand_basis(t, per_req, t0)
    demand_refs, demand_span = demand_basis(t, per_req, t_open)
    return TierRun(admission=admission, capacity_blocks=cap, references=refs, hit_blocks=hits,
                   written=int(np.sum(writes)), rejected=rejected, fill_time_s=fill, steady_writes=steady,
                   steady_window_s=window, span_s=span, steady_references=seen, demand_references=demand_refs,
                   demand_span_s=demand_span)


def simulate_tier_reference(trace, capacity_blocks: int, admission: str = "all", policy: str = "lru",
                            warmup: float = 0.0) -> TierRun:
    """:func:`simulate_tier` in Python on the reference policies and admission hooks (one loop, no events)."""
    cap = int(capacity_blocks)
    cache = make_policy(policy, cap)
    adm = make_admission(admission, cap)
    hook = None if adm.trivial else adm
    need_victim = hook is not None and hook.needs_victim
    offs = np.asarray(trace.offsets).tolist()
    keys = np.asarray(trace.keys).tolist()
    times = np.asarray(trace.timestamp_s, dtype=np.float64).tolist()
    lookup, insert, victim_of = cache.lookup, cache.insert, cache.victim
    nreq = len(offs) - 1
    writes = np.zeros(nreq, dtype=np.int64)
    hits = rejected = 0
    from kvbench.analysis.curves.profile import warmup_request

    n_warm = warmup_request(trace, warmup)        # of the whole stream's requests when compacted
    first = -1
    last_with_blocks = -1
    for r in range(nreq):
        a, b = offs[r], offs[r + 1]
        if b > a:
            last_with_blocks = r
        now, n = times[r], b - a
        run = w = 0
        if hook is not None and hook.needs_request:
            hook.begin_request(keys[a:b], now)
        for i in range(b - 1, a - 1, -1):
            key = keys[i]
            if hook is not None:
                hook.observe(key, now, i - a)
            if lookup(key, now):
                run += 1
                continue
            run = 0
            if hook is not None:
                v = victim_of() if need_victim and len(cache) >= cap else None
                if not hook.admit(key, now, i - a, n, v):
                    rejected += 1
                    continue
            if insert(key, now) and first < 0:
                first = r
            w += 1
        writes[r] = w
        if r >= n_warm:
            hits += run
    return _tier_run(admission, cap, offs, times, writes, hits, rejected, first, last_with_blocks, n_warm)


def parse_policies(text, option: str = "--admission") -> tuple:
    """``a,b:k=v,c`` (or a sequence) -> validated, de-duplicated policy specs in the order given."""
    items = [x.strip() for x in (text.split(",") if isinstance(text, str) else text) if str(x).strip()]
    if not items:
        raise SpecError("--admission lists no policy", "give e.g. --admission all,second-access,tinylfu")
    for x in items:
        parse_admission(x, option)
    return tuple(dict.fromkeys(items))


def _grid(distinct: int, points: int) -> list[int]:
    """Capacities (blocks) for the frontier: log-spaced from 1/64 of the footprint to just below it."""
    top = max(2, distinct - 1)
    lo = max(1, top // 64)
    return sorted({int(x) for x in np.round(np.geomspace(lo, top, points))})


def tradeoff(trace, *, policies, block_bytes: int, scale, planned_bytes: float, curve_bytes=None,
             waf: float, ssd_class, store_fill: float, dram_bytes: float, prices, tokens_per_day: float,
             refs_per_day: float, block_tokens: int, tokens_per_s: float, distinct: int, warmup: float = 0.0,
             budget_refs: int = DEFAULT_BUDGET_REFS) -> dict:
    """The plan's ``admission`` object: per policy, at the planned capacity, hit ratio, steady write rate,
    DWPD (of the tier, host per drive and rating-equivalent), residence and cost per day, plus a ``curve``
    over capacities (the frontier the report plots: hit ratio against DWPD).

    ``scale`` is the plan's trace -> planned scale (time_scale, copies, block_bytes; ``blocks()``)."""
    policies = parse_policies(policies)
    refs = int(np.asarray(trace.offsets)[-1] - np.asarray(trace.offsets)[0])
    per_policy = max(1, budget_refs // max(1, refs * len(policies)))
    planned_blocks = max(1, int(scale.blocks(planned_bytes)))
    if curve_bytes:
        caps = sorted({max(1, int(scale.blocks(c))) for c in curve_bytes})
        grid_note = "the --capacities given"
    else:
        caps = _grid(distinct, 8)
        grid_note = "a log grid over the trace's footprint"
    caps = [c for c in caps if c != planned_blocks]
    if len(caps) + 1 > per_policy:            # keep the simulations bounded: thin the grid evenly
        keep = max(0, per_policy - 1)
        idx = np.unique(np.round(np.linspace(0, len(caps) - 1, keep)).astype(int)) if keep and caps else []
        thinned = f"; thinned to {len(idx)} of {len(caps)} capacities (budget {budget_refs:,} references)"
        caps = [caps[i] for i in idx]
        grid_note += thinned
    wscale = scale.time_scale * scale.copies * block_bytes

    def row(run: TierRun) -> dict:
        cb = run.capacity_blocks * block_bytes * scale.copies
        wb = run.write_blocks_per_s * wscale if run.filled else None
        return {"capacity_bytes": float(cb), "hit_ratio": run.hit_ratio, "write_bytes_per_s": wb,
                "dwpd": dwpd(wb, cb) if wb else (0.0 if run.filled else None),
                "residence_s": residence_s(cb, wb) if wb else None, "filled": run.filled,
                "turned_over": run.turned_over,
                "written_blocks": run.written, "rejected_blocks": run.rejected,
                # all writes over the whole trace, warm-up included: what an unfilled tier was written at
                "mean_write_bytes_per_s": run.written * wscale / run.span_s if run.span_s > 0 else None}

    out = {}
    for spec in policies:
        head = simulate_tier(trace, planned_blocks, spec, warmup=warmup)
        runs = [simulate_tier(trace, c, spec, warmup=warmup) for c in caps]
        # the probes share the budget: what the grid left of this policy's simulations, at most 12
        probed = _probe_turned_over(trace, head, runs, spec, warmup, most=min(12, per_policy - 1 - len(caps)))
        runs += probed
        r = row(head)
        r["policy"] = make_admission(spec, planned_blocks).describe()
        state, basis = _steady_answer(head, runs, r, wscale, scale.time_scale)
        ssd = r["capacity_bytes"] / store_fill
        # the same per-drive bill as the plan's drive classes (kvbench.analysis.endurance.drive_bill)
        bill = drive_bill(ssd_class, ssd_bytes=ssd, write_bytes_per_s=r["write_bytes_per_s"], waf=waf,
                          dram_bytes=dram_bytes, prices=prices, tokens_per_s=tokens_per_s,
                          recomputed_tokens_per_day=tokens_per_day - refs_per_day * r["hit_ratio"] * block_tokens)
        r.update({"steady_state": state, "basis": basis,
                  "fill_time_s": head.fill_time_s / scale.time_scale if head.filled else None,
                  "ssd_class": ssd_class.name, "ssd_bytes": ssd, "dwpd_host": bill.dwpd_host,
                  "dwpd_rating_equivalent": bill.dwpd_rating_equivalent, "workload_waf": waf,
                  "reference_waf": bill.reference_waf, "lifetime_years": bill.lifetime_years,
                  "usd_per_day": dict(bill.usd_per_day)})
        if not head.filled:
            r["note"] = ("the tier never evicts under this policy within the trace "
                         "(mean_write_bytes_per_s: its fill-phase writes over the whole trace)")
        curve = [row(x) for x in runs] + [row(head)]
        r["curve"] = sorted(curve, key=lambda x: x["capacity_bytes"])
        r["curve_capacities"] = grid_note + (
            f"; plus {len(probed)} below the planned capacity, simulated to find the largest that turns over (the "
            f"rate its answer holds)" if probed else "")
        out[spec] = r
    base = out.get("all")
    if base is not None:
        for spec, r in out.items():
            if r["write_bytes_per_s"] is not None and base["write_bytes_per_s"]:
                r["writes_vs_all"] = r["write_bytes_per_s"] / base["write_bytes_per_s"]
            r["hit_ratio_vs_all"] = r["hit_ratio"] - base["hit_ratio"]
    return out


def _probe_turned_over(trace, head: TierRun, runs: list, spec: str, warmup: float, most: int = 12,
                       within: float = 1.1) -> list:
    """When the planned tier does not turn over: simulated capacities below it that find the largest one that
    does (the held rate's base: W falls as C grows, so the closer the base, the tighter the upper bound). From
    the largest turned-over capacity simulated below the planned one (or, when there is none, the first of
    planned / 2, / 4, ... that turns over) up to the smallest above it that does not, a geometric bisection until
    the two are within ``within`` x of each other; at most ``most`` simulations in all."""
    cap = head.capacity_blocks
    if head.turned_over:
        return []
    out = []
    below = [x for x in runs if x.turned_over and x.capacity_blocks < cap]
    lo = max(below, key=lambda x: x.capacity_blocks) if below else None
    c = cap // 2
    while lo is None and c >= 1 and len(out) < most:
        run = simulate_tier(trace, c, spec, warmup=warmup)
        out.append(run)
        lo = run if run.turned_over else None
        c //= 2
    if lo is None:
        return out
    above = [x for x in runs + out + [head] if not x.turned_over and x.capacity_blocks > lo.capacity_blocks]
    hi = min(above, key=lambda x: x.capacity_blocks)
    while (hi.capacity_blocks > within * lo.capacity_blocks
           and hi.capacity_blocks - lo.capacity_blocks > 1 and len(out) < most):
        mid = int(round(math.sqrt(lo.capacity_blocks * hi.capacity_blocks)))
        if not lo.capacity_blocks < mid < hi.capacity_blocks:
            break
        run = simulate_tier(trace, mid, spec, warmup=warmup)
        out.append(run)
        if run.turned_over:
            lo = run
        else:
            hi = run
    return out


def _steady_answer(head: TierRun, runs: list, r: dict, wscale: float, time_scale: float) -> tuple[str, str]:
    """The planned tier's steady answer under one policy, by the rule of every steady answer
    (:meth:`kvbench.analysis.curves.residence.SteadyCurve.answer_write_blocks_per_s`): its own W where it turned over
    within the trace; elsewhere the policy's W held at the longest residence its simulated capacities show (an
    upper bound: W falls as C grows), its short window's projection kept apart (``projected_write_bytes_per_s``).
    Rewrites ``r``'s write rate, DWPD and residence; returns (``steady_state``, ``basis``)."""
    if head.turned_over:
        return "measured", "steady state measured on the trace (the tier turned over)"
    if head.filled:
        r["projected_write_bytes_per_s"] = r["write_bytes_per_s"]
    shown = [x for x in runs + [head] if x.turned_over]
    if not shown:
        r.update(write_bytes_per_s=None, dwpd=None, residence_s=None)
        return "unknown", ("no simulated capacity turns over under this policy within the trace: no steady state "
                           "(a longer trace shows it)")
    base = max(shown, key=lambda x: x.capacity_blocks / x.write_blocks_per_s)
    wb = base.write_blocks_per_s * wscale
    why = (f"fills at {head.fill_time_s / time_scale:,.0f} s but does not turn over before the trace ends "
           f"(its short window's rate: {r['write_bytes_per_s'] / 1e9:,.4g} GB/s)" if head.filled
           else "never fills within the trace")
    r.update(write_bytes_per_s=wb, dwpd=dwpd(wb, r["capacity_bytes"]), residence_s=residence_s(r["capacity_bytes"], wb))
    return "extrapolated", (f"the tier {why}: write rate held at its value at the longest residence this policy "
                            f"shows ({base.capacity_blocks / base.write_blocks_per_s / time_scale:,.0f} s, at "
                            f"{base.capacity_blocks / head.capacity_blocks:.3g} x the planned capacity): an upper "
                            f"bound where W falls as C grows")


def admission_for_plan(trace, opt, *, primary: dict, prices, sc, block_bytes: int, waf: float,
                       tokens_per_day: float, refs_per_day: float, tokens_per_s: float, distinct: int) -> dict:
    """``build_plan``'s call: the trade-off at the planned capacity (the first of ``--capacities`` when given,
    else the headline target's need), on the plan's SSD class and DRAM."""
    planned = _planned_bytes(opt, primary)
    name = primary.get("ssd_class") or opt.ssd_class or min(prices.ssd, key=lambda k: prices.ssd[k].usd_per_gb)
    return tradeoff(trace, policies=opt.admission, block_bytes=block_bytes, scale=sc, planned_bytes=planned,
                    curve_bytes=opt.capacities or None, waf=waf, ssd_class=prices.ssd[name],
                    store_fill=opt.store_fill, dram_bytes=float(primary.get("l2_bytes") or 0.0), prices=prices,
                    tokens_per_day=tokens_per_day, refs_per_day=refs_per_day, block_tokens=trace.block_tokens,
                    tokens_per_s=tokens_per_s, distinct=distinct, warmup=opt.warmup)


def _planned_bytes(opt, primary: dict) -> float:
    planned = opt.capacities[0] if opt.capacities else primary.get("need_bytes")
    if not planned:
        raise SpecError("--admission/--placement need a planned capacity, and the headline hit-ratio target is "
                        "unreachable", "give --capacities (its first value is the planned capacity) or a lower "
                        "--target-hit")
    return float(planned)


def placement_for_plan(trace, opt, *, primary: dict, sc, block_bytes: int, distinct: int,
                       from_request: int = 0) -> dict:
    """``build_plan``'s call: the L3 store's device WAF on one stream and on ``opt.streams`` under
    ``opt.placement``, at the planned capacity, for each store layout and each admission policy asked
    (admit-all when none), measured from ``from_request`` (the warm-up's end). ``policies`` is the plan's
    layout's."""
    from kvbench.analysis.placement import get_placement, kv_store_waf
    from kvbench.sim.blockstore import STORES

    rule = get_placement(opt.placement)
    l3_blocks = max(1, int(min(sc.blocks(_planned_bytes(opt, primary)), distinct + 1)))
    layouts = {lay: {spec: kv_store_waf(trace, block_bytes=block_bytes, l3_blocks=l3_blocks, layout=lay,
                                        rule=rule.name, streams=opt.streams, op=opt.ssd_op,
                                        erase_block_bytes=opt.erase_block_bytes, gc=opt.gc, admission=spec,
                                        from_request=from_request)
                     for spec in (opt.admission or ("all",))}
               for lay in STORES}
    return {"rule": rule.name, "statement": rule.rule, "streams": opt.streams, "layout": opt.layout,
            "capacity_bytes": l3_blocks * block_bytes * sc.copies, "policies": layouts[opt.layout],
            "layouts": layouts}
