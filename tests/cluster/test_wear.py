"""kvbench cluster's sizing answers, by hand: each node's L3 steady write rate, host and rating-equivalent DWPD,
residence and lifetime (kvbench.cluster.wear); link and pool utilisation as mean, p99 and time saturated
(kvbench.cluster.pool)."""

from __future__ import annotations

import numpy as np
import pytest

from kvbench.cluster.pool import Calendar, utilisation_stats
from kvbench.cluster.wear import steady_write_rate
from tests.cluster.test_cluster import BLOCK, _cluster
from tests.conftest import write_mooncake


def test_steady_write_rate_counts_from_the_first_slot_reuse():
    """Writes to slots 0,1,0,1 at t = 0,1,2,3: the store first reuses a slot at t = 2; one slot is written after
    it, in the 1 s to the trace's end: W = 1 slot/s. The fill (t = 0, 1) is not steady state."""
    w, t0 = steady_write_rate(np.array([0.0, 1, 2, 3]), np.array([0, 1, 0, 1]), 10, end_s=3.0)
    assert (w, t0) == (10.0, 2.0)
    assert steady_write_rate(np.array([0.0, 1]), np.array([0, 1]), 10, end_s=5.0) == (None, None)   # never reused
    assert steady_write_rate(np.array([0.0, 1, 2]), np.array([0, 1, 0]), 10, end_s=2.0) == (None, 2.0)


def test_utilisation_is_time_weighted_and_survives_pruning():
    """Capacity 10: 10 in use over [0, 1), 5 over [1, 3), idle to 4: mean (1 + 2 x 0.5) / 4 = 0.5, saturated a
    quarter of the time, and the level it stays at or below 99% of the time is full use (it is full for 25%)."""
    c = Calendar(10.0)
    c.add(0.0, 1.0, 10.0)
    c.add(1.0, 3.0, 5.0)
    want = {"mean": 0.5, "p99": 1.0, "saturated_fraction": 0.25, "seconds": 4.0}
    assert c.utilisation(until=4.0) == pytest.approx(want)
    c.prune(2.5)                                           # the history pruned away still counts
    assert c.utilisation(until=4.0) == pytest.approx(want)
    assert Calendar(None).utilisation(4.0) is None
    assert utilisation_stats(np.array([98.0, 2.0]), np.array([0.0, 1.0]))["p99"] == 1.0   # 2% of the time full
    assert utilisation_stats(np.array([99.5, 0.5]), np.array([0.0, 1.0]))["p99"] == 0.0   # 0.5%: p99 idle


def test_one_node_l3_wear_by_hand(cli, tmp_path):
    """One node, an L3 of 2 blocks, one new block per second (t = 0..5): the store fills at t = 0, 1, first reuses
    a slot at t = 2, and from then writes one slot per second: W = 262,144 B/s, host DWPD = 86,400 x W / (2 x
    262,144) = 43,200, KV kept C / W = 2 s; rating-equivalent = host x WAF / reference WAF of the class."""
    tr = write_mooncake(tmp_path / "t.jsonl", [(1000 * i, [i + 1]) for i in range(6)])
    s = _cluster(cli, tmp_path, tr, "--l3", str(tmp_path / "l3.store"), "--l3-capacity", str(2 * BLOCK),
                 "--ssd-class", "tlc-3dwpd", "--router", "round-robin")
    l3 = s["nodes"][0]["tiers"]["l3"]
    assert l3["capacity_bytes"] == 2 * BLOCK and l3["capacity_blocks"] == 2
    assert l3["steady_from_s"] == 2.0 and l3["write_bytes_per_s"] == pytest.approx(BLOCK)
    assert l3["dwpd_host"] == pytest.approx(43_200) and l3["residence_s"] == pytest.approx(2.0)
    assert l3["written_bytes"] == 6 * BLOCK and l3["drive_class"] == "tlc-3dwpd"
    # the store rewrites its 2 slots in the order written (FIFO free list under LRU): every erase unit dies whole,
    # no page is moved, WAF 1 by hand; rating-equivalent = 43,200 x 1 / the class's reference WAF
    assert l3["waf"] == pytest.approx(1.0) and l3["reference_waf"] > 1
    assert l3["dwpd_rating_equivalent"] == pytest.approx(43_200 / l3["reference_waf"])
    assert l3["lifetime_years"] == pytest.approx(5 * 3.0 / (43_200 / l3["reference_waf"]))
    assert s["links"] is None and s["pool_wear"] is None          # no L4


