"""Trace-driven device WAF (kvbench.analysis.trace_waf): the store's own write/trim stream, by hand; the compiled
path against a slow pure-Python FTL; FIFO slot reuse under LRU against random overwrites; extension by a fitted
model; ``kvbench ftl --trace``; plan's per-class WAF at the capacity each class sizes."""

from __future__ import annotations

import json
import math
from functools import partial

import numpy as np
import pytest

from kvbench.analysis import ftl
from kvbench.analysis.trace_waf import StoreWrites, WafModel, store_waf, store_writes
from kvbench.errors import SpecError
from kvbench.stream.traces import Trace, read_trace
from tests.conftest import make_trace

BLOCK = 1 << 20          # a 1 MiB KV block: 1 MiB slots


# requests as lists of block keys, one a second, 16-token blocks (the shared builder, tests/conftest.py)
_trace = partial(make_trace, None, block_tokens=16)


# --- the store's stream, by hand ---------------------------------------------------------------------------------
def test_lru_slot_store_stream_by_hand():
    """Two cached blocks, no spare, trims on. keys 1,2,3,1,4 (one block per request):
    1 -> slot 0; 2 -> slot 1; 3 evicts 1 (slot 0 trimmed, reused); 1 evicts 2 (slot 1); 4 evicts 3 (slot 0)."""
    sw = store_writes(_trace([[1], [2], [3], [1], [4]]), block_bytes=BLOCK, capacity_bytes=2 * BLOCK, trim=True,
                      spare_slots=0, extend=False)
    W, T = ftl.OP_WRITE, ftl.OP_TRIM
    assert sw.ops.tolist() == [W, W, T, W, T, W, T, W]
    assert sw.slots.tolist() == [0, 1, 0, 0, 1, 1, 0, 0]
    assert sw.request.tolist() == [0, 1, 2, 2, 3, 3, 4, 4]
    assert sw.capacity_blocks == 2 and sw.n_slots == 2 and sw.origin == "trace" and sw.sample_rate == 1.0
    # warm-up: up to the first rewrite of a slot (the third write), plus one turnover of 2 writes
    assert sw.writes == 5 and sw.warm_writes == 2 + 2
    assert sw.turnovers == pytest.approx((5 - 4) / 2)       # writes past the warm-up, per cached block


def test_write_back_l2_in_front_by_hand():
    """An L2 of one block in front of a 2-block L3, write-back: a block reaches L3 only when L2 evicts it.
    keys 1, 2, 3: 1 in L2; 2 evicts 1 into L3 slot 0; 3 evicts 2 into slot 1. The L2's own writes are not
    the L3 store's stream."""
    sw = store_writes(_trace([[1], [2], [3]]), block_bytes=BLOCK, capacity_bytes=2 * BLOCK, l2_bytes=BLOCK,
                      write_policy="back", spare_slots=0, extend=False)
    assert sw.ops.tolist() == [ftl.OP_WRITE, ftl.OP_WRITE] and sw.slots.tolist() == [0, 1]
    assert sw.request.tolist() == [1, 2] and sw.params["l2_blocks"] == 1


def test_fifo_policy_and_ttl_change_the_stream():
    """FIFO does not refresh key 1 on its hit, so 3 evicts 1 (not 2); a retention of 1.5 s expires idle blocks."""
    reqs = [[1], [2], [1], [3]]
    lru = store_writes(_trace(reqs), block_bytes=BLOCK, capacity_bytes=2 * BLOCK, trim=True, spare_slots=0,
                       extend=False)
    fifo = store_writes(_trace(reqs), block_bytes=BLOCK, capacity_bytes=2 * BLOCK, trim=True, spare_slots=0,
                        policy="fifo", extend=False)
    W, T = ftl.OP_WRITE, ftl.OP_TRIM
    assert list(zip(lru.ops.tolist(), lru.slots.tolist())) == [(W, 0), (W, 1), (T, 1), (W, 1)]    # 2 evicted
    assert list(zip(fifo.ops.tolist(), fifo.slots.tolist())) == [(W, 0), (W, 1), (T, 0), (W, 0)]  # 1 evicted


