"""The bill's parts (kvbench.analysis.cost) by hand: price tables, overrides, and the per-day costs.

Every expected value is worked out in the comments from the prices in the test, not read back from the module.
"""

from __future__ import annotations

import math

import pytest

from kvbench.analysis.cost import (
    DEFAULT_PRICES,
    SsdClass,
    apply_overrides,
    dram_usd_per_day,
    gpu_usd_per_day,
    load_prices,
    price_path,
    prices_from_dict,
    ssd_usd_per_day,
    usd_per_recomputed_token,
)
from kvbench.errors import SpecError


def table(**over) -> dict:
    """A small, complete price table; keyword arguments replace its top-level tables."""
    d = {"name": "t", "date": "2026-01", "status": "quoted",
         "dram": {"usd_per_gb": 4.0, "service_years": 4, "source": "dimm quote"},
         "gpu": {"usd_per_hour": 2.0, "source": "cloud list"},
         "ssd": {"fast": {"usd_per_gb": 0.2, "dwpd": 3, "warranty_years": 5, "reference_waf": 2.5,
                          "drive_capacity": "6.4TB", "over_provisioning": 0.28, "label": "mixed use",
                          "source": "drive quote"},
                 "big": {"usd_per_gb": 0.05, "dwpd": 0.5}}}
    d.update(over)
    return d


# --- price tables ----------------------------------------------------------------------------------
def test_a_price_table_reads_every_field():
    p = prices_from_dict(table(), where="my.toml")
    assert (p.name, p.date, p.status, p.path) == ("t", "2026-01", "quoted", "my.toml")
    assert (p.dram_usd_per_gb, p.dram_service_years, p.gpu_usd_per_hour) == (4.0, 4.0, 2.0)
    f = p.ssd["fast"]
    assert (f.name, f.usd_per_gb, f.dwpd, f.warranty_years, f.reference_waf) == ("fast", 0.2, 3.0, 5.0, 2.5)
    assert f.drive_capacity_bytes == 6.4e12          # decimal TB: 6.4 * 10**12 bytes, as drives are sold
    assert (f.over_provisioning, f.label, f.source) == (0.28, "mixed use", "drive quote")
    assert p.sources == {"dram": "dimm quote", "gpu": "cloud list", "ssd.fast": "drive quote", "ssd.big": ""}
    assert p.overrides == ()
    d = p.to_dict()
    assert d["ssd"]["fast"] == {"usd_per_gb": 0.2, "dwpd": 3.0, "warranty_years": 5.0, "reference_waf": 2.5,
                                "reference_waf_source": "given in my.toml", "drive_capacity_bytes": 6.4e12,
                                "raw_nand_bytes": None, "over_provisioning": 0.28, "pe_cycles": None,
                                "label": "mixed use"}
    assert (d["name"], d["date"], d["status"], d["path"], d["dram_usd_per_gb"], d["dram_service_years"],
            d["gpu_usd_per_hour"], d["overrides"]) == ("t", "2026-01", "quoted", "my.toml", 4.0, 4.0, 2.0, [])
    assert d["sources"] == p.sources


def test_omitted_fields_take_their_stated_defaults():
    d = {"dram": {"usd_per_gb": 4}, "gpu": {"usd_per_hour": 2}, "ssd": {"big": {"usd_per_gb": 0.05, "dwpd": 1}}}
    p = prices_from_dict(d)
    # an undated table is an assumption; DRAM and drives are written off over 5 years
    assert (p.name, p.date, p.status, p.path) == ("", "", "assumption", "<prices>")
    assert p.dram_service_years == 5.0
    b = p.ssd["big"]
    assert (b.warranty_years, b.reference_waf, b.drive_capacity_bytes, b.over_provisioning, b.label, b.source) == \
        (5.0, None, None, None, "", "")
    assert p.sources == {"dram": "", "gpu": "", "ssd.big": ""}
    assert isinstance(p.dram_usd_per_gb, float) and isinstance(b.dwpd, float)


def test_a_binary_drive_capacity_is_taken_as_written():
    p = prices_from_dict(table(ssd={"a": {"usd_per_gb": 0.1, "dwpd": 1, "drive_capacity": "2TiB"}}))
    assert p.ssd["a"].drive_capacity_bytes == 2 * 2**40


