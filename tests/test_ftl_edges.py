"""FTL model edges the WAF tests do not reach, by hand: page-size validation, counter snapshots, counters that
carry over between batches of extents."""

from __future__ import annotations

import numpy as np
import pytest

from kvbench.analysis.ftl import OP_TRIM, OP_WRITE, FtlConfig, FtlCounters, FtlModel
from kvbench.errors import SpecError


@pytest.mark.parametrize("page", [0, -4096, 1000, 4097])
def test_page_size_must_be_a_positive_multiple_of_512(page):
    with pytest.raises(SpecError, match="not a positive multiple of 512"):
        FtlConfig(user_bytes=4096 * 1024, page_size=page, block_pages=8).validate()


def test_counter_snapshots_subtract_field_by_field():
    d = FtlCounters(10, 25, 15, 7, 4) - FtlCounters(4, 6, 2, 1, 3)
    assert (d.host_pages, d.nand_pages, d.gc_pages, d.erases, d.trimmed_pages) == (6, 19, 13, 6, 1)
    assert d.waf == pytest.approx(19 / 6) and d.to_dict()["erases"] == 6
    assert np.isnan(FtlCounters(0, 0, 0, 0, 0).waf)


def test_counters_carry_over_between_batches():
    """64 user pages, 8-page blocks: a fill (64 host pages, no GC), then trims of 5 and 3 mapped pages in two
    calls, a trim of an already-trimmed page (not counted), and 4 rewrites in a third call: every counter
    keeps counting across calls."""
    m = FtlModel(FtlConfig(user_bytes=64 * 4096, op=1.0, block_pages=8))
    m.fill_sequential()
    m.apply_pages(np.array([OP_TRIM], np.uint8), np.array([0]), np.array([5]))
    m.apply_pages(np.array([OP_TRIM, OP_TRIM], np.uint8), np.array([10, 4]), np.array([3, 1]))
    m.apply_pages(np.array([OP_WRITE], np.uint8), np.array([20]), np.array([4]))
    c = m.counters
    assert (c.host_pages, c.nand_pages, c.gc_pages, c.trimmed_pages) == (68, 68, 0, 8)
    m.check()
