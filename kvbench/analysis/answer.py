"""The answer a buyer reads, computed once (pure): what to buy, how long it lasts, and whether it pays.

Built from a job's plan (steady-state sizing per drive class at the stated deployment and hit target), check
(load vs recompute per tier) and replay (coverage) results, and rendered from this one object by the terminal
(:func:`text_table`), ``kvbench run --json`` (``answer``: :meth:`Answer.to_json`) and the report's first
screen, so the three cannot disagree. Every figure carries where it came from: ``measured`` (run, file),
``modelled`` (which model), ``assumed`` (which price or profile file), or ``suspect`` (it failed a check and
is not used).

The arithmetic, each step one call of :mod:`kvbench.analysis.endurance`:
- the plan sizes the store S (the larger of the hit-target and endurance capacities) written at W (steady
  state); it is bought as whole drives: drives = ceil(S / fill / drive capacity), more when the tier's read
  demand needs more drives' bandwidth;
- per drive: write rate W / drives, host DWPD = 86,400 (W / drives) / drive capacity, rating-equivalent DWPD =
  host DWPD x workload WAF / reference WAF, lifetime = warranty x rated DWPD / rating-equivalent DWPD;
- residence T = S / W: how long KV stays before it is rewritten;
- the bill counts a hit as saved prefill only where loading its prefix beats recomputing it; when no tier's
  load wins, or the tier costs more than recomputing, the answer is to recompute and its cost is recompute's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace

from kvbench.analysis import endurance as E
from kvbench.errors import UsageError

SCHEMA = 1
KINDS = ("measured", "modelled", "assumed", "suspect")
RECOMPUTE_STATEMENT = "recompute; a KV tier on this device does not pay at this model/GPU"


@dataclass(frozen=True)
class Figure:
    """One number (or name) of the answer and where it came from."""

    value: object
    provenance: str          # one of KINDS
    source: str              # the run and file, the model, or the price/profile file

    def __post_init__(self):
        if self.provenance not in KINDS:
            raise ValueError(f"provenance {self.provenance!r} is not one of {KINDS}")  # a programming error

    def to_json(self) -> dict:
        # JSON has no infinity (run files write it null): an unbounded figure (a lifetime or residence with no
        # writes) is null with "unbounded": true, read back as inf, never as a missing figure
        if self.value == math.inf:
            return {"value": None, "unbounded": True, "provenance": self.provenance, "source": self.source}
        return {"value": self.value, "provenance": self.provenance, "source": self.source}

    @classmethod
    def from_json(cls, d) -> "Figure":
        if not isinstance(d, dict):
            return cls(d, "modelled", "")
        v = math.inf if d.get("unbounded") is True and d.get("value") is None else d.get("value")
        return cls(v, str(d.get("provenance") or "modelled"), str(d.get("source") or ""))


@dataclass(frozen=True)
class TierDecision:
    """Load or recompute for one tier at the stated compute profile (``kvbench check``)."""

    tier: str
    decision: str                        # load | mixed | recompute; suspect tiers are not used
    break_even_tokens: int | None        # loading wins from this prefix length up (None: never, or only in ranges)
    bandwidth_bytes_per_s: float | None
    first_byte_s: float | None
    reference_tokens: int | None
    ttft_saved_at_reference_s: float | None  # max(0, recompute - load) at the profile's reference length; None:
    #                                          the check states no margin (unmeasured, never a saved 0)
    provenance: str
    source: str
    first_byte_resolved: bool = True     # False: a fit with no fixed part (its 0 is "not resolved", never "0 ns")

    def to_json(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "tier"}


#: the answer's figures in the order they are printed (each a Figure)
FIGURE_KEYS = (
    "dram_bytes", "tier_dram_bytes", "ssd_bytes", "dram_to_ssd", "hit_ssd_bytes", "endurance_ssd_bytes",
    "drive_class", "drives",
    "drive_capacity_bytes", "store_bytes", "write_bytes_per_s", "drive_write_bytes_per_s", "dwpd_host_per_drive",
    "workload_waf", "reference_waf", "rated_dwpd", "warranty_years", "dwpd_rating_equivalent_per_drive",
    "lifetime_years", "residence_s", "hit_ratio", "ttft_saved_s", "usd_per_day", "usd_per_day_recompute",
    "usd_per_day_saved", "usd_per_day_ssd_tier", "usd_per_day_dram_only", "requests", "requests_issued",
    "replayed_fraction",
)


@dataclass(frozen=True)
class Answer:
    """The job's answer (see the module docstring); ``to_json``/``from_json`` carry ``schema``."""

    decision: str                        # "load" | "recompute"
    statement: str                       # the decision in one line
    binding: str                         # "hit target" | "endurance" | "bandwidth"
    binding_statement: str               # for endurance: "x for hits, y more so the drives last"
    figures: dict                        # key (FIGURE_KEYS) -> Figure
    load_or_recompute: tuple = ()        # TierDecision per tier
    notes: tuple = ()
    schema: int = SCHEMA
    choice: str = ""                     # "dram+ssd" | "dram-only" | "recompute": what the cost line buys
    suspect: tuple = ()                  # Figures that failed a check (e.g. an excluded probe): shown, not used

    def __getitem__(self, key: str) -> Figure:
        return self.figures[key]

    def value(self, key: str):
        f = self.figures.get(key)
        return None if f is None else f.value

    def to_json(self) -> dict:
        out = {"schema": self.schema, "decision": self.decision, "choice": self.choice, "statement": self.statement,
               "binding": self.binding, "binding_statement": self.binding_statement}
        out.update({k: self.figures[k].to_json() for k in FIGURE_KEYS if k in self.figures})
        out["load_or_recompute"] = {t.tier: t.to_json() for t in self.load_or_recompute}
        out["notes"] = list(self.notes)
        out["suspect"] = [f.to_json() for f in self.suspect]
        return out

    @classmethod
    def from_json(cls, d, source: str = "answer") -> "Answer":
        if not isinstance(d, dict) or "decision" not in d:
            raise UsageError(f"{source}: not an answer object", "rerun kvbench run")
        version = d.get("schema", 0)
        if version != SCHEMA:
            raise UsageError(f"{source}: answer schema {version!r}; this kvbench reads schema {SCHEMA}",
                             "rerun kvbench run with this kvbench (or read it with the version that wrote it)")
        try:
            tiers = tuple(TierDecision(tier=k, **v) for k, v in (d.get("load_or_recompute") or {}).items())
            figures = {k: Figure.from_json(d[k]) for k in FIGURE_KEYS if k in d}
            suspect = tuple(Figure.from_json(x) for x in d.get("suspect") or ())
        except (TypeError, AttributeError, ValueError) as e:    # a field missing or unknown, not an object, or an
            # unknown provenance: the file is not this schema's layout
            raise UsageError(f"{source}: not answer schema {SCHEMA}'s layout ({e})",
                             "rerun kvbench run with this kvbench (or read it with the version that wrote it)"
                             ) from None
        return cls(str(d["decision"]), str(d.get("statement") or ""), str(d.get("binding") or ""),
                   str(d.get("binding_statement") or ""), figures, tiers, tuple(d.get("notes") or ()),
                   int(version), str(d.get("choice") or ""), suspect)