# --- the compiled path against a slow pure-Python FTL ------------------------------------------------------------
class SlowFtl:
    """Page-mapped FTL, greedy GC, written apart from kvbench.analysis.ftl from its stated rules: one write
    frontier; a full block is closed; free blocks taken from a FIFO ring; while fewer than ``min_free`` blocks are
    free after a page is written, the closed block with the fewest valid pages (ties: the one that reached that
    count last) is cleaned, its valid pages appended at the frontier, then erased to the back of the ring."""

    def __init__(self, user_pages, blocks, bp, min_free=2):
        self.bp, self.min_free = bp, min_free
        self.l2p, self.p2l = {}, {}
        self.valid = [0] * blocks
        self.closed = {}                     # block -> order it last reached its valid count (for ties)
        self.free = list(range(1, blocks))
        self.cur, self.wp = 0, 0
        self.tick = 0
        self.host = self.nand = 0

    def _invalidate(self, lpn):
        old = self.l2p.pop(lpn, None)
        if old is None:
            return
        del self.p2l[old]
        b = old // self.bp
        self.valid[b] -= 1
        if b in self.closed:
            self.tick += 1
            self.closed[b] = self.tick

    def _append(self, lpn):
        if self.wp == self.bp:
            self.tick += 1
            self.closed[self.cur] = self.tick
            self.cur, self.wp = self.free.pop(0), 0
        ppn = self.cur * self.bp + self.wp
        self.wp += 1
        self.l2p[lpn], self.p2l[ppn] = ppn, lpn
        self.valid[self.cur] += 1
        self.nand += 1

    def write(self, lpn):
        self._invalidate(lpn)
        self._append(lpn)
        self.host += 1
        while len(self.free) < self.min_free:
            victim = min(self.closed, key=lambda b: (self.valid[b], -self.closed[b]))
            del self.closed[victim]
            for q in range(victim * self.bp, (victim + 1) * self.bp):
                page = self.p2l.pop(q, None)
                if page is not None:
                    self.valid[victim] -= 1
                    del self.l2p[page]
                    self._append(page)
            self.valid[victim] = 0
            self.free.append(victim)

    def trim(self, lpn):
        self._invalidate(lpn)


def _slow_waf(sw: StoreWrites, cfg: ftl.FtlConfig) -> float:
    per = sw.slot_bytes // cfg.page_size
    ref = SlowFtl(cfg.user_pages, cfg.blocks, cfg.block_pages)
    for p in range(cfg.user_pages):                        # the preconditioning fill
        ref.write(p)
    host0 = nand0 = None
    writes = 0
    for op, slot, n in zip(sw.ops.tolist(), sw.slots.tolist(), sw.nslots.tolist()):
        if op == ftl.OP_WRITE:
            if writes == sw.warm_writes:
                host0, nand0 = ref.host, ref.nand
            writes += 1
        for p in range(slot * per, (slot + n) * per):
            ref.write(p) if op == ftl.OP_WRITE else ref.trim(p)
    return (ref.nand - nand0) / (ref.host - host0)


@pytest.mark.parametrize("seed,policy,trim,amplifies", [(1, "lru", False, True), (2, "lru", True, True),
                                                        (3, "fifo", True, False), (4, "s3fifo", False, True)])
def test_compiled_trace_waf_equals_a_slow_python_ftl(seed, policy, trim, amplifies):
    """Random multi-tenant traces (Zipf-popular users whose hits reorder LRU), 64 KiB slots, 4 per erase unit, 7%
    OP on a small drive: the store's stream through the compiled FTL gives exactly the WAF the slow reference
    counts page by page. FIFO evicts in write order, so its slots are rewritten cyclically: WAF exactly 1."""
    from kvbench.analysis.placement import store_ftl_config

    rng = np.random.default_rng(seed)
    reqs = []
    for _ in range(2500):
        user = int(rng.zipf(1.2)) % 400
        reqs.append([user * 1000 + j for j in range(int(rng.integers(1, 4)))][::-1])
    slot = 64 << 10
    sw = store_writes(_trace(reqs), block_bytes=slot, capacity_bytes=300 * slot, policy=policy, trim=trim,
                      spare_slots=0, extend=False)
    assert sw.turnovers > 2
    r = store_waf(sw, op=0.07, erase_block_bytes=256 << 10)
    cfg = store_ftl_config(sw.n_slots * sw.slot_bytes, sw.slot_bytes, op=0.07, erase_block_bytes=256 << 10,
                           gc="greedy")
    assert r.params["page_bytes"] == cfg.page_size and r.params["erase_unit_bytes"] == cfg.block_pages * cfg.page_size
    assert r.waf == pytest.approx(_slow_waf(sw, cfg), rel=1e-12)
    assert (r.waf > 1.5) if amplifies else (r.waf == 1.0)


# --- what the stream does to the NAND ----------------------------------------------------------------------------
def _random_overwrites(n_slots: int, writes: int, seed: int = 0) -> StoreWrites:
    rng = np.random.default_rng(seed)
    slots = np.concatenate([np.arange(n_slots), rng.integers(0, n_slots, writes)])
    k = slots.size
    return StoreWrites(ops=np.full(k, ftl.OP_WRITE, np.uint8), slots=slots.astype(np.int64),
                       nslots=np.ones(k, np.int64), request=np.arange(k), slot_bytes=64 << 20,
                       capacity_blocks=n_slots, n_slots=n_slots, sample_rate=1.0, layout="slot", policy="random",
                       trim=False, origin="synthetic", note="uniform random slot overwrites",
                       warm_writes=2 * n_slots)


def test_fifo_slot_reuse_under_lru_is_near_one_where_random_overwrites_amplify():
    """The issue's measurement, reproduced: an LRU slot store of Llama-3.1-8B blocks (64 MiB slots, 4 per 256 MiB
    erase unit, 7% OP) over the shipped Mooncake trace rewrites its slots in the order it wrote them (WAF 1.00);
    uniform random overwrites of the same slots on the same drive amplify (the issue's reference: ~3.2)."""
    tr = read_trace("mooncake-synthetic")
    block = 512 * 131_072
    sw = store_writes(tr, block_bytes=block, capacity_bytes=5000 * block, extend=False)
    assert sw.origin == "trace" and sw.turnovers > 5
    assert sw.n_slots == 5000 + 64                          # the default 64 spare slots, on top of the capacity
    fifo = store_waf(sw, op=0.07)
    assert fifo.waf == pytest.approx(1.0, abs=0.01)
    assert fifo.params["erase_unit_bytes"] == 256 << 20 and fifo.params["slot_bytes"] == block
    rand = store_waf(_random_overwrites(5064, 5 * 5064), op=0.07)
    assert 2.0 < rand.waf < 4.5


