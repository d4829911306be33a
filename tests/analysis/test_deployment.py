"""Deployment scale (kvbench.analysis.deployment): parsing --deployment (every field, its bounds), the fixed point
of request rate and hit ratio at a server's prefill work, the per-drive writes and DWPD by hand, and the drives a
rating allows. The plan's use of it (build_plan with a deployment) is in test_plan.py."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kvbench.analysis.curves.capacity import HitCurve
from kvbench.analysis.deployment import MAX_COUNT, against_rating, parse_deployment, scale
from kvbench.errors import SpecError
from tests.analysis.test_plan import random_prefix_trace


@pytest.mark.parametrize("spec,match", [
    ("gpus=8,drives=8,drive_capacity=7.68TB", "missing utilization"),
    ("gpus=8,drives=8,drive_capacity=7.68TB,utilization=1.5", "above 1"),
    ("gpus=0,drives=8,drive_capacity=7.68TB,utilization=0.5", "must be > 0"),
    ("gpus=8,drives=8,drive_capacity=lots,utilization=0.5", "drive_capacity"),
    ("gpus=8,disks=8,drive_capacity=7.68TB,utilization=0.5",
     "--deployment: unknown field 'disks' \\(fix: known fields: gpus, drives, drive_capacity, utilization;"),
    ("gpus=8,drives=8,drive_capacity=0,utilization=0.5", "drive_capacity must be > 0"),
])
def test_bad_deployment_names_the_field(spec, match):
    with pytest.raises(SpecError, match=match):
        parse_deployment(spec)


def test_a_one_byte_drive_is_refused_and_a_prefill_rate_must_be_positive():
    for cap in ("1", "1B", "999999", "1001TB"):            # issue 30: a drive holds 1 MB to 1 PB
        with pytest.raises(SpecError, match="is not a drive's size"):
            parse_deployment(f"gpus=1,drives=1,drive_capacity={cap},utilization=0.5")
    assert parse_deployment("gpus=1,drives=1,drive_capacity=1MB,utilization=0.5").drive_capacity_bytes == 1e6
    curve = HitCurve.from_arrays([1.0, 10.0], [0.1, 0.5], block_bytes=1000)
    dep = parse_deployment("gpus=1,drives=2,drive_capacity=1GB,utilization=0.5")
    kw = dict(hit_curve=curve, trace_rate=2.0, tokens_per_request=100.0, blocks_per_request=1.0, block_tokens=100,
              block_bytes=1000, bytes_per_token=10.0, waf=1.0, reference_waf=1.0)
    with pytest.raises(SpecError, match="needs a prefill rate"):
        scale(dep, tokens_per_s_per_gpu=0.0, **kw)
    # 0.5 token/s per GPU is a (slow) rate: 0.25 missed tokens/s; the drives (2 x 1 GB) hold every block, so
    # h = 0.5 and the rate is 0.25 / (100 x 0.5) = 0.005 requests/s, 1/400 of the trace's users
    out = scale(dep, tokens_per_s_per_gpu=0.5, **kw)
    assert out["hit_ratio"] == 0.5 and out["requests_per_s"] == pytest.approx(0.005)
    assert out["trace_copies"] == pytest.approx(0.0025)
    # writes 0.005 x 0.5 x 1 block x 1000 B = 2.5 B/s over 2 GB: residence 8e8 s; DWPD far below 1, still a ratio
    assert out["write_bytes_per_s"] == pytest.approx(2.5) and out["residence_s"] == pytest.approx(2e9 / 2.5)
    assert out["dwpd_first_principles"] == pytest.approx(0.25 * 10 * 86400 / 2e9)
    assert out["slot_rounding"] == pytest.approx(1.0)


def test_against_rating_by_hand():
    """Life = warranty x rated / rating-equivalent; drives = ceil(D x rating-equivalent / rated), exact at an
    integer, at least one."""
    base = {"drives": 2.0, "drive_capacity_bytes": 1e12, "workload_waf": 2.0, "reference_waf": 4.0}
    # 3 host DWPD at WAF 2 against a reference WAF 4: 1.5 rating-equivalent on 3-DWPD drives, 5 years
    out = against_rating({**base, "write_bytes_per_s_per_drive": 3e12 / 86400, "dwpd_rating_equivalent_per_drive": 1.5},
                         rated_dwpd=3.0, warranty_years=5.0)
    assert out["lifetime_years"] == pytest.approx(10.0) and out["within_rating"]
    assert out["drives_within_rating"] == 1          # 2 x 1.5 / 3 = 1 exactly
    # 12 host DWPD: 6 rating-equivalent; 2 x 6 / 3 = 4 drives exactly, life 5 x 3 / 6 = 2.5 years
    out = against_rating({**base, "write_bytes_per_s_per_drive": 12e12 / 86400, "dwpd_rating_equivalent_per_drive": 6.0},
                         rated_dwpd=3.0, warranty_years=5.0)
    assert out["lifetime_years"] == pytest.approx(2.5) and not out["within_rating"]
    assert out["drives_within_rating"] == 4
    # exactly at the rating: within it; far below: still one drive
    at = against_rating({**base, "write_bytes_per_s_per_drive": 6e12 / 86400, "dwpd_rating_equivalent_per_drive": 3.0},
                        rated_dwpd=3.0, warranty_years=5.0)
    assert at["within_rating"] and at["drives_within_rating"] == 2 and at["lifetime_years"] == pytest.approx(5.0)
    low = against_rating({**base, "write_bytes_per_s_per_drive": 0.03e12 / 86400,
                          "dwpd_rating_equivalent_per_drive": 0.015}, rated_dwpd=3.0, warranty_years=5.0)
    assert low["drives_within_rating"] == 1 and low["lifetime_years"] == pytest.approx(1000.0)


def test_deployment_of_a_key_sampled_curve_reads_the_sample_share_of_the_store():
    """A key sample at rate r holds r of the workload's blocks, so its curve is read at r x the store's blocks
    per copy. A curve linear up to 1,000 blocks: 100 GB of 1 MB blocks = 100,000 blocks, r = 0.004 -> 400 sampled
    blocks, per copy; checked against the curve read by hand at the solved rate."""
    caps = np.arange(1, 1001, dtype=np.float64)
    curve = HitCurve.from_arrays(caps, 0.8 * caps / 1000, block_bytes=10**6)
    dep = parse_deployment("gpus=1,drives=1,drive_capacity=100GB,utilization=1")
    kw = dict(tokens_per_s_per_gpu=10_000.0, hit_curve=curve, trace_rate=1.0, tokens_per_request=1000.0,
              blocks_per_request=2.0, block_tokens=512, block_bytes=10**6, bytes_per_token=2000.0, waf=1.0,
              reference_waf=1.0)
    for r in (1.0, 0.004):
        out = scale(dep, sample_rate=r, **kw)
        copies = out["requests_per_s"] / 1.0
        assert out["hit_ratio"] == pytest.approx(float(curve.at(100e9 / 10**6 * r / copies)), rel=1e-12)
        assert out["requests_per_s"] * 1000.0 * (1 - out["hit_ratio"]) == pytest.approx(10_000.0, rel=1e-9)
    assert scale(dep, sample_rate=0.004, **kw)["hit_ratio"] < scale(dep, sample_rate=1.0, **kw)["hit_ratio"]


def test_deployment_fixed_point_where_the_hit_ratio_depends_on_the_share_of_drives():
    """Drives small enough that each copy of the users gets a share the curve still climbs on: the rate, hit
    ratio, writes and residence recomputed by hand from the exact curve."""
    from kvbench.analysis.curves.profile import exact_profile

    tr = random_prefix_trace(7, n=400)
    bb, bpt = 512 * 1000, 1000
    curve = HitCurve.from_profile(exact_profile(tr), block_bytes=bb)
    dep = parse_deployment("gpus=2,drives=1,drive_capacity=100MB,utilization=1")       # utilization 1 is allowed
    n, refs = tr.n_requests, tr.n_blocks
    trace_rate = n / tr.duration_s
    tok, bpr = float(tr.input_tokens.mean()), refs / n
    out = scale(dep, tokens_per_s_per_gpu=5_000.0, hit_curve=curve, trace_rate=trace_rate, tokens_per_request=tok,
                blocks_per_request=bpr, block_tokens=512, block_bytes=bb, bytes_per_token=bpt, waf=2.0,
                reference_waf=4.0)
    rate, h = out["requests_per_s"], out["hit_ratio"]
    copies = rate / trace_rate
    assert h == float(curve.at(100e6 / bb / copies))                 # each copy's share of the drive
    assert 0 < h < curve.infinite_hit_ratio                          # the share matters here
    assert rate * tok * (1 - h) == pytest.approx(2 * 5_000.0, rel=1e-9)
    wb = rate * (1 - h) * bpr * bb
    assert out["write_bytes_per_s"] == pytest.approx(wb)
    assert out["residence_s"] == pytest.approx(100e6 / wb)
    assert out["trace_copies"] == pytest.approx(rate / trace_rate) and trace_rate != 1
    assert out["dwpd_rating_equivalent_per_drive"] == pytest.approx(out["dwpd_host_per_drive"] / 2)
    assert out["slot_rounding"] == pytest.approx(out["dwpd_host_per_drive"] / (2 * 5_000.0 * bpt * 86400 / 100e6))
    # a 200 MB drive the store fills to half holds what the 100 MB drive held: the same rate and hit ratio
    half = scale(parse_deployment("gpus=2,drives=1,drive_capacity=200MB,utilization=1"), tokens_per_s_per_gpu=5_000.0,
                 hit_curve=curve, trace_rate=trace_rate, tokens_per_request=tok, blocks_per_request=bpr,
                 block_tokens=512, block_bytes=bb, bytes_per_token=bpt, waf=2.0, reference_waf=4.0, store_fill=0.5)
    assert (half["requests_per_s"], half["hit_ratio"]) == pytest.approx((rate, h))
    assert half["residence_s"] == pytest.approx(200e6 * 0.5 / wb)

def test_a_hit_ratio_of_one_reports_the_rate_the_drives_bound_not_the_bracket_end():
    """Every prompt token hits while a copy of the users holds one block of the drives: 2 x 1 GB of 1,000 B blocks
    = 2e6 blocks, so at trace rate 2/s the 2e6-th copy (4e6 requests/s) is the last that holds its block; above it
    the hit ratio is 0 and the GPUs would compute 100 tokens a request. Whatever the GPUs' rate (a bracket sized by
    it once reported 2.5e6 at 0.5 token/s and, at 1 token/s, 4e6 with hit ratio 0 and 4 GB/s of writes), the
    deployment sustains 4e6 requests/s, every token hit, nothing computed or written, and says the drives bound it."""
    curve = HitCurve.from_arrays([1.0, 10.0], [1.0, 1.0], block_bytes=1000)
    dep = parse_deployment("gpus=1,drives=2,drive_capacity=1GB,utilization=0.5")
    kw = dict(hit_curve=curve, trace_rate=2.0, tokens_per_request=100.0, blocks_per_request=1.0, block_tokens=100,
              block_bytes=1000, bytes_per_token=10.0, waf=1.0, reference_waf=1.0)
    for p in (0.5, 1.0, 1000.0):
        out = scale(dep, tokens_per_s_per_gpu=p, **kw)
        assert out["requests_per_s"] == pytest.approx(4e6, rel=1e-12), p
        assert out["hit_ratio"] == 1.0 and out["write_bytes_per_s"] == 0.0 and out["dwpd_host_per_drive"] == 0.0
        assert out["computed_tokens_per_s"] == 0.0 and out["prefill_tokens_per_s"] == 0.5 * p
        assert out["rate_bound"] == "store" and "every prompt token hits" in out["rate_note"]
        assert out["residence_s"] is None and out["slot_rounding"] is None


def test_a_root_on_a_step_reports_the_sustained_side_and_a_root_on_a_flat_the_gpus():
    """Hit ratio 0.5 while a copy holds a block (up to 4e6 requests/s, as above), 0 beyond. At 500 missed tokens/s
    the GPUs bound the rate at 500 / 50 = 10/s; at 5e8, 5e8 / 100 = 5e6/s with nothing hit; at 3e8 the root is on
    the step: 3e8 / 50 = 6e6 is past it and 3e8 / 100 = 3e6 before it, so 4e6/s at hit ratio 0.5, the GPUs
    computing 4e6 x 50 = 2e8 of their 3e8 tokens/s and the drives written 4e6 x 0.5 x 1,000 B = 2e9 B/s."""
    curve = HitCurve.from_arrays([1.0, 10.0], [0.5, 0.5], block_bytes=1000)
    dep = parse_deployment("gpus=1,drives=2,drive_capacity=1GB,utilization=1")
    kw = dict(hit_curve=curve, trace_rate=2.0, tokens_per_request=100.0, blocks_per_request=1.0, block_tokens=100,
              block_bytes=1000, bytes_per_token=10.0, waf=1.0, reference_waf=1.0)
    for p, rate, h, bound in ((500.0, 10.0, 0.5, "prefill"), (5e8, 5e6, 0.0, "prefill"), (3e8, 4e6, 0.5, "store")):
        out = scale(dep, tokens_per_s_per_gpu=p, **kw)
        assert (out["requests_per_s"], out["hit_ratio"]) == pytest.approx((rate, h), rel=1e-12), p
        assert out["rate_bound"] == bound and (out["rate_note"] is None) == (bound == "prefill")
        assert out["write_bytes_per_s"] == pytest.approx(rate * (1 - h) * 1000, rel=1e-12)
        assert out["computed_tokens_per_s"] == pytest.approx(rate * 100 * (1 - h), rel=1e-12)
    assert out["computed_tokens_per_s"] == pytest.approx(2e8) and "2e+08 of their 3e+08" in out["rate_note"]


def test_a_curve_that_hits_at_any_share_of_the_drives_is_refused():
    """A curve that hits every token however little of the drives a copy holds: prefill bounds no rate, and the
    plan says so in one line rather than report a bracket's end."""
    class Everything:
        infinite_hit_ratio = 1.0

        def at(self, capacity_blocks):
            return np.ones(np.shape(capacity_blocks))

    dep = parse_deployment("gpus=1,drives=2,drive_capacity=1GB,utilization=0.5")
    with pytest.raises(SpecError, match="prefill bounds no request rate.*--rate"):
        scale(dep, tokens_per_s_per_gpu=1.0, hit_curve=Everything(), trace_rate=2.0, tokens_per_request=100.0,
              blocks_per_request=1.0, block_tokens=100, block_bytes=1000, bytes_per_token=10.0, waf=1.0,
              reference_waf=1.0)