# --- building it --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Sources:
    """Where the inputs were read: named in every figure's provenance."""

    plan: str = "plan.json"
    check: str = "check.json"
    replay: str = "replay summary.json"
    simulate: str = "simulate summary.json"
    extra_notes: tuple = field(default_factory=tuple)


def _num(v) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def tier_decisions(check: dict, src: str) -> tuple:
    """Per tier of a check result: its decision, break-even, speed and the TTFT its load saves at the profile's
    reference length; a tier marked ``suspect`` (its measurement failed a check) is kept, marked, and unused."""
    per = (check.get("verdict") or {}).get("tiers") or {}
    out = []
    for name, t in (check.get("tiers") or {}).items():
        if not isinstance(t, dict):
            continue
        bad = t.get("suspect")
        margin = _num(t.get("margin_at_reference_s"))
        out.append(TierDecision(
            tier=name, decision="suspect" if bad else str(per.get(name) or "recompute"),
            break_even_tokens=None if t.get("break_even_tokens") is None else int(t["break_even_tokens"]),
            bandwidth_bytes_per_s=_num(t.get("bandwidth_bytes_per_s")), first_byte_s=_num(t.get("latency_s")),
            reference_tokens=None if t.get("reference_tokens") is None else int(t["reference_tokens"]),
            ttft_saved_at_reference_s=None if margin is None else max(0.0, margin),
            provenance="suspect" if bad else "measured",
            source=f"{src} tiers.{name}: {t.get('source') or 'given'}" + (f"; suspect: {bad}" if bad else ""),
            first_byte_resolved=t.get("latency_resolved") is not False))
    return tuple(out)


