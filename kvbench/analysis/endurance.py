"""Drive economics, the one place for them (pure): DWPD, residence, rating-equivalent DWPD, lifetime, drive count
and the per-drive bill. Every other module calls these; none writes 86,400 W / C itself.

Definitions (DESIGN.md, "Write amplification and endurance"; the daily write volume is a tier's steady-state
write rate x 86,400, :mod:`kvbench.analysis.curves.residence`):
- required DWPD = host bytes per day / user capacity (drive writes per day, as vendors rate drives);
- rating-equivalent DWPD = host DWPD x workload WAF / the rating's reference WAF: the host DWPD of the rating's
  own workload that wears the NAND as fast;
- NAND bytes per day = host bytes per day * WAF (device write amplification: SMART/OCP or the FTL model);
- a rating is a TBW (host bytes over the warranty) or a DWPD over a warranty period: TBW = DWPD * capacity *
  365 * warranty years. Vendor ratings assume a reference workload (JESD219) with its own WAF: when
  ``reference_waf`` is given, the NAND budget is TBW * reference_waf and the workload's lifetime scales by
  reference_waf / workload WAF; otherwise the rating is taken at the workload's WAF (stated in the result).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from kvbench.errors import SpecError

SECONDS_PER_DAY = 86_400.0
DAYS_PER_YEAR = 365.0      # DWPD <-> TBW conversions in vendor datasheets use 365-day years


def bytes_per_day(write_bytes_per_s):
    """A steady write rate as a daily volume: W x 86,400 (numbers or numpy arrays)."""
    return write_bytes_per_s * SECONDS_PER_DAY


def dwpd(write_bytes_per_s: float, capacity_bytes: float) -> float:
    """Drive writes per day of a store of ``capacity_bytes`` written at W: 86,400 W / C."""
    return required_dwpd(bytes_per_day(write_bytes_per_s), capacity_bytes)


def dwpd_at_residence(residence_s):
    """DWPD of a store that keeps a block ``residence_s`` before rewriting it: 86,400 / T (numbers or arrays;
    the same figure as :func:`dwpd` since T = C / W)."""
    return SECONDS_PER_DAY / residence_s


def residence_s(capacity_bytes: float, write_bytes_per_s: float) -> float | None:
    """How long a block stays in a full store written at W before it is rewritten: T = C / W (None: not written)."""
    if not capacity_bytes > 0:
        raise SpecError(f"capacity {capacity_bytes} B", "give a user capacity > 0")
    return capacity_bytes / write_bytes_per_s if write_bytes_per_s and write_bytes_per_s > 0 else None


def drives_for(capacity_bytes: float, drive_capacity_bytes: float | None) -> int | None:
    """Drives of ``drive_capacity_bytes`` that hold ``capacity_bytes``: ceil(C / drive), never 0 for C > 0."""
    if not drive_capacity_bytes:
        return None
    if not drive_capacity_bytes > 0:
        raise SpecError(f"drive capacity {drive_capacity_bytes} B", "give a drive capacity > 0")
    return max(1 if capacity_bytes > 0 else 0, math.ceil(capacity_bytes / drive_capacity_bytes - 1e-9))


def drives_within_rating(drives: float, dwpd_rating_equivalent_per_drive: float, rated_dwpd: float) -> int:
    """Under write-through the total write rate is set by the GPUs, not by how many drives share it, so the
    rating-equivalent DWPD per drive falls as 1/D: the fewest drives within the rating are
    ceil(D x rating-equivalent DWPD / rated DWPD) (at least one)."""
    if not rated_dwpd > 0:
        raise SpecError(f"rated DWPD {rated_dwpd} must be > 0", "give e.g. 1 or 3")
    need = drives * dwpd_rating_equivalent_per_drive / rated_dwpd
    return max(1, math.ceil(need * (1 - 1e-12)))


def required_dwpd(host_bytes_per_day: float, capacity_bytes: float) -> float:
    """Drive writes per day: host bytes per day / user capacity."""
    if not capacity_bytes > 0:
        raise SpecError(f"capacity {capacity_bytes} B", "give a user capacity > 0")
    return host_bytes_per_day / capacity_bytes


@dataclass(frozen=True)
class Rating:
    """A drive's endurance rating: DWPD over a warranty period, or TBW (host bytes)."""

    dwpd: float | None = None
    tbw_bytes: float | None = None
    warranty_years: float = 5.0
    reference_waf: float | None = None    # WAF of the rating's reference workload, when known

    def tbw(self, capacity_bytes: float) -> float:
        """Rated host bytes over the warranty."""
        if self.tbw_bytes is not None:
            return float(self.tbw_bytes)
        if self.dwpd is None:
            raise SpecError("a rating needs a DWPD or a TBW", "give e.g. --rated-dwpd 1 or --rated-tbw 7PB")
        return self.dwpd * capacity_bytes * DAYS_PER_YEAR * self.warranty_years

    def validate(self) -> "Rating":
        if self.dwpd is None and self.tbw_bytes is None:
            raise SpecError("a rating needs a DWPD or a TBW", "give e.g. --rated-dwpd 1 or --rated-tbw 7PB")
        for name in ("dwpd", "tbw_bytes", "reference_waf"):
            v = getattr(self, name)
            if v is not None and not (v > 0 and math.isfinite(v)):
                raise SpecError(f"rating {name} = {v} must be a finite number > 0", "fix the rating")
        if not self.warranty_years > 0:
            raise SpecError(f"warranty of {self.warranty_years} years", "give a warranty > 0 years")
        return self


