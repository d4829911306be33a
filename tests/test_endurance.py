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
