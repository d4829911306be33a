"""kvbench plan: writes, DWPD, capacity and the bill on a hand-computed trace; prices; the CLI."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from kvbench.analysis.cost import (PlanOptions, apply_overrides, build_plan, gpu_usd_per_day, load_prices,
                                   ssd_usd_per_day)
from kvbench.analysis.ftl import layout_waf
from kvbench.errors import SpecError
from kvbench.stream.traces import Trace

from tests.test_capacity import stack_profile


def hand_trace() -> Trace:
    # r0 t=0 [1,2]; r1 t=10 [1,2,3]; r2 t=20 [1,2,3]; r3 t=30 [4]  (prefix-chained keys)
    keys = np.array([1, 2, 1, 2, 3, 1, 2, 3, 4], dtype=np.uint64)
    return Trace(timestamp_s=np.array([0.0, 10.0, 20.0, 30.0]), input_tokens=np.array([1024, 1536, 1536, 512]),
                 output_tokens=np.array([10, 10, 10, 10]), offsets=np.array([0, 2, 5, 8, 9]), keys=keys,
                 block_tokens=512, fmt="mooncake", path="hand")


def brute_profile(trace, ttl_s, warmup):
    """Exact stack-distance profile of the trace's touch order with idle-time retention (brute force)."""
    order = trace.touch_order()
    keys = trace.keys[order].tolist()
    times = np.repeat(trace.timestamp_s, trace.blocks_per_request).tolist()
    last, stream = {}, []
    for k, t in zip(keys, times):
        # an expired key is gone: give it a fresh identity so it misses (and stays a miss at every capacity)
        if k in last and ttl_s is not None and t - last[k][0] > ttl_s:
            last[k] = (t, (k, t))
        elif k not in last:
            last[k] = (t, (k, 0.0))
        else:
            last[k] = (t, last[k][1])
        stream.append(last[k][1])
    return stack_profile(stream)


@pytest.fixture(scope="module")
def prices():
    return load_prices("2025-h2")


def plan(prices, **kw):
    opts = PlanOptions(**{"targets": (0.95,), "waf": 1.5, "sweep": (), **kw})
    return build_plan(hand_trace(), block_bytes=1_000_000, prices=prices, tokens_per_s=10_000.0, options=opts,
                      profile_fn=brute_profile)


def test_hand_trace_writes_dwpd_and_capacity(prices):
    out = plan(prices)
    # 9 references, 5 prefix hits with an unbounded cache, all at stack distance 3
    assert out["references"] == 9 and out["infinite_hit_ratio"] == pytest.approx(5 / 9)
    assert out["capacity_bytes"]["l3"]["0.95"] == 3 * 1_000_000
    t = out["per_target"]["0.95"]
    assert t["hit_ratio"] == pytest.approx(5 / 9)
    # write-through: 4 blocks produced in a 30 s window -> 4 MB * 2880 windows/day
    assert out["l3_write_bytes_per_day"] == pytest.approx(4e6 * 2880)
    assert out["dwpd"] == pytest.approx(4 * 2880 / 3)
    assert out["waf"] == 1.5 and out["nand_bytes_per_day"] == pytest.approx(1.5 * 4e6 * 2880)
    # lifetime on the chosen class: TBW = dwpd_rated * 3 MB * 365 * 5 over 4 MB * 2880 * 365 per year
    cls = prices.ssd[t["ssd_class"]]
    assert t["lifetime_years"] == pytest.approx(cls.dwpd * 3e6 * 365 * 5 / (4e6 * 2880 * 365))
    assert out["lifetime_years"] == t["lifetime_years"]
    # GPU: 4608 prompt tokens per window, 5 hit blocks of 512 tokens saved
    plans = {p["name"]: p for p in out["plans"]["0.95"]}
    assert plans["recompute"]["gpu_hours_per_day"] == pytest.approx(4608 * 2880 / 10_000 / 3600)
    assert plans["recompute"]["usd_per_day"]["gpu"] == pytest.approx(4608 * 2880 / 10_000 / 3600 * 3.0)
    assert plans["dram-only"]["usd_per_day"]["gpu"] == pytest.approx((4608 - 2560) * 2880 / 10_000 / 3600 * 3.0)
    assert plans["dram-only"]["usd_per_day"]["dram"] == pytest.approx(3e6 / 1e9 * 5.0 / (5 * 365))


