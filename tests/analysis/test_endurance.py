"""Endurance arithmetic on hand-computed cases."""

from __future__ import annotations

import math

import pytest

from kvbench.analysis.endurance import (Rating, endurance, endurance_residence_s, rating_equivalent_dwpd,
                                        required_dwpd)
from kvbench.errors import SpecError

TB = 10**12


def test_required_dwpd_hand_case():
    # 7.68 TB drive receiving 23.04 TB/day -> 3 DWPD
    assert required_dwpd(23.04 * TB, 7.68 * TB) == pytest.approx(3.0)
    # a slot store at WAF 4 against a rating measured at WAF 2 wears the NAND like 6 DWPD of the rating's workload
    assert rating_equivalent_dwpd(3.0, 4.0, 2.0) == pytest.approx(6.0)
    # 1 DWPD rated, WAF 4 vs reference 2, 90% fill: the tier must keep KV 86400 x 0.9 x 4 / 2 s = 43.2 h
    assert endurance_residence_s(1.0, waf=4.0, reference_waf=2.0, store_fill=0.9) == pytest.approx(155_520.0)
    with pytest.raises(SpecError):
        endurance_residence_s(0.0, waf=1.0, reference_waf=1.0)


def test_lifetime_against_dwpd_rating():
    cap = 3.84 * TB
    # rated 1 DWPD for 5 years: TBW = 3.84 TB * 365 * 5 = 7008 TB
    r = Rating(dwpd=1.0, warranty_years=5)
    assert r.tbw(cap) == pytest.approx(7008 * TB)
    # writing 2 drive-writes per day uses it up in 2.5 years
    e = endurance(2 * cap, cap, waf=1.8, rating=r)
    assert e.dwpd == pytest.approx(2.0)
    assert e.nand_bytes_per_day == pytest.approx(2 * cap * 1.8)
    assert e.lifetime_years == pytest.approx(2.5)
    assert e.rated_dwpd == pytest.approx(1.0)


def test_lifetime_against_tbw_and_reference_waf():
    cap = 7.68 * TB
    r = Rating(tbw_bytes=14_000 * TB, warranty_years=5, reference_waf=2.0)
    # 10 TB/day host at WAF 4: NAND budget 28,000 TB / (40 TB/day * 365) = 1.918 years
    e = endurance(10 * TB, cap, waf=4.0, rating=r)
    assert e.lifetime_years == pytest.approx(28_000 / (40 * 365))
    # a log-structured layout at WAF 1 lasts 4x longer than a slot layout at WAF 4 on the same rating
    e1 = endurance(10 * TB, cap, waf=1.0, rating=r)
    assert e1.lifetime_years / e.lifetime_years == pytest.approx(4.0)
    # without a reference WAF the rating is read as host bytes: 14,000 / (10 * 365)
    e2 = endurance(10 * TB, cap, waf=4.0, rating=Rating(tbw_bytes=14_000 * TB))
    assert e2.lifetime_years == pytest.approx(14_000 / 3650)


def test_nothing_written_lasts_forever_and_bad_values_raise():
    assert endurance(0, TB, rating=Rating(dwpd=1)).lifetime_years == math.inf
    with pytest.raises(SpecError):
        endurance(TB, TB, waf=0.5)
    with pytest.raises(SpecError):
        endurance(TB, 0)
    with pytest.raises(SpecError):
        endurance(TB, TB, rating=Rating())
    with pytest.raises(SpecError):
        Rating(dwpd=-1).validate()


def test_default_warranty_zero_writes_and_bad_wafs_by_hand():
    # the default warranty is 5 years: 1 DWPD on 1 TB -> 1 TB x 365 x 5 = 1,825 TB
    assert Rating(dwpd=1.0).tbw(TB) == pytest.approx(1825 * TB)
    # nothing written never wears a drive out, also when the rating's reference WAF is known
    assert endurance(0, TB, waf=3.0, rating=Rating(dwpd=1, reference_waf=2.0)).lifetime_years == math.inf
    for waf, ref in ((0.0, 2.0), (2.0, 0.0)):
        with pytest.raises(SpecError):
            rating_equivalent_dwpd(1.0, waf, ref)