def _prices(plan: dict):
    """The plan's price table (its ``prices`` object) as :class:`kvbench.analysis.cost.Prices`."""
    from kvbench.analysis.cost import Prices

    return Prices.from_dict(plan["prices"])


def _ssd_read_bytes_per_s(plan: dict, row: dict) -> float | None:
    """The SSD's read demand at the planned rate: hit tokens per request (at the store's capacity, from the
    plan's loading-wins count) x requests/s x KV bytes per token x the share of hits DRAM does not serve
    (1 - h(DRAM) / h(store), the hit curve read at both capacities)."""
    w = row.get("loading_wins") or {}
    n, rate, bpt = _num(plan.get("requests")), _num(plan.get("rate")), _num(plan.get("bytes_per_token"))
    if not (w.get("hit_tokens") and n and rate and bpt):
        return None
    curve = [(float(r["capacity_bytes"]), float(r["hit_ratio"])) for r in plan.get("capacity_curve") or []
             if _num(r.get("capacity_bytes")) and _num(r.get("hit_ratio")) is not None]
    share = 1.0
    if len(curve) >= 2:
        import numpy as np

        xs, ys = np.log([c for c, _ in curve]), np.array([h for _, h in curve])
        h_dram = float(np.interp(math.log(max(plan_l2(plan), 1.0)), xs, ys))
        h_ssd = float(row.get("hit_ratio") or 0.0)
        share = min(1.0, max(0.0, 1.0 - h_dram / h_ssd)) if h_ssd > 0 else 1.0
    return float(w["hit_tokens"]) / n * rate * bpt * share


def head_target(plan: dict) -> str:
    """The plan's headline hit-ratio target (its answer's, else the first asked): the key of its per-target rows."""
    return (plan.get("answer") or {}).get("target") or f"{plan['targets'][0]:g}"


def plan_l2(plan: dict) -> float:
    return float(((plan.get("per_target") or {}).get(head_target(plan)) or {}).get("l2_bytes") or 0.0)


def _saved(d: TierDecision) -> float:
    """A tier's TTFT saved, for ranking tiers: an unstated one ranks below every stated one."""
    return -math.inf if d.ttft_saved_at_reference_s is None else d.ttft_saved_at_reference_s


def _first_byte_text(latency_s, said: str | None = None) -> str | None:
    """A load tier's first byte in words: the words it came with (e.g. not resolved by the fit), else its latency;
    None when neither is stated (a missing latency is no 0 ns)."""
    lat = _num(latency_s)
    if said:
        return str(said)
    from kvbench.units import format_duration

    return None if lat is None else format_duration(lat)


def _speed_text(bandwidth_bytes_per_s, first_byte: str | None) -> str | None:
    """``6 GB/s, first byte 100 us``; a first byte not stated is said "unmeasured"; None without a bandwidth."""
    from kvbench.units import format_rate

    bw = _num(bandwidth_bytes_per_s)
    if bw is None:                  # a stated 0 B/s is said (a measured zero), only a missing one is left out
        return None
    return f"{format_rate(bw)}, first byte {first_byte or 'unmeasured'}"


def _cost(plan: dict, row: dict, cls, prices, ssd_bytes: float, life) -> tuple[float, float, str]:
    """(the tier's $/day with whole drives bought, recomputing's $/day, which hits the bill counts)."""
    from kvbench.analysis.cost import ssd_usd_per_day

    usd = row["usd_per_day"]
    gpu = usd["gpu"]
    counted = "every hit counted as saved prefill (no load tier measured)"
    if usd.get("total_loading_wins") is not None:
        gpu = usd["total_loading_wins"] - usd["total"] + usd["gpu"]
        w = row.get("loading_wins") or {}
        lt = plan.get("load_tier") or {}
        speed = _speed_text(lt.get("bandwidth_bytes_per_s"), _first_byte_text(lt.get("latency_s"), lt.get("first_byte")))
        frac = _num(w.get("fraction"))
        share = f"{100 * frac:.0f}% of hit tokens" if frac is not None else "a share of hit tokens the plan does not state"
        counted = (f"only hits whose load beats recompute: {share} at {lt.get('name') or 'the load tier'}'s speed"
                   + (f" ({speed})" if speed else ""))
    tier_day = usd["dram"] + ssd_usd_per_day(ssd_bytes, cls, life) + gpu
    recompute = plan["plans"][head_target(plan)][0]
    if recompute.get("name") != "recompute":
        raise UsageError("plan.json: its first plan is not 'recompute'", "rerun kvbench plan with this kvbench")
    return tier_day, float(recompute["usd_per_day"]["total"]), counted


