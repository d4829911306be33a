"""Drive classes that hold together (issue 28, part 2): OP from raw NAND, the reference WAF on JESD219A by the FTL
model (or the vendor's), the P/E plausibility check, ``kvbench ftl --jesd219`` and plan's drives[] fields."""

from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner

from kvbench.analysis import drive_class as dc
from kvbench.analysis import ftl
from kvbench.analysis.cost import apply_overrides, load_prices, prices_from_dict
from kvbench.errors import SpecError
from tests.conftest import REPO

pytestmark = pytest.mark.timeout(300)
PRICES = REPO / "workloads" / "prices"


def table(**cls) -> dict:
    base = {"usd_per_gb": 0.1, "dwpd": 1.0, "warranty_years": 5, "drive_capacity": "1TB",
            "raw_nand_capacity": "1.2TB", "pe_cycles": 3100, "reference_waf": 2.0,
            "reference_waf_source": "vendor datasheet"}
    base.update(cls)
    return {"dram": {"usd_per_gb": 4.0}, "gpu": {"usd_per_hour": 2.0},
            "ssd": {"c": {k: v for k, v in base.items() if v is not None}}}


# --- JESD219A ---------------------------------------------------------------------------------------------
def test_jesd219_mix_is_the_standards_and_sums_to_one():
    # 512 B 4%; 1, 1.5, 2, 2.5, 3, 3.5 KiB 1% each (six sizes); 4 KiB 67%; 8 KiB 10%; 16 KiB 7%; 32, 64 KiB 3%
    sizes = dict(ftl.JESD219_SIZES)
    assert sizes == {512: 0.04, 1024: 0.01, 1536: 0.01, 2048: 0.01, 2560: 0.01, 3072: 0.01, 3584: 0.01,
                     4096: 0.67, 8192: 0.10, 16384: 0.07, 32768: 0.03, 65536: 0.03}
    assert math.isclose(sum(sizes.values()), 1.0)
    assert ftl.JESD219_SKEW == ((0.50, 0.05), (0.30, 0.15), (0.20, 0.80))
    pages = dict(ftl.JESD219_PAGES)
    assert pages.keys() == {1, 2, 4, 8, 16}
    assert [round(pages[k], 12) for k in (1, 2, 4, 8, 16)] == [0.77, 0.10, 0.07, 0.03, 0.03]
    assert [round(q, 12) for _, q in ftl.jesd219_pages(16384)] == [0.94, 0.03, 0.03]   # 16 KiB pages


def test_sub_page_transfers_cost_a_page_in_host_bytes():
    # host bytes per transfer: 0.04*512 + 0.01*(1024+1536+2048+2560+3072+3584) + 0.67*4096 + 0.10*8192
    #   + 0.07*16384 + 0.03*32768 + 0.03*65536 = 7818.24; pages: 1.97 x 4096 = 8069.12
    assert ftl.jesd219_page_bytes_per_host_byte(4096) == pytest.approx(8069.12 / 7818.24, rel=1e-12)


def test_reference_model_is_converged_and_memoised():
    """The scaled-down model (>= 256 spare erase blocks) is within 1.5% of one with 4x the erase blocks."""
    op = 0.3744
    w = dc.jesd219_waf(op)
    blocks = math.ceil(4 * dc.REF_SPARE_BLOCKS * (1 + op) / op)
    cfg = ftl.FtlConfig(user_bytes=int(blocks / (1 + op)) * 256 * 4096, page_size=4096, op=op, block_pages=256)
    big = ftl.simulate(cfg, pattern="jesd219", writes=3.0, warmup=0.5, seed=2).waf
    assert w == pytest.approx(big * 8069.12 / 7818.24, rel=0.015)
    assert dc.jesd219_waf(op) is w or dc.jesd219_waf(op) == w
    assert dc.jesd219_waf.cache_info().hits >= 1
    # more spare, less amplification
    assert dc.jesd219_waf(0.1453) > w > dc.jesd219_waf(1.0) > 1.0


