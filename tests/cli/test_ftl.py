"""``kvbench ftl``: the command's options, expected values by hand in each docstring."""

from __future__ import annotations

import json


def _json(r):
    assert r.exit_code == 0, r.output
    return json.loads(r.output[r.output.index("{"):])


def test_ftl_gc_and_page_size_options(cli):
    """64 MiB at 16 KiB pages = 4,096 user pages; op 0.2 -> 4,915 pages -> 153 blocks of 32 pages. Two
    passes of uniform writes, half of them warm-up: 4,096 pages measured. FIFO GC copies more than greedy."""
    out = {}
    for gc in ("greedy", "fifo"):
        d = _json(cli("ftl", "--capacity", "64MiB", "--page-size", "16KiB", "--gc", gc, "--block-pages", "32",
                      "--op", "0.2", "--writes", "2x", "--json"))
        assert (d["gc"], d["page_size"], d["blocks"], d["block_pages"]) == (gc, 16384, 153, 32)
        assert d["measured"]["host_pages"] == 4096 and d["host_bytes"] == 4096 * 16384
        assert d["effective_op"] == 153 * 32 / 4096 - 1
        out[gc] = d["waf"]
    assert 1.0 < out["greedy"] < out["fifo"]
    r = cli("ftl", "--capacity", "64MiB", "--page-size", "1000")
    assert r.exit_code == 2 and "512" in r.output