def test_a_warranty_under_a_year_is_valid():
    # 6 months at 2 DWPD on 1 TB: 2 x 1 TB x 365 x 0.5 = 365 TB
    r = Rating(dwpd=2.0, warranty_years=0.5).validate()
    assert r.tbw(TB) == pytest.approx(365 * TB)
    with pytest.raises(SpecError):
        Rating(dwpd=2.0, warranty_years=0.0).validate()


def test_half_a_year_of_warranty_and_half_a_byte_a_day_by_hand():
    """A 0.5-year warranty is a rating (only <= 0 is refused); 0.5 host bytes/day against a 1 TB, 1-DWPD,
    0.5-year host rating lasts TBW / (0.5 x 365) years, finite: 1e12 x 365 x 0.5 / (0.5 x 365) = 1e12 years."""
    r = Rating(dwpd=1.0, warranty_years=0.5)
    assert r.validate() is r
    e = endurance(0.5, 1e12, rating=r)
    assert e.lifetime_years == pytest.approx(1e12) and math.isfinite(e.lifetime_years)
    assert endurance(0.0, 1e12, rating=r).lifetime_years == math.inf


# --- drive economics: the one module every other calls (hand arithmetic) -----------------------------------
def test_dwpd_residence_and_drive_count_by_hand():
    from kvbench.analysis.endurance import (bytes_per_day, drives_for, drives_within_rating, dwpd,
                                            dwpd_at_residence, residence_s)

    # 7.68 TB written at 1 GB/s: 86.4 TB a day = 11.25 drive writes; a block stays 7,680 s = 2.133 h
    assert bytes_per_day(1e9) == 86.4 * TB
    assert dwpd(1e9, 7.68 * TB) == pytest.approx(11.25)
    assert residence_s(7.68 * TB, 1e9) == pytest.approx(7680.0)
    assert dwpd_at_residence(7680.0) == pytest.approx(11.25)      # 86,400 / 7,680: the same figure
    assert residence_s(7.68 * TB, 0.0) is None                     # never written: no residence
    # 98.3 TB on 7.68 TB drives: 12.8 -> 13 drives; exactly 2 drives' worth stays 2
    assert drives_for(98.3 * TB, 7.68 * TB) == 13
    assert drives_for(15.36 * TB, 7.68 * TB) == 2
    assert drives_for(1.0, 7.68 * TB) == 1
    assert drives_for(1.0, None) is None
    # one drive at 14.1 rating-equivalent DWPD against a 3-DWPD rating: 14.1 / 3 = 4.7 -> 5 drives
    assert drives_within_rating(1, 14.1, 3.0) == 5
    assert drives_within_rating(2, 1.5, 3.0) == 1                 # 1.0 exactly: one drive, not two
    with pytest.raises(SpecError):
        dwpd(1e9, 0.0)
    with pytest.raises(SpecError):
        drives_within_rating(1, 1.0, 0.0)


def test_lifetime_years_by_hand():
    from kvbench.analysis.endurance import lifetime_years

    cap = 3.84 * TB
    # 2 drive writes a day (W = 2 x 3.84 TB / 86,400 s) on a 1-DWPD, 5-year drive, WAF = reference WAF: 2.5 years
    w = 2 * cap / 86_400
    assert lifetime_years(w, cap, waf=2.0, rated_dwpd=1.0, warranty_years=5, reference_waf=2.0) == pytest.approx(2.5)
    # the same writes at WAF 4 against a rating measured at WAF 2 wear the NAND twice as fast: 1.25 years
    assert lifetime_years(w, cap, waf=4.0, rated_dwpd=1.0, warranty_years=5, reference_waf=2.0) == pytest.approx(1.25)


