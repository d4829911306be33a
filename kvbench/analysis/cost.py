"""The bill: prices (a dated preset, overridable) and the cost per day of each plan against recomputing.

Amortisation: DRAM over its service life; an SSD over the shorter of its warranty and the lifetime its rating
gives under the plan's writes. Recompute: GPU-hours of prefill for every prompt token not served from the
cache, at a compute profile's rate (``kvbench.compute.profile``) or a plain tokens/s. Every number is per day
at the planned request rate; the plan itself is assembled in :mod:`kvbench.analysis.plan`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path


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
    drive_capacity_bytes: float | None = None     # one drive of the class (drives = capacity / this)
    over_provisioning: float | None = None        # raw NAND / user capacity - 1 (derived when raw is stated)
    raw_nand_bytes: float | None = None           # raw NAND capacity of one drive
    pe_cycles: float | None = None                # NAND program/erase rating
    reference_waf_source: str = ""                # the vendor's, or "computed: FTL model, JESD219A, op X"


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
                            "reference_waf": c.reference_waf, "reference_waf_source": c.reference_waf_source,
                            "drive_capacity_bytes": c.drive_capacity_bytes, "raw_nand_bytes": c.raw_nand_bytes,
                            "over_provisioning": c.over_provisioning, "pe_cycles": c.pe_cycles,
                            "label": c.label} for k, c in self.ssd.items()},
                "sources": self.sources, "overrides": list(self.overrides)}

    @classmethod
    def from_dict(cls, d: dict) -> "Prices":
        """The inverse of :meth:`to_dict` (a plan's ``prices`` object): every field of every class kept."""
        num = lambda v: None if v is None else float(v)  # noqa: E731
        ssd = {k: SsdClass(k, float(c["usd_per_gb"]), float(c["dwpd"]), float(c.get("warranty_years") or 5.0),
                           num(c.get("reference_waf")), str(c.get("label") or ""), "",
                           num(c.get("drive_capacity_bytes")), num(c.get("over_provisioning")),
                           num(c.get("raw_nand_bytes")), num(c.get("pe_cycles")),
                           str(c.get("reference_waf_source") or "")) for k, c in (d.get("ssd") or {}).items()}
        return cls(str(d.get("name") or ""), str(d.get("date") or ""), str(d.get("status") or "assumption"),
                   float(d["dram_usd_per_gb"]), float(d.get("dram_service_years") or 5.0), ssd,
                   float(d["gpu_usd_per_hour"]), str(d.get("path") or ""), dict(d.get("sources") or {}),
                   tuple(d.get("overrides") or ()))


def _positive(d: dict, key: str, where: str) -> float:
    v = d.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (v > 0 and math.isfinite(v)):
        raise SpecError(f"{where}: field {key!r} must be a number > 0 (got {v!r})", f"set {key} = <number>")
    return float(v)


def _size(c: dict, key: str, where: str, example: str) -> float | None:
    from kvbench.units import parse_size

    v = c.get(key)
    if v is None:
        return None
    try:
        return float(parse_size(v, what=f"{where} {key}"))
    except Exception as e:  # noqa: BLE001 - re-raised with the file and field named
        raise SpecError(f"{where}: field {key!r} {v!r} is not a size", f"give e.g. \"{example}\"") from e


def prices_from_dict(d: dict, *, where: str = "<prices>") -> Prices:
    """Validate a price table; errors name the file and the field. Each SSD class's reference WAF is settled
    (the vendor's, else the FTL model on JESD219A at its OP) and its rating checked against its flash
    (:mod:`kvbench.analysis.drive_class`)."""
    from kvbench.analysis.drive_class import settle

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
        dcap, raw = _size(c, "drive_capacity", w, "7.68TB"), _size(c, "raw_nand_capacity", w, "8TiB")
        op = c.get("over_provisioning")
        if raw is not None:
            if dcap is None or op is not None or not raw > dcap:
                raise SpecError(f"{w}: raw_nand_capacity needs drive_capacity below it, and over-provisioning follows "
                                "from the two", "give drive_capacity < raw_nand_capacity and drop over_provisioning")
            op = raw / dcap - 1.0
        if ref is not None and raw is not None and not c.get("reference_waf_source"):
            raise SpecError(f"{w}: reference_waf without reference_waf_source",
                            "say where the vendor's figure comes from, or drop reference_waf to compute it")
        classes[name] = SsdClass(name, _positive(c, "usd_per_gb", w), _positive(c, "dwpd", w),
                                 float(c.get("warranty_years", 5.0)),
                                 _positive(c, "reference_waf", w) if ref is not None else None,
                                 str(c.get("label", "")), str(c.get("source", "")), dcap,
                                 float(op) if op is not None else None, raw,
                                 _positive(c, "pe_cycles", w) if c.get("pe_cycles") is not None else None,
                                 str(c.get("reference_waf_source") or (f"given in {where}" if ref is not None else "")))
        classes[name] = settle(classes[name], where)
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


SSD_FIELDS = ("usd_per_gb", "dwpd", "warranty_years", "reference_waf", "pe_cycles")
PRICE_FIX = "e.g. --price dram=6 or --price ssd.qlc=0.05"


def price_key(p: Prices | None = None):
    """The ``--price`` key lookup for :func:`kvbench.spec.fields.parse_fields`: ``dram``, ``gpu``,
    ``ssd.<class>[.<field>]`` (classes of ``p``, or any class without a table), ``-``/``_`` alike."""
    def lookup(key: str):
        if key in ("dram", "gpu"):
            return key
        if not key.startswith("ssd."):
            return None
        name, _, attr = key[4:].partition(".")
        if attr and attr not in SSD_FIELDS:
            return None
        if p is None:
            return key if name else None
        match = [c for c in p.ssd if c.replace("-", "_") == name]
        return None if not match else f"ssd.{match[0]}" + (f".{attr}" if attr else "")
    return lookup


def parse_price_overrides(overrides, p: Prices | None = None) -> dict[str, float]:
    """``("dram=6", "ssd.qlc.dwpd=0.3")`` -> {key: number > 0}; one-line SpecError naming the option and key."""
    from kvbench.spec.fields import parse_fields

    classes = f"classes: {', '.join(p.ssd)}; " if p is not None else ""
    fields = parse_fields(overrides, option="--price", known=price_key(p), noun="key", fix=PRICE_FIX,
                          known_text=f"dram, gpu, ssd.<class>[.<field>] ({classes}fields: {', '.join(SSD_FIELDS)})",
                          error=SpecError)
    out = {}
    for key, value in fields.items():
        try:
            v = float(value)
        except ValueError:
            v = float("nan")
        if not (v > 0 and math.isfinite(v)):
            raise SpecError(f"--price {key}={value}: expected KEY=NUMBER > 0", PRICE_FIX)
        out[key] = v
    return out


def apply_overrides(p: Prices, overrides) -> Prices:
    applied = []
    for key, v in parse_price_overrides(overrides, p).items():
        if key == "dram":
            p = replace(p, dram_usd_per_gb=v)
        elif key == "gpu":
            p = replace(p, gpu_usd_per_hour=v)
        else:
            name, _, attr = key[4:].partition(".")
            attr = attr or "usd_per_gb"
            from kvbench.analysis.drive_class import settle

            extra = {"reference_waf_source": f"given (--price {key}={v:g})"} if attr == "reference_waf" else {}
            cls = settle(replace(p.ssd[name], **{attr: v}, **extra), f"--price {key}={v:g}")
            p = replace(p, ssd={**p.ssd, name: cls})
        applied.append(f"{key}={v:g}")
    return replace(p, overrides=tuple(applied)) if applied else p


def class_for_rating(p: Prices, rated_dwpd: float) -> str:
    """The SSD class whose rating is nearest a drive's (by ratio), for its rating's reference WAF: a drive rated
    3 DWPD is a mixed-use class with more over-provisioning, whose rating workload amplifies less. Between two
    equally near classes, the one with the lower reference WAF: the stricter rating-equivalent DWPD."""
    if not (rated_dwpd > 0 and math.isfinite(rated_dwpd)):
        raise SpecError(f"a drive rating of {rated_dwpd} DWPD", "give the drive's rating > 0, e.g. rated_dwpd=3")

    def key(name: str):
        c = p.ssd[name]
        return (round(abs(math.log(c.dwpd / rated_dwpd)), 12), c.reference_waf or math.inf, name)

    return min(p.ssd, key=key)


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