@dataclass(frozen=True)
class _Drives:
    """How the store is bought: whole drives, and what sized them."""

    drives: int
    drive_capacity_bytes: float
    binding: str
    why: str
    hit_ssd_bytes: float
    fill: float


def _drives(plan: dict, row: dict, cls) -> _Drives:
    """Whole drives for the class's store, the binding constraint and its sentence. Bandwidth binds when the
    SSD's read demand over what one drive delivers (the L3 probe's bandwidth at the replay's I/O size and depth:
    the plan's load tier, which a suspect probe never becomes; not a request's load time under the replay's
    queue) needs more drives than the capacity does."""
    from kvbench.units import format_bytes, format_rate

    fill = row["store_bytes"] / row["capacity_bytes"]
    cap = cls.drive_capacity_bytes or float(row["capacity_bytes"])
    drives = E.drives_for(row["capacity_bytes"], cap)
    hit = float(row["hit_capacity_bytes"]) / fill
    probe = plan.get("load_tier") or {}
    per_drive = _num(probe.get("bandwidth_bytes_per_s")) if probe.get("name") == "l3" else None
    read = _ssd_read_bytes_per_s(plan, row)
    by_bw = E.drives_for(read, per_drive) if (read and per_drive) else None
    tb = lambda n: format_bytes(n, binary=False)  # noqa: E731 - drives are sold in decimal units
    if by_bw and by_bw > drives:
        return _Drives(by_bw, cap, "bandwidth", f"the SSD reads {format_rate(read)} of hits at {format_rate(per_drive)}"
                       f" per drive (the L3 probe): {by_bw} drives, where capacity alone needs {drives}", hit, fill)
    if row["bound"] == "endurance":
        return _Drives(drives, cap, "endurance", f"{tb(hit)} for hits, {tb(row['capacity_bytes'] - hit)} more so the "
                       f"drives last ({cls.dwpd:g}-DWPD rating)", hit, fill)
    return _Drives(drives, cap, "hit target", f"the hit target sizes the SSD ({tb(hit)}); the {cls.dwpd:g}-DWPD "
                   "rating holds there", hit, fill)


def _per_drive(W: float | None, store: float, d: _Drives, cls, waf: float, ref: float) -> dict:
    """Write rate, host and rating-equivalent DWPD and lifetime per drive; the store's residence. A write rate
    the plan does not state (None) leaves each missing; a stated 0 is 0 writes, 0 DWPD, and a lifetime and
    residence no write bounds (inf: "no writes: unbounded")."""
    if W is None:
        return dict.fromkeys(("dw", "host", "eq", "life", "resid"))
    dw = W / d.drives
    host = E.dwpd(dw, d.drive_capacity_bytes)
    return {"dw": dw, "host": host, "eq": E.rating_equivalent_dwpd(host, waf, ref),
            "life": E.lifetime_years(dw, d.drive_capacity_bytes, waf=waf, rated_dwpd=cls.dwpd,
                                     warranty_years=cls.warranty_years, reference_waf=ref),
            "resid": E.residence_s(store, W) if W else math.inf}


def build_answer(plan: dict, check: dict | None = None, *, trace_requests: int | None = None,
                 requests_issued: int | None = None, sources: Sources = Sources(), excluded=()) -> Answer:
    """The answer from a plan (``kvbench plan --json``), a check (``kvbench check --json``) and the replay's
    coverage; the plan's headline target and its chosen drive class. ``excluded``: probes that failed their
    check against the replay (``probes.json`` entries with ``suspect`` reasons), carried as suspect figures."""
    answer = _build(plan, check, trace_requests, requests_issued, sources)
    bad = tuple(Figure(_num(x.get("bandwidth_bytes_per_s")), "suspect",
                       f"{x.get('name')} probe bandwidth: {'; '.join(map(str, x.get('suspect') or ['failed a check']))}"
                       " (probes.json; excluded)") for x in excluded or ())
    return replace(answer, suspect=answer.suspect + bad) if bad else answer