# mutation survivors ------------------------------------------------------------------------------------------
def test_parse_accepts_every_bound_and_spacing():
    d = parse_deployment(" gpus = 8 , drives=4,, drive-capacity=1PB, utilization=1 ,")   # blanks, an empty field
    assert (d.gpus, d.drives, d.drive_capacity_bytes, d.utilization) == (8, 4, 1e15, 1.0)
    assert d.to_dict() == {"gpus": 8, "drives": 4, "drive_capacity_bytes": 1e15, "utilization": 1.0}
    # the largest counts: a million GPUs and drives; the smallest drive, 1 MB
    d = parse_deployment(f"gpus={MAX_COUNT},drives={MAX_COUNT},drive_capacity=1MB,utilization=0.5")
    assert (d.gpus, d.drives, d.drive_capacity_bytes) == (10**6, 10**6, 10**6)


@pytest.mark.parametrize("spec,match", [
    ("", "is empty"), ("  ", "is empty"),
    ("gpus,drives=8,drive_capacity=7.68TB,utilization=0.5", "malformed field 'gpus'"),
    ("gpus=8,gpus=8,drives=8,drive_capacity=7.68TB,utilization=0.5", "'gpus' given twice"),
    ("drives=8,utilization=0.5", "missing gpus, drive_capacity"),
    ("gpus=eight,drives=8,drive_capacity=7.68TB,utilization=0.5", "gpus='eight' is not a number"),
    ("gpus=8,drives=8,drive_capacity=7.68TB,utilization=nan", "utilization=nan must be > 0"),
    ("gpus=inf,drives=8,drive_capacity=7.68TB,utilization=0.5", "gpus=inf must be > 0"),
    ("gpus=8,drives=-1,drive_capacity=7.68TB,utilization=0.5", "drives=-1 must be > 0"),
    ("gpus=1.5,drives=8,drive_capacity=7.68TB,utilization=0.5", "gpus=1.5 must be a whole number"),
    ("gpus=8,drives=1000001,drive_capacity=7.68TB,utilization=0.5", "drives=1000001 must be a whole number"),
    ("gpus=8,drives=8,drive_capacity=1000000000000001,utilization=0.5", "is not a drive's size"),
])
def test_each_bad_field_is_named(spec, match):
    with pytest.raises(SpecError, match=match):
        parse_deployment(spec)