def test_rate_scaling_models(prices):
    base = plan(prices)
    fast = plan(prices, rate=4 / 3)          # 10x the trace's 4 requests / 30 s
    assert fast["rate_scale"] == pytest.approx(10)
    # compress: same capacity, 10x the writes -> 10x DWPD
    assert fast["capacity_bytes"]["l3"]["0.95"] == base["capacity_bytes"]["l3"]["0.95"]
    assert fast["dwpd"] == pytest.approx(10 * base["dwpd"])
    rep = plan(prices, rate=4 / 3, rate_model="replicate")
    # replicate: 10x the users -> 10x capacity and writes, same DWPD
    assert rep["capacity_bytes"]["l3"]["0.95"] == pytest.approx(10 * base["capacity_bytes"]["l3"]["0.95"])
    assert rep["dwpd"] == pytest.approx(base["dwpd"])


def test_retention_moves_capacity_and_writes(prices):
    # requests 10 s apart: a 5 s retention expires every block (no hits, target unreachable) ...
    short = plan(prices, retention_s=5.0)
    assert short["infinite_hit_ratio"] == 0.0 and short["capacity_bytes"]["l3"]["0.95"] is None
    assert short["per_target"]["0.95"]["reachable"] is False
    # ... 15 s keeps them all; at 10x the rate a 5 s wall-clock retention is 50 s of trace time
    assert plan(prices, retention_s=15.0)["dwpd"] == pytest.approx(plan(prices)["dwpd"])
    assert plan(prices, retention_s=5.0, rate=4 / 3)["infinite_hit_ratio"] == pytest.approx(5 / 9)
    # the sweep reports each retention's capacity and DWPD
    out = plan(prices, sweep=(5.0, 15.0, None))
    rows = {r["retention_s"]: r for r in out["retention_sweep"]}
    assert "dwpd" not in rows[5.0] and rows[15.0]["dwpd"] == pytest.approx(out["dwpd"])


def test_measured_run_bytes_replace_simulation(prices):
    summary = {"kind": "replay-kv", "requests": 4, "tiers": {"l3": {"write_bytes": 6_000_000}}}
    opts = PlanOptions(targets=(0.95,), waf=1.0, sweep=())
    out = build_plan(hand_trace(), block_bytes=1_000_000, prices=prices, tokens_per_s=1e4, options=opts,
                     summary=summary, run_l3_capacity=8e6, profile_fn=brute_profile)
    assert out["l3_write_bytes_per_day"] == pytest.approx(6e6 * 2880)
    assert out["dwpd"] == pytest.approx(6e6 * 2880 / 8e6)
    with pytest.raises(SpecError, match="write_bytes"):
        build_plan(hand_trace(), block_bytes=1_000_000, prices=prices, tokens_per_s=1e4, options=opts,
                   summary={"tiers": {}}, profile_fn=brute_profile)


def test_prices_preset_overrides_and_costs(prices):
    assert prices.status == "assumption" and prices.date and all(prices.sources.values())
    assert {"tlc-1dwpd", "tlc-3dwpd", "qlc"} <= set(prices.ssd)
    p = apply_overrides(prices, ["dram=8", "gpu=2", "ssd.qlc=0.05", "ssd.qlc.dwpd=0.3"])
    assert (p.dram_usd_per_gb, p.gpu_usd_per_hour, p.ssd["qlc"].usd_per_gb, p.ssd["qlc"].dwpd) == (8, 2, 0.05, 0.3)
    with pytest.raises(SpecError):
        apply_overrides(prices, ["dram=-1"])
    with pytest.raises(SpecError):
        apply_overrides(prices, ["ssd.nope=1"])
    # 1 TB of a $0.10/GB drive costs $100: $20/year over a 5-year warranty, $50/year if worn out in 2 years
    cls = prices.ssd["tlc-1dwpd"]
    assert ssd_usd_per_day(1e12, cls, None) * 365 == pytest.approx(20.0)
    assert ssd_usd_per_day(1e12, cls, 2.0) == pytest.approx(100.0 / (2 * 365))
    assert gpu_usd_per_day(3.6e7, 10_000, prices) == pytest.approx(3.0)