def _window_note(plan: dict) -> tuple:
    """The plan's sentence on the window its steady figures come from (``stationarity.note``: a warm-up left out,
    a trace that is not stationary and what was done), the answer's first note; none for a stationary trace
    measured whole."""
    note = (plan.get("stationarity") or {}).get("note")
    return (str(note),) if note else ()


def _build(plan, check, trace_requests, requests_issued, sources: Sources) -> Answer:
    prices = _prices(plan)
    head = head_target(plan)
    t = (plan.get("per_target") or {}).get(head) or {}
    decisions = tier_decisions(check or {}, sources.check)
    cov = _coverage(trace_requests, requests_issued, sources)
    window = _window_note(plan)
    if not t.get("need_bytes"):
        inf_hit = _num(plan.get("infinite_hit_ratio"))
        return Answer("recompute", f"{RECOMPUTE_STATEMENT}: the hit-ratio target {head} is unreachable on this "
                      "trace" + (f" (infinite-cache hit ratio {inf_hit:.3f})" if inf_hit is not None else ""),
                      "hit target",
                      "unreachable", cov, decisions, window, choice="recompute")
    row = next(r for r in plan["drives"] if r["class"] == t["ssd_class"])
    cls = prices.ssd[row["class"]]
    d = _drives(plan, row, cls)
    W = _num(row.get("write_bytes_per_s"))
    per = _per_drive(W, float(row["store_bytes"]), d, cls, float(row["workload_waf"]), float(row["reference_waf"]))
    tier_day, rec_day, counted = _cost(plan, row, cls, prices, d.drives * d.drive_capacity_bytes, per["life"])
    usable = [x for x in decisions if x.provenance != "suspect"]
    profile = (check or {}).get("profile") or {}
    at = f"{profile.get('name') or plan.get('compute', {}).get('profile') or 'the compute profile'}"
    choice, statement, usd, dram_day = _decide(plan, row, usable, tier_day, rec_day, counted, at)
    counted = {"recompute": "recompute", "dram-only": "every hit, loaded from DRAM (its load wins from the first "
                                                      "block)"}.get(choice, counted)
    best = max(usable, key=_saved, default=None)
    # the most a usable tier's load saves; a tier whose saving the check does not state makes the most unknown
    unstated = [x.tier for x in usable if x.ttft_saved_at_reference_s is None]
    ttft = 0.0 if (choice == "recompute" or best is None) else None if unstated else best.ttft_saved_at_reference_s
    ttft_src = ("no tier checked" if best is None else
                f"{', '.join(unstated)}: no margin in {sources.check} (unmeasured)" if ttft is None else
                f"{best.tier}" + (f" at {best.reference_tokens:,} tokens" if best.reference_tokens else "")
                + f": recompute ({at}) - load ({sources.check})")
    price_src = f"prices {prices.name} ({prices.path or 'plan.json prices'}, {prices.status})"
    a = "assumed"
    fig = {**_sizing_figures(plan, t, row, cls, d, W, per, choice, sources.plan, price_src),
           "ttft_saved_s": Figure(ttft, "modelled", ttft_src),
           "usd_per_day": Figure(usd, a, f"{counted}; {price_src}"),
           "usd_per_day_ssd_tier": Figure(tier_day, a, f"DRAM + SSD tier, counting {counted}; {price_src}"),
           "usd_per_day_dram_only": Figure(dram_day, a, f"all KV in DRAM (the plan's dram-only), only when L2's load "
                                                        f"wins from the first block; {price_src}"),
           "usd_per_day_recompute": Figure(rec_day, a, f"GPU time of every prompt token at {at}; {price_src}"),
           "usd_per_day_saved": Figure(rec_day - usd, a, "recompute's $/day - the answer's (0 when recompute wins)"),
           **cov}
    notes = window + tuple(sources.extra_notes) + tuple(f"{x.tier}: suspect, not used ({x.source})"
                                                        for x in decisions if x.provenance == "suspect")
    return Answer("recompute" if choice == "recompute" else "load", statement, d.binding, d.why, fig, decisions,
                  notes, choice=choice)