@dataclass(frozen=True)
class Endurance:
    """What a workload asks of one drive: DWPD, NAND writes, lifetime against a rating."""

    capacity_bytes: float
    host_bytes_per_day: float
    waf: float
    dwpd: float
    nand_bytes_per_day: float
    rated_dwpd: float | None
    rated_tbw_bytes: float | None
    lifetime_years: float | None       # until the rating's budget is used (inf when nothing is written)
    lifetime_basis: str                 # how the rating was applied

    def to_dict(self) -> dict:
        return asdict(self)


def endurance(host_bytes_per_day: float, capacity_bytes: float, *, waf: float = 1.0,
              rating: Rating | None = None) -> Endurance:
    """Required DWPD, NAND bytes/day and lifetime (years) of one drive under a daily host write volume."""
    if not (waf >= 1.0 or math.isclose(waf, 1.0, rel_tol=1e-9)) or not math.isfinite(waf):
        raise SpecError(f"write amplification {waf} is below 1", "a WAF is NAND bytes / host bytes >= 1")
    if host_bytes_per_day < 0:
        raise SpecError(f"negative write volume {host_bytes_per_day}", "give bytes written >= 0")
    dwpd = required_dwpd(host_bytes_per_day, capacity_bytes)
    nand = host_bytes_per_day * waf
    lifetime, basis, tbw, rated = None, "no rating given", None, None
    if rating is not None:
        rating.validate()
        tbw = rating.tbw(capacity_bytes)
        rated = tbw / (capacity_bytes * DAYS_PER_YEAR * rating.warranty_years)
        if rating.reference_waf is not None:
            budget = tbw * rating.reference_waf         # NAND bytes the rating allows
            lifetime = budget / (nand * DAYS_PER_YEAR) if nand > 0 else math.inf
            basis = f"NAND budget: TBW x reference WAF {rating.reference_waf:g}, spent at WAF {waf:.3g}"
        else:
            lifetime = tbw / (host_bytes_per_day * DAYS_PER_YEAR) if host_bytes_per_day > 0 else math.inf
            basis = "host TBW (rating taken at this workload's WAF)"
    return Endurance(capacity_bytes=float(capacity_bytes), host_bytes_per_day=float(host_bytes_per_day),
                     waf=float(waf), dwpd=dwpd, nand_bytes_per_day=nand, rated_dwpd=rated, rated_tbw_bytes=tbw,
                     lifetime_years=lifetime, lifetime_basis=basis)