# --- classes ----------------------------------------------------------------------------------------------
def test_op_follows_from_raw_and_the_vendor_figure_is_kept():
    c = prices_from_dict(table(), where="my.toml").ssd["c"]
    assert c.over_provisioning == pytest.approx(0.2, rel=1e-12)
    assert (c.raw_nand_bytes, c.pe_cycles, c.reference_waf, c.reference_waf_source) == (1.2e12, 3100, 2.0,
                                                                                          "vendor datasheet")


def test_without_a_vendor_figure_the_reference_waf_is_computed_at_the_class_op():
    c = prices_from_dict(table(reference_waf=None, reference_waf_source=None, pe_cycles=10000,
                               raw_nand_capacity="8TiB", drive_capacity="6.4TB")).ssd["c"]
    op = 8 * 2**40 / 6.4e12 - 1
    assert c.reference_waf == dc.jesd219_waf(op)
    assert c.reference_waf_source == f"computed: FTL model, JESD219A, op {op:.4g}" == \
        "computed: FTL model, JESD219A, op 0.3744"


def test_a_rating_beyond_its_flash_is_refused_naming_both_products_and_the_fix():
    # TBW = 1 DWPD x 1 TB x 365 x 5 = 1.825 PB; x WAF 2 = 3.65 PB; raw 1.2 TB x 3,000 = 3.6 PB: refused
    with pytest.raises(SpecError) as e:
        prices_from_dict(table(pe_cycles=3000), where="my.toml")
    msg = str(e.value)
    assert "my.toml: [ssd.c] rated TBW 1.825 PB x reference WAF 2 = 3.65 PB of NAND writes exceeds raw NAND 1.2 TB " \
           "x 3,000 P/E = 3.6 PB" in msg
    assert "pe_cycles to >= 3,042" in e.value.fix and "reference_waf" in e.value.fix
    assert "\n" not in msg
    prices_from_dict(table(pe_cycles=3042))                     # 3.6504 PB >= 3.65 PB: holds
    with pytest.raises(SpecError, match=r"\[ssd.c\] rated TBW 1.46 PB"):         # 4 years: 1.46 x 2 = 2.92 PB
        prices_from_dict(table(pe_cycles=2400, warranty_years=4))                 # > 1.2 TB x 2,400 = 2.88 PB


def test_an_override_is_checked_too_and_pe_cycles_can_be_overridden():
    p = prices_from_dict(table())
    with pytest.raises(SpecError, match=r"--price ssd.c.dwpd=2: \[ssd.c\] rated TBW 3.65 PB"):
        apply_overrides(p, ["ssd.c.dwpd=2"])
    q = apply_overrides(p, ["ssd.c.pe_cycles=7000", "ssd.c.dwpd=2"])
    assert (q.ssd["c"].dwpd, q.ssd["c"].pe_cycles) == (2.0, 7000.0)
    r = apply_overrides(p, ["ssd.c.reference_waf=1.5"])
    assert (r.ssd["c"].reference_waf, r.ssd["c"].reference_waf_source) == (1.5, "given (--price ssd.c.reference_waf=1.5)")


@pytest.mark.parametrize("over,match", [
    ({"drive_capacity": None}, "raw_nand_capacity needs drive_capacity"),
    ({"raw_nand_capacity": "1TB"}, "raw_nand_capacity needs drive_capacity below it"),
    ({"over_provisioning": 0.2}, "drop over_provisioning"),
    ({"reference_waf_source": None}, "reference_waf without reference_waf_source"),
    ({"raw_nand_capacity": "lots"}, "field 'raw_nand_capacity' 'lots' is not a size"),
    ({"pe_cycles": 0}, "field 'pe_cycles' must be a number > 0"),
])
def test_malformed_classes_are_refused_in_one_line(over, match):
    with pytest.raises(SpecError, match=match):
        prices_from_dict(table(**over), where="my.toml")