@pytest.mark.parametrize("missing", ["dram", "ssd", "gpu"])
def test_a_missing_table_is_named(missing):
    d = table()
    del d[missing]
    with pytest.raises(SpecError, match=rf"my.toml: table \[{missing}\] is missing"):
        prices_from_dict(d, where="my.toml")
    d[missing] = 3                                   # present but not a table
    with pytest.raises(SpecError, match=rf"table \[{missing}\] is missing"):
        prices_from_dict(d, where="my.toml")


def test_an_ssd_class_that_is_not_a_table_and_an_empty_ssd_table():
    with pytest.raises(SpecError, match=r"my.toml: \[ssd.qlc\] must be a table"):
        prices_from_dict(table(ssd={"qlc": 0.05}), where="my.toml")
    with pytest.raises(SpecError, match=r"my.toml: no SSD class under \[ssd\]"):
        prices_from_dict(table(ssd={}), where="my.toml")


@pytest.mark.parametrize("bad", [0, 0.0, -1, -0.5, True, "0.1", None, math.inf, math.nan])
@pytest.mark.parametrize("place", ["dram", "gpu", "ssd.usd_per_gb", "ssd.dwpd", "ssd.reference_waf"])
def test_a_price_that_is_not_a_positive_number_names_its_field(place, bad):
    d = table()
    if place == "dram":
        d["dram"] = {**d["dram"], "usd_per_gb": bad}
        where, key = r"\[dram\]", "usd_per_gb"
    elif place == "gpu":
        d["gpu"] = {**d["gpu"], "usd_per_hour": bad}
        where, key = r"\[gpu\]", "usd_per_hour"
    else:
        key = place.split(".")[1]
        d["ssd"] = {"fast": {**d["ssd"]["fast"], key: bad}}
        where = r"\[ssd.fast\]"
        if key == "reference_waf" and bad is None:   # absent: computed by the FTL model at the class's OP
            from kvbench.analysis.drive_class import jesd219_waf

            f = prices_from_dict(d).ssd["fast"]
            assert (f.reference_waf, f.reference_waf_source) == (jesd219_waf(0.28),
                                                                 "computed: FTL model, JESD219A, op 0.28")
            return
    with pytest.raises(SpecError, match=rf"my.toml: {where}: field '{key}' must be a number > 0"):
        prices_from_dict(d, where="my.toml")


def test_the_smallest_positive_prices_are_accepted():
    d = table(dram={"usd_per_gb": 1e-300}, gpu={"usd_per_hour": 1})
    p = prices_from_dict(d)
    assert p.dram_usd_per_gb == 1e-300 and p.gpu_usd_per_hour == 1.0


def test_a_drive_capacity_that_is_not_a_size_names_the_field():
    for bad in ("lots", "-1TB", "7.68 parsecs"):
        d = table(ssd={"a": {"usd_per_gb": 0.1, "dwpd": 1, "drive_capacity": bad}})
        with pytest.raises(SpecError, match=r"my.toml: \[ssd.a\]: field 'drive_capacity' .* is not a size"):
            prices_from_dict(d, where="my.toml")


# --- presets and files -----------------------------------------------------------------------------
def test_the_shipped_preset_holds_the_numbers_its_file_states():
    # workloads/prices/2025-h2.toml, as written there
    p = load_prices()
    assert DEFAULT_PRICES == "2025-h2" and p.name == "2025-h2" and p.status == "assumption"
    assert (p.dram_usd_per_gb, p.dram_service_years, p.gpu_usd_per_hour) == (5.0, 5.0, 3.0)
    assert {k: (c.usd_per_gb, c.dwpd, c.drive_capacity_bytes) for k, c in p.ssd.items()} == {
        "tlc-1dwpd": (0.10, 1.0, 7.68e12), "tlc-3dwpd": (0.16, 3.0, 6.4e12), "qlc": (0.07, 0.3, 30.72e12)}
    assert {k: (c.raw_nand_bytes, c.pe_cycles, c.warranty_years) for k, c in p.ssd.items()} == {
        "tlc-1dwpd": (8 * 2**40, 11000, 5), "tlc-3dwpd": (8 * 2**40, 11000, 5), "qlc": (32 * 2**40, 3000, 5)}
    assert p.path.endswith("prices/2025-h2.toml") and price_path("2025-h2").name == "2025-h2.toml"
    assert str(price_path("2025-h2")) == p.path


