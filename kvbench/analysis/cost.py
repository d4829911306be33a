"""The bill: prices (a dated preset, overridable) and the cost per day of each plan against recomputing.

Amortisation: DRAM over its service life; an SSD over the shorter of its warranty and the lifetime its rating
gives under the plan's writes (:mod:`kvbench.analysis.endurance`). Recompute: GPU-hours of prefill for every
prompt token not served from the cache, at a compute profile's rate (``kvbench.compute.profile``) or a plain
tokens/s. Every number is per day at the planned request rate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from kvbench.errors import SpecError
from kvbench.spec.presets import load_preset

DEFAULT_PRICES = "2025-h2"
GB = 1e9                       # prices are per decimal GB, as drives and DIMMs are sold


@dataclass(frozen=True)
class SsdClass:
    name: str
    usd_per_gb: float
    dwpd: float
    warranty_years: float = 5.0
    reference_waf: float | None = None
    label: str = ""
    source: str = ""


@dataclass(frozen=True)
class Prices:
    """One price preset: DRAM, SSD classes by DWPD, GPU-hour; dated, with sources and a status."""

    name: str
    date: str
    status: str                    # "assumption" unless the file says otherwise
    dram_usd_per_gb: float
    dram_service_years: float
    ssd: dict[str, SsdClass]
    gpu_usd_per_hour: float
    path: str = ""
    sources: dict = field(default_factory=dict)
    overrides: tuple = ()

    def to_dict(self) -> dict:
        return {"name": self.name, "date": self.date, "status": self.status, "path": self.path,
                "dram_usd_per_gb": self.dram_usd_per_gb, "dram_service_years": self.dram_service_years,
                "gpu_usd_per_hour": self.gpu_usd_per_hour,
                "ssd": {k: {"usd_per_gb": c.usd_per_gb, "dwpd": c.dwpd, "warranty_years": c.warranty_years,
                            "label": c.label} for k, c in self.ssd.items()},
                "sources": self.sources, "overrides": list(self.overrides)}


def _positive(d: dict, key: str, where: str) -> float:
    v = d.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (v > 0 and math.isfinite(v)):
        raise SpecError(f"{where}: field {key!r} must be a number > 0 (got {v!r})", f"set {key} = <number>")
    return float(v)


def prices_from_dict(d: dict, *, where: str = "<prices>") -> Prices:
    """Validate a price table; errors name the file and the field."""
    for table in ("dram", "ssd", "gpu"):
        if not isinstance(d.get(table), dict):
            raise SpecError(f"{where}: table [{table}] is missing", "copy workloads/prices/2025-h2.toml and edit it")
    dram, gpu = d["dram"], d["gpu"]
    classes = {}
    for name, c in d["ssd"].items():
        if not isinstance(c, dict):
            raise SpecError(f"{where}: [ssd.{name}] must be a table", "see workloads/prices/2025-h2.toml")
        w = f"{where}: [ssd.{name}]"
        ref = c.get("reference_waf")
        classes[name] = SsdClass(name, _positive(c, "usd_per_gb", w), _positive(c, "dwpd", w),
                                 float(c.get("warranty_years", 5.0)),
                                 _positive(c, "reference_waf", w) if ref is not None else None,
                                 str(c.get("label", "")), str(c.get("source", "")))
    if not classes:
        raise SpecError(f"{where}: no SSD class under [ssd]", "add e.g. [ssd.tlc-1dwpd] usd_per_gb = ..., dwpd = ...")
    sources = {"dram": dram.get("source", ""), "gpu": gpu.get("source", ""),
               **{f"ssd.{k}": c.source for k, c in classes.items()}}
    return Prices(name=str(d.get("name", "")), date=str(d.get("date", "")), status=str(d.get("status", "assumption")),
                  dram_usd_per_gb=_positive(dram, "usd_per_gb", f"{where}: [dram]"),
                  dram_service_years=float(dram.get("service_years", 5.0)), ssd=classes,
                  gpu_usd_per_hour=_positive(gpu, "usd_per_hour", f"{where}: [gpu]"), path=where, sources=sources)


def load_prices(name_or_path: str = DEFAULT_PRICES, overrides: list[str] | tuple[str, ...] = ()) -> Prices:
    """Load a price preset (``workloads/prices/<name>.toml`` or a path) and apply ``KEY=VALUE`` overrides:
    ``dram=6``, ``gpu=2.5``, ``ssd.qlc=0.05`` (USD per GB or per GPU-hour), ``ssd.qlc.dwpd=0.3``."""
    data, path = load_preset("prices", name_or_path)
    p = prices_from_dict(data, where=str(path))
    return apply_overrides(p, overrides)


def apply_overrides(p: Prices, overrides) -> Prices:
    applied = []
    for item in overrides or ():
        key, sep, value = str(item).partition("=")
        try:
            v = float(value)
        except ValueError:
            v = float("nan")
        if not sep or not (v > 0 and math.isfinite(v)):
            raise SpecError(f"--price {item!r}: expected KEY=NUMBER > 0", "e.g. --price dram=6 or --price ssd.qlc=0.05")
        key = key.strip()
        if key == "dram":
            p = replace(p, dram_usd_per_gb=v)
        elif key == "gpu":
            p = replace(p, gpu_usd_per_hour=v)
        elif key.startswith("ssd."):
            name, _, attr = key[4:].partition(".")
            attr = attr or "usd_per_gb"
            if name not in p.ssd or attr not in ("usd_per_gb", "dwpd", "warranty_years", "reference_waf"):
                raise SpecError(f"--price {item!r}: unknown SSD class or field",
                                f"classes: {', '.join(p.ssd)}; fields: usd_per_gb, dwpd, warranty_years")
            p = replace(p, ssd={**p.ssd, name: replace(p.ssd[name], **{attr: v})})
        else:
            raise SpecError(f"--price {item!r}: unknown key {key!r}", "use dram, gpu or ssd.<class>[.<field>]")
        applied.append(f"{key}={v:g}")
    return replace(p, overrides=tuple(applied)) if applied else p


# --- per-day costs -----------------------------------------------------------------------------------
def dram_usd_per_day(nbytes: float, prices: Prices) -> float:
    return nbytes / GB * prices.dram_usd_per_gb / (prices.dram_service_years * 365.0)


def ssd_usd_per_day(nbytes: float, cls: SsdClass, lifetime_years: float | None) -> float:
    """Purchase price spread over the warranty, or over the rated lifetime when the writes wear it out sooner."""
    years = cls.warranty_years if lifetime_years is None else min(cls.warranty_years, lifetime_years)
    if years <= 0:
        return math.inf
    return nbytes / GB * cls.usd_per_gb / (years * 365.0)


def gpu_usd_per_day(tokens_per_day: float, tokens_per_s: float, prices: Prices) -> float:
    """GPU cost of prefilling ``tokens_per_day`` at ``tokens_per_s`` per GPU."""
    if not tokens_per_s > 0:
        raise SpecError(f"recompute rate {tokens_per_s} tokens/s must be > 0", "give a compute profile or a rate")
    return tokens_per_day / tokens_per_s / 3600.0 * prices.gpu_usd_per_hour


def usd_per_recomputed_token(tokens_per_s: float, prices: Prices) -> float:
    return prices.gpu_usd_per_hour / 3600.0 / tokens_per_s


def price_path(name_or_path: str) -> Path:
    from kvbench.spec.presets import preset_path

    return preset_path("prices", name_or_path)


# --- plans: capacity, endurance and the bill for a trace ------------------------------------------------
RATE_MODELS = {
    "compress": "the trace's requests arrive faster (time scaled by rate/trace rate): retention covers more "
                "requests, capacity per target follows the curve at the scaled retention",
    "replicate": "rate/trace-rate independent copies of the trace's users: capacity and writes scale with the "
                 "copies, retention and hit ratios do not change",
}
LAYOUT_NAMES = ("slot", "log")
LAYOUT_MODELS = {"slot": "synthetic: block-sized slots overwritten in uniform random order (worst case)",
                 "log": "synthetic: segments appended in order, the oldest reclaimed"}
DEFAULT_SWEEP = (300.0, 3600.0, 6 * 3600.0, 86400.0, None)


@dataclass(frozen=True)
class PlanOptions:
    """What to plan for, and the stated assumptions the numbers rest on."""

    targets: tuple = (0.9, 0.95, 0.99)
    relative: bool = True                 # targets as fractions of the infinite-cache hit ratio
    retention_s: float | None = None
    rate: float | None = None             # requests/s to plan for (default: the trace's own rate)
    rate_model: str = "compress"
    warmup: float = 0.0                   # fraction of requests excluded (cold start)
    layout: str = "slot"                  # L3 block-store layout for the device WAF model
    ssd_op: float = 0.07                  # drive over-provisioning for the FTL model
    erase_block_bytes: int = 256 << 20    # erase unit (superblock) for the FTL model
    gc: str = "greedy"
    store_fill: float = 1.0               # fraction of the SSD the store may occupy
    dram_bytes: int | None = None         # fixed L2 size (default: the knee, capped at the target's size)
    ssd_class: str | None = None          # default: the cheapest class per day
    sweep: tuple = DEFAULT_SWEEP          # retention values (s; None = unlimited) for the sweep
    waf: float | None = None              # a measured device WAF (skips the FTL model)
    waf_source: str = "given (--waf)"
    write_policies: bool = True           # simulate the tiers under write-through and write-back

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
        if self.retention_s is not None and not self.retention_s > 0:
            raise SpecError(f"retention {self.retention_s} s must be > 0", "give e.g. --retention 1h")
        if not (0 < self.store_fill <= 1):
            raise SpecError(f"store fill {self.store_fill} is outside (0, 1]", "give e.g. --store-fill 0.9")
        return self


def _key(t: float) -> str:
    return f"{t:g}"


def _exact_profile(trace, ttl_s, warmup):
    try:
        from kvbench.analysis.curves import exact_profile
    except ImportError:  # pragma: no cover - only before the curves module is installed
        from kvbench.errors import DependencyError

        raise DependencyError("kvbench.analysis.curves (exact hit-ratio curves) is not installed",
                              "update kvbench; plan needs the exact LRU curve") from None

    return exact_profile(trace, ttl_s=ttl_s, warmup=warmup)


def simulate_write_policies(trace, *, block_bytes: int, l2_blocks: int, l3_blocks: int, ttl_s: float | None,
                            layout: str, per_day: float, ftl_op: float, erase_block_bytes: int, gc: str,
                            policies=("through", "back"), model_ftl: bool = True) -> dict:
    """L3 writes per day under each write policy, from the tier simulation (:mod:`kvbench.sim.tiers`), and the
    device WAF of each policy's own L3 write/trim stream (slot numbers from the store's allocator) through the
    FTL model. L2 DRAM and L3 of the given sizes, LRU, the retention on both."""
    from kvbench.analysis import ftl
    from kvbench.sim.tiers import EV_TRIM, EV_WRITE, Hierarchy, HierarchySpec, TierSpec

    out = {}
    for wp in policies:
        probe = HierarchySpec(tiers=(TierSpec("l3", 1),), block_bytes=block_bytes)
        slot = probe.slot_bytes
        tiers = ((TierSpec("l2", max(1, l2_blocks) * slot, ttl_s=ttl_s),) if l2_blocks > 0 else ()) + \
            (TierSpec("l3", max(1, l3_blocks) * slot, ttl_s=ttl_s, layout=layout, trim=True),)
        h = Hierarchy(HierarchySpec(tiers=tiers, block_bytes=block_bytes, write_policy=wp))
        _, ev = h.run(trace.timestamp_s, trace.offsets, trace.keys)
        c = h.counters()["l3"]
        l3 = ev[(ev["tier"] == 2) & ((ev["op"] == EV_WRITE) | (ev["op"] == EV_TRIM))]
        writes_day = c.writes * slot * per_day
        row = {"l3_write_bytes_per_day": writes_day, "l3_write_blocks": int(c.writes),
               "produced_blocks": int(h.produced), "dwpd": writes_day / (max(1, l3_blocks) * slot)}
        if model_ftl and np.count_nonzero(l3["op"] == EV_WRITE):
            top = int((l3["slot"] + l3["nslots"]).max()) * slot
            erase = min(erase_block_bytes, max(1 << 20, top // 64))   # a small store: >= 64 erase units
            page = 16 << 10
            while -(-top // page) * (1.0 + ftl_op) > (1 << 22) and page < min(slot, erase):
                page *= 2
            block_pages = max(2, erase // page)
            blocks = max(64, -(-(-(-top // page)) // block_pages))
            cfg = ftl.FtlConfig(user_bytes=blocks * block_pages * page, page_size=page, op=ftl_op,
                                block_pages=block_pages, gc=gc)
            ops = np.where(l3["op"] == EV_WRITE, ftl.OP_WRITE, ftl.OP_TRIM).astype(np.uint8)
            ext = ftl.bytes_to_pages(ops, l3["slot"].astype(np.int64) * slot,
                                     l3["nslots"].astype(np.int64) * slot, page)
            r = ftl.simulate(cfg, extents=ext, writes=3.0, warmup=0.5)
            row["waf"] = r.waf
            row["waf_source"] = (f"FTL model fed this policy's L3 writes and trims ({layout} store), op {ftl_op:g}, "
                                 f"{block_pages * page >> 20} MiB erase units")
        out[wp] = row
    return out


def build_plan(trace, *, block_bytes: int, prices: Prices, tokens_per_s: float, options: PlanOptions,
               summary: dict | None = None, run_l3_capacity: float | None = None, run_layout: str | None = None,
               profile_fn=None, compute: dict | None = None, model: str = "") -> dict:
    """Capacity per tier and target, DWPD, WAF, lifetime and the cost per day of each plan for one trace.

    Writes: with a replay ``summary`` the measured L3 write bytes (``tiers.l3.write_bytes``) over the trace
    time its requests spanned; without, simulated write-through: every block produced (a miss at the L3 size,
    retention included) is written once, so expired and re-produced blocks are written again."""
    from kvbench.analysis import capacity as cap
    from kvbench.analysis.endurance import Rating, bytes_per_day, endurance
    from kvbench.analysis.ftl import layout_waf

    opt = options.validate()
    profile_fn = profile_fn or _exact_profile
    n = int(trace.n_requests)
    span = float(trace.duration_s)
    if n < 2 or span <= 0:
        raise SpecError(f"trace {trace.path} spans {span:g} s over {n} request(s)",
                        "give a trace with at least two requests at different times")
    trace_rate = n / span
    scale = (opt.rate / trace_rate) if opt.rate else 1.0
    compress = opt.rate_model == "compress"
    copies = 1.0 if compress else scale
    if opt.ssd_class is not None and opt.ssd_class not in prices.ssd:
        raise SpecError(f"unknown SSD class {opt.ssd_class!r}", f"choose one of: {', '.join(prices.ssd)}")

    def ttl_in_trace(r):       # retention in wall time -> trace time
        return None if r is None else (r * scale if compress else r)

    def curve_for(r):
        return cap.HitCurve.from_profile(profile_fn(trace, ttl_in_trace(r), opt.warmup), block_bytes=block_bytes)

    curve = curve_for(opt.retention_s)
    refs = curve.references
    n_warm = int(math.floor(opt.warmup * n))
    window_s = float(trace.timestamp_s[-1] - trace.timestamp_s[n_warm]) if n - n_warm >= 2 else span
    measured_tokens = float(trace.input_tokens[n_warm:].sum())
    per_day = 86_400.0 / (window_s / scale) if compress else 86_400.0 / window_s * copies   # windows per day
    refs_per_day = refs * per_day
    tokens_per_day = measured_tokens * per_day
    usd_token = usd_per_recomputed_token(tokens_per_s, prices)
    value_per_hit = trace.block_tokens * usd_token

    # device WAF of the L3 store
    layout = run_layout if run_layout in LAYOUT_NAMES else opt.layout
    if opt.waf is not None:
        waf, waf_source = float(opt.waf), opt.waf_source
    layout_wafs = {}
    if opt.waf is None:
        for name in LAYOUT_NAMES:   # both layouts: the comparison shows what the layout does to the NAND
            layout_wafs[name] = layout_waf(name, block_bytes, erase_block_bytes=opt.erase_block_bytes,
                                           op=opt.ssd_op, gc=opt.gc)[0]
    if opt.waf is None:
        waf = layout_wafs[layout]
        waf_source = (f"FTL model: {layout} layout, {block_bytes} B slots, op {opt.ssd_op:g}, "
                      f"{opt.erase_block_bytes >> 20} MiB erase units, {opt.gc} GC")

    # measured writes (a replay run) or simulated write-through
    run_bytes_per_day = None
    if summary is not None:
        l3_run = (summary.get("tiers") or {}).get("l3") or {}
        # a key-sampled replay measured rate x the volume: full_write_bytes is the full-size estimate
        wb = l3_run.get("full_write_bytes", l3_run.get("write_bytes"))
        if wb is None:
            raise SpecError("the run's summary.json has no tiers.l3.write_bytes",
                            "give a 'kvbench replay kv' run with an L3 tier, or plan without --run")
        n_run = int(summary.get("requests") or n)
        n_run = min(max(n_run, 2), n)
        run_span = float(trace.timestamp_s[n_run - 1] - trace.timestamp_s[0]) or span
        # the replayed requests took run_span trace-seconds; both rate models multiply the volume by the scale
        run_bytes_per_day = bytes_per_day(float(wb), run_span) * scale

    dram_cls_cost = prices.dram_usd_per_gb / GB * block_bytes / (prices.dram_service_years * 365.0)
    knee_blocks = cap.knee(curve)
    # the tiers simulated at the headline target's sizes: L3 writes under each write policy, and the device
    # WAF of the store's own write/trim stream (the headline WAF unless one was measured or given)
    policies = None
    c0 = cap.capacity_for_target(curve, opt.targets[0], relative=opt.relative)
    if opt.write_policies and c0 is not None and summary is None:
        l2_0 = (opt.dram_bytes / copies // block_bytes) if opt.dram_bytes is not None else min(knee_blocks, c0)
        policies = simulate_write_policies(
            trace, block_bytes=block_bytes, l2_blocks=int(min(l2_0, c0)), l3_blocks=int(c0),
            ttl_s=ttl_in_trace(opt.retention_s), layout=layout, per_day=per_day, ftl_op=opt.ssd_op,
            erase_block_bytes=opt.erase_block_bytes, gc=opt.gc, model_ftl=opt.waf is None)
        if opt.waf is None and "waf" in policies["through"]:
            waf, waf_source = policies["through"]["waf"], policies["through"]["waf_source"]
    per_target, plans = {}, {}
    capacity_bytes = {"l2": {}, "l3": {}}
    for t in opt.targets:
        k = _key(t)
        c_blocks = cap.capacity_for_target(curve, t, relative=opt.relative)
        if c_blocks is None:
            per_target[k] = {"reachable": False, "target_hit_ratio": cap.target_hit(curve, t, relative=opt.relative),
                             "infinite_hit_ratio": curve.infinite_hit_ratio}
            capacity_bytes["l2"][k] = capacity_bytes["l3"][k] = None
            continue
        hit = float(curve.at(c_blocks))
        l3_bytes = c_blocks * block_bytes * copies
        l2_bytes = float(opt.dram_bytes) if opt.dram_bytes is not None else min(knee_blocks, c_blocks) * block_bytes * copies
        l2_bytes = min(l2_bytes, l3_bytes)
        if run_bytes_per_day is not None:
            writes_day, writes_source = run_bytes_per_day, "measured: replay run tiers.l3.write_bytes" + (
                f" / sample rate {summary['sample_rate']:g} (tiers.l3.full_write_bytes)"
                if (summary.get("sample_rate") or 1.0) < 1.0 else "")
        else:
            writes_day = refs * (1.0 - hit) * block_bytes * per_day
            writes_source = "simulated write-through: each block produced (miss at the L3 size) written once"
        dwpd_capacity = float(run_l3_capacity) * copies if (run_l3_capacity and summary is not None) else l3_bytes
        missed_tokens = max(0.0, tokens_per_day - refs_per_day * hit * trace.block_tokens)
        gpu_day = gpu_usd_per_day(missed_tokens, tokens_per_s, prices)
        classes = {}
        for name, cls in prices.ssd.items():
            rating = Rating(dwpd=cls.dwpd, warranty_years=cls.warranty_years, reference_waf=cls.reference_waf)
            at_ws = endurance(writes_day, dwpd_capacity, waf=waf, rating=rating)
            sizing = cap.ssd_sizing(l3_bytes, writes_day, rated_dwpd=cls.dwpd, waf=waf,
                                    reference_waf=cls.reference_waf, store_fill=opt.store_fill)
            bought = endurance(writes_day, sizing.ssd_bytes, waf=waf, rating=rating)
            ssd_day = ssd_usd_per_day(sizing.ssd_bytes, cls, bought.lifetime_years)
            classes[name] = {
                "rated_dwpd": cls.dwpd, "lifetime_years_at_working_set": at_ws.lifetime_years,
                "ssd_bytes": sizing.ssd_bytes, "bound": sizing.bound, "ssd_per_dram_gb": sizing.ssd_per_dram_gb,
                "lifetime_years": bought.lifetime_years,
                "usd_per_day": {"dram": dram_usd_per_day(l2_bytes, prices), "ssd": ssd_day, "gpu": gpu_day},
            }
            classes[name]["usd_per_day"]["total"] = sum(classes[name]["usd_per_day"].values())
        chosen = opt.ssd_class or min(classes, key=lambda c: classes[c]["usd_per_day"]["total"])
        e = endurance(writes_day, dwpd_capacity, waf=waf)
        recompute_day = gpu_usd_per_day(tokens_per_day, tokens_per_s, prices)
        dram_only = {"dram": dram_usd_per_day(l3_bytes, prices), "ssd": 0.0, "gpu": gpu_day}
        dram_only["total"] = sum(dram_only.values())
        plans[k] = [
            {"name": "recompute", "dram_bytes": 0, "ssd_bytes": 0, "hit_ratio": 0.0,
             "usd_per_day": {"dram": 0.0, "ssd": 0.0, "gpu": recompute_day, "total": recompute_day}},
            {"name": "dram-only", "dram_bytes": l3_bytes, "ssd_bytes": 0, "hit_ratio": hit, "usd_per_day": dram_only},
        ] + [{"name": f"dram+ssd:{name}", "dram_bytes": l2_bytes, "ssd_bytes": c["ssd_bytes"], "hit_ratio": hit,
              "ssd_class": name, "usd_per_day": c["usd_per_day"]} for name, c in classes.items()]
        capacity_bytes["l2"][k], capacity_bytes["l3"][k] = l2_bytes, l3_bytes
        ssd_cls = prices.ssd[chosen]
        per_target[k] = {
            "reachable": True, "target_hit_ratio": cap.target_hit(curve, t, relative=opt.relative),
            "hit_ratio": hit, "capacity_blocks": c_blocks * copies, "l2_bytes": l2_bytes, "l3_bytes": l3_bytes,
            "l3_write_bytes_per_day": writes_day, "writes_source": writes_source, "dwpd": e.dwpd,
            "dwpd_capacity_bytes": dwpd_capacity, "nand_bytes_per_day": e.nand_bytes_per_day,
            "ssd_class": chosen, "lifetime_years": classes[chosen]["lifetime_years_at_working_set"],
            "ssd_per_dram_gb": classes[chosen]["ssd_per_dram_gb"], "ssd_classes": classes,
            "pays_until_bytes": {
                "dram": cap.pays_until(curve, value_per_hit_per_day=value_per_hit, refs_per_day=refs_per_day / copies,
                                       cost_per_block_per_day=dram_cls_cost) * block_bytes * copies,
                "ssd": cap.pays_until(curve, value_per_hit_per_day=value_per_hit, refs_per_day=refs_per_day / copies,
                                      cost_per_block_per_day=ssd_usd_per_day(block_bytes, ssd_cls, None))
                * block_bytes * copies},
        }

    primary = per_target[_key(opt.targets[0])]
    layouts = {}
    if primary.get("reachable"):
        for name, w in layout_wafs.items():
            nand = primary["l3_write_bytes_per_day"] * w
            layouts[name] = {"waf": w, "model": LAYOUT_MODELS[name], "nand_bytes_per_day": nand,
                             "nand_writes_per_day": nand / primary["dwpd_capacity_bytes"]}
    # the trace's horizon: reuse (and residence) longer than the wall time the trace covers is not observed
    wall_span = window_s / scale if compress else window_s
    warnings, retention_bound = [], None
    if primary.get("reachable") and (opt.retention_s is None or opt.retention_s > wall_span):
        produce_rate = primary["l3_write_bytes_per_day"] / 86_400.0
        warnings.append(
            f"the trace covers {wall_span:,.0f} s of wall time at {opt.rate or trace_rate:g} req/s, shorter than the "
            f"retention ({'unlimited' if opt.retention_s is None else format(opt.retention_s, 'g') + ' s'}): "
            "capacity reflects only the reuse seen within the trace, and DWPD is that of a store rewritten once "
            "per trace window; see retention_bound for a store that keeps every block for the retention")
        if opt.retention_s is not None:
            retention_bound = {"l3_bytes": produce_rate * opt.retention_s, "dwpd": 86_400.0 / opt.retention_s,
                               "note": "steady state: a store holding every block produced in the last retention "
                                       "period (write-through) is rewritten once per period: DWPD = 1 day / retention"}
    sweep = []
    for r in sorted(dict.fromkeys(list(opt.sweep) + [opt.retention_s]), key=lambda x: math.inf if x is None else x):
        c = curve if r == opt.retention_s else curve_for(r)
        cb = cap.capacity_for_target(c, opt.targets[0], relative=opt.relative)
        row = {"retention_s": r, "infinite_hit_ratio": c.infinite_hit_ratio}
        if cb is not None:
            hit = float(c.at(cb))
            wd = run_bytes_per_day if (run_bytes_per_day is not None and r == opt.retention_s) else \
                c.references * (1.0 - hit) * block_bytes * per_day
            l3 = cb * block_bytes * copies
            row.update({"hit_ratio": hit, "l3_bytes": l3, "capacity_bytes": l3, "l3_write_bytes_per_day": wd,
                        "dwpd": wd / l3, "nand_bytes_per_day": wd * waf,
                        "dwpd_retention_bound": 86_400.0 / r if r else None})
        sweep.append(row)

    for rows in plans.values():
        for p in rows:
            p["gpu_hours_per_day"] = p["usd_per_day"]["gpu"] / prices.gpu_usd_per_hour
    return {
        "model": model, "trace": str(trace.path), "block_tokens": trace.block_tokens, "block_bytes": block_bytes,
        "requests": n, "references": refs, "span_s": span, "trace_rate": trace_rate, "rate": opt.rate or trace_rate,
        "rate_scale": scale, "rate_model": opt.rate_model, "retention_s": opt.retention_s,
        "targets": list(opt.targets), "target_mode": "relative to infinite-cache hit ratio" if opt.relative
        else "absolute", "infinite_hit_ratio": curve.infinite_hit_ratio,
        "capacity_bytes": capacity_bytes, "knee_bytes": knee_blocks * block_bytes * copies,
        "dwpd": primary.get("dwpd"), "waf": waf, "waf_source": waf_source,
        "lifetime_years": primary.get("lifetime_years"), "nand_bytes_per_day": primary.get("nand_bytes_per_day"),
        "l3_write_bytes_per_day": primary.get("l3_write_bytes_per_day"), "ssd_class": primary.get("ssd_class"),
        "ssd_per_dram_gb": primary.get("ssd_per_dram_gb"),
        "layouts": layouts, "write_policies": policies, "trace_wall_span_s": wall_span, "warnings": warnings, "retention_bound": retention_bound,
        "per_target": per_target, "plans": plans, "retention_sweep": sweep,
        "prices": prices.to_dict(), "compute": compute or {"tokens_per_s": tokens_per_s},
        "assumptions": [
            f"rate model '{opt.rate_model}': {RATE_MODELS[opt.rate_model]}",
            "L2 DRAM sized at the curve's knee (or --dram), L3 SSD holds the whole working set (inclusive)",
            "a hit block saves block_tokens tokens of prefill; GPU cost is linear in recomputed tokens",
            f"prices '{prices.name}' dated {prices.date}: {prices.status}",
            "lifetime uses the rating as host bytes unless the SSD class states the rating's reference WAF",
        ],
    }