def test_scale_by_hand_with_partial_blocks():
    # 2 GPUs x 1,000 tok/s x 0.5 = 1,000 missed tokens/s; 100 tokens a request, h = 0.5 (4 x 1 GB of 1,000 B
    # blocks per copy is far past the curve's top) -> 20 requests/s, 10 copies of a 2 req/s trace. Writes: 20 x 0.5
    # x 1.5 blocks (a partial block is a whole slot) x 1,000 B = 15,000 B/s, 3,750 per drive: 0.324 DWPD; first
    # principles 1,000 tok/s x 10 B x 86,400 / 4e9 = 0.216, so the slots round up by 1.5
    curve = HitCurve.from_arrays([1.0, 10.0], [0.1, 0.5], block_bytes=1000)
    dep = parse_deployment("gpus=2,drives=4,drive_capacity=1GB,utilization=0.5")
    out = scale(dep, tokens_per_s_per_gpu=1000.0, hit_curve=curve, trace_rate=2.0, tokens_per_request=100.0,
                blocks_per_request=1.5, block_tokens=100, block_bytes=1000, bytes_per_token=10.0, waf=2.0,
                reference_waf=4.0)
    assert out["prefill_tokens_per_s"] == 1000.0 and out["prefill_tokens_per_s_per_gpu"] == 1000.0
    assert out["requests_per_s"] == pytest.approx(20.0, rel=1e-12) and out["hit_ratio"] == 0.5
    assert out["trace_copies"] == pytest.approx(10.0, rel=1e-12)
    assert out["write_bytes_per_s"] == pytest.approx(15_000.0, rel=1e-12)
    assert out["write_bytes_per_s_per_drive"] == pytest.approx(3_750.0, rel=1e-12)
    assert out["dwpd_host_per_drive"] == pytest.approx(0.324, rel=1e-12)
    assert out["dwpd_first_principles"] == pytest.approx(0.216, rel=1e-12)
    assert out["slot_rounding"] == pytest.approx(1.5, rel=1e-12)
    assert out["dwpd_rating_equivalent_per_drive"] == pytest.approx(0.162, rel=1e-12)      # x 2 / 4
    assert (out["workload_waf"], out["reference_waf"]) == (2.0, 4.0)
    assert out["residence_s"] == pytest.approx(4e9 / 15_000.0, rel=1e-12)
    assert (out["gpus"], out["drives"], out["drive_capacity_bytes"], out["utilization"]) == (2, 4, 1e9, 0.5)
    assert "= 0.5 x 1,000 x 2 x 10 x 86400 / (4 x 0.001 TB) = 0.216; " in out["formula"]
    assert out["formula"].endswith(": 0.324")


