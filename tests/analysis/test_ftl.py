"""FTL model: mapping consistency, trim, sequential WAF ~1, and uniform-random WAF against the analytic result."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kvbench.analysis.ftl import (OP_TRIM, OP_WRITE, FtlConfig, FtlModel, analytic_waf_uniform, bytes_to_pages,
                                  lambert_w0, read_iolog, read_plan, simulate)
from kvbench.errors import SpecError, TraceError
from tests.conftest import REPO



def test_lambert_w0_matches_definition():
    for x in (-1 / np.e, -0.3558, -0.1, -1e-6, 0.5, 3.0):
        w = lambert_w0(x)
        assert w * np.exp(w) == pytest.approx(x, abs=1e-9)
        assert w >= -1.0


def test_analytic_waf_reproduces_published_value():
    # Xiang & Kurkoski (arXiv:1110.4245): over-provisioning 0.3 -> WAF 2.36 (greedy simulation: 2.35)
    assert analytic_waf_uniform(0.3) == pytest.approx(2.36, abs=0.005)
    # more spare -> less amplification, and the limit of no spare is unbounded
    assert analytic_waf_uniform(0.07) > analytic_waf_uniform(0.28) > analytic_waf_uniform(1.0) > 1.0


def test_mapping_stays_consistent_with_writes_trims_and_gc():
    cfg = FtlConfig(user_bytes=4096 * 4096, op=0.25, block_pages=32, gc="greedy")
    rng = np.random.default_rng(7)
    for gc in ("greedy", "fifo"):
        m = FtlModel(FtlConfig(**{**cfg.__dict__, "gc": gc}))
        m.fill_sequential()
        U = cfg.user_pages
        n = 20000
        ops = np.where(rng.random(n) < 0.1, OP_TRIM, OP_WRITE).astype(np.uint8)
        starts = rng.integers(0, U - 8, n)
        counts = rng.integers(1, 8, n)
        m.apply_pages(ops, starts, counts)
        m.check()
        c = m.counters
        assert c.nand_pages == c.host_pages + c.gc_pages
        assert c.gc_pages > 0 and c.erases > 0 and c.trimmed_pages > 0
        # physical pages in use equal mapped user pages; trimmed pages are unmapped
        mapped = int((m._arrays["l2p"] >= 0).sum())
        assert mapped == int((m._arrays["p2l"] >= 0).sum()) <= U


def test_trim_frees_space_and_lowers_waf():
    base = dict(user_bytes=64 << 20, op=0.07, block_pages=64, gc="greedy")
    U = (64 << 20) // 4096
    rng = np.random.default_rng(3)
    # half of the space is trimmed, then random writes go to the other half only
    half = U // 2
    writes = rng.integers(0, half, 4 * U)

    def run(trim: bool) -> float:
        m = FtlModel(FtlConfig(**base))
        m.fill_sequential()
        if trim:
            m.apply_pages(np.array([OP_TRIM], np.uint8), np.array([half]), np.array([U - half]))
        before = m.counters
        m.apply_pages(np.full(len(writes), OP_WRITE, np.uint8), writes, np.ones(len(writes), np.int64))
        m.check()
        return (m.counters - before).waf

    with_trim, without = run(True), run(False)
    # trimmed space acts as spare: the hot half sees op (1.07 - 0.5) / 0.5 = 1.14 -> analytic 1.20
    assert with_trim == pytest.approx(analytic_waf_uniform(1.14), rel=0.05)
    # without trim the stale half stays valid: the hot half has at best op 0.07 / 0.5 = 0.14 (analytic 4.16)
    assert without > analytic_waf_uniform(0.14) > 2 * with_trim


@pytest.mark.parametrize("gc", ["greedy", "fifo"])
def test_sequential_and_log_structured_writes_give_waf_one(gc):
    cfg = FtlConfig(user_bytes=64 << 20, op=0.07, block_pages=64, gc=gc)
    r = simulate(cfg, pattern="sequential", writes=3, io_pages=16)
    assert r.waf == pytest.approx(1.0, abs=1e-9)
    # a log-structured store: append 1 MiB segments round-robin over the space, trim the reclaimed segment
    U, seg = cfg.user_pages, 256
    nseg = U // seg
    order = np.arange(3 * nseg) % nseg
    ops = np.empty(2 * len(order), np.uint8)
    ops[0::2], ops[1::2] = OP_TRIM, OP_WRITE
    starts = np.repeat(order * seg, 2)
    r = simulate(cfg, extents=(ops, starts, np.full(len(ops), seg)), writes=3)
    assert r.waf == pytest.approx(1.0, abs=1e-9)


# Validation against the analytic uniform-random WAF (module docstring of kvbench.analysis.ftl) at two
# over-provisioning levels, within 5%. Measured on this model (1 GiB, 4 KiB pages): greedy/256 pages per block
# 7.87 vs 7.89 at op 0.07 and 2.48 vs 2.49 at op 0.28; FIFO/64 pages 7.88 vs 7.84 and 2.49 vs 2.48.
@pytest.mark.parametrize("gc,block_pages,capacity", [("greedy", 256, 1 << 30), ("fifo", 64, 256 << 20)])
@pytest.mark.parametrize("op", [0.07, 0.28])
def test_uniform_random_waf_matches_analytic(gc, block_pages, capacity, op):
    cfg = FtlConfig(user_bytes=capacity, op=op, block_pages=block_pages, gc=gc)
    r = simulate(cfg, pattern="uniform", writes=4, warmup=0.5, seed=11)
    expected = analytic_waf_uniform(cfg.effective_op)
    assert r.waf == pytest.approx(expected, rel=0.05)
    # the steady state is steady: the last windows agree with each other
    tail = r.window_waf[-4:]
    assert max(tail) / min(tail) < 1.03


def test_greedy_beats_fifo_with_small_blocks():
    kw = dict(user_bytes=128 << 20, op=0.1, block_pages=32)
    g = simulate(FtlConfig(gc="greedy", **kw), writes=3, seed=5).waf
    f = simulate(FtlConfig(gc="fifo", **kw), writes=3, seed=5).waf
    assert g < f * 0.97


def test_bad_configs_raise_one_line_errors():
    with pytest.raises(SpecError, match="spare erase block"):
        FtlConfig(user_bytes=1 << 20, op=0.01, block_pages=64).validate()
    with pytest.raises(SpecError, match="GC policy"):
        FtlConfig(user_bytes=1 << 26, gc="lru").validate()
    with pytest.raises(SpecError, match="outside the modelled capacity"):
        m = FtlModel(FtlConfig(user_bytes=1 << 26, op=0.2, block_pages=64))
        m.apply_pages(np.array([1], np.uint8), np.array([(1 << 26) // 4096]), np.array([1]))


def test_bytes_to_pages_rounds_writes_out_and_trims_in():
    ops, first, count = bytes_to_pages([OP_WRITE, OP_TRIM, OP_TRIM], [1000, 1000, 4096], [5000, 8000, 4096], 4096)
    assert first.tolist() == [0, 1, 1] and count.tolist() == [2, 1, 1]


def test_read_iolog_v2_v3_and_errors(tmp_path):
    v3 = tmp_path / "a.log"
    v3.write_text("fio version 3 iolog\n0 /dev/x add\n0 /dev/x open\n1 /dev/x write 0 8192\n2 /dev/x read 0 4096\n"
                  "3 /dev/x trim 4096 4096\n4 /dev/x close\n")
    ops, off, ln = read_iolog(v3)
    assert ops.tolist() == [OP_WRITE, 0, OP_TRIM] and off.tolist() == [0, 0, 4096] and ln.tolist() == [8192, 4096, 4096]
    v2 = tmp_path / "b.log"
    v2.write_text("fio version 2 iolog\nf1 add\nf1 write 4096 4096\nf2 write 0 4096\n")
    with pytest.raises(TraceError, match="--iolog-target"):
        read_iolog(v2)
    ops, off, ln = read_iolog(v2, target="f1")
    assert off.tolist() == [4096]
    bad = tmp_path / "c.log"
    bad.write_text("fio version 3 iolog\n0 f add\n1 f write 0 4096\n2 f write x 4096\n")
    with pytest.raises(TraceError, match=r"c.log:4: field 'offset'"):
        read_iolog(bad)
    with pytest.raises(TraceError, match="not a fio iolog"):
        (tmp_path / "d.log").write_text("hello\n")
        read_iolog(tmp_path / "d.log")


def test_read_plan_npy(tmp_path):
    dt = np.dtype([("op", "u1"), ("target", "u2"), ("offset", "u8"), ("length", "u4")])
    plan = np.zeros(3, dt)
    plan["op"], plan["target"], plan["offset"], plan["length"] = [1, 0, 2], [0, 0, 1], [0, 4096, 8192], 4096
    np.save(tmp_path / "p.npy", plan)
    ops, off, ln = read_plan(tmp_path / "p.npy", target=0)
    assert ops.tolist() == [1, 0] and off.tolist() == [0, 4096]


def test_cli_ftl_json_and_iolog(cli, tmp_path):
    r = cli("ftl", "--capacity", "32MiB", "--op", "0.28", "--block-pages", "64", "--pattern", "sequential",
            "--writes", "2x", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["waf"] == pytest.approx(1.0) and out["measured"]["host_pages"] == 2 * (32 << 20) // 4096 // 2
    log = tmp_path / "w.log"
    rng = np.random.default_rng(1)
    offs = rng.integers(0, (32 << 20) // 4096, 3 * (32 << 20) // 4096) * 4096   # 3x capacity, uniform random
    log.write_text("fio version 3 iolog\n0 t add\n" + "".join(f"{i} t write {o} 4096\n" for i, o in enumerate(offs)))
    r = cli("ftl", "--capacity", "32MiB", "--op", "0.28", "--block-pages", "64", "--iolog", log, "--writes", "3x",
            "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["waf"] == pytest.approx(analytic_waf_uniform(out["effective_op"]), rel=0.1)


def test_cli_ftl_bad_input_exits_2_with_one_line():
    env = {"PYTHONPATH": str(REPO)}
    p = subprocess.run([sys.executable, "-m", "kvbench", "ftl", "--capacity", "1MiB", "--op", "0.01"],
                       capture_output=True, text=True, cwd=REPO, env=env)
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1 and "kvbench: error:" in p.stderr and "fix:" in p.stderr


def test_waf_excludes_the_warm_up_exactly():
    """WAF = NAND / host pages over the writes after the warm-up, not over all of them. Oracle: the same seeded
    stream cut at the warm-up point (a run of 2x capacity) gives the warm-up's NAND pages; the rest are the
    measured part's. Right after a sequential fill GC copies more than in steady state, so the two differ."""
    cfg = FtlConfig(user_bytes=16 << 20, op=0.1, block_pages=16)
    U = cfg.user_pages
    whole = simulate(cfg, pattern="uniform", writes=4, warmup=0.5, seed=3)
    head = simulate(cfg, pattern="uniform", writes=2, warmup=0.0, seed=3)
    fill = simulate(cfg, pattern="uniform", writes=1e-9, warmup=0.0, seed=3).total   # the preconditioning fill
    assert whole.measured.host_pages == 2 * U and head.measured.host_pages == 2 * U
    nand_after = whole.total.nand_pages - head.total.nand_pages
    assert whole.measured.nand_pages == nand_after
    assert whole.waf == nand_after / (2 * U)
    assert whole.waf_all == (whole.total.nand_pages - fill.nand_pages) / (4 * U)
    assert head.waf == head.waf_all and whole.waf != whole.waf_all
    assert whole.to_dict()["warmup_fraction"] == 0.5