def test_a_trace_too_short_for_the_store_is_extended_by_a_fitted_model():
    """The shipped 1,000-request sample never turns over a store of 20,000 blocks: the stream then comes from a
    workload model fitted to it, generated until it turns the store over, and says so; without extension the
    WAF is refused (no steady state)."""
    tr = read_trace("mooncake-sample")
    short = store_writes(tr, block_bytes=BLOCK, capacity_bytes=20000 * BLOCK, extend=False)
    assert short.turnovers < 2
    if short.warm_writes >= short.writes:
        with pytest.raises(SpecError, match="never reuses a slot"):
            store_waf(short)
    from kvbench.analysis.trace_waf import extension_for

    ext = extension_for(tr)
    assert ext.origin == "fitted"
    long = store_writes(tr, block_bytes=BLOCK, capacity_bytes=20000 * BLOCK, max_slots=1 << 12, fitted=ext)
    assert long.origin == "fitted model" and "fitted to the trace" in long.note
    assert ext.q == pytest.approx(long.sample_rate)          # the kept stream is sampled as the store asked
    assert np.all(np.diff(long.request) >= 0)                # requests numbered on across the fed batches
    assert long.turnovers >= 2 and long.sample_rate == pytest.approx(4096 / 20000)
    assert long.params["generated_s"] > tr.duration_s
    r = store_waf(long)
    assert "fitted model" in r.source and r.waf >= 1.0


def test_large_stores_run_on_a_key_sample_and_say_so():
    tr = read_trace("mooncake-synthetic")
    sw = store_writes(tr, block_bytes=BLOCK, capacity_bytes=8000 * BLOCK, max_slots=2000, extend=False,
                      l2_bytes=4000 * BLOCK)
    assert sw.sample_rate == pytest.approx(0.25) and sw.capacity_blocks == 2000
    assert sw.params["l2_blocks"] == 1000                   # the L2 in front is sampled at the same rate
    assert "key sample 0.25" in store_waf(sw).source
    full = store_writes(tr, block_bytes=BLOCK, capacity_bytes=1000 * BLOCK, extend=False)
    assert full.sample_rate == 1.0 and "key sample" not in store_waf(full).source
    assert "2 streams" in store_waf(full, streams=2, stream_of=np.zeros(full.ops.size, np.int64)).source
    big = store_writes(tr, block_bytes=BLOCK, capacity_bytes=(1 << 17) * BLOCK, extend=False)   # default 64k slots
    assert big.sample_rate == pytest.approx(0.5) and big.capacity_blocks == 1 << 16