def test_the_fixed_point_on_a_climbing_step_curve_by_hand():
    # h(c) = floor(c) / 1000 for c blocks per copy, up to 0.9 at 900; a trace of 1 req/s, 100 tokens a request,
    # 1,000 missed tokens/s: the rate L solves L x 100 x (1 - h(S / L)) = 1000 for a store of S blocks
    caps = np.arange(1, 901, dtype=np.float64)
    curve = HitCurve.from_arrays(caps, caps / 1000, block_bytes=1000)
    kw = dict(tokens_per_s_per_gpu=1000.0, hit_curve=curve, trace_rate=1.0, tokens_per_request=100.0,
              blocks_per_request=1.0, block_tokens=100, block_bytes=1000, bytes_per_token=10.0, waf=1.0,
              reference_waf=1.0)
    # 1 GB = 1e6 blocks: at the top (h 0.9) L = 100, where each copy holds 10,000 blocks >= 900
    out = scale(parse_deployment("gpus=1,drives=1,drive_capacity=1GB,utilization=1"), **kw)
    assert out["hit_ratio"] == pytest.approx(0.9) and out["requests_per_s"] == pytest.approx(100.0, rel=1e-9)
    # 50 MB = 50,000 blocks: L (1 - floor(5e4 / L) / 1000) rises with L and first reaches 10 where the step falls
    # from 834 to 833 blocks, L = 5e4 / 834 = 59.95 (59.95 x 0.167 = 10.01 >= 10; just below it, x 0.166 = 9.95):
    # the rate is that jump and the hit ratio the curve's at it, 834 blocks a copy: 0.834, the GPUs computing
    # 9.95 of their 10 tokens/s (just above it they would need 10.01, more than they have: the step above is
    # no state the deployment sustains)
    out = scale(parse_deployment("gpus=1,drives=1,drive_capacity=50MB,utilization=1"), **kw)
    assert out["requests_per_s"] == pytest.approx(5e4 / 834, rel=1e-12) and out["hit_ratio"] == pytest.approx(0.834)
    assert out["trace_copies"] == pytest.approx(5e4 / 834, rel=1e-12)
    assert out["write_bytes_per_s"] == pytest.approx(5e4 / 834 * 0.166 * 1000, rel=1e-9)
    assert out["computed_tokens_per_s"] == pytest.approx(5e4 / 834 * 100 * 0.166, rel=1e-9)
    assert out["rate_bound"] == "prefill" and out["rate_note"] is None        # 99.5% of the GPUs' work