def rating_equivalent_dwpd(host_dwpd: float, waf: float, reference_waf: float) -> float:
    """The DWPD of the rating's reference workload that writes the NAND as fast as ``host_dwpd`` at ``waf``."""
    if not (reference_waf > 0 and waf > 0):
        raise SpecError(f"WAF {waf} / reference WAF {reference_waf} must be > 0", "a WAF is NAND / host bytes >= 1")
    return host_dwpd * waf / reference_waf


def endurance_residence_s(rated_dwpd: float, *, waf: float, reference_waf: float, store_fill: float = 1.0) -> float:
    """The residence time at which a tier's steady-state writes use exactly a drive's rating.

    A tier of capacity C on drives of C / fill bytes is written at 86,400 x fill / T(C) host DWPD, so its
    rating-equivalent DWPD is within ``rated_dwpd`` exactly when T(C) >= 86,400 x fill x WAF / (ref x rated)."""
    if not rated_dwpd > 0:
        raise SpecError(f"rated DWPD {rated_dwpd} must be > 0", "give e.g. 1 or 3")
    return SECONDS_PER_DAY * store_fill * waf / (reference_waf * rated_dwpd)


def lifetime_years(write_bytes_per_s: float, capacity_bytes: float, *, waf: float, rated_dwpd: float,
                   warranty_years: float, reference_waf: float | None) -> float:
    """Years until a drive of ``capacity_bytes`` rated ``rated_dwpd`` over ``warranty_years`` spends its NAND
    budget (TBW x reference WAF) at W host bytes/s and ``waf``: warranty x rated DWPD x ref / (DWPD x WAF)."""
    rating = Rating(dwpd=rated_dwpd, warranty_years=warranty_years, reference_waf=reference_waf)
    return endurance(bytes_per_day(write_bytes_per_s), capacity_bytes, waf=waf, rating=rating).lifetime_years


@dataclass(frozen=True)
class DriveBill:
    """One drive class holding ``ssd_bytes`` written at W: its DWPD, lifetime, drive count and cost per day."""

    ssd_bytes: float
    write_bytes_per_s: float | None
    workload_waf: float
    reference_waf: float
    dwpd_host: float | None
    dwpd_rating_equivalent: float | None
    lifetime_years: float | None
    drives: int | None
    usd_per_day: dict               # dram, ssd, gpu, total

    def to_dict(self) -> dict:
        return asdict(self)


def drive_bill(cls, *, ssd_bytes: float, write_bytes_per_s: float | None, waf: float, dram_bytes: float,
               recomputed_tokens_per_day: float, tokens_per_s: float, prices) -> DriveBill:
    """The per-drive bill of an SSD class (:class:`kvbench.analysis.cost.SsdClass`) holding ``ssd_bytes``: host
    and rating-equivalent DWPD, lifetime against the class's rating (its reference WAF, else the workload's),
    drives, and $/day = DRAM + SSD (over the shorter of warranty and lifetime) + GPU time of the recomputed
    tokens. ``write_bytes_per_s`` None: no steady state (DWPD and lifetime unknown, the SSD over its warranty)."""
    from kvbench.analysis.cost import dram_usd_per_day, gpu_usd_per_day, ssd_usd_per_day

    ref = cls.reference_waf if cls.reference_waf is not None else waf
    wb = write_bytes_per_s
    host = dwpd(wb, ssd_bytes) if wb is not None else None
    eq = rating_equivalent_dwpd(host, waf, ref) if host is not None else None
    life = (lifetime_years(wb, ssd_bytes, waf=waf, rated_dwpd=cls.dwpd, warranty_years=cls.warranty_years,
                           reference_waf=ref) if wb is not None else None)
    usd = {"dram": dram_usd_per_day(dram_bytes, prices), "ssd": ssd_usd_per_day(ssd_bytes, cls, life),
           "gpu": gpu_usd_per_day(max(0.0, recomputed_tokens_per_day), tokens_per_s, prices)}
    usd["total"] = sum(usd.values())
    return DriveBill(float(ssd_bytes), wb, float(waf), float(ref), host, eq, life,
                     drives_for(ssd_bytes, cls.drive_capacity_bytes), usd)
