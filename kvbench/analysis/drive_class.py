"""Drive classes that hold together: over-provisioning from raw NAND, the rating's reference WAF, and the P/E check.

A class states its user capacity and raw NAND capacity (OP = raw / user - 1 follows), its NAND P/E rating, rated
DWPD and warranty. The DWPD rating assumes a reference workload (JEDEC JESD219A enterprise) with its own device
write amplification: the vendor's figure when the class file gives one (``reference_waf`` +
``reference_waf_source``), else kvbench's FTL model (:mod:`kvbench.analysis.ftl`, greedy GC, one write frontier)
on that workload at the class's OP. Then the rating must fit the flash: rated TBW x reference WAF (the NAND bytes
the rating promises to survive) <= raw NAND x P/E cycles, else the class is refused.

The reference model is scaled down (WAF depends on ratios, not on absolute size): 4 KiB pages, 1 MiB erase
blocks, and enough erase blocks that at least ``REF_SPARE_BLOCKS`` are spare, so that the GC's free-block reserve
and the open block are a small part of the spare, as on a drive with thousands of erase units (measured: at OP
0.145 the WAF moves 4.709 -> 4.691 -> 4.666 -> 4.659 from 148 to 296, 593 and 1,187 spare blocks). Memoised per
(OP, page, erase block). The WAF counts host bytes, as a TBW does: a JESD219A transfer under a page costs the
whole page (:func:`kvbench.analysis.ftl.jesd219_page_bytes_per_host_byte`, 1.032 at 4 KiB).
"""

from __future__ import annotations

import functools
import math
from dataclasses import replace

from kvbench.errors import SpecError

REF_PAGE_BYTES = 4096
REF_ERASE_BLOCK_BYTES = 1 << 20
REF_SPARE_BLOCKS = 256          # spare erase blocks in the scaled-down reference model
REF_MAX_PAGES = 1 << 22         # cap on the model's user pages (16 GiB at 4 KiB): OP below ~0.06 is capped
REF_WRITES = 3.0                # host writes after the fill, x user capacity; WAF over the second half
REF_SEED = 1


def reference_config(op: float, page_bytes: int = REF_PAGE_BYTES, erase_block_bytes: int = REF_ERASE_BLOCK_BYTES):
    """The scaled-down drive the reference WAF is computed on: ``REF_SPARE_BLOCKS`` spare erase blocks at ``op``
    (the user capacity capped at ``REF_MAX_PAGES`` pages)."""
    from kvbench.analysis import ftl

    if not (op > 0 and math.isfinite(op)):
        raise SpecError(f"over-provisioning {op} must be > 0", "give raw_nand_capacity above drive_capacity")
    block_pages = erase_block_bytes // page_bytes
    blocks = math.ceil(REF_SPARE_BLOCKS * (1.0 + op) / op)
    user_blocks = min(int(blocks / (1.0 + op)), REF_MAX_PAGES // block_pages)
    return ftl.FtlConfig(user_bytes=user_blocks * block_pages * page_bytes, page_size=page_bytes, op=op,
                         block_pages=block_pages)


@functools.lru_cache(maxsize=64)
def jesd219_waf(op: float, page_bytes: int = REF_PAGE_BYTES, erase_block_bytes: int = REF_ERASE_BLOCK_BYTES) -> float:
    """Steady-state device WAF (NAND bytes / host bytes) of JESD219A at over-provisioning ``op``, by the FTL model:
    what ``kvbench ftl --pattern jesd219 --capacity <reference_config's> --op OP --block-pages 256 --writes 3x
    --warmup 0.5 --seed 1`` prints, times the host-byte factor."""
    from kvbench.analysis import ftl

    r = ftl.simulate(reference_config(op, page_bytes, erase_block_bytes), pattern="jesd219", writes=REF_WRITES,
                     warmup=0.5, seed=REF_SEED)
    return float(r.waf) * ftl.jesd219_page_bytes_per_host_byte(page_bytes)


def computed_source(op: float) -> str:
    return f"computed: FTL model, JESD219A, op {op:.4g}"


def resolve(cls, *, given_source: str = ""):
    """``cls`` with its reference WAF filled in: the vendor figure it carries (source ``given_source`` or its own),
    else the FTL model's at its OP; unchanged (None) when neither a figure nor an OP is known."""
    if cls.reference_waf is not None:
        return replace(cls, reference_waf_source=cls.reference_waf_source or given_source or "given")
    op = cls.over_provisioning
    if not op:
        return replace(cls, reference_waf_source="")
    return replace(cls, reference_waf=jesd219_waf(float(op)), reference_waf_source=computed_source(float(op)))


def rated_tbw_bytes(cls) -> float:
    """Host bytes the rating promises over the warranty: DWPD x user capacity x 365 x warranty years."""
    from kvbench.analysis.endurance import Rating

    return Rating(dwpd=cls.dwpd, warranty_years=cls.warranty_years).tbw(cls.drive_capacity_bytes)


def check_plausible(cls, where: str = "<prices>") -> None:
    """Refuse a class whose rating needs more NAND writes than its flash survives: rated TBW x reference WAF >
    raw NAND x P/E. Skipped (nothing to check) when the class states no raw capacity or P/E."""
    if not (cls.raw_nand_bytes and cls.pe_cycles and cls.reference_waf and cls.drive_capacity_bytes):
        return
    tbw = rated_tbw_bytes(cls)
    need, have = tbw * cls.reference_waf, cls.raw_nand_bytes * cls.pe_cycles
    if need / cls.raw_nand_bytes > cls.pe_cycles:          # the P/E cycles the rating uses, against the stated
        raise SpecError(
            f"{where}: [ssd.{cls.name}] rated TBW {tbw / 1e15:,.4g} PB x reference WAF {cls.reference_waf:.3g} = "
            f"{need / 1e15:,.4g} PB of NAND writes exceeds raw NAND {cls.raw_nand_bytes / 1e12:,.4g} TB x "
            f"{cls.pe_cycles:,.0f} P/E = {have / 1e15:,.4g} PB",
            f"lower dwpd or warranty_years, raise pe_cycles to >= {math.ceil(need / cls.raw_nand_bytes):,} or "
            "raw_nand_capacity, or give the vendor's reference_waf with reference_waf_source")


def settle(cls, where: str = "<prices>", *, given_source: str = ""):
    """:func:`resolve` then :func:`check_plausible`: the class as plan uses it, or a one-line refusal."""
    out = resolve(cls, given_source=given_source)
    check_plausible(out, where)
    return out


def describe(cls) -> dict:
    """The class's endurance facts (for ``kvbench ftl --jesd219`` and plan's ``drives[]``)."""
    tbw = rated_tbw_bytes(cls) if cls.drive_capacity_bytes else None
    need = tbw * cls.reference_waf if tbw is not None and cls.reference_waf else None
    have = cls.raw_nand_bytes * cls.pe_cycles if cls.raw_nand_bytes and cls.pe_cycles else None
    return {"class": cls.name, "drive_capacity_bytes": cls.drive_capacity_bytes, "raw_nand_bytes": cls.raw_nand_bytes,
            "over_provisioning": cls.over_provisioning, "pe_cycles": cls.pe_cycles, "rated_dwpd": cls.dwpd,
            "warranty_years": cls.warranty_years, "reference_waf": cls.reference_waf,
            "reference_waf_source": cls.reference_waf_source, "rated_tbw_bytes": tbw,
            "rated_nand_bytes": need, "nand_endurance_bytes": have,
            "pe_used_by_rating": need / cls.raw_nand_bytes if need and cls.raw_nand_bytes else None}