def _sizing_figures(plan, t, row, cls, d: _Drives, W, per: dict, choice: str, P: str, price_src: str) -> dict:
    """The answer's DRAM, SSD, drive and endurance figures with their provenance."""
    from kvbench.units import format_bytes

    m, a = "modelled", "assumed"
    ssd = d.drives * d.drive_capacity_bytes
    l2 = float(t["l2_bytes"])
    steady = (m, f"steady-state LRU write-through model on the trace ({row.get('steady_state')}: {row.get('basis')}); "
                 f"{P}")
    dram = (Figure(float(_dram_only(plan)["dram_bytes"]), m, f"all KV in DRAM: the hit target's need; {P}")
            if choice == "dram-only" else Figure(l2, m, f"L2 at the hit curve's knee (or --dram), capped at the need; "
                                                        f"{P}"))
    return {
        "dram_bytes": dram,
        "tier_dram_bytes": Figure(l2, m, f"DRAM in front of the SSD tier (the curve's knee); {P}"),
        "ssd_bytes": Figure(ssd, m, f"{d.drives} whole drives of {format_bytes(d.drive_capacity_bytes, binary=False)}"),
        "dram_to_ssd": Figure(ssd / l2 if l2 else None, m, "SSD bytes bought per DRAM byte in front of it (1:N)"),
        "hit_ssd_bytes": Figure(d.hit_ssd_bytes, m, f"capacity for {t['need']} / store fill {d.fill:g}; {P}"),
        "endurance_ssd_bytes": Figure(max(0.0, float(row["capacity_bytes"]) - d.hit_ssd_bytes), m,
                                      f"capacity whose residence keeps the rating ({row.get('reference_note')}); {P}"),
        "drive_class": Figure(row["class"], a, f"{cls.label or row['class']}; {price_src}"),
        "drives": Figure(d.drives, m, "ceil(SSD / drive capacity)" + (", raised for bandwidth"
                                                                      if d.binding == "bandwidth" else "")),
        "drive_capacity_bytes": Figure(d.drive_capacity_bytes, a, price_src),
        "store_bytes": Figure(float(row["store_bytes"]), m, f"the KV store the plan sizes ({d.binding} binds); {P}"),
        "write_bytes_per_s": Figure(W, *steady),
        "drive_write_bytes_per_s": Figure(per["dw"], m, "write rate / drives"),
        "dwpd_host_per_drive": Figure(per["host"], m, "86,400 x drive write rate / drive capacity"),
        "workload_waf": Figure(float(row["workload_waf"]), m,
                               str(row.get("workload_waf_source") or plan.get("waf_source") or "")),
        "reference_waf": Figure(float(row["reference_waf"]), a, f"{row.get('reference_note')}; {price_src}"),
        "rated_dwpd": Figure(cls.dwpd, a, price_src),
        "warranty_years": Figure(cls.warranty_years, a, price_src),
        "dwpd_rating_equivalent_per_drive": Figure(per["eq"], m, "host DWPD x workload WAF / reference WAF"),
        "lifetime_years": Figure(per["life"], m, "warranty x rated DWPD / rating-equivalent DWPD"),
        "residence_s": Figure(per["resid"], *steady),
        "hit_ratio": Figure(_num(row.get("hit_ratio")), m, f"exact LRU hit-ratio curve of the trace at the store; {P}"),
    }


