"""Endurance arithmetic: required DWPD, NAND writes per day, lifetime for a rated DWPD or TBW (pure).

Definitions (DESIGN.md, "Write amplification and endurance"):
- host bytes per day = bytes written in the replayed window / window seconds * 86,400, times
  ``target_rate / trace_rate`` when a request rate is asked for (the workload's population scaled, its reuse
  pattern kept);
- required DWPD = host bytes per day / user capacity (drive writes per day, as vendors rate drives);
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


def bytes_per_day(window_bytes: float, window_s: float, *, trace_rate: float | None = None,
                  target_rate: float | None = None) -> float:
    """Scale bytes written in a replayed window to a day, optionally at a target request rate (req/s)."""
    if not window_s > 0:
        raise SpecError(f"replayed window of {window_s} s", "the trace or run must span a positive time")
    per_day = window_bytes / window_s * SECONDS_PER_DAY
    if target_rate is not None:
        if not (trace_rate and trace_rate > 0):
            raise SpecError("a target rate needs the trace's own request rate", "give a trace with > 1 request")
        if target_rate <= 0:
            raise SpecError(f"--rate {target_rate} must be > 0", "give requests per second, e.g. --rate 50")
        per_day *= target_rate / trace_rate
    return per_day


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


def capacity_for_dwpd(host_bytes_per_day: float, rated_dwpd: float) -> float:
    """The smallest user capacity at which a daily write volume stays within a DWPD rating."""
    if not rated_dwpd > 0:
        raise SpecError(f"rated DWPD {rated_dwpd} must be > 0", "give e.g. 1 or 3")
    return host_bytes_per_day / rated_dwpd
