"""FTL model: mapping consistency, trim, sequential WAF ~1, and uniform-random WAF against the analytic result."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest

from kvbench.analysis.ftl import (OP_TRIM, OP_WRITE, FtlConfig, FtlModel, analytic_waf_uniform, bytes_to_pages,
                                  lambert_w0, read_iolog, read_plan, simulate)
from kvbench.errors import SpecError, TraceError
from tests.conftest import REPO
from kvbench.analysis.ftl import FtlCounters


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


# --- FTL model edges the WAF tests do not reach, by hand: page-size validation, counter snapshots, counters that
# carry over between batches of extents.
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


def test_two_streams_keep_their_pages_in_their_own_erase_blocks():
    """Two streams, 8-page blocks: pages 0-7 written on stream 0 and 8-15 on stream 1, interleaved. Each stream
    fills its own open block (blocks 0 and 1 are open first), so pages 0-7 land in block 0, 8-15 in block 1."""
    m = FtlModel(FtlConfig(user_bytes=64 * 4096, op=1.0, block_pages=8, streams=2))
    pages = np.array([p for i in range(8) for p in (i, 8 + i)])
    streams = (pages >= 8).astype(np.int64)
    m.apply_pages(np.full(16, OP_WRITE, np.uint8), pages, np.ones(16, np.int64), streams)
    l2p = m._arrays["l2p"]
    assert (l2p[:8] // 8).tolist() == [0] * 8 and (l2p[8:16] // 8).tolist() == [1] * 8
    assert l2p[:8].tolist() == list(range(8)) and l2p[8:16].tolist() == list(range(8, 16))
    m.check()
    for bad in (2, -1):
        with pytest.raises(SpecError, match="write stream"):
            m.apply_pages(np.array([OP_WRITE], np.uint8), np.array([0]), np.array([1]), np.array([bad]))


def test_age_streams_move_gc_copies_one_stream_older_and_no_further():
    """gc_stream="age" with 2 streams: host writes go to stream 0; GC copies a stream-0 victim's pages into
    stream 1 and a stream-1 victim's into stream 1 again (the oldest). The mapping stays consistent and every
    erase block belongs to stream 0 or 1."""
    cfg = FtlConfig(user_bytes=256 * 4096, op=0.5, block_pages=8, streams=2, gc_stream="age")
    m = FtlModel(cfg)
    m.fill_sequential()
    rng = np.random.default_rng(5)
    n = 5000
    m.apply_pages(np.full(n, OP_WRITE, np.uint8), rng.integers(0, 256, n), np.ones(n, np.int64))
    m.check()
    c = m.counters
    assert c.gc_pages > 0 and c.nand_pages == c.host_pages + c.gc_pages
    in_use = np.unique(m._arrays["l2p"][m._arrays["l2p"] >= 0] // 8)
    assert set(m._arrays["bstream"][in_use].tolist()) == {0, 1}


def test_zero_length_extents_are_no_ops_and_negative_ones_errors():
    m = FtlModel(FtlConfig(user_bytes=64 * 4096, op=1.0, block_pages=8))
    m.apply_bytes(np.array([OP_TRIM, OP_WRITE], np.uint8), np.array([100, 0]), np.array([100, 0]))  # 0 pages
    assert m.counters.host_pages == 0 and m.counters.trimmed_pages == 0
    with pytest.raises(SpecError, match="outside the modelled capacity"):
        m.apply_pages(np.array([OP_WRITE], np.uint8), np.array([3]), np.array([-1]))


def test_lambert_w0_domain_tolerance_is_1e_15():
    import math

    from kvbench.analysis.ftl import lambert_w0

    assert lambert_w0(-1 / math.e - 0.5e-15) == pytest.approx(-1.0, abs=1e-6)     # rounding noise: accepted
    with pytest.raises(ValueError, match="-1/e"):
        lambert_w0(-1 / math.e - 1.5e-15)


def test_rate_of_a_run_too_fast_to_time_is_nan():
    from kvbench.analysis.ftl import FtlResult

    cfg = FtlConfig(user_bytes=64 * 4096, op=1.0, block_pages=8)
    c = FtlCounters(64, 64, 0, 0, 0)
    r = FtlResult(cfg, "uniform", 1.0, 1.0, c, c, [], [], 0.5, 0.0)
    assert np.isnan(r.pages_per_s)
    assert FtlResult(cfg, "uniform", 1.0, 1.0, c, c, [], [], 0.5, 2.0).pages_per_s == 32.0


def test_classes_pattern_by_hand():
    """64 slots of 3 pages (192 user pages), a quarter hot (16 slots) taking 80% of the writes: 100 pages need
    ceil(100 / 3) = 34 extents; hot writes land in slots 0-15, cold ones in 16-63; over 300,000 extents the hot
    share is 0.8 within 0.005 (binomial sd 0.0007) and every slot of each class is written."""
    from kvbench.analysis.ftl import _classes_chunks

    (ops, starts, counts, st), = list(_classes_chunks(192, 100, 3, 3, 0.25, 0.8, lambda c: c))
    assert len(ops) == 34 and counts.tolist() == [3] * 34 and (ops == OP_WRITE).all()
    chunks = list(_classes_chunks(192, 900_000, 3, 3, 0.25, 0.8, lambda c: c, chunk=100_000))
    starts = np.concatenate([c[1] for c in chunks])
    cls = np.concatenate([c[3] for c in chunks])
    assert len(starts) == 300_000 and len(chunks) == 3
    slots = starts // 3
    assert set(slots[cls == 0].tolist()) == set(range(16)) and set(slots[cls == 1].tolist()) == set(range(16, 64))
    assert (cls == 0).mean() == pytest.approx(0.8, abs=0.005)


def test_classes_pattern_keeps_a_cold_slot_whatever_the_hot_share():
    """hot_lbas 0.999 of 64 slots rounds to 64 hot slots; at most 63 are hot, so slot 63 stays cold."""
    from kvbench.analysis.ftl import _classes_chunks

    (_, starts, _, cls), = list(_classes_chunks(64, 20_000, 1, 1, 0.999, 0.5, lambda c: c))
    assert starts[cls == 0].max() == 62 and set(starts[cls == 1].tolist()) == {63}


def test_simulate_arguments_checked_and_defaults():
    from kvbench.analysis.ftl import simulate

    cfg = FtlConfig(user_bytes=64 * 4096, op=1.0, block_pages=8)
    for kw, msg in ((dict(pattern="bogus"), "unknown write pattern"), (dict(writes=0), "must be > 0"),
                    (dict(pattern="classes", hot_lbas=0.0), "must be in"),
                    (dict(pattern="classes", hot_lbas=1.0), "must be in"),
                    (dict(pattern="classes", hot_writes=0.0), "must be in"),
                    (dict(pattern="classes", hot_writes=1.0), "must be in")):
        with pytest.raises(SpecError, match=msg):
            simulate(cfg, **kw)
    # the classes pattern's defaults are README's 20% of the LBAs taking 80% of the writes, all on stream 0
    a = simulate(cfg, pattern="classes", writes=4, seed=2)
    b = simulate(cfg, pattern="classes", writes=4, seed=2, hot_lbas=0.2, hot_writes=0.8)
    assert a.total == b.total and a.waf == b.waf


def test_windows_count_host_writes_not_trims():
    """Extents write two pages, one page each, then trim the first, over 64 user pages; windows of 0.25 x 64 =
    16 host pages, and a window of (almost) nothing is one page. Trims do not count towards either (counted,
    the cut for the 16th write would fall after the 22nd)."""
    from kvbench.analysis.ftl import simulate

    cfg = FtlConfig(user_bytes=64 * 4096, op=1.0, block_pages=8)
    ops = np.array([OP_WRITE, OP_WRITE, OP_TRIM] * 32, np.uint8)
    starts = np.array([p for k in range(32) for p in (2 * k, 2 * k + 1, 2 * k)])
    ext = (ops, starts, np.ones(96, np.int64))
    r = simulate(cfg, extents=ext, writes=2, warmup=0.5)
    assert r.window_host_pages == [16] * 8 and r.measured.host_pages == 64
    tiny = simulate(cfg, extents=ext, writes=1, window=1e-9)
    assert tiny.window_host_pages == [1] * 64


def test_jesd219_extents_by_hand():
    """JESD219A: transfer sizes 1/2/4/8/16 pages with probabilities 0.77/0.10/0.07/0.03/0.03, each extent
    aligned to its size and inside the user space; 50% of the accesses to the first 5% of the LBAs, 30% to the
    next 15%, 20% to the remaining 80%. 200,000 extents: shares within 0.005 (binomial sd <= 0.0012)."""
    from kvbench.analysis.ftl import jesd219_extents

    U = 1 << 16
    ops, first, size = jesd219_extents(U, 200_000, seed=4)
    assert (ops == OP_WRITE).all() and set(np.unique(size).tolist()) == {1, 2, 4, 8, 16}
    assert (first % size == 0).all() and first.min() >= 0 and (first + size).max() <= U
    for pages, p in ((1, 0.77), (2, 0.10), (4, 0.07), (8, 0.03), (16, 0.03)):
        assert (size == pages).mean() == pytest.approx(p, abs=0.005)
    frac = first / U
    assert (frac < 0.05).mean() == pytest.approx(0.50, abs=0.005)
    assert ((frac >= 0.05) & (frac < 0.20)).mean() == pytest.approx(0.30, abs=0.005)
    assert (frac >= 0.20).mean() == pytest.approx(0.20, abs=0.005)
    # a user space that is not a multiple of the largest transfer: extents near its end are pulled inside
    for u in (U + 5, 37):
        _, first, size = jesd219_extents(u, 20_000, seed=4)
        assert (first + size).max() <= u and first.min() >= 0


def test_plan_targets_laid_out_back_to_back_on_one_drive(tmp_path):
    """Target 0 writes up to byte 10,000 (3 pages of 4 KiB when rounded up), so target 1 starts at 12,288; a plan
    without a target field is one target at its own offsets. Reads are skipped when sizing a target."""
    from kvbench.analysis.ftl import read_plan_tiers
    from kvbench.engine.plan import PLAN_DTYPE

    plan = np.zeros(4, dtype=PLAN_DTYPE)
    plan["op"] = [OP_WRITE, OP_WRITE, 0, OP_TRIM]
    plan["target"] = [0, 1, 0, 1]
    plan["offset"] = [6000, 0, 90_000, 4096]
    plan["length"] = [4000, 4096, 4096, 4096]
    np.save(tmp_path / "p.npy", plan)
    ops, offsets, lengths, tiers = read_plan_tiers(tmp_path / "p.npy")
    assert offsets.tolist() == [6000, 12_288, 90_000, 12_288 + 4096] and tiers.tolist() == [0, 1, 0, 1]
    plan["offset"][0], plan["length"][0] = 97, 4000           # target 0 ends at byte 4,097: 2 pages
    np.save(tmp_path / "q.npy", plan)
    assert read_plan_tiers(tmp_path / "q.npy")[1].tolist() == [97, 8192, 90_000, 8192 + 4096]
    flat = np.zeros(2, dtype=[("op", "u1"), ("offset", "u8"), ("length", "u4")])
    flat["op"], flat["offset"], flat["length"] = OP_WRITE, [0, 8192], 4096
    np.save(tmp_path / "f.npy", flat)
    _, offsets, _, tiers = read_plan_tiers(tmp_path / "f.npy")
    assert offsets.tolist() == [0, 8192] and tiers.tolist() == [0, 0]


def test_layout_waf_sizes_and_its_default_erase_block_count():
    """Sizes must be > 0; a 1-byte slot still takes a whole page (8 KiB: the 16 KiB page halved so that the 16 KiB
    erase unit holds two), a 1-byte erase unit is refused (not two 4 KiB pages); by default the model holds at
    least 512 erase blocks: 512 x 16 MiB / 1 MiB slots = 8,192 slots, 8 GiB."""
    from kvbench.analysis.ftl import layout_waf

    for slot, eb in ((0, 16 << 20), (1 << 20, 0), (-1, 16 << 20)):
        with pytest.raises(SpecError, match="must be > 0"):
            layout_waf("slot", slot, erase_block_bytes=eb)
    waf, p = layout_waf("slot", 1, erase_block_bytes=16 << 10, min_blocks=1, writes=1.0)
    assert (p["unit_bytes"], p["page_bytes"], p["erase_block_bytes"]) == (8 << 10, 8 << 10, 16 << 10)
    assert p["model_capacity_bytes"] == 16384 * (8 << 10) and waf > 1.0      # 1 unit x 16 KiB / 1 B slots
    with pytest.raises(SpecError, match="--erase-block: an erase unit of 1 B .* is not a whole number of at least "
                                        "two 4 KiB pages"):
        layout_waf("slot", 16 << 10, erase_block_bytes=1, min_blocks=8, writes=1.0)
    _, p = layout_waf("log", 1 << 20, erase_block_bytes=16 << 20, segment_bytes=1 << 20, writes=1.0)
    assert p["model_capacity_bytes"] == 8192 << 20


@pytest.mark.parametrize("gc", ["greedy", "fifo"])
def test_erase_block_zero_as_the_gc_victim_is_erased_and_accounted(gc):
    """16 user pages in 4-page erase blocks, 8 blocks (op 1.0), GC below 2 free blocks. The fill puts pages 0-15
    in blocks 0-3 (block 3 still open); rewriting pages 4-7 then 0-3 opens blocks 4 and 5 and leaves blocks 1
    and 0 with no valid page, block 0 the last to get there (greedy: the head of bucket 0) and the first closed
    (fifo: the head of the ring). Page 8's rewrite opens block 6: one free block left, so the GC takes block 0,
    copies nothing and erases it. 25 host pages, 25 NAND pages, 0 GC copies, 1 erase; every block accounted for
    (a victim numbered 0 must be cleaned like any other)."""
    m = FtlModel(FtlConfig(user_bytes=16 * 4096, op=1.0, block_pages=4, gc=gc))
    m.fill_sequential()
    w = np.array([OP_WRITE], np.uint8)
    for start, count in ((4, 4), (0, 4), (8, 1)):
        m.apply_pages(w, np.array([start]), np.array([count]))
    c = m.counters
    assert (c.host_pages, c.nand_pages, c.gc_pages, c.erases) == (25, 25, 0, 1)
    m.check()
    assert m._arrays["state"][0] == 0          # block 0 is the one erased (back in the free ring)


# mutation survivors (issue 34 part 4): edges of the analytic reference, the result's dict, the pattern generators
def test_lambert_w0_accepts_exactly_the_tolerance_below_the_branch_point():
    """The domain check refuses x < -1/e - 1e-15: x equal to that bound (the same double) is still accepted."""
    x = -1.0 / math.e - 1e-15
    assert lambert_w0(x) == pytest.approx(-1.0, abs=1e-6)


@pytest.mark.parametrize("w", [-0.99, -0.9, -0.5, -0.1, 0.5, 1.0, 3.0, 10.0])
def test_lambert_w0_inverts_w_exp_w(w):
    """W(w e^w) = w for w >= -1 (the definition, no library): to 1e-12 away from the branch point, where a wrong
    derivative in the iteration leaves errors of 1e-7..1e-5 near w = -1."""
    assert lambert_w0(w * math.exp(w)) == pytest.approx(w, rel=1e-12)


def test_result_dict_fields_by_hand():
    """512 user pages of 4 KiB, 8-page blocks, op 0.1: 70 blocks; sequential rewrites copy nothing, so the
    measured part (3 passes after a quarter of warm-up: 1,152 pages) is 1,152 host and 1,152 NAND pages."""
    cfg = FtlConfig(user_bytes=512 * 4096, op=0.1, block_pages=8)
    d = simulate(cfg, pattern="sequential", writes=3, warmup=0.25).to_dict()
    assert (d["capacity_bytes"], d["page_size"], d["op"], d["block_pages"], d["blocks"]) == \
        (512 * 4096, 4096, 0.1, 8, 70)
    assert (d["streams"], d["gc_stream"], d["gc"], d["pattern"]) == (1, "same", "greedy", "sequential")
    assert d["host_bytes"] == 1152 * 4096 and d["nand_bytes"] == 1152 * 4096
    assert d["effective_op"] == 560 / 512 - 1
    assert d["analytic_uniform_waf"] == analytic_waf_uniform(560 / 512 - 1)
    assert d["measured"]["host_pages"] == 1152 and d["total"]["host_pages"] == 512 + 1536


def test_uniform_chunks_reach_every_aligned_slot_and_stop_at_the_total():
    """10 user pages in 3-page writes: slots 0, 3, 6 (the last page is never written); 300 pages are 100 writes,
    in chunks of at most 40."""
    from kvbench.analysis.ftl import _uniform_chunks

    chunks = list(_uniform_chunks(10, 300, 1, io_pages=3, chunk=40))
    assert [len(c[0]) for c in chunks] == [40, 40, 20]
    starts = np.concatenate([c[1] for c in chunks])
    assert set(starts.tolist()) == {0, 3, 6}
    assert all((c[2] == 3).all() and (c[0] == OP_WRITE).all() and (c[3] == 0).all() for c in chunks)


def test_a_stream_without_writes_is_refused():
    cfg = FtlConfig(user_bytes=64 * 4096, op=1.0, block_pages=8)
    trims = (np.array([OP_TRIM, 0], np.uint8), np.array([0, 1]), np.array([4, 1]))
    with pytest.raises(SpecError, match="contains no writes"):
        simulate(cfg, extents=trims, writes=1)


def test_progress_is_called_before_each_batch_of_a_tiled_stream():
    """A 3-extent stream (one page each) over 4,096 pages, 300 passes (1,228,800 host pages): a short stream is
    tiled to fill a kernel batch of 2^20 extents, 2^20 // 3 = 349,525 copies (1,048,575 pages), so progress is
    called at 0 and at 1,048,575 pages, each time with the total to write."""
    cfg = FtlConfig(user_bytes=4096 * 4096, op=0.2, block_pages=64)
    three = (np.array([OP_WRITE] * 3, np.uint8), np.array([0, 1, 2]), np.array([1, 1, 1]))
    calls = []
    simulate(cfg, extents=three, writes=300, progress=lambda done, total: calls.append((done, total)))
    assert calls == [(0, 1_228_800), (1_048_575, 1_228_800)]


def test_jesd219_pattern_draws_enough_extents_not_to_loop():
    """The jesd219 pattern draws n = int(total / mean pages x 1.05) + 1 extents, mean pages 1.97 by hand (0.77 x 1
    + 0.10 x 2 + 0.07 x 4 + 0.03 x 8 + 0.03 x 16): 4,096 pages x 2 = 8,192 to write, n = int(4,366.2) + 1 = 4,367.
    Oracle: the same extents fed as an extent stream give the same counters."""
    from kvbench.analysis.ftl import jesd219_extents

    cfg = FtlConfig(user_bytes=4096 * 4096, op=0.2, block_pages=16)
    a = simulate(cfg, pattern="jesd219", writes=2, seed=4)
    b = simulate(cfg, extents=jesd219_extents(4096, 4367, 4, 4096), writes=2)
    assert a.total == b.total and a.measured == b.measured and a.window_waf == b.window_waf
    assert a.pattern == "jesd219" and b.pattern == "extents"


def test_jesd219_last_region_is_uniform_over_the_last_80_percent():
    """20% of the accesses spread evenly over LBAs 20%..100%: 10% land in 20%..60%, 10% in 60%..100%."""
    from kvbench.analysis.ftl import jesd219_extents

    U = 1 << 16
    _, first, _ = jesd219_extents(U, 200_000, seed=5)
    frac = first / U
    assert ((frac >= 0.2) & (frac < 0.6)).mean() == pytest.approx(0.10, abs=0.004)
    assert (frac >= 0.6).mean() == pytest.approx(0.10, abs=0.004)


def test_jesd219_page_bytes_per_host_byte_by_hand():
    """Host bytes per transfer (JESD219A's shares): 512 x 0.04 + (1 + 1.5 + 2 + 2.5 + 3 + 3.5) KiB x 0.01 + 4 KiB x
    0.67 + 8 KiB x 0.10 + 16 KiB x 0.07 + 32 KiB x 0.03 + 64 KiB x 0.03 = 7,818.24 B. 4 KiB pages: 1.97 pages =
    8,069.12 B; 16 KiB pages: every transfer up to 16 KiB is one page (0.94), 32 KiB two, 64 KiB four: 1.12
    pages = 18,350.08 B; 512 B pages: every transfer is whole pages, a ratio of 1."""
    from kvbench.analysis.ftl import JESD219_PAGES, jesd219_page_bytes_per_host_byte, jesd219_pages

    assert JESD219_PAGES == ((1, 0.77), (2, 0.10), (4, 0.07), (8, 0.03), (16, 0.03))
    assert [p for p, _ in jesd219_pages(16384)] == [1, 2, 4]
    assert [q for _, q in jesd219_pages(16384)] == pytest.approx([0.94, 0.03, 0.03])
    assert jesd219_page_bytes_per_host_byte(4096) == pytest.approx(8069.12 / 7818.24, rel=1e-12)
    assert jesd219_page_bytes_per_host_byte(16384) == pytest.approx(18350.08 / 7818.24, rel=1e-12)
    assert jesd219_page_bytes_per_host_byte(512) == pytest.approx(1.0, rel=1e-12)


def test_read_iolog_largest_counts_written_bytes_only(tmp_path):
    """f1 writes 4,096 B and reads ten times, f2 writes 4,100 B: the file written most is f2 (reads and trims
    weigh nothing); without `largest` the two files are refused."""
    log = tmp_path / "two.log"
    log.write_text("fio version 3 iolog\n0 f1 add\n0 f2 add\n1 f1 write 0 4096\n"
                   + "".join(f"{2 + i} f1 read 0 4096\n" for i in range(10)) + "20 f1 trim 0 4096\n"
                   "21 f2 write 8192 4100\n")
    ops, off, ln = read_iolog(log, largest=True)
    assert ops.tolist() == [OP_WRITE] and off.tolist() == [8192] and ln.tolist() == [4100]
    with pytest.raises(TraceError, match="writes 2 files"):
        read_iolog(log)


def test_read_iolog_takes_zero_lengths_and_refuses_negative_numbers(tmp_path):
    ok = tmp_path / "z.log"
    ok.write_text("fio version 2 iolog\nf add\nf write 0 0\nf write 4096 4096\n")
    ops, off, ln = read_iolog(ok)
    assert off.tolist() == [0, 4096] and ln.tolist() == [0, 4096]
    for line, field in (("f write -4096 4096", "offset"), ("f write 0 -1", "length")):
        bad = tmp_path / "n.log"
        bad.write_text(f"fio version 2 iolog\nf add\nf write 0 4096\n{line}\n")
        with pytest.raises(TraceError, match=rf"n\.log:4: field '{field}'"):
            read_iolog(bad)


def test_layout_waf_default_seed_is_one():
    from kvbench.analysis.ftl import layout_waf

    kw = dict(erase_block_bytes=8 * (16 << 10), min_blocks=64, writes=1.0)
    assert layout_waf("slot", 16 << 10, **kw)[0] == layout_waf("slot", 16 << 10, seed=1, **kw)[0] != \
        layout_waf("slot", 16 << 10, seed=2, **kw)[0]


@pytest.mark.parametrize("gc", ["greedy", "fifo"])
def test_same_stream_gc_keeps_every_page_in_its_streams_erase_blocks(gc):
    """Two streams, gc_stream="same" (FDP's isolated reclaim units): pages 0-127 always go to stream 0, 128-255 to
    stream 1, rewritten at random until GC has cleaned every erase block many times over. A victim's valid
    pages are copied into the victim's own stream, whichever stream the host write that triggered the clean
    was on: every mapped page lies in an erase block of its own stream."""
    m = FtlModel(FtlConfig(user_bytes=256 * 4096, op=0.5, block_pages=8, gc=gc, streams=2))
    pages = np.arange(256)
    m.apply_pages(np.full(256, OP_WRITE, np.uint8), pages, np.ones(256, np.int64), (pages >= 128).astype(np.int64))
    rng = np.random.default_rng(9)
    w = rng.integers(0, 256, 6000)
    m.apply_pages(np.full(len(w), OP_WRITE, np.uint8), w, np.ones(len(w), np.int64), (w >= 128).astype(np.int64))
    m.check()
    c = m.counters
    assert c.gc_pages > 0 and c.erases > 48
    l2p, bstream = m._arrays["l2p"], m._arrays["bstream"]
    assert (bstream[l2p // 8] == (pages >= 128)).all()


def test_fifo_gc_copies_user_page_zero_out_of_the_oldest_block():
    """16 user pages in 4-page erase blocks, 8 blocks (op 1.0), FIFO, GC below 2 free blocks. The fill puts pages
    0-15 in blocks 0-3 (closed in that order; block 3 open and full); rewriting pages 4-11 closes block 3 and
    fills blocks 4 and 5; page 12's rewrite closes block 5 and opens block 6, leaving one free block, so GC
    cleans the oldest block, 0, whose four pages are all valid: pages 0, 1, 2 go to block 6 after page 12
    (slots 1-3), page 3 opens block 7; block 0 is erased, then block 1 (pages 4-7 rewritten, nothing to copy):
    2 free blocks. 25 host pages, 4 GC copies, 2 erases; user page 0 (physical page 0 before) now at 6 x 4 + 1."""
    m = FtlModel(FtlConfig(user_bytes=16 * 4096, op=1.0, block_pages=4, gc="fifo"))
    m.fill_sequential()
    m.apply_pages(np.array([OP_WRITE], np.uint8), np.array([4]), np.array([9]))
    c = m.counters
    assert (c.host_pages, c.gc_pages, c.nand_pages, c.erases) == (25, 4, 29, 2)
    assert m._arrays["l2p"][[0, 1, 2, 3, 12]].tolist() == [25, 26, 27, 28, 24]
    m.check()


def test_config_defaults():
    """A drive given only its capacity: 4 KiB pages, 7% over-provisioning, 256-page erase blocks, greedy GC
    below 2 free blocks, one stream. 1 GiB: 262,144 pages x 1.07 = 280,494 -> 1,095 blocks of 256."""
    cfg = FtlConfig(user_bytes=1 << 30)
    assert (cfg.page_size, cfg.op, cfg.block_pages, cfg.gc, cfg.min_free_blocks, cfg.streams, cfg.gc_stream) == \
        (4096, 0.07, 256, "greedy", 2, 1, "same")
    assert (cfg.user_pages, cfg.blocks, cfg.physical_pages) == (262_144, 1095, 1095 * 256)


def test_simulate_default_seed_is_one():
    cfg = FtlConfig(user_bytes=64 * 4096, op=1.0, block_pages=8)
    a, b, c = (simulate(cfg, writes=2, **kw) for kw in ({}, {"seed": 1}, {"seed": 2}))
    assert a.total == b.total and a.window_waf == b.window_waf and a.window_waf != c.window_waf


def test_one_extent_stream_is_tiled_to_a_whole_batch():
    """A one-page stream over 64 pages, 16,384 passes: 2^20 host pages, tiled into one kernel batch of 2^20
    copies (progress called once, at 0). Windows longer than the run: no per-window cuts."""
    cfg = FtlConfig(user_bytes=64 * 4096, op=1.0, block_pages=8)
    calls = []
    r = simulate(cfg, extents=(np.array([OP_WRITE], np.uint8), np.array([5]), np.array([1])), writes=16384, window=1e5,
                 progress=lambda done, total: calls.append((done, total)))
    assert calls == [(0, 1 << 20)] and r.total.host_pages == 64 + (1 << 20) and r.waf == 1.0


def test_extents_carry_their_write_streams():
    """Two streams: pages 0-31 rewritten in order on stream 0, pages 32-63 on stream 1, each extent naming its
    stream (the fourth array): the streams' blocks never mix and the rewrites cost no copies. A stream the drive
    lacks is refused; the pattern name is ignored when extents are given."""
    cfg = FtlConfig(user_bytes=64 * 4096, op=1.0, block_pages=8, streams=2)
    pages = np.arange(64)
    ext = (np.full(64, OP_WRITE, np.uint8), pages, np.ones(64, np.int64), (pages >= 32).astype(np.int64))
    r = simulate(cfg, extents=ext, writes=3, pattern="not-a-pattern")
    assert r.pattern == "extents" and r.waf == 1.0 and r.total.host_pages == 64 + 192
    with pytest.raises(SpecError, match="write stream 2 outside"):
        simulate(cfg, extents=ext[:3] + (2 * ext[3],), writes=1)


def test_layout_waf_default_erase_block_is_256_mib():
    """256 MiB segments (one per 256 MiB erase block): 256 units; pages double from 16 KiB until 256 x (256 MiB /
    page) x 1.07 <= 4,096 pages: 32 MiB pages, 8 per unit and per erase block; 256 x 256 MiB of user space."""
    from kvbench.analysis.ftl import layout_waf

    _, p = layout_waf("log", 1 << 20, segment_bytes=256 << 20, min_blocks=256, max_pages=1 << 12, writes=1e-9)
    assert (p["erase_block_bytes"], p["page_bytes"], p["unit_bytes"], p["model_capacity_bytes"]) == \
        (256 << 20, 32 << 20, 256 << 20, 256 * (256 << 20))


def test_layout_waf_default_page_budget_is_2_to_the_22():
    """200,000 32 KiB segments (100,000 blocks of 64 KiB, two segments each) at op 10: 16 KiB pages give
    200,000 x 2 x 11 = 4.4 M pages > 2^22 (4,194,304), so pages double to 32 KiB (2.2 M), where they stop."""
    from kvbench.analysis.ftl import layout_waf

    _, p = layout_waf("log", 1 << 20, segment_bytes=32 << 10, erase_block_bytes=64 << 10, min_blocks=100_000,
                      op=10.0, writes=1e-9)
    assert (p["page_bytes"], p["unit_bytes"], p["model_capacity_bytes"]) == (32 << 10, 32 << 10, 200_000 * (32 << 10))
    # well under the budget (256 64 KiB segments: 256 x 4 x 1.07 = 1,096 pages of 16 KiB) pages stay 16 KiB
    _, p = layout_waf("log", 1 << 20, segment_bytes=64 << 10, erase_block_bytes=64 << 10, min_blocks=1, writes=1e-9)
    assert (p["page_bytes"], p["unit_bytes"]) == (16 << 10, 64 << 10)


@pytest.mark.parametrize("gc", ["greedy", "fifo"])
def test_kernel_errors_surface_as_spec_errors(gc):
    """validate() keeps enough spare blocks for neither kernel error to happen, so the state is forced by hand:
    after a fill (64 pages, 8 full blocks, the last one open) with the free count set to 0, the next page closes
    block 7 and finds no block to open (code 1); on a fresh drive with the free count set to 1 (below
    min_free_blocks 2) and no closed block yet, GC finds no victim after the first page (code 2). Either way
    apply_pages raises instead of returning a half-applied batch as a success."""
    cfg = FtlConfig(user_bytes=64 * 4096, op=1.0, block_pages=8, gc=gc)
    for fill, free, code in ((True, 0, 1), (False, 1, 2)):
        m = FtlModel(cfg)
        if fill:
            m.fill_sequential()
        m._arrays["fmeta"][2] = free
        with pytest.raises(SpecError, match=rf"ran out of free blocks \(code {code}\)"):
            m.apply_pages(np.array([OP_WRITE], np.uint8), np.array([0]), np.array([1]))


def test_rate_needs_a_positive_time_and_seconds_are_the_runs_own():
    """pages_per_s is NaN only for a run of no measurable time: half a second gives twice the pages. A run's
    seconds lie within the wall time around the call (measured by the caller: a consistency check, not a
    speed bound)."""
    import time

    from kvbench.analysis.ftl import FtlResult

    cfg = FtlConfig(user_bytes=64 * 4096, op=1.0, block_pages=8)
    c = FtlCounters(64, 64, 0, 0, 0)
    assert FtlResult(cfg, "uniform", 1.0, 1.0, c, c, [], [], 0.5, 0.5).pages_per_s == 128.0
    t0 = time.perf_counter()
    r = simulate(cfg, writes=1)
    assert 0.0 < r.seconds <= time.perf_counter() - t0


def test_model_repr_leaves_the_arrays_out():
    m = FtlModel(FtlConfig(user_bytes=64 * 4096, op=1.0, block_pages=8))
    assert "_arrays" not in repr(m) and "block_pages=8" in repr(m)


def test_layout_waf_page_budget_is_inclusive():
    """256 32 KiB segments (128 blocks of 64 KiB: 256 units, the least) at op 1.0 take 256 x 2 x 2 = 1,024 pages of
    16 KiB: exactly a budget of 1,024, which keeps the 16 KiB pages; a budget of 1,023 doubles them."""
    from kvbench.analysis.ftl import layout_waf

    kw = dict(segment_bytes=32 << 10, erase_block_bytes=64 << 10, min_blocks=128, op=1.0, writes=1e-9)
    assert layout_waf("log", 1 << 20, max_pages=1024, **kw)[1]["page_bytes"] == 16 << 10
    assert layout_waf("log", 1 << 20, max_pages=1023, **kw)[1]["page_bytes"] == 32 << 10


def test_streams_from_1_to_64():
    """64 user pages at op 10 (88 blocks of 8: 80 spare) have room for 64 open blocks plus the GC's reserve."""
    kw = dict(user_bytes=64 * 4096, op=10.0, block_pages=8)
    assert FtlConfig(streams=64, **kw).validate().streams == 64
    for bad in (0, 65):
        with pytest.raises(SpecError, match=f"--streams {bad} is outside 1..64"):
            FtlConfig(streams=bad, **kw).validate()


def test_classes_chunks_end_with_a_partial_chunk():
    """250,000 one-page writes in chunks of 100,000: 100,000, 100,000, then the 50,000 left."""
    from kvbench.analysis.ftl import _classes_chunks

    chunks = list(_classes_chunks(192, 250_000, 3, 1, 0.25, 0.8, lambda c: c, chunk=100_000))
    assert [len(c[0]) for c in chunks] == [100_000, 100_000, 50_000]


def test_erase_unit_pages_is_the_unit_asked_by_hand():
    """The page that models an erase unit of exactly the size asked: halved until two fit and divide it, doubled
    (while the model has too many pages) only while the doubled page still divides the unit into two or more."""
    from kvbench.analysis.ftl import erase_unit_pages

    always = lambda page: True              # noqa: E731 - a model that always has too many pages
    assert erase_unit_pages(256 << 20, 16 << 10) == (16 << 10, 16384)
    assert erase_unit_pages(256 << 20, 16 << 10, too_many=always) == (128 << 20, 2)      # half the unit, no more
    assert erase_unit_pages(256 << 20, 16 << 10, too_many=always, max_page_bytes=1 << 20) == (1 << 20, 256)
    assert erase_unit_pages(16 << 10, 16 << 10) == (8 << 10, 2)                          # halved: two to a unit
    assert erase_unit_pages(12 << 10, 16 << 10, too_many=always) == (4 << 10, 3)         # 8 KiB does not divide
    assert erase_unit_pages(3 << 20, 1 << 20, too_many=always) == (1 << 20, 3)           # 2 MiB does not divide
    assert erase_unit_pages(1 << 20, 12 << 10) == (4 << 10, 256)     # 12 KiB, 6 KiB: none divides; 4 KiB does
    assert erase_unit_pages(8 << 10, 16 << 10) == (4 << 10, 2)         # the smallest unit: two 4 KiB pages
    assert erase_unit_pages(20 << 10, 4 << 10, too_many=always) == (4 << 10, 5)   # 8 KiB pages: 2.5 to a unit
    for erase in (0, 1, 4096, 8191, 8192 + 512):
        with pytest.raises(SpecError, match="not a whole number of at least two 4 KiB pages"):
            erase_unit_pages(erase, 16 << 10, what="--erase-block")