def _decide(plan: dict, row: dict, usable: list, tier_day: float, rec_day: float, counted: str, at: str):
    """(choice, statement, $/day, DRAM-only $/day or None): the cheapest of recomputing, a DRAM + SSD tier that
    counts only hits whose load wins, and all KV in DRAM when L2's load wins from the first block (every hit
    prefix); recompute unless some tier's load wins and the tier costs less than recomputing."""
    bt = int(plan.get("block_tokens") or 0)
    l2 = next((d for d in usable if d.tier == "l2"), None)
    only = _dram_only(plan)
    dram_day = (float(only["usd_per_day"]["total"]) if only and l2 and l2.decision == "load" and bt
                and l2.break_even_tokens is not None and l2.break_even_tokens <= bt else None)
    frac = (row.get("loading_wins") or {}).get("fraction")
    l3 = next((d for d in usable if d.tier == "l3"), None)
    options = {}
    # an SSD tier pays only if some load wins, some hit tokens win at the plan's L3 speed, and the check does not
    # find that loading from L3 never wins (the cost line and the tier's verdict must agree)
    if (any(d.decision in ("load", "mixed") for d in usable) and not (frac is not None and frac <= 0)
            and not (l3 is not None and l3.decision == "recompute")):
        options["dram+ssd"] = tier_day
    if dram_day is not None:
        options["dram-only"] = dram_day
    best = min(options, key=options.get) if options else None
    if best is None:
        wins = [f"from {d.tier} for prefixes >= {d.break_even_tokens:,} tokens" if d.break_even_tokens
                else f"from {d.tier} in some ranges" for d in usable if d.decision in ("load", "mixed")]
        why = (f"loading wins only {'; '.join(wins)} at {at}, too little for a tier to pay" if wins
               else f"no tier's load beats recompute at {at}")
        return "recompute", f"{RECOMPUTE_STATEMENT} ({why}); cost ${rec_day:,.2f}/day", rec_day, dram_day
    if options[best] >= rec_day:
        return "recompute", (f"{RECOMPUTE_STATEMENT}: counting {counted}, the tier would cost "
                             f"${tier_day:,.2f}/day against ${rec_day:,.2f}/day recomputing"), rec_day, dram_day
    saving = f"saving ${rec_day - options[best]:,.2f}/day"
    if best == "dram-only":
        return best, (f"load from DRAM: all KV in {_bytes(only['dram_bytes'])} of DRAM, ${dram_day:,.2f}/day against "
                      f"${rec_day:,.2f}/day recomputing, {saving}; an SSD tier (counting {counted}) would cost "
                      f"${tier_day:,.2f}/day"), dram_day, dram_day
    return best, (f"load from a KV tier: ${tier_day:,.2f}/day against ${rec_day:,.2f}/day recomputing, {saving} "
                  f"({counted})"), tier_day, dram_day


def _dram_only(plan: dict) -> dict | None:
    return next((p for p in plan["plans"][head_target(plan)] if p.get("name") == "dram-only"), None)


def _bytes(n) -> str:
    from kvbench.units import format_bytes

    return format_bytes(float(n))


def _coverage(trace_requests, requests_issued, sources: Sources) -> dict:
    frac = (requests_issued / trace_requests) if (trace_requests and requests_issued is not None) else None
    return {"requests": Figure(trace_requests, "measured", f"requests in the trace ({sources.simulate})"),
            "requests_issued": Figure(requests_issued, "measured", f"requests whose I/O the replay issued "
                                      f"({sources.replay})"),
            "replayed_fraction": Figure(frac, "measured", "requests issued / requests in the trace")}


# --- rendering: every view formats the same figures through one function --------------------------------------

def fmt(key: str, v) -> str:
    """One figure as every view prints it (terminal, report; the JSON holds the raw value)."""
    from kvbench.units import MISSING, UNBOUNDED_LIFETIME, format_bytes, format_duration, format_rate, format_years

    if v is None:
        return MISSING
    if isinstance(v, str):
        return v
    if key.startswith("usd"):
        return f"${v:,.2f}/day"
    if key == "dram_to_ssd":
        return f"1:{v:.3g}"
    if key.endswith("_bytes_per_s"):
        return format_rate(v)
    if key.endswith("_bytes"):      # SSD sizes in decimal units, as drives are sold; DRAM in binary
        return format_bytes(v, binary=not ("ssd" in key or "drive" in key))
    if key.endswith("_years"):
        return format_years(v)
    if v == math.inf:
        return UNBOUNDED_LIFETIME          # a residence no write ends
    if key.endswith("_s"):
        return format_duration(v) if v else "0 s"
    if key in ("drives", "requests", "requests_issued"):
        return f"{int(v):,}"
    if key == "replayed_fraction":
        return f"{100 * v:.0f}%"
    return f"{v:.3g}"


def _tier_text(d: TierDecision) -> str:
    from kvbench.analysis.recompute import NOT_RESOLVED
    from kvbench.units import format_duration

    speed = _speed_text(d.bandwidth_bytes_per_s, _first_byte_text(d.first_byte_s) if d.first_byte_resolved
                        else NOT_RESOLVED) or "speed n/a"
    if d.decision == "suspect":
        return f"suspect, not used ({speed})"
    what = {"load": (f"LOAD from {d.break_even_tokens:,} tokens" if (d.break_even_tokens or 0) > 1 else
                     "LOAD from the first token"),
            "mixed": "MIXED: loading wins only in some ranges", "recompute": "RECOMPUTE: loading never wins"}
    saved = (f"; saves {format_duration(d.ttft_saved_at_reference_s)} at {d.reference_tokens:,} tokens"
             if (d.ttft_saved_at_reference_s or 0) > 0 and d.reference_tokens else "")
    return f"{what.get(d.decision, d.decision)} ({speed}){saved}"