def test_a_root_the_bisection_lands_on_is_returned_exactly():
    # h = 0.6 on shares of 1-99 blocks, 0.75 from 100: a 1,000-block store of a 1 req/s trace, 1,000 missed
    # tokens/s of 100-token requests. The bracket is [1000 / 100, 1000 / 25] = [10, 40]; its first midpoint, 25
    # requests/s (40 blocks a copy, h = 0.6), misses exactly 25 x 40 = 1,000 tokens/s: the root, returned as is
    curve = HitCurve.from_arrays([1.0, 100.0], [0.6, 0.75], block_bytes=1000)
    out = scale(parse_deployment("gpus=1,drives=1,drive_capacity=1MB,utilization=1"), tokens_per_s_per_gpu=1000.0,
                hit_curve=curve, trace_rate=1.0, tokens_per_request=100.0, blocks_per_request=1.0, block_tokens=100,
                block_bytes=1000, bytes_per_token=10.0, waf=1.0, reference_waf=1.0)
    assert out["requests_per_s"] == 25.0 and out["hit_ratio"] == 0.6


def test_a_curve_that_hits_every_token_runs_to_one_block_per_copy_not_to_a_brackets_top():
    # a curve at 1.0 from one block: while each copy keeps a block, no token is missed. 10 GB = 1e7 blocks of a
    # 1 req/s trace: 1e7 copies (requests/s) each keep one; one more and every token is missed, 100 a request, far
    # more than the GPUs' 0.5 tokens/s. So 1e7 requests/s at hit ratio 1, nothing computed or written (a missed
    # share floored at 1e-9 once put the bracket's top, 0.5 / 1e-7 = 5e6, there as the answer)
    curve = HitCurve.from_arrays([1.0], [1.0], block_bytes=1000)
    out = scale(parse_deployment("gpus=1,drives=1,drive_capacity=10GB,utilization=0.5"), tokens_per_s_per_gpu=1.0,
                hit_curve=curve, trace_rate=1.0, tokens_per_request=100.0, blocks_per_request=1.0, block_tokens=100,
                block_bytes=1000, bytes_per_token=10.0, waf=1.0, reference_waf=1.0)
    assert out["requests_per_s"] == pytest.approx(1e7, rel=1e-12) and out["hit_ratio"] == 1.0
    assert out["write_bytes_per_s"] == 0.0 and out["residence_s"] is None and out["dwpd_host_per_drive"] == 0.0
    assert out["rate_bound"] == "store"