def test_bad_inputs_are_one_line_errors():
    tr = _trace([[1], [2]])
    with pytest.raises(SpecError, match="holds no KV block"):
        store_writes(tr, block_bytes=BLOCK, capacity_bytes=BLOCK // 2)
    with pytest.raises(SpecError, match="turnovers"):
        store_writes(tr, block_bytes=BLOCK, capacity_bytes=BLOCK, turnovers=0)
    empty = store_writes(_trace([[]]), block_bytes=BLOCK, capacity_bytes=4 * BLOCK, extend=False)
    assert empty.writes == 0 and empty.warm_writes == 0
    with pytest.raises(SpecError, match="writes nothing"):
        store_waf(empty)


def test_waf_model_memoises_on_a_log_grid():
    m = WafModel(read_trace("mooncake-sample"), block_bytes=BLOCK, max_slots=1 << 10, per_decade=16)
    assert m.grid_blocks(1000) == 1000 and m.grid_blocks(0.2) == 1 and m.grid_blocks(1.5) == 2
    assert m.grid_blocks(1040) == m.grid_blocks(1000)          # within the grid step (10^(1/16) = 1.155)
    assert m.grid_blocks(1100) == round(10 ** (49 / 16))
    a = m.at(500, 0.07)
    assert m.at(510, 0.07) is a and m.at(500, 0.28) is not a
    assert len(m._streams) == 1


# --- the command ------------------------------------------------------------------------------------------------
def test_cli_ftl_trace_json(cli):
    res = cli("ftl", "--trace", "mooncake-sample", "--model", "llama-3.1-8b", "--capacity", "64000MiB",
              "--layout", "slot", "--trim", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["capacity_bytes"] == 64000 << 20 and out["store_blocks"] == 1000 and out["trim"] is True
    assert out["nand_bytes"] == pytest.approx(out["waf"] * out["host_bytes"])
    assert out["source"].startswith("trace-driven at") and out["origin"] in ("trace", "fitted model")


def test_cli_ftl_trace_needs_a_model_and_excludes_patterns():
    from click.testing import CliRunner

    from kvbench.cli import main

    r = CliRunner().invoke(main, ["ftl", "--trace", "mooncake-sample", "--capacity", "1GiB"])
    assert r.exit_code != 0 and "--model" in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(main, ["ftl", "--trace", "mooncake-sample", "--model", "llama-3.1-8b", "--capacity",
                                  "64GiB", "--pattern", "uniform"])
    assert r.exit_code != 0 and "--pattern" in r.output


# --- plan: every class at its own capacity -----------------------------------------------------------------------
def test_size_at_own_waf_converges_to_the_waf_of_the_store_it_sizes():
    """A WAF that grows with the store (1 + C / 100 TB) and a sizing whose store grows with the WAF (endurance:
    C = 40 TB x WAF): the fixed point C = 40 (1 + C/100) TB is C = 66.67 TB, WAF 1.667."""
    from kvbench.analysis.plan import DeviceWaf, size_at_own_waf

    class Model:
        def at(self, blocks, op, layout=None):
            from types import SimpleNamespace

            return SimpleNamespace(waf=1.0 + blocks * 1e6 / 100e12, detail=f"op {op}")

    class Sc:
        def blocks(self, c):
            return c / 1e6

    wafs = DeviceWaf(None, "", Model(), Sc(), default_op=0.07)
    row = size_at_own_waf(None, wafs, 10e12, lambda waf: {"store_bytes": 40e12 * waf, "waf": waf}, rounds=30)
    assert row["store_bytes"] == pytest.approx(200e12 / 3, rel=0.02)
    assert row["workload_waf_source"].startswith("trace-driven at") and "op 0.07" in row["workload_waf_source"]
    given = DeviceWaf(2.5, "measured SMART", default_op=0.07)
    row = size_at_own_waf(None, given, 10e12, lambda waf: {"store_bytes": 40e12 * waf, "waf": waf})
    assert row["waf"] == 2.5 and row["workload_waf_source"] == "measured SMART"


@pytest.mark.timeout(900)
def test_plan_sizes_each_class_with_the_waf_of_its_own_store(cli):
    res = cli("plan", "--trace", "mooncake-sample", "--model", "llama-3.1-8b", "--target-hit", "0.9", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    from kvbench.units import format_bytes

    for d in out["drives"]:
        src = d["workload_waf_source"]
        assert src.startswith(f"trace-driven at {format_bytes(d['store_bytes'])}") or \
            src.startswith("trace-driven at"), src
        assert d["workload_waf"] >= 1.0 and math.isfinite(d["workload_waf"])
        assert d["dwpd_rating_equivalent"] == pytest.approx(d["dwpd_host"] * d["workload_waf"] / d["reference_waf"])
    pick = next(d for d in out["drives"] if d["class"] == out["ssd_class"])
    assert out["waf"] == pick["workload_waf"] and out["waf_source"] == pick["workload_waf_source"]
    assert set(out["layouts"]) == {"slot", "log"}
    assert all(v["model"].startswith("trace-driven at") for v in out["layouts"].values())
    given = json.loads(cli("plan", "--trace", "mooncake-sample", "--model", "llama-3.1-8b", "--target-hit", "0.9",
                           "--waf", "2.5", "--json").output)
    assert all(d["workload_waf"] == 2.5 and "given" in d["workload_waf_source"] for d in given["drives"])


def test_a_generated_trace_is_extended_by_its_own_model_and_the_stream_is_shared():
    """A gen: trace too short for the store is extended by the model that generated it (not a fit of it); the
    extension is generated once and shared: a smaller key sample is a subset of the one kept, so a second, larger
    store reuses the batches without generating them again."""
    from kvbench.analysis.trace_waf import extension_for

    tr = read_trace("gen:chat,duration=10m,rate=5")
    ext = extension_for(tr)
    assert ext.origin == "generating" and ext.model.name and ext.rate == pytest.approx(5.0)
    d = len(np.unique(tr.keys))
    sw = store_writes(tr, block_bytes=BLOCK, capacity_bytes=2 * d * BLOCK, max_slots=1 << 11, fitted=ext)
    assert sw.origin == "generating model" and "the model that generated the trace" in sw.note
    kept = len(ext.batches)
    assert kept > 0 and ext.q == pytest.approx(sw.sample_rate)
    sw2 = store_writes(tr, block_bytes=BLOCK, capacity_bytes=4 * d * BLOCK, max_slots=1 << 11, fitted=ext)
    assert sw2.sample_rate == pytest.approx(sw.sample_rate / 2) and ext.q == pytest.approx(sw.sample_rate)
    assert len(ext.batches) >= kept and sw2.turnovers >= 2


# --- survivors of the mutation run (benchmarks/mutation.py trace_waf): each test below fails on some of them ------
def _distinct(n: int, first: int = 1):
    """A trace of ``n`` requests of one new block each: every request misses and writes one block."""
    return _trace([[k] for k in range(first, first + n)])


class _Called(Exception):
    pass


def _no_extension():
    raise _Called("the store asked for an extension")


class _OneBlockBatches:
    """A stand-in for :class:`Extension`: batches of ``per`` requests of one new block each, at 1 s apart, up to
    ``limit`` requests (None: forever); records the sample rates asked for."""

    origin = "fitted"

    def __init__(self, per: int = 1, limit: int | None = None):
        from types import SimpleNamespace

        self.model, self.per, self.limit, self.asked = SimpleNamespace(name="hand-made"), per, limit, []

    def stream(self, q):
        self.asked.append(q)
        k = 0
        while self.limit is None or k < self.limit:
            n = self.per if self.limit is None else min(self.per, self.limit - k)
            b = _trace([[1_000_000 + k + i] for i in range(n)])
            yield Trace(b.timestamp_s + k, b.input_tokens, b.output_tokens, b.offsets, b.keys, 16, "mooncake", "<x>")
            k += n


def test_the_trace_is_extended_exactly_when_it_falls_short_of_the_default_two_turnovers():
    """Two cached blocks, no spare, one new block per request: slots 0,1,0,1,...; the first reuse is the third
    write, so the warm-up is 2 + 2 = 4 writes and the default 2 turnovers need 4 + 2 x 2 = 8 writes. 8 requests
    are enough (the trace's own stream, 2.0 turnovers); 7 are not (the extension is asked for)."""
    sw = store_writes(_distinct(8), block_bytes=BLOCK, capacity_bytes=2 * BLOCK, spare_slots=0,
                      fitted=_no_extension)
    assert sw.origin == "trace" and sw.writes == 8 and sw.warm_writes == 4 and sw.turnovers == 2.0
    assert sw.slots.tolist() == [0, 1] * 4
    with pytest.raises(_Called):
        store_writes(_distinct(7), block_bytes=BLOCK, capacity_bytes=2 * BLOCK, spare_slots=0, fitted=_no_extension)
    # 3 turnovers asked: 4 + 6 = 10 writes needed
    with pytest.raises(_Called):
        store_writes(_distinct(9), block_bytes=BLOCK, capacity_bytes=2 * BLOCK, spare_slots=0, turnovers=3,
                     fitted=_no_extension)
    assert store_writes(_distinct(10), block_bytes=BLOCK, capacity_bytes=2 * BLOCK, spare_slots=0, turnovers=3,
                        fitted=_no_extension).origin == "trace"


def test_an_extension_is_generated_until_the_target_write_and_no_further():
    """The extended stream of a 2-block store (default 2 turnovers) stops at the first batch that brings the
    store's writes to ceil((2 + 2) x 2 x 1.05) = 9: fed one request of one new block at a time, exactly 9 writes
    and 9 requests, the last at t = 8 s; the warm-up 2 + 2 writes (slots 0,1,0,1,...), so (9 - 4) / 2 turnovers."""
    ext = _OneBlockBatches()
    sw = store_writes(_trace([[1]]), block_bytes=BLOCK, capacity_bytes=2 * BLOCK, spare_slots=0, fitted=ext)
    assert ext.asked == [1.0]
    assert sw.origin == "fitted model" and sw.writes == 9 and sw.slots.tolist() == [0, 1, 0, 1, 0, 1, 0, 1, 0]
    assert sw.request.tolist() == list(range(9)) and sw.warm_writes == 4 and sw.turnovers == 2.5
    assert sw.params["generated_requests"] == 9 and sw.params["generated_s"] == 8.0
    assert sw.params["model"] == "hand-made"
    # 1 turnover asked: ceil(3 x 2 x 1.05) = 7 writes
    one = store_writes(_trace([[1]]), block_bytes=BLOCK, capacity_bytes=2 * BLOCK, spare_slots=0, turnovers=1,
                       fitted=_OneBlockBatches())
    assert one.writes == 7 and one.params["generated_s"] == 6.0


def test_a_generated_batch_is_fed_in_pieces_of_32768_requests():
    """One generated batch of 40,000 new blocks against a 2-block store (target 9 writes): the collector feeds it
    32,768 requests at a time and stops after the first piece, which already reaches the target."""
    sw = store_writes(_trace([[1]]), block_bytes=BLOCK, capacity_bytes=2 * BLOCK, spare_slots=0,
                      fitted=_OneBlockBatches(per=40_000, limit=40_000))
    assert sw.writes == 32_768 and sw.params["generated_requests"] == 32_768


def test_an_extension_that_never_turns_the_store_over_is_refused():
    """A model stream of 3 new blocks in all never reuses a slot of a 4-block store: no steady state."""
    with pytest.raises(SpecError, match="never turns over"):
        store_writes(_trace([[1]]), block_bytes=BLOCK, capacity_bytes=4 * BLOCK, spare_slots=0,
                     fitted=_OneBlockBatches(limit=3))


def test_a_long_trace_is_simulated_in_batches_that_continue_one_another():
    """70,000 requests of one new block each (three pieces of the collector's batch) through a 3-block LRU store
    without spare: every request writes, the slots cycle 0,1,2 and the requests are numbered on across the
    pieces, exactly as one pass would."""
    n = 70_000
    sw = store_writes(_distinct(n), block_bytes=BLOCK, capacity_bytes=3 * BLOCK, spare_slots=0, extend=False)
    assert sw.writes == n and np.all(sw.ops == ftl.OP_WRITE)
    assert np.array_equal(sw.slots, np.arange(n) % 3)
    assert np.array_equal(sw.request, np.arange(n))


def test_a_one_block_store_by_hand():
    """keys 1..4 through a one-block store: every write is to slot 0, the first reuse is the second write, the
    warm-up 1 + 1 writes, then (4 - 2) / 1 = 2 turnovers."""
    sw = store_writes(_distinct(4), block_bytes=BLOCK, capacity_bytes=BLOCK, spare_slots=0, extend=False)
    assert sw.capacity_blocks == 1 and sw.slots.tolist() == [0, 0, 0, 0]
    assert sw.warm_writes == 2 and sw.turnovers == 2.0


def test_store_defaults_no_trims_no_l2_and_seed_0(monkeypatch):
    """By default a store issues no trims and has no L2 in front; a short trace is extended with the seed-0
    workload model (fdp's store relies on these defaults)."""
    from kvbench.analysis import trace_waf

    sw = store_writes(_trace([[1], [2], [3], [1], [4]]), block_bytes=BLOCK, capacity_bytes=2 * BLOCK,
                      spare_slots=0, extend=False)
    assert sw.trim is False and not np.any(sw.ops == ftl.OP_TRIM) and sw.params["l2_blocks"] == 0
    seeds = []

    def ext_for(trace, seed):
        seeds.append(seed)
        return _OneBlockBatches()

    monkeypatch.setattr(trace_waf, "extension_for", ext_for)
    store_writes(_trace([[1]]), block_bytes=BLOCK, capacity_bytes=2 * BLOCK, spare_slots=0)
    store_writes(_trace([[1]]), block_bytes=BLOCK, capacity_bytes=2 * BLOCK, spare_slots=0, seed=5)
    assert seeds == [0, 5]


def test_an_empty_stream_spans_no_slots_and_no_turnovers():
    empty = store_writes(_trace([[]]), block_bytes=BLOCK, capacity_bytes=4 * BLOCK, extend=False)
    assert empty.n_slots == 0 and empty.turnovers == 0.0


def test_stream_from_events_by_hand():
    """A cluster node's events: reads dropped; writes to slots 0,1,0,1,0 of a 2-block store (a 2-slot trim
    between): the warm-up, found from the events, is the first reuse (write 3) + 2 = 4 writes; the store spans
    slots 0..2 (the trim's 2 slots from slot 1); sample rate 1 unless given."""
    from kvbench.analysis.trace_waf import stream_from_events
    from kvbench.sim.tiers import EV_READ, EV_TRIM, EV_WRITE, EVENT_DTYPE

    rows = [(0, EV_WRITE, 0, 1), (1, EV_READ, 0, 1), (1, EV_WRITE, 1, 1), (2, EV_TRIM, 1, 2), (2, EV_WRITE, 0, 1),
            (3, EV_WRITE, 1, 1), (4, EV_WRITE, 0, 1)]
    ev = np.zeros(len(rows), EVENT_DTYPE)
    for i, (r, op, slot, n) in enumerate(rows):
        ev[i]["request"], ev[i]["tier"], ev[i]["op"], ev[i]["slot"], ev[i]["nslots"] = r, 2, op, slot, n
    sw = stream_from_events(ev, slot_bytes=BLOCK, capacity_blocks=2)
    W, T = ftl.OP_WRITE, ftl.OP_TRIM
    assert sw.ops.tolist() == [W, W, T, W, W, W] and sw.slots.tolist() == [0, 1, 1, 0, 1, 0]
    assert sw.request.tolist() == [0, 1, 2, 2, 3, 4] and sw.nslots.tolist() == [1, 1, 2, 1, 1, 1]
    assert sw.warm_writes == 4 and sw.n_slots == 3 and sw.sample_rate == 1.0 and sw.writes == 5
    assert stream_from_events(ev, slot_bytes=BLOCK, capacity_blocks=2, warm_writes=1).warm_writes == 1
    # a warm-up: no fewer than its requests' writes (to request 4: writes 0..3); one inside the store's own (to
    # request 2: 2 writes) and none leave the 4; request 0 alone writing 6 slots outlasts them from request 1
    assert stream_from_events(ev, slot_bytes=BLOCK, capacity_blocks=2, from_request=4).warm_writes == 4
    assert stream_from_events(ev, slot_bytes=BLOCK, capacity_blocks=2, from_request=2).warm_writes == 4
    wide = np.zeros(8, EVENT_DTYPE)
    wide["request"], wide["tier"], wide["op"] = [0, 0, 0, 0, 0, 0, 1, 2], 2, EV_WRITE
    wide["slot"], wide["nslots"] = np.arange(8) % 2, 1
    assert stream_from_events(wide, slot_bytes=BLOCK, capacity_blocks=2).warm_writes == 4
    assert stream_from_events(wide, slot_bytes=BLOCK, capacity_blocks=2, from_request=1).warm_writes == 6


def test_class_op_is_the_stated_over_provisioning_else_7_percent():
    from types import SimpleNamespace

    from kvbench.analysis.trace_waf import class_op

    assert class_op(None) == 0.07 and class_op(SimpleNamespace(over_provisioning=None)) == 0.07
    assert class_op(SimpleNamespace()) == 0.07 and class_op(None, 0.2) == 0.2
    assert class_op(SimpleNamespace(over_provisioning=0.28)) == 0.28


def _overwrites_64k(n_slots: int, writes: int, warm: int, seed: int = 0) -> StoreWrites:
    sw = _random_overwrites(n_slots, writes, seed)
    return StoreWrites(**{**sw.__dict__, "slot_bytes": 64 << 10, "warm_writes": warm})


@pytest.mark.parametrize("warm", [700, 1023])
def test_a_late_warm_up_cut_equals_the_slow_python_ftl(warm):
    """The warm-up cut when most of the stream is warm-up (700 of 1,024 writes) and when only the last write is
    measured, on 64 KiB slots that are one FTL page each (4 per 256 KiB erase unit): the compiled cut is the
    reference's to the write."""
    from kvbench.analysis.placement import store_ftl_config

    sw = _overwrites_64k(256, 768, warm, seed=warm)
    assert sw.writes == 1024
    r = store_waf(sw, op=0.07, erase_block_bytes=256 << 10)
    cfg = store_ftl_config(sw.n_slots * sw.slot_bytes, sw.slot_bytes, op=0.07, erase_block_bytes=256 << 10,
                           gc="greedy")
    assert cfg.page_size == sw.slot_bytes
    assert r.waf == pytest.approx(_slow_waf(sw, cfg), rel=1e-12)
    assert r.host_bytes == (sw.writes - warm) * sw.slot_bytes


def test_one_stream_is_not_named_in_the_source():
    sw = _overwrites_64k(256, 768, 512)
    assert "streams" not in store_waf(sw, op=0.07, erase_block_bytes=256 << 10).source


def test_the_maximum_extension_is_400_days_of_the_model():
    """A workload model asked for its whole stream (2e-4 requests/s: about 7,000 requests) ends within the last
    day of the 400 days an extension may span."""
    from kvbench.analysis.trace_waf import Extension
    from kvbench.stream.workload import load_model_file

    last = [b.timestamp_s[-1] for b in Extension(load_model_file("chat"), rate=2e-4).stream(1.0) if b.n_requests]
    assert 399 * 86_400 < last[-1] <= 400 * 86_400


def test_the_extension_of_a_generated_trace_keeps_its_block_size_seed_and_sample():
    """The generating model's extension: the trace's block size (256 tokens, not the model's 512), seed + 1 (so
    it does not replay the trace), the trace's key sample as its base (a store's rate of 0.5 samples at 0.25 of
    the model's blocks); a store at the same rate reuses the kept batches (generated once)."""
    from kvbench.analysis.trace_waf import extension_for

    tr = read_trace("gen:chat,duration=10m,rate=5,seed=7,sample=0.5", block_tokens=256)
    assert tr.block_tokens == 256
    ext = extension_for(tr)
    assert ext.origin == "generating" and ext.model.block_tokens == 256 and ext.seed == 8
    assert ext.base_sample == 0.5
    first = next(ext.stream(0.5))
    assert ext.q == 0.25
    assert next(ext.stream(0.5)) is first and ext.batches[0] is first


def test_extension_for_a_trace_that_states_less_about_itself(monkeypatch):
    """A generated trace's meta without a seed or sample rate: seed 0 + 1, the whole stream (rate 1); one that
    does not name its model is fitted like a file's trace, with seed 0 unless given."""
    from types import SimpleNamespace

    import kvbench.stream.fit as fit
    from kvbench.analysis.trace_waf import extension_for

    tr = read_trace("gen:chat,duration=1m,rate=5")
    bare = Trace(tr.timestamp_s, tr.input_tokens, tr.output_tokens, tr.offsets, tr.keys, tr.block_tokens, tr.fmt,
                 tr.path, meta={"source": "generated", "generated_from": tr.meta["generated_from"]})
    ext = extension_for(bare)
    assert ext.origin == "generating" and ext.seed == 1 and ext.base_sample == 1.0 and ext.rate is None
    monkeypatch.setattr(fit, "fit_model", lambda trace: SimpleNamespace(model=tr))
    unnamed = Trace(tr.timestamp_s, tr.input_tokens, tr.output_tokens, tr.offsets, tr.keys, tr.block_tokens, tr.fmt,
                    tr.path, meta={"source": "generated"})
    ext = extension_for(unnamed)
    assert ext.origin == "fitted" and ext.model is tr and ext.seed == 0
    assert extension_for(unnamed, 3).seed == 3


def test_waf_model_defaults_and_its_memo():
    """The plan's WafModel (block size, layout, GC and erase unit given): stores of at most 8,192 slots, one
    measured turnover, no trims, the default 64 spare slots, 16 grid points per decade, one fit.
    70 new blocks through a 2-block store with 64 spare slots: the first reuse is write 67, the warm-up
    66 + 2 writes, so 70 writes measure exactly the one turnover asked (no extension)."""
    m = WafModel(_distinct(70), block_bytes=BLOCK)
    a = m.at(2, 0.07)
    assert a.params["origin"] == "trace" and a.params["turnovers_measured"] == 1.0 and a.params["trim"] is False
    assert a.params["store_slots"] == 66
    assert m.at(2, 0.0700004) is a                          # OPs equal to a millionth share one FTL run
    assert m.at(2, 0.070002) is not a
    assert m.grid_blocks(1) == 1 and m.grid_blocks(1.07) == 1 and m.grid_blocks(1100) == round(10 ** (49 / 16))
    big = WafModel(_distinct(32_000), block_bytes=BLOCK).at(10_000, 0.07)
    assert big.params["store_blocks"] == 8192 and big.params["sample_rate"] == pytest.approx(0.8192)


def test_waf_model_fits_the_extension_once():
    from kvbench.analysis.trace_waf import Extension

    m = WafModel(read_trace("gen:chat,duration=1m,rate=5"), block_bytes=BLOCK)
    ext = m._fit()
    assert isinstance(ext, Extension) and m._fit() is ext


# --- a plan's warm-up (--warmup): the store's steady part opens no earlier than the warm-up's end -----------------
def test_a_warm_up_later_than_the_stores_own_opens_the_steady_part_at_its_first_write():
    """Two cached blocks, no spare, one new block per request (one write each, slots 0,1,0,1,...): the store's
    own warm-up is 2 + 2 = 4 writes. From request 6 the warm-up's requests hold writes 0..5, so the steady part
    opens at write 6, and 12 requests measure (12 - 6) / 2 = 3 turnovers; the store is still filled by the
    whole trace (12 writes, slots as without a warm-up). A warm-up ending inside the store's own (request 3)
    changes nothing."""
    def sw(n, k):
        return store_writes(_distinct(n), block_bytes=BLOCK, capacity_bytes=2 * BLOCK, spare_slots=0,
                            from_request=k, fitted=_no_extension)

    a = sw(12, 6)
    assert a.origin == "trace" and a.writes == 12 and a.slots.tolist() == [0, 1] * 6
    assert a.warm_writes == 6 and a.turnovers == 3.0
    assert a.params["from_request"] == 6 and "measured from request 6, the warm-up's end" in a.note
    assert sw(12, 3).warm_writes == 4 and sw(12, 0).warm_writes == 4
    assert "from_request" not in sw(12, 0).params and "measured from" not in sw(12, 0).note
    # the default 2 turnovers past request 6 need 6 + 4 = 10 writes: 10 requests serve, 9 ask for the extension
    assert sw(10, 6).origin == "trace"
    with pytest.raises(_Called):
        sw(9, 6)


def test_a_warm_up_counts_the_writes_of_its_requests_not_its_requests():
    """Requests of 0, 2 and 1 new blocks (keys 1 | - | 2,3 | 4 | ...): writes are counted by the request they
    belong to. A 2-block store; from request 3 the warm-up's requests 0..2 wrote keys 1,2,3 (3 writes)."""
    tr = _trace([[1], [], [2, 3], [4], [5], [6], [7], [8], [9], [10]])
    a = store_writes(tr, block_bytes=BLOCK, capacity_bytes=2 * BLOCK, spare_slots=0, from_request=3,
                     extend=False)
    assert a.request.tolist() == [0, 2, 2, 3, 4, 5, 6, 7, 8, 9]
    assert a.warm_writes == 4            # the store's own (2 + 2) is later than the warm-up's 3
    b = store_writes(tr, block_bytes=BLOCK, capacity_bytes=2 * BLOCK, spare_slots=0, from_request=5,
                     extend=False)
    assert b.warm_writes == 5 and b.turnovers == (10 - 5) / 2
    # a first request of 6 new blocks through the 2-block store: the store's own warm-up ends at write 2 + 2 = 4,
    # a warm-up of that one request at write 6
    big = _trace([[1, 2, 3, 4, 5, 6], [7], [8], [9], [10], [11], [12]])
    c = store_writes(big, block_bytes=BLOCK, capacity_bytes=2 * BLOCK, spare_slots=0, from_request=1, extend=False)
    assert c.warm_writes == 6 and c.params["from_request"] == 1
    assert store_writes(big, block_bytes=BLOCK, capacity_bytes=2 * BLOCK, spare_slots=0, extend=False).warm_writes == 4


def test_the_trace_driven_waf_names_the_warm_up_it_was_measured_after():
    """WafModel passes its warm-up to every store it measures; the WAF's detail says where the steady part opened
    (70 new blocks, 2 cached and 64 spare slots: the store's own warm-up is 68 writes, so request 69 leaves one
    write; request 60 changes nothing but the words)."""
    m = WafModel(_distinct(72), block_bytes=BLOCK, from_request=69)
    a = m.at(2, 0.07)
    assert a.params["warm_writes"] == 69 and a.params["from_request"] == 69
    assert "(trace from request 69, the warm-up's end" in a.detail
    b = WafModel(_distinct(72), block_bytes=BLOCK).at(2, 0.07)
    assert b.params["warm_writes"] == 68 and "from request" not in b.detail
    assert WafModel(_distinct(72), block_bytes=BLOCK, from_request=60).at(2, 0.07).params["warm_writes"] == 68