def test_sequential_rewrite_counts_by_hand():
    # 512 user pages, 8-page blocks, op 0.1: 563 physical pages -> 70 blocks. A sequential fill, then 3 passes
    # of sequential rewrites: every victim block is wholly invalid, nothing is copied, WAF exactly 1.
    cfg = FtlConfig(user_bytes=512 * 4096, op=0.1, block_pages=8)
    assert (cfg.user_pages, cfg.blocks, cfg.physical_pages) == (512, 70, 560)
    assert cfg.effective_op == 560 / 512 - 1
    r = simulate(cfg, pattern="sequential", writes=3, warmup=0.25, seed=1)
    assert (r.measured.host_pages, r.measured.gc_pages) == (1536 - 384, 0)
    assert r.waf == 1.0 and r.waf_all == 1.0 and r.total.host_pages == 512 + 1536


def test_config_limits_at_their_edges():
    # spare erase blocks: 512 user pages need 64 blocks of 8; op 1/16 gives 544 pages = 68 blocks: 4 spare,
    # exactly min_free_blocks + 2 (allowed); op 0.047 gives 536 -> 67 blocks: 3 spare (refused)
    assert FtlConfig(user_bytes=512 * 4096, op=0.0625, block_pages=8).validate().blocks == 68
    with pytest.raises(SpecError, match="leaves 3 spare erase block"):
        FtlConfig(user_bytes=512 * 4096, op=0.047, block_pages=8).validate()
    # over-provisioning up to 10 inclusive
    assert FtlConfig(user_bytes=512 * 4096, op=10.0, block_pages=8).validate().op == 10.0
    for bad in (10.5, 0.0, float("nan")):
        with pytest.raises(SpecError, match="outside"):
            FtlConfig(user_bytes=512 * 4096, op=bad, block_pages=8).validate()
    # page numbers are int32: 2^31 - 2 physical pages is the most (2^30 - 1 user pages of 512 B at op 1)
    assert FtlConfig(user_bytes=(2**30 - 1) * 512, page_size=512, op=1.0, block_pages=2).validate()
    with pytest.raises(SpecError, match="2\\^31 page limit"):
        FtlConfig(user_bytes=2**30 * 512, page_size=512, op=1.0, block_pages=2).validate()