def test_a_curve_that_hits_everything_runs_to_one_block_per_copy():
    # every reference hits in a one-block share: the work is met where the copies outgrow the store (1e6 blocks:
    # 1e6 copies of a 1 req/s trace), the jump from h = 1 to h = 0; at the jump each copy still keeps its block,
    # so the hit ratio is 1 there (just above it the GPUs would need 1e8 tokens/s of their 1,000)
    curve = HitCurve.from_arrays([1.0], [1.0], block_bytes=1000)
    dep = parse_deployment("gpus=1,drives=1,drive_capacity=1GB,utilization=1")
    out = scale(dep, tokens_per_s_per_gpu=1000.0, hit_curve=curve, trace_rate=1.0, tokens_per_request=100.0,
                blocks_per_request=1.0, block_tokens=100, block_bytes=1000, bytes_per_token=10.0, waf=1.0,
                reference_waf=1.0)
    assert out["requests_per_s"] == pytest.approx(1e6, rel=1e-12) and out["hit_ratio"] == 1.0


def test_a_root_at_the_all_miss_rate_is_returned_exactly_and_99_percent_of_the_gpus_is_prefill_bound():
    """A store of 1,000 blocks and a curve that hits only from 1,000 blocks a copy: at the all-miss rate, 1,000
    missed tokens/s / 100 = 10 requests/s (10 copies, 100 blocks each), nothing hits and the GPUs' work is met
    exactly: that rate, as is (no bracket grown past it). Then the store-bound step of the test above at the
    GPUs' rate whose 99% is, to the last bit, what they compute there: prefill-bound (at 99% or more)."""
    curve = HitCurve.from_arrays([1000.0], [0.5], block_bytes=1000)
    out = scale(parse_deployment("gpus=1,drives=1,drive_capacity=1MB,utilization=1"), tokens_per_s_per_gpu=1000.0,
                hit_curve=curve, trace_rate=1.0, tokens_per_request=100.0, blocks_per_request=1.0, block_tokens=100,
                block_bytes=1000, bytes_per_token=10.0, waf=1.0, reference_waf=1.0)
    assert (out["requests_per_s"], out["hit_ratio"], out["computed_tokens_per_s"]) == (10.0, 0.0, 1000.0)
    step = HitCurve.from_arrays([1.0, 10.0], [0.5, 0.5], block_bytes=1000)
    kw = dict(hit_curve=step, trace_rate=2.0, tokens_per_request=100.0, blocks_per_request=1.0, block_tokens=100,
              block_bytes=1000, bytes_per_token=10.0, waf=1.0, reference_waf=1.0)
    dep = parse_deployment("gpus=1,drives=2,drive_capacity=1GB,utilization=1")
    p = 202020202.02020204                          # 0.99 x p is the 4e6 x 50 tokens/s computed at the step
    out = scale(dep, tokens_per_s_per_gpu=p, **kw)
    assert out["computed_tokens_per_s"] == 0.99 * p and out["rate_bound"] == "prefill"
    assert scale(dep, tokens_per_s_per_gpu=math.nextafter(p, math.inf), **kw)["rate_bound"] == "store"