def test_routing_changes_node_wear(cli, tmp_path):
    """Two conversations of 4 blocks each, alternating, on 2 nodes with an L3 of 4 blocks: round-robin keeps each
    conversation on its node (every request after the first hits; no slot is ever rewritten: no steady write
    rate), random routing sends both to both nodes, whose stores then turn over; one node takes both and misses
    every block."""
    a, b = [1, 2, 3, 4], [11, 12, 13, 14]
    reqs = [(500 * i, (a if i % 2 == 0 else b)) for i in range(40)]
    tr = write_mooncake(tmp_path / "t.jsonl", reqs)
    common = ["--nodes", "2", "--l3", str(tmp_path / "l3.store"), "--l3-capacity", str(4 * BLOCK)]
    rr = _cluster(cli, tmp_path, tr, *common, "--router", "round-robin")
    assert [nd["hit_ratio"] for nd in rr["nodes"]] == [pytest.approx(0.95)] * 2
    assert all(nd["tiers"]["l3"]["write_bytes_per_s"] is None for nd in rr["nodes"])
    assert all(nd["tiers"]["l3"]["written_bytes"] == 4 * BLOCK for nd in rr["nodes"])
    rnd = _cluster(cli, tmp_path, tr, *common, "--router", "random")
    steady = [nd["tiers"]["l3"] for nd in rnd["nodes"] if nd["tiers"]["l3"]["write_bytes_per_s"] is not None]
    assert steady and all(t["dwpd_host"] > 0 for t in steady)
    one = _cluster(cli, tmp_path, tr, "--nodes", "1", "--router", "round-robin", "--l3", str(tmp_path / "l3.store"), "--l3-capacity",
                   str(4 * BLOCK))
    l3 = one["nodes"][0]["tiers"]["l3"]           # both conversations through one 4-block store: every block misses
    assert l3["steady_from_s"] == 0.5                      # b's first block reuses a's first slot
    # from t = 0.5 on, 4 slots per request at t = 1.0 .. 19.5 (38 requests) over 19 s
    assert l3["write_bytes_per_s"] == pytest.approx(38 * 4 * BLOCK / 19.0)
    assert l3["dwpd_host"] == pytest.approx(86_400 * 38 * 4 / 19.0 / 4)


def test_link_utilisation_by_hand(cli, tmp_path):
    """As test_pool_contention's first case: each node writes 32 blocks into the pool after its 1.6384 s prefill
    and loads them again at t = 100 s, each move 1.048576 s alone on an 8 MB/s link: every link is saturated
    2 x 1.048576 s of the 101.048576 s simulated, so the time saturated is 2.075% and p99 is full use."""
    a, b = list(range(1, 33)), list(range(101, 133))
    tr = write_mooncake(tmp_path / "t.jsonl", [(0, a), (0, b), (100000, a), (100000, b)])
    s = _cluster(cli, tmp_path, tr, "--nodes", "2", "--router", "round-robin", "--l4", str(tmp_path),
                 "--l4-capacity", "1GiB", "--l4-link-bw", "8MB/s")
    move = 32 * BLOCK / 8e6
    ln = s["links"]
    assert ln["seconds"] == pytest.approx(100 + move)
    assert ln["saturated_fraction"] == pytest.approx(2 * move / (100 + move))
    assert ln["mean"] == pytest.approx(2 * move / (100 + move)) and ln["p99"] == 1.0
    assert ln["busiest_node_mean"] == pytest.approx(ln["mean"]) and ln["pool"] is None
    assert s["l4"]["peak_link_utilisation"] == pytest.approx(1.0)          # the old figure: says only "once full"


def test_terminal_json_and_report_state_the_same_rollup(cli, tmp_path):
    """The busiest node's figures printed on the terminal are the JSON's ``wear.l3`` and the report's rows."""
    import re

    from kvbench.report.rundata import load_run
    from kvbench.report.tables import verdict_rows

    tr = write_mooncake(tmp_path / "t.jsonl", [(1000 * i, [i + 1]) for i in range(6)])
    args = ["cluster", tr, "--model", "tiny-gqa", "--dry-run", "--router", "round-robin", "--l3",
            tmp_path / "l3.store", "--l3-capacity", str(2 * BLOCK), "--results", tmp_path / "res"]
    s = _cluster(cli, tmp_path, tr, *args[4:-2])
    w = s["wear"]["l3"]
    assert w["nodes"] == 1 and w["nodes_turned_over"] == 1
    assert w["dwpd_host_busiest"] == pytest.approx(43_200) and w["dwpd_host_mean"] == pytest.approx(43_200)
    text = cli(*args).output
    assert re.search(r"host DWPD mean 4\.32e\+04, busiest 4\.32e\+04", text), text
    rows = {label: value for _, label, value in verdict_rows(load_run(s["run_dir"]))}
    assert "L3 host DWPD, busiest node" in rows and "43" in rows["L3 host DWPD, busiest node"].replace(",", "")