def test_a_price_file_by_path_with_overrides(tmp_path):
    f = tmp_path / "mine.toml"
    f.write_text('name = "mine"\n[dram]\nusd_per_gb = 6\n[gpu]\nusd_per_hour = 2.5\n'
                 '[ssd.a]\nusd_per_gb = 0.08\ndwpd = 1\n')
    p = load_prices(str(f), ["gpu=4"])
    assert (p.name, p.path, p.dram_usd_per_gb, p.gpu_usd_per_hour, p.ssd["a"].usd_per_gb) == \
        ("mine", str(f), 6.0, 4.0, 0.08)
    assert p.overrides == ("gpu=4",)
    assert price_path(str(f)) == f


def test_an_unknown_preset_or_missing_file_is_a_spec_error(tmp_path):
    with pytest.raises(SpecError, match="unknown prices preset 'nope'"):
        load_prices("nope")
    with pytest.raises(SpecError, match="prices preset file not found"):
        load_prices(str(tmp_path / "absent.toml"))


# --- overrides -------------------------------------------------------------------------------------
def test_each_override_replaces_one_price_and_is_recorded():
    p0 = prices_from_dict(table())
    p = apply_overrides(p0, ["dram=8", "gpu=2.5", "ssd.big=0.04", "ssd.fast.dwpd=1", " ssd.fast.warranty_years =3",
                             "ssd.big.reference_waf=4"])
    assert (p.dram_usd_per_gb, p.gpu_usd_per_hour) == (8.0, 2.5)
    assert (p.ssd["big"].usd_per_gb, p.ssd["big"].dwpd, p.ssd["big"].reference_waf) == (0.04, 0.5, 4.0)
    assert (p.ssd["fast"].usd_per_gb, p.ssd["fast"].dwpd, p.ssd["fast"].warranty_years) == (0.2, 1.0, 3.0)
    assert p.overrides == ("dram=8", "gpu=2.5", "ssd.big=0.04", "ssd.fast.dwpd=1", "ssd.fast.warranty_years=3",
                           "ssd.big.reference_waf=4")
    # the original is untouched, and fields not overridden carry over
    assert (p0.dram_usd_per_gb, p0.ssd["big"].usd_per_gb) == (4.0, 0.05)
    assert (p.name, p.dram_service_years, p.ssd["fast"].drive_capacity_bytes) == ("t", 4.0, 6.4e12)
    # two overrides of one price are refused (kvbench.spec.fields: a repeated key), whichever spelling
    for twice in (["dram=8", "dram=9"], ["ssd.big=0.04", " ssd.big = 0.05"]):
        with pytest.raises(SpecError, match=r"^--price: key '(dram|ssd\.big)' given twice"):
            apply_overrides(p0, twice)


def test_no_overrides_is_the_same_table():
    p0 = prices_from_dict(table())
    assert apply_overrides(p0, []) is p0 and apply_overrides(p0, None) is p0 and apply_overrides(p0, ()) is p0


@pytest.mark.parametrize("item, match", [("dram", r"--price: malformed key 'dram' \(not KEY=VALUE\)"),
                                         ("dram=", r"--price: key 'dram' has no value")])
def test_an_override_that_is_not_a_pair(item, match):
    with pytest.raises(SpecError, match=match):
        apply_overrides(prices_from_dict(table()), [item])


@pytest.mark.parametrize("item", ["dram=cheap", "dram=0", "dram=-1", "dram=inf", "dram=nan",
                                  "gpu=-0.5"])
def test_an_override_that_is_not_a_positive_number(item):
    with pytest.raises(SpecError, match=r"--price .*: expected KEY=NUMBER > 0"):
        apply_overrides(prices_from_dict(table()), [item])


@pytest.mark.parametrize("item, match", [("ssd.nope=1",
                                          r"unknown key 'ssd.nope' \(fix: known keys: .*classes: fast, big;"),
                                         ("ssd.big.label=1", "unknown key 'ssd.big.label'"),
                                         ("ssd.big.drive_capacity=1", "unknown key 'ssd.big.drive_capacity'"),
                                         ("hbm=1", "unknown key 'hbm'"),
                                         ("ssd=1", "unknown key 'ssd'")])
def test_an_override_of_an_unknown_price(item, match):
    with pytest.raises(SpecError, match=match):
        apply_overrides(prices_from_dict(table()), [item])