def test_bad_price_file_names_the_field(tmp_path):
    f = tmp_path / "p.toml"
    f.write_text('[dram]\nusd_per_gb = "cheap"\n[ssd.a]\nusd_per_gb = 0.1\ndwpd = 1\n[gpu]\nusd_per_hour = 2\n')
    with pytest.raises(SpecError, match=r"p.toml: \[dram\]: field 'usd_per_gb'"):
        load_prices(str(f))


def test_layout_waf_log_is_one_and_slots_amplify():
    log, _ = layout_waf("log", 1 << 20, erase_block_bytes=16 << 20, min_blocks=128, max_pages=1 << 18)
    slot, params = layout_waf("slot", 1 << 20, erase_block_bytes=16 << 20, min_blocks=128, max_pages=1 << 18)
    assert log == pytest.approx(1.0)
    assert slot > 2.0 and params["layout"] == "slot"
    # slots as large as the erase unit invalidate whole blocks: no copying
    big, _ = layout_waf("slot", 16 << 20, erase_block_bytes=16 << 20, min_blocks=128, max_pages=1 << 18)
    assert big == pytest.approx(1.0, abs=0.01)


def test_plan_cli_json(cli):
    r = cli("plan", "--trace", "mooncake-sample", "--model", "llama-3.1-8b", "--target-hit", "0.95",
            "--retention", "1h", "--rate", "50", "--recompute-tokens-per-s", "39000", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    for key in ("capacity_bytes", "dwpd", "waf", "lifetime_years"):
        assert key in out
    assert out["capacity_bytes"]["l3"]["0.95"] > 0 and out["capacity_bytes"]["l2"]["0.95"] > 0
    assert out["dwpd"] > 0 and out["waf"] >= 1.0 and out["lifetime_years"] > 0
    assert out["rate"] == 50
    # the headline WAF: the FTL model fed the simulated store's own L3 writes and trims
    assert "this policy's L3 writes" in out["waf_source"]
    assert set(out["write_policies"]) == {"through", "back"} and set(out["layouts"]) == {"slot", "log"}
    assert out["layouts"]["log"]["waf"] == pytest.approx(1.0) and out["layouts"]["slot"]["waf"] > 1.0


def test_plan_cli_bad_input(cli):
    r = cli("plan", "--trace", "mooncake-sample", "--model", "no-such-model")
    assert r.exit_code == 2 and "unknown models preset" in r.output
    r = cli("plan", "--trace", "mooncake-sample", "--model", "llama-3.1-8b", "--target-hit", "1.5")
    assert r.exit_code == 2


def test_plan_cli_with_run_folder(cli, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "summary.json").write_text(json.dumps({"kind": "replay-kv", "status": "complete", "requests": 1000,
                                                  "tiers": {"l3": {"write_bytes": 64 << 30,
                                                                   "capacity_bytes": 256 << 30}}}))
    # the run's L3 writes: a log-structured store appending 64 MiB segments round-robin
    seg = 64 << 20
    lines = [f"{i} /store write {(i % 4096) * seg} {seg}\n" for i in range(3 * 4096)]
    (run / "l3.iolog").write_text("fio version 3 iolog\n0 /store add\n" + "".join(lines))
    r = cli("plan", "--trace", "mooncake-sample", "--model", "llama-3.1-8b", "--target-hit", "0.9",
            "--run", run, "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["waf"] == pytest.approx(1.0) and "run's I/O" in out["waf_source"]
    span = out["span_s"]                       # the run replayed all 1000 requests
    assert out["l3_write_bytes_per_day"] == pytest.approx((64 << 30) / span * 86400, rel=0.01)
    assert out["dwpd"] == pytest.approx(out["l3_write_bytes_per_day"] / (256 << 30))


def test_write_policies_from_the_tier_simulation(prices):
    out = plan(prices, dram_bytes=1_000_000)       # L2 holds one block, L3 the three-block working set
    wp = out["write_policies"]
    # write-through: each of the 4 produced blocks is written to L3 once, as the curve-based estimate says
    assert wp["through"]["l3_write_blocks"] == 4 == wp["through"]["produced_blocks"]
    assert wp["through"]["l3_write_bytes_per_day"] == pytest.approx(out["l3_write_bytes_per_day"], rel=0.01)
    # write-back writes a block to L3 only when L2 evicts it: fewer writes, never more
    assert 0 < wp["back"]["l3_write_blocks"] < wp["through"]["l3_write_blocks"]
    assert wp["back"]["dwpd"] < wp["through"]["dwpd"]