@pytest.mark.parametrize("path", sorted(PRICES.glob("*.toml")), ids=lambda p: p.name)
def test_every_shipped_class_states_raw_and_pe_and_passes(path):
    p = load_prices(str(path))
    for c in p.ssd.values():
        assert c.raw_nand_bytes and c.pe_cycles and c.drive_capacity_bytes, c.name
        assert c.over_provisioning == pytest.approx(c.raw_nand_bytes / c.drive_capacity_bytes - 1, rel=1e-12)
        assert c.reference_waf_source.startswith(("computed: FTL model, JESD219A, op", "vendor", "given"))
        tbw = c.dwpd * c.drive_capacity_bytes * 365 * c.warranty_years
        assert tbw * c.reference_waf <= c.raw_nand_bytes * c.pe_cycles, c.name


# --- CLI ------------------------------------------------------------------------------------------------
def test_ftl_jesd219_prints_the_class_reference_waf():
    from kvbench.cli import main as cli

    r = CliRunner().invoke(cli, ["ftl", "--jesd219", "--class", "tlc-3dwpd", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    c = load_prices().ssd["tlc-3dwpd"]
    assert d["waf"] == d["reference_waf"] == c.reference_waf
    assert d["reference_waf_source"] == "computed: FTL model, JESD219A, op 0.3744"
    assert d["rated_tbw_bytes"] == pytest.approx(3 * 6.4e12 * 365 * 5)
    assert d["pe_used_by_rating"] == pytest.approx(d["rated_tbw_bytes"] * c.reference_waf / (8 * 2**40))
    r = CliRunner().invoke(cli, ["ftl", "--jesd219", "--class", "tlc-1dwpd"])
    assert r.exit_code == 0 and "reference WAF: " in r.output and "computed: FTL model, JESD219A, op 0.1453" in r.output


def test_ftl_jesd219_errors(tmp_path):
    from kvbench.cli import main as cli

    r = CliRunner().invoke(cli, ["ftl", "--jesd219", "--class", "nope"])
    assert r.exit_code != 0 and "unknown drive class 'nope'" in r.output
    r = CliRunner().invoke(cli, ["ftl", "--jesd219"])
    assert r.exit_code != 0 and "--jesd219 --class NAME" in r.output
    bad = tmp_path / "bad.toml"
    bad.write_text((PRICES / "2025-h2.toml").read_text().replace("pe_cycles = 3000", "pe_cycles = 2000"))
    r = CliRunner().invoke(cli, ["ftl", "--jesd219", "--class", "tlc-1dwpd", "--prices", str(bad)])
    assert r.exit_code != 0 and "[ssd.qlc] rated TBW" in r.output and "Traceback" not in r.output


# --- plan: drives[] carry the class's facts ---------------------------------------------------------------
def test_plan_drives_carry_raw_pe_warranty_and_where_each_waf_came_from():
    import numpy as np

    from kvbench.analysis.plan import PlanOptions, build_plan
    from kvbench.stream.traces import Trace

    n = 400
    rng = np.random.default_rng(3)
    keys = rng.integers(1, 60, n).astype(np.uint64)          # one block per request, 59 distinct: reuse
    tr = Trace(timestamp_s=np.arange(n, dtype=np.float64), input_tokens=np.full(n, 512, np.int64),
               output_tokens=np.zeros(n, np.int64), offsets=np.arange(n + 1, dtype=np.int64), keys=keys,
               block_tokens=512, fmt="test", path="hand")
    prices = load_prices()
    out = build_plan(tr, block_bytes=1_000_000, prices=prices, tokens_per_s=1e4,
                     options=PlanOptions(targets=(0.5,), waf=1.5, sweep=(), write_policies=False))
    assert {d["class"] for d in out["drives"]} == set(prices.ssd)
    for d in out["drives"]:
        c = prices.ssd[d["class"]]
        assert (d["raw_nand_bytes"], d["pe_cycles"], d["warranty_years"], d["rated_dwpd"]) == \
            (c.raw_nand_bytes, c.pe_cycles, c.warranty_years, c.dwpd)
        assert d["over_provisioning"] == c.over_provisioning
        assert (d["reference_waf"], d["reference_waf_source"]) == (c.reference_waf, c.reference_waf_source)
        assert d["reference_waf_source"].startswith("computed: FTL model, JESD219A, op ")
        assert (d["workload_waf"], d["workload_waf_source"]) == (1.5, "given (--waf)")


# --- the reference model's geometry, reproducibility, edges (mutation run: 25 of 47 killed before these) -------
def test_reference_model_geometry_by_hand():
    # op 1/16: ceil(256 x 1.0625 / 0.0625) = 4352 erase blocks of 256 x 4 KiB; int(4352 / 1.0625) = 4096 user ones
    c = dc.reference_config(0.0625)
    assert (c.page_size, c.block_pages, c.user_pages, c.blocks) == (4096, 256, 4096 * 256, 4352)
    # op 1/128 wants ceil(256 x 1.0078125 / 0.0078125) = 33024 blocks, 32768 user: capped at 2^22 pages = 16384
    c = dc.reference_config(0.0078125)
    assert (c.user_pages, c.blocks) == (1 << 22, int((1 << 22) * 1.0078125) // 256)
    assert isinstance(c.user_bytes, int)                        # a byte count, not a float
    # 16 KiB pages in 4 MiB erase blocks: 256 pages per block again
    assert dc.reference_config(0.0625, 16384, 4 << 20).user_bytes == 4096 * 256 * 16384


def test_the_reference_waf_is_what_the_ftl_command_prints_times_the_byte_factor(cli):
    op = 0.3744
    cap = dc.reference_config(op).user_bytes          # 683 erase blocks x 1 MiB (940 in all, less rounding)
    assert cap == 683 * 256 * 4096
    r = cli("ftl", "--pattern", "jesd219", "--capacity", str(cap), "--op", str(op), "--block-pages", "256",
            "--writes", "3x", "--warmup", "0.5", "--seed", "1", "--json")
    assert r.exit_code == 0, r.output
    assert dc.jesd219_waf(op) == pytest.approx(json.loads(r.output)["waf"] * 8069.12 / 7818.24, rel=1e-12)


@pytest.mark.parametrize("op", [0.0, -0.1, math.inf, math.nan])
def test_reference_waf_needs_a_positive_finite_op(op):
    with pytest.raises(SpecError, match="must be > 0"):
        dc.jesd219_waf(op)


def test_the_check_at_exactly_the_stated_pe_and_just_above():
    # TBW 1 TB x 365 x 5 = 1.825 PB, x WAF 2 = 3.65 PB on 1.825 TB raw: exactly 2,000 cycles
    at = table(drive_capacity="1TB", raw_nand_capacity="1.825TB", pe_cycles=2000)
    assert prices_from_dict(at).ssd["c"].pe_cycles == 2000
    with pytest.raises(SpecError, match=r"raise pe_cycles to >= 2,000"):
        prices_from_dict(table(drive_capacity="1TB", raw_nand_capacity="1.825TB", pe_cycles=1999.99))


def test_classes_missing_raw_pe_or_capacity_are_described_not_checked():
    from kvbench.analysis.cost import SsdClass

    no_pe = SsdClass("a", 0.1, 1.0, 5.0, 2.0, drive_capacity_bytes=1e12, raw_nand_bytes=1.2e12)
    dc.check_plausible(no_pe)                                   # nothing to check against: no refusal, no crash
    d = dc.describe(no_pe)
    assert (d["rated_tbw_bytes"], d["rated_nand_bytes"], d["nand_endurance_bytes"]) == (1.825e15, 3.65e15, None)
    assert d["pe_used_by_rating"] == pytest.approx(3.65e15 / 1.2e12)
    no_cap = SsdClass("b", 0.1, 1.0, 5.0, 2.0, raw_nand_bytes=1.2e12, pe_cycles=1000.0)
    dc.check_plausible(no_cap)
    d = dc.describe(no_cap)
    assert (d["rated_tbw_bytes"], d["rated_nand_bytes"], d["pe_used_by_rating"]) == (None, None, None)
    assert d["nand_endurance_bytes"] == 1.2e15
    no_ref = SsdClass("c", 0.1, 1.0, 5.0, None, drive_capacity_bytes=1e12, raw_nand_bytes=1.2e12, pe_cycles=10.0)
    dc.check_plausible(no_ref)                                  # no reference WAF (no OP known): not checked
    assert dc.describe(no_ref)["rated_nand_bytes"] is None