def test_pruned_history_is_bounded_and_keeps_the_mean_to_a_tenth_of_a_percent():
    """5,000 transfers at random rates, pruned as the simulation goes: the history holds at most 1,001 use levels
    (memory no longer grows with transfers) and the mean stays within 0.05% of capacity of the exact one."""
    rng = np.random.default_rng(1)
    c = Calendar(1.0)
    exact = 0.0
    for i in range(5000):
        r = float(rng.uniform(0.0, 1.0))
        c.add(float(i), float(i) + 1.0, r)
        exact += r
        c.prune(float(i))
    got = c.utilisation(until=5000.0)
    assert len(c._past) <= 1001
    assert got["mean"] == pytest.approx(exact / 5000.0, abs=5e-4)


def test_a_warm_up_opens_the_steady_write_rate_no_earlier_than_its_last_arrival():
    """Slots 0,1,0,1,0,1 at t = 0..5, end 5: the store first reuses a slot at t = 2 (W = 3 slots / 3 s). A warm-up
    whose last arrival is at 3 s opens steady state at 3 s (2 slots / 2 s); one whose last arrival (1 s) precedes
    the reuse leaves the reuse's start; one at the end leaves no time (None, 5)."""
    t, s = np.arange(6.0), np.array([0, 1, 0, 1, 0, 1])
    assert steady_write_rate(t, s, 10, end_s=5.0) == (10.0, 2.0)
    assert steady_write_rate(t, s, 10, end_s=5.0, start_s=3.0) == (10.0, 3.0)
    assert steady_write_rate(t, s, 10, end_s=5.0, start_s=3.5) == (20 / 1.5, 3.5)     # t = 4, 5 over 1.5 s
    assert steady_write_rate(t, s, 10, end_s=5.0, start_s=1.0) == (10.0, 2.0)
    assert steady_write_rate(t, s, 10, end_s=5.0, start_s=5.0) == (None, 5.0)


def test_cluster_warm_up_by_hand(cli, tmp_path):
    """One node, an L3 of 2 blocks; requests one a second of blocks 1 2 1 3 4 1 5 6 (t = 0..7). Without a warm-up
    the hit ratio is 1/8 (r2). --warmup 0.5 leaves r4..r7 (blocks 4 1 5 6): r5's block 1 was evicted at r4 (LRU
    holds 3, 4), so 0 of 4 hit; 4 requests measured, from request 4 at 4 s. The L3 fills at t = 0, 1 and first
    reuses a slot at r3 (t = 3); under the warm-up steady state opens at r3's arrival (the last warm-up one),
    so W counts the writes of r4..r7 (4 slots) over 7 - 3 = 4 s: one block per second either way, but from 3 s."""
    tr = write_mooncake(tmp_path / "t.jsonl", [(1000 * i, [b]) for i, b in enumerate([1, 2, 1, 3, 4, 1, 5, 6])])
    args = ("--l3", str(tmp_path / "l3.store"), "--l3-capacity", str(2 * BLOCK), "--router", "round-robin")
    whole = _cluster(cli, tmp_path, tr, *args)
    assert whole["requests"] == 8 and whole["global"]["hit_ratio"] == pytest.approx(1 / 8)
    warm = _cluster(cli, tmp_path, tr, *args, "--warmup", "0.5")
    assert warm["requests"] == 4 and warm["global"]["hit_ratio"] == 0.0
    assert warm["measured_from"]["request"] == 4 and warm["measured_from"]["start_s"] == 4.0
    l3w, l3 = warm["nodes"][0]["tiers"]["l3"], whole["nodes"][0]["tiers"]["l3"]
    assert l3["steady_from_s"] == 3.0 and l3w["steady_from_s"] == 3.0
    assert l3w["write_bytes_per_s"] == pytest.approx(BLOCK)
    assert warm["stationarity"]["note"].startswith("Measured from 4 s (the last 43% of the span")
    by_time = _cluster(cli, tmp_path, tr, *args, "--warmup", "3.5s")
    assert by_time["requests"] == 4 and by_time["measured_from"] == warm["measured_from"]
    # TTFT at 10,000 prefill tokens/s (the stated what-if): a miss prefills its 512 tokens, 51.2 ms; r2's hit only
    # loads its block from L3, 262,144 B at 6 GB/s. The window (r4..r7) is all misses.
    hit_ms, miss_ms = BLOCK / 6e9 * 1e3, 512 / 10_000 * 1e3
    assert whole["ttft_ms"]["mean"] == pytest.approx((7 * miss_ms + hit_ms) / 8)
    assert whole["load_ms"]["p99"] == pytest.approx(hit_ms) and whole["prefill_tokens_saved"] == 512
    assert whole["prefill_tokens"] == 7 * 512 and warm["prefill_tokens"] == 4 * 512
    for k in ("p50", "p90", "p99", "mean"):
        assert warm["ttft_ms"][k] == pytest.approx(miss_ms)
    assert warm["load_ms"] == {"p50": 0.0, "p99": 0.0} and warm["prefill_tokens_saved"] == 0
    assert warm["queue_ms"] == {"p50": 0.0, "p99": 0.0}
    assert warm["nodes"][0]["requests"] == 4 and warm["nodes"][0]["tokens"] == 4 * 512
    assert warm["nodes"][0]["ttft_ms"]["p99"] == pytest.approx(miss_ms)
    # what stays the whole run's: the span and the simulated time (the last arrival, 7 s, plus its TTFT)
    for s in (whole, warm):
        assert s["trace_span_s"] == 7.0 and s["simulated_s"] == pytest.approx(7 + miss_ms / 1e3)
    # a warm-up whose last arrival (r5, 5 s) is after the store's first reuse (3 s) opens the steady window there:
    # r6, r7 write 2 slots in the 2 s to the end
    late = _cluster(cli, tmp_path, tr, *args, "--warmup", "0.75")["nodes"][0]["tiers"]["l3"]
    assert late["steady_from_s"] == 5.0 and late["write_bytes_per_s"] == pytest.approx(BLOCK)