def test_a_root_that_meets_the_gpus_exactly_below_a_step_keeps_its_own_hit_ratio():
    """The climbing step curve's jump at 5e4 / 834 requests/s (test above): at 1,000 tokens/s the least rate whose
    work reaches the GPUs' lies just past the step (hit ratio 0.833, 10.012 tokens/s needed), so the one below it,
    0.834, is reported. GPUs of exactly that 10.012 (the work at that rate, to the bit) meet it there: the rate is
    the same double and its own hit ratio, 0.833, with nothing left over."""
    caps = np.arange(1, 901, dtype=np.float64)
    curve = HitCurve.from_arrays(caps, caps / 1000, block_bytes=1000)
    kw = dict(hit_curve=curve, trace_rate=1.0, tokens_per_request=100.0, blocks_per_request=1.0, block_tokens=100,
              block_bytes=1000, bytes_per_token=10.0, waf=1.0, reference_waf=1.0)
    dep = parse_deployment("gpus=1,drives=1,drive_capacity=50MB,utilization=1")
    first = scale(dep, tokens_per_s_per_gpu=1000.0, **kw)
    rate = first["requests_per_s"]
    assert first["hit_ratio"] == pytest.approx(0.834) and float(curve.at(5e4 / rate)) == pytest.approx(0.833)
    exact = rate * (100.0 * (1.0 - float(curve.at(5e4 / rate))))          # the work needed at that rate
    out = scale(dep, tokens_per_s_per_gpu=exact, **kw)
    assert out["requests_per_s"] == rate and out["hit_ratio"] == pytest.approx(0.833)
    assert out["computed_tokens_per_s"] == exact and out["rate_bound"] == "prefill"