# --- the per-day costs ------------------------------------------------------------------------------
def test_dram_is_written_off_over_its_service_life():
    p = prices_from_dict(table())                    # $4/GB over 4 years
    # 1 TB = 1000 GB: $4000 over 4 * 365 days = $2.7397.../day
    assert dram_usd_per_day(1e12, p) == pytest.approx(4000 / 1460, rel=1e-12)
    assert dram_usd_per_day(0, p) == 0.0
    # 2^30 bytes are 1.073741824 decimal GB
    assert dram_usd_per_day(2**30, p) == pytest.approx(1.073741824 * 4 / 1460, rel=1e-12)


def test_an_ssd_is_written_off_over_the_shorter_of_warranty_and_rated_life():
    p = prices_from_dict(table())
    fast = p.ssd["fast"]                              # $0.20/GB, 5-year warranty
    # 10 TB = 10,000 GB: $2000; over 5 years $2000 / 1825 per day
    assert ssd_usd_per_day(1e13, fast, None) == pytest.approx(2000 / 1825, rel=1e-12)
    assert ssd_usd_per_day(1e13, fast, 8.0) == pytest.approx(2000 / 1825, rel=1e-12)   # outlives its warranty
    assert ssd_usd_per_day(1e13, fast, 5.0) == pytest.approx(2000 / 1825, rel=1e-12)
    assert ssd_usd_per_day(1e13, fast, 2.0) == pytest.approx(2000 / 730, rel=1e-12)    # worn out in 2 years
    assert ssd_usd_per_day(1e13, fast, 0.5) == pytest.approx(2000 / 182.5, rel=1e-12)
    # a drive the writes wear out at once (or a zero warranty) costs without bound
    assert ssd_usd_per_day(1e13, fast, 0.0) == math.inf
    assert ssd_usd_per_day(1e13, fast, -1.0) == math.inf
    assert ssd_usd_per_day(1e13, apply_overrides(p, ["ssd.fast.warranty_years=1e-9"]).ssd["fast"], None) == \
        pytest.approx(2000 / (1e-9 * 365))


def test_recompute_is_gpu_hours_at_the_prefill_rate():
    p = prices_from_dict(table())                    # $2 per GPU-hour
    # 7.2e8 tokens at 20,000 tokens/s: 36,000 s = 10 GPU-hours = $20
    assert gpu_usd_per_day(7.2e8, 20_000, p) == pytest.approx(20.0, rel=1e-12)
    assert gpu_usd_per_day(0, 20_000, p) == 0.0
    # one token at 20,000 tokens/s: 1/20000 s of a $2/3600-per-second GPU
    assert usd_per_recomputed_token(20_000, p) == pytest.approx(2 / 3600 / 20_000, rel=1e-12)
    assert usd_per_recomputed_token(20_000, p) * 7.2e8 == pytest.approx(gpu_usd_per_day(7.2e8, 20_000, p))


def test_a_class_built_without_a_warranty_is_written_off_over_five_years():
    # SsdClass's own default (the API's, not the price file's): 1 TB at $0.10/GB = $100 over 5 * 365 days
    cls = SsdClass("x", 0.1, 1.0)
    assert ssd_usd_per_day(1e12, cls, None) == pytest.approx(100 / 1825, rel=1e-12)
    assert (cls.reference_waf, cls.drive_capacity_bytes, cls.over_provisioning) == (None, None, None)


def test_a_slow_recompute_rate_below_one_token_per_second_is_still_a_rate():
    p = prices_from_dict(table())                    # $2 per GPU-hour
    # 360 tokens at 0.5 tokens/s: 720 s = 0.2 GPU-hours = $0.40
    assert gpu_usd_per_day(360, 0.5, p) == pytest.approx(0.4, rel=1e-12)
    assert gpu_usd_per_day(360, 1.0, p) == pytest.approx(0.2, rel=1e-12)


@pytest.mark.parametrize("rate", [0, 0.0, -1.0, math.nan])
def test_a_recompute_rate_that_is_not_positive_is_refused(rate):
    with pytest.raises(SpecError, match=r"recompute rate .* tokens/s must be > 0"):
        gpu_usd_per_day(1e6, rate, prices_from_dict(table()))