def test_drive_bill_by_hand():
    from kvbench.analysis.cost import Prices, SsdClass
    from kvbench.analysis.endurance import drive_bill

    cls = SsdClass("tlc", usd_per_gb=0.10, dwpd=1.0, warranty_years=5.0, reference_waf=2.0,
                   drive_capacity_bytes=7.68 * TB)
    prices = Prices("p", "2025", "assumption", dram_usd_per_gb=3.65, dram_service_years=5.0, ssd={"tlc": cls},
                    gpu_usd_per_hour=3.6)
    # 15.36 TB written at 177,777.8 B/s: 15.36 TB/day x 1 ... = 1 host DWPD; WAF 4 vs reference 2: 2 equivalent
    w = 15.36 * TB / 86_400
    b = drive_bill(cls, ssd_bytes=15.36 * TB, write_bytes_per_s=w, waf=4.0, dram_bytes=1e12,
                   recomputed_tokens_per_day=36_000 * 86_400, tokens_per_s=36_000, prices=prices)
    assert b.dwpd_host == pytest.approx(1.0)
    assert b.dwpd_rating_equivalent == pytest.approx(2.0)
    assert b.lifetime_years == pytest.approx(2.5)                 # 5 years x 1 rated / 2 equivalent
    assert b.drives == 2
    # DRAM: 1,000 GB x $3.65 / (5 x 365 days) = $2/day; SSD: 15,360 GB x $0.10 over 2.5 years = $1.6833/day;
    # GPU: a whole GPU-day of prefill at $3.6/h = $86.4/day
    assert b.usd_per_day["dram"] == pytest.approx(2.0)
    assert b.usd_per_day["ssd"] == pytest.approx(1536 / (2.5 * 365))
    assert b.usd_per_day["gpu"] == pytest.approx(86.4)
    assert b.usd_per_day["total"] == pytest.approx(2.0 + 1536 / 912.5 + 86.4)
    # no steady state: DWPD and life unknown, the SSD spread over its warranty
    n = drive_bill(cls, ssd_bytes=15.36 * TB, write_bytes_per_s=None, waf=4.0, dram_bytes=0,
                   recomputed_tokens_per_day=0, tokens_per_s=36_000, prices=prices)
    assert n.dwpd_host is None and n.lifetime_years is None
    assert n.usd_per_day["ssd"] == pytest.approx(1536 / (5 * 365))


# mutation survivors
def test_capacities_below_one_byte_are_capacities_and_only_positive_writes_give_a_residence():
    """The guards refuse capacities <= 0, not small ones: half a byte is a capacity (never rounded to 1)."""
    from kvbench.analysis.endurance import drives_for, residence_s

    assert residence_s(0.5, 1.0) == 0.5                      # 0.5 B / 1 B/s
    assert residence_s(1.0, 0.5) == 2.0                      # written at half a byte a second: 2 s
    with pytest.raises(SpecError):
        residence_s(0.0, 1e9)                                # no store has no residence, it is refused
    assert residence_s(TB, -1.0) is None                     # a negative rate writes nothing: no residence
    assert required_dwpd(1.0, 0.5) == 2.0                    # 1 B a day on 0.5 B
    assert drives_for(1.0, 0.5) == 2                         # 1 B on drives of 0.5 B
    assert endurance_residence_s(0.5, waf=1.0, reference_waf=1.0) == 172_800.0   # a 0.5-DWPD rating: 2 days
    assert rating_equivalent_dwpd(1.0, 0.5, 0.5) == 1.0      # any positive WAFs are accepted here


def test_drive_counts_at_the_edges_by_hand():
    from kvbench.analysis.endurance import drives_for, drives_within_rating

    assert drives_for(0.0, 7.68 * TB) == 0                   # nothing to hold: no drive
    assert drives_for(0.5, 7.68 * TB) == 1                   # half a byte still needs a drive
    # the ceil forgives 1e-9 of a drive (float noise), not 1.5e-9: 2 + 1.5e-9 drives' worth is 3 drives
    assert drives_for(2 * TB + 1500.0, TB) == 3
    assert drives_for(2 * TB + 500.0, TB) == 2
    # drives_within_rating forgives 1e-12 of the need, not 1.5e-12
    assert drives_within_rating(1, 3.0 * (1 + 1.5e-12), 3.0) == 2
    assert drives_within_rating(1, 3.0 * (1 + 0.5e-12), 3.0) == 1
    assert drives_within_rating(1, 1.0, 0.5) == 2            # a 0.5-DWPD rating is a rating