def test_the_nodes_ftl_stream_opens_after_the_warm_up_too():
    """A node's store writes slots 0,1,0,1,... one per request r0..r7 (2 blocks): its own warm-up is the first
    reuse (write 2) + one turnover = 4 writes; a warm-up to request 6 holds writes 0..5, so the FTL model's steady
    part opens at write 6; one to request 3 changes nothing; none leaves the store's own."""
    from kvbench.cluster.wear import _stream
    from kvbench.sim.tiers import EV_WRITE, EVENT_DTYPE

    ev = np.zeros(8, EVENT_DTYPE)
    ev["request"], ev["op"], ev["slot"], ev["nslots"], ev["tier"] = np.arange(8), EV_WRITE, np.arange(8) % 2, 1, 2
    kw = dict(capacity_blocks=2, slot_bytes=BLOCK, layout="slot", policy="lru", trim=False)
    assert _stream(ev, **kw, from_request=0).warm_writes == 4
    assert _stream(ev, **kw, from_request=6).warm_writes == 6
    assert _stream(ev, **kw, from_request=3).warm_writes == 4
    # a first request that writes 6 slots (0,1,0,1,0,1): a warm-up of it alone outlasts the store's own 4 writes
    wide = np.zeros(10, EVENT_DTYPE)
    wide["request"] = [0, 0, 0, 0, 0, 0, 1, 2, 3, 4]
    wide["op"], wide["slot"], wide["nslots"], wide["tier"] = EV_WRITE, np.arange(10) % 2, 1, 2
    assert _stream(wide, **kw, from_request=1).warm_writes == 6
    assert _stream(wide, **kw, from_request=0).warm_writes == 4


def test_the_shared_pools_wear_by_hand_and_after_a_warm_up(cli, tmp_path):
    """No L1-L3, an L4 pool of 2 blocks, one new block a second (t = 0..6): the pool fills at t = 0, 1, first
    reuses a slot at t = 2, then takes one slot a second: W = 262,144 B/s, 43,200 host DWPD, KV kept 2 s; its
    drives' WAF is not modelled. --warmup 4.5s (r0..r4 warm) opens its steady window at r4's arrival, 4 s."""
    tr = write_mooncake(tmp_path / "t.jsonl", [(1000 * i, [i + 1]) for i in range(7)])
    args = ("--l4", str(tmp_path / "pool"), "--l4-capacity", str(2 * BLOCK), "--router", "round-robin")
    pool = _cluster(cli, tmp_path, tr, *args)["pool_wear"]
    assert pool["capacity_blocks"] == 2 and pool["written_bytes"] == 7 * BLOCK and pool["steady_from_s"] == 2.0
    assert pool["write_bytes_per_s"] == pytest.approx(BLOCK) and pool["dwpd_host"] == pytest.approx(43_200)
    assert pool["residence_s"] == pytest.approx(2.0) and pool["waf"] is None and pool["lifetime_years"] is None
    warm = _cluster(cli, tmp_path, tr, *args, "--warmup", "4.5s")["pool_wear"]
    assert warm["steady_from_s"] == 4.0 and warm["write_bytes_per_s"] == pytest.approx(BLOCK)