def test_a_worked_daily_bill_and_where_caching_breaks_even():
    # A 2 TB DRAM tier and a 30 TB QLC tier under the shipped prices, against recomputing the misses.
    p = load_prices()                                 # DRAM $5/GB over 5 y; QLC $0.07/GB, 5 y; GPU $3/h
    dram = dram_usd_per_day(2e12, p)                  # 2000 GB * $5 = $10,000 over 1825 days
    qlc = ssd_usd_per_day(30e12, p.ssd["qlc"], 2.5)   # 30,000 GB * $0.07 = $2,100, worn out in 2.5 years
    assert dram == pytest.approx(10_000 / 1825, rel=1e-12)
    assert qlc == pytest.approx(2_100 / 912.5, rel=1e-12)
    # 1e10 prompt tokens a day at 50,000 tokens/s: 200,000 GPU-seconds = 55.55... GPU-hours = $166.67
    full = gpu_usd_per_day(1e10, 50_000, p)
    assert full == pytest.approx(1e10 / 50_000 / 3600 * 3.0, rel=1e-12)
    assert full == pytest.approx(166.6666666667, rel=1e-10)
    # serving 60% of the tokens from the cache leaves 40% to recompute
    bill = dram + qlc + gpu_usd_per_day(0.4e10, 50_000, p)
    assert bill == pytest.approx(5.479452054794521 + 2.3013698630136985 + 66.66666666666667, rel=1e-12)
    # the cache pays for itself once it saves its own cost in GPU time: a hit share of
    # (dram + qlc) / full = 7.7808.../166.666... = 4.668...%
    h_star = (dram + qlc) / full
    assert h_star == pytest.approx((10_000 / 1825 + 2_100 / 912.5) / (1e10 / 50_000 / 3600 * 3.0), rel=1e-12)
    assert h_star == pytest.approx(0.046684931506849315, rel=1e-12)
    assert dram + qlc + gpu_usd_per_day((1 - h_star) * 1e10, 50_000, p) == pytest.approx(full, rel=1e-12)


def test_a_plans_price_object_reads_back_every_field():
    """plan.json carries Prices.to_dict(); the answer reads it back with Prices.from_dict: every class field
    survives (the reader once dropped the raw NAND, OP, P/E and reference-WAF source), with overrides."""
    from dataclasses import fields as dc_fields

    from kvbench.analysis.cost import Prices

    p = apply_overrides(load_prices(), ["ssd.tlc-1dwpd.usd_per_gb=0.09"])
    back = Prices.from_dict(p.to_dict())
    assert back.overrides == p.overrides and back.path == p.path and back.name == p.name
    assert set(back.ssd) == set(p.ssd)
    for k, c in p.ssd.items():
        for f in dc_fields(c):
            if f.name != "source":                        # to_dict does not carry a class's source line
                assert getattr(back.ssd[k], f.name) == getattr(c, f.name), (k, f.name)
    assert back.ssd["tlc-1dwpd"].usd_per_gb == 0.09 and back.ssd["tlc-1dwpd"].raw_nand_bytes == 8 * 2 ** 40


# --- the class nearest a rating ----------------------------------------------------------------------
def test_the_class_nearest_a_rating():
    from kvbench.analysis.cost import class_for_rating

    p = load_prices()          # tlc-1dwpd (1 DWPD, reference WAF 4.83), tlc-3dwpd (3, 2.60), qlc (0.3, 4.83)
    assert [class_for_rating(p, r) for r in (1, 3, 0.5, 0.3, 10, 1.5, 2.5)] == \
        ["tlc-1dwpd", "tlc-3dwpd", "qlc", "qlc", "tlc-3dwpd", "tlc-1dwpd", "tlc-3dwpd"]
    assert class_for_rating(p, 3 ** 0.5) == "tlc-3dwpd"        # equally near 1 and 3: the lower reference WAF
    assert class_for_rating(p, 0.3 ** 0.5) == "qlc"            # equally near 0.3 and 1, same WAF: by name
    with pytest.raises(SpecError, match="rating of 0 DWPD"):
        class_for_rating(p, 0)