def test_lambert_w0_domain_and_branch_point():
    with pytest.raises(ValueError, match="-1/e"):
        lambert_w0(-0.5)
    assert lambert_w0(-1.0 / math.e) == pytest.approx(-1.0, abs=1e-7)    # W(-1/e) = -1
    assert lambert_w0(0.0) == 0.0 and lambert_w0(math.e) == pytest.approx(1.0, rel=1e-14)


def test_preconditioning_fill_writes_every_page_exactly_once():
    cfg = FtlConfig(user_bytes=(2 * 65536 + 5) * 512, page_size=512, op=0.1, block_pages=64)
    m = FtlModel(cfg)
    m.fill_sequential()
    c = m.counters
    assert (c.host_pages, c.nand_pages, c.gc_pages) == (2 * 65536 + 5, 2 * 65536 + 5, 0)


def test_long_streams_span_several_chunks_and_count_exactly():
    """More than one kernel batch (2^20 pages): 300 passes of a 3-page extent stream over 4,096 pages, and
    300x uniform writes: host pages after the fill are exactly writes x capacity, and a 1-page stream is fine."""
    cfg = FtlConfig(user_bytes=4096 * 4096, op=0.2, block_pages=64)
    three = (np.array([OP_WRITE] * 3, np.uint8), np.array([0, 1, 2]), np.array([1, 1, 1]))
    r = simulate(cfg, extents=three, writes=300, warmup=0.5)
    assert r.total.host_pages == 4096 + 300 * 4096 and r.measured.host_pages == 150 * 4096
    assert math.isfinite(r.pages_per_s) and r.pages_per_s > 0
    u = simulate(cfg, pattern="uniform", writes=300, warmup=0.5, seed=2)
    assert u.total.host_pages == 4096 + 300 * 4096 and u.measured.host_pages == 150 * 4096
    one = simulate(cfg, extents=(np.array([OP_WRITE], np.uint8), np.array([7]), np.array([1])), writes=1)
    assert one.total.host_pages == 4096 + 4096 and one.waf == 1.0          # rewriting one page: no copies
    with pytest.raises(SpecError, match="warm-up"):
        simulate(cfg, writes=1, warmup=1.0)