def test_a_waf_between_1_and_2_is_a_waf_and_just_below_1_is_noise():
    e = endurance(TB, TB, waf=1.5)
    assert e.nand_bytes_per_day == 1.5 * TB
    assert endurance(TB, TB, waf=1 - 5e-10).waf == 1 - 5e-10          # within 1e-9 of 1: float noise, accepted
    for below in (1 - 1.5e-9, 1 - 1e-6):                              # beyond the 1e-9 tolerance: refused
        with pytest.raises(SpecError):
            endurance(TB, TB, waf=below)


def test_a_drive_bill_with_nothing_recomputed_pays_no_gpu():
    from kvbench.analysis.cost import Prices, SsdClass
    from kvbench.analysis.endurance import drive_bill

    cls = SsdClass("tlc", usd_per_gb=0.10, dwpd=1.0, warranty_years=5.0, reference_waf=2.0,
                   drive_capacity_bytes=7.68 * TB)
    prices = Prices("p", "2025", "assumption", dram_usd_per_gb=3.65, dram_service_years=5.0, ssd={"tlc": cls},
                    gpu_usd_per_hour=3.6)
    for tokens in (0.0, -5.0):                                 # a negative count is clamped to none
        b = drive_bill(cls, ssd_bytes=7.68 * TB, write_bytes_per_s=None, waf=1.0, dram_bytes=0,
                       recomputed_tokens_per_day=tokens, tokens_per_s=1.0, prices=prices)
        assert b.usd_per_day["gpu"] == 0.0


def test_a_rating_of_zero_is_refused_and_a_small_one_is_a_rating():
    for r in (Rating(dwpd=0.0), Rating(tbw_bytes=0.0), Rating(dwpd=1.0, reference_waf=0.0)):
        with pytest.raises(SpecError):
            r.validate()
    r = Rating(dwpd=0.5, reference_waf=0.5)
    assert r.validate() is r


def test_defaults_and_half_a_nand_byte_a_day_by_hand():
    # the default WAF is 1: NAND bytes are host bytes
    e = endurance(TB, TB)
    assert (e.waf, e.nand_bytes_per_day, e.lifetime_years, e.lifetime_basis) == (1.0, TB, None, "no rating given")
    # the default store fill is 1: a 1-DWPD rating at WAF = reference keeps KV a day
    assert endurance_residence_s(1.0, waf=2.0, reference_waf=2.0) == 86_400.0
    # 0.5 NAND bytes a day against a 1 TB, 1-DWPD, 5-year rating at reference WAF 1: a finite
    # 1e12 x 365 x 5 / (0.5 x 365) = 1e13 years, not forever
    r = Rating(dwpd=1.0, reference_waf=1.0)
    assert endurance(0.5, 1e12, rating=r).lifetime_years == pytest.approx(1e13)


def test_the_lifetime_basis_in_words():
    r = Rating(tbw_bytes=14_000 * TB, reference_waf=2.0)
    assert endurance(10 * TB, 7.68 * TB, waf=4.0, rating=r).lifetime_basis == \
        "NAND budget: TBW x reference WAF 2, spent at WAF 4"
    assert endurance(10 * TB, 7.68 * TB, waf=1.234, rating=Rating(dwpd=1.0)).lifetime_basis == \
        "host TBW (rating taken at this workload's WAF)"
    e = endurance(10 * TB, 7.68 * TB, waf=1.2345, rating=Rating(dwpd=1.0, reference_waf=2.5))
    assert e.lifetime_basis == "NAND budget: TBW x reference WAF 2.5, spent at WAF 1.23"
    assert e.rated_tbw_bytes == pytest.approx(7.68 * TB * 365 * 5) and e.rated_dwpd == pytest.approx(1.0)
