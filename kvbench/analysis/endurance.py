"""Endurance arithmetic: required DWPD, NAND writes per day, lifetime for a rated DWPD or TBW (pure).

Definitions (DESIGN.md, "Write amplification and endurance"; the daily write volume is a tier's steady-state
write rate x 86,400, :mod:`kvbench.analysis.residence`):
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