def test_layout_waf_model_parameters_by_hand():
    """1 MiB slots, 16 MiB erase blocks, >= 128 blocks: 2,048 slots (128 x 16 MiB / 1 MiB) of 64 x 16 KiB
    pages = 140,247 physical pages at op 0.07, under 2^18: 16 KiB pages kept. Under 2^16 pages the page
    doubles until it fits: 32 KiB gives 70,124 (too many), 64 KiB 35,062."""
    from kvbench.analysis.ftl import layout_waf

    kw = dict(erase_block_bytes=16 << 20, min_blocks=128, writes=2.0)
    waf, p = layout_waf("slot", 1 << 20, max_pages=1 << 18, **kw)
    assert (p["model_capacity_bytes"], p["page_bytes"], p["unit_bytes"], p["erase_block_bytes"]) == \
        (2 << 30, 16 << 10, 1 << 20, 16 << 20)
    assert waf > 1.0 and p["op"] == 0.07 and p["gc"] == "greedy" and p["writes"] == 2.0
    _, p = layout_waf("slot", 1 << 20, max_pages=1 << 16, **kw)
    assert (p["page_bytes"], p["unit_bytes"], p["model_capacity_bytes"]) == (64 << 10, 1 << 20, 2 << 30)
    log, p = layout_waf("log", 1 << 20, max_pages=1 << 16, segment_bytes=64 << 20, **kw)
    assert log == 1.0 and p["unit_bytes"] == 64 << 20 and p["model_capacity_bytes"] == 256 * (64 << 20)
    with pytest.raises(SpecError, match="unknown store layout"):
        layout_waf("btree", 1 << 20)
    with pytest.raises(SpecError, match="must be > 0"):
        layout_waf("slot", 0)