def rows(a: Answer) -> list[tuple[str, str, str]]:
    """(label, text, provenance) per line of the answer box: what the terminal and the report print."""
    from kvbench.units import NEVER_REWRITTEN

    f, v = a.figures, a.value
    if "ssd_bytes" not in f:
        return [("answer", a.statement, "")] + _coverage_rows(a)
    kind = {k: f[k].provenance for k in f}
    built = "" if a.choice == "dram+ssd" else " (if built)"
    out = [("answer", a.statement, kind["usd_per_day"]),
           ("DRAM", fmt("dram_bytes", v("dram_bytes")), kind["dram_bytes"]),
           ("SSD" + built, f"{fmt('drives', v('drives'))} x {fmt('drive_capacity_bytes', v('drive_capacity_bytes'))} "
                   f"{v('drive_class')} = {fmt('ssd_bytes', v('ssd_bytes'))} (DRAM:SSD "
                   f"{fmt('dram_to_ssd', v('dram_to_ssd'))}"
                   + (f" with {fmt('tier_dram_bytes', v('tier_dram_bytes'))} of DRAM in front)" if built else ")"),
            kind["drives"]),
           ("sized by" + built, f"{a.binding}: {a.binding_statement}", kind["store_bytes"]),
           ("writes" + built, f"{fmt('write_bytes_per_s', v('write_bytes_per_s'))} to the store, "
                      f"{fmt('drive_write_bytes_per_s', v('drive_write_bytes_per_s'))} per drive",
            kind["write_bytes_per_s"]),
           ("DWPD per drive" + built, f"{fmt('dwpd_host_per_drive', v('dwpd_host_per_drive'))} host, "
                              f"{fmt('dwpd_rating_equivalent_per_drive', v('dwpd_rating_equivalent_per_drive'))} "
                              f"rating-equivalent (WAF {fmt('workload_waf', v('workload_waf'))} vs the rating's "
                              f"{fmt('reference_waf', v('reference_waf'))}; rated "
                              f"{fmt('rated_dwpd', v('rated_dwpd'))})", kind["dwpd_host_per_drive"]),
           ("lifetime" + built, f"{fmt('lifetime_years', v('lifetime_years'))} (warranty "
                        f"{fmt('warranty_years', v('warranty_years'))})", kind["lifetime_years"]),
           ("KV kept" + built, (NEVER_REWRITTEN if v("residence_s") == math.inf else
                                f"{fmt('residence_s', v('residence_s'))} before it is rewritten")
            + f" (hit ratio {fmt('hit_ratio', v('hit_ratio'))})", kind["residence_s"])]
    out += [(f"load from {d.tier}", _tier_text(d), d.provenance) for d in a.load_or_recompute]
    best = max((d for d in a.load_or_recompute if d.provenance != "suspect"),
               key=_saved, default=None)
    where = (f" at {best.reference_tokens:,} tokens, loading from {best.tier}"
             if v("ttft_saved_s") and best is not None and best.reference_tokens else "")
    out += [("TTFT saved", fmt("ttft_saved_s", v("ttft_saved_s")) + where, kind["ttft_saved_s"]),
            ("cost", f"{fmt('usd_per_day', v('usd_per_day'))} against "
                     f"{fmt('usd_per_day_recompute', v('usd_per_day_recompute'))} recomputing: saves "
                     f"{fmt('usd_per_day_saved', v('usd_per_day_saved'))}", kind["usd_per_day"])]
    return out + _coverage_rows(a) + [("suspect, not used", f"{f.source}: {fmt('bandwidth_bytes_per_s', f.value)}",
                                       "suspect") for f in a.suspect]


def _coverage_rows(a: Answer) -> list[tuple[str, str, str]]:
    v = a.value
    if v("requests") is None:
        return []
    return [("replayed", f"{fmt('requests_issued', v('requests_issued'))} of {fmt('requests', v('requests'))} "
                         f"requests ({fmt('replayed_fraction', v('replayed_fraction'))})", "measured")]


def text_table(a: Answer) -> str:
    """The answer as a short terminal table: label, figures, provenance."""
    from kvbench.report.text import table

    return "\n".join(table(None, [[label, text + (f"  [{kind}]" if kind else "")] for label, text, kind in rows(a)]
                           + [["note", n] for n in a.notes], "<<"))