# mutation survivors ------------------------------------------------------------------------------------------
def test_a_price_object_with_only_the_required_fields_reads_back_with_the_defaults():
    from kvbench.analysis.cost import Prices

    p = Prices.from_dict({"dram_usd_per_gb": 3, "gpu_usd_per_hour": 2,
                          "ssd": {"a": {"usd_per_gb": 0.1, "dwpd": 1}}})
    assert (p.name, p.date, p.status, p.path, p.sources, p.overrides) == ("", "", "assumption", "", {}, ())
    assert (p.dram_usd_per_gb, p.dram_service_years, p.gpu_usd_per_hour) == (3.0, 5.0, 2.0)
    a = p.ssd["a"]
    assert (a.name, a.usd_per_gb, a.dwpd, a.warranty_years, a.reference_waf, a.label) == ("a", 0.1, 1.0, 5.0, None, "")
    assert (a.drive_capacity_bytes, a.over_provisioning, a.raw_nand_bytes, a.pe_cycles, a.reference_waf_source) == \
        (None, None, None, None, "")
    assert Prices.from_dict({"dram_usd_per_gb": 3, "gpu_usd_per_hour": 2}).ssd == {}
    # every field given, none the default
    q = Prices.from_dict({"name": "n", "date": "d", "status": "quoted", "path": "p.toml", "dram_usd_per_gb": 3,
                          "dram_service_years": 4, "gpu_usd_per_hour": 2, "sources": {"dram": "s"},
                          "overrides": ["dram=3"],
                          "ssd": {"b": {"usd_per_gb": 0.2, "dwpd": 3, "warranty_years": 3, "reference_waf": 2.5,
                                        "label": "L", "drive_capacity_bytes": 1e12, "over_provisioning": 0.2,
                                        "raw_nand_bytes": 1.2e12, "pe_cycles": 7000, "reference_waf_source": "v"}}})
    assert (q.name, q.date, q.status, q.path, q.sources, q.overrides, q.dram_service_years) == \
        ("n", "d", "quoted", "p.toml", {"dram": "s"}, ("dram=3",), 4.0)
    b = q.ssd["b"]
    assert (b.warranty_years, b.reference_waf, b.label, b.drive_capacity_bytes, b.over_provisioning,
            b.raw_nand_bytes, b.pe_cycles, b.reference_waf_source) == (3.0, 2.5, "L", 1e12, 0.2, 1.2e12, 7000.0, "v")


def test_raw_nand_needs_a_smaller_drive_capacity_and_no_stated_op():
    def ssd(**c):
        return table(ssd={"c": {"usd_per_gb": 0.1, "dwpd": 1, "reference_waf": 2.0, "reference_waf_source": "v",
                                "pe_cycles": 1e5, **c}})

    # 1.25 TB of flash under 1 TB: OP 0.25 follows
    assert prices_from_dict(ssd(drive_capacity="1TB", raw_nand_capacity="1.25TB")).ssd["c"].over_provisioning == \
        pytest.approx(0.25, rel=1e-12)
    for c in ({"drive_capacity": "1TB", "raw_nand_capacity": "1TB"},               # no spare: not below it
              {"raw_nand_capacity": "1.25TB"},                                     # no drive capacity
              {"drive_capacity": "1TB", "raw_nand_capacity": "1.25TB", "over_provisioning": 0.25}):
        with pytest.raises(SpecError, match="raw_nand_capacity needs drive_capacity below it"):
            prices_from_dict(ssd(**c), where="my.toml")
    # a vendor reference WAF beside raw NAND must say where it comes from; without raw NAND it is "given in" the file
    with pytest.raises(SpecError, match=r"my.toml: \[ssd.c\]: reference_waf without reference_waf_source"):
        prices_from_dict(ssd(drive_capacity="1TB", raw_nand_capacity="1.25TB", reference_waf_source=None),
                         where="my.toml")
    c = prices_from_dict(table(ssd={"c": {"usd_per_gb": 0.1, "dwpd": 1, "reference_waf": 2.0}}), where="my.toml")
    assert c.ssd["c"].reference_waf_source == "given in my.toml"


def test_an_overridden_reference_waf_says_so_and_other_overrides_keep_the_source():
    p0 = prices_from_dict(table(), where="t.toml")
    assert p0.ssd["fast"].reference_waf_source == "given in t.toml"
    p = apply_overrides(p0, ["ssd.fast.reference_waf=1.5", "ssd.big.dwpd=0.3"])
    assert (p.ssd["fast"].reference_waf, p.ssd["fast"].reference_waf_source) == (1.5, "given (--price "
                                                                                      "ssd.fast.reference_waf=1.5)")
    assert p.ssd["big"].reference_waf_source == p0.ssd["big"].reference_waf_source
    assert apply_overrides(p0, ["ssd.fast.dwpd=2"]).ssd["fast"].reference_waf_source == "given in t.toml"
