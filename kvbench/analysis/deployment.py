"""Deployment scale: a trace's workload mix run at the load a stated server produces (pure).

DESIGN.md, "Deployment scale". A trace's own request rate is some unstated cluster's. A deployment of G GPUs
at prefill utilization U, each computing P prefill tokens/s (a compute profile), computes U P G tokens/s of
*missed* prompt tokens. The trace's mix (prompt tokens and blocks per request, its hit-ratio curve) sets the
request rate that produces exactly that work, with the trace's users replicated to that rate (each copy
gets its share of the drives). Under write-through every computed block is written to the KV tier, so the
drives are written at about U P G b bytes/s (b = KV bytes per token) whatever the hit ratio; per drive of
capacity CAP, host DWPD = U P G b 86,400 / (D CAP). Only admission, a larger or additional drive, or fewer
GPUs per drive lower it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from kvbench.analysis.curves.protocol import HitRatioCurve
from kvbench.analysis.endurance import (Rating, drives_within_rating, dwpd, endurance, bytes_per_day,
                                        rating_equivalent_dwpd, residence_s)
from kvbench.errors import SpecError

FIELDS = ("gpus", "drives", "drive_capacity", "utilization")
MIN_DRIVE_BYTES, MAX_DRIVE_BYTES = 10**6, 10**15   # 1 MB (a test-sized drive) to 1 PB
MAX_COUNT = 10**6                                  # GPUs or drives of one deployment
STORE_BOUND_SHARE = 0.99    # GPUs computing less than this share of U P G at the sustained rate: the drives bound it


@dataclass(frozen=True)
class Deployment:
    """A server (or a share of a cluster): GPUs, KV drives and their capacity, prefill utilization."""

    gpus: float
    drives: float
    drive_capacity_bytes: float
    utilization: float

    def to_dict(self) -> dict:
        return asdict(self)


def parse_deployment(text: str) -> Deployment:
    """``gpus=8,drives=8,drive_capacity=7.68TB,utilization=0.5``; every field required, errors name the field."""
    from kvbench.units import parse_size

    fix = "give --deployment gpus=G,drives=D,drive_capacity=CAP,utilization=U (e.g. gpus=8,drives=8," \
          "drive_capacity=7.68TB,utilization=0.5)"
    if not str(text).strip():
        raise SpecError("--deployment is empty", fix)
    from kvbench.spec.fields import parse_fields

    vals = parse_fields(text, option="--deployment", known=FIELDS, required=FIELDS, fix=fix, error=SpecError)

    def number(key):
        try:
            v = float(vals[key])
        except ValueError:
            raise SpecError(f"--deployment: {key}={vals[key]!r} is not a number", fix) from None
        if not (v > 0 and math.isfinite(v)):
            raise SpecError(f"--deployment: {key}={vals[key]} must be > 0", fix)
        return v

    util = number("utilization")
    if util > 1:
        raise SpecError(f"--deployment: utilization={util:g} is above 1", "give the fraction of time GPUs prefill, "
                        "e.g. utilization=0.5")
    from kvbench.errors import UnitError

    try:
        cap = parse_size(vals["drive_capacity"], what="--deployment drive_capacity")
    except UnitError as e:
        raise SpecError(f"--deployment: drive_capacity={vals['drive_capacity']!r} is not a size", fix) from e
    if not cap > 0:
        raise SpecError("--deployment: drive_capacity must be > 0", fix)
    if not MIN_DRIVE_BYTES <= cap <= MAX_DRIVE_BYTES:
        raise SpecError(f"--deployment: drive_capacity={vals['drive_capacity']} is not a drive's size",
                        "give a capacity between 1MB and 1PB, e.g. drive_capacity=7.68TB")

    def count(key):
        v = number(key)
        if not (v == int(v) and v <= MAX_COUNT):
            raise SpecError(f"--deployment: {key}={vals[key]} must be a whole number from 1 to {MAX_COUNT:,}", fix)
        return v

    return Deployment(gpus=count("gpus"), drives=count("drives"), drive_capacity_bytes=float(cap), utilization=util)


def scale(dep: Deployment, *, tokens_per_s_per_gpu: float, hit_curve: HitRatioCurve, trace_rate: float, tokens_per_request: float,
          blocks_per_request: float, block_tokens: int, block_bytes: int, bytes_per_token: float,
          waf: float, reference_waf: float, store_fill: float = 1.0, sample_rate: float = 1.0) -> dict:
    """The deployment's request rate, hit ratio and per-drive write rate and DWPD (host and rating-equivalent).

    Fixed point: at request rate L the trace's users are replicated L / trace_rate times; each copy's share of
    the drives' store is D CAP fill / copies, which sets the hit ratio h, hence the missed prompt tokens per
    request m(h) = tokens_per_request (1 - h) (a request misses the share of its tokens that its blocks miss);
    L solves L m(h(L)) = U P G (L m(h(L)) rises with L, so bisection finds it; the bracket's top doubles from the
    all-miss rate until the work needed reaches the GPUs', never an arbitrary cap). Where L lands on a step of the
    curve the hit ratio just below it is the sustained one; where the GPUs then compute well under U P G (a hit
    ratio of 1 at the extreme: no prefill at all) the drives' share per copy, not prefill, bounds the rate, and
    ``rate_bound`` = "store" and ``rate_note`` say so. The plan passes the steady-state
    hit ratio (:class:`kvbench.analysis.curves.residence.SteadyHits`) as ``hit_curve``. The drives are written the
    missed blocks, whole slots: L (1 - h) blocks_per_request block_bytes. ``blocks_per_request`` is the full workload's; ``sample_rate`` < 1 when
    the hit curve is a key sample's."""
    if not tokens_per_s_per_gpu > 0:
        raise SpecError("the deployment needs a prefill rate", "give --profile (or --recompute-tokens-per-s)")
    work = dep.utilization * tokens_per_s_per_gpu * dep.gpus          # missed tokens/s the GPUs compute
    # the curve is in the trace's blocks: a key-sampled trace (rate r) holds r of the full workload's blocks
    store_blocks = dep.drives * dep.drive_capacity_bytes * store_fill / block_bytes * sample_rate

    def hit(rate):
        copies = rate / trace_rate
        return float(hit_curve.at(store_blocks / copies))

    def missed(h):
        return tokens_per_request * (1.0 - h)

    def load(rate):                                      # missed tokens/s the GPUs compute at this rate
        return rate * missed(hit(rate))

    # bracket: at lo every token is missed, so the GPUs' work is met there at most; hi doubles until the work
    # needed reaches theirs. The hit ratio falls as copies share the drives (0 below a curve's first capacity),
    # so hi is found unless the curve hits everything at any share of the drives: then prefill bounds no rate
    # (the rate is bounded by loading or decode, which this model does not hold) and no rate is reported.
    lo = hi = work / tokens_per_request
    while load(hi) < work:
        lo, hi = hi, 2.0 * hi
        if not math.isfinite(hi):
            raise SpecError("--deployment: the hit-ratio curve hits every prompt token at any share of the drives, "
                            "so prefill bounds no request rate (the rate is then set by loading or decode, which "
                            "this model does not hold)", "give the request rate with --rate instead of --deployment")
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if load(mid) < work:
            lo = mid
        else:
            hi = mid
    rate = hi
    h = hit(rate)
    # the bisection ends at adjacent doubles (or at an exact root): hi is the least rate whose work reaches the
    # GPUs'. Past it by more than rounding, the root is a step of the curve: just above it the work needed jumps
    # past the GPUs' (the hit ratio falls), so the deployment sustains the rate at the step with the hit ratio
    # just below it (lo's, the same double but for one ulp), its GPUs computing less than U P G. On a flat stretch
    # lo's hit ratio is hi's. At a hit ratio of 1 the GPUs compute nothing: the drives' share of each copy of the
    # users, not prefill, bounds the rate.
    computed = load(rate)
    if computed > work:
        h = hit(lo)
        computed = rate * missed(h)
    bound = "prefill" if computed >= STORE_BOUND_SHARE * work else "store"
    write_bps = rate * (1.0 - h) * blocks_per_request * block_bytes      # missed blocks, full slots
    per_drive = write_bps / dep.drives
    dwpd_host = dwpd(per_drive, dep.drive_capacity_bytes)
    first_principles = dwpd(computed * bytes_per_token, dep.drives * dep.drive_capacity_bytes)
    return {
        **dep.to_dict(),
        "prefill_tokens_per_s": work, "prefill_tokens_per_s_per_gpu": tokens_per_s_per_gpu,
        "computed_tokens_per_s": computed, "rate_bound": bound,
        "rate_note": None if bound == "prefill" else (
            f"the drives bound the rate, not prefill: at {rate:,.3g} requests/s each of the {rate / trace_rate:,.3g} "
            f"copies of the trace's users holds its share of the drives at hit ratio {h:.3f}; one more request/s "
            f"and the hit ratio falls below what the GPUs can compute, so they compute {computed:,.3g} of their "
            f"{work:,.3g} prefill tokens/s" + (" (none: every prompt token hits)" if h >= 1.0 else "")),
        "requests_per_s": rate, "trace_copies": rate / trace_rate, "hit_ratio": h,
        "write_bytes_per_s": write_bps, "write_bytes_per_s_per_drive": per_drive,
        "dwpd_host_per_drive": dwpd_host,
        "dwpd_rating_equivalent_per_drive": rating_equivalent_dwpd(dwpd_host, waf, reference_waf),
        "workload_waf": waf, "reference_waf": reference_waf,
        "residence_s": residence_s(dep.drives * dep.drive_capacity_bytes * store_fill, write_bps),
        "dwpd_first_principles": first_principles,
        "slot_rounding": dwpd_host / first_principles if first_principles > 0 else None,
        "formula": ("host DWPD per drive = U x P x G x b x 86400 / (D x CAP) "
                    f"= {dep.utilization:g} x {tokens_per_s_per_gpu:,.0f} x {dep.gpus:g} x {bytes_per_token:,.0f} "
                    f"x 86400 / ({dep.drives:g} x {dep.drive_capacity_bytes / 1e12:g} TB)" if bound == "prefill" else
                    "host DWPD per drive = computed tokens/s x b x 86400 / (D x CAP) (the drives, not prefill, "
                    f"bound the rate) = {computed:,.3g} x {bytes_per_token:,.0f} x 86400 / ({dep.drives:g} x "
                    f"{dep.drive_capacity_bytes / 1e12:g} TB)") + f" = {first_principles:.3g}; "
                   "simulated write-through writes whole block slots (partial blocks included): "
                   f"{dwpd_host:.3g}",
        "what_lowers_it": "every computed block is written under write-through, so hits lower the work, not the "
                          "writes per computed token: only admission (write fewer blocks), larger or more drives, "
                          "or fewer GPUs per drive lower DWPD; a retention limit lowers the capacity needed "
                          "(write rate x retention), not the writes",
    }


def against_rating(scaled: dict, *, rated_dwpd: float, warranty_years: float) -> dict:
    """What the deployment's write rate does to drives of a rated class: each drive's life, and the fewest drives
    of the same capacity that keep within the rating.

    Life is the rating's NAND budget (TBW x its reference WAF) spent at the workload's WAF
    (:func:`kvbench.analysis.endurance.endurance`): warranty x rated DWPD / rating-equivalent DWPD. Under
    write-through the drives' total write rate is set by the GPUs' missed tokens, not by how many drives share
    it (:func:`scale`), so the rating-equivalent DWPD per drive falls as 1/D and the drives needed are
    ceil(D x rating-equivalent DWPD / rated DWPD)."""
    rating = Rating(dwpd=rated_dwpd, warranty_years=warranty_years, reference_waf=scaled["reference_waf"])
    e = endurance(bytes_per_day(scaled["write_bytes_per_s_per_drive"]), scaled["drive_capacity_bytes"],
                  waf=scaled["workload_waf"], rating=rating)
    return {"rated_dwpd": rated_dwpd, "warranty_years": warranty_years, "lifetime_years": e.lifetime_years,
            "within_rating": scaled["dwpd_rating_equivalent_per_drive"] <= rated_dwpd,
            "drives_within_rating": drives_within_rating(scaled["drives"], scaled["dwpd_rating_equivalent_per_drive"],
                                                         rated_dwpd)}
